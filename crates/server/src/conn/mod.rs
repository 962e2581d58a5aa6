//! Connections: one task reads messages from the connection's message link
//! (smbx_transport::link) and dispatches them; anything (a handler completing later,
//! an oplock break, an interim STATUS_PENDING) sends through [`Connection::send`] at
//! any time. The link hides the transport: Direct TCP or SMB Direct is chosen where
//! the connection is accepted (the listener builds the link, [`serve`] takes any),
//! and the rest asks the link for capabilities (file tails, the largest message, an
//! RDMA side), never for its transport; [`Connection::transport`] is for labels.

pub mod pending;
mod serve;
pub(crate) mod sink;
pub(crate) mod tail;

pub use serve::{serve, tcp_link};

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use smbx_transport::link::{MessageSender, Outgoing, Transport, TrySendError};
use smbx_wire::Dialect;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::credits::CreditWindow;
use crate::state::connections::ConnectionHandle;
use crate::state::ServerState;

/// What NEGOTIATE established on a connection, kept for signing/encryption decisions
/// and FSCTL_VALIDATE_NEGOTIATE_INFO.
#[derive(Debug, Clone, Default)]
pub struct NegotiateState {
    /// The dialect; 0 before NEGOTIATE, 0x02FF after an SMB1 wildcard answer.
    pub dialect: Dialect,
    /// Client's Capabilities.
    pub client_capabilities: u32,
    /// Client's ClientGuid.
    pub client_guid: [u8; 16],
    /// Client's SecurityMode.
    pub client_security_mode: u16,
    /// Dialects the client offered.
    pub client_dialects: Vec<Dialect>,
    /// Capabilities the server answered.
    pub server_capabilities: u32,
    /// SecurityMode the server answered.
    pub server_security_mode: u16,
    /// Cipher chosen (3.1.1 context, or AES-128-CCM for 3.0/3.0.2 with encryption); 0 = none.
    pub cipher: u16,
    /// Signing algorithm id chosen via the 3.1.1 signing context, if any.
    pub signing_algorithm: Option<u16>,
    /// Connection preauth integrity hash (3.1.1), after NEGOTIATE request+response.
    pub preauth: Option<[u8; 64]>,
}

/// Makes compound chains of one connection *start* in the order they arrived while
/// still running concurrently: a chain waits for its turn, and hands the turn on once
/// its processing has been polled the first time (session/tree/FileId lookups and
/// everything up to the first real wait have happened). So a CLOSE sent after a
/// QUERY_DIRECTORY can never overtake it (smb2.compound_find.compound_find_close),
/// while READs and WRITEs that wait on I/O still overlap.
///
/// Passing the turn wakes only the chains whose turn has come, not every chain
/// waiting: with 32 requests arriving in one read, a broadcast woke each waiting
/// chain once per earlier chain.
pub(crate) struct StartOrder {
    next_ticket: std::sync::atomic::AtomicU64,
    turn: Mutex<Turn>,
}

/// The ticket whose turn it is, and the chains waiting for a later one.
struct Turn {
    now: u64,
    waiting: Vec<(u64, std::task::Waker)>,
}

impl StartOrder {
    fn new() -> Self {
        StartOrder {
            next_ticket: std::sync::atomic::AtomicU64::new(0),
            turn: Mutex::new(Turn {
                now: 0,
                waiting: Vec::new(),
            }),
        }
    }

