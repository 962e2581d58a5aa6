//! The rules of oplocks and leases on one file, without I/O: no async runtime, no server
//! tables, no connections. [`Holders`] is the oplock and lease state of a file; each
//! function takes it as it is now and returns what follows as typed values: the
//! [`Break`]s to send, whether the caller must wait for acknowledgments, whether
//! opens already waiting must look again ([`Decision`]), what a CREATE is granted
//! ([`Grant`]). The caller holds the file's lock around a call, delivers the breaks
//! (crate `breaks` module) and wakes the waiters (`FileOplocks`).

use smbx_wire::oplock::{LeaseContext, LeaseFlags, LeaseState, OplockLevel};
use smbx_wire::{AccessMask, FileId, NtStatus};

use super::lease::{valid_lease_state, Lease, LeaseStatus};

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
    pub level: OplockLevel,
    /// The `RqLs` context when `level` is LEASE (and the dialect is 2.1+).
    pub lease: Option<LeaseContext>,
}

/// What the CREATE is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// OplockLevel for the CREATE response (LEASE when a lease context answers).
    pub level: OplockLevel,
    /// The `RqLs` response context to return, if any.
    pub lease: Option<LeaseContext>,
}

impl Grant {
    const NONE: Grant = Grant {
        level: OplockLevel::NONE,
        lease: None,
    };
}

/// How a new open conflicts with the existing ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct Conflict {
    /// The open overwrites / supersedes the file.
    pub overwrite: bool,
    /// The open would fail the share-mode check as things stand.
    pub sharing: bool,
    /// The open is a lease stat open ([`is_lease_stat_open`]): leases stay.
    pub lease_stat: bool,
}

/// Where a break notification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The connection of the open that holds the oplock or created the lease.
    pub conn_id: u64,
    /// Its session (the notification is sealed when that session encrypts).
    pub session_id: u64,
    /// For a lease: the ClientGuid, whose connections may all take the break.
    pub client_guid: Option<[u8; 16]>,
}

/// A break notification to send ([MS-SMB2] 2.2.23.1, 2.2.23.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// An oplock break: the holder's open may keep at most `to`.
    Oplock {
        /// Where it goes.
        target: Target,
        /// The holder's open.
        file_id: FileId,
        /// The new level (II or NONE).
        to: OplockLevel,
    },
    /// A lease break from `from` to `to`.
    Lease {
        /// Where it goes.
        target: Target,
        /// The LeaseKey.
        key: [u8; 16],
        /// CurrentLeaseState.
        from: LeaseState,
        /// NewLeaseState.
        to: LeaseState,
        /// NewEpoch (version 2 leases; 0 for version 1).
        epoch: u16,
        /// SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED.
        ack_required: bool,
    },
}

/// What a change of a file's oplock state asks of its caller.
#[must_use]
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Notifications to send, in order.
    pub breaks: Vec<Break>,
    /// The operation that asked (a CREATE, a rename) must wait for acknowledgments
    /// before it goes on.
    pub wait: bool,
    /// Operations already waiting on this file must look again: a break ended.
    pub wake: bool,
}

impl Decision {
    fn wake() -> Decision {
        Decision {
            wake: true,
            ..Decision::default()
        }
    }
}

/// Another open of the file, as the grant rules see it.
#[derive(Debug, Clone, Copy)]
pub struct OpenAccess {
    /// Its entry id in the file's table.
    pub entry_id: u64,
    /// Its granted access.
    pub access: AccessMask,
}

/// An oplock held by one open.
#[derive(Debug, Clone)]
struct OplockHolder {
    entry_id: u64,
    file_id: FileId,
    conn_id: u64,
    session_id: u64,
    level: OplockLevel,
    /// The level a break in progress asked for.
    breaking_to: Option<OplockLevel>,
}

