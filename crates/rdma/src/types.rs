//! Plain value types shared by every provider: STags, access rights, work
//! requests, completions and connection parameters.

use std::fmt;

/// A Steering Tag (iWARP STag, verbs rkey/lkey): names a registered memory
/// region to the local and the remote RNIC. In iWARP the low 8 bits are the
/// consumer "key" and the upper 24 bits the index.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct STag(pub u32);

impl fmt::Debug for STag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "STag({:#010x})", self.0)
    }
}

/// Access rights of a memory region (verbs `IBV_ACCESS_*`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// Local read is always granted; this is the empty set.
    pub const LOCAL_READ: Access = Access(0);
    /// The local RNIC may write into the region (receives, RDMA Read sinks).
    pub const LOCAL_WRITE: Access = Access(1);
    /// A remote peer may RDMA Write into the region.
    pub const REMOTE_WRITE: Access = Access(2);
    /// A remote peer may RDMA Read from the region.
    pub const REMOTE_READ: Access = Access(4);

    /// Whether every right in `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
    /// Union of two sets of rights.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
    /// The raw bits (1 local write, 2 remote write, 4 remote read).
    pub const fn bits(self) -> u8 {
        self.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        self.union(rhs)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Access(r{}{}{})",
            if self.contains(Access::LOCAL_WRITE) {
                "w"
            } else {
                ""
            },
            if self.contains(Access::REMOTE_WRITE) {
                "W"
            } else {
                ""
            },
            if self.contains(Access::REMOTE_READ) {
                "R"
            } else {
                ""
            }
        )
    }
}

/// A buffer on the remote peer, as advertised to us (e.g. by an SMB Direct
/// Buffer Descriptor V1): STag, Tagged Offset (the remote virtual address of
/// the first byte) and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteBuf {
    /// The remote region's STag (rkey).
    pub stag: STag,
    /// Tagged Offset (remote address) of the first byte.
    pub to: u64,
    /// Number of bytes.
    pub len: u32,
}

/// A scatter/gather entry: `len` bytes at `offset` (relative to the start of
/// the region, not its address) in a local memory region.
#[derive(Debug)]
pub struct Sge<'a, M> {
    /// The local memory region.
    pub mr: &'a M,
    /// Byte offset from the start of the region.
    pub offset: u64,
    /// Number of bytes.
    pub len: u32,
}

impl<M> Clone for Sge<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M> Copy for Sge<'_, M> {}

impl<'a, M> Sge<'a, M> {
    /// An entry for `len` bytes at `offset` in `mr`.
    pub fn new(mr: &'a M, offset: u64, len: u32) -> Self {
        Sge { mr, offset, len }
    }
}

/// What a send-queue work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// RDMAP Send (opcode 3; 5 when `solicited`).
    Send,
    /// RDMAP Send with Invalidate (opcode 4; 6 when `solicited`): the peer
    /// invalidates `stag` in its own STag table before completing the receive.
    SendWithInvalidate {
        /// The peer's STag to invalidate.
        stag: STag,
    },
    /// RDMA Write of the local scatter list into `remote`.
    RdmaWrite {
        /// Destination on the peer (needs remote write access there).
        remote: RemoteBuf,
    },
    /// RDMA Read of `remote` into the local scatter list (one entry on iWARP).
    RdmaRead {
        /// Source on the peer (needs remote read access there).
        remote: RemoteBuf,
    },
    /// Invalidate one of our own STags (verbs `IBV_WR_LOCAL_INV`); no scatter
    /// list. Completes once the STag can no longer be used by the peer.
    LocalInvalidate {
        /// Our STag to invalidate.
        stag: STag,
    },
}

/// A send-queue work request (verbs `ibv_send_wr`). Every work request is
/// signalled: it produces exactly one [`Completion`].
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a, M> {
    /// Consumer cookie returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local data (source for Send/Write, sink for Read; empty for LocalInvalidate).
    pub sg: &'a [Sge<'a, M>],
    /// Set the Solicited Event bit (Send and Send with Invalidate only).
    pub solicited: bool,
}

/// Kind of a completed work request (verbs `ibv_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A Send or Send with Invalidate finished.
    Send,
    /// An RDMA Write finished.
    RdmaWrite,
    /// An RDMA Read finished (data is in the local sink).
    RdmaRead,
    /// A local invalidation finished.
    LocalInvalidate,
    /// A posted receive was filled by an incoming Send.
    Recv,
}