    /// Takes the next ticket (called by the read loop, in arrival order).
    pub(crate) fn ticket(&self) -> u64 {
        self.next_ticket
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `fut` once `ticket`'s turn has come; the turn passes on after `fut`'s
    /// first poll (or if it is dropped before).
    ///
    /// `fut` comes pinned where the caller made it: an `async fn` keeps a future taken
    /// by value twice, as its argument and as the pinned local it polls, so a request's
    /// task (its chain's processing, ~2.4 KB) took 7.3 KB, all of it copied at each
    /// move (into its box, or into the task tokio spawns).
    pub(crate) async fn run<F: std::future::Future>(
        &self,
        ticket: u64,
        mut fut: std::pin::Pin<&mut F>,
    ) -> F::Output {
        std::future::poll_fn(|cx| {
            let mut t = self.turn.lock();
            if t.now >= ticket {
                return std::task::Poll::Ready(());
            }
            match t.waiting.iter_mut().find(|(k, _)| *k == ticket) {
                Some((_, w)) => w.clone_from(cx.waker()),
                None => t.waiting.push((ticket, cx.waker().clone())),
            }
            std::task::Poll::Pending
        })
        .await;
        let mut pass = PassTurn {
            order: self,
            next: ticket + 1,
            done: false,
        };
        std::future::poll_fn(move |cx| {
            let r = fut.as_mut().poll(cx);
            pass.pass();
            r
        })
        .await
    }
}

/// Hands the turn on exactly once.
struct PassTurn<'a> {
    order: &'a StartOrder,
    next: u64,
    done: bool,
}

