//! Two futures run together in one task, each polled when it was woken, without
//! waking the task for what one of them does for the other while it runs.
//!
//! A connection's driver (an SMB Direct link's socket I/O) and the loop that uses
//! the link wake each other all the time: a message received wakes the loop, a
//! response posted wakes the driver. Two pairs run this way, one inside the other:
//! inside the driver an SMB Direct connection hands out (smbx-direct's
//! `SmbDirectConnection::accept_driven`), the provider's driver and the adapter's
//! own; and in the server's connection task, that driver and the read loop.
//!
//! Joined with `tokio::join!`, each of those
//! wakes is a wake of the task itself while it runs, which tokio schedules like a
//! yield: the task goes to the back of the run queue and an idle worker is
//! unparked to steal it (a futex wake and a context switch per hop; 4 KiB reads
//! at queue depth 1 over SMB Direct measured about 2 of each per READ). Here a
//! wake that comes while the pair is being polled only marks the woken future, and
//! the poll goes round again until neither is marked; a wake from elsewhere (the
//! socket, another task) wakes the task as usual. A future that wakes itself while
//! it is polled asks to yield (`yield_once`, tokio's cooperative budget): the task
//! is woken and gives the worker up once the other future has nothing left to do.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Rounds of one poll before the task yields to others while its futures keep
/// waking each other (a stream of work between them), so they cannot hold a
/// worker for ever.
const ROUNDS: usize = 32;

type Part<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The future of [`together`].
pub struct Together<'a> {
    parts: [Option<Part<'a>>; 2],
    wakers: [Waker; 2],
    shared: Arc<Shared>,
}

/// What the parts' wakers and the poll share.
#[derive(Default)]
struct Shared {
    /// Bit `i`: part `i` was woken since it was last polled.
    woken: AtomicU8,
    /// The pair is being polled: a part's wake only marks it.
    polling: AtomicBool,
    /// Parts that woke themselves while polled (a yield): polled again at the
    /// task's next poll.
    yielded: AtomicU8,
    /// The task's waker, from its last poll.
    task: Mutex<Option<Waker>>,
}

thread_local! {
    /// The part this thread is polling now: its pair's [`Shared`] (as an address)
    /// and its bit; `(0, 0)` when none. Only a wake on the polling thread, inside
    /// the part's own poll, is that part's yield: a wake from another thread while
    /// it is polled is marked like any other (taken for a yield, it could be set
    /// after the poll last looked for one, and no one would wake the task).
    static POLLED: Cell<(usize, u8)> = const { Cell::new((0, 0)) };
}

/// [`POLLED`] set for one part's poll, put back as it was when dropped (a part
/// may itself run a pair; a part that panics, caught by the runtime, leaves no
/// mark on the thread for a later pair at the same address).
struct Polled((usize, u8));

impl Polled {
    fn enter(pair: usize, bit: u8) -> Polled {
        Polled(POLLED.replace((pair, bit)))
    }
}

impl Drop for Polled {
    fn drop(&mut self) {
        POLLED.set(self.0);
    }
}

/// One part's waker.
struct PartWaker {
    shared: Arc<Shared>,
    bit: u8,
}

impl Wake for PartWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let s = &self.shared;
        let me = (Arc::as_ptr(s) as usize, self.bit);
        if POLLED.with(Cell::get) == me {
            // Woken by itself as it runs: it yields.
            s.yielded.fetch_or(self.bit, Ordering::SeqCst);
            return;
        }
        s.woken.fetch_or(self.bit, Ordering::SeqCst);
        if s.polling.load(Ordering::SeqCst) {
            // The poll looks at the marks again before it ends.
            return;
        }
        let task = s.task.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = task {
            w.wake();
        }
    }
}

/// Runs `a` and `b` together in the calling task until both have ended; each is
/// polled only when it was woken, and their wakes of each other during the poll
/// are taken in the same poll (see the module's documentation).
pub fn together<'a>(
    a: impl Future<Output = ()> + Send + 'a,
    b: impl Future<Output = ()> + Send + 'a,
) -> Together<'a> {
    let shared = Arc::new(Shared {
        woken: AtomicU8::new(0b11),
        ..Shared::default()
    });
    let waker = |bit| {
        Waker::from(Arc::new(PartWaker {
            shared: shared.clone(),
            bit,
        }))
    };
    Together {
        wakers: [waker(0b01), waker(0b10)],
        parts: [Some(Box::pin(a)), Some(Box::pin(b))],
        shared,
    }
}