impl OplockHolder {
    fn notification(&self, to: OplockLevel) -> Break {
        Break::Oplock {
            target: Target {
                conn_id: self.conn_id,
                session_id: self.session_id,
                client_guid: None,
            },
            file_id: self.file_id,
            to,
        }
    }
}

/// The oplocks and leases of one file.
#[derive(Debug, Default)]
pub struct Holders {
    oplocks: Vec<OplockHolder>,
    leases: Vec<Lease>,
}

/// (ClientGuid, LeaseKey).
pub type LeaseId = ([u8; 16], [u8; 16]);

/// FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES | SYNCHRONIZE: the rights of a
/// "stat open", which breaks no oplock (unless it overwrites).
const STAT_OPEN_RIGHTS: AccessMask = AccessMask::FILE_READ_ATTRIBUTES
    .union(AccessMask::FILE_WRITE_ATTRIBUTES)
    .union(AccessMask::SYNCHRONIZE);

/// An open asking for no more than attribute access and SYNCHRONIZE.
pub fn is_stat_open(access: AccessMask) -> bool {
    access.difference(STAT_OPEN_RIGHTS).is_empty()
}

/// A stat open as leases see it: some of the stat-open rights or READ_CONTROL and
/// nothing else. It breaks no lease and does not keep write caching from being
/// granted (smb2.lease.statopen3, statopen4).
pub fn is_lease_stat_open(access: AccessMask) -> bool {
    let bits = STAT_OPEN_RIGHTS.union(AccessMask::READ_CONTROL);
    access.intersects(bits) && access.difference(bits).is_empty()
}

impl Holders {
    /// Forgets the oplock / lease membership of an open (it closed).
    pub fn release(&mut self, entry_id: u64) -> Decision {
        self.oplocks.retain(|o| o.entry_id != entry_id);
        for l in self.leases.iter_mut() {
            l.entries.retain(|e| *e != entry_id);
        }
        self.leases.retain(|l| !l.entries.is_empty());
        Decision::wake()
    }

    /// The oplock level currently held by an open (NONE if none).
    pub fn oplock_level(&self, entry_id: u64) -> OplockLevel {
        self.oplocks
            .iter()
            .find(|o| o.entry_id == entry_id)
            .map_or(OplockLevel::NONE, |o| o.level)
    }

    /// The lease state of (guid, key) on this file, if such a lease exists.
    pub fn lease_state(&self, guid: [u8; 16], key: [u8; 16]) -> Option<LeaseState> {
        self.find_lease(guid, key).map(|l| l.status.current())
    }

    /// The state of the lease of (guid, key), held or breaking.
    pub fn lease_status(&self, guid: [u8; 16], key: [u8; 16]) -> Option<LeaseStatus> {
        self.find_lease(guid, key).map(|l| l.status)
    }

    fn find_lease(&self, guid: [u8; 16], key: [u8; 16]) -> Option<&Lease> {
        self.leases
            .iter()
            .find(|l| l.client_guid == guid && l.key == key)
    }

    /// The lease open `entry_id` belongs to, as a response context (key, state, epoch,
    /// parent key; BREAK_IN_PROGRESS while a break awaits its acknowledgment).
    pub fn lease_of(&self, entry_id: u64) -> Option<LeaseContext> {
        let l = self.leases.iter().find(|l| l.entries.contains(&entry_id))?;
        Some(LeaseContext {
            version: l.version,
            lease_key: l.key,
            lease_state: l.status.current(),
            lease_flags: if l.status.is_breaking() {
                LeaseFlags::BREAK_IN_PROGRESS
            } else {
                LeaseFlags::empty()
            },
            parent_lease_key: l.parent_key,
            epoch: l.epoch,
        })
    }

    /// Whether a break of the oplock or lease held by open `entry_id` awaits its
    /// acknowledgment.
    pub fn breaking(&self, entry_id: u64) -> bool {
        self.oplocks
            .iter()
            .any(|o| o.entry_id == entry_id && o.breaking_to.is_some())
            || self
                .leases
                .iter()
                .any(|l| l.entries.contains(&entry_id) && l.status.is_breaking())
    }

