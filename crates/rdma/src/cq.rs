//! The completion queue: completions handed to async code without busy polling.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::types::Completion;

/// A consumer's work done where completions arrive: on the provider's own task or
/// thread (the soft-iWARP driver, the verbs completion-event poller), right after
/// it queued them, instead of a wake-up of a consumer task that would do it.
///
/// Set with [`CompletionQueue::set_handler`]. The handler takes the entries with
/// [`CompletionQueue::try_next`]; when it cannot now (its state is locked
/// elsewhere, or it is gone) it returns `false`, the entries stay queued and the
/// queue's waiters are woken as without a handler. It must not block.
pub trait CompletionHandler: Send + Sync {
    /// Completions were queued on `cq`: take them now (`true`), or leave them to
    /// the waiters (`false`).
    fn completions_ready(&self, cq: &CompletionQueue) -> bool;
}

/// A completion queue shared by a queue pair's send and receive queues.
///
/// Providers push entries with [`CompletionQueue::push`]; consumers await
/// [`CompletionQueue::next`]. When the queue pair has closed and every entry
/// (including flushed work requests) has been taken, `next` returns `None`.
/// A single consumer task is expected; with several, each entry goes to one.
/// A consumer may instead handle entries where they arrive
/// ([`CompletionQueue::set_handler`]).
#[derive(Default)]
pub struct CompletionQueue {
    inner: Mutex<CqInner>,
    closed: AtomicBool,
    handler: OnceLock<Box<dyn CompletionHandler>>,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("inner", &self.inner)
            .field("closed", &self.closed)
            .field("handler", &self.handler.get().is_some())
            .finish()
    }
}

#[derive(Debug, Default)]
struct CqInner {
    entries: VecDeque<Completion>,
    wakers: Vec<Waker>,
}

impl CompletionQueue {
    /// An empty, open completion queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wait for the next completion; `None` once the queue pair is closed and drained.
    pub async fn next(&self) -> Option<Completion> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Wait until a completion is ready (`true`) or the queue pair is closed and
    /// the queue drained (`false`), taking nothing: for consumers that take
    /// entries with [`CompletionQueue::try_next`] under a lock of their own, so
    /// that entries are handled in order even with several consumer tasks.
    pub async fn ready(&self) -> bool {
        poll_fn(|cx| self.poll_ready(cx)).await
    }

    /// Poll form of [`CompletionQueue::ready`].
    pub fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut g = self.lock();
        if !g.entries.is_empty() {
            return Poll::Ready(true);
        }
        if self.closed.load(Ordering::Acquire) {
            return Poll::Ready(false);
        }
        if !g.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            g.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Take a completion if one is ready.
    pub fn try_next(&self) -> Option<Completion> {
        self.lock().entries.pop_front()
    }

    /// Move up to `max` ready completions into `out` (verbs `ibv_poll_cq`);
    /// returns how many were moved.
    pub fn drain_into(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        let mut g = self.lock();
        let n = g.entries.len().min(max);
        out.extend(g.entries.drain(..n));
        n
    }

    /// Poll form of [`CompletionQueue::next`].
    pub fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        let mut g = self.lock();
        if let Some(c) = g.entries.pop_front() {
            return Poll::Ready(Some(c));
        }
        if self.closed.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        if !g.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            g.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Number of completions ready now.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no completion is ready now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the handler that takes completions as they are pushed, on the
    /// provider's task or thread; once per queue (`false` if one was set).
    pub fn set_handler(&self, h: Box<dyn CompletionHandler>) -> bool {
        self.handler.set(h).is_ok()
    }

    /// Provider side: queue a completion and wake the consumer (or let the
    /// handler take it).
    pub fn push(&self, c: Completion) {
        self.push_all(std::iter::once(c));
    }

    /// Provider side: queue several completions, then let the handler take them
    /// or wake the consumer once.
    pub fn push_all(&self, cs: impl IntoIterator<Item = Completion>) {
        let handler = self.handler.get();
        let wakers = {
            let mut g = self.lock();
            let before = g.entries.len();
            g.entries.extend(cs);
            if g.entries.len() == before {
                return;
            }
            match handler {
                Some(_) => None,
                None => Some(std::mem::take(&mut g.wakers)),
            }
        };
        let wakers = match (wakers, handler) {
            (Some(w), _) => w,
            (None, Some(h)) if h.completions_ready(self) => return,
            (None, _) => std::mem::take(&mut self.lock().wakers),
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Provider side: mark the queue closed (after pushing the flushed entries).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let wakers = std::mem::take(&mut self.lock().wakers);
        for w in wakers {
            w.wake();
        }
    }

    /// Whether the queue has been closed by its provider.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CqInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{WcOpcode, WcStatus};
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    fn wc(wr_id: u64) -> Completion {
        Completion {
            wr_id,
            opcode: WcOpcode::Recv,
            status: WcStatus::Success,
            byte_len: 0,
            invalidated: None,
            solicited: false,
        }
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Takes what it is offered while `take` holds, recording the ids.
    struct Taker {
        take: AtomicBool,
        seen: Mutex<Vec<u64>>,
    }
    impl CompletionHandler for Arc<Taker> {
        fn completions_ready(&self, cq: &CompletionQueue) -> bool {
            if !self.take.load(Ordering::SeqCst) {
                return false;
            }
            while let Some(c) = cq.try_next() {
                self.seen.lock().unwrap().push(c.wr_id);
            }
            true
        }
    }

    #[test]
    fn a_handler_takes_completions_where_they_arrive_and_wakes_nobody() {
        let cq = CompletionQueue::new();
        let t = Arc::new(Taker {
            take: AtomicBool::new(true),
            seen: Mutex::new(Vec::new()),
        });
        assert!(cq.set_handler(Box::new(t.clone())));
        assert!(
            !cq.set_handler(Box::new(t.clone())),
            "one handler per queue"
        );
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(cq.poll_ready(&mut cx).is_pending());
        cq.push(wc(1));
        cq.push_all([wc(2), wc(3)]);
        assert_eq!(*t.seen.lock().unwrap(), [1, 2, 3]);
        assert!(cq.is_empty());
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "no waiter woken");
    }

    #[test]
    fn completions_a_handler_declines_stay_queued_in_order_and_wake_the_waiters() {
        let cq = CompletionQueue::new();
        let t = Arc::new(Taker {
            take: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
        });
        cq.set_handler(Box::new(t.clone()));
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(cq.poll_ready(&mut cx).is_pending());
        cq.push(wc(1));
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "declined: the waiter is woken"
        );
        assert_eq!(cq.len(), 1);
        // Taken again: the handler gets the queued entry first, then the new one.
        t.take.store(true, Ordering::SeqCst);
        cq.push(wc(2));
        assert_eq!(*t.seen.lock().unwrap(), [1, 2]);
        assert!(cq.is_empty());
    }
}
