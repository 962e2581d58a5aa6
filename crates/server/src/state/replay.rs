//! Create replay detection ([MS-SMB2] 3.3.5.9.10): a CREATE with a DH2Q context is
//! remembered by (ClientGuid, CreateGuid) while it runs and, once it succeeded, for as
//! long as its open lives. A client that lost the response (a dropped connection, a
//! failover) replays the CREATE with SMB2_FLAGS_REPLAY_OPERATION and gets the open it
//! already has instead of a second one (or a sharing violation with itself).
//!
//! The cache holds no opens: an entry names a FileId, and whoever finds it checks that
//! the open still exists ([`ReplayCache::reserve`] callers); stale entries are
//! replaced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::FileId;

/// (ClientGuid, CreateGuid).
pub type ReplayKey = ([u8; 16], [u8; 16]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// A CREATE with this CreateGuid is still running (identified by its token).
    Pending(u64),
    /// It succeeded: the open and the CreateAction it answered.
    Done(FileId, u32),
}

/// What [`ReplayCache::reserve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Nothing (or a stale entry, forgotten): this CREATE now holds the CreateGuid.
    Reserved(u64),
    /// Another CREATE with this CreateGuid is still running.
    Pending,
    /// An open was created with this CreateGuid: its FileId and CreateAction.
    Done(FileId, u32),
}

/// Most entries kept before stale ones are swept.
const SWEEP_AT: usize = 16_384;

/// The server's create replay cache.
#[derive(Debug, Default)]
pub struct ReplayCache {
    map: Mutex<HashMap<ReplayKey, Entry>>,
    next_token: AtomicU64,
}

impl ReplayCache {
    /// Looks `key` up; reserves it for the caller when it is free. `alive` says whether
    /// the open of a finished entry still exists (otherwise the entry is stale).
    pub fn reserve(&self, key: ReplayKey, alive: impl Fn(FileId) -> bool) -> Lookup {
        let mut m = self.map.lock();
        match m.get(&key) {
            Some(Entry::Pending(_)) => return Lookup::Pending,
            Some(Entry::Done(id, action)) if alive(*id) => return Lookup::Done(*id, *action),
            _ => {}
        }
        if m.len() >= SWEEP_AT {
            m.retain(|_, e| match e {
                Entry::Pending(_) => true,
                Entry::Done(id, _) => alive(*id),
            });
        }
        let token = self.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        m.insert(key, Entry::Pending(token));
        Lookup::Reserved(token)
    }

    /// The reserved CREATE succeeded.
    pub fn complete(&self, key: ReplayKey, token: u64, id: FileId, action: u32) {
        let mut m = self.map.lock();
        if m.get(&key) == Some(&Entry::Pending(token)) {
            m.insert(key, Entry::Done(id, action));
        }
    }

    /// The reserved CREATE failed (or was cancelled): the CreateGuid is free again.
    pub fn release(&self, key: ReplayKey, token: u64) {
        let mut m = self.map.lock();
        if m.get(&key) == Some(&Entry::Pending(token)) {
            m.remove(&key);
        }
    }

    /// Number of entries (tests).
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A reservation held by a running CREATE; released on drop unless completed.
pub struct Reservation {
    cache: Arc<super::ServerState>,
    key: ReplayKey,
    token: u64,
    done: bool,
}

impl Reservation {
    /// Wraps reservation `token` of `key` in the replay cache of `server`.
    pub fn new(server: Arc<super::ServerState>, key: ReplayKey, token: u64) -> Reservation {
        Reservation {
            cache: server,
            key,
            token,
            done: false,
        }
    }

    /// The CREATE succeeded with open `id` and CreateAction `action`.
    pub fn complete(mut self, id: FileId, action: u32) {
        self.cache.replay.complete(self.key, self.token, id, action);
        self.done = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.done {
            self.cache.replay.release(self.key, self.token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: ReplayKey = ([1; 16], [2; 16]);
    const ID: FileId = FileId {
        persistent: 7,
        volatile: 7,
    };

    #[test]
    fn reserve_pending_done_stale() {
        let c = ReplayCache::default();
        let Lookup::Reserved(t) = c.reserve(K, |_| true) else {
            panic!("not reserved");
        };
        assert_eq!(c.reserve(K, |_| true), Lookup::Pending);
        // Only the holder's token completes it.
        c.complete(K, t + 1, ID, 2);
        assert_eq!(c.reserve(K, |_| true), Lookup::Pending);
        c.complete(K, t, ID, 2);
        assert_eq!(c.reserve(K, |_| true), Lookup::Done(ID, 2));
        // The open went away: the entry is stale and the caller gets it.
        assert!(matches!(c.reserve(K, |_| false), Lookup::Reserved(_)));
    }

    #[test]
    fn release_frees_the_guid() {
        let c = ReplayCache::default();
        let Lookup::Reserved(t) = c.reserve(K, |_| true) else {
            panic!("not reserved");
        };
        c.release(K, t + 1);
        assert_eq!(c.reserve(K, |_| true), Lookup::Pending);
        c.release(K, t);
        assert!(c.is_empty());
    }
}
