//! A connected share: open files, and the path operations (list, stat, remove, rename,
//! mkdir, rmdir) that run as one compound each (CREATE + operation + CLOSE).

use std::sync::Arc;

use smbx_wire::tree::TreeConnectResponse;
use smbx_wire::{AccessMask, Command, NtStatus};

use crate::channels::Pinned;
use crate::client::Session;
use crate::conn::{Request, Response};
use crate::credits::charge_for;
use crate::durable::Handle;
use crate::error::{Error, ProtocolError, Result};
use crate::file::{
    access, close_body, create_options, disposition, query_info_body, set_info_body, share, File,
    FileId, OpenOptions, INFO_BUFFER,
};
use crate::info::{DirEntry, FileInfo};
use smbx_wire::create::{CreateRequestBuilder, CreateResponse};
use smbx_wire::fscc::dir::{decode_id_both_entries, FILE_ID_BOTH_DIRECTORY_INFORMATION};
use smbx_wire::fscc::file::{decode_all, FILE_ALL_INFORMATION};
use smbx_wire::query_directory::{
    decode_output_response, QueryDirectoryRequest, SMB2_RESTART_SCANS,
};
use smbx_wire::query_info::SMB2_0_INFO_FILE;
use smbx_wire::rw::{ReadRequest, ReadResponse};
use smbx_wire::set_info::{FileRenameInfo, FILE_DISPOSITION_INFORMATION, FILE_RENAME_INFORMATION};
use smbx_wire::simple::encode_simple;

/// Output buffer size of one QUERY_DIRECTORY.
const DIR_BUFFER: u32 = 65536;

/// What a re-establishment ([`crate::durable`]) replaces: the session, the
/// TreeId, and how the reclaimed opens' FileIds changed.
pub(crate) struct TreeState {
    pub session: Session,
    pub id: u32,
    pub encrypt: bool,
    pub response: TreeConnectResponse,
    /// (old FileId, reclaimed FileId), oldest first.
    pub remaps: Vec<(FileId, FileId)>,
    /// The durable opens whose reclaim was refused.
    pub lost: Vec<crate::durable::LostOpen>,
}

pub(crate) struct TreeInner {
    /// The share name as given to [`Session::tree`].
    pub share: String,
    pub state: std::sync::RwLock<TreeState>,
    /// Open files whose handles a re-establishment reclaims.
    pub opens: std::sync::Mutex<Vec<std::sync::Weak<Handle>>>,
    /// The lease key of each path opened durably (one per file: the client's
    /// own opens share the lease and never break each other).
    pub lease_keys: std::sync::Mutex<std::collections::HashMap<String, [u8; 16]>>,
    /// Held while the tree is re-established.
    pub reestablishing: tokio::sync::Mutex<()>,
}

/// A connected share. Cheap to clone.
#[derive(Clone)]
pub struct Tree {
    pub(crate) inner: Arc<TreeInner>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state();
        f.debug_struct("Tree")
            .field("id", &st.id)
            .field("encrypt", &st.encrypt)
            .finish_non_exhaustive()
    }
}

/// Converts a `/`- or `\`-separated path to the share-relative form SMB uses.
pub fn smb_path(path: &str) -> String {
    path.split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("\\")
}

fn first_error(resps: Vec<Response>) -> Result<Vec<Response>> {
    for r in &resps {
        if r.header.status.is_error() {
            return Err(Error::Status {
                status: r.header.status,
                command: r.header.command,
            });
        }
    }
    Ok(resps)
}

