//! One SMB2 connection (channel) over a message link (Direct TCP or SMB Direct, see
//! [`smbx_transport::link`]): the thin driver of the sans-IO [`crate::request_core`].
//! Senders charge credits, take MessageIds and register their requests in the core,
//! then queue the frame on the link's sender (Direct TCP: written at once when nothing
//! is ahead of it); received frames are opened (unseal, split, verify) and fed to the
//! core, which says whom to wake, by the request waiting for its response (Direct TCP,
//! and SMB Direct over soft-iWARP with the link's driver: see [`pump`]) or the
//! channel's reader task; one timer task hands the core the
//! time, so requests past their deadline fail with [`Error::Timeout`] and are
//! cancelled on the server.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use smbx_transport::link::{
    self, LinkError, MessageReceiver, MessageSender, Outgoing, TcpOptions, TrySendError,
};
use smbx_transport::DirectLink;
use smbx_wire::framing::MAX_FRAME_LEN;
use smbx_wire::{Dialect, InMessage, WireError};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, trace, warn};

use crate::error::{DisconnectReason, Error, ProtocolError, Result};
use crate::request_core::inbound;
pub(crate) use crate::request_core::inbound::SessionSecurity;
pub use crate::request_core::inbound::{Event, Response};
use crate::request_core::outbound::{self, Cancel};
pub(crate) use crate::request_core::outbound::{body_writer, HEADROOM};
pub(crate) use crate::request_core::Request;
use crate::request_core::{Acquire, IdMap, Matched, Members, RequestCore, Sent};

mod pump;
use pump::{pump_task, reply_of, SocketPump, SpinWait};

/// Events buffered before further ones are dropped.
const EVENT_QUEUE: usize = 256;

/// Where a send goes: its session and whether it is sealed.
#[derive(Clone, Default)]
pub(crate) struct Route {
    /// SessionId (0 before a session exists).
    pub session_id: u64,
    /// The session's keys, if it has any.
    pub security: Option<Arc<SessionSecurity>>,
    /// Seal the message.
    pub encrypt: bool,
    /// Sign even if the session does not require it (3.1.1 TREE_CONNECT, 3.0.x
    /// VALIDATE_NEGOTIATE_INFO).
    pub force_sign: bool,
}

/// What a request's waiter is told: its response (or why there is none) and the
/// request itself when the send retained it.
struct Reply {
    res: Result<Response>,
    request: Option<Request>,
}

/// The core as this driver runs it: a request in flight leaves a reply channel, a
/// sender waiting for credits a wake-up channel.
type Core = RequestCore<oneshot::Sender<Reply>, oneshot::Sender<()>>;

struct Shared {
    core: Mutex<Core>,
    sessions: RwLock<IdMap<Arc<SessionSecurity>>>,
    /// Unbounded so that nothing awaits between spending MessageIds and queueing the
    /// frame (a cancelled caller must not leave a hole in the server's window); the
    /// credit window bounds what can be queued.
    sender: Box<dyn MessageSender>,
    events: mpsc::Sender<Event>,
    /// I/O buffers reused across operations: RDMA transfer buffers over SMB
    /// Direct, received frames of 64 KiB and more over TCP.
    pool: Arc<smbx_transport::BufPool>,
}

/// Hands a woken credit waiter its credits; false (the credits go back) if it left.
fn wake(tx: oneshot::Sender<()>) -> bool {
    tx.send(()).is_ok()
}

impl Shared {
    fn core(&self) -> std::sync::MutexGuard<'_, Core> {
        self.core.lock().expect("core lock")
    }

    /// Tells an SMB Direct link how many requests wait for their response, as a
    /// request is sent (the responses it has coming: it hands them on in batches
    /// of about half of it; at -o16 4 KiB reads 1.16-1.62x the IOPS of a fixed 16).
    fn hint_in_flight(&self, core: &Core) {
        if let Some(link) = self.sender.rdma() {
            link.set_in_flight(core.pending());
        }
    }

    fn close(&self, why: DisconnectReason) {
        let (lost, waiting) = self.core().close(why.clone());
        drop(waiting);
        for f in lost {
            let _ = f.token.send(Reply {
                res: Err(Error::Disconnected(why.clone())),
                request: f.request,
            });
        }
    }

    fn closed_error(&self) -> Error {
        let why = self.core().closed().cloned();
        Error::Disconnected(why.unwrap_or(DisconnectReason::Unknown))
    }

    fn session(&self, id: u64) -> Option<Arc<SessionSecurity>> {
        self.sessions
            .read()
            .expect("sessions lock")
            .get(&id)
            .cloned()
    }

    /// Sends SMB2 CANCEL for a request the client stopped waiting for (sealed or
    /// signed as its session's requests are). CANCEL takes no credit and gets no
    /// response of its own; failures are ignored.
    fn cancel(&self, c: Cancel) {
        let sec = self.session(c.session_id);
        let keys = sec.as_ref().map(|s| &s.keys);
        let seal = sec.as_ref().is_some_and(|s| s.encrypt);
        let sign = sec.as_ref().is_some_and(|s| s.sign);
        if let Some((buf, start)) = outbound::cancel_frame(c, keys, seal, sign) {
            let _ = self.sender.send(buf, start);
        }
    }

    /// Fails the requests past their deadline with a timeout and cancels them.
    fn expire(&self, now: Instant) {
        let due = self.core().expire(now);
        for f in due {
            debug!("message {} timed out", f.message_id);
            self.cancel(f.cancel());
            let _ = f.token.send(Reply {
                res: Err(Error::Timeout),
                request: f.request,
            });
        }
    }
}

/// A sender waiting for credits: if it is dropped after the credits were spent for
/// it (woken, not yet resumed), they go back to the window.
struct CreditWait<'a> {
    shared: &'a Shared,
    rx: oneshot::Receiver<()>,
    need: u32,
    done: bool,
}

impl Drop for CreditWait<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut core = self.shared.core();
        if self.rx.try_recv().is_ok() {
            core.release(self.need, wake);
        }
    }
}

/// Most requests waiting at once for which a request drives an SMB Direct (soft-iWARP)
/// connection's reader loop and driver itself; beyond that the reader task does. s40,
/// quiet machine, one server, `smbx bench` clients alternated, against the reader and
/// the driver in tasks of their own: 4 KiB QD1 IOPS higher in 3 of 3 pairs (25,546-26,670
/// against 18,147-20,920; p50 34.6-34.8 us against 46.1-54.9); 64 KiB READ -o8 MB/s
/// higher in 2 of 2 (2,834-3,172 against 2,272-2,395; with a bound of 8, 3 of 3); 4 KiB
/// -o32 level (149,211-151,145 against 133,088-150,052), where a bound of 8 lost 3 of 3
/// (136,564-156,502 against 150,789-165,256) and no bound lost ~25% (many waiting
/// requests each polling the driver).
const DIRECT_DRIVE_LIMIT: usize = 4;

