//! Verbs queue pairs: posting, and the driver task that moves the device's
//! completions and the connection's CM events into the provider-neutral
//! [`CompletionQueue`] and connection state.

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::ffi::{
    self, ev, IbvCompChannel, IbvQpInitAttr, IbvRecvWr, IbvSendWr, IbvSge, IbvWc, Lib,
};
use super::mr::{DeviceLimits, VerbsMr, VerbsPd};
use super::{set_nonblocking, Fd, IdHolder, VerbsOptions};
use crate::cq::CompletionQueue;
use crate::error::{RdmaError, Result};
use crate::provider::QueuePair;
use crate::types::{
    Access, CloseReason, Completion, Granted, PeerParams, QpCaps, QpState, STag, SendOp, SendWr,
    Sge, WcOpcode, WcStatus,
};

/// How long a closing queue pair waits for the device to flush outstanding
/// work requests before flushing them itself.
const FLUSH_GRACE: Duration = Duration::from_secs(2);
/// Most scatter entries one work request may carry here.
const MAX_SGE: usize = 16;

/// Where connection setup stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Active side: queue pair created, not yet connecting.
    Created,
    /// Passive side: a request not yet answered.
    Requested,
    /// Connect or accept sent.
    Connecting,
    /// Connected.
    Established,
    /// The peer refused, with its private data.
    Rejected(Vec<u8>),
    /// Setup failed.
    Failed(String),
}

struct Slot {
    user: u64,
    kind: WcOpcode,
    _mrs: Vec<VerbsMr>,
}

pub(crate) struct St {
    pub phase: Phase,
    pub state: QpState,
    pub close: Option<CloseReason>,
    pub peer: PeerParams,
    pub limits: (u16, u16),
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    send_out: u32,
    recv_out: u32,
    closing_since: Option<tokio::time::Instant>,
    local_disconnect: bool,
    finished: bool,
}

/// One connection's verbs objects and state, shared by its [`VerbsQp`] and
/// its driver task.
pub(crate) struct Conn {
    lib: &'static Lib,
    pub id: Arc<IdHolder>,
    qp: *mut c_void,
    cq: *mut c_void,
    comp: *mut IbvCompChannel,
    pub pd: VerbsPd,
    cq_out: CompletionQueue,
    st: Mutex<St>,
    pub changed: Notify,
    kick: Notify,
    caps: QpCaps,
    max_inline: u32,
    pub local: SocketAddr,
    pub peer_addr: SocketAddr,
}

// SAFETY: the raw pointers name rdma-core objects (QP, CQ, completion
// channel) that libibverbs allows to be used from any thread; they are
// destroyed once, in Drop, after the driver task has stopped.
unsafe impl Send for Conn {}
// SAFETY: as above; mutable state is behind the mutex.
unsafe impl Sync for Conn {}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: created in `create` on this id, with this CQ and channel;
        // every CQ event was acknowledged; destroyed in dependency order.
        unsafe {
            (self.lib.rdma_destroy_qp)(self.id.id);
            (self.lib.ibv_destroy_cq)(self.cq);
            (self.lib.ibv_destroy_comp_channel)(self.comp);
        }
    }
}

fn unspecified() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

/// The queue pair capabilities to ask a device with `lim` for: `caps` clamped
/// to its work requests and scatter entries, and `max_inline` bytes of inline data.
pub(crate) fn wanted_cap(lim: &DeviceLimits, caps: QpCaps, max_inline: u32) -> ffi::IbvQpCap {
    let max_wr = lim.max_qp_wr.max(1);
    let max_sge = lim.max_sge.clamp(1, MAX_SGE as u32);
    ffi::IbvQpCap {
        max_send_wr: caps.max_send_wr.clamp(1, max_wr),
        max_recv_wr: caps.max_recv_wr.clamp(1, max_wr),
        max_send_sge: caps.max_send_sge.clamp(1, max_sge),
        max_recv_sge: caps.max_recv_sge.clamp(1, max_sge),
        max_inline_data: max_inline,
    }
}

