//! Durable opens and their reclaim ([MS-SMB2] 3.2.4.3.5, 3.2.4.4, 3.2.5.3.x):
//! when failover is possible (more than one channel, or
//! [`ClientOptions::durable_handles`](crate::ClientOptions::durable_handles)),
//! a file open asks for a durable v2 handle (`DH2Q` with a CreateGuid) and a
//! read+handle caching lease (`RqLs`, one lease key per path and tree, so the
//! client's own opens of a file never break each other). When the server no
//! longer knows the session (its last channel died, or it says
//! USER_SESSION_DELETED / NETWORK_NAME_DELETED), the tree is re-established
//! ([`crate::Tree`]'s `reestablish`): a new connection, SESSION_SETUP with
//! PreviousSessionId, TREE_CONNECT, and each durable open reclaimed with `DH2C`
//! (same CreateGuid, same lease key); [`File`](crate::File) handles read their
//! FileId through one [`Handle`], and requests that were in flight are sent
//! again with the new TreeId and FileIds patched in ([`patch`]).
//!
//! A server may refuse a reclaim (the open timed out, another opener closed it,
//! or, in Samba, the file's stat changed after the disconnect: its
//! `vfs_default_durable_reconnect` compares the size and times it recorded when
//! the connection dropped with the file's now, and a WRITE of the lost
//! connection still running in its thread pool then makes them differ). The
//! open is then lost ([MS-SMB2] 3.2.4.4: the re-establishment fails): its
//! [`Handle`] is marked so, and every request naming it — a new one, or one in
//! flight when the session went — fails with [`Error::DurableOpenLost`] without
//! being sent: its stale FileId never reaches the new session.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use smbx_wire::create::{ctx, encode_contexts, parse_contexts, CreateRequestBuilder};
use smbx_wire::durable::{DurableV2Reconnect, DurableV2Request};
use smbx_wire::oplock::{encode_lease_response, LeaseContext, LeaseFlags, LeaseState};
use smbx_wire::{Command, FileId, NtStatus};

use smbx_wire::create::CreateResponse;

use crate::client::Session;
use crate::conn::{Request, HEADROOM};
use crate::error::{Error, InvalidArgument, ProtocolError, Result};
use crate::tree::Tree;

/// The durable handle timeout asked for (ms): how long the server keeps an
/// open whose session is gone.
pub(crate) const DURABLE_TIMEOUT_MS: u32 = 60_000;

/// What reclaiming a durable open needs: the CREATE as first sent, its
/// CreateGuid and the lease it holds.
#[derive(Debug, Clone)]
pub(crate) struct Durable {
    /// The CreateGuid of `DH2Q`.
    pub create_guid: [u8; 16],
    /// The lease asked for (its key names it again on reclaim).
    pub lease: LeaseContext,
    /// The CREATE as first sent, without its contexts.
    pub request: CreateRequestBuilder,
}

/// An open's FileId, which a reclaim may change, and what reclaiming it needs.
#[derive(Debug)]
pub(crate) struct Handle {
    id: Mutex<FileId>,
    /// Set when a re-establishment could not reclaim the open.
    lost: OnceLock<LostOpen>,
    /// Set when the server granted a durable handle.
    pub durable: Option<Durable>,
}

impl Handle {
    /// A handle for `id`.
    pub fn new(id: FileId, durable: Option<Durable>) -> Handle {
        Handle {
            id: Mutex::new(id),
            lost: OnceLock::new(),
            durable,
        }
    }
    /// The FileId now (the last one the server gave, even for a lost open).
    pub fn id(&self) -> FileId {
        *self.id.lock().expect("handle lock")
    }
    /// The FileId to send a request with: [`Error::DurableOpenLost`] once the
    /// open could not be reclaimed.
    pub fn live_id(&self) -> Result<FileId> {
        match self.lost_error() {
            Some(e) => Err(e),
            None => Ok(self.id()),
        }
    }
    /// The FileId the reclaimed open has.
    pub fn set_id(&self, id: FileId) {
        *self.id.lock().expect("handle lock") = id;
    }
    /// The error of a request on this open once its reclaim was refused.
    pub fn lost_error(&self) -> Option<Error> {
        self.lost.get().map(LostOpen::error)
    }
}

