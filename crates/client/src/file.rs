//! Open files: `OpenOptions` (what CREATE asks for) and `File` (read/write at offset,
//! flush, stat, truncate, close).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::try_join_all;
use smbx_transport::placement::{line_pad, CACHE_LINE};
use smbx_transport::{Access, DirectLink};
use smbx_wire::close::{CloseRequest, CloseResponse, FlushRequest, CLOSE_FLAG_POSTQUERY_ATTRIB};
use smbx_wire::create::CreateRequestBuilder;
use smbx_wire::fscc::file::FILE_ALL_INFORMATION;
use smbx_wire::query_info::{QueryInfoRequest, SMB2_0_INFO_FILE};
use smbx_wire::rw::{
    decode_write_response, ReadRequest, ReadResponse, WriteRequest, CHANNEL_RDMA_V1,
    CHANNEL_RDMA_V1_INVALIDATE,
};
use smbx_wire::set_info::{
    SetInfoRequest, FILE_DISPOSITION_INFORMATION, FILE_END_OF_FILE_INFORMATION,
};
use smbx_wire::{
    AccessMask, Command, CreateDisposition, CreateOptions, FileAttributes, NtStatus, ShareAccess,
};

use crate::channels::Pinned;
use crate::conn::{body_writer, Request};
use crate::credits::charge_for;
use crate::durable::Handle;
use crate::error::{Error, InvalidArgument, ProtocolError, Result};
use crate::info::FileInfo;
use crate::tree::Tree;

/// Output buffer size of one FileAllInformation query.
pub(crate) const INFO_BUFFER: u32 = 4096;

pub use smbx_wire::FileId;

/// One WRITE's data: borrowed from the caller (copied into the request) or shared
/// (sent from where it lies).
enum Chunk<'a> {
    Borrowed(&'a [u8]),
    Shared(Bytes),
}

impl Chunk<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Chunk::Borrowed(d) => d,
            Chunk::Shared(b) => b,
        }
    }
}

/// Tries of one READ or WRITE by RDMA on a multichannel session, each on the
/// SMB Direct channel with the most room, before it goes inline.
const RDMA_TRIES: u32 = 3;

/// The bodies of the handle-based requests.
/// The RDMA channel to ask for: with remote invalidation from 3.0.2 on, where
/// the link's registrations can be invalidated by the peer.
fn rdma_channel(dialect: smbx_wire::Dialect, link: &dyn DirectLink) -> u32 {
    if dialect >= smbx_wire::Dialect::SMB3_0_2 && link.remote_invalidation() {
        CHANNEL_RDMA_V1_INVALIDATE
    } else {
        CHANNEL_RDMA_V1
    }
}

fn rdma_error(e: smbx_transport::DirectError) -> Error {
    Error::Disconnected(e.into())
}

pub(crate) fn close_body(id: FileId, flags: u16) -> Vec<u8> {
    CloseRequest { flags, file_id: id }.encode()
}

pub(crate) fn query_info_body(id: FileId, info_type: u8, class: u8, output: u32) -> Vec<u8> {
    QueryInfoRequest {
        info_type,
        info_class: class,
        output_buffer_length: output,
        input: &[],
        additional_information: 0,
        flags: 0,
        file_id: id,
    }
    .encode()
}

pub(crate) fn set_info_body(id: FileId, info_type: u8, class: u8, buffer: &[u8]) -> Vec<u8> {
    SetInfoRequest {
        info_type,
        info_class: class,
        additional_information: 0,
        file_id: id,
        buffer,
    }
    .encode()
}

/// The access mask names callers of this crate use, as [`AccessMask`] values (the
/// definitions are smbx-wire's).
pub mod access {
    use smbx_wire::AccessMask;

