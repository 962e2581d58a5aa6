//! The RDMA provider interface: protection domains and memory regions,
//! queue pairs, and connection setup.
//!
//! The shape follows verbs and rdmacm so that an rdma-core provider fits
//! behind the same traits: `wr_id` cookies, scatter entries of
//! `(mr, offset, len)`, remote buffers of `(stag, to, len)`, one signalled
//! completion per work request, receives posted before they are needed, and
//! connection setup in two steps (create the queue pair and post receives,
//! then connect or accept with private data and IRD/ORD).
//!
//! Posting is synchronous and cheap (it only queues the work request);
//! completions arrive on the queue pair's [`CompletionQueue`].
//!
//! Lifetimes: a memory region stays registered while any handle to it (the
//! consumer's, or one held by a queued work request) exists; dropping the last
//! handle deregisters it. Work requests hold their own handles, so a buffer
//! cannot be freed under an in-flight operation.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::cq::CompletionQueue;
use crate::error::Result;
use crate::sink::FileSink;
use crate::source::FileRange;
use crate::types::{
    Access, CloseReason, ConnParams, Granted, PeerParams, QpCaps, QpState, RemoteBuf, STag, SendOp,
    SendWr, Sge,
};

/// A connection's driver handed to its consumer ([`QueuePair::take_driver`]).
pub type Driver = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Most bytes of the head of a Send posted with [`QueuePair::post_send_owned`]
/// (an SMB Direct data header is 24).
pub const OWNED_HEAD_MAX: usize = 32;

/// A registered memory region: an owned buffer plus its STag and rights.
///
/// Cloning yields another handle to the same registration. The provider reads
/// and writes the buffer when the peer accesses it remotely; the consumer
/// reaches it through [`MemoryRegion::with`]/[`MemoryRegion::with_mut`] (do not
/// touch bytes that are the target of an in-flight operation).
pub trait MemoryRegion: Clone + Send + Sync + 'static {
    /// The STag (rkey; on iWARP also the lkey).
    fn stag(&self) -> STag;
    /// The Tagged Offset (remote address) of byte 0, as advertised to peers.
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the region is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The access rights it was registered with.
    fn access(&self) -> Access;
    /// False once the STag was invalidated (locally or by a peer's Send with
    /// Invalidate); an invalid region is refused for remote access.
    fn is_valid(&self) -> bool;
    /// Describe `len` bytes at `offset` for a peer (e.g. an SMB Direct Buffer
    /// Descriptor V1); `None` when out of bounds.
    fn remote(&self, offset: u64, len: u32) -> Option<RemoteBuf> {
        let end = offset.checked_add(u64::from(len))?;
        if end > self.len() as u64 {
            return None;
        }
        Some(RemoteBuf {
            stag: self.stag(),
            to: self.addr().checked_add(offset)?,
            len,
        })
    }
    /// Deregister and hand the buffer back, when this is the last handle and
    /// the provider can (otherwise the handle is returned).
    fn take_buffer(self) -> std::result::Result<Vec<u8>, Self> {
        Err(self)
    }
    /// Run `f` over the bytes.
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R;
    /// Run `f` over the bytes, mutably.
    fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R;
    /// Copy `dst.len()` bytes from `offset`; false when out of bounds.
    fn read_at(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.with(
            |b| match offset.checked_add(dst.len()).and_then(|e| b.get(offset..e)) {
                Some(s) => {
                    dst.copy_from_slice(s);
                    true
                }
                None => false,
            },
        )
    }
    /// Copy `src` to `offset`; false when out of bounds.
    fn write_at(&self, offset: usize, src: &[u8]) -> bool {
        self.with_mut(|b| {
            match offset
                .checked_add(src.len())
                .and_then(|e| b.get_mut(offset..e))
            {
                Some(s) => {
                    s.copy_from_slice(src);
                    true
                }
                None => false,
            }
        })
    }
}

/// A protection domain: the scope in which STags are valid. Memory regions
/// registered here can be used by every queue pair created in it.
pub trait ProtectionDomain: Clone + Send + Sync + 'static {
    /// The memory region type.
    type Mr: MemoryRegion;
    /// Register `buf` (the region owns it from now on) with `access`.
    /// Remote write requires local write, as in verbs.
    fn register(&self, buf: Vec<u8>, access: Access) -> Result<Self::Mr>;
    /// Register a zeroed buffer of `len` bytes.
    fn alloc(&self, len: usize, access: Access) -> Result<Self::Mr> {
        self.register(vec![0; len], access)
    }
    /// Whether a peer may invalidate our regions' STags (Send with
    /// Invalidate). Verbs regions registered from user space cannot be
    /// (only fast-register MRs and memory windows can), so consumers ask
    /// peers for plain Sends there.
    fn remote_invalidation(&self) -> bool {
        true
    }
}