/// A durable open whose reclaim was refused: requests still naming its last
/// FileId fail instead of being sent ([`patch`]).
#[derive(Debug, Clone)]
pub(crate) struct LostOpen {
    /// The FileId the open had on the lost session.
    pub id: FileId,
    /// Its path on the share.
    pub name: String,
    /// The server's answer to the reclaim.
    pub status: NtStatus,
}

impl LostOpen {
    fn error(&self) -> Error {
        Error::DurableOpenLost {
            name: self.name.clone(),
            status: self.status,
        }
    }
}

/// The create contexts of a durable open: `DH2Q` with `create_guid` and a
/// read+handle lease (v2 from SMB 3.0, v1 at 2.1) keyed `lease_key`.
pub(crate) fn request_contexts(
    dialect: smbx_wire::Dialect,
    lease_key: [u8; 16],
    create_guid: [u8; 16],
) -> (Vec<u8>, LeaseContext) {
    let lease = LeaseContext {
        version: if dialect >= smbx_wire::Dialect::SMB3_0 {
            2
        } else {
            1
        },
        lease_key,
        lease_state: LeaseState::RH,
        lease_flags: LeaseFlags::empty(),
        ..Default::default()
    };
    let dh2q = DurableV2Request {
        timeout_ms: DURABLE_TIMEOUT_MS,
        flags: 0,
        create_guid,
    }
    .encode();
    // The lease context's request and response data have one layout.
    let rqls = encode_lease_response(&lease);
    (
        encode_contexts(&[(ctx::DH2Q, &dh2q), (ctx::RQLS, &rqls)]),
        lease,
    )
}

/// The CREATE that reclaims `d`, last known as `old`: the original request
/// with `DH2C` and the same lease.
pub(crate) fn reclaim_request(d: &Durable, old: FileId) -> CreateRequestBuilder {
    let dh2c = DurableV2Reconnect {
        file_id: old,
        create_guid: d.create_guid,
        flags: 0,
    }
    .encode();
    let rqls = encode_lease_response(&d.lease);
    let mut req = d.request.clone();
    // The open exists: nothing to create or overwrite.
    req.create_disposition = smbx_wire::CreateDisposition::Open.as_u32();
    req.oplock_level = smbx_wire::oplock::OplockLevel::LEASE;
    req.contexts = encode_contexts(&[(ctx::DH2C, &dh2c), (ctx::RQLS, &rqls)]);
    req
}

/// Most times one request's tree is re-established before its error is the
/// caller's.
pub(crate) const MAX_REESTABLISH: u32 = 3;
/// How long a re-establishment keeps trying to reach the server.
const REESTABLISH_WAIT: Duration = Duration::from_secs(60);
/// First wait between two tries.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// How long the ECHO that tells a slow session from a lost one may take.
const PROBE_WAIT: Duration = Duration::from_secs(5);