impl Tree {
    pub(crate) fn new(
        session: Session,
        share: &str,
        id: u32,
        encrypt: bool,
        response: TreeConnectResponse,
    ) -> Tree {
        Tree {
            inner: Arc::new(TreeInner {
                share: share.to_string(),
                state: std::sync::RwLock::new(TreeState {
                    session,
                    id,
                    encrypt,
                    response,
                    remaps: Vec::new(),
                    lost: Vec::new(),
                }),
                opens: Default::default(),
                lease_keys: Default::default(),
                reestablishing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    pub(crate) fn state(&self) -> std::sync::RwLockReadGuard<'_, TreeState> {
        self.inner.state.read().expect("tree state lock")
    }

    /// The TreeId (a new one once the tree was re-established).
    pub fn id(&self) -> u32 {
        self.state().id
    }
    /// The session (a new one once the tree was re-established).
    pub fn session(&self) -> Session {
        self.state().session.clone()
    }
    /// True if this share's traffic is sealed.
    pub fn is_encrypted(&self) -> bool {
        let st = self.state();
        st.encrypt || st.session.is_encrypted()
    }
    /// ShareFlags from TREE_CONNECT.
    pub fn share_flags(&self) -> u32 {
        self.state().response.share_flags
    }
    /// MaximalAccess from TREE_CONNECT.
    pub fn maximal_access(&self) -> AccessMask {
        self.state().response.maximal_access
    }

    /// Largest READ: what every channel of the session carries — its
    /// negotiated MaxReadSize and, over SMB Direct, one transfer (by RDMA, or
    /// one reassembled message inline) — so a piece fits whichever channel it
    /// goes, or is replayed, on.
    pub(crate) fn max_read(&self) -> u32 {
        self.max_io(true)
    }
    /// Largest WRITE (as [`Tree::max_read`]).
    pub(crate) fn max_write(&self) -> u32 {
        self.max_io(false)
    }
    fn max_io(&self, read: bool) -> u32 {
        let session = self.session();
        let channels = session.channels();
        // Whether RDMA is allowed only matters on SMB Direct channels.
        channels.max_io(read, channels.any_direct() && self.rdma_allowed())
    }

    /// True if this tree's READs and WRITEs may move their data by RDMA (SMB
    /// 3.x; not on sealed trees: their payload must be encrypted, which RDMA
    /// transfers of plaintext would bypass; not on signed sessions when
    /// [`crate::ClientOptions::rdma_when_signed`] is off).
    fn rdma_allowed(&self) -> bool {
        let session = self.session();
        (session.inner.client.inner.options.rdma_when_signed || !session.is_signed())
            && !self.is_encrypted()
            && self.dialect() >= smbx_wire::Dialect::SMB3_0
    }

    /// The channel to move `len` bytes of a READ (`read`) or WRITE by RDMA on:
    /// the live channel with the most room, whichever transport the logon used,
    /// when it is SMB Direct, RDMA is allowed on this tree, the transfer fits
    /// the link's MaxReadWriteSize, and the I/O is larger than the threshold or
    /// would not fit one SMB Direct message inline.
    pub(crate) fn rdma_for(&self, len: usize, read: bool) -> Option<Pinned> {
        // A session that never had an SMB Direct channel (every READ and WRITE
        // over TCP) is told at once, without picking a channel.
        if !self.session().channels().any_direct() || !self.rdma_allowed() {
            return None;
        }
        let pinned = self.session().channels().pick_direct(len as u64)?;
        let p = pinned.direct.params();
        if len > p.max_read_write_size as usize {
            return None;
        }
        let inline = crate::channels::inline_limit(&p, read) as usize;
        let threshold = self.session().inner.client.inner.options.rdma_threshold;
        let threshold = threshold.unwrap_or_else(|| pinned.direct.rdma_threshold(read));
        (len > threshold || len > inline).then_some(pinned)
    }

    /// The connection's pool of RDMA transfer buffers.
    pub(crate) fn pool(&self) -> Arc<smbx_transport::BufPool> {
        self.session().inner.client.inner.conn.pool().clone()
    }

    /// The negotiated dialect.
    pub(crate) fn dialect(&self) -> smbx_wire::Dialect {
        self.session().inner.client.inner.negotiated.dialect
    }
    pub(crate) fn large_mtu(&self) -> bool {
        self.session().inner.client.inner.conn.large_mtu()
    }

    /// True if this tree's opens are durable and survive the session
    /// ([`crate::durable`]): failover is possible (several channels allowed)
    /// or the options ask for it, at SMB 3.x.
    pub(crate) fn durable(&self) -> bool {
        let session = self.session();
        let o = &session.inner.client.inner.options;
        (o.durable_handles || o.max_channels > 1) && self.dialect() >= smbx_wire::Dialect::SMB3_0
    }

    /// Sends one request on this tree.
    pub(crate) async fn call(&self, req: Request) -> Result<Response> {
        let mut v = self.compound_on_channel(vec![req]).await?;
        v.pop().ok_or_else(|| ProtocolError::NoResponse.into())
    }

    /// Sends one request on the channel `on` (a READ or WRITE whose buffer is
    /// registered with its link): not replayed elsewhere; when that channel
    /// fails it is marked down and the caller registers again on another.
    pub(crate) async fn call_on(&self, req: Request, on: &Pinned) -> Result<Response> {
        let (session, encrypt) = {
            let st = self.state();
            (st.session.clone(), st.encrypt)
        };
        let mut v = crate::failover::send(&session, vec![req], encrypt, Some(on)).await?;
        v.pop().ok_or_else(|| ProtocolError::NoResponse.into())
    }

    /// Sends requests (one compound) on the session's channel with the most
    /// room, replayed on another channel if that one fails
    /// ([`crate::failover`]).
    async fn compound_on_channel(&self, mut reqs: Vec<Request>) -> Result<Vec<Response>> {
        let (mut session, encrypt) = {
            let st = self.state();
            // A request built before a re-establishment that ended since goes
            // out with the new ids, or not at all if its open was lost.
            if !st.remaps.is_empty() || !st.lost.is_empty() {
                for r in reqs.iter_mut() {
                    crate::durable::patch(r, &st.remaps, &st.lost, st.id)?;
                }
            }
            (st.session.clone(), st.encrypt)
        };
        if !self.durable() {
            return crate::failover::send(&session, reqs, encrypt, None).await;
        }
        // Handed back when the send fails, to send again on a re-established
        // session (see crate::durable); not copied before sending.
        let (mut res, mut kept) =
            crate::failover::send_keeping(&session, reqs, encrypt, None, true).await;
        for _ in 0..crate::durable::MAX_REESTABLISH {
            let e = match res {
                Err(e) if crate::durable::session_lost(&e) => e,
                r => return r,
            };
            // Boxed: the rare path's state is not carried by every request's future.
            if !Box::pin(self.reestablish(&session, &e)).await? {
                return Err(e);
            }
            let Some(mut again) = kept.take() else {
                return Err(e);
            };
            session = {
                let st = self.state();
                for r in again.iter_mut() {
                    crate::durable::patch(r, &st.remaps, &st.lost, st.id)?;
                }
                st.session.clone()
            };
            (res, kept) = crate::failover::send_keeping(&session, again, encrypt, None, true).await;
        }
        res
    }

    /// Sends one request whose body (after the SMB2 header) the caller built,
    /// charged one credit, signed or sealed as the tree's other requests: for
    /// tests and tools that need messages the typed API never builds (fault
    /// injection). The response is returned whatever its status.
    pub async fn call_raw(&self, command: Command, body: Vec<u8>) -> Result<Response> {
        self.call(Request::new(command, body, self.id())).await
    }

    /// Sends a compound on this tree; members after the first are related.
    pub(crate) async fn compound(&self, mut reqs: Vec<Request>) -> Result<Vec<Response>> {
        for r in reqs.iter_mut().skip(1) {
            r.related = true;
        }
        self.compound_on_channel(reqs).await
    }

    fn create_req(&self, req: CreateRequestBuilder) -> Request {
        Request::new(Command::Create, req.encode(), self.id())
    }

    fn close_req(&self) -> Request {
        Request::new(Command::Close, close_body(FileId::RELATED, 0), self.id())
    }

    /// Opens (or creates) a file or directory. On a tree whose opens are
    /// durable ([`crate::durable`]) a file is opened with a durable v2 handle
    /// and a read+handle lease when the server grants them.
    pub async fn open(&self, path: &str, opts: &OpenOptions) -> Result<File> {
        let name = smb_path(path);
        let mut create = opts.to_request(name.clone());
        let mut asked = None;
        if self.durable()
            && !create
                .create_options
                .contains(create_options::DIRECTORY_FILE)
        {
            let key = *self
                .inner
                .lease_keys
                .lock()
                .expect("lease keys lock")
                .entry(name.to_lowercase())
                .or_insert_with(rand::random);
            let guid: [u8; 16] = rand::random();
            let (contexts, lease) = crate::durable::request_contexts(self.dialect(), key, guid);
            let plain = create.clone();
            create.contexts = contexts;
            create.oplock_level = smbx_wire::oplock::OplockLevel::LEASE;
            asked = Some(crate::durable::Durable {
                create_guid: guid,
                lease,
                request: plain,
            });
        }
        let resp = self.call(self.create_req(create)).await?.ok()?;
        let cr = CreateResponse::decode(&resp.msg)?;
        let durable = asked.filter(|_| crate::durable::granted(&cr.contexts));
        let handle = Arc::new(Handle::new(cr.file_id, durable));
        if let Some(d) = &handle.durable {
            // Its lease's breaks are acknowledged by the client ([`crate::breaks`]).
            self.session()
                .client()
                .sink()
                .register(d.lease.lease_key, self);
            let mut opens = self.inner.opens.lock().expect("opens lock");
            opens.retain(|w| w.strong_count() > 0);
            opens.push(Arc::downgrade(&handle));
        }
        Ok(File::new(
            self.clone(),
            handle,
            FileInfo::from_create(&cr),
            cr.create_action,
        ))
    }

    /// Creates or truncates `path` and writes `data` to it.
    pub async fn write_file(&self, path: &str, data: &[u8]) -> Result<()> {
        let f = self.open(path, &OpenOptions::create_truncate()).await?;
        let r = f.write_at(0, data).await;
        let c = f.close().await;
        r?;
        c?;
        Ok(())
    }

    /// Reads the whole of `path`.
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        let f = self.open(path, &OpenOptions::read_only()).await?;
        let size = f.size_at_open() as usize;
        let r = f.read_at(0, size).await;
        let c = f.close().await;
        let data = r?;
        c?;
        Ok(data)
    }

    /// Reads up to `max_len` bytes from the start of `path` in one round trip: a related
    /// compound of CREATE, READ and CLOSE. `max_len` is capped at the server's MaxReadSize.
    pub async fn read_small(&self, path: &str, max_len: usize) -> Result<Vec<u8>> {
        let len = max_len.min(self.max_read() as usize);
        let open = OpenOptions::read_only().to_request(smb_path(path));
        let read_body = ReadRequest {
            padding: 0x50,
            length: len as u32,
            file_id: FileId::RELATED,
            ..Default::default()
        }
        .encode();
        let mut read = Request::new(Command::Read, read_body, self.id());
        read.charge = charge_for(len, self.large_mtu());
        let read = self.on_path(open, Some(read)).await?.swap_remove(1);
        if read.status() == NtStatus::END_OF_FILE {
            return Ok(Vec::new());
        }
        let read = read.ok()?;
        let data = ReadResponse::decode(&read.msg)?.data;
        if data.len() > len {
            return Err(ProtocolError::ReadTooLong {
                asked: len,
                got: data.len(),
            }
            .into());
        }
        Ok(data.to_vec())
    }

    /// Lists a directory (FileIdBothDirectoryInformation), without `.` and `..`.
    pub async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        self.list_matching(dir, "*").await
    }

    /// Lists the entries of `dir` matching a wildcard pattern.
    pub async fn list_matching(&self, dir: &str, pattern: &str) -> Result<Vec<DirEntry>> {
        let opts = OpenOptions::new()
            .access(access::READ_DATA)
            .directory(true)
            .share(share::ALL);
        let d = self.open(dir, &opts).await?;
        let r = self.list_handle(d.id(), pattern).await;
        let c = d.close().await;
        let out = r?;
        c?;
        Ok(out)
    }

    async fn list_handle(&self, id: FileId, pattern: &str) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut flags = SMB2_RESTART_SCANS;
        loop {
            let body = QueryDirectoryRequest {
                info_class: FILE_ID_BOTH_DIRECTORY_INFORMATION,
                flags,
                file_index: 0,
                file_id: id,
                pattern: pattern.to_string(),
                output_buffer_length: DIR_BUFFER,
            }
            .encode();
            let mut req = Request::new(Command::QueryDirectory, body, self.id());
            req.charge = charge_for(DIR_BUFFER as usize, self.large_mtu());
            flags = 0;
            let resp = self.call(req).await?;
            if resp.status() == NtStatus::NO_MORE_FILES {
                return Ok(out);
            }
            let resp = resp.ok()?;
            let buf = decode_output_response(&resp.msg)?;
            if buf.is_empty() {
                return Ok(out);
            }
            for e in decode_id_both_entries(buf)? {
                if e.name != "." && e.name != ".." {
                    out.push(DirEntry::from_wire(e));
                }
            }
        }
    }