    /// FILE_READ_DATA / FILE_LIST_DIRECTORY.
    pub const READ_DATA: AccessMask = AccessMask::FILE_READ_DATA;
    /// FILE_WRITE_DATA / FILE_ADD_FILE.
    pub const WRITE_DATA: AccessMask = AccessMask::FILE_WRITE_DATA;
    /// FILE_APPEND_DATA.
    pub const APPEND_DATA: AccessMask = AccessMask::FILE_APPEND_DATA;
    /// FILE_READ_EA.
    pub const READ_EA: AccessMask = AccessMask::FILE_READ_EA;
    /// FILE_WRITE_EA.
    pub const WRITE_EA: AccessMask = AccessMask::FILE_WRITE_EA;
    /// FILE_READ_ATTRIBUTES.
    pub const READ_ATTRIBUTES: AccessMask = AccessMask::FILE_READ_ATTRIBUTES;
    /// FILE_WRITE_ATTRIBUTES.
    pub const WRITE_ATTRIBUTES: AccessMask = AccessMask::FILE_WRITE_ATTRIBUTES;
    /// DELETE.
    pub const DELETE: AccessMask = AccessMask::DELETE;
    /// READ_CONTROL.
    pub const READ_CONTROL: AccessMask = AccessMask::READ_CONTROL;
    /// SYNCHRONIZE.
    pub const SYNCHRONIZE: AccessMask = AccessMask::SYNCHRONIZE;
    /// MAXIMUM_ALLOWED.
    pub const MAXIMUM_ALLOWED: AccessMask = AccessMask::MAXIMUM_ALLOWED;
    /// GENERIC_ALL.
    pub const GENERIC_ALL: AccessMask = AccessMask::GENERIC_ALL;
    /// GENERIC_WRITE.
    pub const GENERIC_WRITE: AccessMask = AccessMask::GENERIC_WRITE;
    /// GENERIC_READ.
    pub const GENERIC_READ: AccessMask = AccessMask::GENERIC_READ;
}

/// The CreateDisposition names callers of this crate use, as [`CreateDisposition`]
/// values.
pub mod disposition {
    use smbx_wire::CreateDisposition;

    /// Replace if it exists, create if not.
    pub const SUPERSEDE: CreateDisposition = CreateDisposition::Supersede;
    /// Open; fail if missing.
    pub const OPEN: CreateDisposition = CreateDisposition::Open;
    /// Create; fail if it exists.
    pub const CREATE: CreateDisposition = CreateDisposition::Create;
    /// Open or create.
    pub const OPEN_IF: CreateDisposition = CreateDisposition::OpenIf;
    /// Open and truncate; fail if missing.
    pub const OVERWRITE: CreateDisposition = CreateDisposition::Overwrite;
    /// Open and truncate, or create.
    pub const OVERWRITE_IF: CreateDisposition = CreateDisposition::OverwriteIf;
}

/// The ShareAccess names callers of this crate use, as [`ShareAccess`] values.
pub mod share {
    use smbx_wire::ShareAccess;

    /// FILE_SHARE_READ.
    pub const READ: ShareAccess = ShareAccess::FILE_SHARE_READ;
    /// FILE_SHARE_WRITE.
    pub const WRITE: ShareAccess = ShareAccess::FILE_SHARE_WRITE;
    /// FILE_SHARE_DELETE.
    pub const DELETE: ShareAccess = ShareAccess::FILE_SHARE_DELETE;
    /// All three.
    pub const ALL: ShareAccess = ShareAccess::ALL;
}

/// The CreateOptions names callers of this crate use, as [`CreateOptions`] values.
pub mod create_options {
    use smbx_wire::CreateOptions;

    /// FILE_DIRECTORY_FILE.
    pub const DIRECTORY_FILE: CreateOptions = CreateOptions::FILE_DIRECTORY_FILE;
    /// FILE_WRITE_THROUGH.
    pub const WRITE_THROUGH: CreateOptions = CreateOptions::FILE_WRITE_THROUGH;
    /// FILE_SEQUENTIAL_ONLY.
    pub const SEQUENTIAL_ONLY: CreateOptions = CreateOptions::FILE_SEQUENTIAL_ONLY;
    /// FILE_NO_INTERMEDIATE_BUFFERING.
    pub const NO_INTERMEDIATE_BUFFERING: CreateOptions =
        CreateOptions::FILE_NO_INTERMEDIATE_BUFFERING;
    /// FILE_NON_DIRECTORY_FILE.
    pub const NON_DIRECTORY_FILE: CreateOptions = CreateOptions::FILE_NON_DIRECTORY_FILE;
    /// FILE_RANDOM_ACCESS.
    pub const RANDOM_ACCESS: CreateOptions = CreateOptions::FILE_RANDOM_ACCESS;
    /// FILE_DELETE_ON_CLOSE.
    pub const DELETE_ON_CLOSE: CreateOptions = CreateOptions::FILE_DELETE_ON_CLOSE;
}