    /// Whether a break other than one of lease `own` awaits its acknowledgment.
    pub fn any_breaking_except(&self, own: Option<LeaseId>) -> bool {
        self.oplocks.iter().any(|o| o.breaking_to.is_some())
            || self
                .leases
                .iter()
                .any(|l| l.status.is_breaking() && Some((l.client_guid, l.key)) != own)
    }

    /// Times out every break in progress: the holders lose their oplock / lease
    /// entirely ([MS-SMB2] 3.3.6 oplock / lease break acknowledgment timer: NONE;
    /// a late acknowledgment is then UNSUCCESSFUL; smb2.lease.timeout).
    pub fn force_breaks(&mut self) -> Decision {
        for o in self.oplocks.iter_mut() {
            if o.breaking_to.take().is_some() {
                o.level = OplockLevel::NONE;
            }
        }
        for l in self.leases.iter_mut() {
            l.force();
        }
        self.oplocks.retain(|o| o.level != OplockLevel::NONE);
        Decision::wake()
    }

    /// Decides which holders to break for a new open, marks them breaking, and says
    /// whether the open has to wait ([MS-SMB2] 3.3.4.6, 3.3.4.7).
    ///
    /// Oplocks: EXCLUSIVE and BATCH go to LEVEL_II (NONE on overwrite); a sharing
    /// conflict leaves EXCLUSIVE alone; LEVEL_II goes to NONE (no acknowledgment)
    /// only on overwrite. Leases: the open needs the holder to give up W (H when it
    /// would otherwise hit a sharing violation, everything when it overwrites). It
    /// waits while a holder still has what it needs, or (`first` false: it has waited
    /// before) while a holder's break is in progress at all, so breaks go step by step;
    /// an open whose conflict is only a lesser one (an overwrite next to RH: the holder
    /// must drop its read cache, the open does not need its handles closed) does not
    /// wait (smb2.lease.breaking3, breaking4). The opener's own lease (`lease_key` of
    /// the same client) is never broken nor waited for.
    pub fn start_breaks(
        &mut self,
        new: &Requester,
        lease_key: Option<[u8; 16]>,
        c: Conflict,
        first: bool,
    ) -> Decision {
        let mut out = Vec::new();
        let mut dropped_to_none = false;
        for o in self.oplocks.iter_mut() {
            if o.breaking_to.is_some() {
                continue;
            }
            let to = match o.level {
                OplockLevel::BATCH | OplockLevel::EXCLUSIVE => {
                    if c.overwrite {
                        OplockLevel::NONE
                    } else if c.sharing && o.level == OplockLevel::EXCLUSIVE {
                        continue;
                    } else {
                        OplockLevel::II
                    }
                }
                OplockLevel::II if c.overwrite => OplockLevel::NONE,
                _ => continue,
            };
            out.push(o.notification(to));
            if o.level == OplockLevel::II {
                // LEVEL_II -> NONE needs no acknowledgment.
                o.level = OplockLevel::NONE;
                dropped_to_none = true;
            } else {
                o.breaking_to = Some(to);
            }
        }
        if dropped_to_none {
            self.oplocks.retain(|o| o.level != OplockLevel::NONE);
        }
        // An oplock break in progress (this one or an earlier one) is waited for.
        let mut wait = self.oplocks.iter().any(|o| o.breaking_to.is_some());
        if c.lease_stat {
            return Decision {
                breaks: out,
                wait,
                wake: false,
            };
        }
        // What the open cannot live with: W, or H when it would hit a sharing
        // violation; an overwrite takes every cache.
        let delay = if c.sharing {
            LeaseState::HANDLE
        } else {
            LeaseState::WRITE
        };
        for l in self.leases.iter_mut() {
            if lease_key == Some(l.key) && l.client_guid == new.client_guid {
                continue;
            }
            let held = l.status.current();
            let to = if c.overwrite {
                LeaseState::NONE
            } else {
                held.difference(delay)
            };
            let was_breaking = l.status.is_breaking();
            if held.difference(to).is_empty() {
                // Nothing to take away, but a break in progress may still take it.
                wait |= was_breaking;
                continue;
            }
            out.extend(l.break_towards(to));
            wait |= l.status.is_breaking() && l.status.current().intersects(delay);
            wait |= was_breaking && !first;
        }
        Decision {
            breaks: out,
            wait,
            wake: false,
        }
    }

