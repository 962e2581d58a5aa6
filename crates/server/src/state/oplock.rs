//! Oplocks and leases ([MS-SMB2] 3.3.1.4, 3.3.4.6, 3.3.4.7, 3.3.5.9, 3.3.5.22;
//! [MS-FSA] 2.1.5.17): what a CREATE is granted, and breaking the oplocks and leases
//! of other opens of the same file when a new open conflicts with them.
//!
//! Every [`SharedFile`] carries a [`FileOplocks`]. CREATE calls, in order:
//! 1. [`break_conflicting`] before its share-mode check: conflicting holders (on any
//!    connection) get an OPLOCK_BREAK / LEASE_BREAK notification and the CREATE waits
//!    (it is already async) for their acknowledgment or [`break_timeout`];
//! 2. [`grant`] once the open is registered: the level / lease state for the new open.
//!
//! The OPLOCK_BREAK handler calls [`FileOplocks::ack_oplock`] / [`acknowledge_lease_break`].
//! Closing an open calls [`FileOplocks::release`].
//!
//! Rules implemented (the ones smbtorture's basic oplock/lease tests check):
//! - Oplocks: EXCLUSIVE and BATCH are granted only to the only open of a file; a new
//!   open of a file held EXCLUSIVE/BATCH breaks the holder to LEVEL_II (to NONE when the
//!   new open overwrites); a BATCH holder is also broken when the new open would hit a
//!   sharing violation (handle caching), an EXCLUSIVE one is not. LEVEL_II is granted
//!   when other opens exist; LEVEL_II holders are broken to NONE (no acknowledgment)
//!   only by writes and overwrites ([`break_level2`]).
//! - Leases: states R, RH, RW, RWH (others are granted as NONE); W only to the only
//!   lease on the file; a new open with another lease key breaks W (and H on a
//!   sharing conflict, everything on overwrite). Opens with the same client GUID and
//!   lease key share one lease. Version 2 leases carry an epoch incremented on every
//!   state change.
//! - A lease break in progress is not restarted by further conflicting opens: they
//!   narrow what the break must reach, and each acknowledgment that leaves more than
//!   that is answered by the next step (RWH -> RH -> R -> NONE, same epoch). An open
//!   waits only for the caching it conflicts with (W; H on a sharing conflict), or
//!   for a break in progress once it has waited before.
//! - A rename breaks handle caching of the other leases on the file and waits
//!   ([`break_handle_caching`]).
//! - Lease breaks go to the client's oldest connection (leases belong to the
//!   ClientGuid, `client_connection`); oplock breaks to the holder's connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use smbx_wire::header::FLAGS_SERVER_TO_REDIR;
use smbx_wire::oplock::{
    LeaseBreakNotification, LeaseContext, OplockBreak, LEASE_BREAK_ACK_REQUIRED,
    LEASE_FLAG_BREAK_IN_PROGRESS, LEASE_HANDLE, LEASE_NONE, LEASE_READ, LEASE_WRITE,
    OPLOCK_LEVEL_BATCH, OPLOCK_LEVEL_EXCLUSIVE, OPLOCK_LEVEL_II, OPLOCK_LEVEL_LEASE,
    OPLOCK_LEVEL_NONE,
};
use smbx_wire::AccessMask;
use smbx_wire::{Command, Header, NtStatus, Writer};
use tokio::sync::Notify;

use super::file::SharedFile;
use super::{FileId, ServerState};

static BREAK_TIMEOUT_MS: AtomicU64 = AtomicU64::new(35_000);

/// How long a CREATE waits for a break acknowledgment ([MS-SMB2] default 35 s).
pub fn break_timeout() -> Duration {
    Duration::from_millis(BREAK_TIMEOUT_MS.load(Ordering::Relaxed))
}

/// Sets the break acknowledgment timeout for this process (tests use a short one).
pub fn set_break_timeout(d: Duration) {
    BREAK_TIMEOUT_MS.store(
        d.as_millis().min(u64::MAX as u128) as u64,
        Ordering::Relaxed,
    );
}

/// Who is opening.
#[derive(Debug, Clone, Copy)]
pub struct Requester {
    /// Connection of the CREATE.
    pub conn_id: u64,
    /// Session of the CREATE.
    pub session_id: u64,
    /// ClientGuid of the connection (lease keys are per client).
    pub client_guid: [u8; 16],
}

/// What the CREATE asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct OplockRequest {
    /// RequestedOplockLevel.
    pub level: u8,
    /// The `RqLs` context when `level` is LEASE (and the dialect is 2.1+).
    pub lease: Option<LeaseContext>,
}

/// What the CREATE is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// OplockLevel for the CREATE response (LEASE when a lease context answers).
    pub level: u8,
    /// The `RqLs` response context to return, if any.
    pub lease: Option<LeaseContext>,
}

#[derive(Debug)]
struct OplockHolder {
    entry_id: u64,
    file_id: FileId,
    conn_id: u64,
    session_id: u64,
    level: u8,
    breaking_to: Option<u8>,
}

#[derive(Debug)]
struct Lease {
    client_guid: [u8; 16],
    key: [u8; 16],
    state: u32,
    /// Lease.BreakToLeaseState while a break awaits its acknowledgment: what the
    /// notification asked for.
    breaking_to: Option<u32>,
    /// What the conflicting opens need at most while the break is in progress: a
    /// further conflict narrows it without a new notification; an acknowledgment
    /// that leaves more than this starts the next step of the break.
    break_required: u32,
    epoch: u16,
    version: u8,
    parent_key: [u8; 16],
    conn_id: u64,
    session_id: u64,
    entries: Vec<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    oplocks: Vec<OplockHolder>,
    leases: Vec<Lease>,
}

/// Oplocks and leases of one file.
#[derive(Debug, Default)]
pub struct FileOplocks {
    inner: Mutex<Inner>,
    changed: Notify,
}

/// (ClientGuid, LeaseKey).
type LeaseId = ([u8; 16], [u8; 16]);

