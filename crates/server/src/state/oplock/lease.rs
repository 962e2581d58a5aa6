//! One lease on one file ([MS-SMB2] 3.3.1.13 Lease, 3.3.4.7, 3.3.5.22.2): its
//! identity, the opens that share it, and its state as one value, [`LeaseStatus`].
//!
//! ```text
//!                       conflict, s holds H or W
//!   +---------+  ------------------------------------->  +---------------------------+
//!   | Held(s) |                                          | Breaking { from: s, to,   |
//!   +---------+  <-------------------------------------  |            required: to } |
//!     |   ^       ack(a), a gives up at least `required`  +---------------------------+
//!     |   |                                                  |  ^         |
//!     |   +-- conflict, s = R: Held(to) at once              |  |         | further conflict:
//!     |       (notification, no acknowledgment)              |  |         | required &= to
//!     |                                                      |  |         | (no notification)
//!     +-- upgrade: a new open with the same key              |  +---------+
//!         (Held(s) -> Held(superset of s))                   |
//!                                                            | ack(a), a keeps more than
//!   timeout (force): Breaking -> Held(NONE)                  | `required`: the next step
//!                                                            v
//!                 a holds H or W: Breaking { from: a, to: step, required } (same epoch)
//!                 a = R:          Held(step) (notification R -> NONE, no acknowledgment)
//! ```
//!
//! `step` is `required` plus R while H or W is still to go: a break goes RWH -> RH ->
//! R -> NONE one acknowledgment at a time (smb2.lease.breaking3).

use smbx_wire::oplock::LeaseState;
use smbx_wire::NtStatus;

use super::core::{Break, Target};

/// The state of a lease: held, or breaking and waiting for the holder's
/// acknowledgment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStatus {
    /// The lease holds this caching (possibly NONE: a lease granted nothing still
    /// exists and may be upgraded later).
    Held(LeaseState),
    /// A break notification went out and its acknowledgment has not come back.
    Breaking {
        /// Lease.LeaseState: what the holder still caches.
        from: LeaseState,
        /// Lease.BreakToLeaseState: what the notification asked for.
        to: LeaseState,
        /// The most that the opens which conflicted meanwhile can live with: an
        /// acknowledgment that keeps more starts the next step of the break.
        required: LeaseState,
    },
}

impl LeaseStatus {
    /// The caching the holder has now (while breaking: what it had before).
    pub fn current(self) -> LeaseState {
        match self {
            LeaseStatus::Held(s) => s,
            LeaseStatus::Breaking { from, .. } => from,
        }
    }

    /// What a break in progress asked for.
    pub fn breaking_to(self) -> Option<LeaseState> {
        match self {
            LeaseStatus::Held(_) => None,
            LeaseStatus::Breaking { to, .. } => Some(to),
        }
    }

    /// Whether a break awaits its acknowledgment.
    pub fn is_breaking(self) -> bool {
        matches!(self, LeaseStatus::Breaking { .. })
    }
}

/// A lease: (ClientGuid, LeaseKey) on one file, shared by every open of that client
/// with that key.
#[derive(Debug, Clone)]
pub struct Lease {
    /// ClientGuid of the client that holds it.
    pub client_guid: [u8; 16],
    /// The client's LeaseKey.
    pub key: [u8; 16],
    /// Held or breaking.
    pub status: LeaseStatus,
    /// Lease.Epoch (version 2; incremented by every state change the server starts).
    pub epoch: u16,
    /// 1 or 2: the version it was created with.
    pub version: u8,
    /// ParentLeaseKey (version 2).
    pub parent_key: [u8; 16],
    /// Connection its breaks go to when the client has no better one.
    pub conn_id: u64,
    /// Session of the open that created it.
    pub session_id: u64,
    /// The opens (entry ids) that share it; the lease goes when the last one closes.
    pub entries: Vec<u64>,
}

impl Lease {
    fn target(&self) -> Target {
        Target {
            conn_id: self.conn_id,
            session_id: self.session_id,
            client_guid: Some(self.client_guid),
        }
    }

    /// The notification breaking this lease from `from` to `to` (acknowledgment
    /// required when `from` holds H or W).
    fn notification(&self, from: LeaseState, to: LeaseState) -> Break {
        Break::Lease {
            target: self.target(),
            key: self.key,
            from,
            to,
            epoch: if self.version >= 2 { self.epoch } else { 0 },
            ack_required: from.intersects(LeaseState::HW),
        }
    }

    /// Breaks this lease towards `to` for a conflicting operation ([MS-SMB2] 3.3.4.7).
    /// A held lease starts a break (new epoch): R goes to `to` at once without
    /// acknowledgment, a state with H or W becomes [`LeaseStatus::Breaking`]. A lease
    /// already breaking only narrows what the break must reach (no notification; the
    /// acknowledgment starts the next step, [`Lease::acknowledge`]).
    pub fn break_towards(&mut self, to: LeaseState) -> Option<Break> {
        match &mut self.status {
            LeaseStatus::Breaking { from, required, .. } => {
                *required &= to & *from;
                None
            }
            LeaseStatus::Held(s) => {
                let from = *s;
                let to = to & from;
                if to == from {
                    return None;
                }
                if self.version >= 2 {
                    self.epoch = self.epoch.wrapping_add(1);
                }
                let msg = self.notification(from, to);
                self.status = if from.intersects(LeaseState::HW) {
                    LeaseStatus::Breaking {
                        from,
                        to,
                        required: to,
                    }
                } else {
                    LeaseStatus::Held(to)
                };
                Some(msg)
            }
        }
    }

    /// The holder acknowledges a break with `state` ([MS-SMB2] 3.3.5.22.2): not
    /// breaking is UNSUCCESSFUL, more than the break asked for REQUEST_NOT_ACCEPTED.
    /// The lease takes `state`; when conflicting opens meanwhile need more than that
    /// gives up, the break goes on by one step (same epoch): to what they need, keeping
    /// R while H or W is still to go, or from R to NONE at once. Returns that
    /// notification.
    pub fn acknowledge(&mut self, state: LeaseState) -> Result<Option<Break>, NtStatus> {
        let LeaseStatus::Breaking { to, required, .. } = self.status else {
            return Err(NtStatus::UNSUCCESSFUL);
        };
        if !state.difference(to).is_empty() {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        self.status = LeaseStatus::Held(state);
        if state.difference(required).is_empty() {
            return Ok(None);
        }
        let keeps_hw = state.intersects(LeaseState::HW);
        let mut step = required;
        if keeps_hw {
            step |= LeaseState::READ;
        }
        let step = step & state;
        let next = self.notification(state, step);
        self.status = if keeps_hw {
            LeaseStatus::Breaking {
                from: state,
                to: step,
                required,
            }
        } else {
            LeaseStatus::Held(step)
        };
        Ok(Some(next))
    }

    /// A break timed out ([MS-SMB2] 3.3.6.2): the lease is left with nothing.
    pub fn force(&mut self) {
        if self.status.is_breaking() {
            self.status = LeaseStatus::Held(LeaseState::NONE);
        }
    }
}

/// A valid lease state for `requested`: R, RH, RW or RWH as asked; anything without
/// R (and bits that are no caching) is NONE ([MS-SMB2] 3.3.5.9.8).
pub fn valid_lease_state(requested: LeaseState) -> LeaseState {
    let s = requested & LeaseState::RWH;
    if s.contains(LeaseState::READ) {
        s
    } else {
        LeaseState::NONE
    }
}
