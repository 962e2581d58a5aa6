//! Who drives a connection's reading (Direct TCP, or SMB Direct over soft-iWARP, whose
//! reader loop is joined with the link's driver: its socket I/O): the request waiting
//! for its response, or the connection's reader task.
//!
//! The reading is one long-lived future (the reader loop, [`super::reader_task`]),
//! kept here rather than spawned. A request that waits for its response polls it
//! ([`SocketPump::for_request`]), so the response that completes it is read in the
//! future being awaited: the task awaiting it is not woken by another task (on a
//! current-thread runtime that hop cost a poll of the driver, an `epoll_wait` with no
//! timeout, per round trip). Every frame it reads is dispatched as before (other
//! requests' responses, breaks, credits).
//!
//! The reader task ([`pump_task`]) polls the same future whenever no request is set to
//! be woken by the socket, so unsolicited messages (oplock and lease breaks) and
//! responses nobody waits for any more are read at once. A request polls the loop with
//! one shared waker ([`ReadWake`]) that wakes the request last seen waiting and the
//! reader task: a request that is not polled again (dropped, or its owner busy) never
//! leaves what arrives unread. The future is never dropped between polls, so what it
//! registered with the socket stays registered.

use super::*;
use std::sync::atomic::{AtomicU64, AtomicUsize};

thread_local! {
    /// The reader task polls the reader loop on this thread now (not a request).
    static POLLED_BY_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While held, the reader loop is polled by the reader task ([`yield_after_large`]);
/// cleared when dropped, a panicking poll included.
struct ByTask;

impl ByTask {
    fn enter() -> ByTask {
        POLLED_BY_TASK.with(|t| t.set(true));
        ByTask
    }
}

impl Drop for ByTask {
    fn drop(&mut self) {
        POLLED_BY_TASK.with(|t| t.set(false));
    }
}

/// The reader loop, as the requests and the reader task poll it.
type ReadLoop = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The waker requests poll the reader loop with: it wakes the request last seen waiting
/// and the reader task.
#[derive(Default)]
struct ReadWake {
    /// The request last seen waiting.
    request: Mutex<Option<Waker>>,
    /// The reader task.
    task: Mutex<Option<Waker>>,
    /// The reader loop was last polled with this waker and it has not fired since: a
    /// request reads what arrives, and the reader task leaves the loop to it.
    armed: AtomicBool,
}

impl ReadWake {
    fn lock(w: &Mutex<Option<Waker>>) -> std::sync::MutexGuard<'_, Option<Waker>> {
        w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `w` to be woken (cloned only when it is another task's).
    fn set(slot: &Mutex<Option<Waker>>, w: &Waker) {
        let mut s = Self::lock(slot);
        if !s.as_ref().is_some_and(|old| old.will_wake(w)) {
            *s = Some(w.clone());
        }
    }

    /// The reader loop waits for this waker to fire: it was polled with it, the
    /// wake-up has not come, and it still can (a clone of the waker is held). A
    /// wake-up dropped without firing leaves none held (tokio drops the wake-ups it
    /// deferred, `yield_now`'s and the coop budget's, when a current-thread
    /// `block_on` returns in the poll that deferred them): then nothing would wake a
    /// reader, and the loop is polled again rather than left waiting for ever.
    fn waited_on(self: &Arc<Self>) -> bool {
        self.armed.load(Ordering::SeqCst) && Arc::strong_count(self) > 1
    }

    /// Wakes the reader task.
    fn wake_task(&self) {
        if let Some(w) = Self::lock(&self.task).as_ref() {
            w.wake_by_ref();
        }
    }
}

impl Wake for ReadWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.armed.store(false, Ordering::SeqCst);
        let request = Self::lock(&self.request).take();
        if let Some(w) = request {
            w.wake();
        }
        self.wake_task();
    }
}