/// Server-wide index of leases by (ClientGuid, LeaseKey), for LEASE_BREAK
/// acknowledgments (which carry no FileId).
#[derive(Default)]
pub struct LeaseIndex {
    map: Mutex<HashMap<LeaseId, Weak<SharedFile>>>,
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

/// A valid lease state for `requested` (R, RH, RW, RWH), or NONE.
pub fn valid_lease_state(requested: u32) -> u32 {
    let s = requested & (LEASE_READ | LEASE_HANDLE | LEASE_WRITE);
    if s & LEASE_READ == 0 {
        LEASE_NONE
    } else {
        s
    }
}

/// A queued break notification.
struct BreakMsg {
    conn_id: u64,
    session_id: u64,
    /// For a lease break: the lease's ClientGuid (the break may go to any connection
    /// of that client, see [`client_connection`]).
    client_guid: Option<[u8; 16]>,
    body: Vec<u8>,
}

/// SMB2_LEASE_HANDLE | SMB2_LEASE_WRITE: the lease states that need an acknowledgment
/// when they are broken.
const LEASE_HW: u32 = LEASE_HANDLE | LEASE_WRITE;

impl Lease {
    /// The notification breaking this lease from its current state to `to`.
    fn break_msg(&self, to: u32) -> BreakMsg {
        let ack = self.state & LEASE_HW != 0;
        BreakMsg {
            conn_id: self.conn_id,
            session_id: self.session_id,
            client_guid: Some(self.client_guid),
            body: LeaseBreakNotification {
                new_epoch: if self.version >= 2 { self.epoch } else { 0 },
                flags: if ack { LEASE_BREAK_ACK_REQUIRED } else { 0 },
                lease_key: self.key,
                current_lease_state: self.state,
                new_lease_state: to,
            }
            .encode(),
        }
    }

    /// Breaks this lease towards `to` for a conflicting operation ([MS-SMB2] 3.3.4.7).
    /// A lease not yet breaking starts a break (new epoch): R goes to NONE at once
    /// without acknowledgment, a state with H or W waits for one. A lease already
    /// breaking only narrows what the break must reach (no new notification; the
    /// acknowledgment starts the next step, see `FileOplocks::ack_lease_step`).
    fn break_towards(&mut self, to: u32) -> Option<BreakMsg> {
        let to = to & self.state;
        if self.breaking_to.is_some() {
            self.break_required &= to;
            return None;
        }
        if to == self.state {
            return None;
        }
        if self.version >= 2 {
            self.epoch = self.epoch.wrapping_add(1);
        }
        let msg = self.break_msg(to);
        if self.state & LEASE_HW != 0 {
            self.breaking_to = Some(to);
            self.break_required = to;
        } else {
            self.state = to;
        }
        Some(msg)
    }
}

impl FileOplocks {
    /// Forgets the oplock / lease membership of an open (it closed) and wakes waiters.
    pub fn release(&self, entry_id: u64) {
        let mut st = self.inner.lock();
        st.oplocks.retain(|o| o.entry_id != entry_id);
        for l in st.leases.iter_mut() {
            l.entries.retain(|e| *e != entry_id);
        }
        st.leases.retain(|l| !l.entries.is_empty());
        drop(st);
        self.changed.notify_waiters();
    }

    /// The oplock level currently held by an open (NONE if none).
    pub fn oplock_level(&self, entry_id: u64) -> u8 {
        self.inner
            .lock()
            .oplocks
            .iter()
            .find(|o| o.entry_id == entry_id)
            .map_or(OPLOCK_LEVEL_NONE, |o| o.level)
    }

    /// The lease state of (guid, key) on this file, if such a lease exists.
    pub fn lease_state(&self, guid: [u8; 16], key: [u8; 16]) -> Option<u32> {
        self.inner
            .lock()
            .leases
            .iter()
            .find(|l| l.client_guid == guid && l.key == key)
            .map(|l| l.state)
    }

    /// The lease open `entry_id` belongs to, as a response context (key, state, epoch,
    /// parent key; BREAK_IN_PROGRESS while a break awaits its acknowledgment).
    pub fn lease_of(&self, entry_id: u64) -> Option<LeaseContext> {
        let st = self.inner.lock();
        let l = st.leases.iter().find(|l| l.entries.contains(&entry_id))?;
        Some(LeaseContext {
            version: l.version,
            lease_key: l.key,
            lease_state: l.state,
            lease_flags: if l.breaking_to.is_some() {
                LEASE_FLAG_BREAK_IN_PROGRESS
            } else {
                0
            },
            parent_lease_key: l.parent_key,
            epoch: l.epoch,
        })
    }

    /// Whether a break of the oplock or lease held by open `entry_id` awaits its
    /// acknowledgment.
    pub fn breaking(&self, entry_id: u64) -> bool {
        let st = self.inner.lock();
        st.oplocks
            .iter()
            .any(|o| o.entry_id == entry_id && o.breaking_to.is_some())
            || st
                .leases
                .iter()
                .any(|l| l.entries.contains(&entry_id) && l.breaking_to.is_some())
    }

    #[cfg(test)]
    fn any_breaking(&self) -> bool {
        self.any_breaking_except(None)
    }

    /// Whether a break other than one of lease `own` (the opener's own lease, which
    /// it does not wait for) awaits its acknowledgment.
    #[cfg(test)]
    fn any_breaking_except(&self, own: Option<LeaseId>) -> bool {
        let st = self.inner.lock();
        st.oplocks.iter().any(|o| o.breaking_to.is_some())
            || st
                .leases
                .iter()
                .any(|l| l.breaking_to.is_some() && Some((l.client_guid, l.key)) != own)
    }

    /// Times out every break in progress: the holders lose their oplock / lease
    /// entirely ([MS-SMB2] 3.3.6 oplock / lease break acknowledgment timer: NONE;
    /// a late acknowledgment is then UNSUCCESSFUL; smb2.lease.timeout).
    fn force_breaks(&self) {
        let mut st = self.inner.lock();
        for o in st.oplocks.iter_mut() {
            if o.breaking_to.take().is_some() {
                o.level = OPLOCK_LEVEL_NONE;
            }
        }
        for l in st.leases.iter_mut() {
            if l.breaking_to.take().is_some() {
                l.state = LEASE_NONE;
                l.break_required = LEASE_NONE;
            }
        }
        st.oplocks.retain(|o| o.level != OPLOCK_LEVEL_NONE);
        drop(st);
        self.changed.notify_waiters();
    }

