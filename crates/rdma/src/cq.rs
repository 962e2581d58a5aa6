//! The completion queue: completions handed to async code without busy polling.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use crate::types::Completion;

/// A completion queue shared by a queue pair's send and receive queues.
///
/// Providers push entries with [`CompletionQueue::push`]; consumers await
/// [`CompletionQueue::next`]. When the queue pair has closed and every entry
/// (including flushed work requests) has been taken, `next` returns `None`.
/// A single consumer task is expected; with several, each entry goes to one.
#[derive(Debug, Default)]
pub struct CompletionQueue {
    inner: Mutex<CqInner>,
    closed: AtomicBool,
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

    /// Provider side: queue a completion and wake the consumer.
    pub fn push(&self, c: Completion) {
        let wakers = {
            let mut g = self.lock();
            g.entries.push_back(c);
            std::mem::take(&mut g.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Provider side: queue several completions and wake the consumer once.
    pub fn push_all(&self, cs: impl IntoIterator<Item = Completion>) {
        let wakers = {
            let mut g = self.lock();
            let before = g.entries.len();
            g.entries.extend(cs);
            if g.entries.len() == before {
                return;
            }
            std::mem::take(&mut g.wakers)
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
