//! The async SMB Direct connection over an RDMA provider queue pair.
//!
//! [`SmbDirectConnection`] wraps the sans-IO [`Connection`] with the I/O:
//! receives posted into one registered receive region (one slot per credit),
//! messages sent from a registered send region with Send (or Send with
//! Invalidate). Completions are applied to the core where the provider
//! delivers them (a [`CompletionHandler`] on the queue pair's completion queue:
//! the soft-iWARP driver task, the verbs completion poller), so a message wakes
//! the task waiting for it and nothing else; a driver task serves the core's
//! timers (keepalive, negotiate timeout) and takes completions the handler
//! could not (its lock held elsewhere at that moment). The upper layer sees whole messages
//! ([`send_message`](SmbDirectConnection::send_message) /
//! [`recv_message`](SmbDirectConnection::recv_message)) and RDMA helpers
//! that move data between local registered memory and the peer's buffers
//! named by Buffer Descriptor V1 lists: the server answers an SMB2 READ with
//! [`rdma_write`](SmbDirectConnection::rdma_write) into the client's
//! descriptors and serves a WRITE with
//! [`rdma_read`](SmbDirectConnection::rdma_read) from them.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::time::Instant;

use smbx_rdma::{
    Access, Completion, CompletionHandler, CompletionQueue, ConnParams, ConnectRequest, Connecting,
    Driver, FileRange, FileSink, MemoryRegion, ProtectionDomain, Provider, QpCaps, QueuePair,
    RdmaError, RemoteBuf, STag, Sge, WcOpcode, WcStatus,
};
use smbx_wire::InMessage;
use tokio::sync::{oneshot, Notify};

use crate::config::{Config, NegotiatedParams};
use crate::connection::{Connection, DisconnectReason, Event, SendError, Transmit};
use crate::pdu::BufferDescriptorV1;
use crate::pools::{PoolError, Pools};

