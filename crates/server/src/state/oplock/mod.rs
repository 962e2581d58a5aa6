//! Oplocks and leases ([MS-SMB2] 3.3.1.4, 3.3.4.6, 3.3.4.7, 3.3.5.9, 3.3.5.22;
//! [MS-FSA] 2.1.5.17): what a CREATE is granted, and which oplocks and leases of other
//! opens of the same file a new open, a write or a rename breaks.
//!
//! Three parts:
//! - [`core`]: the rules, without I/O. [`Holders`] is a file's oplock and lease
//!   state; its functions return typed [`Decision`]s (breaks to send, whether to wait,
//!   whether waiters wake) and [`Grant`]s. Unit tests drive it without sockets.
//! - [`lease`]: one lease and its state, [`LeaseStatus`] (`Held`, or `Breaking { from,
//!   to, required }`), with the state diagram.
//! - this module: [`FileOplocks`], the core behind each [`SharedFile`]'s lock with
//!   the signal waiting operations sleep on, and [`LeaseIndex`], the server's leases by
//!   (ClientGuid, LeaseKey) for acknowledgments, which carry no FileId.
//!
//! Delivery (turning [`Break`]s into OPLOCK_BREAK messages on the right connection,
//! and the waits of CREATE and rename with the `oplock break timeout`) lives outside
//! `state/`, in the crate's `breaks` module: state never reaches connections.
//!
//! CREATE calls, in order: `breaks::break_conflicting` before its share-mode check,
//! then [`grant`] once the open is registered. The OPLOCK_BREAK handler calls
//! [`FileOplocks::ack_oplock`] / `breaks::acknowledge_lease_break`; closing an open
//! calls [`FileOplocks::release`].
//!
//! Lease breaks go to the client's oldest connection (leases belong to the
//! ClientGuid); oplock breaks to the holder's connection.

pub mod core;
pub mod lease;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use smbx_wire::oplock::{LeaseContext, LeaseState, OplockLevel};
use smbx_wire::NtStatus;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

pub use self::core::{
    is_lease_stat_open, is_stat_open, Break, Conflict, Decision, Grant, Holders, OpenAccess,
    OplockRequest, Requester, Target,
};
pub use self::lease::{valid_lease_state, LeaseStatus};
use super::file::SharedFile;
use super::{FileId, ServerState};

/// Oplocks and leases of one file: the [`core`] state under a lock, and the signal
/// that operations waiting for acknowledgments sleep on.
#[derive(Debug, Default)]
pub struct FileOplocks {
    holders: Mutex<Holders>,
    changed: Notify,
}

impl FileOplocks {
    /// Runs a core decision under the lock and wakes the waiters if it says so;
    /// returns it for delivery.
    pub fn decide(&self, f: impl FnOnce(&mut Holders) -> Decision) -> Decision {
        let d = f(&mut self.holders.lock());
        if d.wake {
            self.changed.notify_waiters();
        }
        d
    }

    /// Reads the core state under the lock.
    pub fn read<R>(&self, f: impl FnOnce(&Holders) -> R) -> R {
        f(&self.holders.lock())
    }

    /// A future resolved by the next change that can end a wait (an acknowledgment,
    /// a close, a timeout). Enable it before deciding, so no change is missed.
    pub fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// Forgets the oplock / lease membership of an open (it closed) and wakes waiters.
    pub fn release(&self, entry_id: u64) {
        let _ = self.decide(|h| h.release(entry_id));
    }

    /// The oplock level currently held by an open (NONE if none).
    pub fn oplock_level(&self, entry_id: u64) -> OplockLevel {
        self.read(|h| h.oplock_level(entry_id))
    }

    /// The oplock level an open holds as a CREATE response says it: LEASE when it
    /// belongs to a lease, else its oplock level. The one record of what was granted.
    pub fn granted_level(&self, entry_id: u64) -> OplockLevel {
        self.read(|h| match h.lease_of(entry_id) {
            Some(_) => OplockLevel::LEASE,
            None => h.oplock_level(entry_id),
        })
    }

    /// The lease state of (guid, key) on this file, if such a lease exists.
    pub fn lease_state(&self, guid: [u8; 16], key: [u8; 16]) -> Option<LeaseState> {
        self.read(|h| h.lease_state(guid, key))
    }

    /// The lease open `entry_id` belongs to, as a response context.
    pub fn lease_of(&self, entry_id: u64) -> Option<LeaseContext> {
        self.read(|h| h.lease_of(entry_id))
    }

    /// Whether a break of the oplock or lease held by open `entry_id` awaits its
    /// acknowledgment.
    pub fn breaking(&self, entry_id: u64) -> bool {
        self.read(|h| h.breaking(entry_id))
    }

