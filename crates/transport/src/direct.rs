//! [`DirectLink`]: an SMB Direct connection as the server and the client use
//! it, and [`Link`], its implementation over any RDMA provider.

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use smbx_direct::{
    BufferDescriptorV1, DirectError, NegotiatedParams, Payload, PayloadPool, PayloadStats,
    SmbDirectConnection,
};
use smbx_rdma::{Access, FileRange, FileSink, MemoryRegion, ProtectionDomain, Provider, QueuePair};
use smbx_wire::InMessage;
use tokio::sync::OwnedSemaphorePermit;

use crate::link::{LinkError, Outgoing, TrySendError};

/// READs and WRITEs larger than this many bytes move their data by RDMA by
/// default ([`DirectLink::rdma_threshold`]), as Linux cifs does on RDMA NICs.
pub const DEFAULT_RDMA_THRESHOLD: usize = 4096;

/// A boxed, sendable future (the trait is object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A buffer registered with the link's protection domain.
pub trait RegisteredBuf: Send + Sync + 'static {
    /// Its length.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A Buffer Descriptor V1 for `len` bytes at `offset`, for the peer.
    fn descriptor(&self, offset: u64, len: u32) -> Option<BufferDescriptorV1>;
    /// Runs `f` over the bytes (do not use while a transfer targets them).
    fn with(&self, f: &mut dyn FnMut(&[u8]));
    /// Runs `f` over the bytes, mutably.
    fn with_mut(&self, f: &mut dyn FnMut(&mut [u8]));
    /// Deregisters and returns the bytes (copied only if the provider cannot
    /// hand its buffer back).
    fn into_vec(self: Box<Self>) -> Vec<u8>;
    /// For the link's downcast to its provider's region type.
    fn as_any(&self) -> &dyn Any;
}