/// Creates an RC queue pair on `cq` with `create` (rdma_create_qp, or
/// ibv_create_qp for a probe), asking for `want` and, when the device refuses
/// inline data, again without. Returns what the device granted, or the last error.
pub(crate) fn create_rc(
    cq: *mut c_void,
    mut want: ffi::IbvQpCap,
    mut create: impl FnMut(&mut IbvQpInitAttr) -> bool,
) -> std::result::Result<ffi::IbvQpCap, std::io::Error> {
    let mut last = std::io::Error::from_raw_os_error(libc::EINVAL);
    for inline in [want.max_inline_data, 0] {
        want.max_inline_data = inline;
        let mut attr = IbvQpInitAttr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: std::ptr::null_mut(),
            cap: want,
            qp_type: ffi::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        if create(&mut attr) {
            return Ok(attr.cap);
        }
        last = std::io::Error::last_os_error();
        if inline == 0 {
            break;
        }
    }
    Err(last)
}

impl Conn {
    /// Creates the completion channel, CQ and RC queue pair on `id` (whose
    /// device `pd` is bound to) and starts the driver.
    pub(crate) fn create(
        lib: &'static Lib,
        id: Arc<IdHolder>,
        cm_fd: AsyncFd<Fd>,
        pd: VerbsPd,
        caps: QpCaps,
        opts: &VerbsOptions,
        phase: Phase,
    ) -> Result<Arc<Conn>> {
        let b = pd
            .bound()
            .ok_or(RdmaError::Setup("protection domain not bound".into()))?;
        let lim = b.limits;
        let ctx = b.ctx;
        let want = wanted_cap(&lim, caps, opts.max_inline);
        let cqe = (want.max_send_wr + want.max_recv_wr).min(lim.max_cqe.max(1));
        // SAFETY: `ctx` is the live device context of `id`.
        let comp = unsafe { (lib.ibv_create_comp_channel)(ctx) };
        if comp.is_null() {
            return Err(RdmaError::Io(std::io::Error::last_os_error()));
        }
        // SAFETY: `comp` was just created.
        let comp_fd = unsafe { (*comp).fd };
        let cleanup_comp = |lib: &Lib| {
            // SAFETY: created above and not used by any CQ.
            unsafe { (lib.ibv_destroy_comp_channel)(comp) };
        };
        if let Err(e) = set_nonblocking(comp_fd) {
            cleanup_comp(lib);
            return Err(e);
        }
        // SAFETY: valid context and channel.
        let cq = unsafe { (lib.ibv_create_cq)(ctx, cqe as i32, std::ptr::null_mut(), comp, 0) };
        if cq.is_null() {
            let e = std::io::Error::last_os_error();
            cleanup_comp(lib);
            return Err(RdmaError::Setup(format!("ibv_create_cq({cqe}): {e}")));
        }
        let created = create_rc(cq, want, |attr| {
            // SAFETY: live id, domain and CQ; `attr` is filled in.
            unsafe { (lib.rdma_create_qp)(id.id, b.pd, attr) == 0 }
        });
        let want = match created {
            Ok(granted) => granted,
            Err(last) => {
                // SAFETY: created above, no QP uses them.
                unsafe { (lib.ibv_destroy_cq)(cq) };
                cleanup_comp(lib);
                return Err(RdmaError::Setup(format!("rdma_create_qp: {last}")));
            }
        };
        // SAFETY: rdma_create_qp set id->qp.
        let qp = unsafe { (*id.id).qp };
        let (local, peer_addr) = ffi::id_addrs(id.id);
        let local = local.unwrap_or_else(unspecified);
        let peer_addr = peer_addr.unwrap_or_else(unspecified);
        let conn = Arc::new(Conn {
            lib,
            id,
            qp,
            cq,
            comp,
            pd,
            cq_out: CompletionQueue::new(),
            st: Mutex::new(St {
                phase,
                state: QpState::Init,
                close: None,
                peer: PeerParams::default(),
                limits: (0, 0),
                slots: Vec::new(),
                free: Vec::new(),
                send_out: 0,
                recv_out: 0,
                closing_since: None,
                local_disconnect: false,
                finished: false,
            }),
            changed: Notify::new(),
            kick: Notify::new(),
            caps: QpCaps {
                max_send_wr: want.max_send_wr,
                max_recv_wr: want.max_recv_wr,
                max_send_sge: want.max_send_sge,
                max_recv_sge: want.max_recv_sge,
            },
            max_inline: want.max_inline_data,
            local,
            peer_addr,
        });
        if !opts.busy_poll {
            conn.arm();
        }
        let cq_fd = super::async_fd(comp_fd)?;
        tokio::spawn(drive(conn.clone(), cm_fd, cq_fd, opts.busy_poll));
        Ok(conn)
    }