    /// Acknowledges an oplock break for `entry_id` ([MS-SMB2] 3.3.5.22.1); returns the
    /// level now held.
    pub fn ack_oplock(&self, entry_id: u64, level: OplockLevel) -> Result<OplockLevel, NtStatus> {
        let mut result = Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
        let _ = self.decide(|h| {
            let (r, d) = h.ack_oplock(entry_id, level);
            result = r;
            d
        });
        result
    }

    /// Acknowledges a lease break ([MS-SMB2] 3.3.5.22.2): the state acknowledged and
    /// the next step of the break to deliver, if any.
    pub fn ack_lease(
        &self,
        guid: [u8; 16],
        key: [u8; 16],
        state: LeaseState,
    ) -> Result<(LeaseState, Vec<Break>), NtStatus> {
        let mut acked = Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        let d = self.decide(|h| match h.ack_lease(guid, key, state) {
            Ok((s, d)) => {
                acked = Ok(s);
                d
            }
            Err(e) => {
                acked = Err(e);
                Decision::default()
            }
        });
        acked.map(|s| (s, d.breaks))
    }

    /// A durable open was reclaimed on another connection / session: its oplock and
    /// lease breaks go there now.
    pub fn rebind(&self, entry_id: u64, conn_id: u64, session_id: u64) {
        self.holders.lock().rebind(entry_id, conn_id, session_id);
    }
}

/// Server-wide index of leases by (ClientGuid, LeaseKey), for LEASE_BREAK
/// acknowledgments (which carry no FileId).
#[derive(Default)]
pub struct LeaseIndex {
    map: Mutex<HashMap<core::LeaseId, Weak<SharedFile>>>,
}

impl LeaseIndex {
    fn insert(&self, guid: [u8; 16], key: [u8; 16], file: &Arc<SharedFile>) {
        let mut m = self.map.lock();
        if m.len() > 100_000 {
            m.retain(|_, w| w.strong_count() > 0);
        }
        m.insert((guid, key), Arc::downgrade(file));
    }

    /// The file a lease belongs to, if it is still open.
    pub fn get(&self, guid: [u8; 16], key: [u8; 16]) -> Option<Arc<SharedFile>> {
        let mut m = self.map.lock();
        match m.get(&(guid, key)).and_then(Weak::upgrade) {
            Some(f) => Some(f),
            None => {
                m.remove(&(guid, key));
                None
            }
        }
    }
}

/// Whether the CREATE asks for a lease whose (ClientGuid, LeaseKey) is held on an
/// open file (then [`check_lease_key`] must see which file is being opened).
pub fn lease_key_in_use(server: &ServerState, new: &Requester, req: &OplockRequest) -> bool {
    match req.lease.filter(|_| req.level == OplockLevel::LEASE) {
        Some(ctx) => server
            .leases
            .get(new.client_guid, ctx.lease_key)
            .is_some_and(|f| {
                f.oplocks
                    .lease_state(new.client_guid, ctx.lease_key)
                    .is_some()
            }),
        None => false,
    }
}

/// A lease key names one file per client: asking for a lease with a (ClientGuid,
/// LeaseKey) that is held on another, still open file is INVALID_PARAMETER
/// ([MS-SMB2] 3.3.5.9.8; smb2.lease.request). `file` is the existing file being
/// opened (None: it does not exist yet).
pub fn check_lease_key(
    server: &ServerState,
    new: &Requester,
    req: &OplockRequest,
    file: Option<&super::file::FileKey>,
) -> Result<(), NtStatus> {
    let Some(ctx) = req.lease.filter(|_| req.level == OplockLevel::LEASE) else {
        return Ok(());
    };
    match server.leases.get(new.client_guid, ctx.lease_key) {
        Some(f)
            if Some(&f.key) != file
                && f.oplocks
                    .lease_state(new.client_guid, ctx.lease_key)
                    .is_some() =>
        {
            Err(NtStatus::INVALID_PARAMETER)
        }
        _ => Ok(()),
    }
}

/// The last step of CREATE's oplock part, after the open is registered as `entry_id`
/// in `file`: the oplock level or lease state it gets ([`Holders::grant`]); a new
/// lease joins the server's [`LeaseIndex`].
pub fn grant(
    server: &ServerState,
    file: &Arc<SharedFile>,
    new: &Requester,
    entry_id: u64,
    file_id: FileId,
    is_dir: bool,
    req: &OplockRequest,
) -> Grant {
    let opens: Vec<OpenAccess> = file
        .opens()
        .iter()
        .map(|o| OpenAccess {
            entry_id: o.entry_id,
            access: o.access,
        })
        .collect();
    let (g, new_lease) = file
        .oplocks
        .holders
        .lock()
        .grant(new, entry_id, file_id, is_dir, req, &opens);
    if let Some((guid, key)) = new_lease {
        server.leases.insert(guid, key, file);
    }
    g
}