impl Future for Together<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let s = &*this.shared;
        {
            let mut task = s.task.lock().unwrap_or_else(|e| e.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        // Parts that yielded at the last poll run again now.
        s.woken
            .fetch_or(s.yielded.swap(0, Ordering::SeqCst), Ordering::SeqCst);
        for _ in 0..ROUNDS {
            s.polling.store(true, Ordering::SeqCst);
            let woken = s.woken.swap(0, Ordering::SeqCst);
            if woken == 0 {
                s.polling.store(false, Ordering::SeqCst);
                // A wake between the swap and the store saw `polling` set.
                if s.woken.load(Ordering::SeqCst) != 0 {
                    continue;
                }
                if s.yielded.load(Ordering::SeqCst) != 0 {
                    cx.waker().wake_by_ref();
                }
                return Poll::Pending;
            }
            for (i, (part, waker)) in this.parts.iter_mut().zip(&this.wakers).enumerate() {
                let bit = 1 << i;
                if woken & bit == 0 {
                    continue;
                }
                if let Some(f) = part {
                    let polled = Polled::enter(Arc::as_ptr(&this.shared) as usize, bit);
                    let done = f.as_mut().poll(&mut Context::from_waker(waker)).is_ready();
                    drop(polled);
                    if done {
                        *part = None;
                    }
                }
            }
            if this.parts.iter().all(Option::is_none) {
                s.polling.store(false, Ordering::SeqCst);
                return Poll::Ready(());
            }
        }
        // Still waking each other: let the worker run other tasks first.
        s.polling.store(false, Ordering::SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_waker::Count;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::Notify;

    /// Two futures that hand a token back and forth `n` times through two
    /// `Notify`s end in one poll, and the task is never woken for their wakes of
    /// each other (`tokio::join!` wakes it at every hand-over).
    #[test]
    fn wakes_between_the_two_are_taken_in_the_same_poll() {
        let (ping, pong) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let n = 10;
        let a = {
            let (ping, pong) = (ping.clone(), pong.clone());
            async move {
                for _ in 0..n {
                    ping.notify_one();
                    pong.notified().await;
                }
            }
        };
        let b = async move {
            for _ in 0..n {
                ping.notified().await;
                pong.notify_one();
            }
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut t = together(a, b);
        let got = Pin::new(&mut t).poll(&mut Context::from_waker(&waker));
        assert!(got.is_ready());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    /// A wake from outside the poll wakes the task, and the woken part runs at the
    /// next poll; the pair ends once both parts have.
    #[test]
    fn a_wake_from_elsewhere_wakes_the_task() {
        let go = Arc::new(Notify::new());
        let done = Arc::new(AtomicBool::new(false));
        let a = {
            let (go, done) = (go.clone(), done.clone());
            async move {
                go.notified().await;
                done.store(true, Ordering::SeqCst);
            }
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut t = together(a, async {});
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        go.notify_one();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(!done.load(Ordering::SeqCst));
        assert!(Pin::new(&mut t).poll(&mut cx).is_ready());
        assert!(done.load(Ordering::SeqCst));
    }

    /// Two parts that never stop waking each other get the task woken and give
    /// the worker up after a bounded number of rounds.
    #[test]
    fn parts_that_keep_waking_each_other_yield() {
        let (ping, pong) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let polls = Arc::new(AtomicUsize::new(0));
        let a = {
            let (ping, pong, polls) = (ping.clone(), pong.clone(), polls.clone());
            async move {
                loop {
                    polls.fetch_add(1, Ordering::SeqCst);
                    ping.notify_one();
                    pong.notified().await;
                }
            }
        };
        let b = async move {
            loop {
                ping.notified().await;
                pong.notify_one();
            }
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut t = together(a, b);
        assert!(Pin::new(&mut t)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(polls.load(Ordering::SeqCst) <= ROUNDS);
    }

    /// A part that wakes itself as it runs (a yield) is polled again only at the
    /// task's next poll, the task woken for it, once the other part is done
    /// with what it was woken for.
    #[test]
    fn a_part_that_wakes_itself_yields_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let spin = {
            let polls = polls.clone();
            std::future::poll_fn(move |cx: &mut Context<'_>| {
                polls.fetch_add(1, Ordering::SeqCst);
                cx.waker().wake_by_ref();
                Poll::<()>::Pending
            })
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut t = together(spin, std::future::pending());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
        assert_eq!(
            (polls.load(Ordering::SeqCst), count.0.load(Ordering::SeqCst)),
            (1, 1)
        );
        assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
        assert_eq!(
            (polls.load(Ordering::SeqCst), count.0.load(Ordering::SeqCst)),
            (2, 2)
        );
    }

    /// A wake from another thread while a part is being polled (its socket became
    /// ready, another task notified it) is no yield of that part: it is marked
    /// woken and taken in the same poll. Taken for a yield, a wake whose thread
    /// read the mark of the part being polled just before the poll went on and
    /// ended would set the yield after the poll had last looked for one, and
    /// nothing would wake the task (a lost wake).
    #[test]
    fn a_wake_from_another_thread_during_a_parts_poll_is_no_yield() {
        let polls = Arc::new(AtomicUsize::new(0));
        let part = {
            let polls = polls.clone();
            std::future::poll_fn(move |cx: &mut Context<'_>| {
                if polls.fetch_add(1, Ordering::SeqCst) > 0 {
                    return Poll::Ready(());
                }
                let w = cx.waker().clone();
                std::thread::spawn(move || w.wake()).join().unwrap();
                Poll::Pending
            })
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut t = together(part, async {});
        let got = Pin::new(&mut t).poll(&mut Context::from_waker(&waker));
        assert_eq!(
            (
                got.is_ready(),
                polls.load(Ordering::SeqCst),
                count.0.load(Ordering::SeqCst)
            ),
            (true, 2, 0)
        );
    }

    /// A pair inside a pair (the server runs `together(serve, together(provider,
    /// drive))`): the inner parts' wakes of each other and of the outer part, and the
    /// outer part's of an inner one, are all taken within the outer poll, with no
    /// wake of the task; an inner part's yield yields the task once, and that part
    /// alone runs again at the next poll.
    #[test]
    fn a_pair_inside_a_pair_takes_every_wake_in_the_same_poll() {
        let n = 10;
        let notify = || Arc::new(Notify::new());
        let (to_b, to_c, to_a) = (notify(), notify(), notify());
        // a (outer) -> b (inner) -> c (inner) -> a, n times round.
        let a = {
            let (to_b, to_a) = (to_b.clone(), to_a.clone());
            async move {
                for _ in 0..n {
                    to_b.notify_one();
                    to_a.notified().await;
                }
            }
        };
        let b = {
            let to_c = to_c.clone();
            async move {
                for _ in 0..n {
                    to_b.notified().await;
                    to_c.notify_one();
                }
            }
        };
        let c = async move {
            for _ in 0..n {
                to_c.notified().await;
                to_a.notify_one();
            }
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut t = together(a, together(b, c));
        let got = Pin::new(&mut t).poll(&mut Context::from_waker(&waker));
        assert!(got.is_ready());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);

        let polls = Arc::new(AtomicUsize::new(0));
        let spin = {
            let polls = polls.clone();
            std::future::poll_fn(move |cx: &mut Context<'_>| {
                if polls.fetch_add(1, Ordering::SeqCst) == 2 {
                    return Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                Poll::<()>::Pending
            })
        };
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut t = together(async {}, together(std::future::pending(), spin));
        for (i, wakes) in [(1, 1), (2, 2)] {
            assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
            assert_eq!(
                (polls.load(Ordering::SeqCst), count.0.load(Ordering::SeqCst)),
                (i, wakes)
            );
        }
        assert!(
            Pin::new(&mut t).poll(&mut cx).is_pending(),
            "one part waits"
        );
        assert_eq!(
            (polls.load(Ordering::SeqCst), count.0.load(Ordering::SeqCst)),
            (3, 2)
        );
    }

    /// A part that panics (the runtime catches it and runs other tasks on the
    /// thread) leaves the thread's mark of the part being polled as it was: a
    /// later pair at the same address would otherwise take a wake from outside
    /// its poll for a yield, and not wake its task.
    #[test]
    fn a_part_that_panics_leaves_no_mark_on_the_thread() {
        let mut t = together(async { panic!("a part panics") }, async {});
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Pin::new(&mut t).poll(&mut Context::from_waker(&waker))
        }));
        assert!(r.is_err());
        assert_eq!(POLLED.with(Cell::get), (0, 0));
    }
}
