//! Soft-iWARP queue pair: the state shared between the consumer's handle and
//! the connection driver (work queues, completion queue, close reason).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::mr::{SoftMr, SoftPd};
use crate::cq::CompletionQueue;
use crate::error::{RdmaError, Result};
use crate::provider::{Driver, MemoryRegion, QueuePair, OWNED_HEAD_MAX};
use crate::sink::FileSink;
use crate::source::FileRange;
use crate::types::{
    Access, CloseReason, PeerParams, QpCaps, QpState, RemoteBuf, SendOp, SendWr, Sge,
};

/// A local scatter entry resolved to (region, buffer offset, length).
pub(crate) type Seg = (SoftMr, usize, usize);

/// What a queued send work request does.
#[derive(Debug)]
pub(crate) enum WqeKind {
    Send {
        inv: Option<u32>,
    },
    Write {
        remote: RemoteBuf,
    },
    Read {
        remote: RemoteBuf,
    },
    /// An RDMA Read into `n` bytes of a file range from its byte `at`.
    ReadFile {
        remote: RemoteBuf,
        sink: Arc<dyn FileSink>,
        at: usize,
    },
    LocalInv {
        stag: u32,
    },
    /// A Send (with Invalidate of `inv`) from the consumer's own buffer
    /// ([`QueuePair::post_send_owned`]).
    SendOwned {
        inv: Option<u32>,
        msg: OwnedSend,
    },
}

/// The bytes of a Send posted from the consumer's own buffer: `head`'s first
/// `head_len` bytes, then `body[range]` (checked when posted).
#[derive(Debug)]
pub(crate) struct OwnedSend {
    pub head: [u8; OWNED_HEAD_MAX],
    pub head_len: usize,
    pub body: Arc<Vec<u8>>,
    pub range: std::ops::Range<usize>,
}

impl OwnedSend {
    /// The head's bytes.
    pub fn head(&self) -> &[u8] {
        self.head.get(..self.head_len).unwrap_or_default()
    }

    /// The body's bytes.
    pub fn body(&self) -> &[u8] {
        self.body.get(self.range.clone()).unwrap_or_default()
    }
}

/// A queued send work request holding its own region handles.
#[derive(Debug)]
pub(crate) struct SendWqe {
    pub wr_id: u64,
    pub kind: WqeKind,
    pub sg: Vec<Seg>,
    pub total: usize,
    pub solicited: bool,
    /// An RDMA Write's payload from a file instead of `sg` (empty then): the
    /// source and its first byte.
    pub file: Option<(Arc<dyn FileRange>, usize)>,
}

/// A posted receive.
#[derive(Debug)]
pub(crate) struct RecvWqe {
    pub wr_id: u64,
    pub sg: Vec<Seg>,
    pub total: usize,
}

impl RecvWqe {
    /// A receive into a buffer of its own ([`QueuePair::post_recv_owned`]): no
    /// scatter entries and room for a payload; the engine allocates the buffer
    /// when the Send arrives.
    pub fn is_owned(&self) -> bool {
        self.sg.is_empty() && self.total > 0
    }
}

#[derive(Debug)]
pub(crate) struct QpInner {
    pub state: QpState,
    pub sq: VecDeque<SendWqe>,
    pub rq: VecDeque<RecvWqe>,
    pub reason: Option<CloseReason>,
    pub peer: PeerParams,
    pub ird: u16,
    pub ord: u16,
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub disconnect: bool,
    /// CRC-32C is on (a Read Response's payload is checked before it lands, so
    /// it cannot go from the socket into a file).
    pub crc: bool,
    /// Buffers of owned receives that completed, with their wr_id, until
    /// [`QueuePair::take_received`] takes them (in completion order).
    pub received: VecDeque<(u64, Vec<u8>)>,
}

/// State shared by the queue pair handle and its driver.
#[derive(Debug)]
pub(crate) struct QpShared {
    pub pd: SoftPd,
    pub caps: QpCaps,
    pub cq: CompletionQueue,
    inner: Mutex<QpInner>,
    /// Wakes the driver (work posted, disconnect requested).
    pub wake: Notify,
    /// Wakes the driver for a disconnect only: heard even while it waits for its
    /// socket to take more bytes (when work posted does not wake it), so a peer that
    /// stops reading cannot keep the connection open.
    pub disconnect_ev: Notify,
    /// Signalled when the queue pair closes.
    pub closed_ev: Notify,
    /// The consumer's hint of how many messages the peer has in flight towards
    /// it, plus one; 0 while no hint was given ([`QueuePair::set_in_flight`]).
    in_flight: AtomicU32,
    /// Whether the consumer polls the driver itself, and the driver until it
    /// takes it ([`QueuePair::hold_driver`]).
    driver: Mutex<DriverSlot>,
}