    pub(crate) fn lib(&self) -> &'static Lib {
        self.lib
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(&self) {
        // SAFETY: `cq` is live; its context's ops table is filled by the provider.
        unsafe {
            let ctx = (*(self.cq as *mut ffi::WithContext)).context;
            if let Some(f) = (*ctx).ops.req_notify_cq {
                f(self.cq, 0);
            }
        }
    }

    /// Takes slot `i` back (its request completed or was never posted) and frees it.
    fn free_slot(st: &mut St, i: u32) -> Option<Slot> {
        let slot = st.slots.get_mut(i as usize)?.take()?;
        st.free.push(i);
        Some(slot)
    }

    fn alloc_slot(st: &mut St, s: Slot) -> u32 {
        match st.free.pop() {
            Some(i) => {
                st.slots[i as usize] = Some(s);
                i
            }
            None => {
                st.slots.push(Some(s));
                (st.slots.len() - 1) as u32
            }
        }
    }

    /// Starts closing: no more posting, the QP is moved to error (flushing
    /// its work requests) through `rdma_disconnect`, or the request refused.
    pub(crate) fn begin_close(&self, reason: CloseReason) {
        let mut st = self.lock();
        if st.close.is_none() {
            st.close = Some(reason);
        }
        st.state = QpState::Closed;
        if st.closing_since.is_some() {
            return;
        }
        st.closing_since = Some(tokio::time::Instant::now());
        let requested = st.phase == Phase::Requested;
        if matches!(
            st.phase,
            Phase::Created | Phase::Requested | Phase::Connecting
        ) {
            st.phase = Phase::Failed("closed before it was connected".into());
        }
        drop(st);
        // SAFETY: live id (held by self).
        unsafe {
            if requested {
                (self.lib.rdma_reject)(self.id.id, std::ptr::null(), 0);
            }
            (self.lib.rdma_disconnect)(self.id.id);
        }
        self.changed.notify_waiters();
        self.kick.notify_one();
    }

    /// Takes every completion the device has.
    fn poll_all(&self) {
        let mut wcs = [IbvWc::default(); 16];
        let mut out = Vec::new();
        loop {
            // SAFETY: `cq` is live; `wcs` has room for the 16 entries asked for.
            let n = unsafe {
                let ctx = (*(self.cq as *mut ffi::WithContext)).context;
                match (*ctx).ops.poll_cq {
                    Some(f) => f(self.cq, wcs.len() as i32, wcs.as_mut_ptr()),
                    None => -1,
                }
            };
            if n <= 0 {
                break;
            }
            let mut st = self.lock();
            for wc in wcs.iter().take(n as usize) {
                if let Some(c) = self.complete(&mut st, wc) {
                    out.push(c);
                }
            }
            let failed = out
                .iter()
                .find(|c| !matches!(c.status, WcStatus::Success | WcStatus::Flushed));
            let fail = failed.map(|c| c.status);
            drop(st);
            if let Some(s) = fail {
                self.begin_close(CloseReason::Transport(format!(
                    "work request failed: {s:?}"
                )));
            }
            self.cq_out.push_all(out.drain(..));
        }
    }

    fn complete(&self, st: &mut St, wc: &IbvWc) -> Option<Completion> {
        let slot = Conn::free_slot(st, u32::try_from(wc.wr_id).ok()?)?;
        if slot.kind == WcOpcode::Recv {
            st.recv_out = st.recv_out.saturating_sub(1);
        } else {
            st.send_out = st.send_out.saturating_sub(1);
        }
        let status = match wc.status {
            0 => WcStatus::Success,
            1 => WcStatus::LocalLengthError,
            2 => WcStatus::LocalQpOperationError,
            4 | 8 => WcStatus::LocalProtectionError,
            5 => WcStatus::Flushed,
            10 => WcStatus::RemoteAccessError,
            _ => WcStatus::RemoteOperationError,
        };
        let mut invalidated = None;
        if slot.kind == WcOpcode::Recv
            && status == WcStatus::Success
            && wc.wc_flags & ffi::IBV_WC_WITH_INV != 0
        {
            self.pd.invalidate(wc.invalidated_rkey);
            invalidated = Some(STag(wc.invalidated_rkey));
        }
        Some(Completion {
            wr_id: slot.user,
            opcode: slot.kind,
            status,
            byte_len: if status == WcStatus::Success {
                wc.byte_len
            } else {
                0
            },
            invalidated,
            solicited: false,
        })
    }