/// A connected (or connecting) reliable queue pair.
pub trait QueuePair: Send + Sync + 'static {
    /// The memory region type used in scatter lists.
    type Mr: MemoryRegion;

    /// Queue a send-queue work request; it completes on [`QueuePair::cq`].
    /// Fails at once (nothing queued) when not connected, the queue is full,
    /// or the request is malformed.
    fn post_send(&self, wr: &SendWr<'_, Self::Mr>) -> Result<()>;

    /// Post a receive buffer for one incoming Send. Allowed before connect or
    /// accept. A Send that finds no posted receive terminates the connection.
    fn post_recv(&self, wr_id: u64, sg: &[Sge<'_, Self::Mr>]) -> Result<()>;

    /// The completion queue of both work queues.
    fn cq(&self) -> &CompletionQueue;

    /// Current state.
    fn state(&self) -> QpState;

    /// Why it closed, once it has.
    fn close_reason(&self) -> Option<CloseReason>;

    /// Wait until the queue pair is closed (completions for outstanding work
    /// requests are then flushed to the CQ).
    fn closed(&self) -> impl Future<Output = CloseReason> + Send + '_;

    /// Begin a graceful disconnect: outstanding work is flushed, the
    /// connection is closed.
    fn disconnect(&self);

    /// The peer's connection parameters (private data, IRD, ORD).
    fn peer_params(&self) -> PeerParams;

    /// A hint from the consumer: how many of its upper layer's messages the peer
    /// has in flight towards it now (a client: requests sent and not yet
    /// answered). A provider that takes in many messages at once (soft-iWARP's
    /// driver, from one socket read) hands them on in batches of about half of
    /// it, so that the consumer answers the first half while the rest is taken.
    /// Ignored by default.
    fn set_in_flight(&self, n: usize) {
        let _ = n;
    }

    /// Asks the provider to hand out the future that drives this queue pair's
    /// connection ([`QueuePair::take_driver`]) instead of running it as a task
    /// of its own, so that the consumer polls it in its own task (the wakes
    /// between the driver and the consumer are then that task's own). Call it
    /// before connecting or accepting; true when the provider will. A consumer
    /// that was told so must take the driver once connected and poll it until
    /// it ends (it ends when the connection does): nothing moves until then.
    /// False by default: the provider runs its own driver (verbs' threads).
    fn hold_driver(&self) -> bool {
        false
    }

    /// The driver held back at [`QueuePair::hold_driver`]'s request, once
    /// connected; `None` when the provider runs its own (or it was taken).
    fn take_driver(&self) -> Option<Driver> {
        None
    }

    /// Negotiated `(ird, ord)`: inbound and outbound RDMA Read limits in force.
    fn read_limits(&self) -> (u16, u16);

    /// Local transport address.
    fn local_addr(&self) -> SocketAddr;

    /// Peer transport address.
    fn peer_addr(&self) -> SocketAddr;

    /// What the device granted this queue pair (work requests, scatter
    /// entries, inline data, largest region); `None` when the provider has no
    /// fixed limits (soft-iWARP).
    fn granted(&self) -> Option<Granted> {
        None
    }

    /// Shorthand: post a Send of `sg`.
    fn post_send_simple(&self, wr_id: u64, sg: &[Sge<'_, Self::Mr>]) -> Result<()> {
        self.post_send(&SendWr {
            wr_id,
            op: SendOp::Send,
            sg,
            solicited: false,
        })
    }

    /// Shorthand: post a Send with Invalidate of `stag` carrying `sg`.
    fn post_send_inv(&self, wr_id: u64, sg: &[Sge<'_, Self::Mr>], stag: STag) -> Result<()> {
        self.post_send(&SendWr {
            wr_id,
            op: SendOp::SendWithInvalidate { stag },
            sg,
            solicited: false,
        })
    }

    /// Whether [`QueuePair::post_send_owned`] sends a message from the caller's
    /// own buffer (soft-iWARP); otherwise every Send goes from a registered region.
    fn sends_owned(&self) -> bool {
        false
    }

    /// Posts a Send (with Invalidate of `inv`) of `head` followed by
    /// `body[range]`, sent from `body` itself, which the provider keeps until the
    /// bytes are on their way: nothing is copied into a registered send buffer
    /// first. `head` is at most [`OWNED_HEAD_MAX`] bytes. Refused unless
    /// [`QueuePair::sends_owned`].
    fn post_send_owned(
        &self,
        wr_id: u64,
        head: &[u8],
        body: Arc<Vec<u8>>,
        range: std::ops::Range<usize>,
        inv: Option<STag>,
    ) -> Result<()> {
        let _ = (wr_id, head, body, range, inv);
        Err(crate::error::RdmaError::InvalidRequest(
            "sends from owned buffers not supported",
        ))
    }

    /// Whether [`QueuePair::post_recv_owned`] receives a Send into a buffer of
    /// its own (soft-iWARP); otherwise every receive goes into a registered
    /// region.
    fn receives_owned(&self) -> bool {
        false
    }

    /// Posts a receive of at most `len` bytes (more than 0) into a buffer the
    /// provider allocates when the Send arrives, sized to it where it can: nothing
    /// is written to a registered region. When its `Recv` completion comes out
    /// of the queue with `Success`, [`QueuePair::take_received`] hands over the
    /// buffer holding the message. Refused unless [`QueuePair::receives_owned`].
    fn post_recv_owned(&self, wr_id: u64, len: usize) -> Result<()> {
        let _ = (wr_id, len);
        Err(crate::error::RdmaError::InvalidRequest(
            "receives into owned buffers not supported",
        ))
    }

    /// The buffer of the owned receive `wr_id` whose successful completion was
    /// taken from the queue ([`QueuePair::post_recv_owned`]); `None` for any other.
    fn take_received(&self, wr_id: u64) -> Option<Vec<u8>> {
        let _ = wr_id;
        None
    }

    /// Shorthand: RDMA Write `sg` into `remote`.
    fn post_write(&self, wr_id: u64, sg: &[Sge<'_, Self::Mr>], remote: RemoteBuf) -> Result<()> {
        self.post_send(&SendWr {
            wr_id,
            op: SendOp::RdmaWrite { remote },
            sg,
            solicited: false,
        })
    }

    /// Whether [`QueuePair::post_write_file`] works on this queue pair (soft-iWARP);
    /// a caller asks first and otherwise copies the data into a region.
    fn writes_files(&self) -> bool {
        false
    }

    /// RDMA Write `n` bytes of `src` from its byte `at` into `remote`, sent from the
    /// file (sendfile) rather than from a region; completes like
    /// [`QueuePair::post_write`], once the last byte was handed to the transport.
    /// Refused by a provider that does not [write files](QueuePair::writes_files).
    fn post_write_file(
        &self,
        wr_id: u64,
        src: Arc<dyn FileRange>,
        at: usize,
        n: usize,
        remote: RemoteBuf,
    ) -> Result<()> {
        let _ = (wr_id, src, at, n, remote);
        Err(crate::RdmaError::InvalidRequest(
            "this provider does not write from files",
        ))
    }

    /// Whether [`QueuePair::post_read_file`] works on this queue pair (soft-iWARP
    /// with CRC off); a caller asks first and otherwise reads into a region.
    fn reads_files(&self) -> bool {
        false
    }

    /// RDMA Read `remote` into the `n` bytes of the file range `sink` from its byte
    /// `at`: the payload goes from the transport into the file (splice), not
    /// through a region; completes like [`QueuePair::post_read`], in error
    /// (`LocalProtectionError`) when the file refused a byte. Refused by a provider
    /// that does not [read into files](QueuePair::reads_files).
    fn post_read_file(
        &self,
        wr_id: u64,
        sink: Arc<dyn FileSink>,
        at: usize,
        n: usize,
        remote: RemoteBuf,
    ) -> Result<()> {
        let _ = (wr_id, sink, at, n, remote);
        Err(crate::RdmaError::InvalidRequest(
            "this provider does not read into files",
        ))
    }

    /// Shorthand: RDMA Read `remote` into `sink`.
    fn post_read(&self, wr_id: u64, sink: Sge<'_, Self::Mr>, remote: RemoteBuf) -> Result<()> {
        self.post_send(&SendWr {
            wr_id,
            op: SendOp::RdmaRead { remote },
            sg: &[sink],
            solicited: false,
        })
    }

    /// Shorthand: invalidate our own `stag`.
    fn post_local_invalidate(&self, wr_id: u64, stag: STag) -> Result<()> {
        self.post_send(&SendWr {
            wr_id,
            op: SendOp::LocalInvalidate { stag },
            sg: &[],
            solicited: false,
        })
    }
}

/// An RDMA provider (a device, or the soft-iWARP stack).
pub trait Provider: Clone + Send + Sync + 'static {
    /// Memory region type.
    type Mr: MemoryRegion;
    /// Protection domain type.
    type Pd: ProtectionDomain<Mr = Self::Mr>;
    /// Queue pair type.
    type Qp: QueuePair<Mr = Self::Mr>;
    /// An active connection whose queue pair exists but is not yet connected.
    type Connecting: Connecting<Qp = Self::Qp>;
    /// A passive endpoint.
    type Listener: Listener<Qp = Self::Qp, Pd = Self::Pd>;

    /// Allocate a protection domain.
    fn alloc_pd(&self) -> Result<Self::Pd>;

    /// Resolve and reach `addr` and create a queue pair in `pd` (verbs:
    /// `rdma_resolve_addr`/`route` + `rdma_create_qp`; soft-iWARP: TCP connect).
    /// Post receives on [`Connecting::qp`], then call [`Connecting::connect`].
    fn connect(
        &self,
        pd: &Self::Pd,
        addr: SocketAddr,
        caps: QpCaps,
    ) -> impl Future<Output = Result<Self::Connecting>> + Send;

    /// Listen on `addr` (port 0 picks one). Each accepted connection gets a
    /// protection domain of its own ([`ConnectRequest::pd`]): what one peer
    /// may name by STag never includes another connection's memory.
    fn listen(
        &self,
        addr: SocketAddr,
        caps: QpCaps,
    ) -> impl Future<Output = Result<Self::Listener>> + Send;
}

/// The active side between queue pair creation and connection.
pub trait Connecting: Send + 'static {
    /// Queue pair type.
    type Qp: QueuePair;
    /// The queue pair, for posting receives before connecting.
    fn qp(&self) -> &Self::Qp;
    /// Send the connection request with `params`; resolves once the peer
    /// accepted (its parameters returned) or fails with
    /// [`crate::RdmaError::Rejected`].
    fn connect(
        self,
        params: ConnParams,
    ) -> impl Future<Output = Result<(Self::Qp, PeerParams)>> + Send;
}

/// A passive endpoint producing connection requests.
pub trait Listener: Send + Sync + 'static {
    /// Queue pair type.
    type Qp: QueuePair;
    /// Protection domain type of accepted connections.
    type Pd: ProtectionDomain<Mr = <Self::Qp as QueuePair>::Mr>;
    /// A pending connection request.
    type Request: ConnectRequest<Qp = Self::Qp, Pd = Self::Pd>;
    /// Wait for the next connection request (the initiator's parameters have
    /// been received; nothing has been answered yet).
    fn accept(&self) -> impl Future<Output = Result<Self::Request>> + Send + '_;
    /// The bound address.
    fn local_addr(&self) -> SocketAddr;
}

/// An initiator's request, seen before answering it.
pub trait ConnectRequest: Send + 'static {
    /// Queue pair type.
    type Qp: QueuePair;
    /// Protection domain type.
    type Pd: ProtectionDomain<Mr = <Self::Qp as QueuePair>::Mr>;
    /// The initiator's private data, IRD and ORD.
    fn peer(&self) -> &PeerParams;
    /// The initiator's address.
    fn peer_addr(&self) -> SocketAddr;
    /// The queue pair that accepting will connect; post receives here first.
    fn qp(&self) -> &Self::Qp;
    /// This connection's own protection domain (new for each request, as a
    /// verbs server allocates one per connection): register its buffers here.
    fn pd(&self) -> &Self::Pd;
    /// Accept with our parameters (our ORD is clamped to the initiator's IRD).
    fn accept(self, params: ConnParams) -> impl Future<Output = Result<Self::Qp>> + Send;
    /// Refuse, sending `private_data` in the reject reply.
    fn reject(self, private_data: &[u8]) -> impl Future<Output = Result<()>> + Send;
}