/// What to ask for when opening. Built like `std::fs::OpenOptions`; the raw fields can be
/// set directly for anything the builder does not cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// DesiredAccess (0: derived from read/write).
    pub access: AccessMask,
    /// ShareAccess.
    pub share: ShareAccess,
    /// CreateDisposition (`None`: derived from create/truncate).
    pub disposition: Option<CreateDisposition>,
    /// CreateOptions.
    pub options: CreateOptions,
    /// FileAttributes for a new file.
    pub attributes: FileAttributes,
    read: bool,
    write: bool,
    create: bool,
    create_new: bool,
    truncate: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            access: AccessMask::empty(),
            share: ShareAccess::ALL,
            disposition: None,
            options: CreateOptions::empty(),
            attributes: FileAttributes::empty(),
            read: false,
            write: false,
            create: false,
            create_new: false,
            truncate: false,
        }
    }
}

impl OpenOptions {
    /// Nothing requested yet (open an existing file for attribute reads).
    pub fn new() -> Self {
        Self::default()
    }
    /// Open an existing file for reading.
    pub fn read_only() -> Self {
        Self::new().read(true)
    }
    /// Create or truncate a file for writing (and reading).
    pub fn create_truncate() -> Self {
        Self::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
    }
    /// Request read access.
    pub fn read(mut self, yes: bool) -> Self {
        self.read = yes;
        self
    }
    /// Request write access.
    pub fn write(mut self, yes: bool) -> Self {
        self.write = yes;
        self
    }
    /// Create the file if it is missing.
    pub fn create(mut self, yes: bool) -> Self {
        self.create = yes;
        self
    }
    /// Create the file, failing if it exists.
    pub fn create_new(mut self, yes: bool) -> Self {
        self.create_new = yes;
        self
    }
    /// Truncate an existing file.
    pub fn truncate(mut self, yes: bool) -> Self {
        self.truncate = yes;
        self
    }
    /// Open (or create) a directory rather than a file.
    pub fn directory(mut self, yes: bool) -> Self {
        if yes {
            self.options = (self.options | create_options::DIRECTORY_FILE)
                & !create_options::NON_DIRECTORY_FILE;
        } else {
            self.options &= !create_options::DIRECTORY_FILE;
        }
        self
    }
    /// Delete the file when the last handle closes.
    pub fn delete_on_close(mut self, yes: bool) -> Self {
        if yes {
            self.options |= create_options::DELETE_ON_CLOSE;
            self.access |= access::DELETE;
        } else {
            self.options &= !create_options::DELETE_ON_CLOSE;
        }
        self
    }
    /// Write through to stable storage.
    pub fn write_through(mut self, yes: bool) -> Self {
        if yes {
            self.options |= create_options::WRITE_THROUGH;
        } else {
            self.options &= !create_options::WRITE_THROUGH;
        }
        self
    }
    /// ShareAccess to grant others.
    pub fn share(mut self, share: ShareAccess) -> Self {
        self.share = share;
        self
    }
    /// An explicit access mask (added to what read/write imply).
    pub fn access(mut self, mask: AccessMask) -> Self {
        self.access |= mask;
        self
    }
    /// An explicit disposition (overrides create/truncate).
    pub fn disposition(mut self, d: CreateDisposition) -> Self {
        self.disposition = Some(d);
        self
    }

    pub(crate) fn to_request(&self, name: String) -> CreateRequestBuilder {
        let mut desired = self.access | access::SYNCHRONIZE | access::READ_ATTRIBUTES;
        if self.read {
            desired |= access::READ_DATA | access::READ_EA;
        }
        if self.write {
            desired |= access::WRITE_DATA
                | access::APPEND_DATA
                | access::WRITE_EA
                | access::WRITE_ATTRIBUTES;
        }
        let disposition =
            self.disposition
                .unwrap_or(match (self.create_new, self.create, self.truncate) {
                    (true, _, _) => disposition::CREATE,
                    (false, true, true) => disposition::OVERWRITE_IF,
                    (false, true, false) => disposition::OPEN_IF,
                    (false, false, true) => disposition::OVERWRITE,
                    (false, false, false) => disposition::OPEN,
                });
        CreateRequestBuilder {
            oplock_level: smbx_wire::oplock::OplockLevel::NONE,
            impersonation_level: 2,
            desired_access: desired,
            file_attributes: self.attributes,
            share_access: self.share,
            create_disposition: disposition.as_u32(),
            create_options: self.options,
            name,
            contexts: Vec::new(),
        }
    }
}