/// One SMB Direct connection: whole SMB2 messages, registration, RDMA.
pub trait DirectLink: Send + Sync + 'static {
    /// Sends one SMB2 message (fragmented as needed); with `invalidate`, the
    /// first fragment goes as Send with Invalidate of that peer STag.
    fn send<'a>(
        &'a self,
        msg: &'a [u8],
        invalidate: Option<u32>,
    ) -> BoxFuture<'a, Result<(), DirectError>>;
    /// Like [`DirectLink::send`] for the owned message `buf[start..]` (queued as it
    /// is, not copied), without waiting: the message is queued whatever the queue's
    /// length (the caller bounds it, as SMB2 credits do) and posted as SMB Direct
    /// credits allow. Saves the hand-off to a writer task.
    fn send_now(
        &self,
        buf: Vec<u8>,
        start: usize,
        invalidate: Option<u32>,
    ) -> Result<(), DirectError>;
    /// Like [`DirectLink::send`] for the owned message `buf[start..]`, keeping `hold`
    /// (a budget permit) until it is queued; one boxed future, not two.
    fn send_owned(
        &self,
        buf: Vec<u8>,
        start: usize,
        invalidate: Option<u32>,
        hold: Option<OwnedSemaphorePermit>,
    ) -> BoxFuture<'_, Result<(), LinkError>>;
    /// Queues `out` (its tail read in behind it) if the link's send queue has room
    /// now, posting what SMB Direct credits allow, as [`DirectLink::send_owned`] does
    /// once there is room; gives it back when the queue is full. No future, no box.
    fn try_send(&self, out: Outgoing) -> Result<(), TrySendError>;
    /// The next whole SMB2 message, in the buffer it was received into (past its
    /// SMB Direct header when it came in one fragment over soft-iWARP: no move).
    /// Cancel-safe: a dropped call loses nothing.
    fn recv(&self) -> BoxFuture<'_, Result<InMessage, DirectError>>;
    /// The next whole SMB2 message if one has arrived, without waiting (try it
    /// before [`DirectLink::recv`]: no future to box when messages are queued).
    fn try_recv(&self) -> Option<InMessage>;
    /// What negotiation settled on.
    fn params(&self) -> NegotiatedParams;
    /// Local transport address.
    fn local_addr(&self) -> SocketAddr;
    /// Peer transport address.
    fn peer_addr(&self) -> SocketAddr;
    /// Registers `buf` with `access` in this link's protection domain.
    fn register(&self, buf: Vec<u8>, access: Access)
        -> Result<Box<dyn RegisteredBuf>, DirectError>;
    /// A buffer of `len` bytes from the link's registered payload pool
    /// ([`smbx_direct::payload`]): registered once for local access only (the
    /// peer cannot name it) and reused, for the data the server RDMA-Writes
    /// (READ) or RDMA-Reads (WRITE); back to the pool when dropped.
    fn payload(&self, len: usize) -> Result<Box<dyn RegisteredBuf>, DirectError>;
    /// What the payload pool did (registrations, buffers taken).
    fn payload_stats(&self) -> PayloadStats;
    /// RDMA Writes `len` bytes of `local` from byte `at` on into the peer's buffers
    /// (in descriptor order): the server's side of an SMB2 READ. `at + len` must lie
    /// within `local` (data placed at `at` so that its copy from the page cache ran
    /// fastest: [`crate::placement`]).
    fn rdma_write<'a>(
        &'a self,
        local: &'a dyn RegisteredBuf,
        at: u64,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>>;
    /// Like [`DirectLink::rdma_write`], but returns once the Writes are posted
    /// (only a transfer longer than the RDMA window waits, for its earlier
    /// windows): a message sent after it reaches the peer after the data
    /// (RDMAP orders a Send behind the RDMA Writes posted before it), so a READ
    /// response need not wait for the Writes' completion. The link keeps `local`
    /// and `keep` until the last Write completes; a Write that fails breaks the
    /// connection, so nothing sent behind it claims success.
    fn rdma_write_posted<'a>(
        &'a self,
        local: Box<dyn RegisteredBuf>,
        at: u64,
        len: u64,
        remote: &'a [BufferDescriptorV1],
        keep: Option<Box<dyn Any + Send>>,
    ) -> BoxFuture<'a, Result<(), DirectError>>;
    /// RDMA Reads `len` bytes of the peer's buffers into `local` from byte `at` on
    /// (so the data can sit where its later copy runs fastest): the server's side
    /// of an SMB2 WRITE. `at + len` must lie within `local`.
    fn rdma_read<'a>(
        &'a self,
        local: &'a dyn RegisteredBuf,
        at: u64,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>>;
    /// Whether [`DirectLink::rdma_write_file`] works on this link (soft-iWARP).
    fn writes_files(&self) -> bool {
        false
    }
    /// RDMA Writes the first `len` bytes of the file range `src` into the peer's
    /// buffers (in descriptor order) from the file, not through a registered
    /// buffer: the server's side of an SMB2 READ whose data is in the page cache.
    /// Returns once the Writes are posted, as [`DirectLink::rdma_write_posted`] does
    /// (the link holds `src` until they are sent). Refused by a link that does not
    /// [write files](DirectLink::writes_files).
    fn rdma_write_file<'a>(
        &'a self,
        src: Arc<dyn FileRange>,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        let _ = (src, len, remote);
        Box::pin(async {
            Err(DirectError::InvalidTransfer(
                "this link does not write from files",
            ))
        })
    }
    /// Whether [`DirectLink::rdma_read_file`] works on this link (soft-iWARP with
    /// CRC off).
    fn reads_files(&self) -> bool {
        false
    }
    /// RDMA Reads `len` bytes of the peer's buffers (in descriptor order) into the
    /// file range `sink`, from the transport into the file, not through a
    /// registered buffer: the server's side of an SMB2 WRITE. A file that refuses
    /// a byte fails the transfer (the sink says why), not the link. Refused by a
    /// link that does not [read into files](DirectLink::reads_files).
    fn rdma_read_file<'a>(
        &'a self,
        sink: Arc<dyn FileSink>,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        let _ = (sink, len, remote);
        Box::pin(async {
            Err(DirectError::InvalidTransfer(
                "this link does not read into files",
            ))
        })
    }
    /// Closes the connection (waits until it is down).
    fn close(&self) -> BoxFuture<'_, ()>;
    /// True once the connection is over.
    fn is_closed(&self) -> bool;
    /// Whether the peer may invalidate our registrations with Send with
    /// Invalidate (SMB2_CHANNEL_RDMA_V1_INVALIDATE); false on rdma-core
    /// verbs, whose user-space registrations cannot be remotely invalidated.
    fn remote_invalidation(&self) -> bool {
        true
    }
    /// The I/O size above which a client moves a READ's (`read`) or a WRITE's
    /// data by RDMA on this link unless told otherwise: where RDMA starts to
    /// cost less than sending the data inline on the provider under it.
    fn rdma_threshold(&self, read: bool) -> usize {
        let _ = read;
        DEFAULT_RDMA_THRESHOLD
    }
    /// Tells the link how many SMB2 messages the peer has in flight towards this
    /// end now: a client's requests sent and not yet answered
    /// ([`QueuePair::set_in_flight`]: soft-iWARP hands on what one socket read
    /// brought in batches of about half of it). A server gives none: the requests
    /// it has received and not answered are only those the last batch let through.
    fn set_in_flight(&self, n: usize) {
        let _ = n;
    }
}

