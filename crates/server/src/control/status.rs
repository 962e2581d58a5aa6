//! `smbx status`: a snapshot of sessions, channels, tree connects, opens and
//! byte-range locks, built from the server's state tables. The JSON field names
//! are part of the interface (README "Status"): add fields, never rename them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use smbx_wire::oplock::{LeaseFlags, LeaseState, OplockLevel};
use smbx_wire::{AccessMask, ShareAccess};

use crate::state::session::SessionPhase;
use crate::state::{FileOpen, Open, ServerState, Session};

/// Most opens and most locks one snapshot lists (the totals still count all).
pub const MAX_LISTED: usize = 100_000;

/// Everything `smbx status` shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The server process.
    pub server: ServerInfo,
    /// Authenticated sessions, by session id.
    pub sessions: Vec<SessionStatus>,
    /// Tree connects of those sessions.
    pub trees: Vec<TreeStatus>,
    /// File and directory opens (named pipes are not listed).
    pub opens: Vec<OpenStatus>,
    /// Byte-range locks of those opens.
    pub locks: Vec<LockStatus>,
    /// Counts.
    pub totals: Totals,
}

/// The server process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Process id.
    pub pid: u32,
    /// smbx version.
    pub version: String,
    /// The configuration file in force (`null` in zero configuration).
    pub config_file: Option<String>,
    /// Reloads so far (0: the configuration the server started with).
    pub config_generation: u64,
    /// When the control socket started serving, seconds since the Unix epoch.
    pub started_unix: u64,
    /// The control socket's path.
    pub control_socket: String,
}

/// One session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// SessionId.
    pub session_id: u64,
    /// User name (empty for an anonymous session).
    pub user: String,
    /// The domain the client named.
    pub domain: String,
    /// Logged on as the guest account.
    pub guest: bool,
    /// Anonymous (null) session.
    pub anonymous: bool,
    /// Client address (ip:port) of the session's first channel.
    pub client: String,
    /// Dialect, such as "3.1.1".
    pub dialect: String,
    /// Signing.
    pub signing: SigningStatus,
    /// Encryption.
    pub encryption: EncryptionStatus,
    /// Every established channel: the creating connection and any bound to it.
    pub channels: Vec<ChannelStatus>,
}

/// A session's signing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SigningStatus {
    /// "HMAC-SHA256", "AES-128-CMAC" or "AES-128-GMAC"; `null` without a session
    /// key (guest, anonymous).
    pub algorithm: Option<String>,
    /// Every request must be signed.
    pub required: bool,
}

/// A session's encryption.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EncryptionStatus {
    /// "AES-128-CCM", "AES-128-GCM", "AES-256-CCM" or "AES-256-GCM" when the session
    /// can encrypt (3.x with a session key), else `null`.
    pub cipher: Option<String>,
    /// The server requires encryption of the whole session.
    pub required: bool,
    /// Messages of this session are encrypted: required, or the client has sent
    /// encrypted requests.
    pub active: bool,
}

/// One channel (connection) of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelStatus {
    /// The server's connection id.
    pub connection_id: u64,
    /// "tcp" or "smbdirect".
    pub transport: String,
    /// The server's address of the connection (ip:port).
    pub local: String,
    /// The client's address (ip:port).
    pub client: String,
}

/// One tree connect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeStatus {
    /// SessionId.
    pub session_id: u64,
    /// TreeId.
    pub tree_id: u32,
    /// Share name.
    pub share: String,
    /// The share's directory (empty for IPC$).
    pub path: String,
    /// Client address of the session.
    pub client: String,
    /// Messages on this tree must be encrypted (the share's `server smb encrypt`).
    pub encrypted: bool,
    /// The share is no longer in the configuration (removed by a reload): the tree
    /// keeps working until it is disconnected.
    pub share_removed: bool,
}

/// One file or directory open.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenStatus {
    /// FileId as "persistent:volatile" in hexadecimal.
    pub file_id: String,
    /// SessionId.
    pub session_id: u64,
    /// TreeId.
    pub tree_id: u32,
    /// Connection the open was made on.
    pub connection_id: u64,
    /// Share name.
    pub share: String,
    /// Path relative to the share root, as the client named it.
    pub path: String,
    /// A directory.
    pub directory: bool,
    /// Granted access mask.
    pub access_mask: u32,
    /// "RDWR", "RDONLY", "WRONLY" or "NONE": data access the mask grants.
    pub access: String,
    /// ShareAccess mask.
    pub share_access_mask: u32,
    /// The sharing allowed to other opens: letters R, W, D, or "NONE".
    pub share_access: String,
    /// "none", "level2", "exclusive", "batch" or "lease".
    pub oplock: String,
    /// The lease, when `oplock` is "lease".
    pub lease: Option<LeaseStatus>,
    /// Durable handle, if one was granted.
    pub durable: Option<DurableStatus>,
}