/// A connection to one server.
pub struct Connection {
    shared: Arc<Shared>,
    events: Mutex<Option<mpsc::Receiver<Event>>>,
    timeout: Option<Duration>,
    tasks: Vec<JoinHandle<()>>,
    /// The reader loop, driven by the requests that wait for their responses and by
    /// the reader task (Direct TCP; SMB Direct over soft-iWARP, with the link's
    /// driver); `None`: the reader task alone reads (SMB Direct through verbs).
    pump: Option<Arc<SocketPump>>,
    /// How its requests wait for their responses (a lone one spins for a while).
    spin: SpinWait,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let core = self.shared.core();
        f.debug_struct("Connection")
            .field("credits", &core.credits())
            .field("in_flight", &core.in_flight())
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Connection {
    /// Wraps a connected socket and starts the reader and writer tasks; a request
    /// waiting alone spins for up to `spin` ([`crate::ClientOptions::spin_wait`]).
    pub(crate) fn start(
        stream: TcpStream,
        max_credits: u16,
        timeout: Option<Duration>,
        spin: Duration,
    ) -> Connection {
        let pool = Arc::new(smbx_transport::BufPool::new(8));
        // Frames of the usual I/O sizes land in pooled buffers, never zero-filled first.
        // A request goes to the socket as it is sent when nothing is ahead of it (no
        // hop through the writer task).
        let mut o = TcpOptions::new(MAX_FRAME_LEN, pool.clone());
        o.send_at_once = true;
        let (tx, rx, writer) = link::tcp_with(stream, o);
        let (shared, events_rx) = Self::shared(Box::new(tx), max_credits, pool);
        // The reader loop, driven by the requests that wait and by the reader task.
        let pump = Arc::new(SocketPump::new(reader_task(rx, shared.clone())));
        let sh = shared.clone();
        let writer = tokio::spawn(async move {
            if let Err(e) = writer.await {
                sh.close(DisconnectReason::Write(Arc::new(e)));
            }
        });
        let tasks = vec![writer, tokio::spawn(pump_task(pump.clone()))];
        Self::finish(shared, events_rx, timeout, tasks, Some(pump), spin)
    }

    /// Runs over a negotiated SMB Direct link: messages without the Direct-TCP
    /// prefix, READ and WRITE data by RDMA where the file operations ask for it; a
    /// request waiting alone spins for up to `spin`, as over Direct TCP.
    pub(crate) fn start_direct(
        link: Arc<dyn DirectLink>,
        driver: Option<smbx_transport::Driver>,
        max_credits: u16,
        timeout: Option<Duration>,
        spin: Duration,
    ) -> Connection {
        let pool = Arc::new(smbx_transport::BufPool::new(64));
        // Requests are posted on the link as they are sent: no writer task.
        let (tx, rx) = link::direct(link);
        let (shared, events_rx) = Self::shared(Box::new(tx), max_credits, pool);
        let reader = reader_task(rx, shared.clone());
        match driver {
            // The link's driver (soft-iWARP's socket I/O and the SMB Direct timers)
            // and the reader loop are one future, driven as over Direct TCP by the
            // requests that wait for their responses and by the reader task
            // ([`SocketPump`]): a request's response is received, placed and
            // dispatched in the task awaiting it, and the driver's and the reader's
            // wakes of each other are taken in the same poll (`together`, as in the
            // server's connection task).
            Some(d) => {
                let pump = Arc::new(SocketPump::with_drive_limit(
                    smbx_task::together(reader, d),
                    DIRECT_DRIVE_LIMIT,
                ));
                let tasks = vec![tokio::spawn(pump_task(pump.clone()))];
                Self::finish(shared, events_rx, timeout, tasks, Some(pump), spin)
            }
            // A link whose driver runs on its own (verbs): the reader task alone reads.
            None => {
                let reader = tokio::spawn(reader);
                Self::finish(shared, events_rx, timeout, vec![reader], None, spin)
            }
        }
    }

    fn shared(
        sender: Box<dyn MessageSender>,
        max_credits: u16,
        pool: Arc<smbx_transport::BufPool>,
    ) -> (Arc<Shared>, mpsc::Receiver<Event>) {
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
        let shared = Arc::new(Shared {
            core: Mutex::new(RequestCore::new(max_credits)),
            sessions: RwLock::new(IdMap::default()),
            sender,
            events: events_tx,
            pool,
        });
        (shared, events_rx)
    }

    /// The connection with its tasks, and the timer task when requests have a timeout.
    fn finish(
        shared: Arc<Shared>,
        events: mpsc::Receiver<Event>,
        timeout: Option<Duration>,
        mut tasks: Vec<JoinHandle<()>>,
        pump: Option<Arc<SocketPump>>,
        spin: Duration,
    ) -> Connection {
        if let Some(t) = timeout {
            tasks.push(tokio::spawn(timer_task(shared.clone(), t)));
        }
        Connection {
            shared,
            events: Mutex::new(Some(events)),
            timeout,
            tasks,
            pump,
            spin: SpinWait::new(spin),
        }
    }

    /// The pool of I/O buffers: RDMA transfer buffers, or received frames.
    pub(crate) fn pool(&self) -> &Arc<smbx_transport::BufPool> {
        &self.shared.pool
    }

    /// The link's RDMA side, when it has one (SMB Direct).
    pub(crate) fn direct(&self) -> Option<&Arc<dyn DirectLink>> {
        self.shared.sender.rdma()
    }

    /// Records the negotiated dialect and whether multi-credit requests are allowed.
    pub(crate) fn set_negotiated(&self, dialect: Dialect, large_mtu: bool) {
        self.shared.core().set_negotiated(dialect, large_mtu);
    }

    /// True if multi-credit requests are allowed.
    pub(crate) fn large_mtu(&self) -> bool {
        self.shared.core().large_mtu()
    }

    /// Installs a session's keys, so responses on it are verified and unsealed.
    pub(crate) fn add_session(&self, id: u64, sec: Arc<SessionSecurity>) {
        self.shared
            .sessions
            .write()
            .expect("sessions lock")
            .insert(id, sec);
    }

    /// Forgets a session's keys.
    pub(crate) fn remove_session(&self, id: u64) {
        self.shared
            .sessions
            .write()
            .expect("sessions lock")
            .remove(&id);
    }

    /// The receiver of unsolicited messages (oplock and lease breaks); only the first
    /// caller gets it.
    pub fn take_events(&self) -> Option<mpsc::Receiver<Event>> {
        self.events.lock().expect("events lock").take()
    }

    /// Credits currently granted and unused.
    pub fn credits_available(&self) -> usize {
        self.shared.core().credits()
    }

    /// True once the connection has failed or been closed.
    pub fn is_closed(&self) -> bool {
        self.shared.core().closed().is_some()
    }

    /// Sends requests as one compound (a single request is a compound of one) and waits
    /// for all their responses. With `keep_sent`, also returns the plaintext bytes of the
    /// message as sent (for the preauth integrity hash).
    pub(crate) async fn send(
        &self,
        reqs: Vec<Request>,
        route: &Route,
        keep_sent: bool,
    ) -> Result<(Vec<Response>, Option<Vec<u8>>)> {
        self.exchange(reqs, route, keep_sent, false).await.0
    }

    /// Sends requests as one compound and waits for their responses, handing the
    /// requests back as they were before they were framed (to be sent again, with the
    /// replay flag, on another channel or session) whatever the outcome: no copy is
    /// made before sending (a lone request framed in place is copied once into a
    /// pooled buffer for the wire). `None` when the send failed before the requests
    /// were recorded.
    pub(crate) async fn send_retained(
        &self,
        reqs: Vec<Request>,
        route: &Route,
    ) -> (Result<Vec<Response>>, Option<Vec<Request>>) {
        let (res, kept) = self.exchange(reqs, route, false, true).await;
        (res.map(|(v, _)| v), kept)
    }

    async fn exchange(
        &self,
        reqs: Vec<Request>,
        route: &Route,
        keep_sent: bool,
        retain: bool,
    ) -> (
        Result<(Vec<Response>, Option<Vec<u8>>)>,
        Option<Vec<Request>>,
    ) {
        if reqs.is_empty() {
            return (Ok((Vec::new(), None)), None);
        }
        let sh = &*self.shared;
        let seal_with = if route.encrypt {
            match route.security.as_ref().filter(|s| s.keys.can_seal()) {
                Some(s) => Some(s),
                None => return (Err(ProtocolError::CannotSeal.into()), Some(reqs)),
            }
        } else {
            None
        };
        let signer = match (&route.security, route.encrypt) {
            (Some(s), false) if s.sign || route.force_sign => s.keys.signer(),
            _ => None,
        };
        let n = reqs.len();
        let sent = Sent {
            session_id: route.session_id,
            tree_id: reqs[0].tree_id,
        };
        let timeout = self.timeout;
        let mut rxs = Members::with_capacity(n);

        // Spend the credits (waiting our turn if the window is short), then take the
        // MessageIds and record the requests before the bytes can reach the server.
        let charges: Members<u16>;
        let begun = {
            let mut core = sh.core();
            charges = reqs.iter().map(|r| core.charge_of(r)).collect();
            let total: u32 = charges.iter().map(|&c| c as u32).sum();
            match core.acquire(total) {
                Acquire::Charged => {
                    let b = begin(&mut core, &charges, sent, timeout, &mut rxs);
                    sh.hint_in_flight(&core);
                    Ok(b)
                }
                Acquire::Wait => {
                    let (tx, rx) = oneshot::channel();
                    core.enqueue(total, tx);
                    Err(CreditWait {
                        shared: sh,
                        rx,
                        need: total,
                        done: false,
                    })
                }
                Acquire::Closed(why) => Ok(Err(why)),
            }
        };
        let begun = match begun {
            Ok(b) => b,
            Err(mut w) => {
                let woken = (&mut w.rx).await;
                w.done = true;
                if woken.is_err() {
                    return (Err(sh.closed_error()), Some(reqs));
                }
                let mut core = sh.core();
                let b = begin(&mut core, &charges, sent, timeout, &mut rxs);
                sh.hint_in_flight(&core);
                b
            }
        };
        let (dialect, issued) = match begun {
            Ok(b) => b,
            Err(why) => return (Err(Error::Disconnected(why)), Some(reqs)),
        };
        let headers = outbound::headers(&reqs, &charges, issued, dialect, route.session_id);
        let (mut frame, kept_unsent) = outbound::frame(
            reqs,
            &headers,
            signer,
            seal_with.is_some(),
            sh.sender.sends_file_tails(),
            retain,
            |len| sh.pool.take_spare(len),
        );
        let ids: Members<u64> = headers.iter().map(|h| h.message_id).collect();
        if let Some(k) = kept_unsent {
            // Not kept: the connection closed since the MessageIds were taken.
            // (The core's lock is released before closed_error takes it again.)
            let unkept = sh.core().retain(&ids, k);
            if let Some(k) = unkept {
                return (Err(sh.closed_error()), Some(k));
            }
        }
        let sent_bytes = keep_sent.then(|| {
            let mut v = frame.buf[frame.msg_start..].to_vec();
            v.extend_from_slice(frame.tail.as_deref().unwrap_or_default());
            v
        });
        if let Some(sec) = seal_with {
            if let Err(e) = sec
                .keys
                .seal_in_place(route.session_id, &mut frame.buf[frame.start..])
            {
                return (Err(e.into()), take_back(sh, &ids, rxs));
            }
        }
        // Queued, never awaited: no MessageId is left unsent by a cancelled caller.
        if let Err(e) = send_frame(&*sh.sender, frame) {
            let e = self.send_failed(e);
            return (Err(e), take_back(sh, &ids, rxs));
        }

        let mut out = Vec::with_capacity(n);
        let mut first_err = None;
        let mut back = Vec::with_capacity(if retain { n } else { 0 });
        for rx in rxs {
            let reply = match reply_of(self.pump.as_deref(), &self.spin, rx).await {
                Ok(r) => r,
                Err(_) => Reply {
                    res: Err(sh.closed_error()),
                    request: None,
                },
            };
            if let Some(r) = reply.request {
                back.push(r);
            }
            match reply.res {
                Ok(r) => out.push(r),
                Err(e) if retain => {
                    first_err.get_or_insert(e);
                }
                Err(e) => return (Err(e), None),
            }
        }
        let kept = (back.len() == n).then_some(back);
        match first_err {
            Some(e) => (Err(e), kept),
            None => (Ok((out, sent_bytes)), kept),
        }
    }

    /// The error of a send the link refused; a failed link closes the connection.
    fn send_failed(&self, e: LinkError) -> Error {
        match e {
            LinkError::Direct(e) => self.shared.close(DisconnectReason::DirectSend(Arc::new(e))),
            LinkError::TooLarge => {
                return WireError::Invalid("message too large for the transport").into()
            }
            LinkError::Closed | LinkError::Frame(_) => {}
        }
        self.shared.closed_error()
    }

    /// Sends one request and returns its response (error statuses included).
    pub(crate) async fn call(&self, req: Request, route: &Route) -> Result<Response> {
        let (mut v, _) = self.send(vec![req], route, false).await?;
        v.pop().ok_or_else(|| ProtocolError::NoResponse.into())
    }

    /// Fails every pending request (and any later one) with `why`, but keeps the
    /// socket open and its tasks running: a multichannel session's channel that
    /// stopped answering is given up this way, so that the server does not see
    /// the connection end (and end the session with its last channel) before a
    /// new channel is bound; dropping the `Connection` closes it.
    pub(crate) fn fail_requests(&self, why: DisconnectReason) {
        self.shared.close(why);
    }

    /// Closes the connection: pending requests fail, tasks stop.
    pub fn close(&self) {
        self.shared.close(DisconnectReason::ClosedByClient);
        for t in &self.tasks {
            t.abort();
        }
        if let Some(p) = &self.pump {
            p.stop();
        }
    }
}

/// Queues `frame` on the link without waiting; a frame with a tail (a WRITE's data
/// in the caller's buffer) goes as the message followed by its tail.
fn send_frame(
    sender: &dyn MessageSender,
    frame: outbound::Frame,
) -> std::result::Result<(), LinkError> {
    let Some(tail) = frame.tail else {
        return sender.send(frame.buf, frame.start);
    };
    let mut out = Outgoing::new(frame.buf);
    out.start = frame.start;
    out.tail = Some(Box::new(tail));
    match sender.try_send(out) {
        Ok(()) => Ok(()),
        Err(TrySendError::Failed(e)) => Err(e),
        // The client's links are built without a bound on their queue.
        Err(TrySendError::Full(_)) => Err(LinkError::Closed),
    }
}

/// Takes MessageIds for a send whose credits are spent, recording one reply channel
/// per member (their receivers go to `rxs`) and the deadline `timeout` from now.
fn begin(
    core: &mut Core,
    charges: &[u16],
    sent: Sent,
    timeout: Option<Duration>,
    rxs: &mut Members<oneshot::Receiver<Reply>>,
) -> std::result::Result<(Dialect, crate::request_core::Issued), DisconnectReason> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let issued = core.begin(charges, sent, deadline, |_| {
        let (tx, rx) = oneshot::channel();
        rxs.push(rx);
        tx
    })?;
    Ok((core.dialect(), issued))
}