/// A queue pair's driver when its consumer asked to poll it
/// ([`QueuePair::hold_driver`]): held here from the connection's start until taken.
#[derive(Default)]
pub(crate) struct DriverSlot {
    /// The consumer asked for it: the connection's start leaves it here.
    pub hold: bool,
    /// The driver, until [`QueuePair::take_driver`].
    pub held: Option<Driver>,
}

impl std::fmt::Debug for DriverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverSlot")
            .field("hold", &self.hold)
            .field("held", &self.held.is_some())
            .finish()
    }
}

impl Drop for QpShared {
    fn drop(&mut self) {
        super::stats::qp_dropped();
    }
}

impl QpShared {
    /// Queues a checked receive: NotConnected once the queue pair is closed,
    /// QueueFull at its `max_recv_wr`.
    fn enqueue_recv(&self, wqe: RecvWqe) -> Result<()> {
        let mut g = self.lock();
        if g.state == QpState::Closed {
            return Err(RdmaError::NotConnected);
        }
        if g.rq.len() >= self.caps.max_recv_wr as usize {
            return Err(RdmaError::QueueFull);
        }
        g.rq.push_back(wqe);
        Ok(())
    }

    /// Queues a checked send-queue work request and wakes the driver: NotConnected
    /// unless the queue pair is ready to send, QueueFull at its `max_send_wr`.
    fn enqueue_send(&self, wqe: SendWqe) -> Result<()> {
        {
            let mut g = self.lock();
            if g.state != QpState::Rts {
                return Err(RdmaError::NotConnected);
            }
            if g.sq.len() >= self.caps.max_send_wr as usize {
                return Err(RdmaError::QueueFull);
            }
            g.sq.push_back(wqe);
        }
        self.wake.notify_one();
        Ok(())
    }

    pub(crate) fn new(pd: SoftPd, caps: QpCaps) -> Arc<QpShared> {
        super::stats::qp_created();
        Arc::new(QpShared {
            pd,
            caps,
            cq: CompletionQueue::new(),
            inner: Mutex::new(QpInner {
                state: QpState::Init,
                sq: VecDeque::new(),
                rq: VecDeque::new(),
                reason: None,
                peer: PeerParams::default(),
                ird: 0,
                ord: 0,
                local: None,
                remote: None,
                disconnect: false,
                crc: false,
                received: VecDeque::new(),
            }),
            wake: Notify::new(),
            closed_ev: Notify::new(),
            disconnect_ev: Notify::new(),
            in_flight: AtomicU32::new(0),
            driver: Mutex::new(DriverSlot::default()),
        })
    }

    /// The consumer's last [in-flight hint](QueuePair::set_in_flight), if it
    /// gave one.
    pub(crate) fn in_flight(&self) -> Option<usize> {
        match self.in_flight.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n as usize - 1),
        }
    }

    /// The driver's slot ([`DriverSlot`]).
    pub(crate) fn driver_slot(&self) -> MutexGuard<'_, DriverSlot> {
        self.driver.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, QpInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn resolve(&self, sg: &[Sge<'_, SoftMr>], need: Access) -> Result<(Vec<Seg>, usize)> {
        let mut v = Vec::with_capacity(sg.len());
        let mut total = 0usize;
        for s in sg {
            if !self.pd.owns(s.mr) {
                return Err(RdmaError::InvalidRequest(
                    "region not in this protection domain",
                ));
            }
            if !s.mr.is_valid() {
                return Err(RdmaError::InvalidRequest("region invalidated"));
            }
            if !s.mr.access().contains(need) {
                return Err(RdmaError::InvalidRequest("region lacks local write access"));
            }
            let off = usize::try_from(s.offset)
                .map_err(|_| RdmaError::InvalidRequest("offset out of range"))?;
            let len = s.len as usize;
            match off.checked_add(len) {
                Some(end) if end <= s.mr.len() => {}
                _ => return Err(RdmaError::InvalidRequest("scatter entry out of bounds")),
            }
            total = total
                .checked_add(len)
                .ok_or(RdmaError::InvalidRequest("scatter list too long"))?;
            v.push((s.mr.clone(), off, len));
        }
        if total > u32::MAX as usize {
            return Err(RdmaError::InvalidRequest("message longer than 4 GiB"));
        }
        Ok((v, total))
    }

    /// Asks the driver to close the connection, and wakes it whatever it waits for.
    pub(crate) fn request_disconnect(&self) {
        self.lock().disconnect = true;
        self.wake.notify_one();
        self.disconnect_ev.notify_one();
    }

    /// Mark closed with `reason` (first reason wins) and wake waiters.
    pub(crate) fn set_closed(&self, reason: CloseReason) {
        {
            let mut g = self.lock();
            g.state = QpState::Closed;
            if g.reason.is_none() {
                g.reason = Some(reason);
            }
        }
        self.closed_ev.notify_waiters();
    }
}