/// The reader loop of a connection (Direct TCP, or SMB Direct over soft-iWARP with the
/// link's driver), driven by its requests and its reader task.
pub(super) struct SocketPump {
    /// `None` once the loop ended (the link failed or was closed, or the connection
    /// was closed).
    read: Mutex<Option<ReadLoop>>,
    wake: Arc<ReadWake>,
    /// Most requests waiting at once for which a request still drives the loop; more
    /// leave it to the reader task (`usize::MAX`: no bound).
    drive_limit: usize,
}

/// How a connection's requests wait for their responses on a current-thread runtime,
/// over either transport: while no other connection's request waits on the thread,
/// one of them wakes itself at once for a while rather than let the thread sleep
/// ([`crate::ClientOptions::spin_wait`]).
pub(super) struct SpinWait {
    /// How long a request may spin for its response: zero unless started on a
    /// current-thread runtime, one that polls the socket before it polls a future
    /// that woke itself again (a multi-threaded one polls it only every so many
    /// tasks).
    spin: Duration,
    /// Requests waiting for their responses.
    waiting: AtomicUsize,
    /// How long the last request that waited with the thread to its connection
    /// waited, in nanoseconds.
    last_wait: AtomicU64,
    /// A request spins now: one at a time (a second would only take turns with it
    /// at polling the same socket).
    spinner: AtomicBool,
}

impl SpinWait {
    /// Requests spin for up to `spin` on a current-thread runtime ([`Waiting::spin`]).
    pub(super) fn new(spin: Duration) -> Self {
        let current_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        SpinWait {
            spin: if current_thread { spin } else { Duration::ZERO },
            waiting: AtomicUsize::new(0),
            last_wait: AtomicU64::new(0),
            spinner: AtomicBool::new(false),
        }
    }
}

impl SocketPump {
    /// Drives `reader` (the reader loop over the connection's receiver).
    pub(super) fn new(reader: impl Future<Output = ()> + Send + 'static) -> Self {
        SocketPump {
            read: Mutex::new(Some(Box::pin(reader))),
            wake: Arc::default(),
            drive_limit: usize::MAX,
        }
    }

