//! The I/O futures of one SMB queue, each polled only when its waker fired.
//!
//! Every future of a set has one type, and each slot keeps the box its first future
//! was put in: a new I/O is written into a finished one's place (no allocation per
//! I/O).
//!
//! Like futures-util's `FuturesUnordered`, but without its yield once it has polled
//! every future it holds: that one wakes its own task and returns `Pending` whenever all
//! its futures are pending, which at QD1 is after every new request, and costs the
//! worker's runtime another pass (and a zero-timeout epoll_wait) per I/O. Here a poll
//! returns `Pending` with nothing woken, and the runtime sleeps until a response comes.

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

/// The I/O sets whose futures one runtime drives (the queues of the worker threads that
/// one OS thread runs): a queue waiting for its own I/Os stops once another set has
/// futures woken, so that the OS thread reaps those instead of sleeping on them.
#[derive(Default)]
pub(crate) struct ReadyGroup(Mutex<Vec<Weak<Ready>>>);

impl ReadyGroup {
    /// Adds `set` to the group.
    pub(crate) fn join<F: Future>(&self, set: &IoSet<F>) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|w| w.strong_count() > 0);
        m.push(Arc::downgrade(&set.ready));
    }

    /// Whether a set of the group other than `set` has futures woken since their last poll.
    pub(crate) fn others_ready<F: Future>(&self, set: &IoSet<F>) -> bool {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .filter_map(Weak::upgrade)
            .any(|r| !Arc::ptr_eq(&r, &set.ready) && !r.lock().slots.is_empty())
    }
}

/// Futures polled when woken; their outputs in the order they finish.
pub(crate) struct IoSet<F: Future> {
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

impl<F: Future> IoSet<F> {
    /// An empty set.
    pub(crate) fn new() -> Self {
        IoSet {
            futures: Vec::new(),
            wakers: Vec::new(),
            ready: Arc::default(),
            free: Vec::new(),
            len: 0,
            batch: Vec::new(),
        }
    }

    /// Futures not yet finished.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when every future has finished.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a future; it is polled at the next [`IoSet::poll_next`].
    pub(crate) fn push(&mut self, f: F) {
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
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);
    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A set of futures of different types, boxed.
    type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

    fn counting() -> (Arc<Counting>, Waker) {
        let c = Arc::new(Counting(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    /// A future woken after it finished (a waker it left fires later) does not leave
    /// an empty set looking ready to its group once the set is polled.
    #[test]
    fn a_wake_after_the_last_future_finished_is_forgotten() {
        let (_count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let group = ReadyGroup::default();
        let mut set: IoSet<Boxed<u32>> = IoSet::new();
        let other: IoSet<Boxed<u32>> = IoSet::new();
        group.join(&set);
        group.join(&other);
        let left = Arc::new(Mutex::new(None::<Waker>));
        let keep = left.clone();
        set.push(Box::pin(std::future::poll_fn(move |cx| {
            *keep.lock().unwrap() = Some(cx.waker().clone());
            Poll::Ready(5)
        })));
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(Some(5)));
        assert!(set.is_empty());
        left.lock().unwrap().take().unwrap().wake();
        assert!(group.others_ready(&other), "the wake-up is seen");
        assert_eq!(set.poll_next(&mut cx), Poll::Ready(None));
        assert!(!group.others_ready(&other), "an empty set is not ready");
    }

    #[test]
    fn pending_futures_do_not_wake_the_set_and_finish_in_completion_order() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut set: IoSet<Boxed<u32>> = IoSet::new();
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
        let mut set: IoSet<Boxed<usize>> = IoSet::new();
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
        let mut set = IoSet::new();
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
        let mut set: IoSet<Boxed<u8>> = IoSet::new();
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

    #[test]
    fn a_group_tells_a_set_when_another_has_woken_futures() {
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let group = ReadyGroup::default();
        let mut a: IoSet<Boxed<u32>> = IoSet::new();
        let mut b: IoSet<Boxed<u32>> = IoSet::new();
        group.join(&a);
        group.join(&b);
        let (tx_a, rx_a) = tokio::sync::oneshot::channel::<u32>();
        let (tx_b, rx_b) = tokio::sync::oneshot::channel::<u32>();
        a.push(Box::pin(async move { rx_a.await.unwrap_or(0) }));
        b.push(Box::pin(async move { rx_b.await.unwrap_or(0) }));
        // Pushed futures are queued until their first poll.
        assert!(group.others_ready(&a));
        assert!(a.poll_next(&mut cx).is_pending());
        assert!(b.poll_next(&mut cx).is_pending());
        assert!(!group.others_ready(&a) && !group.others_ready(&b));
        // B's response wakes the task and is seen from A, not from B itself.
        tx_b.send(7).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(group.others_ready(&a));
        assert!(!group.others_ready(&b));
        assert_eq!(b.poll_next(&mut cx), Poll::Ready(Some(7)));
        assert!(!group.others_ready(&a));
        tx_a.send(1).unwrap();
        assert!(group.others_ready(&b));
        assert_eq!(a.poll_next(&mut cx), Poll::Ready(Some(1)));
        // A set that is gone counts for nothing.
        drop(b);
        assert!(!group.others_ready(&a));
    }
}