/// A soft-iWARP queue pair handle. Dropping the last handle disconnects.
#[derive(Clone, Debug)]
pub struct SoftQp {
    h: Arc<QpHandle>,
}

#[derive(Debug)]
struct QpHandle {
    shared: Arc<QpShared>,
}

impl Drop for QpHandle {
    fn drop(&mut self) {
        self.shared.request_disconnect();
        // A driver held for a consumer that never took it would hold the queue
        // pair (and the socket) forever: dropping it closes the socket.
        let held = self.shared.driver_slot().held.take();
        drop(held);
    }
}

impl SoftQp {
    pub(crate) fn new(shared: Arc<QpShared>) -> SoftQp {
        SoftQp {
            h: Arc::new(QpHandle { shared }),
        }
    }
    pub(crate) fn shared(&self) -> &Arc<QpShared> {
        &self.h.shared
    }
}

impl QueuePair for SoftQp {
    type Mr = SoftMr;

    fn post_send(&self, wr: &SendWr<'_, SoftMr>) -> Result<()> {
        let s = self.shared();
        let need = match wr.op {
            SendOp::RdmaRead { .. } => Access::LOCAL_WRITE,
            _ => Access::LOCAL_READ,
        };
        if wr.sg.len() > s.caps.max_send_sge as usize {
            return Err(RdmaError::InvalidRequest("too many scatter entries"));
        }
        let (sg, total) = s.resolve(wr.sg, need)?;
        let kind = match wr.op {
            SendOp::Send => WqeKind::Send { inv: None },
            SendOp::SendWithInvalidate { stag } => WqeKind::Send { inv: Some(stag.0) },
            SendOp::RdmaWrite { remote } => {
                if total > remote.len as usize {
                    return Err(RdmaError::InvalidRequest("write longer than remote buffer"));
                }
                WqeKind::Write { remote }
            }
            SendOp::RdmaRead { remote } => {
                if sg.len() != 1 {
                    return Err(RdmaError::InvalidRequest("RDMA Read takes one sink entry"));
                }
                if total != remote.len as usize {
                    return Err(RdmaError::InvalidRequest(
                        "read sink length differs from remote length",
                    ));
                }
                WqeKind::Read { remote }
            }
            SendOp::LocalInvalidate { stag } => WqeKind::LocalInv { stag: stag.0 },
        };
        s.enqueue_send(SendWqe {
            wr_id: wr.wr_id,
            kind,
            sg,
            total,
            solicited: wr.solicited,
            file: None,
        })
    }

    fn sends_owned(&self) -> bool {
        true
    }

    fn post_send_owned(
        &self,
        wr_id: u64,
        head: &[u8],
        body: Arc<Vec<u8>>,
        range: std::ops::Range<usize>,
        inv: Option<crate::types::STag>,
    ) -> Result<()> {
        if body.get(range.clone()).is_none() {
            return Err(RdmaError::InvalidRequest("send outside its buffer"));
        }
        let mut h = [0u8; OWNED_HEAD_MAX];
        h.get_mut(..head.len())
            .ok_or(RdmaError::InvalidRequest("send head too long"))?
            .copy_from_slice(head);
        let total = head.len() + range.len();
        self.shared().enqueue_send(SendWqe {
            wr_id,
            kind: WqeKind::SendOwned {
                inv: inv.map(|s| s.0),
                msg: OwnedSend {
                    head: h,
                    head_len: head.len(),
                    body,
                    range,
                },
            },
            sg: Vec::new(),
            total,
            solicited: false,
            file: None,
        })
    }