/// The requests of a send that failed after [`begin`] (MessageIds `ids`, reply
/// channels `rxs`), in order, if each was retained: those still in flight are taken
/// out of the table; those a close took out first were handed to their reply
/// channel (the link refuses the frame because that close ended it).
fn take_back(
    sh: &Shared,
    ids: &[u64],
    rxs: Members<oneshot::Receiver<Reply>>,
) -> Option<Vec<Request>> {
    let mut lost = sh.core().forget(ids);
    ids.iter()
        .zip(rxs)
        .map(
            |(id, mut rx)| match lost.iter_mut().find(|f| f.message_id == *id) {
                Some(f) => f.request.take(),
                None => rx.try_recv().ok().and_then(|r| r.request),
            },
        )
        .collect()
}

/// Messages from this size up (a 256 KiB READ response) make the reader yield once
/// processed: copying the next one out of the socket takes longer than sending the
/// request the completed I/O is waiting to send. Below it, responses drained together
/// and their requests sent together cost fewer wake-ups on both ends (64 KiB reads at
/// -o8 ran ~10% slower when the reader yielded after each).
const YIELD_AFTER: usize = 256 * 1024;

/// Receives whole messages until the link fails or the server closes it: the reader
/// task's body over SMB Direct through verbs, the reader loop [`pump`] drives
/// otherwise (over soft-iWARP joined with the link's driver).
/// Generic over the receiver, so that waiting for a message is polled in place in
/// the task's own future (no boxed future per message).
async fn reader_task<R: MessageReceiver>(mut rx: R, shared: Arc<Shared>) {
    let why = loop {
        match rx.recv().await {
            Ok(Some(msg)) => {
                let large = msg.len() >= YIELD_AFTER;
                if let Err(e) = process_frame(msg, &shared) {
                    break DisconnectReason::Receive(Arc::new(e));
                }
                if large {
                    // Let the I/O this message completed run (and send its next
                    // request) before the next response is read: without this the
                    // reader drains every response already queued first, and the
                    // requests that follow them leave together once it runs dry, so
                    // the server idles between batches (a 512 KiB read at -o8 went
                    // out 8 requests at a time). See [`pump::yield_after_large`].
                    pump::yield_after_large().await;
                }
            }
            Ok(None) => break DisconnectReason::ClosedByServer,
            Err(LinkError::Direct(e)) => break DisconnectReason::from(e),
            Err(e) => {
                let e = Error::from(ProtocolError::Frame(match e {
                    LinkError::Frame(why) => why,
                    _ => "link closed",
                }));
                break DisconnectReason::Receive(Arc::new(e));
            }
        }
    };
    debug!("connection reader stops: {why}");
    shared.close(why);
    rx.close().await;
}