    /// Takes and handles the device's completion events, re-arms, polls.
    fn drain_cq(&self) {
        let mut n = 0u32;
        loop {
            let mut cq: *mut c_void = std::ptr::null_mut();
            let mut ctx: *mut c_void = std::ptr::null_mut();
            // SAFETY: the channel is non-blocking and live.
            let rc = unsafe { (self.lib.ibv_get_cq_event)(self.comp, &mut cq, &mut ctx) };
            if rc != 0 {
                break;
            }
            n += 1;
            if n >= 1024 {
                break;
            }
        }
        if n > 0 {
            // SAFETY: acknowledges exactly the events taken above.
            unsafe { (self.lib.ibv_ack_cq_events)(self.cq, n) };
        }
        self.arm();
        self.poll_all();
    }

    /// Handles the connection's CM events.
    fn drain_cm(&self) {
        for _ in 0..64 {
            let Some(e) = next_event(self.lib, self.id.channel) else {
                break;
            };
            self.on_event(e);
        }
    }

    fn on_event(&self, e: OwnedEvent) {
        let name = ffi::event_name(self.lib, e.kind);
        tracing::debug!(event = %name, status = e.status, "rdma cm event");
        let mut st = self.lock();
        match e.kind {
            ev::ESTABLISHED if st.phase == Phase::Connecting => {
                st.phase = Phase::Established;
                st.state = QpState::Rts;
                if st.peer.private_data.is_empty() && !e.private.is_empty() {
                    st.peer.private_data = e.private;
                }
                if e.initiator_depth != 0 || e.responder_resources != 0 {
                    // As the kernel reports it: our depths towards the peer.
                    st.peer.ird = u16::from(e.initiator_depth);
                    st.peer.ord = u16::from(e.responder_resources);
                }
            }
            ev::REJECTED => {
                st.phase = Phase::Rejected(e.private);
                drop(st);
                self.begin_close(CloseReason::Transport("rejected".into()));
                return;
            }
            ev::CONNECT_ERROR | ev::UNREACHABLE | ev::ADDR_ERROR | ev::ROUTE_ERROR => {
                st.phase = Phase::Failed(format!("{name} (status {})", e.status));
                drop(st);
                self.begin_close(CloseReason::Transport(name));
                return;
            }
            ev::DISCONNECTED => {
                let r = if st.local_disconnect {
                    CloseReason::LocalDisconnect
                } else {
                    CloseReason::PeerDisconnect
                };
                drop(st);
                self.begin_close(r);
                return;
            }
            ev::DEVICE_REMOVAL => {
                drop(st);
                tracing::warn!(peer = %self.peer_addr, "the RDMA device was removed: closing the connection and freeing its registrations");
                // librdmacm closes the device's context when this connection's
                // CM id, the last one on it, is destroyed.
                super::forget_removed_devices(self.lib);
                self.begin_close(CloseReason::Transport("RDMA device removed".into()));
                return;
            }
            _ => {}
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// Completes every outstanding work request as flushed (the device did not).
    fn flush_rest(&self) {
        let mut st = self.lock();
        let mut out = Vec::new();
        for i in 0..st.slots.len() {
            if let Some(s) = st.slots[i].take() {
                out.push(Completion {
                    wr_id: s.user,
                    opcode: s.kind,
                    status: WcStatus::Flushed,
                    byte_len: 0,
                    invalidated: None,
                    solicited: false,
                });
            }
        }
        st.free = (0..st.slots.len() as u32).collect();
        st.send_out = 0;
        st.recv_out = 0;
        drop(st);
        self.cq_out.push_all(out);
    }

    /// Closed with nothing outstanding: the CQ is closed, waiters woken.
    fn try_finish(&self) -> bool {
        let mut st = self.lock();
        if st.state != QpState::Closed || st.send_out + st.recv_out > 0 || st.finished {
            return st.finished;
        }
        st.finished = true;
        drop(st);
        self.cq_out.close();
        self.changed.notify_waiters();
        true
    }

    fn validate_sge(&self, s: &Sge<'_, VerbsMr>, need: Access) -> Result<IbvSge> {
        let m = &s.mr.inner;
        if !self.pd.same(&m.pd) {
            return Err(RdmaError::InvalidRequest(
                "memory region of another protection domain",
            ));
        }
        if !m.is_valid() {
            return Err(RdmaError::InvalidRequest("memory region was invalidated"));
        }
        if !m.access.contains(need) {
            return Err(RdmaError::InvalidRequest("memory region lacks access"));
        }
        let end = s
            .offset
            .checked_add(u64::from(s.len))
            .ok_or(RdmaError::InvalidRequest("scatter entry overflows"))?;
        if end > m.len as u64 {
            return Err(RdmaError::InvalidRequest("scatter entry out of bounds"));
        }
        Ok(IbvSge {
            addr: m.ptr + s.offset,
            length: s.len,
            lkey: m.lkey,
        })
    }
}

/// A CM event copied out of rdma-core (and acknowledged).
pub(crate) struct OwnedEvent {
    pub kind: i32,
    pub status: i32,
    pub id: *mut ffi::RdmaCmId,
    pub private: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
}

// SAFETY: `id` is only compared and passed back to rdma-core by the task
// that owns the listener or connection; the rest is owned data.
unsafe impl Send for OwnedEvent {}

/// The next CM event on `channel` (non-blocking), copied and acknowledged.
pub(crate) fn next_event(lib: &Lib, channel: *mut ffi::RdmaEventChannel) -> Option<OwnedEvent> {
    let mut e: *mut ffi::RdmaCmEvent = std::ptr::null_mut();
    // SAFETY: live non-blocking channel; `e` receives an event we ack below.
    let rc = unsafe { (lib.rdma_get_cm_event)(channel, &mut e) };
    if rc != 0 || e.is_null() {
        return None;
    }
    // SAFETY: `e` is a live event until acknowledged; private data (when
    // present) is `private_data_len` bytes owned by the event.
    let out = unsafe {
        let r = &*e;
        let len = usize::from(r.conn.private_data_len);
        let private = if r.conn.private_data.is_null() || len == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(r.conn.private_data as *const u8, len).to_vec()
        };
        OwnedEvent {
            kind: r.event,
            status: r.status,
            id: r.id,
            private,
            responder_resources: r.conn.responder_resources,
            initiator_depth: r.conn.initiator_depth,
        }
    };
    // SAFETY: acknowledges the event taken above, once.
    unsafe { (lib.rdma_ack_cm_event)(e) };
    Some(out)
}

/// The driver: CQ events, CM events, local disconnects; ends once the queue
/// pair is closed and every work request has completed.
async fn drive(conn: Arc<Conn>, cm_fd: AsyncFd<Fd>, cq_fd: AsyncFd<Fd>, busy: bool) {
    loop {
        if conn.try_finish() {
            break;
        }
        let deadline = conn.lock().closing_since.map(|t| t + FLUSH_GRACE);
        tokio::select! {
            r = cq_fd.readable(), if !busy => {
                if let Ok(mut g) = r {
                    g.clear_ready();
                }
                conn.drain_cq();
            }
            () = tokio::task::yield_now(), if busy => conn.poll_all(),
            r = cm_fd.readable() => {
                if let Ok(mut g) = r {
                    g.clear_ready();
                }
                conn.drain_cm();
                conn.poll_all();
            }
            () = conn.kick.notified() => conn.poll_all(),
            () = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => conn.flush_rest(),
        }
    }
    drop(cq_fd);
    drop(cm_fd);
}

/// A verbs RC queue pair. Dropping it disconnects.
pub struct VerbsQp {
    pub(crate) conn: Arc<Conn>,
}

impl Drop for VerbsQp {
    fn drop(&mut self) {
        if self.conn.lock().state != QpState::Closed {
            self.conn.lock().local_disconnect = true;
            self.conn.begin_close(CloseReason::LocalDisconnect);
        }
    }
}

impl VerbsQp {
    /// The capabilities the device granted (after clamping to its limits).
    pub fn caps(&self) -> QpCaps {
        self.conn.caps
    }
    /// The inline data size granted (0: no inline Sends).
    pub fn max_inline(&self) -> u32 {
        self.conn.max_inline
    }
    /// Waits until setup leaves `from` (connect or accept answered).
    pub(crate) async fn wait_phase_change(&self, from: &Phase) -> Phase {
        loop {
            let n = self.conn.changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            {
                let st = self.conn.lock();
                if &st.phase != from {
                    return st.phase.clone();
                }
            }
            n.await;
        }
    }
}

impl QueuePair for VerbsQp {
    type Mr = VerbsMr;