    fn writes_files(&self) -> bool {
        true
    }

    fn post_write_file(
        &self,
        wr_id: u64,
        src: Arc<dyn FileRange>,
        at: usize,
        n: usize,
        remote: RemoteBuf,
    ) -> Result<()> {
        if n > remote.len as usize {
            return Err(RdmaError::InvalidRequest("write longer than remote buffer"));
        }
        if at.checked_add(n).is_none_or(|e| e > src.len()) {
            return Err(RdmaError::InvalidRequest("write outside its file range"));
        }
        self.shared().enqueue_send(SendWqe {
            wr_id,
            kind: WqeKind::Write { remote },
            sg: Vec::new(),
            total: n,
            solicited: false,
            file: Some((src, at)),
        })
    }

    fn reads_files(&self) -> bool {
        let g = self.shared().lock();
        g.state == QpState::Rts && !g.crc
    }

    fn post_read_file(
        &self,
        wr_id: u64,
        sink: Arc<dyn FileSink>,
        at: usize,
        n: usize,
        remote: RemoteBuf,
    ) -> Result<()> {
        if n != remote.len as usize {
            return Err(RdmaError::InvalidRequest(
                "read sink length differs from remote length",
            ));
        }
        if at.checked_add(n).is_none_or(|e| e > sink.len()) {
            return Err(RdmaError::InvalidRequest("read outside its file range"));
        }
        self.shared().enqueue_send(SendWqe {
            wr_id,
            kind: WqeKind::ReadFile { remote, sink, at },
            sg: Vec::new(),
            total: n,
            solicited: false,
            file: None,
        })
    }

    fn post_recv(&self, wr_id: u64, sg: &[Sge<'_, SoftMr>]) -> Result<()> {
        let s = self.shared();
        if sg.len() > s.caps.max_recv_sge.max(1) as usize {
            return Err(RdmaError::InvalidRequest("too many scatter entries"));
        }
        let (sg, total) = s.resolve(sg, Access::LOCAL_WRITE)?;
        s.enqueue_recv(RecvWqe { wr_id, sg, total })
    }

    fn receives_owned(&self) -> bool {
        true
    }

    fn post_recv_owned(&self, wr_id: u64, total: usize) -> Result<()> {
        if total == 0 {
            return Err(RdmaError::InvalidRequest("owned receive of 0 bytes"));
        }
        self.shared().enqueue_recv(RecvWqe {
            wr_id,
            sg: Vec::new(),
            total,
        })
    }

    fn take_received(&self, wr_id: u64) -> Option<Vec<u8>> {
        let mut g = self.shared().lock();
        let i = g.received.iter().position(|(w, _)| *w == wr_id)?;
        g.received.remove(i).map(|(_, b)| b)
    }

    fn cq(&self) -> &CompletionQueue {
        &self.shared().cq
    }

    fn state(&self) -> QpState {
        self.shared().lock().state
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.shared().lock().reason.clone()
    }

    async fn closed(&self) -> CloseReason {
        let s = self.shared();
        loop {
            let n = s.closed_ev.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if let Some(r) = s.lock().reason.clone() {
                return r;
            }
            n.await;
        }
    }

    fn hold_driver(&self) -> bool {
        self.shared().driver_slot().hold = true;
        true
    }

    fn take_driver(&self) -> Option<Driver> {
        self.shared().driver_slot().held.take()
    }

    fn disconnect(&self) {
        self.shared().request_disconnect();
    }

    fn peer_params(&self) -> PeerParams {
        self.shared().lock().peer.clone()
    }

    fn set_in_flight(&self, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX - 1).min(u32::MAX - 1);
        self.shared().in_flight.store(n + 1, Ordering::Relaxed);
    }

    fn read_limits(&self) -> (u16, u16) {
        let g = self.shared().lock();
        (g.ird, g.ord)
    }

    fn local_addr(&self) -> SocketAddr {
        self.shared()
            .lock()
            .local
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    fn peer_addr(&self) -> SocketAddr {
        self.shared()
            .lock()
            .remote
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
}
