//! Live connections as the server's tables see them. A connection's internals
//! (sockets, negotiation, credits, the pending table) belong to the connection module
//! (conn/); state/ keeps only weak handles through [`ConnectionHandle`], the little it
//! must ask of a connection itself (cancel what still runs for a session that ends),
//! and gives the owner of the concrete type its value back
//! ([`ConnectionHandle::into_any`]).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// What state/ asks of a live connection.
pub trait ConnectionHandle: Send + Sync {
    /// Cancels the operations still pending on the connection for `session_id`, or
    /// for every session with `None`.
    fn cancel_pending(&self, session_id: Option<u64>);

    /// The connection as its own type, for the code that knows it
    /// (`Arc::downcast`).
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// Live connections by id (weak: a connection owns itself through its task).
#[derive(Default)]
pub struct ConnectionTable {
    live: Mutex<HashMap<u64, Weak<dyn ConnectionHandle>>>,
}

impl ConnectionTable {
    /// Adds connection `id`.
    pub fn insert(&self, id: u64, conn: Weak<dyn ConnectionHandle>) {
        self.live.lock().insert(id, conn);
    }

    /// Removes connection `id`.
    pub fn remove(&self, id: u64) {
        self.live.lock().remove(&id);
    }

    /// Connection `id`, if it is still alive.
    pub fn get(&self, id: u64) -> Option<Arc<dyn ConnectionHandle>> {
        self.live.lock().get(&id).and_then(Weak::upgrade)
    }

    /// Every connection still alive, by ascending id.
    pub fn all(&self) -> Vec<(u64, Arc<dyn ConnectionHandle>)> {
        let mut v: Vec<_> = self
            .live
            .lock()
            .iter()
            .filter_map(|(id, w)| w.upgrade().map(|c| (*id, c)))
            .collect();
        v.sort_by_key(|(id, _)| *id);
        v
    }

    /// Number of connections in the table (some may be ending).
    pub fn len(&self) -> usize {
        self.live.lock().len()
    }

    /// True if the table is empty.
    pub fn is_empty(&self) -> bool {
        self.live.lock().is_empty()
    }

    /// Number of connections still alive.
    pub fn alive(&self) -> usize {
        self.live
            .lock()
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Fake {
        cancelled: AtomicUsize,
    }

    impl ConnectionHandle for Fake {
        fn cancel_pending(&self, _session_id: Option<u64>) {
            self.cancelled.fetch_add(1, Ordering::Relaxed);
        }

        fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
            self
        }
    }

    #[test]
    fn holds_connections_weakly_and_gives_them_back_as_their_type() {
        let t = ConnectionTable::default();
        let a = Arc::new(Fake::default());
        let b = Arc::new(Fake::default());
        let wa: Weak<dyn ConnectionHandle> = Arc::downgrade(&a) as _;
        t.insert(2, wa);
        t.insert(1, Arc::downgrade(&b) as _);
        assert_eq!(
            t.all().iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            [1, 2]
        );
        t.get(2).unwrap().cancel_pending(None);
        assert_eq!(a.cancelled.load(Ordering::Relaxed), 1);
        let back = t
            .get(2)
            .unwrap()
            .into_any()
            .downcast::<Fake>()
            .ok()
            .unwrap();
        assert!(Arc::ptr_eq(&back, &a));
        drop(back);
        // A connection that went away is still listed until removed, but not alive.
        drop(b);
        assert_eq!((t.len(), t.alive()), (2, 1));
        assert!(t.get(1).is_none());
        t.remove(1);
        t.remove(2);
        assert!(t.is_empty());
    }
}
