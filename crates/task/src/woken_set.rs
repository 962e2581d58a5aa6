//! Futures of one type, each polled again only when its waker fired ([`WokenSet`]).
//!
//! Every future of a set has one type, and each slot keeps the box its first future
//! was put in: a new future is written into a finished one's place (no allocation
//! per future).
//!
//! Like futures-util's `FuturesUnordered`, but without its yield once it has polled
//! every future it holds: that one wakes its own task and returns `Pending` whenever all
//! its futures are pending, which is after every new future (its first poll was not
//! with a waker of the set's). Here a poll returns `Pending` with nothing woken, and
//! the task sleeps until one of its futures is woken. Two users:
//!
//! - the bench's I/Os of one SMB queue: at QD1 that yield cost the worker's runtime
//!   another pass (and a zero-timeout epoll_wait) per I/O;
//! - the requests a server connection's read loop parks (WRITEs waiting for their
//!   RDMA Reads): the read loop runs in the same task as the SMB Direct driver
//!   ([`together`](crate::together())), where a part that wakes itself yields the
//!   task; tokio then puts it at the back of the queue and unparks the other worker
//!   to steal it, a futex wake and a context switch for nothing (0.3 per 64 KiB
//!   WRITE at queue depth 8).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Wake, Waker};

/// Slots whose futures were woken since they were last polled, and who to tell.
#[derive(Default)]
struct ReadyList {
    slots: Vec<usize>,
    queued: Vec<bool>,
    parent: Option<Waker>,
}

impl ReadyList {
    /// Queues `slot` once; the parent's waker, to wake, if it was not queued already.
    fn queue(&mut self, slot: usize) -> bool {
        match self.queued.get_mut(slot) {
            Some(q) if !*q => {
                *q = true;
                self.slots.push(slot);
                true
            }
            _ => false,
        }
    }
}

#[derive(Default)]
struct Ready(Mutex<ReadyList>);

impl Ready {
    fn lock(&self) -> MutexGuard<'_, ReadyList> {
        // A panic while the list was held leaves it consistent (plain pushes).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The waker of one slot: queues the slot and wakes the set's task.
struct SlotWaker {
    slot: usize,
    ready: Arc<Ready>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let parent = {
            let mut r = self.ready.lock();
            if r.queue(self.slot) {
                r.parent.clone()
            } else {
                None
            }
        };
        if let Some(w) = parent {
            w.wake();
        }
    }
}

/// Futures polled when woken; their outputs in the order they finish (see the
/// module's documentation).
pub struct WokenSet<F: Future> {
    /// One box per slot, made when the slot is first used and kept: `None` while the
    /// slot is free.
    futures: Vec<Pin<Box<Option<F>>>>,
    /// One waker per slot, made when the slot is first used.
    wakers: Vec<Waker>,
    ready: Arc<Ready>,
    free: Vec<usize>,
    len: usize,
    batch: Vec<usize>,
}

impl<F: Future> WokenSet<F> {
    /// An empty set.
    pub fn new() -> Self {
        WokenSet {
            futures: Vec::new(),
            wakers: Vec::new(),
            ready: Arc::default(),
            free: Vec::new(),
            len: 0,
            batch: Vec::new(),
        }
    }