/// An open file or directory. Close it with [`File::close`]; dropping it closes it in the
/// background (when a tokio runtime is running).
#[derive(Debug)]
pub struct File {
    tree: Tree,
    handle: Arc<Handle>,
    info: FileInfo,
    create_action: u32,
    closed: AtomicBool,
}

impl File {
    pub(crate) fn new(tree: Tree, handle: Arc<Handle>, info: FileInfo, create_action: u32) -> File {
        File {
            tree,
            handle,
            info,
            create_action,
            closed: AtomicBool::new(false),
        }
    }

    /// The handle's FileId (a new one once a durable open was reclaimed on a
    /// re-established session).
    pub fn id(&self) -> FileId {
        self.handle.id()
    }
    /// The FileId to send a request with, or [`crate::Error::DurableOpenLost`]
    /// once the server refused to reclaim the durable open.
    fn live_id(&self) -> Result<FileId> {
        self.handle.live_id()
    }
    /// True if the server granted this open a durable handle: it outlives the
    /// session and is reclaimed if the session is re-established.
    pub fn is_durable(&self) -> bool {
        self.handle.durable.is_some()
    }
    /// The metadata CREATE returned.
    pub fn info_at_open(&self) -> &FileInfo {
        &self.info
    }
    /// The size when opened.
    pub fn size_at_open(&self) -> u64 {
        self.info.size
    }
    /// CreateAction: 0 superseded, 1 opened, 2 created, 3 overwritten.
    pub fn create_action(&self) -> u32 {
        self.create_action
    }
    /// The tree the file is on.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Reads up to `len` bytes at `offset`; fewer at end of file, none past it. Reads larger
    /// than MaxReadSize go out as several READs in flight at once.
    pub async fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let max = self.tree.max_read() as usize;
        if len <= max {
            return self.read_chunk(offset, len).await;
        }
        let chunks = (0..len).step_by(max).map(|start| {
            let n = max.min(len - start);
            self.read_chunk(offset + start as u64, n)
        });
        let parts = try_join_all(chunks).await?;
        let mut out = Vec::with_capacity(len);
        for (i, p) in parts.into_iter().enumerate() {
            let want = max.min(len - i * max);
            let short = p.len() < want;
            out.extend_from_slice(&p);
            if short {
                break;
            }
        }
        Ok(out)
    }

    /// One READ of up to `len` bytes (at most MaxReadSize) at `offset`, its data
    /// left in the buffer it arrived in: no copy. Empty at end of file. The
    /// buffer goes back to the connection's pool when the [`ReadData`] drops.
    pub async fn read_data(&self, offset: u64, len: usize) -> Result<ReadData> {
        if len > self.tree.max_read() as usize {
            return Err(InvalidArgument::ReadTooLarge {
                len,
                max: self.tree.max_read() as usize,
            }
            .into());
        }
        let pool = self.tree.pool().clone();
        Ok(match self.read_raw(offset, len, true).await? {
            Some((buf, range)) => ReadData {
                buf,
                range,
                pool: Some(pool),
            },
            None => ReadData {
                buf: Vec::new(),
                range: 0..0,
                pool: None,
            },
        })
    }

    /// Reads into `buf` at `offset`; returns the bytes read (0 at end of file).
    pub async fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let max = self.tree.max_read() as usize;
        let sizes: Vec<usize> = buf.chunks(max).map(|c| c.len()).collect();
        let reads = buf
            .chunks_mut(max)
            .enumerate()
            .map(|(i, c)| self.read_chunk_into(offset + (i * max) as u64, c));
        let got = try_join_all(reads).await?;
        // Stop at the first short chunk: what follows it lies past end of file.
        let mut total = 0;
        for (n, want) in got.into_iter().zip(sizes) {
            total += n;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    /// One READ; the response and where its data lies in it (`None` at end of file).
    /// `align`: over RDMA, the data may start past the buffer's first byte (see
    /// [`line_pad`]); without it, it starts there.
    async fn read_raw(
        &self,
        offset: u64,
        len: usize,
        align: bool,
    ) -> Result<Option<(Vec<u8>, std::ops::Range<usize>)>> {
        if len == 0 {
            return Ok(None);
        }
        // Over SMB Direct, large reads land by RDMA Write in a buffer registered for
        // this one transfer with the link of the channel it is sent on.
        let tries = self.rdma_tries();
        for attempt in 0..tries {
            let Some(mut on) = self.tree.rdma_for(len, true) else {
                break;
            };
            on.replay = attempt > 0;
            // Boxed (as write_rdma): a READ over TCP does not carry its state.
            match Box::pin(self.read_rdma(&on, offset, len, align)).await {
                Err(e) if attempt + 1 < tries && crate::failover::channel_lost(&e) => {}
                Err(e) if tries == 1 || !crate::failover::channel_lost(&e) => return Err(e),
                Err(_) => break,
                r => return r,
            }
        }
        let req = self.read_request(&ReadRequest {
            padding: 0x50,
            length: len as u32,
            offset,
            file_id: self.live_id()?,
            ..Default::default()
        });
        let resp = self.tree.call(req).await?;
        if resp.status() == NtStatus::END_OF_FILE {
            return Ok(None);
        }
        let resp = resp.ok()?;
        let r = ReadResponse::decode(&resp.msg)?;
        if r.data.len() > len {
            return Err(ProtocolError::ReadTooLong {
                asked: len,
                got: r.data.len(),
            }
            .into());
        }
        // The data's place in the buffer the message arrived in (the message may
        // start past its first byte: SMB Direct's header is left in place).
        let start = r.data.as_ptr() as usize - resp.msg.as_ptr() as usize;
        let len = r.data.len();
        let (buf, at) = resp.msg.into_parts();
        Ok(Some((buf, at + start..at + start + len)))
    }

    /// The READ request of `r`, its body written behind room for the headers: a lone
    /// READ becomes its frame in place (no copy into a chain buffer).
    fn read_request(&self, r: &ReadRequest<'_>) -> Request {
        let mut w = body_writer(&self.tree.pool(), 49 + r.channel_info.len());
        r.encode_into(&mut w);
        let mut req = Request::with_headroom(Command::Read, w, self.tree.id());
        req.charge = charge_for(r.length as usize, self.tree.large_mtu());
        req
    }

    /// How many times a READ or WRITE tries RDMA channels: several on a
    /// multichannel session (a failed channel is marked down, the next try
    /// registers with another), else once.
    fn rdma_tries(&self) -> u32 {
        if self.tree.session().channel_count() > 1 {
            RDMA_TRIES
        } else {
            1
        }
    }

    /// One READ whose data the server RDMA-Writes into a buffer registered
    /// (remote write only) with the link of channel `on`, and sent there; with
    /// `align`, at the file offset's place in a cache line ([`line_pad`]).
    async fn read_rdma(
        &self,
        on: &Pinned,
        offset: u64,
        len: usize,
        align: bool,
    ) -> Result<Option<(Vec<u8>, std::ops::Range<usize>)>> {
        let link = &on.direct;
        // With `align`, the data goes `pad` bytes into the buffer: at the file
        // offset's place in a cache line (`line_pad`), as the server's source (the
        // page cache, sendfile'd), so the kernel's one copy into the registered
        // region runs at full speed.
        let (buf, pad) = if align {
            let buf = self.tree.pool().take(len + CACHE_LINE - 1);
            let pad = line_pad(buf.as_ptr() as usize, offset);
            (buf, pad)
        } else {
            (self.tree.pool().take(len), 0)
        };
        let reg = link
            .register(buf, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .map_err(rdma_error)?;
        let desc = reg
            .descriptor(pad as u64, len as u32)
            .ok_or(InvalidArgument::LargerThanBuffer { what: "read", len })?
            .encode();
        let req = self.read_request(&ReadRequest {
            padding: 0x50,
            length: len as u32,
            offset,
            file_id: self.live_id()?,
            channel: rdma_channel(self.tree.dialect(), link.as_ref()),
            channel_info: &desc,
            ..Default::default()
        });
        let resp = self.tree.call_on(req, on).await?;
        if resp.status() == NtStatus::END_OF_FILE {
            return Ok(None);
        }
        let resp = resp.ok()?;
        let r = ReadResponse::decode(&resp.msg)?;
        // The data arrived by RDMA; DataRemaining says how much.
        let n = r.data_remaining as usize;
        if !r.data.is_empty() || n > len {
            return Err(ProtocolError::RdmaRead {
                inline: r.data.len(),
                remaining: n,
                asked: len,
            }
            .into());
        }
        on.channel.record_rdma(true, n as u64);
        Ok(Some((reg.into_vec(), pad..pad + n)))
    }

    async fn read_chunk(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        // Not aligned: the Vec returned starts with the data (a moved start would
        // cost a memmove of all of it).
        Ok(match self.read_raw(offset, len, false).await? {
            // The data lies inside the message: keep the buffer, drop the headers.
            Some((mut msg, range)) => {
                msg.truncate(range.end);
                msg.drain(..range.start);
                msg
            }
            None => Vec::new(),
        })
    }

    async fn read_chunk_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        Ok(match self.read_raw(offset, buf.len(), true).await? {
            Some((msg, range)) => {
                let n = range.len();
                buf[..n].copy_from_slice(&msg[range]);
                // The received frame or RDMA transfer buffer goes back to the pool.
                self.tree.pool().recycle(msg);
                n
            }
            None => 0,
        })
    }

    /// Writes all of `data` at `offset` (several WRITEs in flight when it exceeds
    /// MaxWriteSize). Returns the bytes written. The data is copied into each request;
    /// [`File::write_bytes`] sends shared bytes without that copy.
    pub async fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize> {
        let max = self.tree.max_write() as usize;
        if data.len() <= max {
            return self.write_chunk(offset, Chunk::Borrowed(data)).await;
        }
        let chunks = data
            .chunks(max)
            .enumerate()
            .map(|(i, c)| self.write_chunk(offset + (i * max) as u64, Chunk::Borrowed(c)));
        let counts = try_join_all(chunks).await?;
        Ok(counts.into_iter().sum())
    }

    /// Writes all of `data` at `offset`, as [`File::write_at`], without copying it
    /// into the requests over Direct TCP: each WRITE's header and fields are sent,
    /// then its data straight from `data`'s memory (one gathered write), which the
    /// request holds (a reference, not a copy) until it is on the wire. A signed or
    /// sealed WRITE, whose signature or encryption covers the data, and one over SMB
    /// Direct take a copy as `write_at` does.
    pub async fn write_bytes(&self, offset: u64, data: Bytes) -> Result<usize> {
        let max = self.tree.max_write() as usize;
        if data.len() <= max {
            return self.write_chunk(offset, Chunk::Shared(data)).await;
        }
        let chunks = (0..data.len()).step_by(max).map(|at| {
            let c = data.slice(at..(at + max).min(data.len()));
            self.write_chunk(offset + at as u64, Chunk::Shared(c))
        });
        let counts = try_join_all(chunks).await?;
        Ok(counts.into_iter().sum())
    }

    /// Writes all of `data` at `offset`, as [`File::write_bytes`], and gives the buffer
    /// back with the result. Over SMB Direct a WRITE of at most MaxWriteSize lends
    /// `data` itself to the server's RDMA Read: it is registered as it is, not copied
    /// into a buffer of the connection's (as `write_at` and `write_bytes` do there),
    /// so a caller that writes from buffers it keeps copies nothing per WRITE. Over
    /// TCP it is sent as `write_bytes` sends; a larger `data` goes out as `write_bytes`
    /// sends it. The bytes come back unchanged (a copy only when the data was still
    /// held elsewhere when the WRITEs finished; empty when registering them failed).
    pub async fn write_vec(&self, offset: u64, data: Vec<u8>) -> (Result<usize>, Vec<u8>) {
        let mut data = data;
        if data.len() <= self.tree.max_write() as usize {
            let len = data.len();
            let tries = self.rdma_tries();
            for attempt in 0..tries {
                let Some(mut on) = self.tree.rdma_for(len, false) else {
                    break;
                };
                on.replay = attempt > 0;
                let (r, back) = Box::pin(self.write_rdma(&on, offset, data, len)).await;
                data = back;
                match r {
                    Err(e) if attempt + 1 < tries && crate::failover::channel_lost(&e) => {}
                    Err(e) if tries == 1 || !crate::failover::channel_lost(&e) => {
                        return (Err(e), data)
                    }
                    Err(_) => break,
                    r => return (r, data),
                }
            }
        }
        let bytes = Bytes::from(data);
        let r = if bytes.len() <= self.tree.max_write() as usize {
            self.write_inline(offset, Chunk::Shared(bytes.clone()))
                .await
        } else {
            self.write_bytes(offset, bytes.clone()).await
        };
        let back = bytes.try_into_mut().map_or_else(|b| b.to_vec(), Vec::from);
        (r, back)
    }

    async fn write_chunk(&self, offset: u64, chunk: Chunk<'_>) -> Result<usize> {
        let data = chunk.as_slice();
        let tries = self.rdma_tries();
        for attempt in 0..tries {
            let Some(mut on) = self.tree.rdma_for(data.len(), false) else {
                break;
            };
            on.replay = attempt > 0;
            // The data goes into a buffer of the connection's, registered for the transfer.
            let mut buf = self.tree.pool().take(data.len());
            buf[..data.len()].copy_from_slice(data);
            let (r, buf) = Box::pin(self.write_rdma(&on, offset, buf, data.len())).await;
            self.tree.pool().put(buf);
            match r {
                Err(e) if attempt + 1 < tries && crate::failover::channel_lost(&e) => {}
                Err(e) if tries == 1 || !crate::failover::channel_lost(&e) => return Err(e),
                Err(_) => break,
                r => return r,
            }
        }
        self.write_inline(offset, chunk).await
    }

    /// One WRITE with its data in the request.
    async fn write_inline(&self, offset: u64, chunk: Chunk<'_>) -> Result<usize> {
        let data = chunk.as_slice();
        let len = data.len();
        // Shared data stays where it is: the request carries the fixed fields and a
        // reference to it.
        let shared = match &chunk {
            Chunk::Shared(bytes) if len > 0 => Some(bytes.clone()),
            _ => None,
        };
        let fields = WriteRequest {
            offset,
            file_id: self.live_id()?,
            length: len as u32,
            data,
            ..Default::default()
        };
        let mut w;
        if shared.is_some() {
            w = body_writer(&self.tree.pool(), 48);
            fields.encode_head_into(&mut w, len as u32);
        } else {
            w = body_writer(&self.tree.pool(), 48 + len.max(1));
            fields.encode_into(&mut w);
        }
        let mut req = Request::with_headroom(Command::Write, w, self.tree.id());
        req.data = shared;
        req.charge = charge_for(data.len(), self.tree.large_mtu());
        let resp = self.tree.call(req).await?.ok()?;
        let n = decode_write_response(&resp.msg)? as usize;
        if n != data.len() {
            return Err(ProtocolError::ShortWrite {
                written: n,
                len: data.len(),
            }
            .into());
        }
        Ok(n)
    }

    /// One WRITE of the first `len` bytes of `buf`, which the server RDMA-Reads from
    /// there: `buf` is registered for it (remote read only, for this one transfer)
    /// with the link of channel `on`, and comes back with the result.
    async fn write_rdma(
        &self,
        on: &Pinned,
        offset: u64,
        buf: Vec<u8>,
        len: usize,
    ) -> (Result<usize>, Vec<u8>) {
        let link = &on.direct;
        let file_id = match self.live_id() {
            Ok(id) => id,
            Err(e) => return (Err(e), buf),
        };
        let reg = match link.register(buf, Access::REMOTE_READ) {
            Ok(reg) => reg,
            // The buffer went with the failed registration.
            Err(e) => return (Err(rdma_error(e)), Vec::new()),
        };
        let Some(desc) = reg.descriptor(0, len as u32) else {
            let e = InvalidArgument::LargerThanBuffer { what: "write", len };
            return (Err(e.into()), reg.into_vec());
        };
        let body = WriteRequest {
            offset,
            file_id,
            channel: rdma_channel(self.tree.dialect(), link.as_ref()),
            remaining_bytes: len as u32,
            channel_info: &desc.encode(),
            ..Default::default()
        }
        .encode();
        let mut req = Request::new(Command::Write, body, self.tree.id());
        req.charge = charge_for(len, self.tree.large_mtu());
        let resp = self.tree.call_on(req, on).await;
        let buf = reg.into_vec();
        let r = resp
            .and_then(|r| r.ok())
            .and_then(|r| Ok(decode_write_response(&r.msg)? as usize));
        let r = match r {
            Ok(n) if n != len => Err(ProtocolError::ShortWrite { written: n, len }.into()),
            Ok(n) => {
                on.channel.record_rdma(false, n as u64);
                Ok(n)
            }
            Err(e) => Err(e),
        };
        (r, buf)
    }

    /// FLUSH: asks the server to commit the file's data.
    pub async fn flush(&self) -> Result<()> {
        let body = FlushRequest {
            file_id: self.live_id()?,
        }
        .encode();
        self.tree
            .call(Request::new(Command::Flush, body, self.tree.id()))
            .await?
            .ok()?;
        Ok(())
    }

    /// QUERY_INFO FileAllInformation on the open handle.
    pub async fn stat(&self) -> Result<FileInfo> {
        let body = query_info_body(
            self.live_id()?,
            SMB2_0_INFO_FILE,
            FILE_ALL_INFORMATION,
            INFO_BUFFER,
        );
        let resp = self
            .tree
            .call(Request::new(Command::QueryInfo, body, self.tree.id()))
            .await?;
        Tree::decode_all_info(resp)
    }

    /// Sets the end of file (truncates or extends).
    pub async fn set_len(&self, size: u64) -> Result<()> {
        self.set_info(FILE_END_OF_FILE_INFORMATION, &size.to_le_bytes())
            .await
    }

    /// Marks the file for deletion when the last handle closes (FileDispositionInformation).
    pub async fn set_delete_pending(&self, yes: bool) -> Result<()> {
        self.set_info(FILE_DISPOSITION_INFORMATION, &[yes as u8])
            .await
    }

    async fn set_info(&self, class: u8, buf: &[u8]) -> Result<()> {
        let body = set_info_body(self.live_id()?, SMB2_0_INFO_FILE, class, buf);
        self.tree
            .call(Request::new(Command::SetInfo, body, self.tree.id()))
            .await?
            .ok()?;
        Ok(())
    }

    /// CLOSE, returning the final metadata.
    pub async fn close(self) -> Result<FileInfo> {
        self.closed.store(true, Ordering::Relaxed);
        let body = close_body(self.live_id()?, CLOSE_FLAG_POSTQUERY_ATTRIB);
        let resp = self
            .tree
            .call(Request::new(Command::Close, body, self.tree.id()))
            .await?
            .ok()?;
        Ok(FileInfo::from_close(&CloseResponse::decode(&resp.msg)?))
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // A lost durable open has nothing left to close on the server.
        if self.closed.load(Ordering::Relaxed) || self.handle.lost_error().is_some() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let tree = self.tree.clone();
            let id = self.id();
            rt.spawn(async move {
                let req = Request::new(Command::Close, close_body(id, 0), tree.id());
                let _ = tree.call(req).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispositions_follow_std_semantics() {
        let d = |o: OpenOptions| {
            CreateDisposition::from_u32(o.to_request(String::new()).create_disposition).unwrap()
        };
        assert_eq!(d(OpenOptions::read_only()), disposition::OPEN);
        assert_eq!(d(OpenOptions::create_truncate()), disposition::OVERWRITE_IF);
        assert_eq!(
            d(OpenOptions::new().write(true).create(true)),
            disposition::OPEN_IF
        );
        assert_eq!(d(OpenOptions::new().create_new(true)), disposition::CREATE);
        assert_eq!(d(OpenOptions::new().truncate(true)), disposition::OVERWRITE);
        let r = OpenOptions::new()
            .write(true)
            .delete_on_close(true)
            .to_request("x".into());
        assert!(r.desired_access.contains(access::DELETE));
        assert!(r.desired_access.contains(access::WRITE_DATA));
        assert!(!r.desired_access.intersects(access::READ_DATA));
        assert!(r.create_options.contains(create_options::DELETE_ON_CLOSE));
    }
}

#[cfg(test)]
mod file_id_tests {
    use super::*;

    #[test]
    fn file_id_bytes() {
        let id = FileId {
            persistent: 0x0102,
            volatile: u64::MAX - 1,
        };
        assert_eq!(FileId::from_bytes(id.to_bytes()), id);
        assert_eq!(FileId::RELATED.to_bytes(), [0xff; 16]);
    }
}

/// The data of one READ in the buffer it arrived in ([`File::read_data`]);
/// dereferences to the bytes, and hands the buffer back to the connection's
/// pool when dropped.
#[derive(Debug)]
pub struct ReadData {
    buf: Vec<u8>,
    range: std::ops::Range<usize>,
    pool: Option<Arc<smbx_transport::BufPool>>,
}

impl ReadData {
    /// Bytes of the buffer that holds the data (its pool class's size, for a pooled
    /// one): memory this READ keeps until it drops, registered memory while its
    /// transfer ran when it came by RDMA.
    pub fn held(&self) -> usize {
        self.buf.capacity()
    }
}

impl std::ops::Deref for ReadData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.range.clone()]
    }
}

impl Drop for ReadData {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.recycle(std::mem::take(&mut self.buf));
        }
    }
}