/// A region of provider `M`, as a [`RegisteredBuf`].
struct MrBuf<M: MemoryRegion> {
    mr: M,
}

impl<M: MemoryRegion> RegisteredBuf for MrBuf<M> {
    fn len(&self) -> usize {
        self.mr.len()
    }
    fn descriptor(&self, offset: u64, len: u32) -> Option<BufferDescriptorV1> {
        self.mr.remote(offset, len).map(|r| BufferDescriptorV1 {
            offset: r.to,
            token: r.stag.0,
            length: r.len,
        })
    }
    fn with(&self, f: &mut dyn FnMut(&[u8])) {
        self.mr.with(|b| f(b))
    }
    fn with_mut(&self, f: &mut dyn FnMut(&mut [u8])) {
        self.mr.with_mut(|b| f(b))
    }
    fn into_vec(self: Box<Self>) -> Vec<u8> {
        match self.mr.take_buffer() {
            Ok(v) => v,
            Err(mr) => mr.with(|b| b.to_vec()),
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<Pd: ProtectionDomain> RegisteredBuf for Payload<Pd> {
    fn len(&self) -> usize {
        Payload::len(self)
    }
    fn descriptor(&self, offset: u64, len: u32) -> Option<BufferDescriptorV1> {
        let end = offset.checked_add(u64::from(len))?;
        if end > Payload::len(self) as u64 {
            return None;
        }
        self.mr().remote(offset, len).map(|r| BufferDescriptorV1 {
            offset: r.to,
            token: r.stag.0,
            length: r.len,
        })
    }
    fn with(&self, f: &mut dyn FnMut(&[u8])) {
        Payload::with(self, |b| f(b))
    }
    fn with_mut(&self, f: &mut dyn FnMut(&mut [u8])) {
        Payload::with_mut(self, |b| f(b))
    }
    fn into_vec(self: Box<Self>) -> Vec<u8> {
        Payload::with(&self, |b| b.to_vec())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A local buffer of a transfer: its region, and the pooled buffer it is
/// when it is one.
type Local<'a, P> = (
    &'a <P as Provider>::Mr,
    Option<&'a Payload<<P as Provider>::Pd>>,
);

/// [`DirectLink`] over provider `P`.
pub struct Link<P: Provider> {
    conn: SmbDirectConnection<P::Qp>,
    pd: P::Pd,
    payload: PayloadPool<P::Pd>,
    local: SocketAddr,
    peer: SocketAddr,
    /// [`DirectLink::rdma_threshold`] for READs and for WRITEs.
    rdma_threshold: (usize, usize),
}

impl<P: Provider> Link<P> {
    /// Wraps a negotiated connection whose queue pair lives in `pd`.
    pub fn new(conn: SmbDirectConnection<P::Qp>, pd: P::Pd) -> Self {
        let local = conn.qp().local_addr();
        let peer = conn.qp().peer_addr();
        let payload = PayloadPool::new(
            pd.clone(),
            conn.params().max_read_write_size as usize,
            conn.qp().granted().map(|g| g.max_mr_size),
            smbx_direct::payload::DEFAULT_KEEP,
        );
        Link {
            conn,
            pd,
            payload,
            local,
            peer,
            rdma_threshold: (DEFAULT_RDMA_THRESHOLD, DEFAULT_RDMA_THRESHOLD),
        }
    }

    /// The link with [`DirectLink::rdma_threshold`] `read` for READs and `write`
    /// for WRITEs (for a provider on which RDMA pays off only above other sizes
    /// than [`DEFAULT_RDMA_THRESHOLD`]).
    pub fn with_rdma_threshold(mut self, read: usize, write: usize) -> Self {
        self.rdma_threshold = (read, write);
        self
    }

    /// The underlying connection (counters, invalidated STags).
    pub fn connection(&self) -> &SmbDirectConnection<P::Qp> {
        &self.conn
    }

    /// The region of `b`, and the pooled buffer it is when it is one.
    fn mr<'a>(&self, b: &'a dyn RegisteredBuf) -> Result<Local<'a, P>, DirectError> {
        let any = b.as_any();
        if let Some(m) = any.downcast_ref::<MrBuf<P::Mr>>() {
            return Ok((&m.mr, None));
        }
        any.downcast_ref::<Payload<P::Pd>>()
            .map(|p| (p.mr(), Some(p)))
            .ok_or(DirectError::InvalidTransfer(
                "buffer registered with another provider",
            ))
    }

    /// The region of `b` for a transfer of `len` bytes from byte `at` on, started:
    /// refused past a pooled buffer's end; a pooled buffer is marked in transfer
    /// (its pool reuses it only once the transfer is done).
    fn start<'a>(
        &self,
        b: &'a dyn RegisteredBuf,
        at: u64,
        len: u64,
    ) -> Result<Local<'a, P>, DirectError> {
        let (mr, pooled) = self.mr(b)?;
        let end = at.checked_add(len);
        if pooled.is_some_and(|p| end.is_none_or(|e| e > p.len() as u64)) {
            return Err(DirectError::InvalidTransfer("longer than the buffer"));
        }
        if let Some(p) = pooled {
            p.transfer_started();
        }
        Ok((mr, pooled))
    }