impl PassTurn<'_> {
    fn pass(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let mut ready = Vec::new();
        {
            let mut t = self.order.turn.lock();
            t.now = t.now.max(self.next);
            let now = t.now;
            let mut i = 0;
            while i < t.waiting.len() {
                if t.waiting[i].0 <= now {
                    ready.push(t.waiting.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
        for w in ready {
            w.wake();
        }
    }
}

impl Drop for PassTurn<'_> {
    fn drop(&mut self) {
        self.pass();
    }
}

/// The RDMA side of a connection whose link has one (SMB Direct): the link's RDMA
/// handle (RDMA Read and Write of READ and WRITE payloads, from and into its
/// registered payload pool) and the connection's bound on what they hold.
/// (Messages go through the connection's message link, whatever the transport.)
pub struct DirectIo {
    /// The SMB Direct link.
    pub link: Arc<dyn smbx_transport::DirectLink>,
    /// Bytes that in-flight RDMA transfers of this connection may hold.
    pub rdma_budget: tokio::sync::Semaphore,
    /// The pipes WRITE data read into files goes through (see [`sink`]).
    pub pipes: Arc<smbx_transport::splice::Pipes>,
}

/// Bytes of RDMA transfer buffers one SMB Direct connection may hold at once.
pub const RDMA_BUDGET: usize = 64 << 20;

/// A client connection.
pub struct Connection {
    /// Connection id (server-local).
    pub id: u64,
    /// Server-wide state.
    pub server: Arc<ServerState>,
    /// The configuration in force when the connection was accepted: a reload's
    /// global options apply to new connections (state/settings.rs).
    pub config: Arc<smbx_config::Config>,
    /// Remote address.
    pub peer: SocketAddr,
    /// Local address.
    pub local: SocketAddr,
    /// Negotiated parameters.
    pub negotiate: Mutex<NegotiateState>,
    /// Sequence window / credits.
    pub credits: Mutex<CreditWindow>,
    /// Async operations in flight.
    pub pending: pending::PendingTable,
    /// Sessions established on this connection (torn down with it).
    pub sessions: Mutex<Vec<u64>>,
    /// Set once a SESSION_SETUP succeeded as a user or guest (ends the
    /// unauthenticated timeout; an anonymous logon does not).
    pub authenticated: std::sync::atomic::AtomicBool,
    /// This connection's bound on logons in progress
    /// ([`crate::state::session::MAX_LOGONS_PER_CONNECTION`]).
    pub logons: Arc<tokio::sync::Semaphore>,
    /// Chains start in arrival order (see [`StartOrder`]).
    pub(crate) start_order: StartOrder,
    /// The RDMA side, when the link has one.
    direct: Option<DirectIo>,
    /// The connection's memory budget, in bytes: requests received and not yet
    /// answered, and the responses they may produce ([`Connection::reserve`]),
    /// until those are written to the socket. The read loop stops reading while
    /// it is used up, so a client that stops reading its socket stops being read.
    pub(crate) budget: Arc<Semaphore>,
    /// The sending half of the connection's message link.
    sender: Box<dyn MessageSender>,
    closed: watch::Sender<bool>,
}

impl Connection {
    pub(crate) fn new(
        id: u64,
        server: Arc<ServerState>,
        sender: Box<dyn MessageSender>,
    ) -> Connection {
        let config = server.config();
        let direct = sender.rdma().map(|link| DirectIo {
            link: link.clone(),
            rdma_budget: Semaphore::new(RDMA_BUDGET),
            pipes: Arc::default(),
        });
        let max_credits = config.global.smb2_max_credits;
        let budget = budget_bytes(&config.global);
        Connection {
            id,
            config,
            peer: sender.peer_addr(),
            local: sender.local_addr(),
            server,
            negotiate: Mutex::new(NegotiateState::default()),
            credits: Mutex::new(CreditWindow::new(if max_credits == 0 {
                8192
            } else {
                max_credits
            })),
            pending: pending::PendingTable::default(),
            sessions: Mutex::new(Vec::new()),
            authenticated: std::sync::atomic::AtomicBool::new(false),
            logons: Arc::new(tokio::sync::Semaphore::new(
                crate::state::session::MAX_LOGONS_PER_CONNECTION,
            )),
            start_order: StartOrder::new(),
            direct,
            budget: Arc::new(Semaphore::new(budget)),
            sender,
            closed: watch::Sender::new(false),
        }
    }

    /// The negotiated dialect (0 before NEGOTIATE).
    pub fn dialect(&self) -> Dialect {
        self.negotiate.lock().dialect
    }

    /// Queues one complete SMB2 message (already signed or sealed) on the link.
    /// Fails silently if the connection is gone.
    pub async fn send(&self, msg: Vec<u8>) {
        self.send_holding(msg, None, None).await
    }

    /// Like [`Connection::send`], keeping `permit` (the request's share of the
    /// in-flight budget) until the message has been written to the socket (over SMB
    /// Direct: queued on the link); `invalidate` sends it as Send with Invalidate of
    /// that client STag (SMB Direct).
    pub(crate) async fn send_holding(
        &self,
        msg: Vec<u8>,
        permit: Option<OwnedSemaphorePermit>,
        invalidate: Option<u32>,
    ) {
        let mut out = Outgoing::new(msg);
        out.hold = permit;
        out.invalidate = invalidate;
        self.send_out(out).await
    }

    /// Sends `msg` followed in the same frame by `tail`, READ data still in the
    /// file (a link that [sends file tails](Connection::sends_file_tails) sends it
    /// from the page cache; any other reads it in).
    pub(crate) async fn send_with_tail(
        &self,
        msg: Vec<u8>,
        tail: tail::FileTail,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let mut out = Outgoing::new(msg);
        out.tail = Some(Box::new(tail));
        out.hold = permit;
        self.send_out(out).await
    }

    /// Queues `out` on the link, waiting while its queue is full (a peer that does
    /// not read, or grants no SMB Direct send credits, makes this wait); a link that
    /// fails closes the connection.
    async fn send_out(&self, out: Outgoing) {
        self.server
            .metrics
            .network(crate::metrics::Direction::Out, self.transport(), out.len());
        // The queue's room is tried first in place (no future of its own to build,
        // move and poll on every response); only a full queue waits.
        let res = match self.sender.try_send(out) {
            Ok(()) => return,
            Err(TrySendError::Full(out)) => self.sender.send_waiting(out).await,
            Err(TrySendError::Failed(e)) => Err(e),
        };
        if let Err(e) = res {
            tracing::debug!(conn = self.id, error = %e, "send failed");
            self.close();
        }
    }

    /// Whether READ data may stay in the file until it is sent
    /// ([`Connection::send_with_tail`] sends it without copying it).
    pub(crate) fn sends_file_tails(&self) -> bool {
        self.sender.sends_file_tails()
    }

    /// The largest message the connection's link carries, when it limits messages
    /// below a Direct TCP frame (SMB Direct: the negotiated reassembled size).
    pub fn max_message(&self) -> Option<usize> {
        self.sender.max_message()
    }

    /// The RDMA side, when the connection's link has one (SMB Direct).
    pub fn direct(&self) -> Option<&DirectIo> {
        self.direct.as_ref()
    }

    /// Which transport carries the connection, for labels (logs, metrics, status);
    /// what it can do is asked of the link, not derived from this.
    pub fn transport(&self) -> Transport {
        self.sender.transport()
    }

    /// Asks the connection to close (the read loop exits, state is torn down).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Resolves once [`Connection::close`] was called.
    pub(crate) async fn closing(&self) {
        let mut rx = self.closed.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Takes `bytes` from the connection's budget for a response about to be
    /// queued, waiting until earlier responses have been written; `None` if the
    /// connection closes first or `bytes` is more than the whole budget.
    pub(crate) async fn reserve(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        if bytes > self.budget_capacity() {
            return None;
        }
        let n = u32::try_from(bytes.max(1)).ok()?;
        // Usually the budget has room: taken without subscribing to the close signal.
        if !*self.closed.borrow() {
            if let Ok(p) = self.budget.clone().try_acquire_many_owned(n) {
                return Some(p);
            }
        }
        tokio::select! {
            p = self.budget.clone().acquire_many_owned(n) => p.ok(),
            _ = self.closing() => None,
        }
    }

    /// Size of the connection's budget in bytes (see [`Connection::budget`]).
    pub fn budget_capacity(&self) -> usize {
        budget_bytes(&self.config.global)
    }

    /// Largest PDU accepted: the biggest configured payload plus headroom for headers.
    pub fn max_pdu(&self) -> usize {
        max_pdu(&self.config.global)
    }
}

/// Largest PDU accepted: the biggest configured payload plus headroom for headers.
fn max_pdu(g: &smbx_config::Global) -> usize {
    let payload = g.smb2_max_read.max(g.smb2_max_write).max(g.smb2_max_trans) as usize;
    payload
        .max(65536)
        .saturating_add(64 * 1024)
        .min(smbx_wire::framing::MAX_FRAME_LEN)
}

/// A connection's budget for requests and queued responses: four maximum-size
/// PDUs (about 32 MiB with the default 8 MiB I/O sizes).
fn budget_bytes(g: &smbx_config::Global) -> usize {
    max_pdu(g).saturating_mul(4)
}

impl ConnectionHandle for Connection {
    fn cancel_pending(&self, session_id: Option<u64>) {
        self.pending.cancel_all(session_id);
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl ServerState {
    /// Finds a live connection by id.
    pub fn connection(&self, id: u64) -> Option<Arc<Connection>> {
        as_connection(self.connections.get(id)?)
    }

    /// Every live connection, by ascending id.
    pub fn live_connections(&self) -> Vec<Arc<Connection>> {
        self.connections
            .all()
            .into_iter()
            .filter_map(|(_, c)| as_connection(c))
            .collect()
    }
}

/// The connection behind a handle of the connection table (every entry is one).
fn as_connection(c: Arc<dyn ConnectionHandle>) -> Option<Arc<Connection>> {
    c.into_any().downcast::<Connection>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chains start in ticket order however their tasks are scheduled, and a chain
    /// that waits after its first poll does not hold up the next one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chains_start_in_ticket_order_and_overlap() {
        let order = Arc::new(StartOrder::new());
        let started = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(Semaphore::new(0));
        let tickets: Vec<u64> = (0..16).map(|_| order.ticket()).collect();
        let mut tasks = Vec::new();
        // Spawned last ticket first.
        for &t in tickets.iter().rev() {
            let (order, started, gate) = (order.clone(), started.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                let chain = std::pin::pin!(async {
                    started.lock().push(t);
                    // Every chain waits here until all have started.
                    gate.acquire().await.unwrap().forget();
                });
                order.run(t, chain).await
            }));
        }
        while started.lock().len() < tickets.len() {
            tokio::task::yield_now().await;
        }
        assert_eq!(*started.lock(), tickets);
        gate.add_permits(tickets.len());
        for t in tasks {
            t.await.unwrap();
        }
    }
}