    /// Decides which holders to break for a new open, marks them breaking, and says
    /// whether the open has to wait ([MS-SMB2] 3.3.4.6, 3.3.4.7). Returns the
    /// notifications to send and the wait decision.
    ///
    /// Leases: the open needs the holder to give up W (H when it would otherwise hit
    /// a sharing violation, everything when it overwrites). It waits while a holder
    /// still has what it needs, or (`first` false: it has waited before) while a
    /// holder's break is in progress at all, so breaks go step by step; an open whose
    /// conflict is only a lesser one (an overwrite next to RH: the holder must drop
    /// its read cache, the open does not need its handles closed) does not wait
    /// (smb2.lease.breaking3, breaking4).
    fn start_breaks(
        &self,
        new: &Requester,
        lease_key: Option<[u8; 16]>,
        c: Conflict,
        first: bool,
    ) -> (Vec<BreakMsg>, bool) {
        let mut out = Vec::new();
        let mut st = self.inner.lock();
        let mut dropped_to_none = false;
        for o in st.oplocks.iter_mut() {
            if o.breaking_to.is_some() {
                continue;
            }
            let to = match o.level {
                OPLOCK_LEVEL_BATCH | OPLOCK_LEVEL_EXCLUSIVE => {
                    if c.overwrite {
                        OPLOCK_LEVEL_NONE
                    } else if c.sharing && o.level == OPLOCK_LEVEL_EXCLUSIVE {
                        continue;
                    } else {
                        OPLOCK_LEVEL_II
                    }
                }
                OPLOCK_LEVEL_II if c.overwrite => OPLOCK_LEVEL_NONE,
                _ => continue,
            };
            out.push(BreakMsg {
                conn_id: o.conn_id,
                session_id: o.session_id,
                client_guid: None,
                body: OplockBreak {
                    oplock_level: to,
                    file_id: o.file_id,
                }
                .encode(),
            });
            if o.level == OPLOCK_LEVEL_II {
                // LEVEL_II -> NONE needs no acknowledgment.
                o.level = OPLOCK_LEVEL_NONE;
                dropped_to_none = true;
            } else {
                o.breaking_to = Some(to);
            }
        }
        if dropped_to_none {
            st.oplocks.retain(|o| o.level != OPLOCK_LEVEL_NONE);
        }
        // An oplock break in progress (this one or an earlier one) is waited for.
        let mut wait = st.oplocks.iter().any(|o| o.breaking_to.is_some());
        if c.lease_stat {
            return (out, wait);
        }
        // What the open cannot live with: W, or H when it would hit a sharing
        // violation; an overwrite takes every cache.
        let delay_mask = if c.sharing { LEASE_HANDLE } else { LEASE_WRITE };
        for l in st.leases.iter_mut() {
            if lease_key == Some(l.key) && l.client_guid == new.client_guid {
                // The opener's own lease: never broken, never waited for.
                continue;
            }
            let mut to = l.state & !delay_mask;
            if c.overwrite {
                to = LEASE_NONE;
            }
            let was_breaking = l.breaking_to.is_some();
            if l.state & !to == 0 {
                // Nothing to take away, but a break in progress may still take it.
                wait |= was_breaking;
                continue;
            }
            out.extend(l.break_towards(to));
            wait |= l.state & delay_mask != 0 && l.breaking_to.is_some();
            wait |= was_breaking && !first;
        }
        (out, wait)
    }

    /// Acknowledges an oplock break for `entry_id` ([MS-SMB2] 3.3.5.22.1); returns the
    /// level now held.
    pub fn ack_oplock(&self, entry_id: u64, level: u8) -> Result<u8, NtStatus> {
        let mut st = self.inner.lock();
        let Some(pos) = st.oplocks.iter().position(|o| o.entry_id == entry_id) else {
            return Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
        };
        let o = &mut st.oplocks[pos];
        let Some(to) = o.breaking_to else {
            return Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
        };
        let result = if level != OPLOCK_LEVEL_NONE && level != OPLOCK_LEVEL_II {
            Err(NtStatus::INVALID_PARAMETER)
        } else if level > to {
            o.level = OPLOCK_LEVEL_NONE;
            o.breaking_to = None;
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        } else {
            o.level = level;
            o.breaking_to = None;
            Ok(level)
        };
        if st.oplocks[pos].level == OPLOCK_LEVEL_NONE {
            st.oplocks.remove(pos);
        }
        drop(st);
        self.changed.notify_waiters();
        result
    }

    /// Acknowledges a lease break ([MS-SMB2] 3.3.5.22.2); returns the state
    /// acknowledged (the next step of the break, if any, is left unsent; the server
    /// path is [`acknowledge_lease_break`]).
    pub fn ack_lease(&self, guid: [u8; 16], key: [u8; 16], state: u32) -> Result<u32, NtStatus> {
        self.ack_lease_step(guid, key, state).map(|(s, _)| s)
    }