/// A failure of the async connection.
#[derive(Debug, thiserror::Error)]
pub enum DirectError {
    /// The RDMA provider failed.
    #[error("rdma: {0}")]
    Rdma(#[from] RdmaError),
    /// The SMB Direct connection ended.
    #[error("smb direct disconnected: {0}")]
    Disconnected(DisconnectReason),
    /// The queue pair closed underneath the connection.
    #[error("queue pair closed: {0}")]
    QpClosed(String),
    /// The message could not be queued.
    #[error("send: {0}")]
    Send(#[from] SendError),
    /// An RDMA Read or Write completed with an error.
    #[error("rdma operation failed: {0:?}")]
    Transfer(WcStatus),
    /// Local buffer and descriptors do not fit together.
    #[error("invalid transfer: {0}")]
    InvalidTransfer(&'static str),
    /// The configuration was rejected.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The device's queue pair or regions are too small for SMB Direct.
    #[error(transparent)]
    Pools(#[from] PoolError),
}

/// Queue pair sizing the adapter asks a provider for (the device may grant
/// less: [`crate::pools::size`] fits the buffers into what it granted).
pub fn qp_caps(config: &Config) -> QpCaps {
    crate::pools::wanted_caps(config)
}

/// Upper-layer messages queued in the core before `send_message` waits.
const QUEUE_LIMIT: usize = 64;

/// Most invalidated STags remembered for [`SmbDirectConnection::take_invalidated`].
pub const MAX_INVALIDATED: usize = 1024;
/// RDMA Read/Write queue depths we offer (IRD) and ask for (ORD).
const IRD: u16 = 16;
const ORD: u16 = 16;

const KIND_RECV: u64 = 1 << 56;
const KIND_SEND: u64 = 2 << 56;
const KIND_OP: u64 = 3 << 56;
const KIND_MASK: u64 = 0xff << 56;

/// The [MS-SMBD] iWARP private data: IRD and ORD, each a big-endian u32.
pub fn ird_ord_private_data(ird: u16, ord: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(8);
    v.extend_from_slice(&u32::from(ird).to_be_bytes());
    v.extend_from_slice(&u32::from(ord).to_be_bytes());
    v
}

struct Inner<M> {
    conn: Connection,
    recv_mr: M,
    recv_slot: usize,
    recv_free: Vec<u32>,
    send_mr: M,
    send_slot: usize,
    send_free: Vec<u32>,
    /// The pools' sizes (from the device's limits).
    pools: Pools,
    ops: HashMap<u64, Op>,
    next_op: u64,
    messages: VecDeque<InMessage>,
    negotiated: Option<NegotiatedParams>,
    /// Why the connection is over, once it is.
    closed: Option<String>,
    disconnect: Option<DisconnectReason>,
    /// STags the peer invalidated with Send with Invalidate, the most recent
    /// [`MAX_INVALIDATED`] (nothing need collect them).
    invalidated: std::collections::VecDeque<STag>,
    /// The deadline the driver task last set out to sleep until (`None`: no
    /// timer): it needs waking only for a sooner one ([`driver_must_wake`]).
    armed: Option<Instant>,
    /// A sender found the core's queue full and waits for room
    /// ([`SmbDirectConnection::try_send_message`]).
    space_wanted: bool,
    /// Wake-ups to do once the lock is released ([`Locked`]).
    deferred: Deferred,
}

/// Wake-ups found while the connection was locked, done once it is not: a task
/// woken under the lock (on another worker) would find it still held and sleep
/// on it (a futex wait, and a wake at the unlock).
#[derive(Default)]
struct Deferred {
    /// The waiters on `changed` are to be woken.
    changed: bool,
    /// Completions for the tasks awaiting them.
    ops: Vec<(oneshot::Sender<Completion>, Completion)>,
    /// Posted transfers to release, with whether they succeeded.
    released: Vec<(Release, bool)>,
}

impl Deferred {
    fn is_empty(&self) -> bool {
        !self.changed && self.ops.is_empty() && self.released.is_empty()
    }

    fn run(self, changed: &Notify) {
        for (tx, c) in self.ops {
            let _ = tx.send(c);
        }
        for (release, ok) in self.released {
            release(ok);
        }
        if self.changed {
            changed.notify_waiters();
        }
    }
}

/// The connection's lock: what it deferred ([`Deferred`]) runs when it is dropped,
/// after the unlock.
struct Locked<'a, Q: QueuePair> {
    shared: &'a Shared<Q>,
    guard: Option<MutexGuard<'a, Inner<Q::Mr>>>,
}

impl<Q: QueuePair> Deref for Locked<'_, Q> {
    type Target = Inner<Q::Mr>;
    fn deref(&self) -> &Inner<Q::Mr> {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<Q: QueuePair> DerefMut for Locked<'_, Q> {
    fn deref_mut(&mut self) -> &mut Inner<Q::Mr> {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<Q: QueuePair> Drop for Locked<'_, Q> {
    fn drop(&mut self) {
        let Some(mut g) = self.guard.take() else {
            return;
        };
        if g.deferred.is_empty() {
            return;
        }
        let d = std::mem::take(&mut g.deferred);
        drop(g);
        d.run(&self.shared.changed);
    }
}

/// What runs when the last work request of a posted RDMA transfer
/// ([`SmbDirectConnection::rdma_write_posted`]) completes: called with `true` when
/// every one of its requests succeeded (its buffer may be reused); dropped uncalled,
/// or called with `false`, when one failed or the connection ended first.
pub type Release = Box<dyn FnOnce(bool) + Send>;

/// One RDMA work request in flight.
enum Op {
    /// A task awaits its completion.
    Waited(oneshot::Sender<Completion>),
    /// Nobody waits: an error breaks the connection, and the transfer's last
    /// request carries what releases its buffer.
    Posted(Option<Release>),
}

struct Shared<Q: QueuePair> {
    qp: Q,
    inner: Mutex<Inner<Q::Mr>>,
    /// Wakes the driver (something to transmit).
    kick: Notify,
    /// Wakes waiters (message arrived, queue space, negotiated, closed).
    changed: Notify,
}

impl<Q: QueuePair> Shared<Q> {
    fn lock(&self) -> Locked<'_, Q> {
        Locked {
            shared: self,
            guard: Some(self.inner.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// The lock if it is free now.
    fn try_lock(&self) -> Option<Locked<'_, Q>> {
        let guard = match self.inner.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(Locked {
            shared: self,
            guard: Some(guard),
        })
    }
}

/// An SMB Direct connection over a provider queue pair.
pub struct SmbDirectConnection<Q: QueuePair> {
    shared: Arc<Shared<Q>>,
    /// The driver task; `None` when the owner polls the [`Driver`] itself
    /// ([`SmbDirectConnection::accept_driven`]).
    driver: Option<tokio::task::JoinHandle<()>>,
}

impl<Q: QueuePair> Drop for SmbDirectConnection<Q> {
    fn drop(&mut self) {
        // A driver polled by the owner ends once the queue pair has closed.
        self.shared.qp.disconnect();
        if let Some(d) = &self.driver {
            d.abort();
        }
    }
}

/// Fits the configuration to what the device granted `qp` ([`crate::pools`]):
/// the pools' sizes, and `config` with the receive credits the queue can hold.
fn fit<Q: QueuePair>(qp: &Q, config: Config) -> Result<(Config, Pools), DirectError> {
    let pools = crate::pools::size(&config, qp.granted().as_ref())?;
    let config = Config {
        receive_credit_max: pools.receive_credit_max,
        ..config
    };
    Ok((config, pools))
}

fn build_inner<D: ProtectionDomain>(
    pd: &D,
    conn: Connection,
    config: &Config,
    pools: Pools,
) -> Result<Inner<D::Mr>, DirectError> {
    let recv_slot = config.max_receive_size as usize;
    let send_slot = config.max_send_size.max(32) as usize;
    let recv_mr = pd.alloc(recv_slot * pools.recv_slots as usize, Access::LOCAL_WRITE)?;
    let send_mr = pd.alloc(send_slot * pools.send_slots as usize, Access::LOCAL_WRITE)?;
    Ok(Inner {
        conn,
        recv_mr,
        recv_slot,
        recv_free: (0..pools.recv_slots).rev().collect(),
        send_mr,
        send_slot,
        send_free: (0..pools.send_slots).rev().collect(),
        pools,
        ops: HashMap::new(),
        next_op: 0,
        messages: VecDeque::new(),
        negotiated: None,
        closed: None,
        disconnect: None,
        invalidated: std::collections::VecDeque::new(),
        armed: None,
        space_wanted: false,
        deferred: Deferred::default(),
    })
}

/// The receive region and its free slots.
struct Receives<'a, M> {
    mr: &'a M,
    slot: usize,
    free: &'a mut Vec<u32>,
}

impl<M: MemoryRegion> Receives<'_, M> {
    /// Posts `n` receives of `size` bytes (the core's current receive size).
    fn post<Q: QueuePair<Mr = M>>(&mut self, qp: &Q, n: u32, size: u32) -> Result<(), DirectError> {
        let size = (size as usize).min(self.slot) as u32;
        for _ in 0..n {
            let slot = self
                .free
                .pop()
                .ok_or(DirectError::InvalidTransfer("no free receive slot"))?;
            let wr_id = KIND_RECV | u64::from(slot);
            if qp.receives_owned() {
                // Into a buffer that becomes the message (one fragment): no
                // copy out of a slot, whose index still bounds the receives.
                qp.post_recv_owned(wr_id, size as usize)?;
                continue;
            }
            let off = slot as u64 * self.slot as u64;
            qp.post_recv(wr_id, &[Sge::new(self.mr, off, size)])?;
        }
        Ok(())
    }
}

/// Posts `n` receives of the core's current receive size.
fn post_receives<Q: QueuePair>(
    qp: &Q,
    inner: &mut Inner<Q::Mr>,
    n: u32,
) -> Result<(), DirectError> {
    let size = inner.conn.receive_buffer_size();
    Receives {
        mr: &inner.recv_mr,
        slot: inner.recv_slot,
        free: &mut inner.recv_free,
    }
    .post(qp, n, size)
}

/// Posts the core's next message, if it has one to send now, from a free send
/// slot: its header and fragment are copied from the core's queue straight into
/// the slot. `None` when there is nothing to send.
fn post_next<Q: QueuePair>(qp: &Q, inner: &mut Inner<Q::Mr>) -> Option<Result<(), DirectError>> {
    let size = inner.conn.receive_buffer_size();
    let Inner {
        conn,
        recv_mr,
        recv_slot,
        recv_free,
        send_mr,
        send_slot,
        send_free,
        ..
    } = inner;
    let mut receives = Receives {
        mr: &*recv_mr,
        slot: *recv_slot,
        free: recv_free,
    };
    let send_slot = *send_slot;
    let owned = qp.sends_owned();
    conn.poll_transmit_with(|m: Transmit<'_>| {
        receives.post(qp, m.post_receives, size)?;
        let slot = send_free
            .pop()
            .ok_or(DirectError::InvalidTransfer("no free send slot"))?;
        let wr_id = KIND_SEND | u64::from(slot);
        if let Some((body, at)) = m.body.filter(|_| owned) {
            // Sent from the message's own buffer: no copy into the slot, whose
            // index still bounds the Sends in flight.
            let range = at..at + m.payload.len();
            let inv = m.invalidate.map(STag);
            qp.post_send_owned(wr_id, m.header, body.clone(), range, inv)?;
            return Ok(());
        }
        let off = slot as usize * send_slot;
        let len = m.len();
        let copied = len <= send_slot
            && send_mr.with_mut(|b| match b.get_mut(off..off + len) {
                Some(d) => {
                    let (h, p) = d.split_at_mut(m.header.len());
                    h.copy_from_slice(m.header);
                    p.copy_from_slice(m.payload);
                    true
                }
                None => false,
            });
        if !copied {
            return Err(DirectError::InvalidTransfer(
                "message larger than a send slot",
            ));
        }
        let sge = [Sge::new(&*send_mr, off as u64, len as u32)];
        match m.invalidate {
            Some(token) => qp.post_send_inv(wr_id, &sge, STag(token))?,
            None => qp.post_send_simple(wr_id, &sge)?,
        }
        Ok(())
    })
}

/// Hands the core's pending receives and messages to the provider, then
/// applies its events.
fn pump<Q: QueuePair>(shared: &Shared<Q>, inner: &mut Inner<Q::Mr>) {
    let r = (|| {
        let n = inner.conn.poll_post_receives();
        post_receives(&shared.qp, inner, n)?;
        while !inner.send_free.is_empty() {
            match post_next(&shared.qp, inner) {
                Some(r) => r?,
                None => break,
            }
        }
        Ok::<(), DirectError>(())
    })();
    if let Err(e) = r {
        fail(inner, format!("posting failed: {e}"));
    }
    let mut changed = false;
    while let Some(ev) = inner.conn.poll_event() {
        changed = true;
        match ev {
            Event::Negotiated(p) => inner.negotiated = Some(p),
            Event::Message(m) => inner.messages.push_back(m),
            Event::Disconnect(r) => {
                if inner.closed.is_none() {
                    inner.closed = Some(r.to_string());
                }
                inner.disconnect = Some(r);
            }
        }
    }
    // Waiters want events, the close, or room in the queue; a completion that
    // brought none of them (a send's, a credit grant's) wakes nobody.
    let room = inner.space_wanted && inner.conn.queued_messages() < QUEUE_LIMIT;
    if changed || room || inner.closed.is_some() {
        inner.space_wanted &= !room;
        inner.deferred.changed = true;
    }
}

/// Queues a copy of `data` in the core (with `token`, its first fragment as Send
/// with Invalidate).
fn queue_copy(conn: &mut Connection, data: &[u8], token: Option<u32>) -> Result<(), SendError> {
    match token {
        Some(t) => conn.send_message_with_invalidate(data, t),
        None => conn.send_message(data),
    }
}

/// Whether the driver task must wake: the connection is over, or the core's
/// next deadline is sooner than the one the task sleeps until (a later one, as
/// every received message moves the idle timer, waits for that wake-up).
fn driver_must_wake<M>(inner: &Inner<M>) -> bool {
    inner.closed.is_some()
        || match (inner.conn.poll_timeout(), inner.armed) {
            (Some(next), Some(armed)) => next < armed,
            (Some(_), None) => true,
            (None, _) => false,
        }
}

/// The adapter's completion handling, run by the provider where it delivers
/// completions: applies them to the core and posts what follows (receives,
/// credit grants, queued messages) under the connection's lock, if that is free
/// now (else the driver task or a waiter takes them, woken by the queue).
struct OnDelivery<Q: QueuePair>(Weak<Shared<Q>>);

impl<Q: QueuePair> CompletionHandler for OnDelivery<Q> {
    fn completions_ready(&self, _cq: &CompletionQueue) -> bool {
        let Some(shared) = self.0.upgrade() else {
            return false;
        };
        // Held by a task posting or taking completions (or by this very
        // thread, posting: verbs completes a local invalidation at once).
        let Some(mut g) = shared.try_lock() else {
            return false;
        };
        apply_completions(&shared, &mut g);
        if driver_must_wake(&g) {
            shared.kick.notify_one();
        }
        true
    }
}

fn fail<M>(inner: &mut Inner<M>, why: String) {
    if inner.closed.is_none() {
        inner.closed = Some(why);
    }
    inner.conn.close();
    // Dropping the senders fails every waiting RDMA helper.
    inner.ops.clear();
}

fn on_completion<Q: QueuePair>(qp: &Q, inner: &mut Inner<Q::Mr>, c: Completion) {
    let index = c.wr_id & !KIND_MASK;
    match c.wr_id & KIND_MASK {
        KIND_RECV => {
            inner.recv_free.push(index as u32);
            if c.status != WcStatus::Success {
                fail(inner, format!("receive failed: {:?}", c.status));
                return;
            }
            if c.opcode != WcOpcode::Recv {
                return;
            }
            if let Some(stag) = c.invalidated {
                if inner.invalidated.len() >= MAX_INVALIDATED {
                    inner.invalidated.pop_front();
                }
                inner.invalidated.push_back(stag);
            }
            let now = Instant::now();
            if qp.receives_owned() {
                // Posted with post_recv_owned: the message is the buffer.
                if let Some(bytes) = qp.take_received(c.wr_id) {
                    inner.conn.handle_receive_owned(bytes, now);
                    return;
                }
            }
            let off = index as usize * inner.recv_slot;
            let len = (c.byte_len as usize).min(inner.recv_slot);
            let Inner { conn, recv_mr, .. } = inner;
            recv_mr.with(|b| match b.get(off..off + len) {
                Some(bytes) => conn.handle_receive(bytes, now),
                None => conn.close(),
            });
        }
        KIND_SEND => {
            inner.send_free.push(index as u32);
            if c.status != WcStatus::Success {
                fail(inner, format!("send failed: {:?}", c.status));
            }
        }
        KIND_OP => match inner.ops.remove(&index) {
            Some(Op::Waited(tx)) => inner.deferred.ops.push((tx, c)),
            Some(Op::Posted(release)) => {
                let ok = c.status == WcStatus::Success;
                if let Some(release) = release {
                    inner.deferred.released.push((release, ok));
                }
                if !ok {
                    // A response posted behind this Write must not reach the
                    // peer as if the data had: the queue pair goes down.
                    fail(inner, format!("rdma write failed: {:?}", c.status));
                }
            }
            None => {}
        },
        _ => {}
    }
}

/// Applies every completion the queue holds, under the caller's lock; returns
/// whether there were any.
fn take_completions<Q: QueuePair>(shared: &Shared<Q>, g: &mut Inner<Q::Mr>) -> bool {
    let mut any = false;
    while let Some(c) = shared.qp.cq().try_next() {
        on_completion(&shared.qp, g, c);
        any = true;
    }
    any
}

/// Applies what the completion queue holds and, if it held any, pumps (posts the
/// receives, credit grants and messages that follow), under the caller's lock.
fn apply_completions<Q: QueuePair>(shared: &Shared<Q>, g: &mut Inner<Q::Mr>) {
    if take_completions(shared, g) {
        pump(shared, g);
    }
}

async fn drive<Q: QueuePair>(shared: Arc<Shared<Q>>) {
    loop {
        let deadline = {
            let mut g = shared.lock();
            pump(&shared, &mut g);
            if g.closed.is_some() {
                break;
            }
            g.armed = g.conn.poll_timeout();
            g.armed
        };
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            more = shared.qp.cq().ready() => {
                let mut g = shared.lock();
                if !take_completions(&shared, &mut g) && !more {
                    let why = shared
                        .qp
                        .close_reason()
                        .map(|r| format!("{r:?}"))
                        .unwrap_or_else(|| "closed".into());
                    fail(&mut g, why);
                }
            }
            _ = shared.kick.notified() => {}
            _ = sleep => {
                shared.lock().conn.handle_timeout(Instant::now());
            }
        }
    }
    // Send what the core still holds (e.g. a STATUS_NOT_SUPPORTED response),
    // give the sends a moment to complete, then tear down.
    {
        let mut g = shared.lock();
        pump(&shared, &mut g);
        g.ops.clear();
    }
    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), async {
        loop {
            // Closed: every completion the handler applies notifies `changed`.
            let notified = shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut g = shared.lock();
                take_completions(&shared, &mut g);
                if g.send_free.len() == g.pools.send_slots as usize {
                    break;
                }
            }
            tokio::select! {
                _ = notified => {}
                more = shared.qp.cq().ready() => if !more { break },
            }
        }
    })
    .await;
    shared.qp.disconnect();
    shared.changed.notify_waiters();
}