/// A lease.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseStatus {
    /// LeaseKey in hexadecimal (32 digits, wire byte order).
    pub key: String,
    /// Lease state: letters R, W, H (in that order), or "NONE".
    pub state: String,
    /// Lease version (1 or 2).
    pub version: u8,
    /// A break awaits the client's acknowledgment.
    pub breaking: bool,
}

/// A durable handle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DurableStatus {
    /// 1 (DHnQ) or 2 (DH2Q).
    pub version: u8,
    /// How long the open survives its connection's loss, in milliseconds.
    pub timeout_ms: u32,
}

/// One byte-range lock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockStatus {
    /// FileId of the owning open ("persistent:volatile", hexadecimal).
    pub file_id: String,
    /// SessionId of the owning open.
    pub session_id: u64,
    /// Share name.
    pub share: String,
    /// Path of the file.
    pub path: String,
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// "exclusive" or "shared".
    pub kind: String,
}

/// Counts over the whole server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Live connections (with or without a session).
    pub connections: usize,
    /// Authenticated sessions.
    pub sessions: usize,
    /// Channels of those sessions.
    pub channels: usize,
    /// Tree connects.
    pub trees: usize,
    /// File and directory opens.
    pub opens: usize,
    /// Durable opens whose connection is gone, kept for a reconnect.
    pub disconnected_durable_opens: usize,
    /// Byte-range locks.
    pub locks: usize,
}

/// Builds a snapshot of `server`. Each table is read under its own lock, briefly;
/// the snapshot is consistent per object, not across tables.
pub fn snapshot(server: &ServerState, info: ServerInfo) -> Status {
    let mut st = Status {
        server: info,
        ..Status::default()
    };
    st.totals.connections = server.connections.alive();
    let mut sessions = server.sessions.all();
    sessions.sort_by_key(|s| s.id);
    // Session id -> (session, client address) for the opens and locks below.
    let mut by_id: HashMap<u64, (Arc<Session>, String)> = HashMap::new();
    for s in sessions {
        let Some(row) = session_row(server, &s) else {
            continue;
        };
        let mut trees: Vec<_> = s.trees.lock().trees.values().cloned().collect();
        trees.sort_by_key(|t| t.id);
        for t in trees {
            let current = server.find_share(&t.share.name);
            st.trees.push(TreeStatus {
                session_id: s.id,
                tree_id: t.id,
                share: t.share.name.clone(),
                path: if t.share.is_ipc() {
                    String::new()
                } else {
                    t.share.config.path.display().to_string()
                },
                client: row.client.clone(),
                encrypted: t.encrypt_data,
                share_removed: current.is_none(),
            });
        }
        st.totals.channels += row.channels.len();
        by_id.insert(s.id, (s.clone(), row.client.clone()));
        st.sessions.push(row);
    }
    st.totals.sessions = st.sessions.len();
    st.totals.trees = st.trees.len();

    let mut opens = server.opens.find_where(|o| o.as_file().is_some());
    opens.sort_by_key(|o| (o.session_id, o.file_id.volatile));
    st.totals.opens = opens.len();
    st.totals.disconnected_durable_opens = server.opens.disconnected_len();
    for o in &opens {
        let Some(f) = o.as_file() else { continue };
        let share = by_id
            .get(&o.session_id)
            .and_then(|(s, _)| s.tree(o.tree_id))
            .map(|t| t.share.name.clone())
            .unwrap_or_default();
        if st.opens.len() < MAX_LISTED {
            st.opens.push(open_row(o, f, &share));
        }
        for l in f.file.locks.snapshot() {
            if l.owner != f.entry_id {
                continue;
            }
            st.totals.locks += 1;
            if st.locks.len() < MAX_LISTED {
                st.locks.push(LockStatus {
                    file_id: file_id(o),
                    session_id: o.session_id,
                    share: share.clone(),
                    path: f.path.clone(),
                    offset: l.offset,
                    length: l.length,
                    kind: if l.exclusive { "exclusive" } else { "shared" }.into(),
                });
            }
        }
    }
    st
}

