//! Server-wide state: sessions, tree connects and opens, each resolved by id through
//! a table. Handlers look objects up per request and never keep a lock across an
//! `.await`; an `Arc` they hold stays valid memory but may be marked closed by the
//! time they use it, so state changes are re-checked under the object's lock.

pub mod acl;
pub mod channel_seq;
pub mod connections;
pub mod file;
pub mod locks;
pub mod notify;
pub mod open;
pub mod oplock;
pub mod policy;
pub mod posix_sd;
pub mod replay;
pub mod session;
pub mod settings;
pub mod share;
pub mod tree;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smbx_config::Config;
use smbx_security::auth::{AuthPolicy, CredentialStore};

pub use file::FileTable;
pub use open::{FileId, FileOpen, Open, OpenKind, OpenTable, PipeOpen};
pub use session::{Session, SessionTable};
pub use settings::{LiveSettings, Settings};
pub use share::Share;
pub use tree::Tree;

/// Everything the server shares between connections.
pub struct ServerState {
    /// The configuration, shares, credential store and authentication policy in
    /// force, swapped as a whole by a reload (state/settings.rs).
    pub settings: LiveSettings,
    /// ServerGuid, stable for the lifetime of this server instance.
    pub guid: [u8; 16],
    /// Every session on every connection.
    pub sessions: SessionTable,
    /// Every open on every connection (share modes and oplocks see all of them).
    pub opens: OpenTable,
    /// Per-file state (share modes, delete-pending) keyed by (volume, file id), and the
    /// vfs share of each disk share.
    pub files: FileTable,
    /// Leases by (ClientGuid, LeaseKey), for LEASE_BREAK acknowledgments.
    pub leases: oplock::LeaseIndex,
    /// CREATEs with a DH2Q CreateGuid, for replay detection (state/replay.rs).
    pub replay: replay::ReplayCache,
    /// Live connections by id (weak: a connection owns itself through its task).
    pub connections: connections::ConnectionTable,
    /// The server-wide bound on logons in progress ([`session::MAX_LOGONS`]).
    pub logons: Arc<tokio::sync::Semaphore>,
    /// Buffers of 64 KiB to 2 MiB for received Direct-TCP frames, sealed responses
    /// and unsealed requests (a WRITE's frame lands in memory that is already there,
    /// not in fresh pages); the writer returns response buffers once written.
    pub frames: Arc<smbx_transport::BufPool>,
    /// Counters and histograms for the Prometheus endpoint (crate::metrics).
    pub metrics: crate::metrics::Metrics,
    /// Set when a graceful shutdown begins ([`crate::Server::run_until`]).
    pub shutdown: crate::shutdown::Shutdown,
    /// The addresses the SMB Direct listeners are bound to, set once they are
    /// ([`ServerState::set_direct_listening`]); FSCTL_QUERY_NETWORK_INTERFACE_INFO
    /// advertises these addresses RDMA_CAPABLE.
    direct_listening: std::sync::OnceLock<Vec<std::net::SocketAddr>>,
    next_conn_id: AtomicU64,
}

/// Idle buffers kept per size class (64 KiB … 2 MiB: at most about 32 MiB held):
/// enough for a client's usual queue of eight large WRITE requests, sealed responses
/// or unsealed requests, so none is a fresh allocation whose pages fault in.
const FRAME_POOL_PER_CLASS: usize = 8;

impl ServerState {
    /// Builds the state for `config`, loading the password database from
    /// `passdb backend`.
    pub fn new(config: Arc<Config>) -> std::io::Result<ServerState> {
        let path = config.global.passdb_backend.clone();
        let db = smbx_passdb::SharedPassDb::open(&path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot open password database {}: {e}", path.display()),
            )
        })?;
        Ok(Self::build(config, Arc::new(db), Some(path)))
    }

    /// Builds the state for `config` with an explicit credential store (tests, embedding).
    pub fn with_credentials(
        config: Arc<Config>,
        credentials: Arc<dyn CredentialStore>,
    ) -> ServerState {
        Self::build(config, credentials, None)
    }

    fn build(
        config: Arc<Config>,
        credentials: Arc<dyn CredentialStore>,
        passdb_file: Option<std::path::PathBuf>,
    ) -> ServerState {
        let mut guid = [0u8; 16];
        rand::Rng::fill(&mut rand::thread_rng(), &mut guid[..]);
        ServerState {
            settings: LiveSettings::new(Settings::build(config, credentials, passdb_file, None)),
            guid,
            sessions: SessionTable::default(),
            opens: OpenTable::default(),
            files: FileTable::default(),
            leases: oplock::LeaseIndex::default(),
            replay: replay::ReplayCache::default(),
            connections: Default::default(),
            logons: Arc::new(tokio::sync::Semaphore::new(session::MAX_LOGONS)),
            frames: Arc::new(smbx_transport::BufPool::new(FRAME_POOL_PER_CLASS)),
            metrics: crate::metrics::Metrics::default(),
            shutdown: crate::shutdown::Shutdown::default(),
            direct_listening: std::sync::OnceLock::new(),
            next_conn_id: AtomicU64::new(1),
        }
    }

    /// Records where SMB Direct listens (the first call wins; the listener makes it).
    pub fn set_direct_listening(&self, addrs: Vec<std::net::SocketAddr>) {
        let _ = self.direct_listening.set(addrs);
    }

    /// The addresses SMB Direct listens on (empty without SMB Direct).
    pub fn direct_listening(&self) -> Vec<std::net::SocketAddr> {
        self.direct_listening.get().cloned().unwrap_or_default()
    }

    /// Allocates a connection id.
    pub fn next_connection_id(&self) -> u64 {
        self.next_conn_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The configuration in force now (a connection keeps the one it started with:
    /// [`Connection::config`]).
    pub fn config(&self) -> Arc<Config> {
        self.settings.current().config.clone()
    }

    /// The shares in force now.
    pub fn shares(&self) -> Vec<Arc<Share>> {
        self.settings.current().shares.clone()
    }

    /// Where new logons find NT hashes now.
    pub fn credentials(&self) -> Arc<dyn CredentialStore> {
        self.settings.current().credentials.clone()
    }

    /// The authentication policy for new logons.
    pub fn auth_policy(&self) -> AuthPolicy {
        self.settings.current().auth_policy.clone()
    }

    /// Finds a share by name, case-insensitively, in the settings in force now.
    pub fn find_share(&self, name: &str) -> Option<Arc<Share>> {
        self.settings.current().find_share(name)
    }
}