/// Hands the core the time, a few times per timeout, so requests past their
/// deadline fail and are cancelled.
async fn timer_task(shared: Arc<Shared>, timeout: Duration) {
    let tick = (timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        if shared.core().closed().is_some() {
            return;
        }
        shared.expire(Instant::now());
    }
}

/// Unseals a frame if needed, splits a compound, and dispatches each response. Errors
/// returned here are fatal to the connection; per-message failures go to their waiter.
fn process_frame(frame: InMessage, shared: &Shared) -> Result<()> {
    let opened = inbound::open(
        frame,
        |id| shared.session(id),
        |n| shared.pool.take_exact(n),
        |f| shared.pool.recycle(f),
    )?;
    let encrypted = opened.encrypted;
    inbound::split(opened.msg, |h, msg| dispatch(h, msg, encrypted, shared))
}

fn dispatch(h: smbx_wire::Header, mut msg: InMessage, encrypted: bool, shared: &Shared) {
    // Verify before believing anything else the message says.
    let verdict = if h.session_id != 0 {
        let sec = shared.session(h.session_id);
        inbound::verify(&h, &mut msg, encrypted, sec.as_deref())
    } else {
        Ok(())
    };
    let matched = shared.core().on_response(&h, verdict.is_ok(), wake);
    match matched {
        Matched::Done { token, request } => {
            let _ = token.send(Reply {
                res: verdict.map(|_| Response { header: h, msg }),
                request,
            });
        }
        Matched::Interim => trace!("message {} went async ({:#x})", h.message_id, h.async_id),
        Matched::Unsolicited => {
            if shared.events.try_send(Event::from_message(h, msg)).is_err() {
                warn!("dropping an unsolicited message: nobody reads events");
            }
        }
        Matched::Unknown => debug!("response to unknown message id {}", h.message_id),
        Matched::NotAResponse => {
            warn!("ignoring a request from the server (command {})", h.command)
        }
    }
}