impl<Q: QueuePair> SmbDirectConnection<Q> {
    /// Connects as a client to an SMB Direct server at `addr` and negotiates.
    pub async fn connect<P>(
        provider: &P,
        pd: &P::Pd,
        addr: SocketAddr,
        config: Config,
    ) -> Result<Self, DirectError>
    where
        P: Provider<Qp = Q, Mr = Q::Mr>,
    {
        let (this, _) = Self::connect_with(provider, pd, addr, config, false).await?;
        Ok(this)
    }

    /// Like [`SmbDirectConnection::connect`], with the connection's [`Driver`]
    /// handed to the caller as [`SmbDirectConnection::accept_driven`] does.
    pub async fn connect_driven<P>(
        provider: &P,
        pd: &P::Pd,
        addr: SocketAddr,
        config: Config,
    ) -> Result<(Self, Driver), DirectError>
    where
        P: Provider<Qp = Q, Mr = Q::Mr>,
    {
        let (this, driver) = Self::connect_with(provider, pd, addr, config, true).await?;
        Ok((this, driver.expect("driven")))
    }

    async fn connect_with<P>(
        provider: &P,
        pd: &P::Pd,
        addr: SocketAddr,
        config: Config,
        driven: bool,
    ) -> Result<(Self, Option<Driver>), DirectError>
    where
        P: Provider<Qp = Q, Mr = Q::Mr>,
    {
        config.validate()?;
        let connecting = provider.connect(pd, addr, qp_caps(&config)).await?;
        let (config, pools) = fit(connecting.qp(), config)?;
        let core = Connection::client(config.clone(), Instant::now());
        let mut inner = build_inner(pd, core, &config, pools)?;
        let n = inner.conn.poll_post_receives();
        post_receives(connecting.qp(), &mut inner, n)?;
        if driven {
            connecting.qp().hold_driver();
        }
        let (qp, _peer) = connecting
            .connect(ConnParams {
                private_data: ird_ord_private_data(IRD, ORD),
                ird: IRD,
                ord: ORD,
            })
            .await?;
        Self::start(qp, inner, driven).await
    }