    /// Acknowledges an oplock break for `entry_id` ([MS-SMB2] 3.3.5.22.1): the level
    /// now held, or INVALID_OPLOCK_PROTOCOL (no break in progress; a level above the
    /// break's, which also loses the oplock) or INVALID_PARAMETER (not NONE or II).
    pub fn ack_oplock(
        &mut self,
        entry_id: u64,
        level: OplockLevel,
    ) -> (Result<OplockLevel, NtStatus>, Decision) {
        let Some(pos) = self.oplocks.iter().position(|o| o.entry_id == entry_id) else {
            return (Err(NtStatus::INVALID_OPLOCK_PROTOCOL), Decision::default());
        };
        let o = &mut self.oplocks[pos];
        let Some(to) = o.breaking_to else {
            return (Err(NtStatus::INVALID_OPLOCK_PROTOCOL), Decision::default());
        };
        let result = if level != OplockLevel::NONE && level != OplockLevel::II {
            Err(NtStatus::INVALID_PARAMETER)
        } else if level > to {
            o.level = OplockLevel::NONE;
            o.breaking_to = None;
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        } else {
            o.level = level;
            o.breaking_to = None;
            Ok(level)
        };
        if self.oplocks[pos].level == OplockLevel::NONE {
            self.oplocks.remove(pos);
        }
        (result, Decision::wake())
    }

    /// Acknowledges a lease break ([MS-SMB2] 3.3.5.22.2) with `state`: returns the
    /// state acknowledged, and the next step of the break if conflicting opens need
    /// more ([`Lease::acknowledge`]). An unknown lease is OBJECT_NAME_NOT_FOUND.
    pub fn ack_lease(
        &mut self,
        guid: [u8; 16],
        key: [u8; 16],
        state: LeaseState,
    ) -> Result<(LeaseState, Decision), NtStatus> {
        let l = self
            .leases
            .iter_mut()
            .find(|l| l.client_guid == guid && l.key == key)
            .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
        let next = l.acknowledge(state)?;
        Ok((
            state,
            Decision {
                breaks: next.into_iter().collect(),
                wait: false,
                wake: true,
            },
        ))
    }

    /// A rename through open `entry_id` ([MS-FSA] 2.1.5.14.11, [MS-SMB2] 3.3.4.7):
    /// every other lease on the file gives up H; the rename waits while any of them
    /// still holds it. The lease of `entry_id` itself is not broken.
    pub fn break_handles_except(&mut self, entry_id: u64) -> Decision {
        let mut out = Vec::new();
        let mut wait = false;
        for l in self.leases.iter_mut() {
            let held = l.status.current();
            if l.entries.contains(&entry_id) || !held.intersects(LeaseState::HANDLE) {
                continue;
            }
            out.extend(l.break_towards(held.difference(LeaseState::HANDLE)));
            wait |= l.status.current().intersects(LeaseState::HANDLE);
        }
        Decision {
            breaks: out,
            wait,
            wake: false,
        }
    }