#[cfg(test)]
mod tests {
    //! The connection against a scripted peer on loopback: interim responses, compound
    //! splitting, credit accounting, unsolicited messages, signature checks, disconnects.

    use super::*;
    use crate::error::SecurityError;
    use crate::request_core::UNSOLICITED_ID;
    use smbx_security::protection::Protection;
    use smbx_security::signing::{Signer, SigningAlgorithm};
    use smbx_wire::header::{FLAGS_ASYNC_COMMAND, FLAGS_SERVER_TO_REDIR};
    use smbx_wire::simple::encode_simple;
    use smbx_wire::{Command, Header, NtStatus, Writer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// An ECHO request.
    fn echo() -> Request {
        Request::new(Command::Echo, encode_simple(), 0)
    }

    /// A waker that counts its wake-ups (the pump's tests use it too).
    #[derive(Default)]
    pub(super) struct Count(pub(super) std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The spin time of the tests' connections: the client's default.
    const SPIN: Duration = crate::DEFAULT_SPIN_WAIT;

    async fn pair() -> (Connection, TcpStream) {
        pair_spinning(SPIN).await
    }

    /// A connection whose lone requests spin for up to `spin`, and its peer.
    async fn pair_spinning(spin: Duration) -> (Connection, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        (
            Connection::start(c.unwrap(), 64, Some(Duration::from_secs(20)), spin),
            s.unwrap().0,
        )
    }

    async fn read_frame(s: &mut TcpStream) -> Vec<u8> {
        let mut h = [0u8; 4];
        s.read_exact(&mut h).await.unwrap();
        let mut b = vec![0u8; u32::from_be_bytes(h) as usize];
        s.read_exact(&mut b).await.unwrap();
        b
    }

    async fn write_frame(s: &mut TcpStream, msg: &[u8]) {
        s.write_all(&(msg.len() as u32).to_be_bytes())
            .await
            .unwrap();
        s.write_all(msg).await.unwrap();
    }

    /// Reads the next request on `s` and, `after` later, answers it with a successful
    /// ECHO response.
    async fn answer_echo(s: &mut TcpStream, after: Duration) {
        let f = read_frame(s).await;
        if !after.is_zero() {
            tokio::time::sleep(after).await;
        }
        let h = Header::decode(&f).unwrap();
        write_frame(s, &response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple())).await;
    }

    /// Polls `call` once (it must be pending) with a waker that counts its wake-ups;
    /// the counter, and the waker for later polls.
    fn first_poll<F: Future + ?Sized>(call: Pin<&mut F>) -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        assert!(call.poll(&mut Context::from_waker(&waker)).is_pending());
        (count, waker)
    }