    /// Accepts a connection request as a server and negotiates; its buffers
    /// are registered in the request's own protection domain. The
    /// initiator's private data (IRD/ORD) is informational and not checked.
    pub async fn accept<R>(request: R, config: Config) -> Result<Self, DirectError>
    where
        R: ConnectRequest<Qp = Q>,
    {
        let (this, _) = Self::accept_with(request, config, false).await?;
        Ok(this)
    }

    /// Like [`SmbDirectConnection::accept`], but nothing of the connection runs
    /// as a task of its own: the returned [`Driver`] runs the adapter's timers and
    /// the completions its handler could not take, and the provider's driver when
    /// it hands that out ([`QueuePair::hold_driver`]: soft-iWARP's socket I/O).
    /// The caller polls it in the task that uses the connection (joined with it,
    /// polled also while that awaits anything else) until it ends, which it does
    /// once the connection has closed (dropping the connection closes it). The
    /// wakes between the socket, the adapter and the consumer are then that
    /// task's own: no hop between tasks per message.
    pub async fn accept_driven<R>(request: R, config: Config) -> Result<(Self, Driver), DirectError>
    where
        R: ConnectRequest<Qp = Q>,
    {
        let (this, driver) = Self::accept_with(request, config, true).await?;
        Ok((this, driver.expect("driven")))
    }