    /// Acknowledges a lease break: the lease takes the acknowledged state. If
    /// conflicting opens arrived while the break was in progress and need more than
    /// that state gives up, the break goes on by one more step (same epoch): to what
    /// they need, keeping R while H or W is still to go (acknowledgment required
    /// again), or from R to NONE at once (smb2.lease.breaking3).
    fn ack_lease_step(
        &self,
        guid: [u8; 16],
        key: [u8; 16],
        state: u32,
    ) -> Result<(u32, Option<BreakMsg>), NtStatus> {
        let mut st = self.inner.lock();
        let l = st
            .leases
            .iter_mut()
            .find(|l| l.client_guid == guid && l.key == key)
            .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
        let Some(to) = l.breaking_to else {
            return Err(NtStatus::UNSUCCESSFUL);
        };
        if state & !to != 0 {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        l.state = state;
        l.breaking_to = None;
        let required = std::mem::take(&mut l.break_required);
        let mut next = None;
        if state & !required != 0 {
            let mut step = required;
            if state & LEASE_HW != 0 {
                step |= LEASE_READ;
            }
            let step = step & state;
            next = Some(l.break_msg(step));
            if state & LEASE_HW != 0 {
                l.breaking_to = Some(step);
                l.break_required = required;
            } else {
                l.state = step;
            }
        }
        drop(st);
        self.changed.notify_waiters();
        Ok((state, next))
    }
}

/// How a new open conflicts with the existing ones.
#[derive(Debug, Clone, Copy, Default)]
struct Conflict {
    /// The open overwrites / supersedes the file.
    overwrite: bool,
    /// The open would fail the share-mode check as things stand.
    sharing: bool,
    /// The open is a lease stat open ([`is_lease_stat_open`]): leases stay.
    lease_stat: bool,
}

/// Sends an unsolicited break notification on `conn_id` (MessageId all ones,
/// SessionId 0, sealed when the holder's session requires encryption).
///
/// If that connection is gone but the session has another channel, the break goes
/// there ([MS-SMB2] 3.3.4.6).
async fn send_break(server: &Arc<ServerState>, m: BreakMsg) {
    let conn = m
        .client_guid
        .and_then(|g| client_connection(server, g, m.session_id))
        .or_else(|| server.connection(m.conn_id))
        .or_else(|| {
            let s = server.sessions.get(m.session_id)?;
            s.channel_conns()
                .into_iter()
                .find_map(|id| server.connection(id))
        });
    let Some(conn) = conn else {
        return;
    };
    let h = Header {
        command: Command::OplockBreak as u16,
        flags: FLAGS_SERVER_TO_REDIR,
        message_id: u64::MAX,
        ..Default::default()
    };
    let mut w = Writer::with_capacity(64 + m.body.len());
    h.encode(&mut w);
    w.bytes(&m.body);
    let mut msg = w.into_vec();
    if let Some(s) = server.sessions.get(m.session_id) {
        let encrypt = s.state.lock().encrypt_data;
        if encrypt && crate::security::can_encrypt(&s) {
            match crate::security::seal(&conn, m.session_id, Some(&s), msg) {
                Ok(b) => msg = b,
                Err(_) => return,
            }
        }
    }
    conn.send(msg).await;
}

/// The connection a lease break of client `guid` goes to: leases belong to the
/// client (its ClientGuid), not to one connection, so the break goes to the client's
/// oldest connection that has a session (where the lease's session is bound, when
/// that session requires encryption; smb2.lease.v2_complex1). None for an all-zero
/// ClientGuid (no client identity) or when no such connection is left.
fn client_connection(
    server: &ServerState,
    guid: [u8; 16],
    session_id: u64,
) -> Option<Arc<crate::conn::Connection>> {
    if guid == [0; 16] {
        return None;
    }
    let encrypt = server
        .sessions
        .get(session_id)
        .is_some_and(|s| s.state.lock().encrypt_data);
    let mut conns: Vec<(u64, Arc<crate::conn::Connection>)> = server
        .connections
        .lock()
        .iter()
        .filter_map(|(id, w)| w.upgrade().map(|c| (*id, c)))
        .collect();
    conns.sort_by_key(|(id, _)| *id);
    conns.into_iter().map(|(_, c)| c).find(|c| {
        if c.negotiate.lock().client_guid != guid {
            return false;
        }
        let sessions = c.sessions.lock();
        !sessions.is_empty() && (!encrypt || sessions.contains(&session_id))
    })
}

/// OPLOCK_BREAK lease acknowledgment ([MS-SMB2] 3.3.5.22.2) of lease (`guid`, `key`)
/// on `file`: returns the acknowledged state for the response. When the break has to
/// go on by another step (`FileOplocks::ack_lease_step`), that notification is
/// sent after the response.
pub fn acknowledge_lease_break(
    server: &Arc<ServerState>,
    file: &SharedFile,
    guid: [u8; 16],
    key: [u8; 16],
    state: u32,
) -> Result<u32, NtStatus> {
    let (acked, next) = file.oplocks.ack_lease_step(guid, key, state)?;
    if let Some(m) = next {
        let server = server.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            send_break(&server, m).await;
        });
    }
    Ok(acked)
}

/// Phase 1 of CREATE: breaks the oplocks and leases of other opens of `file` that
/// conflict with a new open (`access`, `share_access`, overwriting or not, with
/// `lease_key` if it asks for a lease) and waits for the acknowledgments (or
/// [`break_timeout`], after which the holders are broken unilaterally).
pub async fn break_conflicting(
    server: &Arc<ServerState>,
    file: &Arc<SharedFile>,
    new: &Requester,
    lease_key: Option<[u8; 16]>,
    access: u32,
    share_access: u32,
    overwrite: bool,
) {
    // A stat open breaks nothing; nor does an open that will fail on a delete-pending
    // file (smb2.oplock.statopen1, batch8, exclusive4, doc).
    if (is_stat_open(access) && !overwrite) || file.delete_pending() {
        return;
    }
    let lease_stat = is_lease_stat_open(access) && !overwrite;
    // An open with the lease key of a lease being broken joins it without waiting
    // (it is told BREAK_IN_PROGRESS; smb2.lease.breaking1). Every change of the
    // oplock state (an acknowledgment, a close) makes the open look again, as a
    // retried open would ([MS-SMB2] 3.3.5.9: the CREATE stays pending meanwhile).
    let deadline = tokio::time::Instant::now() + break_timeout();
    let mut first = true;
    loop {
        let n = file.oplocks.changed.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        let sharing = file.check_share(access, share_access, None).is_err();
        let conflict = Conflict {
            overwrite,
            sharing,
            lease_stat,
        };
        let (msgs, wait) = file.oplocks.start_breaks(new, lease_key, conflict, first);
        first = false;
        let sent = !msgs.is_empty();
        for m in msgs {
            send_break(server, m).await;
        }
        if sent {
            // A holder whose connection went away meanwhile cannot acknowledge: its
            // durable open is closed rather than waited for (see
            // OpenTable::preserve_durable).
            server.opens.purge_disconnected_of(file);
        }
        if !wait {
            return;
        }
        if tokio::time::timeout_at(deadline, n).await.is_err() {
            file.oplocks.force_breaks();
            return;
        }
    }
}

