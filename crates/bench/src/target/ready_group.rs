//! The I/O sets ([`WokenSet`]) whose futures one runtime drives ([`ReadyGroup`]).

use std::future::Future;
use std::sync::Mutex;

use smbx_task::{WokenSet, WokenWatch};

/// The I/O sets whose futures one runtime drives (the queues of the worker threads that
/// one OS thread runs): a queue waiting for its own I/Os stops once another set has
/// futures woken, so that the OS thread reaps those instead of sleeping on them.
#[derive(Default)]
pub(crate) struct ReadyGroup(Mutex<Vec<WokenWatch>>);

impl ReadyGroup {
    /// Adds `set` to the group.
    pub(crate) fn join<F: Future>(&self, set: &WokenSet<F>) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|w| !w.is_gone());
        m.push(set.watch());
    }

    /// Whether a set of the group other than `set` has futures woken since their last poll.
    pub(crate) fn others_ready<F: Future>(&self, set: &WokenSet<F>) -> bool {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().any(|w| !w.watches(set) && w.has_woken())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

    /// A future woken after it finished (a waker it left fires later) does not leave
    /// an empty set looking ready to its group once the set is polled.
    #[test]
    fn a_wake_after_the_last_future_finished_is_forgotten() {
        let mut cx = Context::from_waker(Waker::noop());
        let group = ReadyGroup::default();
        let mut set: WokenSet<Boxed<u32>> = WokenSet::new();
        let other: WokenSet<Boxed<u32>> = WokenSet::new();
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
    fn a_group_tells_a_set_when_another_has_woken_futures() {
        let mut cx = Context::from_waker(Waker::noop());
        let group = ReadyGroup::default();
        let mut a: WokenSet<Boxed<u32>> = WokenSet::new();
        let mut b: WokenSet<Boxed<u32>> = WokenSet::new();
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
        // B's response is seen from A, not from B itself.
        tx_b.send(7).unwrap();
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