    async fn accept_with<R>(
        request: R,
        config: Config,
        driven: bool,
    ) -> Result<(Self, Option<Driver>), DirectError>
    where
        R: ConnectRequest<Qp = Q>,
    {
        config.validate()?;
        let (config, pools) = fit(request.qp(), config)?;
        let core = Connection::server(config.clone(), Instant::now());
        let mut inner = build_inner(request.pd(), core, &config, pools)?;
        let n = inner.conn.poll_post_receives();
        post_receives(request.qp(), &mut inner, n)?;
        if driven {
            request.qp().hold_driver();
        }
        let qp = request
            .accept(ConnParams {
                private_data: ird_ord_private_data(IRD, ORD),
                ird: IRD,
                ord: ORD,
            })
            .await?;
        Self::start(qp, inner, driven).await
    }

    /// Starts the connection on its connected queue pair and waits for the
    /// negotiation; with `driven`, returns what drives it instead of spawning it.
    async fn start(
        qp: Q,
        inner: Inner<Q::Mr>,
        driven: bool,
    ) -> Result<(Self, Option<Driver>), DirectError> {
        let shared = Arc::new(Shared {
            qp,
            inner: Mutex::new(inner),
            kick: Notify::new(),
            changed: Notify::new(),
        });
        shared
            .qp
            .cq()
            .set_handler(Box::new(OnDelivery(Arc::downgrade(&shared))));
        if !driven {
            let mut this = SmbDirectConnection {
                driver: Some(tokio::spawn(drive(shared.clone()))),
                shared,
            };
            if let Err(e) = this.wait(|g| g.negotiated.is_some()).await {
                // Let the driver send what the core still holds (a negotiate
                // response refusing the peer) and tear down before we drop it.
                this.shared.kick.notify_one();
                if let Some(d) = this.driver.as_mut() {
                    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), d).await;
                }
                return Err(e);
            }
            return Ok((this, None));
        }
        let own = drive(shared.clone());
        // The provider's driver applies completions that wake `drive` (and `drive`
        // posts what wakes the provider's): `together` takes those wakes in the
        // same poll, where `tokio::join!` would wake the task for each.
        let mut driver: Driver = match shared.qp.take_driver() {
            Some(provider) => Box::pin(smbx_task::together(provider, own)),
            None => Box::pin(own),
        };
        let this = SmbDirectConnection {
            shared,
            driver: None,
        };
        let negotiated = tokio::select! {
            r = this.wait(|g| g.negotiated.is_some()) => r,
            () = &mut driver => return Err(this.closed_now()),
        };
        if let Err(e) = negotiated {
            // As above, with the driver polled here (it has not ended).
            this.shared.kick.notify_one();
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), &mut driver).await;
            return Err(e);
        }
        Ok((this, Some(driver)))
    }

    /// Why the connection is over, for a driver that ended before the negotiation.
    fn closed_now(&self) -> DirectError {
        closed_error(&self.shared.lock())
            .unwrap_or_else(|| DirectError::QpClosed("the connection's driver ended".into()))
    }

    /// Waits until `ready` holds, failing if the connection closes first.
    async fn wait(
        &self,
        mut ready: impl FnMut(&mut Inner<Q::Mr>) -> bool,
    ) -> Result<(), DirectError> {
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut g = self.shared.lock();
                apply_completions(&self.shared, &mut g);
                if ready(&mut g) {
                    return Ok(());
                }
                if let Some(e) = closed_error(&g) {
                    return Err(e);
                }
            }
            // Completions are applied where they arrive ([`OnDelivery`]), else by
            // the driver task; either notifies `changed` when one brings an event.
            notified.await;
        }
    }

    /// The negotiated parameters.
    pub fn params(&self) -> NegotiatedParams {
        self.shared
            .lock()
            .negotiated
            .expect("negotiated before construction returned")
    }

    /// The queue pair (for registering buffers in its protection domain or
    /// reading its state).
    pub fn qp(&self) -> &Q {
        &self.shared.qp
    }

    /// Sends one upper-layer message (fragmented as needed). Returns once it
    /// is queued; waits while too many messages are queued.
    pub async fn send_message(&self, data: &[u8]) -> Result<(), DirectError> {
        self.send_inner(data, None).await
    }

    /// Sends one upper-layer message whose first fragment goes as Send with
    /// Invalidate of `token` (the SMB2 RDMA_V1_INVALIDATE channel: the
    /// client's buffer STag, invalidated on arrival).
    pub async fn send_message_with_invalidate(
        &self,
        data: &[u8],
        token: u32,
    ) -> Result<(), DirectError> {
        self.send_inner(data, Some(token)).await
    }

    async fn send_inner(&self, data: &[u8], token: Option<u32>) -> Result<(), DirectError> {
        self.until_queued(|| self.try_send_message(data, token))
            .await
    }

    /// Like [`SmbDirectConnection::send_message`] for the message `data[start..]`,
    /// taken as it is (see [`SmbDirectConnection::try_send_message_owned`]); with
    /// `token`, its first fragment goes as Send with Invalidate.
    pub async fn send_message_owned(
        &self,
        data: Vec<u8>,
        start: usize,
        token: Option<u32>,
    ) -> Result<(), DirectError> {
        let mut data = Some(data);
        self.until_queued(|| {
            let d = data.take().ok_or(DirectError::InvalidTransfer("queued"))?;
            data = self.try_send_message_owned(d, start, token)?;
            Ok(data.is_none())
        })
        .await
    }

    /// Calls `try_queue` until it queues the message (true), waiting for room in
    /// the queue between calls.
    async fn until_queued(
        &self,
        mut try_queue: impl FnMut() -> Result<bool, DirectError>,
    ) -> Result<(), DirectError> {
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if try_queue()? {
                return Ok(());
            }
            notified.await;
        }
    }

    /// Queues one upper-layer message and posts what credits allow if the send
    /// queue has room now; `Ok(false)` (nothing queued) when it is full. With
    /// `token`, the first fragment goes as Send with Invalidate.
    pub fn try_send_message(&self, data: &[u8], token: Option<u32>) -> Result<bool, DirectError> {
        let mut g = self.shared.lock();
        if let Some(e) = closed_error(&g) {
            return Err(e);
        }
        if g.conn.queued_messages() >= QUEUE_LIMIT {
            g.space_wanted = true;
            return Ok(false);
        }
        self.queue_and_post(&mut g, |c| queue_copy(c, data, token))
            .map(|()| true)
    }

    /// Like [`SmbDirectConnection::try_send_message`] for the message
    /// `data[start..]`, taken as it is: its fragments are copied from it straight
    /// into the send slots (no copy of it is queued). `Ok(Some(data))`, the buffer
    /// given back, when the queue is full.
    pub fn try_send_message_owned(
        &self,
        data: Vec<u8>,
        start: usize,
        token: Option<u32>,
    ) -> Result<Option<Vec<u8>>, DirectError> {
        let mut g = self.shared.lock();
        if let Some(e) = closed_error(&g) {
            return Err(e);
        }
        if g.conn.queued_messages() >= QUEUE_LIMIT {
            g.space_wanted = true;
            return Ok(Some(data));
        }
        self.queue_and_post(&mut g, |c| c.send_message_owned(data, start, token))
            .map(|()| None)
    }

    /// Queues one upper-layer message, `data[start..]` taken as it is (not copied),
    /// and posts what credits allow, without waiting (the caller bounds what it
    /// queues, e.g. by SMB2 credits). With `token`, the first fragment goes as Send
    /// with Invalidate.
    pub fn send_message_now(
        &self,
        data: Vec<u8>,
        start: usize,
        token: Option<u32>,
    ) -> Result<(), DirectError> {
        let mut g = self.shared.lock();
        if let Some(e) = closed_error(&g) {
            return Err(e);
        }
        self.queue_and_post(&mut g, |c| c.send_message_owned(data, start, token))
    }

    /// Queues a message in the core and posts its fragments from the calling
    /// task rather than waking the driver (one task switch less per message);
    /// the driver only needs waking for a sooner deadline or the close.
    fn queue_and_post(
        &self,
        g: &mut Inner<Q::Mr>,
        queue: impl FnOnce(&mut Connection) -> Result<(), SendError>,
    ) -> Result<(), DirectError> {
        queue(&mut g.conn)?;
        pump(&self.shared, g);
        if driver_must_wake(g) {
            self.shared.kick.notify_one();
        }
        Ok(())
    }

    /// The next whole upper-layer message if one has arrived (completions waiting
    /// on the queue are taken first), without waiting; `None` when none has. It
    /// lies in the buffer it was received into, past its SMB Direct header when it
    /// came in one fragment over soft-iWARP.
    pub fn try_recv_message(&self) -> Option<InMessage> {
        let mut g = self.shared.lock();
        if g.messages.is_empty() {
            apply_completions(&self.shared, &mut g);
        }
        g.messages.pop_front()
    }

    /// Receives the next whole upper-layer message (as
    /// [`try_recv_message`](Self::try_recv_message) gives it).
    pub async fn recv_message(&self) -> Result<InMessage, DirectError> {
        let mut out = None;
        self.wait(|g| {
            out = g.messages.pop_front();
            out.is_some()
        })
        .await?;
        out.ok_or(DirectError::QpClosed("no message".into()))
    }

    /// STags of ours that the peer invalidated with Send with Invalidate
    /// since the last call.
    pub fn take_invalidated(&self) -> Vec<STag> {
        self.shared.lock().invalidated.drain(..).collect()
    }

    /// Describes `len` bytes at `offset` of a local region as a Buffer
    /// Descriptor V1 for the peer (the client side of READ/WRITE).
    pub fn describe(mr: &Q::Mr, offset: u64, len: u32) -> Option<BufferDescriptorV1> {
        mr.remote(offset, len).map(|r| BufferDescriptorV1 {
            offset: r.to,
            token: r.stag.0,
            length: r.len,
        })
    }

    /// RDMA Writes `local[offset..]` into the peer's buffers, filling the
    /// descriptors in order (the server's side of an SMB2 READ). `len` bytes
    /// are written; it must not exceed the descriptors' total nor the
    /// negotiated MaxReadWriteSize. Returns when all writes completed.
    pub async fn rdma_write(
        &self,
        local: &Q::Mr,
        offset: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
    ) -> Result<(), DirectError> {
        self.transfer(Src::Mr(local), offset, len, remote, true)
            .await
    }

    /// RDMA Reads the peer's buffers, in descriptor order, into
    /// `local[offset..]` (the server's side of an SMB2 WRITE); reads `len`
    /// bytes.
    pub async fn rdma_read(
        &self,
        local: &Q::Mr,
        offset: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
    ) -> Result<(), DirectError> {
        self.transfer(Src::Mr(local), offset, len, remote, false)
            .await
    }

    /// Like [`SmbDirectConnection::rdma_write`], but returns once the last Writes
    /// are posted, without waiting for their completion: a Send posted after this
    /// reaches the peer only after the data is placed (RDMAP delivers a Send after
    /// every RDMA Write posted before it on the queue pair), so a READ response can
    /// follow at once. `release` runs when the last Write completes (with `true` if
    /// all succeeded); `local` must stay untouched until then. A Write that fails
    /// breaks the connection, so nothing posted behind it claims success. Only a
    /// transfer longer than the RDMA window waits, for its earlier windows.
    pub async fn rdma_write_posted(
        &self,
        local: &Q::Mr,
        offset: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
        release: Release,
    ) -> Result<(), DirectError> {
        self.write_posted(Src::Mr(local), offset, len, remote, release)
            .await
    }

    /// Whether [`SmbDirectConnection::rdma_write_file`] works on this connection's
    /// queue pair (soft-iWARP: the data goes from the file into its socket).
    pub fn writes_files(&self) -> bool {
        self.shared.qp.writes_files()
    }

    /// Like [`SmbDirectConnection::rdma_write_posted`] for the first `len` bytes of
    /// the file range `src` (the server's side of an SMB2 READ whose data is in the
    /// page cache): the provider sends them from the file, without copying them into
    /// a region first, and holds `src` until they are sent. Refused unless the
    /// queue pair [writes files](Self::writes_files).
    pub async fn rdma_write_file(
        &self,
        src: Arc<dyn FileRange>,
        len: u64,
        remote: &[BufferDescriptorV1],
    ) -> Result<(), DirectError> {
        if !self.writes_files() {
            return Err(DirectError::InvalidTransfer(
                "the provider does not write from files",
            ));
        }
        let release: Release = Box::new(|_| {});
        self.write_posted(Src::File(&src), 0, len, remote, release)
            .await
    }

    /// Whether [`SmbDirectConnection::rdma_read_file`] works on this connection's
    /// queue pair (soft-iWARP with CRC off: the data goes from its socket into the
    /// file).
    pub fn reads_files(&self) -> bool {
        self.shared.qp.reads_files()
    }

    /// Like [`SmbDirectConnection::rdma_read`] into the first `len` bytes of the
    /// file range `sink` (the server's side of an SMB2 WRITE): the provider moves the
    /// data from its transport into the file, not through a region. A Read that
    /// fails (the file refused a byte: `sink` says why) fails the transfer, not the
    /// connection. Refused unless the queue pair [reads files](Self::reads_files).
    pub async fn rdma_read_file(
        &self,
        sink: Arc<dyn FileSink>,
        len: u64,
        remote: &[BufferDescriptorV1],
    ) -> Result<(), DirectError> {
        if !self.reads_files() {
            return Err(DirectError::InvalidTransfer(
                "the provider does not read into files",
            ));
        }
        self.transfer(Src::Sink(&sink), 0, len, remote, false).await
    }

    /// RDMA Writes `len` bytes of `local` from `offset`, posted (see
    /// [`SmbDirectConnection::rdma_write_posted`]).
    async fn write_posted(
        &self,
        local: Src<'_, Q::Mr>,
        offset: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
        release: Release,
    ) -> Result<(), DirectError> {
        let pieces = self.pieces(local.len(), offset, len, remote)?;
        let window_len = self.shared.lock().pools.rdma_window.max(1) as usize;
        let mut windows = pieces.chunks(window_len).peekable();
        while let Some(window) = windows.next() {
            if windows.peek().is_none() {
                return self.post_window(local, window, true, Posting::Release(release));
            }
            self.run_window(local, window, true).await?;
        }
        release(true);
        Ok(())
    }

    /// Checks a transfer and splits it into (local offset, remote piece), one per
    /// work request.
    fn pieces(
        &self,
        local_len: usize,
        offset: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
    ) -> Result<Vec<(u64, RemoteBuf)>, DirectError> {
        if len > u64::from(self.params().max_read_write_size) {
            return Err(DirectError::InvalidTransfer("longer than MaxReadWriteSize"));
        }
        if len > BufferDescriptorV1::total_length(remote) {
            return Err(DirectError::InvalidTransfer("longer than the descriptors"));
        }
        if offset.checked_add(len).is_none_or(|e| e > local_len as u64) {
            return Err(DirectError::InvalidTransfer("outside the local region"));
        }
        let mut pieces = Vec::new();
        let mut done = 0u64;
        for d in remote {
            if done == len {
                break;
            }
            let n = u64::from(d.length).min(len - done);
            if n == 0 {
                continue;
            }
            pieces.push((
                offset + done,
                RemoteBuf {
                    stag: STag(d.token),
                    to: d.offset,
                    len: n as u32,
                },
            ));
            done += n;
        }
        Ok(pieces)
    }

    /// RDMA Writes (`write`) or Reads `len` bytes between `local` from `offset`
    /// and the peer's buffers, window after window, each waited for.
    async fn transfer(
        &self,
        local: Src<'_, Q::Mr>,
        offset: u64,
        len: u64,
        remote: &[BufferDescriptorV1],
        write: bool,
    ) -> Result<(), DirectError> {
        let pieces = self.pieces(local.len(), offset, len, remote)?;
        let window_len = self.shared.lock().pools.rdma_window.max(1) as usize;
        for window in pieces.chunks(window_len) {
            self.run_window(local, window, write).await?;
        }
        Ok(())
    }

    /// Posts one window of work requests and waits for all of them.
    async fn run_window(
        &self,
        local: Src<'_, Q::Mr>,
        window: &[(u64, RemoteBuf)],
        write: bool,
    ) -> Result<(), DirectError> {
        let mut waits = Vec::with_capacity(window.len());
        let posted = self.post_window(local, window, write, Posting::Wait(&mut waits));
        if let Err(e) = posted {
            // Let the posted ones finish before reporting.
            for w in waits {
                let _ = w.await;
            }
            return Err(e);
        }
        let mut status = WcStatus::Success;
        for w in waits {
            match w.await {
                Ok(c) if c.status == WcStatus::Success => {}
                Ok(c) => status = c.status,
                Err(_) => status = WcStatus::Flushed,
            }
        }
        if status != WcStatus::Success {
            return Err(DirectError::Transfer(status));
        }
        Ok(())
    }

    fn post_window(
        &self,
        local: Src<'_, Q::Mr>,
        window: &[(u64, RemoteBuf)],
        write: bool,
        mut how: Posting<'_>,
    ) -> Result<(), DirectError> {
        let mut g = self.shared.lock();
        if let Some(e) = closed_error(&g) {
            return Err(e);
        }
        for (i, &(loc, rb)) in window.iter().enumerate() {
            let id = g.next_op;
            g.next_op = (g.next_op + 1) & !KIND_MASK;
            let qp = &self.shared.qp;
            match local {
                Src::Mr(mr) if write => {
                    qp.post_write(KIND_OP | id, &[Sge::new(mr, loc, rb.len)], rb)?
                }
                Src::Mr(mr) => qp.post_read(KIND_OP | id, Sge::new(mr, loc, rb.len), rb)?,
                Src::Sink(sink) => {
                    let at = usize::try_from(loc)
                        .map_err(|_| DirectError::InvalidTransfer("outside the file range"))?;
                    qp.post_read_file(KIND_OP | id, sink.clone(), at, rb.len as usize, rb)?
                }
                Src::File(src) => {
                    let at = usize::try_from(loc)
                        .map_err(|_| DirectError::InvalidTransfer("outside the file range"))?;
                    qp.post_write_file(KIND_OP | id, src.clone(), at, rb.len as usize, rb)?
                }
            }
            let op = match &mut how {
                Posting::Wait(waits) => {
                    let (tx, rx) = oneshot::channel();
                    waits.push(rx);
                    Op::Waited(tx)
                }
                Posting::Release(_) if i + 1 < window.len() => Op::Posted(None),
                Posting::Release(release) => {
                    Op::Posted(Some(std::mem::replace(release, Box::new(|_| {}))))
                }
            };
            g.ops.insert(id, op);
        }
        Ok(())
    }

    /// Closes the connection.
    pub async fn close(&self) {
        self.shared.lock().conn.close();
        self.shared.kick.notify_one();
        let _ = self.wait(|_| false).await;
    }

    /// The core's counters (messages, keepalives).
    pub fn stats(&self) -> crate::connection::Stats {
        self.shared.lock().conn.stats()
    }

    /// True once the connection is over.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
    }
}