    fn response(req: &Header, status: NtStatus, credits: u16, flags: u32, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            status,
            command: req.command,
            credits,
            flags: FLAGS_SERVER_TO_REDIR | flags,
            message_id: req.message_id,
            async_id: if flags & FLAGS_ASYNC_COMMAND != 0 {
                77
            } else {
                0
            },
            tree_id: req.tree_id,
            session_id: req.session_id,
            ..Default::default()
        }
        .encode(&mut w);
        w.bytes(body);
        w.into_vec()
    }

    /// A link that is lost just as a request reaches it: the loss closes the
    /// connection (its requests handed to their reply channels), then the link
    /// refuses the frame.
    struct LostOnSend(Arc<std::sync::OnceLock<std::sync::Weak<Shared>>>);

    impl MessageSender for LostOnSend {
        fn send(&self, _: Vec<u8>, _: usize) -> std::result::Result<(), LinkError> {
            if let Some(sh) = self.0.get().and_then(std::sync::Weak::upgrade) {
                sh.close(DisconnectReason::Unknown);
            }
            Err(LinkError::Closed)
        }
        fn try_send(&self, out: Outgoing) -> std::result::Result<(), TrySendError> {
            self.send(out.buf, out.start).map_err(TrySendError::Failed)
        }
        fn send_waiting(
            &self,
            out: Outgoing,
        ) -> futures_util::future::BoxFuture<'_, std::result::Result<(), LinkError>> {
            let r = self.send(out.buf, out.start);
            Box::pin(async move { r })
        }
        fn transport(&self) -> smbx_transport::link::Transport {
            smbx_transport::link::Transport::Tcp
        }
        fn peer_addr(&self) -> std::net::SocketAddr {
            ([127, 0, 0, 1], 445).into()
        }
        fn local_addr(&self) -> std::net::SocketAddr {
            ([127, 0, 0, 1], 0).into()
        }
    }

    #[tokio::test]
    async fn a_retained_request_comes_back_when_its_link_is_lost_while_sending() {
        let peer = Arc::new(std::sync::OnceLock::new());
        let pool = Arc::new(smbx_transport::BufPool::new(8));
        let (shared, events) = Connection::shared(Box::new(LostOnSend(peer.clone())), 64, pool);
        peer.set(Arc::downgrade(&shared)).ok().unwrap();
        let conn = Connection::finish(shared, events, None, Vec::new(), None, SPIN);
        let mut e = echo();
        e.body = vec![7; 4];
        let (res, kept) = conn.send_retained(vec![e], &Route::default()).await;
        assert!(matches!(res, Err(Error::Disconnected(_))), "{res:?}");
        let kept = kept.expect("the request is handed back for a replay");
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].body, vec![7; 4], "handed back as it was sent");
        assert!(conn.is_closed());
    }

    #[tokio::test]
    async fn interim_pending_then_final() {
        let (conn, mut srv) = pair().await;
        let server = tokio::spawn(async move {
            let f = read_frame(&mut srv).await;
            let h = Header::decode(&f).unwrap();
            write_frame(
                &mut srv,
                &response(
                    &h,
                    NtStatus::PENDING,
                    3,
                    FLAGS_ASYNC_COMMAND,
                    &[9, 0, 0, 0, 0, 0, 0, 0, 0],
                ),
            )
            .await;
            write_frame(
                &mut srv,
                &response(
                    &h,
                    NtStatus::SUCCESS,
                    0,
                    FLAGS_ASYNC_COMMAND,
                    &encode_simple(),
                ),
            )
            .await;
            srv
        });
        let r = conn.call(echo(), &Route::default()).await.unwrap();
        assert_eq!(r.status(), NtStatus::SUCCESS);
        assert_eq!(r.header.async_id, 77);
        // The interim response's credits count; the request's own credit was spent.
        assert_eq!(conn.credits_available(), 3);
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn compound_split_and_credit_charges() {
        let (conn, mut srv) = pair().await;
        conn.set_negotiated(Dialect::SMB3_1_1, true);
        let server = tokio::spawn(async move {
            // 1: one echo, granted 10 credits.
            let f = read_frame(&mut srv).await;
            let h = Header::decode(&f).unwrap();
            assert_eq!(h.message_id, 0);
            write_frame(
                &mut srv,
                &response(&h, NtStatus::SUCCESS, 10, 0, &encode_simple()),
            )
            .await;
            // 2: a compound of a 4-credit and a 1-credit request, answered as one chain.
            let f = read_frame(&mut srv).await;
            let a = Header::decode(&f).unwrap();
            assert_eq!((a.message_id, a.credit_charge), (1, 4));
            // 64-byte header + 10-byte body, padded to 8 (headroom is not sent).
            assert_eq!(a.next_command, 80);
            let b = Header::decode(&f[a.next_command as usize..]).unwrap();
            assert_eq!((b.message_id, b.credit_charge), (5, 1));
            assert!(b.is_related());
            let mut chain = response(&a, NtStatus::SUCCESS, 4, 0, &encode_simple());
            chain.resize(chain.len().next_multiple_of(8), 0);
            let next = chain.len() as u32;
            chain[20..24].copy_from_slice(&next.to_le_bytes());
            chain.extend_from_slice(&response(
                &b,
                NtStatus::OBJECT_NAME_NOT_FOUND,
                1,
                0,
                &[9, 0, 0, 0, 0, 0, 0, 0, 0],
            ));
            write_frame(&mut srv, &chain).await;
            srv
        });
        conn.call(echo(), &Route::default()).await.unwrap();
        assert_eq!(conn.credits_available(), 10);
        let mut body = body_writer(&smbx_transport::BufPool::new(1), 10);
        body.zeros(10);
        let mut big = Request::with_headroom(Command::Read, body, 1);
        big.charge = 4;
        let mut second = Request::new(Command::Close, vec![0; 10], 1);
        second.related = true;
        let (v, _) = conn
            .send(vec![big, second], &Route::default(), false)
            .await
            .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].status(), NtStatus::SUCCESS);
        assert_eq!(v[1].status(), NtStatus::OBJECT_NAME_NOT_FOUND);
        assert_eq!(
            v[1].clone().ok().unwrap_err().to_string(),
            "STATUS_OBJECT_NAME_NOT_FOUND"
        );
        // 10 granted - 5 spent + 5 granted back.
        assert_eq!(conn.credits_available(), 10);
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn never_exceeds_the_granted_window() {
        let (conn, mut srv) = pair().await;
        let conn = Arc::new(conn);
        // Only one credit: two concurrent requests must go one after the other.
        let c2 = conn.clone();
        let both = tokio::spawn(async move {
            let route = Route::default();
            let a = c2.call(echo(), &route);
            let b = c2.call(echo(), &route);
            let (a, b) = tokio::join!(a, b);
            (a.unwrap().header.message_id, b.unwrap().header.message_id)
        });
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        assert_eq!(h.message_id, 0);
        // The second request cannot have been sent: no credit is left.
        assert_eq!(conn.credits_available(), 0);
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple()),
        )
        .await;
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        assert_eq!(h.message_id, 1);
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple()),
        )
        .await;
        let (a, b) = both.await.unwrap();
        let mut ids = [a, b];
        ids.sort();
        assert_eq!(ids, [0, 1]);
    }

    #[tokio::test]
    async fn oplock_break_goes_to_events() {
        let (conn, mut srv) = pair().await;
        let mut events = conn.take_events().unwrap();
        assert!(conn.take_events().is_none());
        let mut body = Writer::new();
        body.u16(24).u8(1).u8(0).u32(0).u64(5).u64(6);
        let h = Header {
            command: Command::OplockBreak as u16,
            message_id: UNSOLICITED_ID,
            ..Default::default()
        };
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 0, 0, body.as_slice()),
        )
        .await;
        match events.recv().await.unwrap() {
            Event::OplockBreak(b) => {
                assert_eq!(b.oplock_level, smbx_wire::oplock::OplockLevel::II);
                assert_eq!(b.file_id.volatile, 6);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// An oplock break from the server, as a frame.
    fn oplock_break() -> Vec<u8> {
        let mut body = Writer::new();
        body.u16(24).u8(1).u8(0).u32(0).u64(5).u64(6);
        let h = Header {
            command: Command::OplockBreak as u16,
            message_id: UNSOLICITED_ID,
            ..Default::default()
        };
        response(&h, NtStatus::SUCCESS, 0, 0, body.as_slice())
    }

    /// The next event is an oplock break (bounded, as [`next_event`]).
    async fn expect_break(events: &mut mpsc::Receiver<Event>) {
        assert!(matches!(next_event(events).await, Event::OplockBreak(_)));
    }

    /// The next event, bounded (a reader that never reads fails the test).
    async fn next_event(events: &mut mpsc::Receiver<Event>) -> Event {
        tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .expect("the break was never read")
            .expect("events closed")
    }

    /// A request reads its own response from the socket; what comes after it (a break
    /// nobody waits for) is still read, by the reader task.
    #[tokio::test]
    async fn a_break_after_a_request_read_its_response_is_read() {
        let (conn, mut srv) = pair().await;
        let mut events = conn.take_events().unwrap();
        let server = tokio::spawn(async move {
            for _ in 0..2 {
                answer_echo(&mut srv, Duration::ZERO).await;
            }
            write_frame(&mut srv, &oplock_break()).await;
            srv
        });
        for _ in 0..2 {
            let r = conn.call(echo(), &Route::default()).await.unwrap();
            assert_eq!(r.status(), NtStatus::SUCCESS);
        }
        expect_break(&mut events).await;
        drop(server.await.unwrap());
    }

    /// A request that has its response is not woken again by what the socket brings
    /// later (its waker may be one the executor handed to the next future by then).
    #[tokio::test]
    async fn a_finished_request_is_not_woken_by_later_messages() {
        let (conn, mut srv) = pair().await;
        let mut events = conn.take_events().unwrap();
        let route = Route::default();
        let mut call = Box::pin(conn.call(echo(), &route));
        let (count, waker) = first_poll(call.as_mut());
        answer_echo(&mut srv, Duration::ZERO).await;
        let done = async {
            loop {
                if let Poll::Ready(r) = call.as_mut().poll(&mut Context::from_waker(&waker)) {
                    return r;
                }
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), done)
            .await
            .expect("no response")
            .unwrap();
        drop(call);
        let woken = count.0.load(Ordering::SeqCst);
        write_frame(&mut srv, &oplock_break()).await;
        expect_break(&mut events).await;
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            woken,
            "woken after it finished"
        );
    }

    /// Large responses (read by the frame reader's after-a-large-frame path, which
    /// waits for the socket's readiness) then small ones, each answered only once its
    /// request waits: every request gets its response (what the reader loop waits on
    /// stays registered between the requests that drive it).
    #[tokio::test]
    async fn large_then_small_responses_each_reach_their_request() {
        let (conn, mut srv) = pair().await;
        let server = tokio::spawn(async move {
            for i in 0..6 {
                let f = read_frame(&mut srv).await;
                let h = Header::decode(&f).unwrap();
                let body = if i % 2 == 0 {
                    vec![i as u8; 300 * 1024]
                } else {
                    encode_simple()
                };
                write_frame(&mut srv, &response(&h, NtStatus::SUCCESS, 1, 0, &body)).await;
            }
            srv
        });
        for i in 0..6 {
            let r = conn.call(echo(), &Route::default()).await.unwrap();
            let want = if i % 2 == 0 { 300 * 1024 } else { 4 };
            assert_eq!(r.msg.len(), 64 + want, "response {i}");
        }
        drop(server.await.unwrap());
    }

    /// A request that waits on the socket but is not polled again (its owner is busy)
    /// does not stop the reading: a break and its own response are read meanwhile, and
    /// the response is there when it is polled. A request dropped while it waits on
    /// the socket does not either.
    #[tokio::test]
    async fn a_waiting_request_left_unpolled_or_dropped_stops_no_reading() {
        let (conn, mut srv) = pair().await;
        let mut events = conn.take_events().unwrap();
        let route = Route::default();
        let mut call = Box::pin(conn.call(echo(), &route));
        // Sent, and now waiting on the socket.
        std::future::poll_fn(|cx| {
            assert!(call.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 2, 0, &encode_simple()),
        )
        .await;
        write_frame(&mut srv, &oplock_break()).await;
        expect_break(&mut events).await;
        let r = call.await.unwrap();
        assert_eq!(r.header.message_id, h.message_id);

        // Dropped while it waits on the socket: what comes later is still read.
        let mut call = Box::pin(conn.call(echo(), &route));
        std::future::poll_fn(|cx| {
            assert!(call.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        drop(call);
        read_frame(&mut srv).await;
        write_frame(&mut srv, &oplock_break()).await;
        expect_break(&mut events).await;
    }

    /// Many requests from tasks on several threads, each reading the socket while it
    /// waits, answered in batches (whatever has arrived) last first: every one gets its own response (by
    /// MessageId), whoever read it, and a break at the end is read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_on_threads_each_get_their_response() {
        const TASKS: usize = 6;
        const EACH: usize = 60;
        let (conn, mut srv) = pair().await;
        let mut events = conn.take_events().unwrap();
        let conn = Arc::new(conn);
        let server = tokio::spawn(async move {
            let (mut buf, mut answered, mut granted) = (Vec::new(), 0, false);
            while answered < TASKS * EACH {
                // Whatever has arrived, answered last first in one write; the first
                // answer grants the window the tasks share.
                let mut chunk = [0u8; 4096];
                let n = srv.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the client went away");
                buf.extend_from_slice(&chunk[..n]);
                let mut got = Vec::new();
                while buf.len() >= 4 {
                    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                    if buf.len() < 4 + len {
                        break;
                    }
                    got.push(Header::decode(&buf[4..4 + len]).unwrap());
                    buf.drain(..4 + len);
                }
                let mut out = Vec::new();
                for h in got.iter().rev() {
                    let credits = if granted { 1 } else { TASKS as u16 };
                    granted = true;
                    let msg = response(h, NtStatus::SUCCESS, credits, 0, &encode_simple());
                    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                    out.extend_from_slice(&msg);
                }
                srv.write_all(&out).await.unwrap();
                answered += got.len();
            }
            write_frame(&mut srv, &oplock_break()).await;
            srv
        });
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let c = conn.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..EACH {
                    let req = echo();
                    let r = c.call(req, &Route::default()).await.unwrap();
                    assert_eq!(r.status(), NtStatus::SUCCESS);
                }
            }));
        }
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("a request never got its response")
                .unwrap();
        }
        expect_break(&mut events).await;
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn signatures_are_checked() {
        let (conn, mut srv) = pair().await;
        let key = [0x42u8; 16];
        let sec = SessionSecurity {
            keys: Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &key)),
            sign: true,
            ..SessionSecurity::default()
        };
        let sec = Arc::new(sec);
        conn.add_session(9, sec.clone());
        let route = Route {
            session_id: 9,
            security: Some(sec),
            ..Default::default()
        };
        let server = tokio::spawn(async move {
            let signer = Signer::new(SigningAlgorithm::AesCmac, &key);
            for case in 0..3 {
                let f = read_frame(&mut srv).await;
                assert!(signer.verify(&f), "request {case} not signed");
                let h = Header::decode(&f).unwrap();
                let mut r = response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple());
                match case {
                    0 => signer.sign(&mut r),
                    1 => {
                        signer.sign(&mut r);
                        r[66] ^= 1; // tamper with the body after signing
                    }
                    _ => {} // unsigned
                }
                write_frame(&mut srv, &r).await;
            }
            srv
        });
        conn.call(echo(), &route).await.unwrap();
        assert!(matches!(
            conn.call(echo(), &route).await,
            Err(Error::Crypto(SecurityError::BadSignature { .. }))
        ));
        assert!(matches!(
            conn.call(echo(), &route).await,
            Err(Error::Crypto(SecurityError::Unsigned { .. }))
        ));
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn timeout_forgets_the_request() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let conn = Connection::start(c.unwrap(), 64, Some(Duration::from_millis(200)), SPIN);
        let mut srv = s.unwrap().0;
        let e = conn.call(echo(), &Route::default()).await.unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e}");
        assert_eq!(conn.shared.core().pending(), 0);
        assert_eq!(conn.shared.core().in_flight(), 0);
        // A late answer is dropped quietly, and its credits still count.
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 2, 0, &encode_simple()),
        )
        .await;
        let granted = async {
            while conn.credits_available() < 2 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), granted)
            .await
            .expect("the late response's credits were never added");
        assert!(!conn.is_closed());
    }

    #[tokio::test]
    async fn hostile_frames_never_panic() {
        let (conn, _srv) = pair().await;
        let sec = SessionSecurity {
            keys: Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &[1; 16])),
            sign: true,
            ..SessionSecurity::default()
        };
        conn.add_session(5, Arc::new(sec));
        let base = response(
            &Header {
                session_id: 5,
                ..Default::default()
            },
            NtStatus::SUCCESS,
            1,
            0,
            &encode_simple(),
        );
        for f in crate::request_core::tests::hostile_variants(&base, 20_000) {
            let _ = process_frame(f.into(), &conn.shared);
        }
    }

    #[tokio::test]
    async fn timed_out_async_request_is_cancelled() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let conn = Connection::start(c.unwrap(), 64, Some(Duration::from_millis(300)), SPIN);
        let mut srv = s.unwrap().0;
        let server = tokio::spawn(async move {
            let f = read_frame(&mut srv).await;
            let h = Header::decode(&f).unwrap();
            let interim = response(
                &h,
                NtStatus::PENDING,
                1,
                FLAGS_ASYNC_COMMAND,
                &[9, 0, 0, 0, 0, 0, 0, 0, 0],
            );
            write_frame(&mut srv, &interim).await;
            // Never answer; expect a CANCEL naming the AsyncId.
            let f = read_frame(&mut srv).await;
            (h, Header::decode(&f).unwrap())
        });
        let mut req = Request::new(Command::ChangeNotify, vec![0; 32], 3);
        req.charge = 1;
        let e = conn.call(req, &Route::default()).await.unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e}");
        let (orig, cancel) = server.await.unwrap();
        assert_eq!(cancel.command, Command::Cancel as u16);
        assert!(cancel.is_async());
        assert_eq!(cancel.async_id, 77);
        assert_eq!(cancel.message_id, orig.message_id);
        assert_eq!(cancel.credit_charge, 0);
    }

    #[tokio::test]
    async fn disconnect_fails_pending_requests() {
        let (conn, mut srv) = pair().await;
        let server = tokio::spawn(async move {
            read_frame(&mut srv).await;
            drop(srv);
        });
        let e = conn.call(echo(), &Route::default()).await.unwrap_err();
        assert!(matches!(e, Error::Disconnected(_)), "{e}");
        assert!(conn.is_closed());
        server.await.unwrap();
        let e = conn.call(echo(), &Route::default()).await.unwrap_err();
        assert!(matches!(e, Error::Disconnected(_)), "{e}");
    }

    /// A current-thread runtime, as `smbx bench` drives each OS thread's connections.
    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A peer on a thread of its own (a blocking socket: it answers whether or not the
    /// client's runtime runs): each request gets a response with `body` bytes of body
    /// and one credit, then, once told to (when no request waits), an oplock break;
    /// until the client goes away. Returns how many requests it answered.
    fn threaded_peer(
        body: usize,
    ) -> (
        std::net::SocketAddr,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<usize>,
    ) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tell, told) = std::sync::mpsc::channel();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let send = |s: &mut std::net::TcpStream, msg: &[u8]| {
                s.write_all(&(msg.len() as u32).to_be_bytes())?;
                s.write_all(msg)
            };
            let mut answered = 0;
            loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).is_err() {
                    return answered;
                }
                let mut f = vec![0u8; u32::from_be_bytes(len) as usize];
                s.read_exact(&mut f).unwrap();
                let h = Header::decode(&f).unwrap();
                send(
                    &mut s,
                    &response(&h, NtStatus::SUCCESS, 1, 0, &vec![7; body]),
                )
                .unwrap();
                answered += 1;
                if told.recv().is_err() || send(&mut s, &oplock_break()).is_err() {
                    return answered;
                }
            }
        });
        (addr, tell, peer)
    }

    /// Runs `f` in a `block_on` of its own on `rt` (as the bench reaps its I/Os);
    /// `None` when it is not done within 10 s.
    fn block_on_within<F: Future>(rt: &tokio::runtime::Runtime, f: F) -> Option<F::Output> {
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), f).await })
            .ok()
    }

    /// Each request in a `block_on` of its own on a current-thread runtime, as the
    /// bench reaps its I/Os, with responses large enough that the reader loop yields
    /// after each (YIELD_AFTER): every request gets its response, and a break sent
    /// after it (while no request waits) is read. tokio's `yield_now` defers its
    /// waker to the runtime's next park, and a `block_on` whose future finishes in
    /// that poll returns without waking it: the loop's wake-up was lost, and the pump
    /// left the reading to it for ever (the next request waited for ever: 73235da).
    /// Fails on 9935ca0's pump with `yield_now` in the loop.
    #[test]
    fn a_request_per_block_on_after_a_large_response_stops_no_reading() {
        let rt = current_thread();
        let (addr, tell, peer) = threaded_peer(YIELD_AFTER);
        let conn = rt.block_on(async {
            Connection::start(TcpStream::connect(addr).await.unwrap(), 64, None, SPIN)
        });
        let mut events = conn.take_events().unwrap();
        for i in 0..3 {
            let r = block_on_within(&rt, conn.call(echo(), &Route::default()))
                .unwrap_or_else(|| panic!("request {i}: no response"))
                .unwrap();
            assert_eq!(r.msg.len(), 64 + YIELD_AFTER);
            tell.send(()).unwrap();
            block_on_within(&rt, expect_break(&mut events))
                .unwrap_or_else(|| panic!("request {i}: the break after it was not read"));
        }
        drop(conn);
        drop(rt);
        assert_eq!(peer.join().unwrap(), 3);
    }

    /// A request waiting alone on a current-thread runtime wakes itself while its
    /// response has not come (the runtime checks the socket rather than sleep), when the
    /// last response came quickly; after a response that took longer than SPIN the next
    /// request sleeps until its response wakes it.
    #[tokio::test]
    async fn a_request_alone_spins_only_while_responses_come_quickly() {
        let (conn, mut srv) = pair().await;
        let route = Route::default();
        for spins in [true, false] {
            let mut call = Box::pin(conn.call(echo(), &route));
            let (count, _waker) = first_poll(call.as_mut());
            let woken = count.0.load(Ordering::SeqCst);
            assert_eq!(woken > 0, spins, "woke itself {woken} times");
            // Answered well after SPIN: the next request does not spin.
            answer_echo(&mut srv, SPIN * 3).await;
            assert_eq!(call.await.unwrap().status(), NtStatus::SUCCESS);
        }
    }

    /// With the spin time set to zero ([`crate::ClientOptions::spin_wait`]), a request
    /// waiting alone on a current-thread runtime never wakes itself: it sleeps until
    /// its response wakes it, even right after quick responses.
    #[tokio::test]
    async fn a_request_alone_does_not_spin_when_the_spin_time_is_zero() {
        let (conn, mut srv) = pair_spinning(Duration::ZERO).await;
        let route = Route::default();
        for i in 0..3 {
            let mut call = Box::pin(conn.call(echo(), &route));
            let (count, _waker) = first_poll(call.as_mut());
            let woken = count.0.load(Ordering::SeqCst);
            assert_eq!(woken, 0, "request {i} woke itself {woken} times");
            // Answered at once: a spinning connection would spin on the next one.
            answer_echo(&mut srv, Duration::ZERO).await;
            assert_eq!(call.await.unwrap().status(), NtStatus::SUCCESS);
        }
    }
}