    /// A write, a set of the end of file or an overwrite through open `writer_entry`:
    /// LEVEL_II oplocks (the writer's own too: smb2.oplock.batch1, levelii500) and the
    /// read leases of other opens go to NONE. Notifications without acknowledgment,
    /// except for RH leases (H is being taken away).
    pub fn break_level2(&mut self, writer_entry: u64) -> Decision {
        let mut out = Vec::new();
        for o in self.oplocks.iter_mut() {
            if o.level == OplockLevel::II && o.breaking_to.is_none() {
                o.level = OplockLevel::NONE;
                out.push(o.notification(OplockLevel::NONE));
            }
        }
        self.oplocks.retain(|o| o.level != OplockLevel::NONE);
        for l in self.leases.iter_mut() {
            let held = l.status.current();
            if l.entries.contains(&writer_entry)
                || l.status.is_breaking()
                || !held.contains(LeaseState::READ)
                || held.intersects(LeaseState::WRITE)
            {
                continue;
            }
            out.extend(l.break_towards(LeaseState::NONE));
        }
        Decision {
            breaks: out,
            wait: false,
            wake: false,
        }
    }

    /// What a CREATE gets once its open is registered as `entry_id` (`file_id` on the
    /// wire), next to `opens` (every open of the file, this one included). Returns the
    /// grant and, when it created a new lease, its id for the server's lease index.
    ///
    /// Oplocks: EXCLUSIVE and BATCH only to the only open; LEVEL_II when other opens
    /// exist; nothing next to an exclusive oplock, a write lease or a handle lease, and
    /// nothing for directories. Leases: R, RH, RW, RWH (others NONE); W only to the
    /// only lease on the file and never next to an oplock; an open with the key of a
    /// lease joins it and may upgrade it to a strict superset (W only when every open
    /// of the file belongs to it); version 2 carries an epoch.
    pub fn grant(
        &mut self,
        new: &Requester,
        entry_id: u64,
        file_id: FileId,
        is_dir: bool,
        req: &OplockRequest,
        opens: &[OpenAccess],
    ) -> (Grant, Option<LeaseId>) {
        let others = opens.iter().filter(|o| o.entry_id != entry_id).count();
        // Lease stat opens do not count against write caching, unless they hold a
        // lease of their own (smb2.lease.statopen, statopen3, statopen4).
        let own = req.lease.map(|c| (new.client_guid, c.lease_key));
        let other_lease = |e: u64| {
            self.leases
                .iter()
                .any(|l| Some((l.client_guid, l.key)) != own && l.entries.contains(&e))
        };
        let lease_others = opens
            .iter()
            .filter(|o| o.entry_id != entry_id)
            .filter(|o| !is_lease_stat_open(o.access) || other_lease(o.entry_id))
            .count();
        if req.level == OplockLevel::LEASE {
            // No directory leasing: a directory gets neither a lease nor an oplock.
            let Some(ctx) = req.lease.filter(|_| !is_dir) else {
                return (Grant::NONE, None);
            };
            return self.grant_lease(new, entry_id, &ctx, opens, lease_others);
        }
        let level = match req.level {
            OplockLevel::II | OplockLevel::EXCLUSIVE | OplockLevel::BATCH if !is_dir => {
                let strong = self.oplocks.iter().any(|o| o.level.is_exclusive())
                    || self
                        .leases
                        .iter()
                        .any(|l| l.status.current().intersects(LeaseState::WRITE));
                // A handle-caching lease leaves no oplock to others (smb2.lease.oplock).
                let handle_lease = self
                    .leases
                    .iter()
                    .any(|l| l.status.current().intersects(LeaseState::HANDLE));
                if strong || handle_lease {
                    OplockLevel::NONE
                } else if others == 0 {
                    req.level
                } else {
                    OplockLevel::II
                }
            }
            _ => OplockLevel::NONE,
        };
        if level != OplockLevel::NONE {
            self.oplocks.push(OplockHolder {
                entry_id,
                file_id,
                conn_id: new.conn_id,
                session_id: new.session_id,
                level,
                breaking_to: None,
            });
        }
        (Grant { level, lease: None }, None)
    }