/// The local side of an RDMA transfer: a region, or a file range (RDMA Write: its
/// source; RDMA Read: its sink).
enum Src<'a, M> {
    Mr(&'a M),
    File(&'a Arc<dyn FileRange>),
    Sink(&'a Arc<dyn FileSink>),
}

impl<M> Clone for Src<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Src<'_, M> {}

impl<M: MemoryRegion> Src<'_, M> {
    /// Its length in bytes.
    fn len(&self) -> usize {
        match self {
            Src::Mr(m) => m.len(),
            Src::File(f) => f.len(),
            Src::Sink(f) => f.len(),
        }
    }
}

/// How [`SmbDirectConnection::post_window`] tracks the requests it posts.
enum Posting<'a> {
    /// A receiver for each, to await.
    Wait(&'a mut Vec<oneshot::Receiver<Completion>>),
    /// None awaited; the last one releases the transfer's buffer.
    Release(Release),
}

fn closed_error<M>(g: &Inner<M>) -> Option<DirectError> {
    // A local close that followed a failure reports the failure.
    if let Some(r) = g
        .disconnect
        .as_ref()
        .filter(|r| **r != DisconnectReason::Local)
    {
        return Some(DirectError::Disconnected(r.clone()));
    }
    g.closed
        .as_ref()
        .map(|w| DirectError::QpClosed(w.clone()))
        .or_else(|| g.disconnect.clone().map(DirectError::Disconnected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftQp};
    use smbx_rdma::Listener;
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};

    /// A waker that records whether the connection's lock was free when it was
    /// woken.
    struct LockFreeAtWake {
        shared: Arc<Shared<SoftQp>>,
        seen: Mutex<Vec<bool>>,
    }

    impl Wake for LockFreeAtWake {
        fn wake(self: Arc<Self>) {
            let free = self.shared.inner.try_lock().is_ok();
            self.seen.lock().unwrap().push(free);
        }
    }

    impl LockFreeAtWake {
        async fn woken(&self) -> Vec<bool> {
            tokio::time::timeout(std::time::Duration::from_secs(10), async {
                while self.seen.lock().unwrap().is_empty() {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            })
            .await
            .expect("woken");
            std::mem::take(&mut *self.seen.lock().unwrap())
        }
    }

    /// A task waiting for a message or for an RDMA Read's completion is woken once
    /// the connection is unlocked, not under the lock (where, on another worker, it
    /// would find the lock held and sleep on it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_are_woken_after_the_connection_is_unlocked() {
        let prov = SoftIwarp::new(IwarpOptions::default());
        let lis = prov
            .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
            .await
            .unwrap();
        let addr = lis.local_addr();
        let cpd = prov.alloc_pd().unwrap();
        let accepting = tokio::spawn(async move {
            let req = lis.accept().await.unwrap();
            let spd = req.pd().clone();
            let conn = SmbDirectConnection::<SoftQp>::accept(req, Config::default())
                .await
                .unwrap();
            (conn, spd)
        });
        let client = SmbDirectConnection::<SoftQp>::connect(&prov, &cpd, addr, Config::default())
            .await
            .unwrap();
        let (server, spd) = accepting.await.unwrap();
        let probe = Arc::new(LockFreeAtWake {
            shared: server.shared.clone(),
            seen: Mutex::new(Vec::new()),
        });
        let waker = Waker::from(probe.clone());
        let mut cx = Context::from_waker(&waker);

        // A message.
        let mut recv = Box::pin(server.recv_message());
        assert!(recv.as_mut().poll(&mut cx).is_pending());
        client.send_message(b"ping").await.unwrap();
        assert!(
            probe.woken().await.iter().all(|f| *f),
            "woken under the lock"
        );
        assert!(matches!(recv.as_mut().poll(&mut cx), Poll::Ready(Ok(m)) if m.bytes() == b"ping"));

        // An RDMA Read's completion.
        let src = cpd
            .register(vec![7u8; 4096], Access::LOCAL_WRITE | Access::REMOTE_READ)
            .unwrap();
        let d = SmbDirectConnection::<SoftQp>::describe(&src, 0, 4096).unwrap();
        let dst = spd.alloc(4096, Access::LOCAL_WRITE).unwrap();
        let mut read = Box::pin(server.rdma_read(&dst, 0, 4096, std::slice::from_ref(&d)));
        loop {
            match read.as_mut().poll(&mut cx) {
                Poll::Pending => {
                    assert!(
                        probe.woken().await.iter().all(|f| *f),
                        "woken under the lock"
                    );
                }
                Poll::Ready(r) => break r.unwrap(),
            }
        }
        assert!(dst.with(|b| b.iter().all(|x| *x == 7)));
    }
}