    pub(crate) fn decode_all_info(resp: Response) -> Result<FileInfo> {
        // A long name may not fit: BUFFER_OVERFLOW (a warning) still carries the fixed part.
        let resp = resp.ok()?;
        let buf = decode_output_response(&resp.msg)?;
        Ok(FileInfo::from_all(&decode_all(buf)?))
    }

    /// Metadata of `path`: one compound of CREATE, QUERY_INFO (FileAllInformation), CLOSE.
    pub async fn stat(&self, path: &str) -> Result<FileInfo> {
        let open = OpenOptions::new()
            .share(share::ALL)
            .to_request(smb_path(path));
        let query = Request::new(
            Command::QueryInfo,
            query_info_body(
                FileId::RELATED,
                SMB2_0_INFO_FILE,
                FILE_ALL_INFORMATION,
                INFO_BUFFER,
            ),
            self.id(),
        );
        Tree::decode_all_info(self.on_path(open, Some(query)).await?.swap_remove(1))
    }

    /// Deletes a file (CREATE with DELETE_ON_CLOSE, then CLOSE, as one compound).
    pub async fn remove(&self, path: &str) -> Result<()> {
        let mut open = OpenOptions::new()
            .share(share::ALL)
            .delete_on_close(true)
            .to_request(smb_path(path));
        open.create_options |= create_options::NON_DIRECTORY_FILE;
        self.path_op(open, None).await
    }