    fn grant_lease(
        &mut self,
        new: &Requester,
        entry_id: u64,
        ctx: &LeaseContext,
        opens: &[OpenAccess],
        lease_others: usize,
    ) -> (Grant, Option<LeaseId>) {
        let want = valid_lease_state(ctx.lease_state);
        let strong_oplock = self.oplocks.iter().any(|o| o.level.is_exclusive());
        let no_oplocks = self.oplocks.is_empty();
        let parent_flag = ctx.lease_flags & LeaseFlags::PARENT_LEASE_KEY_SET;
        if let Some(l) = self
            .leases
            .iter_mut()
            .find(|l| l.client_guid == new.client_guid && l.key == ctx.lease_key)
        {
            // Another open joins an existing lease.
            l.entries.push(entry_id);
            let mut flags = LeaseFlags::empty();
            match l.status {
                LeaseStatus::Breaking { .. } => flags |= LeaseFlags::BREAK_IN_PROGRESS,
                LeaseStatus::Held(held) => {
                    // An upgrade happens only to a strict superset of the current state
                    // that can be held as a whole next to the other opens (W only when
                    // every open of the file belongs to this lease); otherwise the
                    // lease stays as it is (smb2.lease.upgrade, upgrade2, upgrade3).
                    let members = opens
                        .iter()
                        .filter(|o| l.entries.contains(&o.entry_id) && o.entry_id != entry_id)
                        .filter(|o| !is_lease_stat_open(o.access))
                        .count();
                    let alone = lease_others == members && no_oplocks;
                    let superset = want != held && want.contains(held);
                    if superset && (!want.intersects(LeaseState::WRITE) || alone) {
                        l.status = LeaseStatus::Held(want);
                        if l.version >= 2 {
                            l.epoch = l.epoch.wrapping_add(1);
                        }
                    }
                }
            }
            // The lease keeps the version it was created with, whatever version
            // later requests use (smb2.lease.v2_epoch2, v2_epoch3).
            let resp = LeaseContext {
                version: l.version,
                lease_key: l.key,
                lease_state: l.status.current(),
                lease_flags: flags | parent_flag,
                parent_lease_key: l.parent_key,
                epoch: l.epoch,
            };
            return (
                Grant {
                    level: OplockLevel::LEASE,
                    lease: Some(resp),
                },
                None,
            );
        }
        // Next to other opens no W; next to oplocks (broken to LEVEL_II by now) only R
        // (smb2.lease.oplock).
        let mut state = want;
        if lease_others > 0 || strong_oplock {
            state.remove(LeaseState::WRITE);
        }
        if self.oplocks.iter().any(|o| o.level != OplockLevel::NONE) {
            state &= LeaseState::READ;
        }
        let epoch = if ctx.version >= 2 {
            ctx.epoch.wrapping_add(1)
        } else {
            0
        };
        // A lease granted NONE still exists: a later open with its key may upgrade it
        // (smb2.lease.upgrade2).
        self.leases.push(Lease {
            client_guid: new.client_guid,
            key: ctx.lease_key,
            status: LeaseStatus::Held(state),
            epoch,
            version: ctx.version,
            parent_key: ctx.parent_lease_key,
            conn_id: new.conn_id,
            session_id: new.session_id,
            entries: vec![entry_id],
        });
        let resp = LeaseContext {
            version: ctx.version,
            lease_key: ctx.lease_key,
            lease_state: state,
            lease_flags: parent_flag,
            parent_lease_key: ctx.parent_lease_key,
            epoch,
        };
        (
            Grant {
                level: OplockLevel::LEASE,
                lease: Some(resp),
            },
            Some((new.client_guid, ctx.lease_key)),
        )
    }

    /// A durable open was reclaimed on another connection / session: its oplock and
    /// lease breaks go there now.
    pub fn rebind(&mut self, entry_id: u64, conn_id: u64, session_id: u64) {
        for o in self.oplocks.iter_mut().filter(|o| o.entry_id == entry_id) {
            o.conn_id = conn_id;
            o.session_id = session_id;
        }
        for l in self
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
mod tests;
