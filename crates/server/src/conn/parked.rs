//! The requests a connection's read loop polls itself ([`Parked`]): each is polled
//! again only when it was woken, and the set never wakes the read loop for nothing.
//!
//! `FuturesUnordered` (which this replaces) wakes the task polling it whenever one
//! of its polls has polled as many futures as it holds and the last stayed pending
//! (its guard against starving the executor). A WRITE parked by the read loop is
//! polled once more when pushed (its first poll, in the read loop, had no waker of
//! the set's), so a batch of WRITEs just parked, all waiting for their RDMA Reads,
//! ended with such a wake. The read loop runs in the same task as the SMB Direct
//! driver (`together`), where a part that wakes itself yields the
//! task: tokio then puts it at the back of the queue and unparks the other worker
//! to steal it, a futex wake and a context switch for nothing (0.3 per 64 KiB
//! WRITE at queue depth 8).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use futures_util::Stream;

/// A parked request: its future, to run to its end.
pub(crate) type ParkedRequest = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Requests polled by the read loop beside its receive (a [`Stream`] that yields
/// `()` each time one of them ends); see the module's documentation.
#[derive(Default)]
pub(crate) struct Parked {
    entries: Vec<Entry>,
    /// The read loop's waker, from the last poll of the set.
    task: Arc<AtomicWaker>,
}

/// One parked request and its waker.
struct Entry {
    fut: ParkedRequest,
    mark: Arc<Mark>,
    waker: Waker,
}

/// A request's waker: marks it woken and wakes the read loop.
struct Mark {
    woken: AtomicBool,
    task: Arc<AtomicWaker>,
}

impl Wake for Mark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.task.wake();
    }
}

impl Parked {
    /// An empty set.
    pub(crate) fn new() -> Parked {
        Parked::default()
    }

    /// Adds a request; it is polled at the set's next poll (its first poll, if any,
    /// was not with a waker of the set's). The read loop polls the set before it
    /// waits, so no wake is needed (one now, inside the loop's poll, would be its
    /// yield).
    pub(crate) fn push(&mut self, fut: ParkedRequest) {
        let mark = Arc::new(Mark {
            woken: AtomicBool::new(true),
            task: self.task.clone(),
        });
        let waker = Waker::from(mark.clone());
        self.entries.push(Entry { fut, mark, waker });
    }

    /// Whether no request is parked.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Stream for Parked {
    type Item = ();

    /// Polls the requests woken since their last poll; `Some(())` as soon as one
    /// ends, `None` when none is parked, pending otherwise (the read loop is woken
    /// when one of them is).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<()>> {
        let this = self.get_mut();
        if this.entries.is_empty() {
            return Poll::Ready(None);
        }
        // Registered before the marks are read: a wake after this wakes the loop.
        this.task.register(cx.waker());
        let mut i = 0;
        while let Some(e) = this.entries.get_mut(i) {
            let woken = e.mark.woken.swap(false, Ordering::SeqCst);
            if woken
                && e.fut
                    .as_mut()
                    .poll(&mut Context::from_waker(&e.waker))
                    .is_ready()
            {
                this.entries.swap_remove(i);
                return Poll::Ready(Some(()));
            }
            i += 1;
        }
        Poll::Pending
    }
}

impl IntoIterator for Parked {
    type Item = ParkedRequest;
    type IntoIter = std::vec::IntoIter<ParkedRequest>;

    /// The parked requests, to run elsewhere (the read loop hands them to tasks of
    /// their own when it stops polling them).
    fn into_iter(self) -> Self::IntoIter {
        let all: Vec<ParkedRequest> = self.entries.into_iter().map(|e| e.fut).collect();
        all.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A waker that counts its wakes (the read loop's).
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn loop_waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    /// A request that waits for `rx` and counts its polls.
    fn request(rx: tokio::sync::oneshot::Receiver<()>, polls: Arc<AtomicUsize>) -> ParkedRequest {
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

    /// Requests just parked, all waiting, are polled once and the read loop is not
    /// woken for it (FuturesUnordered woke it: a yield of the connection's task);
    /// polled again, none of them is (none was woken).
    #[test]
    fn parked_requests_all_waiting_do_not_wake_the_loop() {
        let (count, waker) = loop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut set = Parked::new();
        let polls = Arc::new(AtomicUsize::new(0));
        let mut senders = Vec::new();
        for _ in 0..4 {
            let (tx, rx) = tokio::sync::oneshot::channel();
            senders.push(tx);
            set.push(request(rx, polls.clone()));
        }
        assert!(Pin::new(&mut set).poll_next(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 4);
        assert!(Pin::new(&mut set).poll_next(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 4, "none was woken");
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "the loop was not woken");
        drop(senders);
    }

    /// A request's wake wakes the loop; the next poll polls that request alone and
    /// gives `Some(())` when it ends; an empty set gives `None`.
    #[test]
    fn a_woken_request_wakes_the_loop_and_ends_alone() {
        let (count, waker) = loop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut set = Parked::new();
        assert_eq!(Pin::new(&mut set).poll_next(&mut cx), Poll::Ready(None));
        let (polls_a, polls_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (tx_a, rx_a) = tokio::sync::oneshot::channel();
        let (tx_b, rx_b) = tokio::sync::oneshot::channel();
        set.push(request(rx_a, polls_a.clone()));
        set.push(request(rx_b, polls_b.clone()));
        assert!(Pin::new(&mut set).poll_next(&mut cx).is_pending());
        tx_b.send(()).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken by the request");
        assert_eq!(Pin::new(&mut set).poll_next(&mut cx), Poll::Ready(Some(())));
        assert_eq!(
            polls_a.load(Ordering::SeqCst),
            1,
            "the other one not polled"
        );
        assert_eq!(polls_b.load(Ordering::SeqCst), 2);
        assert!(!set.is_empty());
        assert!(Pin::new(&mut set).poll_next(&mut cx).is_pending());
        tx_a.send(()).unwrap();
        assert_eq!(Pin::new(&mut set).poll_next(&mut cx), Poll::Ready(Some(())));
        assert!(set.is_empty());
        assert_eq!(Pin::new(&mut set).poll_next(&mut cx), Poll::Ready(None));
    }

    /// A request that wakes itself while it is polled (a yield) is polled again at
    /// the next poll, and the loop is woken for it.
    #[test]
    fn a_request_that_wakes_itself_is_polled_again() {
        let (count, waker) = loop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut set = Parked::new();
        let mut yielded = false;
        set.push(Box::pin(std::future::poll_fn(move |cx| {
            if yielded {
                return Poll::Ready(());
            }
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        })));
        assert!(Pin::new(&mut set).poll_next(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(Pin::new(&mut set).poll_next(&mut cx), Poll::Ready(Some(())));
    }

    /// The set hands every request it holds over (to run as tasks of their own).
    #[test]
    fn the_set_gives_its_requests_up() {
        let mut set = Parked::new();
        let polls = Arc::new(AtomicUsize::new(0));
        let (_tx, rx) = tokio::sync::oneshot::channel();
        set.push(request(rx, polls.clone()));
        set.push(Box::pin(async {}));
        let all: Vec<ParkedRequest> = set.into_iter().collect();
        assert_eq!(all.len(), 2);
    }
}