    /// Futures not yet finished.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when every future has finished.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a future; it is polled at the next [`WokenSet::poll_next`]. The task
    /// polling the set is not woken for it: it polls the set before it waits (a wake
    /// now, inside that task's poll, would be its yield).
    pub fn push(&mut self, f: F) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = self.futures.len();
                self.futures.push(Box::pin(None));
                self.wakers.push(Waker::from(Arc::new(SlotWaker {
                    slot: s,
                    ready: self.ready.clone(),
                })));
                self.ready.lock().queued.push(false);
                s
            }
        };
        self.futures[slot].as_mut().set(Some(f));
        self.len += 1;
        self.ready.lock().queue(slot);
    }

    /// The output of a future that finished, `Pending` (with `cx` to be woken) when none
    /// of those woken since their last poll has, `None` when the set is empty.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        if self.len == 0 {
            // Wake-ups of futures that have finished (one may be woken as it finishes,
            // or later by a waker it left) leave nothing to poll: forgotten, so that the
            // set does not look ready to its group for ever.
            let mut r = self.ready.lock();
            let ReadyList { slots, queued, .. } = &mut *r;
            for s in slots.drain(..) {
                if let Some(q) = queued.get_mut(s) {
                    *q = false;
                }
            }
            return Poll::Ready(None);
        }
        {
            let mut r = self.ready.lock();
            if !r.parent.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                r.parent = Some(cx.waker().clone());
            }
            std::mem::swap(&mut self.batch, &mut r.slots);
            for &s in &self.batch {
                r.queued[s] = false;
            }
        }
        // One pass over what was woken: a future woken while it is polled here is
        // queued again, and its waker wakes `cx`, so the caller comes back for it.
        for i in 0..self.batch.len() {
            let slot = self.batch[i];
            let Some(f) = self.futures.get_mut(slot) else {
                continue;
            };
            let Some(live) = f.as_mut().as_pin_mut() else {
                continue;
            };
            let mut scx = Context::from_waker(&self.wakers[slot]);
            if let Poll::Ready(out) = live.poll(&mut scx) {
                // Dropped in place: the box waits for the slot's next future.
                f.as_mut().set(None);
                self.free.push(slot);
                self.len -= 1;
                // The rest of the batch goes back to the ready list from where it lies
                // (no Vec split off for it: that was an allocation per I/O at depth).
                if let Some(rest) = self.batch.get(i + 1..).filter(|r| !r.is_empty()) {
                    let mut r = self.ready.lock();
                    for &s in rest {
                        r.queue(s);
                    }
                }
                self.batch.clear();
                return Poll::Ready(Some(out));
            }
        }
        self.batch.clear();
        Poll::Pending
    }

    /// A watch on the set's woken futures, for a caller that polls several sets in
    /// one thread (and would rather reap another set's than sleep on this one's).
    pub fn watch(&self) -> WokenWatch {
        WokenWatch(Arc::downgrade(&self.ready))
    }
}

impl<F: Future + Unpin> WokenSet<F> {
    /// Takes every unfinished future out (to run elsewhere: the set no longer polls
    /// them); the set is left empty, its slots kept for the next ones.
    pub fn drain(&mut self) -> Vec<F> {
        let mut all = Vec::with_capacity(self.len);
        for (slot, f) in self.futures.iter_mut().enumerate() {
            if let Some(f) = f.as_mut().get_mut().take() {
                all.push(f);
                self.free.push(slot);
            }
        }
        self.len = 0;
        // Their wakes since their last poll are theirs to keep, not the set's.
        let mut r = self.ready.lock();
        let ReadyList { slots, queued, .. } = &mut *r;
        for s in slots.drain(..) {
            if let Some(q) = queued.get_mut(s) {
                *q = false;
            }
        }
        all
    }
}

impl<F: Future> Default for WokenSet<F> {
    fn default() -> Self {
        WokenSet::new()
    }
}

/// A weak look at one [`WokenSet`]'s woken futures ([`WokenSet::watch`]); it does
/// not keep the set alive.
#[derive(Clone)]
pub struct WokenWatch(Weak<Ready>);

impl WokenWatch {
    /// Whether the set still exists and has futures woken since their last poll
    /// (a future pushed counts as woken until its first poll).
    pub fn has_woken(&self) -> bool {
        self.0.upgrade().is_some_and(|r| !r.lock().slots.is_empty())
    }

    /// Whether the set is gone.
    pub fn is_gone(&self) -> bool {
        self.0.strong_count() == 0
    }