/// A rename of `file` through open `entry_id` ([MS-FSA] 2.1.5.14.11 with the
/// oplock break of 2.1.4.12; [MS-SMB2] 3.3.4.7): the other leases on the file give
/// up handle caching (their holders may keep closed handles open; the name is about
/// to change under them), and the rename waits for the acknowledgments, or
/// [`break_timeout`] after which the holders are broken unilaterally
/// (smb2.lease.rename_wait, v2_rename). The lease of `entry_id` itself is not broken.
pub async fn break_handle_caching(
    server: &Arc<ServerState>,
    file: &Arc<SharedFile>,
    entry_id: u64,
) {
    let deadline = tokio::time::Instant::now() + break_timeout();
    loop {
        let n = file.oplocks.changed.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        let (msgs, wait) = file.oplocks.break_handles_except(entry_id);
        for m in msgs {
            send_break(server, m).await;
        }
        if !wait {
            return;
        }
        if tokio::time::timeout_at(deadline, n).await.is_err() {
            file.oplocks.force_breaks();
            return;
        }
    }
}

impl FileOplocks {
    /// Breaks H of every lease on the file that `entry_id` does not belong to;
    /// returns the notifications and whether any of them still holds H.
    fn break_handles_except(&self, entry_id: u64) -> (Vec<BreakMsg>, bool) {
        let mut st = self.inner.lock();
        let mut out = Vec::new();
        let mut wait = false;
        for l in st.leases.iter_mut() {
            if l.entries.contains(&entry_id) || l.state & LEASE_HANDLE == 0 {
                continue;
            }
            out.extend(l.break_towards(l.state & !LEASE_HANDLE));
            wait |= l.state & LEASE_HANDLE != 0;
        }
        (out, wait)
    }
}

/// FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES | SYNCHRONIZE: the rights of a
/// "stat open", which breaks no oplock (unless it overwrites).
const STAT_OPEN_RIGHTS: u32 = AccessMask::FILE_READ_ATTRIBUTES.bits()
    | AccessMask::FILE_WRITE_ATTRIBUTES.bits()
    | AccessMask::SYNCHRONIZE.bits();

/// An open asking for no more than attribute access and SYNCHRONIZE.
pub fn is_stat_open(access: u32) -> bool {
    access & !STAT_OPEN_RIGHTS == 0
}

/// A stat open as leases see it: some of the stat-open rights or READ_CONTROL and
/// nothing else. It breaks no lease and does not keep write caching from being
/// granted (smb2.lease.statopen3, statopen4).
pub fn is_lease_stat_open(access: u32) -> bool {
    let bits = STAT_OPEN_RIGHTS | AccessMask::READ_CONTROL.bits();
    access & bits != 0 && access & !bits == 0
}

/// Breaks LEVEL_II oplocks and read leases of other opens to NONE (a write, a set
/// of the end of file, an overwrite): notifications without acknowledgment.
pub async fn break_level2(server: &Arc<ServerState>, file: &Arc<SharedFile>, writer_entry: u64) {
    let msgs = {
        let mut out = Vec::new();
        let mut st = file.oplocks.inner.lock();
        let writer_lease = st
            .leases
            .iter()
            .position(|l| l.entries.contains(&writer_entry));
        for o in st.oplocks.iter_mut() {
            // The writer's own LEVEL_II oplock breaks too (smb2.oplock.batch1, levelii500).
            if o.level == OPLOCK_LEVEL_II && o.breaking_to.is_none() {
                o.level = OPLOCK_LEVEL_NONE;
                out.push(BreakMsg {
                    conn_id: o.conn_id,
                    session_id: o.session_id,
                    client_guid: None,
                    body: OplockBreak {
                        oplock_level: OPLOCK_LEVEL_NONE,
                        file_id: o.file_id,
                    }
                    .encode(),
                });
            }
        }
        st.oplocks.retain(|o| o.level != OPLOCK_LEVEL_NONE);
        for (i, l) in st.leases.iter_mut().enumerate() {
            if Some(i) == writer_lease
                || l.breaking_to.is_some()
                || l.state & LEASE_READ == 0
                || l.state & LEASE_WRITE != 0
            {
                continue;
            }
            // R goes to NONE at once; RH must acknowledge (H is being taken away).
            out.extend(l.break_towards(LEASE_NONE));
        }
        out
    };
    for m in msgs {
        send_break(server, m).await;
    }
}