/// Outcome of a work request (verbs `ibv_wc_status`, reduced).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Done.
    Success,
    /// A local length was wrong (e.g. incoming Send longer than the posted receive).
    LocalLengthError,
    /// A local scatter entry named an invalid region, lacked access or was out of bounds.
    LocalProtectionError,
    /// The peer refused an RDMA Read/Write for protection reasons (bad STag, bounds, access).
    RemoteAccessError,
    /// The peer failed the operation for another reason (terminated the stream).
    RemoteOperationError,
    /// The request was never executed: the queue pair went to error/closed.
    Flushed,
    /// The work request was malformed (e.g. too many scatter entries).
    LocalQpOperationError,
}

/// One completion queue entry (verbs `ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The work request's cookie.
    pub wr_id: u64,
    /// What completed.
    pub opcode: WcOpcode,
    /// Whether it succeeded.
    pub status: WcStatus,
    /// Bytes transferred (received bytes for `Recv`, read bytes for `RdmaRead`).
    pub byte_len: u32,
    /// For `Recv` of a Send with Invalidate: the local STag the peer invalidated
    /// (verbs `IBV_WC_WITH_INV` + `invalidated_rkey`).
    pub invalidated: Option<STag>,
    /// For `Recv`: the Send carried the Solicited Event bit.
    pub solicited: bool,
}

/// Connection parameters one side offers (verbs `rdma_conn_param`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnParams {
    /// Opaque consumer private data carried in the connection request/reply
    /// (at most [`MAX_PRIVATE_DATA`] bytes).
    pub private_data: Vec<u8>,
    /// Inbound RDMA Read queue depth: how many Read Requests we accept at once
    /// (verbs `responder_resources`).
    pub ird: u16,
    /// Outbound RDMA Read queue depth: how many Read Requests we issue at once
    /// (verbs `initiator_depth`).
    pub ord: u16,
}

impl Default for ConnParams {
    fn default() -> Self {
        ConnParams {
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
        }
    }
}

/// Most private data a provider carries (RFC 5044 allows 512; we keep to the
/// 256 that Linux and Chelsio accept, enhanced-mode header not included).
pub const MAX_PRIVATE_DATA: usize = 252;

/// What the peer offered during connection setup.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PeerParams {
    /// The peer's private data (the enhanced-mode IRD/ORD header removed).
    pub private_data: Vec<u8>,
    /// The peer's IRD, when the transport carries it (0 when unknown, e.g. MPA rev 1).
    pub ird: u16,
    /// The peer's ORD, when the transport carries it (0 when unknown).
    pub ord: u16,
}

/// Queue pair sizing (verbs `ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Most outstanding send work requests.
    pub max_send_wr: u32,
    /// Most outstanding posted receives.
    pub max_recv_wr: u32,
    /// Most scatter entries per send work request.
    pub max_send_sge: u32,
    /// Most scatter entries per receive.
    pub max_recv_sge: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: 512,
            max_recv_wr: 512,
            max_send_sge: 16,
            max_recv_sge: 1,
        }
    }
}

/// What a device granted a queue pair, for sizing the buffers and work
/// queues a connection uses over it ([`crate::QueuePair::granted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Granted {
    /// The work queue sizes and scatter entries the queue pair has.
    pub caps: QpCaps,
    /// Sends of at most this many bytes may be copied into the work request
    /// (inline data; 0: none).
    pub max_inline: u32,
    /// The largest memory region the device registers.
    pub max_mr_size: u64,
}

/// State of a queue pair as the consumer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Created; receives may be posted, sends may not yet.
    Init,
    /// Connected: ready to send and receive.
    Rts,
    /// Closing or closed; outstanding work requests are flushed.
    Closed,
}

/// Why a queue pair closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// [`crate::QueuePair::disconnect`] was called locally.
    LocalDisconnect,
    /// The peer closed the connection cleanly.
    PeerDisconnect,
    /// We detected a protocol error and sent a Terminate.
    LocalTerminate(TermInfo),
    /// The peer sent us a Terminate.
    PeerTerminate(TermInfo),
    /// The transport failed (I/O error, reset).
    Transport(String),
}

/// The error triple of an iWARP Terminate message (RFC 5040 section 4.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermInfo {
    /// Layer: 0 RDMAP, 1 DDP, 2 LLP (MPA).
    pub layer: u8,
    /// Error type within the layer.
    pub etype: u8,
    /// Error code within the type.
    pub ecode: u8,
}