    /// Whether this watches `set`.
    pub fn watches<F: Future>(&self, set: &WokenSet<F>) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&set.ready))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_waker::counting;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A set of futures of different types, boxed.
    type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

    /// A future woken after it finished (a waker it left fires later) does not leave
    /// an empty set looking woken once the set is polled.
    #[test]
    fn a_wake_after_the_last_future_finished_is_forgotten() {
        let (_count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set: WokenSet<Boxed<u32>> = WokenSet::new();
        let watch = set.watch();
        assert!(watch.watches(&set) && !watch.watches(&WokenSet::<Boxed<u32>>::new()));
        let left = Arc::new(Mutex::new(None::<Waker>));
        let keep = left.clone();
        set.push(Box::pin(std::future::poll_fn(move |cx| {
            *keep.lock().unwrap() = Some(cx.waker().clone());
            Poll::Ready(5)
        })));
        assert!(watch.has_woken(), "pushed, not yet polled");
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(5)));
        assert!(set.is_empty());
        left.lock().unwrap().take().unwrap().wake();
        assert!(watch.has_woken(), "the wake-up is seen");
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(None));
        assert!(!watch.has_woken(), "an empty set is not woken");
        drop(set);
        assert!(watch.is_gone() && !watch.has_woken());
    }

    #[test]
    fn pending_futures_do_not_wake_the_set_and_finish_in_completion_order() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set: WokenSet<Boxed<u32>> = WokenSet::new();
        let mut senders = Vec::new();
        for i in 0..3u32 {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            senders.push(tx);
            set.push(Box::pin(async move { rx.await.unwrap_or(99) + i * 10 }));
        }
        assert_eq!(set.len(), 3);
        // Every future polled once and pending: nothing to do, nobody woken.
        assert!(set.poll_next(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        assert!(set.poll_next(&mut cx).is_pending());
        // The third answers first, then the first.
        let tx3 = senders.pop().unwrap();
        tx3.send(3).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(23)));
        let tx1 = senders.remove(0);
        tx1.send(1).unwrap();
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(1)));
        assert_eq!(set.len(), 1);
        assert!(set.poll_next(&mut cx).is_pending());
        // A dropped sender completes the last one.
        senders.clear();
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(109)));
        assert!(set.is_empty());
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn slots_are_reused_and_woken_together_all_come_out() {
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set: WokenSet<Boxed<usize>> = WokenSet::new();
        for round in 0..3 {
            let mut senders = Vec::new();
            for i in 0..4 {
                let (tx, rx) = tokio::sync::oneshot::channel::<usize>();
                senders.push(tx);
                set.push(Box::pin(async move { rx.await.unwrap_or(0) * 100 + i }));
            }
            assert!(set.poll_next(&mut cx).is_pending());
            for tx in senders {
                tx.send(round + 1).unwrap();
            }
            let mut got = Vec::new();
            while let Poll::Ready(Some(v)) = set.poll_next(&mut cx) {
                got.push(v);
            }
            got.sort();
            let want: Vec<usize> = (0..4).map(|i| (round + 1) * 100 + i).collect();
            assert_eq!(got, want);
            assert!(set.is_empty());
        }
        // Four slots served all three rounds.
        assert_eq!(set.futures.len(), 4);
    }

    /// Futures of one type: the slot a finished one leaves takes the next in the
    /// same box (no allocation per future), and the set's unfinished futures are
    /// dropped with it.
    #[test]
    fn a_slot_keeps_its_box_for_the_next_future_and_drops_the_unfinished() {
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Guard(Arc<AtomicUsize>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let io = |v: u32, rx: Option<tokio::sync::oneshot::Receiver<()>>| {
            let guard = Guard(dropped.clone());
            async move {
                let _guard = guard;
                if let Some(rx) = rx {
                    let _ = rx.await;
                }
                v
            }
        };
        let mut set = WokenSet::new();
        set.push(io(1, None));
        let first: *const _ = &*set.futures[0];
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(1)));
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "dropped as it finished");
        let (_tx, rx) = tokio::sync::oneshot::channel();
        set.push(io(2, Some(rx)));
        assert_eq!(set.futures.len(), 1);
        assert!(std::ptr::eq(&*set.futures[0], first), "the same box");
        assert!(set.poll_next(&mut cx).is_pending());
        drop(set);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            2,
            "the unfinished one is dropped"
        );
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_on_the_next_call() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set: WokenSet<Boxed<u8>> = WokenSet::new();
        let mut polls = 0u8;
        set.push(Box::pin(std::future::poll_fn(move |cx| {
            polls += 1;
            if polls < 3 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(polls)
            }
        })));
        assert!(set.poll_next(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(set.poll_next(&mut cx).is_pending());
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(3)));
    }

    /// A future that waits for `rx` and counts its polls.
    fn waiting(rx: tokio::sync::oneshot::Receiver<()>, polls: Arc<AtomicUsize>) -> Boxed<()> {
        let mut rx = Some(rx);
        Box::pin(std::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            match rx.as_mut().map(|r| Pin::new(r).poll(cx)) {
                Some(Poll::Ready(_)) | None => {
                    rx = None;
                    Poll::Ready(())
                }
                Some(Poll::Pending) => Poll::Pending,
            }
        }))
    }

    /// Futures just pushed, all waiting, are polled once and the poller is not woken
    /// for it (FuturesUnordered woke it: a yield of its task); polled again, none of
    /// them is (none was woken).
    #[test]
    fn pushed_futures_all_waiting_are_not_polled_again_unwoken() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set = WokenSet::new();
        let polls = Arc::new(AtomicUsize::new(0));
        let mut senders = Vec::new();
        for _ in 0..4 {
            let (tx, rx) = tokio::sync::oneshot::channel();
            senders.push(tx);
            set.push(waiting(rx, polls.clone()));
        }
        assert!(set.poll_next(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 4);
        assert!(set.poll_next(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 4, "none was woken");
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            0,
            "the poller was not woken"
        );
        drop(senders);
    }

    /// A future's wake wakes the poller; the next poll polls that future alone.
    #[test]
    fn a_woken_future_wakes_the_poller_and_is_polled_alone() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set = WokenSet::new();
        let (polls_a, polls_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (tx_a, rx_a) = tokio::sync::oneshot::channel();
        let (tx_b, rx_b) = tokio::sync::oneshot::channel();
        set.push(waiting(rx_a, polls_a.clone()));
        set.push(waiting(rx_b, polls_b.clone()));
        assert!(set.poll_next(&mut cx).is_pending());
        tx_b.send(()).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken by the future");
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(())));
        assert_eq!(
            polls_a.load(Ordering::SeqCst),
            1,
            "the other one not polled"
        );
        assert_eq!(polls_b.load(Ordering::SeqCst), 2);
        assert_eq!(set.len(), 1);
        assert!(set.poll_next(&mut cx).is_pending());
        tx_a.send(()).unwrap();
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(())));
        assert!(set.is_empty());
    }

    /// The set hands every unfinished future over (to run elsewhere) and is left
    /// empty, with nothing woken, its slots kept for the next ones.
    #[test]
    fn drain_gives_every_unfinished_future_up() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set = WokenSet::new();
        let polls = Arc::new(AtomicUsize::new(0));
        let (_tx, rx) = tokio::sync::oneshot::channel();
        set.push(waiting(rx, polls.clone()));
        assert!(set.poll_next(&mut cx).is_pending());
        set.push(Box::pin(async {}));
        let watch = set.watch();
        assert!(watch.has_woken());
        let all = set.drain();
        assert_eq!(all.len(), 2);
        assert!(set.is_empty() && !watch.has_woken());
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(None));
        set.push(Box::pin(async {}));
        assert_eq!(set.futures.len(), 2, "a slot reused");
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(())));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }
}