impl Tree {
    /// Re-establishes this tree after `failed` (its session) was lost with
    /// `why`: unless another request already did (the tree's session is no
    /// longer `failed`), or the session still answers an ECHO (a timeout of a
    /// slow request: false, the error is the caller's). Tries for up to
    /// [`REESTABLISH_WAIT`] with backoff while the server cannot be reached.
    pub(crate) async fn reestablish(&self, failed: &Session, why: &Error) -> Result<bool> {
        let _one = self.inner.reestablishing.lock().await;
        if !Arc::ptr_eq(&self.session().inner, &failed.inner) {
            return Ok(true);
        }
        if matches!(why, Error::Timeout)
            && matches!(
                tokio::time::timeout(PROBE_WAIT, failed.echo()).await,
                Ok(Ok(()))
            )
        {
            return Ok(false);
        }
        tracing::warn!(
            "durable: session {:#x} lost ({why}); re-establishing it",
            failed.id()
        );
        let deadline = tokio::time::Instant::now() + REESTABLISH_WAIT;
        let mut delay = FIRST_BACKOFF;
        loop {
            match self.reestablish_once(failed).await {
                Ok(reclaimed) => {
                    tracing::info!(
                        "durable: session {:#x} re-established as {:#x}, {reclaimed} open(s) reclaimed",
                        failed.id(),
                        self.session().id()
                    );
                    return Ok(true);
                }
                Err(e) if session_lost(&e) && tokio::time::Instant::now() + delay < deadline => {
                    tracing::debug!("durable: server not back yet: {e}");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_BACKOFF);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One try: a new connection to the server `failed` was on, a logon with
    /// PreviousSessionId = `failed`'s, TREE_CONNECT to the same share, and
    /// each durable open reclaimed (DH2C). Returns how many were reclaimed.
    async fn reestablish_once(&self, failed: &Session) -> Result<usize> {
        let old = failed.client();
        let addr = old
            .inner
            .peer
            .get()
            .copied()
            .ok_or(InvalidArgument::NoServerAddress)?;
        let direct = old.inner.conn.direct().is_some();
        let host = old.inner.host.clone();
        let client = crate::dial::connect(addr, direct, &host, old.inner.options.clone()).await?;
        // Breaks on the new connection reach the queue the application holds,
        // and the leases of the reclaimed opens are still acknowledged.
        client.adopt_sink(old.sink());
        let session = client.relogin(&failed.inner.logon, failed.id()).await?;
        // The opens keep the ChannelSequence they saw ([MS-SMB2] 3.3.5.2.10).
        session
            .channels()
            .set_sequence(failed.channels().sequence());
        let fresh = session.tree(&self.inner.share).await?;
        let (id, encrypt, response) = {
            let st = fresh.state();
            (st.id, st.encrypt, st.response.clone())
        };
        // The server let the old session go: so do we.
        old.connection().close();
        let handles: Vec<Arc<Handle>> = self
            .inner
            .opens
            .lock()
            .expect("opens lock")
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut reclaimed = 0;
        for h in handles {
            let Some(d) = &h.durable else {
                continue;
            };
            if h.lost.get().is_some() {
                continue;
            }
            let was = h.id();
            let req = Request::new(Command::Create, reclaim_request(d, was).encode(), id);
            let mut v = crate::failover::send(&session, vec![req], encrypt, None).await?;
            let resp = v.pop().ok_or(ProtocolError::NoResponse)?;
            // Recorded at once: a later try starts from here.
            match resp.ok() {
                Ok(r) => {
                    let now = CreateResponse::decode(&r.msg)?.file_id;
                    h.set_id(now);
                    let mut st = self.inner.state.write().expect("tree state lock");
                    st.remaps.push((was, now));
                    reclaimed += 1;
                }
                Err(e) => {
                    // The server no longer has the open (or will not give it
                    // back): the handle is dead, and no request names it again.
                    tracing::warn!("durable: {} not reclaimed: {e}", d.request.name);
                    let status = e.status().unwrap_or(NtStatus::OBJECT_NAME_NOT_FOUND);
                    let lost = LostOpen {
                        id: was,
                        name: d.request.name.clone(),
                        status,
                    };
                    let mut st = self.inner.state.write().expect("tree state lock");
                    st.lost.push(lost.clone());
                    let _ = h.lost.set(lost);
                }
            }
        }
        let mut st = self.inner.state.write().expect("tree state lock");
        st.session = session;
        st.id = id;
        st.encrypt = encrypt;
        st.response = response;
        Ok(reclaimed)
    }
}

/// True if a CREATE response's contexts say a durable v2 handle was granted.
pub(crate) fn granted(contexts: &[u8]) -> bool {
    parse_contexts(contexts).is_ok_and(|l| l.iter().any(|c| c.name == ctx::DH2Q))
}

/// True for an error after which the session is gone on the server, or has no
/// channel left to reach it: re-establishing it may cure it.
pub(crate) fn session_lost(e: &Error) -> bool {
    match e {
        Error::Disconnected(_) | Error::Io(_) | Error::Timeout => true,
        _ => matches!(
            e.status(),
            Some(
                NtStatus::USER_SESSION_DELETED
                    | NtStatus::NETWORK_NAME_DELETED
                    | NtStatus::NETWORK_SESSION_EXPIRED
            )
        ),
    }
}

/// Where a request body carries the FileId it acts on ([MS-SMB2] 2.2.x: the
/// fixed part of each request), for the commands that name an open.
fn file_id_offset(command: Command) -> Option<usize> {
    Some(match command {
        // StructureSize, Padding/DataOffset, Flags/Length, Length, Offset.
        Command::Read | Command::Write => 16,
        // StructureSize, Flags/Reserved1, Reserved(2).
        Command::Close | Command::Flush | Command::Ioctl => 8,
        Command::Lock | Command::QueryDirectory | Command::ChangeNotify => 8,
        Command::OplockBreak => 8,
        // StructureSize .. AdditionalInformation, Flags.
        Command::QueryInfo => 24,
        // StructureSize .. AdditionalInformation.
        Command::SetInfo => 16,
        _ => return None,
    })
}

/// Rewrites a request for a re-established tree: its TreeId, and the FileId
/// it names if a reclaim changed it (`remaps`, oldest first: each maps a
/// FileId to its reclaimed successor). A request naming an open whose reclaim
/// was refused (`lost`) is not to be sent: [`Error::DurableOpenLost`].
pub(crate) fn patch(
    req: &mut Request,
    remaps: &[(FileId, FileId)],
    lost: &[LostOpen],
    tree_id: u32,
) -> Result<()> {
    if req.tree_id != 0 {
        req.tree_id = tree_id;
    }
    let Some(off) = file_id_offset(req.command) else {
        return Ok(());
    };
    let start = off + if req.headroom { HEADROOM } else { 0 };
    let Some(field) = req.body.get_mut(start..start + 16) else {
        return Ok(());
    };
    let mut id = match <[u8; 16]>::try_from(&*field) {
        Ok(b) => FileId::from_bytes(b),
        Err(_) => return Ok(()),
    };
    if id == FileId::RELATED {
        return Ok(());
    }
    for (old, new) in remaps {
        if id == *old {
            id = *new;
        }
    }
    if let Some(l) = lost.iter().find(|l| l.id == id) {
        return Err(l.error());
    }
    field.copy_from_slice(&id.to_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::close::CloseRequest;
    use smbx_wire::rw::{ReadRequest, WriteRequest};

    fn fid(p: u64, v: u64) -> FileId {
        FileId {
            persistent: p,
            volatile: v,
        }
    }

    #[test]
    fn patch_rewrites_the_file_id_each_command_carries() {
        let (a, b, c) = (fid(1, 2), fid(3, 4), fid(5, 6));
        let remaps = [(a, b), (b, c)];
        let read = ReadRequest {
            length: 10,
            offset: 99,
            file_id: a,
            ..Default::default()
        }
        .encode();
        let mut r = Request::new(Command::Read, read, 7);
        patch(&mut r, &remaps, &[], 9).unwrap();
        assert_eq!(r.tree_id, 9);
        let mut want = ReadRequest {
            length: 10,
            offset: 99,
            file_id: c,
            ..Default::default()
        }
        .encode();
        assert_eq!(r.body, want, "chained remaps followed to the newest id");
        let mut w = Request::new(
            Command::Write,
            WriteRequest {
                offset: 5,
                file_id: b,
                length: 3,
                data: b"abc",
                ..Default::default()
            }
            .encode(),
            7,
        );
        patch(&mut w, &remaps, &[], 9).unwrap();
        let wr = WriteRequest {
            offset: 5,
            file_id: c,
            length: 3,
            data: b"abc",
            ..Default::default()
        }
        .encode();
        assert_eq!(w.body, wr);
        let mut cl = Request::new(
            Command::Close,
            CloseRequest {
                flags: 0,
                file_id: a,
            }
            .encode(),
            7,
        );
        patch(&mut cl, &remaps, &[], 9).unwrap();
        assert_eq!(
            cl.body,
            CloseRequest {
                flags: 0,
                file_id: c
            }
            .encode()
        );
        // An id no reclaim changed, and a related one, stay.
        let other = fid(8, 8);
        want = CloseRequest {
            flags: 0,
            file_id: other,
        }
        .encode();
        let mut o = Request::new(Command::Close, want.clone(), 7);
        patch(&mut o, &remaps, &[], 9).unwrap();
        assert_eq!(o.body, want);
        let rel = CloseRequest {
            flags: 0,
            file_id: FileId::RELATED,
        }
        .encode();
        let mut o = Request::new(Command::Close, rel.clone(), 7);
        patch(&mut o, &[(FileId::RELATED, a)], &[], 9).unwrap();
        assert_eq!(o.body, rel);
        // A body too short to hold a FileId is left alone.
        let mut short = Request::new(Command::Read, vec![0; 20], 7);
        patch(&mut short, &remaps, &[], 9).unwrap();
        assert_eq!(short.body, vec![0; 20]);
    }

    #[test]
    fn requests_naming_a_lost_open_are_refused() {
        let (a, b, c) = (fid(1, 2), fid(3, 4), fid(5, 6));
        let lost = [LostOpen {
            id: b,
            name: "x.bin".into(),
            status: NtStatus::OBJECT_NAME_NOT_FOUND,
        }];
        let write = |id| {
            let body = WriteRequest {
                offset: 5,
                file_id: id,
                length: 3,
                data: b"abc",
                ..Default::default()
            }
            .encode();
            Request::new(Command::Write, body, 7)
        };
        // Named directly, or through a reclaim that changed it to the lost id.
        for (id, remaps) in [(b, vec![]), (a, vec![(a, b)])] {
            let mut w = write(id);
            let sent = w.body.clone();
            match patch(&mut w, &remaps, &lost, 9) {
                Err(Error::DurableOpenLost { name, status }) => {
                    assert_eq!(
                        (name.as_str(), status),
                        ("x.bin", NtStatus::OBJECT_NAME_NOT_FOUND)
                    )
                }
                r => panic!("{r:?}"),
            }
            assert_eq!(w.body, sent, "the refused request is left as it was");
        }
        // Another open goes on, with its remap.
        let mut w = write(c);
        patch(&mut w, &[(c, a)], &lost, 9).unwrap();
        assert_eq!(w.body, write(a).body);
        // The handle of a lost open fails its requests before building them.
        let h = Handle::new(
            b,
            Some(Durable {
                create_guid: [2; 16],
                lease: LeaseContext::default(),
                request: CreateRequestBuilder {
                    name: "x.bin".into(),
                    ..Default::default()
                },
            }),
        );
        assert_eq!(h.live_id().unwrap(), b);
        assert!(h.lost_error().is_none());
        h.lost.set(lost[0].clone()).unwrap();
        assert!(matches!(
            h.live_id(),
            Err(Error::DurableOpenLost { ref name, status: NtStatus::OBJECT_NAME_NOT_FOUND })
                if name == "x.bin"
        ));
        assert_eq!(h.id(), b, "the last FileId is still known");
    }

    #[test]
    fn durable_contexts_carry_guid_and_lease_key() {
        let (ctxs, lease) = request_contexts(smbx_wire::Dialect::SMB3_1_1, [1; 16], [2; 16]);
        let list = parse_contexts(&ctxs).unwrap();
        let dh2q = list.iter().find(|c| c.name == ctx::DH2Q).unwrap();
        assert_eq!(
            DurableV2Request::decode(dh2q.data).unwrap().create_guid,
            [2; 16]
        );
        let rqls = list.iter().find(|c| c.name == ctx::RQLS).unwrap();
        let l = smbx_wire::oplock::decode_lease_request(rqls.data).unwrap();
        assert_eq!(
            (l.version, l.lease_key, l.lease_state),
            (2, [1; 16], LeaseState::RH)
        );
        assert_eq!(lease.lease_key, [1; 16]);
        let d = Durable {
            create_guid: [2; 16],
            lease,
            request: CreateRequestBuilder::default(),
        };
        let req = reclaim_request(&d, fid(3, 4));
        let list = parse_contexts(&req.contexts).unwrap();
        let dh2c = list.iter().find(|c| c.name == ctx::DH2C).unwrap();
        let r = DurableV2Reconnect::decode(dh2c.data).unwrap();
        assert_eq!((r.file_id, r.create_guid), (fid(3, 4), [2; 16]));
        assert!(list.iter().any(|c| c.name == ctx::RQLS));
        assert!(!granted(&[]));
        assert!(granted(&encode_contexts(&[(ctx::DH2Q, &[0; 8])])));
    }
}