    /// Creates a directory.
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let open = OpenOptions::new()
            .directory(true)
            .share(share::ALL)
            .disposition(disposition::CREATE)
            .to_request(smb_path(path));
        self.path_op(open, None).await
    }

    /// Removes an empty directory (FileDispositionInformation: DeletePending, as one
    /// compound of CREATE, SET_INFO, CLOSE).
    pub async fn rmdir(&self, path: &str) -> Result<()> {
        let open = OpenOptions::new()
            .directory(true)
            .share(share::ALL)
            .access(access::DELETE)
            .to_request(smb_path(path));
        let set = Request::new(
            Command::SetInfo,
            set_info_body(
                FileId::RELATED,
                SMB2_0_INFO_FILE,
                FILE_DISPOSITION_INFORMATION,
                &[1],
            ),
            self.id(),
        );
        self.path_op(open, Some(set)).await
    }

    /// Renames (moves) `from` to `to` within the share; fails if `to` exists unless
    /// `replace` is set.
    pub async fn rename_with(&self, from: &str, to: &str, replace: bool) -> Result<()> {
        let open = OpenOptions::new()
            .share(share::ALL)
            .access(access::DELETE)
            .to_request(smb_path(from));
        let set = Request::new(
            Command::SetInfo,
            set_info_body(
                FileId::RELATED,
                SMB2_0_INFO_FILE,
                FILE_RENAME_INFORMATION,
                &FileRenameInfo {
                    replace_if_exists: replace,
                    root_directory: 0,
                    file_name: smb_path(to),
                }
                .encode(),
            ),
            self.id(),
        );
        self.path_op(open, Some(set)).await
    }

    /// Opens `open`, sends `then` on what it opened, and closes it, as one compound
    /// (a path operation); fails with the first member's error.
    async fn path_op(&self, open: CreateRequestBuilder, then: Option<Request>) -> Result<()> {
        first_error(self.on_path(open, then).await?)?;
        Ok(())
    }

    /// Sends CREATE `open`, `then` on what it opened, and CLOSE as one compound: the
    /// responses of every member (statuses unchecked), once the server answered each
    /// and the CREATE succeeded.
    async fn on_path(
        &self,
        open: CreateRequestBuilder,
        then: Option<Request>,
    ) -> Result<Vec<Response>> {
        let mut reqs = vec![self.create_req(open)];
        reqs.extend(then);
        reqs.push(self.close_req());
        let sent = reqs.len();
        let v = self.compound(reqs).await?;
        if let Some(create) = v.first() {
            if create.header.status.is_error() {
                return Err(Error::Status {
                    status: create.header.status,
                    command: create.header.command,
                });
            }
        }
        if v.len() != sent {
            return Err(ProtocolError::CompoundCount { sent, got: v.len() }.into());
        }
        Ok(v)
    }

    /// Renames `from` to `to`, failing if `to` exists.
    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.rename_with(from, to, false).await
    }

    /// TREE_DISCONNECT.
    pub async fn disconnect(&self) -> Result<()> {
        let req = Request::new(Command::TreeDisconnect, encode_simple(), self.id());
        self.call(req).await?.ok()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(smb_path("/a/b/c.txt"), "a\\b\\c.txt");
        assert_eq!(smb_path("a\\b/"), "a\\b");
        assert_eq!(smb_path("/"), "");
        assert_eq!(smb_path("./x"), "x");
    }
}