    /// Like [`SocketPump::new`], requests driving the loop only while at most `limit`
    /// wait at once.
    pub(super) fn with_drive_limit(
        reader: impl Future<Output = ()> + Send + 'static,
        limit: usize,
    ) -> Self {
        SocketPump {
            drive_limit: limit,
            ..Self::new(reader)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<ReadLoop>> {
        // A panic while it was held leaves at worst a loop that is polled again.
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Polls the reader loop for a request waiting on `cx` (reads and dispatches what
    /// has arrived; the socket then wakes this request and the reader task). Does not
    /// when the loop is already set to wake a request (this one is now the request
    /// woken) or someone else polls it now (they hand this request its response, and
    /// leave the loop set to wake a reader).
    pub(super) fn for_request(&self, cx: &Context<'_>) {
        ReadWake::set(&self.wake.request, cx.waker());
        if self.wake.waited_on() {
            return;
        }
        let Ok(mut read) = self.read.try_lock() else {
            return;
        };
        let Some(fut) = read.as_mut() else {
            return;
        };
        // Before the poll: a wake-up registered by it clears it.
        self.wake.armed.store(true, Ordering::SeqCst);
        let waker = Waker::from(self.wake.clone());
        if fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            *read = None;
            self.wake.armed.store(false, Ordering::SeqCst);
            drop(read);
            // The reader task finishes.
            self.wake.wake_task();
        }
    }

    /// Polls the reader loop for the reader task unless a request is set to be woken
    /// by it; `Ready` once the loop has ended.
    fn for_task(&self, cx: &mut Context<'_>) -> Poll<()> {
        ReadWake::set(&self.wake.task, cx.waker());
        let mut read = self.lock();
        let Some(fut) = read.as_mut() else {
            return Poll::Ready(());
        };
        if self.wake.waited_on() {
            // A request reads when something comes; this task is woken with it.
            return Poll::Pending;
        }
        let r = {
            let _by_task = ByTask::enter();
            fut.as_mut().poll(cx)
        };
        if r.is_ready() {
            *read = None;
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Ends the reading (the connection is closed): the receiver is dropped.
    pub(super) fn stop(&self) {
        let fut = self.lock().take();
        drop(fut);
        self.wake.wake_task();
    }
}

/// The reader task of a connection with a [`SocketPump`]: drives the reader loop while
/// no request does, until the loop ends.
pub(super) async fn pump_task(pump: Arc<SocketPump>) {
    std::future::poll_fn(|cx| pump.for_task(cx)).await
}

/// Lets what a large message completed run before the reader loop reads the next one:
/// the loop returns `Pending` once, then goes on.
///
/// Polled by a request ([`SocketPump::for_request`]), its waker ([`ReadWake`]) is woken
/// at once: it wakes the request last seen waiting and the reader task, whichever runs
/// first reads on. (Deferred, as `tokio::task::yield_now` defers, a current-thread
/// `block_on` that returned in that poll dropped the wake-up, and the next request, -o1
/// or -o2 at 256 KiB and more, waited for ever.)
///
/// Polled by the reader task, the wake-up is deferred until the runtime has run its
/// other work and polled its driver: the futures the message completed run first (on a
/// current-thread runtime, the `block_on` future that awaits them), and send their next
/// requests. Woken at once, the task ran again ahead of them, up to the runtime's
/// `event_interval` (61) times in a row, reading every response already queued into
/// buffers beyond the pool's (fresh memory: page faults, cold caches) while no request
/// went out: 512 KiB reads at -o32 (16 MiB in flight on one connection) cost the client
/// 91-95 µs per READ against 65-72 µs with the wake-up deferred.
pub(super) async fn yield_after_large() {
    if POLLED_BY_TASK.with(std::cell::Cell::get) {
        tokio::task::yield_now().await;
        return;
    }
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// The response to a request: the request drives the reader loop while it waits when
/// the connection lets it (Direct TCP, SMB Direct over soft-iWARP), else the reader
/// hands it over (SMB Direct through verbs). Waiting on a current-thread runtime
/// while its connection has the thread to itself, one request at a time wakes itself
/// at once for a while (`spin`, [`Waiting::spin`]) rather than let the thread sleep:
/// without a pump each wake-up polls the sockets too, and the provider's task reads
/// the response.
pub(super) async fn reply_of(
    pump: Option<&SocketPump>,
    spin: &SpinWait,
    mut rx: oneshot::Receiver<Reply>,
) -> std::result::Result<Reply, oneshot::error::RecvError> {
    if pump.is_none() && spin.spin.is_zero() {
        return rx.await;
    }
    spin.waiting.fetch_add(1, Ordering::SeqCst);
    let mut waiting = Waiting {
        pump,
        spin,
        waker: None,
        since: None,
        spinner: false,
    };
    if !spin.spin.is_zero() {
        WAITING_HERE.set(WAITING_HERE.get() + 1);
    }
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = Pin::new(&mut rx).poll(cx) {
            waiting.done();
            return Poll::Ready(r);
        }
        let r = match pump {
            Some(pump) if spin.waiting.load(Ordering::SeqCst) <= pump.drive_limit => {
                waiting.waker = Some(identity(cx.waker()));
                pump.for_request(cx);
                Pin::new(&mut rx).poll(cx)
            }
            _ => Poll::Pending,
        };
        if r.is_ready() {
            waiting.done();
        } else if waiting.spin() {
            cx.waker().wake_by_ref();
        }
        r
    })
    .await
}

/// A request that drove the reader loop: once it has its response (or is dropped) the
/// socket no longer wakes it (a waker woken after its future finished may be one the
/// executor gave to the next future).
struct Waiting<'a> {
    /// The reader loop it drives (where the connection has one).
    pump: Option<&'a SocketPump>,
    spin: &'a SpinWait,
    /// Which waker it last left with the loop ([`identity`]).
    waker: Option<(usize, usize)>,
    /// When it first waited on a runtime that spins, whether its connection had the
    /// thread to itself then, and whether the last such wait was within the spin time.
    since: Option<(Instant, bool, bool)>,
    /// It holds its connection's [`SpinWait::spinner`].
    spinner: bool,
}

std::thread_local! {
    /// Requests waiting on this thread's current-thread runtime, over all its
    /// connections. One that spins keeps the runtime from polling the sockets
    /// (tokio looks at them only every so many polls while a task wakes itself), so
    /// a request spins only while it is the only one waiting on its thread, not just
    /// on its connection (`smbx bench -t4` on two OS threads: two connections each).
    static WAITING_HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Waiting<'_> {
    /// Whether its connection has the thread to itself: every request waiting on the
    /// thread ([`WAITING_HERE`]) is one of the connection's (the connection's reader
    /// loop reads all their responses; one that spins keeps the runtime from polling
    /// other connections' sockets but every so often: `smbx bench -t4` on two OS
    /// threads, two connections each, lost by it).
    fn thread_to_itself(&self) -> bool {
        WAITING_HERE.get() <= self.spin.waiting.load(Ordering::SeqCst)
    }

    /// Whether to wake at once rather than sleep: its connection has the thread to
    /// itself, the last request that waited so had its response within the spin time,
    /// no other request of the connection spins ([`SpinWait::spinner`]), and this one
    /// has not spun for that long yet. Not only a request waiting alone: at -o2 on one
    /// connection neither request spun, and 4 KiB reads ran slower than at -o1.
    fn spin(&mut self) -> bool {
        let spin = self.spin.spin;
        if spin.is_zero() {
            return false;
        }
        let now = Instant::now();
        let own = self.thread_to_itself();
        let (since, _, quick) = *self.since.get_or_insert_with(|| {
            let quick = u128::from(self.spin.last_wait.load(Ordering::Relaxed)) < spin.as_nanos();
            (now, own, quick)
        });
        if !quick || now.duration_since(since) >= spin || !own {
            self.stop_spinning();
            return false;
        }
        if !self.spinner {
            self.spinner = self
                .spin
                .spinner
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
            if !self.spinner {
                return false;
            }
        }
        // The server may be waiting for this CPU (this VM packs threads onto one):
        // it runs first.
        std::thread::yield_now();
        true
    }

    /// Lets another request of the connection spin.
    fn stop_spinning(&mut self) {
        if std::mem::take(&mut self.spinner) {
            self.spin.spinner.store(false, Ordering::SeqCst);
        }
    }

    /// Its response came: how long it waited, if its connection had the thread to
    /// itself when it began to.
    fn done(&mut self) {
        self.stop_spinning();
        if let Some((since, true, _)) = self.since.take() {
            let ns = since.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            self.spin.last_wait.store(ns, Ordering::Relaxed);
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.stop_spinning();
        // Counted in WAITING_HERE on a runtime that spins, whose futures are polled and
        // dropped on the thread that drives it (one dropped on another thread leaves the
        // count off by one, which only stops or allows a spin).
        if !self.spin.spin.is_zero() {
            WAITING_HERE.set(WAITING_HERE.get().saturating_sub(1));
        }
        self.spin.waiting.fetch_sub(1, Ordering::SeqCst);
        let (Some(mine), Some(pump)) = (self.waker, self.pump) else {
            return;
        };
        let mut w = ReadWake::lock(&pump.wake.request);
        if w.as_ref().is_some_and(|w| identity(w) == mine) {
            *w = None;
        }
    }
}

/// What tells one waker from another (its data and its functions), kept without
/// holding the waker.
fn identity(w: &Waker) -> (usize, usize) {
    (w.data() as usize, std::ptr::from_ref(w.vtable()) as usize)
}

#[cfg(test)]
mod tests {
    //! The hand-over between the requests and the reader task, over a stand-in loop.

    use super::*;
    use crate::conn::tests::Count;
    use std::sync::atomic::AtomicUsize;

    /// A reader loop that counts its polls and leaves its waker in `held`, as a socket
    /// that has nothing to read does.
    fn holding_loop(
        polls: Arc<AtomicUsize>,
        held: Arc<Mutex<Option<Waker>>>,
    ) -> impl Future<Output = ()> + Send {
        std::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            *held.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        })
    }

    /// While the waker the loop was polled with is held, the requests and the reader
    /// task leave the loop to it. One dropped without firing (as tokio drops the
    /// wake-ups it deferred when a current-thread `block_on` returns) does not leave
    /// the loop unpolled for ever: the next request, or the reader task, polls it.
    #[test]
    fn a_wake_up_dropped_unfired_leaves_the_loop_to_the_next_reader() {
        let polls = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(Mutex::new(None::<Waker>));
        let pump = SocketPump::new(holding_loop(polls.clone(), held.clone()));
        let mut cx = Context::from_waker(Waker::noop());
        let polled = || polls.load(Ordering::SeqCst);
        pump.for_request(&cx);
        assert_eq!(polled(), 1);
        pump.for_request(&cx);
        assert!(pump.for_task(&mut cx).is_pending());
        assert_eq!(polled(), 1, "the held waker wakes a reader");
        drop(held.lock().unwrap().take());
        pump.for_request(&cx);
        assert_eq!(polled(), 2, "nothing can wake a reader: polled again");
        // A wake-up that fires lets the next request poll.
        held.lock().unwrap().take().unwrap().wake();
        pump.for_request(&cx);
        assert_eq!(polled(), 3);
        // The reader task, too, polls a loop whose wake-up was dropped.
        drop(held.lock().unwrap().take());
        assert!(pump.for_task(&mut cx).is_pending());
        assert_eq!(polled(), 4);
    }

    /// The reader task, driving the loop alone, lets the runtime's other work run after
    /// each large message before it reads the next: on a current-thread runtime the
    /// `block_on` future (whose requests the messages completed) is polled between two
    /// reads. Woken at once, the task read up to the runtime's `event_interval` (61)
    /// messages in a row first.
    #[test]
    fn the_reader_task_lets_the_block_on_future_run_between_large_messages() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let reads = Arc::new(AtomicUsize::new(0));
        let most = rt.block_on(async {
            let r = reads.clone();
            let pump = Arc::new(SocketPump::new(async move {
                loop {
                    // A large message read.
                    r.fetch_add(1, Ordering::SeqCst);
                    yield_after_large().await;
                }
            }));
            let task = tokio::spawn(pump_task(pump.clone()));
            let (mut last, mut most, mut polls) = (0, 0, 0);
            std::future::poll_fn(|cx| {
                let now = reads.load(Ordering::SeqCst);
                most = most.max(now - last);
                last = now;
                polls += 1;
                if polls == 20 {
                    return Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
            pump.stop();
            task.abort();
            most
        });
        assert!(reads.load(Ordering::SeqCst) >= 10, "the task read");
        assert!(most <= 2, "{most} large messages read between two polls");
    }

    /// With no reader loop to drive (SMB Direct: the provider's task reads), a request
    /// waiting alone on a current-thread runtime still wakes itself at once rather
    /// than let the thread sleep, as over Direct TCP; with the spin time zero it
    /// does not.
    #[tokio::test(flavor = "current_thread")]
    async fn a_request_alone_spins_with_no_reader_loop_too() {
        for (time, spins) in [(crate::DEFAULT_SPIN_WAIT, true), (Duration::ZERO, false)] {
            let spin = SpinWait::new(time);
            let mut w = Waiter::new(&spin);
            assert!(w.pending());
            let woken = w.woken();
            assert_eq!(woken > 0, spins, "woke itself {woken} times");
            w.answer();
        }
    }

    /// A spin time no test's polls outlast (a request spins only that long after it
    /// first waited: with the default 100 µs a slow test run saw it run out).
    const LONG_SPIN: Duration = Duration::from_secs(60);

    /// A request's wait for its response ([`reply_of`] with no reader loop), polled by
    /// hand with a waker that counts the times it woke itself.
    struct Waiter<'a> {
        reply: Pin<
            Box<dyn Future<Output = std::result::Result<Reply, oneshot::error::RecvError>> + 'a>,
        >,
        wakes: Arc<Count>,
        waker: Waker,
        /// Its response; dropped, it comes as an error.
        tx: Option<oneshot::Sender<Reply>>,
    }

    impl<'a> Waiter<'a> {
        fn new(spin: &'a SpinWait) -> Self {
            let (tx, rx) = oneshot::channel::<Reply>();
            let wakes = Arc::new(Count::default());
            Waiter {
                reply: Box::pin(reply_of(None, spin, rx)),
                waker: Waker::from(wakes.clone()),
                wakes,
                tx: Some(tx),
            }
        }

        fn pending(&mut self) -> bool {
            let mut cx = Context::from_waker(&self.waker);
            self.reply.as_mut().poll(&mut cx).is_pending()
        }

        fn woken(&self) -> usize {
            self.wakes.0.load(Ordering::SeqCst)
        }

        /// Its response comes (as an error, its sender dropped): the next poll
        /// returns it.
        fn answer(&mut self) {
            self.tx = None;
            let mut cx = Context::from_waker(&self.waker);
            assert!(matches!(
                self.reply.as_mut().poll(&mut cx),
                Poll::Ready(Err(_))
            ));
        }
    }

    /// Two requests of one connection waiting on its thread (`smbx bench -o2`): one of
    /// them wakes itself rather than let the thread sleep (before, neither did while
    /// the other waited, and 4 KiB reads ran slower at -o2 than at -o1), one at a time;
    /// once it has its response the other spins in its place.
    #[tokio::test(flavor = "current_thread")]
    async fn one_request_of_a_connection_with_the_thread_to_itself_spins() {
        let spin = SpinWait::new(LONG_SPIN);
        let (mut a, mut b) = (Waiter::new(&spin), Waiter::new(&spin));
        assert!(a.pending() && b.pending() && a.pending());
        assert!(
            a.woken() >= 2,
            "the first spins beside its connection's other request"
        );
        assert_eq!(b.woken(), 0, "two spun at once");
        a.answer();
        drop(a);
        assert!(b.pending());
        assert!(b.woken() > 0, "the other spins in its place");
        b.answer();
    }

    /// Two connections' requests, each alone on its connection, waiting on one thread's
    /// runtime (`smbx bench -t4` on two OS threads): neither wakes itself (a spinning one
    /// keeps the runtime from polling the other's socket); once one has its response,
    /// the other, now alone on the thread, spins again.
    #[tokio::test(flavor = "current_thread")]
    async fn a_request_spins_only_while_no_other_waits_on_its_thread() {
        let (spin_a, spin_b) = (SpinWait::new(LONG_SPIN), SpinWait::new(LONG_SPIN));
        let (mut a, mut b) = (Waiter::new(&spin_a), Waiter::new(&spin_b));
        assert!(a.pending() && b.pending());
        // The first was alone when first polled (it woke itself); polled again with the
        // second waiting beside it, neither wakes itself.
        let before = a.woken();
        assert!(before > 0, "the first request, alone, spun");
        assert!(a.pending());
        assert_eq!(a.woken(), before, "spun beside another");
        assert_eq!(b.woken(), 0, "spun beside another");
        a.answer();
        drop(a);
        assert!(b.pending());
        assert!(b.woken() > 0, "alone again, it spins");
    }
}