    /// RDMA Writes (`write`) or Reads `len` bytes between `local` and the
    /// peer's buffers. A pooled buffer goes back to its pool for reuse only
    /// when the transfer finished (every work request on it completed).
    async fn transfer(
        &self,
        local: &dyn RegisteredBuf,
        at: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
        write: bool,
    ) -> Result<(), DirectError> {
        let (mr, pooled) = self.start(local, at, len)?;
        let r = if write {
            self.conn.rdma_write(mr, at, len, remote).await
        } else {
            self.conn.rdma_read(mr, at, len, remote).await
        };
        if let (Some(p), Ok(())) = (pooled, &r) {
            p.transfer_done();
        }
        r
    }
}

impl<P: Provider> Link<P> {
    /// Sends one SMB2 message, its first fragment as Send with Invalidate of `invalidate`.
    async fn post(&self, msg: &[u8], invalidate: Option<u32>) -> Result<(), DirectError> {
        match invalidate {
            Some(t) => self.conn.send_message_with_invalidate(msg, t).await,
            None => self.conn.send_message(msg).await,
        }
    }
}

impl<P: Provider> DirectLink for Link<P> {
    fn set_in_flight(&self, n: usize) {
        self.conn.qp().set_in_flight(n);
    }

    fn rdma_threshold(&self, read: bool) -> usize {
        if read {
            self.rdma_threshold.0
        } else {
            self.rdma_threshold.1
        }
    }

