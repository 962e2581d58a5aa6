//! Sessions ([MS-SMB2] 3.3.1.8) and the server-wide session table.

use std::sync::Arc;

use parking_lot::Mutex;
use smbx_wire::id_hash::IdMap;
use smbx_wire::Dialect;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::tree::Tree;

/// Most logons (new sessions not yet authenticated) one connection may have in
/// progress; more are refused with STATUS_INSUFFICIENT_RESOURCES.
pub const MAX_LOGONS_PER_CONNECTION: usize = 16;

/// Most logons in progress on the whole server.
pub const MAX_LOGONS: usize = 1024;

/// A logon's place in the per-connection and server-wide bounds on logons in
/// progress; released when the logon completes or fails, or the session ends.
#[derive(Debug)]
pub struct LogonSlot {
    _conn: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

impl LogonSlot {
    /// Takes a slot from both bounds, or `None` if either is exhausted.
    pub fn take(conn: &Arc<Semaphore>, server: &Arc<Semaphore>) -> Option<LogonSlot> {
        let c = conn.clone().try_acquire_owned().ok()?;
        let s = server.clone().try_acquire_owned().ok()?;
        Some(LogonSlot {
            _conn: c,
            _server: s,
        })
    }
}

/// Lifecycle of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPhase {
    /// SESSION_SETUP legs are still being exchanged.
    InProgress,
    /// Authenticated.
    Valid,
    /// Logged off or torn down; every lookup fails.
    Expired,
}

/// Who the session authenticated as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionUser {
    /// User name.
    pub name: String,
    /// Domain name.
    pub domain: String,
    /// Mapped to guest.
    pub guest: bool,
    /// Anonymous (null session).
    pub anonymous: bool,
}

/// The mutable part of a session, behind [`Session::state`].
pub struct SessionState {
    /// Lifecycle.
    pub phase: SessionPhase,
    /// The authenticated user, once valid.
    pub user: Option<SessionUser>,
    /// Whether every request must be signed (and responses are signed).
    pub signing_required: bool,
    /// Whether messages on this session must be encrypted.
    pub encrypt_data: bool,
    /// Security material (keys, signer, sealers, preauth hash, auth context).
    pub security: crate::security::SessionSecurity,
    /// Held while the first logon is in progress (see [`LogonSlot`]).
    pub logon: Option<LogonSlot>,
}

/// One session. Looked up by id per request.
pub struct Session {
    /// SessionId.
    pub id: u64,
    /// Dialect of the connection that created the session.
    pub dialect: Dialect,
    /// Mutable state; never hold the lock across an `.await`.
    pub state: Mutex<SessionState>,
    /// Tree connects of this session.
    pub trees: Mutex<TreeTable>,
    /// Lost channels whose operations still run (conn/serve.rs teardown); they are
    /// cancelled when the session ends.
    pub detached: Mutex<Vec<std::sync::Weak<dyn super::connections::ConnectionHandle>>>,
    /// The client has sent an encrypted request on this session (`smbx status`).
    pub sealed: std::sync::atomic::AtomicBool,
}

impl Session {
    /// The current phase.
    pub fn phase(&self) -> SessionPhase {
        self.state.lock().phase
    }

    /// Finds a tree connect of this session.
    pub fn tree(&self, tree_id: u32) -> Option<Arc<Tree>> {
        self.trees.lock().trees.get(&tree_id).cloned()
    }

    /// Records that a request of this session arrived encrypted.
    pub fn note_sealed(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.sealed.load(Relaxed) {
            self.sealed.store(true, Relaxed);
        }
    }

    /// The authenticated user, if any.
    pub fn user(&self) -> Option<SessionUser> {
        self.state.lock().user.clone()
    }

    /// True if `conn_id` is an established channel of this session (the creating
    /// connection, or one bound to it).
    pub fn is_bound(&self, conn_id: u64) -> bool {
        self.state.lock().security.is_bound(conn_id)
    }

    /// The connections of the session's established channels.
    pub fn channel_conns(&self) -> Vec<u64> {
        self.state
            .lock()
            .security
            .channels
            .iter()
            .filter(|c| c.established)
            .map(|c| c.conn_id)
            .collect()
    }

    /// Removes the channel of `conn_id` (its connection went away or its binding
    /// failed). Returns how many established channels remain, or `None` if
    /// `conn_id` had no channel.
    pub fn remove_channel(&self, conn_id: u64) -> Option<usize> {
        let mut st = self.state.lock();
        let ch = &mut st.security.channels;
        let before = ch.len();
        ch.retain(|c| c.conn_id != conn_id);
        (ch.len() != before).then(|| ch.iter().filter(|c| c.established).count())
    }
}

/// The tree connects of one session.
#[derive(Default)]
pub struct TreeTable {
    /// Trees by TreeId (ids this server assigns: hashed with one multiplication).
    pub trees: IdMap<u32, Arc<Tree>>,
    next_id: u32,
}

impl TreeTable {
    /// Allocates an unused, non-zero TreeId that is not 0xFFFFFFFF.
    pub fn alloc_id(&mut self) -> u32 {
        loop {
            self.next_id = self.next_id.wrapping_add(1);
            let id = self.next_id;
            if id != 0 && id != u32::MAX && !self.trees.contains_key(&id) {
                return id;
            }
        }
    }
}

/// All sessions of the server, by SessionId.
#[derive(Default)]
pub struct SessionTable {
    /// By the ids this server assigns (hashed with one multiplication).
    sessions: Mutex<IdMap<u64, Arc<Session>>>,
}

impl SessionTable {
    /// Creates a session in the InProgress phase with a fresh random id. Ids fit in 32
    /// bits (as Samba's): some clients keep them in 32-bit variables (smb2.session-id).
    pub fn create(
        &self,
        dialect: Dialect,
        conn_id: u64,
        security: crate::security::SessionSecurity,
        logon: LogonSlot,
    ) -> Arc<Session> {
        let mut map = self.sessions.lock();
        let id = loop {
            let id: u64 = u64::from(rand::random::<u32>());
            if id != 0 && !map.contains_key(&id) {
                break id;
            }
        };
        let mut security = security;
        security
            .channels
            .push(crate::security::Channel::primary(conn_id));
        let s = Arc::new(Session {
            id,
            dialect,
            state: Mutex::new(SessionState {
                phase: SessionPhase::InProgress,
                user: None,
                signing_required: false,
                encrypt_data: false,
                security,
                logon: Some(logon),
            }),
            trees: Mutex::new(TreeTable::default()),
            detached: Mutex::new(Vec::new()),
            sealed: std::sync::atomic::AtomicBool::new(false),
        });
        map.insert(id, s.clone());
        s
    }

    /// Finds a session by id.
    pub fn get(&self, id: u64) -> Option<Arc<Session>> {
        self.sessions.lock().get(&id).cloned()
    }

    /// Removes a session, marks it expired and returns it (its trees are left for the
    /// caller to tear down).
    pub fn remove(&self, id: u64) -> Option<Arc<Session>> {
        let s = self.sessions.lock().remove(&id)?;
        {
            let mut st = s.state.lock();
            st.phase = SessionPhase::Expired;
            st.logon = None;
        }
        // What still runs on lost channels ends with the session.
        for c in s.detached.lock().drain(..).filter_map(|w| w.upgrade()) {
            c.cancel_pending(Some(id));
        }
        Some(s)
    }

    /// Every session (a copy of the table; `smbx status`).
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.sessions.lock().values().cloned().collect()
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// True if there are no sessions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