/// The row of a valid session, or `None` for one still logging on or ending.
fn session_row(server: &ServerState, s: &Session) -> Option<SessionStatus> {
    let (user, signing, encryption, conn_ids) = {
        let g = s.state.lock();
        if g.phase != SessionPhase::Valid {
            return None;
        }
        let user = g.user.clone().unwrap_or_default();
        let keyed = g.security.keys.can_sign();
        let signing = SigningStatus {
            algorithm: g
                .security
                .signing_algorithm
                .filter(|_| keyed)
                .map(|a| a.name().to_string()),
            required: g.signing_required,
        };
        let cipher = g.security.keys.cipher().map(|c| c.name().to_string());
        let encryption = EncryptionStatus {
            cipher,
            required: g.encrypt_data,
            active: g.encrypt_data || s.sealed.load(Ordering::Relaxed),
        };
        let ids: Vec<u64> = g
            .security
            .channels
            .iter()
            .filter(|c| c.established)
            .map(|c| c.conn_id)
            .collect();
        (user, signing, encryption, ids)
    };
    let channels: Vec<ChannelStatus> = conn_ids
        .iter()
        .filter_map(|id| server.connection(*id))
        .map(|c| ChannelStatus {
            connection_id: c.id,
            transport: c.transport().label().into(),
            local: c.local.to_string(),
            client: c.peer.to_string(),
        })
        .collect();
    Some(SessionStatus {
        session_id: s.id,
        user: user.name,
        domain: user.domain,
        guest: user.guest,
        anonymous: user.anonymous,
        client: channels
            .first()
            .map(|c| c.client.clone())
            .unwrap_or_default(),
        dialect: s.dialect.name().into(),
        signing,
        encryption,
        channels,
    })
}

fn file_id(o: &Open) -> String {
    format!("{:x}:{:x}", o.file_id.persistent, o.file_id.volatile)
}

fn open_row(o: &Open, f: &FileOpen, share: &str) -> OpenStatus {
    let lease = f.file.oplocks.lease_of(f.entry_id);
    let level = f.file.oplocks.oplock_level(f.entry_id);
    let oplock = match (&lease, level) {
        (Some(_), _) => "lease",
        (None, OplockLevel::II) => "level2",
        (None, OplockLevel::EXCLUSIVE) => "exclusive",
        (None, OplockLevel::BATCH) => "batch",
        (None, _) => "none",
    };
    let durable = f.durable.lock().as_ref().map(|d| DurableStatus {
        version: if d.v2 { 2 } else { 1 },
        timeout_ms: d.timeout_ms,
    });
    OpenStatus {
        file_id: file_id(o),
        session_id: o.session_id,
        tree_id: o.tree_id,
        connection_id: o.conn_id,
        share: share.to_string(),
        path: f.path.clone(),
        directory: f.is_dir,
        access_mask: f.access.bits(),
        access: data_access(f.access).into(),
        share_access_mask: f.share_access.bits(),
        share_access: share_letters(f.share_access),
        oplock: oplock.into(),
        lease: lease.map(|l| LeaseStatus {
            key: hex(&l.lease_key),
            state: lease_letters(l.lease_state),
            version: l.version,
            breaking: l.lease_flags.contains(LeaseFlags::BREAK_IN_PROGRESS),
        }),
        durable,
    }
}

/// Data access as Samba's smbstatus names it.
fn data_access(a: AccessMask) -> &'static str {
    let r = a.intersects(AccessMask::FILE_READ_DATA);
    let w = a.intersects(AccessMask::FILE_WRITE_DATA | AccessMask::FILE_APPEND_DATA);
    match (r, w) {
        (true, true) => "RDWR",
        (true, false) => "RDONLY",
        (false, true) => "WRONLY",
        (false, false) => "NONE",
    }
}

fn share_letters(s: ShareAccess) -> String {
    let mut out = String::new();
    for (bit, c) in [
        (ShareAccess::FILE_SHARE_READ, 'R'),
        (ShareAccess::FILE_SHARE_WRITE, 'W'),
        (ShareAccess::FILE_SHARE_DELETE, 'D'),
    ] {
        if s.intersects(bit) {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("NONE");
    }
    out
}

/// Lease state letters in the order Samba's smbstatus writes them (R, W, H).
pub fn lease_letters(state: LeaseState) -> String {
    let mut out = String::new();
    for (bit, c) in [
        (LeaseState::READ, 'R'),
        (LeaseState::WRITE, 'W'),
        (LeaseState::HANDLE, 'H'),
    ] {
        if state.contains(bit) {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("NONE");
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters() {
        assert_eq!(lease_letters(LeaseState::RWH), "RWH");
        assert_eq!(lease_letters(LeaseState::RH), "RH");
        assert_eq!(lease_letters(LeaseState::READ), "R");
        assert_eq!(lease_letters(LeaseState::NONE), "NONE");
        assert_eq!(share_letters(ShareAccess::ALL), "RWD");
        assert_eq!(share_letters(ShareAccess::FILE_SHARE_READ), "R");
        assert_eq!(share_letters(ShareAccess(0)), "NONE");
        assert_eq!(data_access(AccessMask::FILE_GENERIC_READ), "RDONLY");
        assert_eq!(data_access(AccessMask::FILE_ALL_ACCESS), "RDWR");
        assert_eq!(data_access(AccessMask::FILE_APPEND_DATA), "WRONLY");
        assert_eq!(data_access(AccessMask::READ_CONTROL), "NONE");
    }

    #[test]
    fn json_names_are_stable() {
        let s = Status::default();
        let v = serde_json::to_value(&s).unwrap();
        for k in ["server", "sessions", "trees", "opens", "locks", "totals"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        let back: Status = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }
}