    fn send<'a>(
        &'a self,
        msg: &'a [u8],
        invalidate: Option<u32>,
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        Box::pin(self.post(msg, invalidate))
    }

    fn send_now(
        &self,
        buf: Vec<u8>,
        start: usize,
        invalidate: Option<u32>,
    ) -> Result<(), DirectError> {
        self.conn.send_message_now(buf, start, invalidate)
    }

    fn send_owned(
        &self,
        buf: Vec<u8>,
        start: usize,
        invalidate: Option<u32>,
        hold: Option<OwnedSemaphorePermit>,
    ) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(async move {
            let _hold = hold;
            if start > buf.len() {
                return Err(LinkError::TooLarge);
            }
            self.conn
                .send_message_owned(buf, start, invalidate)
                .await
                .map_err(LinkError::Direct)
        })
    }

    fn try_send(&self, mut out: Outgoing) -> Result<(), TrySendError> {
        out.read_tail_in();
        if out.start > out.buf.len() {
            return Err(TrySendError::Failed(LinkError::TooLarge));
        }
        // Queued as it is (its fragments are copied from it into the send slots);
        // its budget hold is dropped here.
        let buf = std::mem::take(&mut out.buf);
        match self
            .conn
            .try_send_message_owned(buf, out.start, out.invalidate)
        {
            Ok(None) => Ok(()),
            Ok(Some(buf)) => {
                out.buf = buf;
                Err(TrySendError::Full(out))
            }
            Err(e) => Err(TrySendError::Failed(LinkError::Direct(e))),
        }
    }

    fn recv(&self) -> BoxFuture<'_, Result<InMessage, DirectError>> {
        Box::pin(self.conn.recv_message())
    }

    fn try_recv(&self) -> Option<InMessage> {
        self.conn.try_recv_message()
    }

    fn params(&self) -> NegotiatedParams {
        self.conn.params()
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn register(
        &self,
        buf: Vec<u8>,
        access: Access,
    ) -> Result<Box<dyn RegisteredBuf>, DirectError> {
        let mr = self.pd.register(buf, access)?;
        Ok(Box::new(MrBuf::<P::Mr> { mr }))
    }

    fn payload(&self, len: usize) -> Result<Box<dyn RegisteredBuf>, DirectError> {
        Ok(Box::new(self.payload.take(len)?))
    }

    fn payload_stats(&self) -> PayloadStats {
        self.payload.stats()
    }

    fn rdma_write<'a>(
        &'a self,
        local: &'a dyn RegisteredBuf,
        at: u64,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        Box::pin(self.transfer(local, at, len, remote, true))
    }

    fn rdma_write_posted<'a>(
        &'a self,
        local: Box<dyn RegisteredBuf>,
        at: u64,
        len: u64,
        remote: &'a [BufferDescriptorV1],
        keep: Option<Box<dyn Any + Send>>,
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        Box::pin(async move {
            let mr = self.start(&*local, at, len)?.0.clone();
            // Back to its pool for reuse only if every Write on it succeeded.
            let release = Box::new(move |ok: bool| {
                let _keep = keep;
                if ok {
                    if let Some(p) = local.as_any().downcast_ref::<Payload<P::Pd>>() {
                        p.transfer_done();
                    }
                }
            });
            self.conn
                .rdma_write_posted(&mr, at, len, remote, release)
                .await
        })
    }

    fn rdma_read<'a>(
        &'a self,
        local: &'a dyn RegisteredBuf,
        at: u64,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        Box::pin(self.transfer(local, at, len, remote, false))
    }

    fn writes_files(&self) -> bool {
        self.conn.writes_files()
    }

    fn rdma_write_file<'a>(
        &'a self,
        src: Arc<dyn FileRange>,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        Box::pin(self.conn.rdma_write_file(src, len, remote))
    }

    fn reads_files(&self) -> bool {
        self.conn.reads_files()
    }

    fn rdma_read_file<'a>(
        &'a self,
        sink: Arc<dyn FileSink>,
        len: u64,
        remote: &'a [BufferDescriptorV1],
    ) -> BoxFuture<'a, Result<(), DirectError>> {
        Box::pin(self.conn.rdma_read_file(sink, len, remote))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.conn.close())
    }

    fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    fn remote_invalidation(&self) -> bool {
        self.pd.remote_invalidation()
    }
}