    fn granted(&self) -> Option<Granted> {
        Some(Granted {
            caps: self.conn.caps,
            max_inline: self.conn.max_inline,
            max_mr_size: self.conn.pd.limits().map_or(u64::MAX, |l| l.max_mr_size),
        })
    }

    fn post_send(&self, wr: &SendWr<'_, VerbsMr>) -> Result<()> {
        let c = &self.conn;
        if let SendOp::LocalInvalidate { stag } = wr.op {
            // No fast-register MRs in user space: invalidation is deregistration.
            let found = c.pd.invalidate(stag.0);
            c.cq_out.push(Completion {
                wr_id: wr.wr_id,
                opcode: WcOpcode::LocalInvalidate,
                status: if found {
                    WcStatus::Success
                } else {
                    WcStatus::LocalProtectionError
                },
                byte_len: 0,
                invalidated: None,
                solicited: false,
            });
            return Ok(());
        }
        let mut st = c.lock();
        if st.state != QpState::Rts {
            return Err(RdmaError::NotConnected);
        }
        if st.send_out >= c.caps.max_send_wr {
            return Err(RdmaError::QueueFull);
        }
        if wr.sg.len() > c.caps.max_send_sge as usize || wr.sg.len() > MAX_SGE {
            return Err(RdmaError::InvalidRequest("too many scatter entries"));
        }
        let need = match wr.op {
            SendOp::RdmaRead { .. } => Access::LOCAL_WRITE,
            _ => Access::LOCAL_READ,
        };
        if matches!(wr.op, SendOp::RdmaRead { .. }) && wr.sg.len() != 1 {
            return Err(RdmaError::InvalidRequest("RDMA Read takes one sink entry"));
        }
        let mut sges = [IbvSge::default(); MAX_SGE];
        let mut total: u64 = 0;
        for (i, s) in wr.sg.iter().enumerate() {
            sges[i] = c.validate_sge(s, need)?;
            total += u64::from(s.len);
        }
        if let SendOp::RdmaRead { remote } = wr.op {
            if u64::from(remote.len) > total {
                return Err(RdmaError::InvalidRequest("read longer than the local sink"));
            }
            sges[0].length = remote.len;
        }
        let mut w = IbvSendWr {
            sg_list: sges.as_mut_ptr(),
            num_sge: wr.sg.len() as i32,
            send_flags: ffi::IBV_SEND_SIGNALED,
            ..IbvSendWr::default()
        };
        let kind = match wr.op {
            SendOp::Send => {
                w.opcode = ffi::IBV_WR_SEND;
                WcOpcode::Send
            }
            SendOp::SendWithInvalidate { stag } => {
                w.opcode = ffi::IBV_WR_SEND_WITH_INV;
                w.invalidate_rkey = stag.0;
                // rdma-core's siw provider hands the kernel `wr.rdma.rkey` as
                // the STag to invalidate (it copies that field for every
                // opcode and never reads `invalidate_rkey`); without this its
                // Send with Invalidate names STag 0. Other providers ignore
                // `wr.rdma` on Sends.
                w.rkey = stag.0;
                WcOpcode::Send
            }
            SendOp::RdmaWrite { remote } => {
                if total > u64::from(remote.len) {
                    return Err(RdmaError::InvalidRequest(
                        "write longer than the remote buffer",
                    ));
                }
                w.opcode = ffi::IBV_WR_RDMA_WRITE;
                w.remote_addr = remote.to;
                w.rkey = remote.stag.0;
                WcOpcode::RdmaWrite
            }
            SendOp::RdmaRead { remote } => {
                w.opcode = ffi::IBV_WR_RDMA_READ;
                w.remote_addr = remote.to;
                w.rkey = remote.stag.0;
                WcOpcode::RdmaRead
            }
            SendOp::LocalInvalidate { .. } => unreachable!("handled above"),
        };
        if kind == WcOpcode::Send {
            if wr.solicited {
                w.send_flags |= ffi::IBV_SEND_SOLICITED;
            }
            if total > 0 && total <= u64::from(c.max_inline) {
                w.send_flags |= ffi::IBV_SEND_INLINE;
            }
        }
        let mrs = wr.sg.iter().map(|s| s.mr.clone()).collect();
        let slot = Conn::alloc_slot(
            &mut st,
            Slot {
                user: wr.wr_id,
                kind,
                _mrs: mrs,
            },
        );
        w.wr_id = u64::from(slot);
        let mut bad: *mut IbvSendWr = std::ptr::null_mut();
        // SAFETY: live QP; `w` and `sges` outlive the call (the provider copies
        // the request); the regions named are registered and held by the slot.
        let rc = unsafe {
            let ctx = (*(c.qp as *mut ffi::WithContext)).context;
            match (*ctx).ops.post_send {
                Some(f) => f(c.qp, &mut w, &mut bad),
                None => libc::ENOSYS,
            }
        };
        if rc != 0 {
            Conn::free_slot(&mut st, slot);
            return Err(RdmaError::Io(std::io::Error::from_raw_os_error(rc)));
        }
        st.send_out += 1;
        Ok(())
    }