/// Whether the CREATE asks for a lease whose (ClientGuid, LeaseKey) is held on an
/// open file (then [`check_lease_key`] must see which file is being opened).
pub fn lease_key_in_use(server: &ServerState, new: &Requester, req: &OplockRequest) -> bool {
    match req.lease.filter(|_| req.level == OPLOCK_LEVEL_LEASE) {
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
    let Some(ctx) = req.lease.filter(|_| req.level == OPLOCK_LEVEL_LEASE) else {
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

/// Phase 2 of CREATE, after the open is registered as `entry_id` in `file`: the
/// oplock level or lease state it gets.
pub fn grant(
    server: &ServerState,
    file: &Arc<SharedFile>,
    new: &Requester,
    entry_id: u64,
    file_id: FileId,
    is_dir: bool,
    req: &OplockRequest,
) -> Grant {
    let opens = file.opens();
    let others = opens.iter().filter(|o| o.entry_id != entry_id).count();
    let mut st = file.oplocks.inner.lock();
    // Lease stat opens do not count against write caching, unless they hold a lease
    // of their own (smb2.lease.statopen, statopen3, statopen4).
    let own = req.lease.map(|c| (new.client_guid, c.lease_key));
    let other_lease = |e: u64| {
        st.leases
            .iter()
            .any(|l| Some((l.client_guid, l.key)) != own && l.entries.contains(&e))
    };
    let lease_others = opens
        .iter()
        .filter(|o| o.entry_id != entry_id)
        .filter(|o| !is_lease_stat_open(o.access) || other_lease(o.entry_id))
        .count();
    if req.level == OPLOCK_LEVEL_LEASE {
        let Some(ctx) = req.lease else {
            return Grant {
                level: OPLOCK_LEVEL_NONE,
                lease: None,
            };
        };
        if is_dir {
            // No directory leasing: a directory gets neither a lease nor an oplock.
            return Grant {
                level: OPLOCK_LEVEL_NONE,
                lease: None,
            };
        }
        let want = valid_lease_state(ctx.lease_state);
        let strong_oplock = st
            .oplocks
            .iter()
            .any(|o| o.level == OPLOCK_LEVEL_BATCH || o.level == OPLOCK_LEVEL_EXCLUSIVE);
        let st_oplocks_none = st.oplocks.is_empty();
        if let Some(l) = st
            .leases
            .iter_mut()
            .find(|l| l.client_guid == new.client_guid && l.key == ctx.lease_key)
        {
            // Another open joins an existing lease.
            l.entries.push(entry_id);
            let mut flags = 0;
            if l.breaking_to.is_some() {
                flags |= LEASE_FLAG_BREAK_IN_PROGRESS;
            } else {
                // An upgrade happens only to a strict superset of the current state
                // that can be held as a whole next to the other opens (W only when
                // every open of the file belongs to this lease); otherwise the lease
                // stays as it is (smb2.lease.upgrade, upgrade2, upgrade3).
                let members = opens
                    .iter()
                    .filter(|o| l.entries.contains(&o.entry_id) && o.entry_id != entry_id)
                    .filter(|o| !is_lease_stat_open(o.access))
                    .count();
                let alone = lease_others == members && st_oplocks_none;
                let superset = want != l.state && want & l.state == l.state;
                if superset && (want & LEASE_WRITE == 0 || alone) {
                    l.state = want;
                    if l.version >= 2 {
                        l.epoch = l.epoch.wrapping_add(1);
                    }
                }
            }
            // The lease keeps the version it was created with, whatever version
            // later requests use (smb2.lease.v2_epoch2, v2_epoch3).
            let resp = LeaseContext {
                version: l.version,
                lease_key: l.key,
                lease_state: l.state,
                lease_flags: flags
                    | (ctx.lease_flags & smbx_wire::oplock::LEASE_FLAG_PARENT_LEASE_KEY_SET),
                parent_lease_key: l.parent_key,
                epoch: l.epoch,
            };
            return Grant {
                level: OPLOCK_LEVEL_LEASE,
                lease: Some(resp),
            };
        }
        // Next to other opens no W; next to oplocks (broken to LEVEL_II by now) only R
        // (smb2.lease.oplock).
        let mut state = want;
        if lease_others > 0 || strong_oplock {
            state &= !LEASE_WRITE;
        }
        if st.oplocks.iter().any(|o| o.level != OPLOCK_LEVEL_NONE) {
            state &= LEASE_READ;
        }
        let epoch = if ctx.version >= 2 {
            ctx.epoch.wrapping_add(1)
        } else {
            0
        };
        // A lease granted NONE still exists: a later open with its key may upgrade it
        // (smb2.lease.upgrade2).
        {
            st.leases.push(Lease {
                client_guid: new.client_guid,
                key: ctx.lease_key,
                state,
                breaking_to: None,
                break_required: LEASE_NONE,
                epoch,
                version: ctx.version,
                parent_key: ctx.parent_lease_key,
                conn_id: new.conn_id,
                session_id: new.session_id,
                entries: vec![entry_id],
            });
            drop(st);
            server.leases.insert(new.client_guid, ctx.lease_key, file);
        }
        let resp = LeaseContext {
            version: ctx.version,
            lease_key: ctx.lease_key,
            lease_state: state,
            lease_flags: ctx.lease_flags & smbx_wire::oplock::LEASE_FLAG_PARENT_LEASE_KEY_SET,
            parent_lease_key: ctx.parent_lease_key,
            epoch,
        };
        return Grant {
            level: OPLOCK_LEVEL_LEASE,
            lease: Some(resp),
        };
    }
    let level = match req.level {
        OPLOCK_LEVEL_II | OPLOCK_LEVEL_EXCLUSIVE | OPLOCK_LEVEL_BATCH if !is_dir => {
            let strong = st
                .oplocks
                .iter()
                .any(|o| o.level == OPLOCK_LEVEL_BATCH || o.level == OPLOCK_LEVEL_EXCLUSIVE)
                || st.leases.iter().any(|l| l.state & LEASE_WRITE != 0);
            // A handle-caching lease leaves no oplock to others (smb2.lease.oplock).
            let handle_lease = st.leases.iter().any(|l| l.state & LEASE_HANDLE != 0);
            if strong || handle_lease {
                OPLOCK_LEVEL_NONE
            } else if others == 0 {
                req.level
            } else {
                OPLOCK_LEVEL_II
            }
        }
        _ => OPLOCK_LEVEL_NONE,
    };
    if level != OPLOCK_LEVEL_NONE {
        st.oplocks.push(OplockHolder {
            entry_id,
            file_id,
            conn_id: new.conn_id,
            session_id: new.session_id,
            level,
            breaking_to: None,
        });
    }
    Grant { level, lease: None }
}

impl FileOplocks {
    /// A durable open was reclaimed on another connection / session: its oplock and
    /// lease breaks go there now (added for durable reconnect, handlers/create).
    pub fn rebind(&self, entry_id: u64, conn_id: u64, session_id: u64) {
        let mut st = self.inner.lock();
        for o in st.oplocks.iter_mut().filter(|o| o.entry_id == entry_id) {
            o.conn_id = conn_id;
            o.session_id = session_id;
        }
        for l in st
            .leases
            .iter_mut()
            .filter(|l| l.entries.contains(&entry_id))
        {
            l.conn_id = conn_id;
            l.session_id = session_id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_state_normalisation() {
        assert_eq!(valid_lease_state(LEASE_READ), LEASE_READ);
        assert_eq!(valid_lease_state(LEASE_HANDLE), LEASE_NONE);
        assert_eq!(valid_lease_state(LEASE_WRITE), LEASE_NONE);
        assert_eq!(valid_lease_state(LEASE_WRITE | LEASE_HANDLE), LEASE_NONE);
        assert_eq!(
            valid_lease_state(LEASE_READ | LEASE_WRITE | LEASE_HANDLE | 0x80),
            LEASE_READ | LEASE_WRITE | LEASE_HANDLE
        );
    }

    fn holder(f: &FileOplocks, entry: u64, level: u8) {
        f.inner.lock().oplocks.push(OplockHolder {
            entry_id: entry,
            file_id: FileId::default(),
            conn_id: 1,
            session_id: 1,
            level,
            breaking_to: None,
        });
    }

    const REQ: Requester = Requester {
        conn_id: 2,
        session_id: 2,
        client_guid: [2; 16],
    };

    #[test]
    fn batch_breaks_to_level2_and_acks() {
        let f = FileOplocks::default();
        holder(&f, 1, OPLOCK_LEVEL_BATCH);
        let m = f.start_breaks(&REQ, None, Conflict::default(), true).0;
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].body[2], OPLOCK_LEVEL_II);
        assert!(f.any_breaking());
        // Acknowledging higher than the break-to level is a protocol error.
        assert_eq!(
            f.ack_oplock(1, OPLOCK_LEVEL_BATCH),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert!(f.breaking(1));
        assert!(!f.breaking(2));
        assert_eq!(f.ack_oplock(1, OPLOCK_LEVEL_II), Ok(OPLOCK_LEVEL_II));
        assert!(!f.any_breaking());
        assert!(!f.breaking(1));
        assert_eq!(f.oplock_level(1), OPLOCK_LEVEL_II);
        // Not breaking any more.
        assert_eq!(
            f.ack_oplock(1, OPLOCK_LEVEL_II),
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        );
        // A plain second open leaves LEVEL_II alone; an overwrite breaks it without ack.
        assert!(f
            .start_breaks(&REQ, None, Conflict::default(), true)
            .0
            .is_empty());
        let m = f
            .start_breaks(
                &REQ,
                None,
                Conflict {
                    overwrite: true,
                    sharing: false,
                    lease_stat: false,
                },
                true,
            )
            .0;
        assert_eq!(m.len(), 1);
        assert_eq!(f.oplock_level(1), OPLOCK_LEVEL_NONE);
    }

    #[test]
    fn exclusive_not_broken_by_sharing_conflict() {
        let f = FileOplocks::default();
        holder(&f, 1, OPLOCK_LEVEL_EXCLUSIVE);
        let c = Conflict {
            overwrite: false,
            sharing: true,
            lease_stat: false,
        };
        assert!(f.start_breaks(&REQ, None, c, true).0.is_empty());
        holder(&f, 3, OPLOCK_LEVEL_BATCH);
        assert_eq!(f.start_breaks(&REQ, None, c, true).0.len(), 1);
        f.force_breaks();
        assert_eq!(f.oplock_level(3), OPLOCK_LEVEL_NONE);
    }

    /// An RWH v2 lease of client [1; 16], key [9; 16], held by open entry 1.
    fn push_rwh_lease(f: &FileOplocks) {
        f.inner.lock().leases.push(Lease {
            client_guid: [1; 16],
            key: [9; 16],
            state: LEASE_READ | LEASE_WRITE | LEASE_HANDLE,
            breaking_to: None,
            break_required: LEASE_NONE,
            epoch: 1,
            version: 2,
            parent_key: [0; 16],
            conn_id: 1,
            session_id: 1,
            entries: vec![1],
        });
    }

    #[test]
    fn lease_break_strips_write_and_ack_rules() {
        let f = FileOplocks::default();
        push_rwh_lease(&f);
        // Same client, same key: no break.
        let same = Requester {
            client_guid: [1; 16],
            ..REQ
        };
        assert!(f
            .start_breaks(&same, Some([9; 16]), Conflict::default(), true)
            .0
            .is_empty());
        let m = f
            .start_breaks(&REQ, Some([8; 16]), Conflict::default(), true)
            .0;
        assert_eq!(m.len(), 1);
        let mut msg = vec![0u8; 64];
        msg.extend_from_slice(&m[0].body);
        let n = LeaseBreakNotification::decode(&msg).unwrap();
        assert_eq!(n.new_lease_state, LEASE_READ | LEASE_HANDLE);
        assert_eq!(n.new_epoch, 2);
        assert_eq!(n.flags, LEASE_BREAK_ACK_REQUIRED);
        assert_eq!(
            f.ack_lease([1; 16], [9; 16], LEASE_READ | LEASE_WRITE),
            Err(NtStatus::REQUEST_NOT_ACCEPTED)
        );
        assert_eq!(
            f.ack_lease([1; 16], [7; 16], LEASE_READ),
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        );
        assert_eq!(f.ack_lease([1; 16], [9; 16], LEASE_READ), Ok(LEASE_READ));
        assert_eq!(
            f.ack_lease([1; 16], [9; 16], LEASE_READ),
            Err(NtStatus::UNSUCCESSFUL)
        );
        f.release(1);
        assert_eq!(f.lease_state([1; 16], [9; 16]), None);
    }

    #[test]
    fn sharing_conflict_breaks_handle_caching_only() {
        let f = FileOplocks::default();
        push_rwh_lease(&f);
        let sharing = Conflict {
            overwrite: false,
            sharing: true,
            lease_stat: false,
        };
        let m = f.start_breaks(&REQ, Some([8; 16]), sharing, true).0;
        let mut msg = vec![0u8; 64];
        msg.extend_from_slice(&m[0].body);
        let n = LeaseBreakNotification::decode(&msg).unwrap();
        assert_eq!(n.new_lease_state, LEASE_READ | LEASE_WRITE);
        // The lease's own key does not wait for its break; others do.
        assert!(!f.any_breaking_except(Some(([1; 16], [9; 16]))));
        assert!(f.any_breaking_except(Some(([2; 16], [8; 16]))));
        let l = f.lease_of(1).unwrap();
        assert_eq!(l.lease_flags, LEASE_FLAG_BREAK_IN_PROGRESS);
        assert_eq!(l.epoch, 2);
        // A lease stat open breaks nothing.
        f.ack_lease([1; 16], [9; 16], LEASE_READ | LEASE_WRITE)
            .unwrap();
        let stat = Conflict {
            lease_stat: true,
            ..Conflict::default()
        };
        assert!(f.start_breaks(&REQ, Some([8; 16]), stat, true).0.is_empty());
        assert!(is_lease_stat_open(0x0002_0000));
        assert!(!is_lease_stat_open(0));
        assert!(!is_lease_stat_open(0x0002_0001));
    }

    fn decode_break(m: &BreakMsg) -> LeaseBreakNotification {
        let mut msg = vec![0u8; 64];
        msg.extend_from_slice(&m.body);
        LeaseBreakNotification::decode(&msg).unwrap()
    }

    const RH: u32 = LEASE_READ | LEASE_HANDLE;

    #[test]
    fn conflicts_during_a_break_continue_it_step_by_step() {
        let f = FileOplocks::default();
        push_rwh_lease(&f);
        // A plain open takes W and waits for it.
        let (m, wait) = f.start_breaks(&REQ, None, Conflict::default(), true);
        assert!(wait);
        let n = decode_break(&m[0]);
        assert_eq!(n.new_lease_state, RH);
        assert_eq!(n.new_epoch, 2);
        // An overwrite while that break is in progress sends nothing new but waits.
        let over = Conflict {
            overwrite: true,
            ..Conflict::default()
        };
        let (m, wait) = f.start_breaks(&REQ, None, over, true);
        assert!(m.is_empty());
        assert!(wait);
        // The acknowledgment to RH starts the next step, RH -> R, same epoch.
        let (acked, next) = f.ack_lease_step([1; 16], [9; 16], RH).unwrap();
        assert_eq!(acked, RH);
        let n = decode_break(&next.unwrap());
        assert_eq!((n.current_lease_state, n.new_lease_state), (RH, LEASE_READ));
        assert_eq!(n.flags, LEASE_BREAK_ACK_REQUIRED);
        assert_eq!(n.new_epoch, 2);
        let l = f.lease_of(1).unwrap();
        assert_eq!(l.lease_state, RH);
        assert_eq!(l.lease_flags, LEASE_FLAG_BREAK_IN_PROGRESS);
        // Both waiting opens keep waiting while the lease is breaking.
        assert!(f.start_breaks(&REQ, None, Conflict::default(), false).1);
        assert!(f.start_breaks(&REQ, None, over, false).1);
        // The acknowledgment to R ends in R -> NONE without acknowledgment.
        let (acked, next) = f.ack_lease_step([1; 16], [9; 16], LEASE_READ).unwrap();
        assert_eq!(acked, LEASE_READ);
        let n = decode_break(&next.unwrap());
        assert_eq!(
            (n.current_lease_state, n.new_lease_state, n.flags),
            (LEASE_READ, LEASE_NONE, 0)
        );
        assert_eq!(f.lease_state([1; 16], [9; 16]), Some(LEASE_NONE));
        assert!(!f.breaking(1));
        let (m, wait) = f.start_breaks(&REQ, None, over, false);
        assert!(m.is_empty());
        assert!(!wait);
    }

    #[test]
    fn overwrite_next_to_read_handle_lease_does_not_wait() {
        let f = FileOplocks::default();
        push_rwh_lease(&f);
        f.inner.lock().leases[0].state = RH;
        let over = Conflict {
            overwrite: true,
            ..Conflict::default()
        };
        let (m, wait) = f.start_breaks(&REQ, None, over, true);
        assert!(!wait);
        let n = decode_break(&m[0]);
        assert_eq!(
            (n.new_lease_state, n.flags),
            (LEASE_NONE, LEASE_BREAK_ACK_REQUIRED)
        );
        // A second one on its first attempt neither breaks again nor waits; one that
        // has waited before waits for the break to finish.
        let (m, wait) = f.start_breaks(&REQ, None, over, true);
        assert!(m.is_empty() && !wait);
        assert!(f.start_breaks(&REQ, None, over, false).1);
        // The acknowledgment to NONE leaves nothing to continue.
        assert_eq!(
            f.ack_lease_step([1; 16], [9; 16], LEASE_NONE)
                .map(|(s, n)| (s, n.is_none())),
            Ok((LEASE_NONE, true))
        );
    }

    #[test]
    fn rename_breaks_handle_caching_of_other_leases_only() {
        let f = FileOplocks::default();
        push_rwh_lease(&f);
        f.inner.lock().leases[0].state = RH;
        f.inner.lock().leases.push(Lease {
            client_guid: [1; 16],
            key: [5; 16],
            state: RH,
            breaking_to: None,
            break_required: LEASE_NONE,
            epoch: 0,
            version: 1,
            parent_key: [0; 16],
            conn_id: 1,
            session_id: 1,
            entries: vec![2],
        });
        // Open 1 renames: the lease of open 2 goes RH -> R and is waited for.
        let (m, wait) = f.break_handles_except(1);
        assert!(wait);
        assert_eq!(m.len(), 1);
        let n = decode_break(&m[0]);
        assert_eq!(n.lease_key, [5; 16]);
        assert_eq!((n.new_lease_state, n.new_epoch), (LEASE_READ, 0));
        // Asking again sends nothing more and still waits.
        let (m, wait) = f.break_handles_except(1);
        assert!(m.is_empty() && wait);
        f.ack_lease([1; 16], [5; 16], LEASE_READ).unwrap();
        let (m, wait) = f.break_handles_except(1);
        assert!(m.is_empty() && !wait);
        assert_eq!(f.lease_state([1; 16], [9; 16]), Some(RH));
    }
}