    fn post_recv(&self, wr_id: u64, sg: &[Sge<'_, VerbsMr>]) -> Result<()> {
        let c = &self.conn;
        let mut st = c.lock();
        if st.state == QpState::Closed {
            return Err(RdmaError::NotConnected);
        }
        if st.recv_out >= c.caps.max_recv_wr {
            return Err(RdmaError::QueueFull);
        }
        if sg.len() > c.caps.max_recv_sge as usize || sg.len() > MAX_SGE {
            return Err(RdmaError::InvalidRequest("too many scatter entries"));
        }
        let mut sges = [IbvSge::default(); MAX_SGE];
        for (i, s) in sg.iter().enumerate() {
            sges[i] = c.validate_sge(s, Access::LOCAL_WRITE)?;
        }
        let slot = Conn::alloc_slot(
            &mut st,
            Slot {
                user: wr_id,
                kind: WcOpcode::Recv,
                _mrs: sg.iter().map(|s| s.mr.clone()).collect(),
            },
        );
        let mut w = IbvRecvWr {
            wr_id: u64::from(slot),
            next: std::ptr::null_mut(),
            sg_list: sges.as_mut_ptr(),
            num_sge: sg.len() as i32,
        };
        let mut bad: *mut IbvRecvWr = std::ptr::null_mut();
        // SAFETY: as in post_send.
        let rc = unsafe {
            let ctx = (*(c.qp as *mut ffi::WithContext)).context;
            match (*ctx).ops.post_recv {
                Some(f) => f(c.qp, &mut w, &mut bad),
                None => libc::ENOSYS,
            }
        };
        if rc != 0 {
            Conn::free_slot(&mut st, slot);
            return Err(RdmaError::Io(std::io::Error::from_raw_os_error(rc)));
        }
        st.recv_out += 1;
        Ok(())
    }

    fn cq(&self) -> &CompletionQueue {
        &self.conn.cq_out
    }

    fn state(&self) -> QpState {
        self.conn.lock().state
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.conn.lock().close.clone()
    }

    async fn closed(&self) -> CloseReason {
        loop {
            let n = self.conn.changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            {
                let st = self.conn.lock();
                if st.finished {
                    return st.close.clone().unwrap_or(CloseReason::LocalDisconnect);
                }
            }
            n.await;
        }
    }

    fn disconnect(&self) {
        self.conn.lock().local_disconnect = true;
        self.conn.begin_close(CloseReason::LocalDisconnect);
    }

    fn peer_params(&self) -> PeerParams {
        self.conn.lock().peer.clone()
    }

    fn read_limits(&self) -> (u16, u16) {
        self.conn.lock().limits
    }

    fn local_addr(&self) -> SocketAddr {
        self.conn.local
    }

    fn peer_addr(&self) -> SocketAddr {
        self.conn.peer_addr
    }
}
