//! The oplock core driven without sockets: a file's [`Holders`], opens that conflict,
//! and clients that acknowledge what they are sent ([`Pair`], after quinn-proto's
//! test harness of two endpoints).

use super::*;

const RH: LeaseState = LeaseState::RH;
const RWH: LeaseState = LeaseState::RWH;
const R: LeaseState = LeaseState::READ;
const NONE: LeaseState = LeaseState::NONE;

/// The opener of most tests: client [2; 16] on connection 2.
const REQ: Requester = Requester {
    conn_id: 2,
    session_id: 2,
    client_guid: [2; 16],
};

const OVERWRITE: Conflict = Conflict {
    overwrite: true,
    sharing: false,
    lease_stat: false,
};

const SHARING: Conflict = Conflict {
    overwrite: false,
    sharing: true,
    lease_stat: false,
};

fn holder(h: &mut Holders, entry: u64, level: OplockLevel) {
    h.oplocks.push(OplockHolder {
        entry_id: entry,
        file_id: FileId::default(),
        conn_id: 1,
        session_id: 1,
        level,
        breaking_to: None,
    });
}

/// A lease of client [1; 16] with `key`, held by open `entry`.
fn lease(h: &mut Holders, key: u8, entry: u64, state: LeaseState, version: u8) {
    h.leases.push(Lease {
        client_guid: [1; 16],
        key: [key; 16],
        status: LeaseStatus::Held(state),
        epoch: if version >= 2 { 1 } else { 0 },
        version,
        parent_key: [0; 16],
        conn_id: 1,
        session_id: 1,
        entries: vec![entry],
    });
}

/// An RWH v2 lease of client [1; 16], key [9; 16], held by open entry 1.
fn rwh(h: &mut Holders) {
    lease(h, 9, 1, RWH, 2);
}

/// (from, to, epoch, ack_required) of a lease break.
fn lease_break(b: &Break) -> (LeaseState, LeaseState, u16, bool) {
    match *b {
        Break::Lease {
            from,
            to,
            epoch,
            ack_required,
            ..
        } => (from, to, epoch, ack_required),
        Break::Oplock { .. } => panic!("an oplock break where a lease break was due: {b:?}"),
    }
}

fn oplock_break(b: &Break) -> OplockLevel {
    match *b {
        Break::Oplock { to, .. } => to,
        Break::Lease { .. } => panic!("a lease break where an oplock break was due: {b:?}"),
    }
}

#[test]
fn lease_state_normalisation() {
    assert_eq!(valid_lease_state(R), R);
    assert_eq!(valid_lease_state(LeaseState::HANDLE), NONE);
    assert_eq!(valid_lease_state(LeaseState::WRITE), NONE);
    assert_eq!(valid_lease_state(LeaseState::HW), NONE);
    assert_eq!(valid_lease_state(RWH | LeaseState(0x80)), RWH);
}

#[test]
fn batch_breaks_to_level2_and_acks() {
    let mut h = Holders::default();
    holder(&mut h, 1, OplockLevel::BATCH);
    let d = h.start_breaks(&REQ, None, Conflict::default(), true);
    assert_eq!(d.breaks.len(), 1);
    assert_eq!(oplock_break(&d.breaks[0]), OplockLevel::II);
    assert!(d.wait && !d.wake);
    assert!(h.any_breaking_except(None));
    // Acknowledging higher than the break-to level is a protocol error.
    assert_eq!(
        h.ack_oplock(1, OplockLevel::BATCH).0,
        Err(NtStatus::INVALID_PARAMETER)
    );
    assert!(h.breaking(1));
    assert!(!h.breaking(2));
    let (r, d) = h.ack_oplock(1, OplockLevel::II);
    assert_eq!(r, Ok(OplockLevel::II));
    assert!(d.wake, "an acknowledgment wakes the waiting opens");
    assert!(!h.any_breaking_except(None));
    assert!(!h.breaking(1));
    assert_eq!(h.oplock_level(1), OplockLevel::II);
    // Not breaking any more.
    let (r, d) = h.ack_oplock(1, OplockLevel::II);
    assert_eq!(r, Err(NtStatus::INVALID_OPLOCK_PROTOCOL));
    assert!(!d.wake);
    // A plain second open leaves LEVEL_II alone; an overwrite breaks it without ack.
    let d = h.start_breaks(&REQ, None, Conflict::default(), true);
    assert!(d.breaks.is_empty() && !d.wait);
    let d = h.start_breaks(&REQ, None, OVERWRITE, true);
    assert_eq!(d.breaks.len(), 1);
    assert_eq!(oplock_break(&d.breaks[0]), OplockLevel::NONE);
    assert!(!d.wait);
    assert_eq!(h.oplock_level(1), OplockLevel::NONE);
}

#[test]
fn acknowledging_above_the_break_loses_the_oplock() {
    let mut h = Holders::default();
    holder(&mut h, 1, OplockLevel::BATCH);
    let _ = h.start_breaks(&REQ, None, OVERWRITE, true);
    let (r, d) = h.ack_oplock(1, OplockLevel::II);
    assert_eq!(r, Err(NtStatus::INVALID_OPLOCK_PROTOCOL));
    assert!(d.wake);
    assert_eq!(h.oplock_level(1), OplockLevel::NONE);
    assert!(!h.breaking(1));
}

#[test]
fn exclusive_not_broken_by_sharing_conflict() {
    let mut h = Holders::default();
    holder(&mut h, 1, OplockLevel::EXCLUSIVE);
    assert!(h.start_breaks(&REQ, None, SHARING, true).breaks.is_empty());
    holder(&mut h, 3, OplockLevel::BATCH);
    assert_eq!(h.start_breaks(&REQ, None, SHARING, true).breaks.len(), 1);
    assert!(h.force_breaks().wake);
    assert_eq!(h.oplock_level(3), OplockLevel::NONE);
    assert_eq!(h.oplock_level(1), OplockLevel::EXCLUSIVE);
}

#[test]
fn lease_break_strips_write_and_ack_rules() {
    let mut h = Holders::default();
    rwh(&mut h);
    // Same client, same key: no break.
    let same = Requester {
        client_guid: [1; 16],
        ..REQ
    };
    let d = h.start_breaks(&same, Some([9; 16]), Conflict::default(), true);
    assert!(d.breaks.is_empty() && !d.wait);
    let d = h.start_breaks(&REQ, Some([8; 16]), Conflict::default(), true);
    assert_eq!(d.breaks.len(), 1);
    assert_eq!(lease_break(&d.breaks[0]), (RWH, RH, 2, true));
    assert_eq!(
        h.lease_status([1; 16], [9; 16]),
        Some(LeaseStatus::Breaking {
            from: RWH,
            to: RH,
            required: RH
        })
    );
    assert_eq!(
        h.ack_lease([1; 16], [9; 16], LeaseState::RW).err(),
        Some(NtStatus::REQUEST_NOT_ACCEPTED)
    );
    assert_eq!(
        h.ack_lease([1; 16], [7; 16], R).err(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let (acked, d) = h.ack_lease([1; 16], [9; 16], R).unwrap();
    assert_eq!(acked, R);
    assert!(d.breaks.is_empty() && d.wake);
    assert_eq!(
        h.ack_lease([1; 16], [9; 16], R).err(),
        Some(NtStatus::UNSUCCESSFUL)
    );
    assert!(h.release(1).wake);
    assert_eq!(h.lease_state([1; 16], [9; 16]), None);
}

#[test]
fn sharing_conflict_breaks_handle_caching_only() {
    let mut h = Holders::default();
    rwh(&mut h);
    let d = h.start_breaks(&REQ, Some([8; 16]), SHARING, true);
    assert_eq!(lease_break(&d.breaks[0]), (RWH, LeaseState::RW, 2, true));
    assert!(d.wait);
    // The lease's own key does not wait for its break; others do.
    assert!(!h.any_breaking_except(Some(([1; 16], [9; 16]))));
    assert!(h.any_breaking_except(Some(([2; 16], [8; 16]))));
    let l = h.lease_of(1).unwrap();
    assert_eq!(l.lease_flags, LeaseFlags::BREAK_IN_PROGRESS);
    assert_eq!(l.epoch, 2);
    assert_eq!(l.lease_state, RWH);
    // A lease stat open breaks nothing.
    let _ = h.ack_lease([1; 16], [9; 16], LeaseState::RW).unwrap();
    let stat = Conflict {
        lease_stat: true,
        ..Conflict::default()
    };
    let d = h.start_breaks(&REQ, Some([8; 16]), stat, true);
    assert!(d.breaks.is_empty() && !d.wait);
    assert!(is_lease_stat_open(AccessMask::READ_CONTROL));
    assert!(!is_lease_stat_open(AccessMask::empty()));
    assert!(!is_lease_stat_open(AccessMask(0x0002_0001)));
    assert!(is_stat_open(AccessMask(0x0010_0080)) && !is_stat_open(AccessMask(0x0010_0081)));
}

#[test]
fn conflicts_during_a_break_continue_it_step_by_step() {
    let mut h = Holders::default();
    rwh(&mut h);
    // A plain open takes W and waits for it.
    let d = h.start_breaks(&REQ, None, Conflict::default(), true);
    assert!(d.wait);
    assert_eq!(lease_break(&d.breaks[0]), (RWH, RH, 2, true));
    // An overwrite while that break is in progress sends nothing new but waits.
    let d = h.start_breaks(&REQ, None, OVERWRITE, true);
    assert!(d.breaks.is_empty() && d.wait);
    // The acknowledgment to RH starts the next step, RH -> R, same epoch.
    let (acked, d) = h.ack_lease([1; 16], [9; 16], RH).unwrap();
    assert_eq!(acked, RH);
    assert_eq!(lease_break(&d.breaks[0]), (RH, R, 2, true));
    let l = h.lease_of(1).unwrap();
    assert_eq!(l.lease_state, RH);
    assert_eq!(l.lease_flags, LeaseFlags::BREAK_IN_PROGRESS);
    // Both waiting opens keep waiting while the lease is breaking.
    assert!(h.start_breaks(&REQ, None, Conflict::default(), false).wait);
    assert!(h.start_breaks(&REQ, None, OVERWRITE, false).wait);
    // The acknowledgment to R ends in R -> NONE without acknowledgment.
    let (acked, d) = h.ack_lease([1; 16], [9; 16], R).unwrap();
    assert_eq!(acked, R);
    assert_eq!(lease_break(&d.breaks[0]), (R, NONE, 2, false));
    assert_eq!(h.lease_state([1; 16], [9; 16]), Some(NONE));
    assert!(!h.breaking(1));
    let d = h.start_breaks(&REQ, None, OVERWRITE, false);
    assert!(d.breaks.is_empty() && !d.wait);
}

#[test]
fn overwrite_next_to_read_handle_lease_does_not_wait() {
    let mut h = Holders::default();
    lease(&mut h, 9, 1, RH, 2);
    let d = h.start_breaks(&REQ, None, OVERWRITE, true);
    assert!(!d.wait);
    assert_eq!(lease_break(&d.breaks[0]), (RH, NONE, 2, true));
    // A second one on its first attempt neither breaks again nor waits; one that
    // has waited before waits for the break to finish.
    let d = h.start_breaks(&REQ, None, OVERWRITE, true);
    assert!(d.breaks.is_empty() && !d.wait);
    assert!(h.start_breaks(&REQ, None, OVERWRITE, false).wait);
    // The acknowledgment to NONE leaves nothing to continue.
    let (acked, d) = h.ack_lease([1; 16], [9; 16], NONE).unwrap();
    assert_eq!(acked, NONE);
    assert!(d.breaks.is_empty());
}

#[test]
fn rename_breaks_handle_caching_of_other_leases_only() {
    let mut h = Holders::default();
    lease(&mut h, 9, 1, RH, 2);
    lease(&mut h, 5, 2, RH, 1);
    // Open 1 renames: the lease of open 2 goes RH -> R and is waited for.
    let d = h.break_handles_except(1);
    assert!(d.wait);
    assert_eq!(d.breaks.len(), 1);
    let Break::Lease { key, .. } = d.breaks[0] else {
        panic!("{:?}", d.breaks[0]);
    };
    assert_eq!(key, [5; 16]);
    assert_eq!(lease_break(&d.breaks[0]), (RH, R, 0, true));
    // Asking again sends nothing more and still waits.
    let d = h.break_handles_except(1);
    assert!(d.breaks.is_empty() && d.wait);
    let _ = h.ack_lease([1; 16], [5; 16], R).unwrap();
    let d = h.break_handles_except(1);
    assert!(d.breaks.is_empty() && !d.wait);
    assert_eq!(h.lease_state([1; 16], [9; 16]), Some(RH));
}

#[test]
fn a_write_breaks_level2_and_read_leases_of_others() {
    let mut h = Holders::default();
    holder(&mut h, 1, OplockLevel::II);
    lease(&mut h, 5, 2, R, 1);
    lease(&mut h, 6, 3, RH, 2);
    lease(&mut h, 7, 4, R, 1);
    // Open 4 writes: LEVEL_II and R go to NONE without acknowledgment, RH needs one;
    // the writer's own lease stays.
    let d = h.break_level2(4);
    assert!(!d.wait && !d.wake);
    assert_eq!(d.breaks.len(), 3);
    assert_eq!(oplock_break(&d.breaks[0]), OplockLevel::NONE);
    assert_eq!(lease_break(&d.breaks[1]), (R, NONE, 0, false));
    assert_eq!(lease_break(&d.breaks[2]), (RH, NONE, 2, true));
    assert_eq!(h.oplock_level(1), OplockLevel::NONE);
    assert_eq!(h.lease_state([1; 16], [5; 16]), Some(NONE));
    assert_eq!(h.lease_state([1; 16], [7; 16]), Some(R));
    assert!(h.breaking(3));
}

#[test]
fn timeout_leaves_breaking_holders_with_nothing() {
    let mut h = Holders::default();
    rwh(&mut h);
    holder(&mut h, 2, OplockLevel::BATCH);
    let d = h.start_breaks(&REQ, None, Conflict::default(), true);
    assert_eq!(d.breaks.len(), 2);
    assert!(d.wait);
    assert!(h.force_breaks().wake);
    assert_eq!(
        h.lease_status([1; 16], [9; 16]),
        Some(LeaseStatus::Held(NONE))
    );
    assert_eq!(h.oplock_level(2), OplockLevel::NONE);
    // A late acknowledgment is UNSUCCESSFUL.
    assert_eq!(
        h.ack_lease([1; 16], [9; 16], RH).err(),
        Some(NtStatus::UNSUCCESSFUL)
    );
}

fn opens(entries: &[(u64, u32)]) -> Vec<OpenAccess> {
    entries
        .iter()
        .map(|&(entry_id, access)| OpenAccess {
            entry_id,
            access: AccessMask(access),
        })
        .collect()
}

const RW_ACCESS: u32 = 0x0012_019F;

fn lease_request(key: u8, state: LeaseState, version: u8) -> OplockRequest {
    OplockRequest {
        level: OplockLevel::LEASE,
        lease: Some(LeaseContext {
            version,
            lease_key: [key; 16],
            lease_state: state,
            ..LeaseContext::default()
        }),
    }
}

#[test]
fn grants_of_oplocks() {
    let mut h = Holders::default();
    let batch = OplockRequest {
        level: OplockLevel::BATCH,
        lease: None,
    };
    // The only open gets BATCH; a second one LEVEL_II once BATCH is broken to II.
    let (g, new) = h.grant(
        &REQ,
        1,
        FileId::default(),
        false,
        &batch,
        &opens(&[(1, RW_ACCESS)]),
    );
    assert_eq!((g.level, g.lease, new), (OplockLevel::BATCH, None, None));
    let all = opens(&[(1, RW_ACCESS), (2, RW_ACCESS)]);
    let (g, _) = h.grant(&REQ, 2, FileId::default(), false, &batch, &all);
    assert_eq!(g.level, OplockLevel::NONE, "nothing next to a BATCH holder");
    let _ = h.start_breaks(&REQ, None, Conflict::default(), true);
    let _ = h.ack_oplock(1, OplockLevel::II);
    let (g, _) = h.grant(&REQ, 3, FileId::default(), false, &batch, &all);
    assert_eq!(g.level, OplockLevel::II);
    // Directories and undefined levels get nothing.
    let mut d = Holders::default();
    let (g, _) = d.grant(&REQ, 1, FileId::default(), true, &batch, &opens(&[(1, 0)]));
    assert_eq!(g.level, OplockLevel::NONE);
    let odd = OplockRequest {
        level: OplockLevel(3),
        lease: None,
    };
    let (g, _) = d.grant(&REQ, 2, FileId::default(), false, &odd, &opens(&[(2, 0)]));
    assert_eq!(g.level, OplockLevel::NONE);
}

#[test]
fn grants_of_leases() {
    let mut h = Holders::default();
    let only = opens(&[(1, RW_ACCESS)]);
    let (g, new) = h.grant(
        &REQ,
        1,
        FileId::default(),
        false,
        &lease_request(4, RWH, 2),
        &only,
    );
    let l = g.lease.unwrap();
    assert_eq!(g.level, OplockLevel::LEASE);
    assert_eq!((l.lease_state, l.epoch, l.version), (RWH, 1, 2));
    assert_eq!(new, Some(([2; 16], [4; 16])));
    // A second open with the same key joins the lease (no new index entry).
    let two = opens(&[(1, RW_ACCESS), (2, RW_ACCESS)]);
    let (g, new) = h.grant(
        &REQ,
        2,
        FileId::default(),
        false,
        &lease_request(4, RWH, 2),
        &two,
    );
    assert_eq!(g.lease.unwrap().lease_state, RWH);
    assert_eq!(new, None);
    // Another key next to other opens gets no W.
    let three = opens(&[(1, RW_ACCESS), (2, RW_ACCESS), (3, RW_ACCESS)]);
    let (g, _) = h.grant(
        &REQ,
        3,
        FileId::default(),
        false,
        &lease_request(5, RWH, 1),
        &three,
    );
    let l = g.lease.unwrap();
    assert_eq!((l.lease_state, l.epoch, l.version), (RH, 0, 1));
    // An upgrade to a strict superset without W is granted next to others.
    let mut u = Holders::default();
    let _ = u.grant(
        &REQ,
        1,
        FileId::default(),
        false,
        &lease_request(6, R, 2),
        &two,
    );
    let (g, _) = u.grant(
        &REQ,
        2,
        FileId::default(),
        false,
        &lease_request(6, RH, 2),
        &two,
    );
    let l = g.lease.unwrap();
    assert_eq!((l.lease_state, l.epoch), (RH, 2));
    // ... but not to W while another open (4) is not in the lease.
    let four = opens(&[
        (1, RW_ACCESS),
        (2, RW_ACCESS),
        (3, RW_ACCESS),
        (4, RW_ACCESS),
    ]);
    let (g, _) = u.grant(
        &REQ,
        3,
        FileId::default(),
        false,
        &lease_request(6, RWH, 2),
        &four,
    );
    assert_eq!(g.lease.unwrap().lease_state, RH);
    // When every open of the file is in the lease, W is granted too.
    let (g, _) = u.grant(
        &REQ,
        5,
        FileId::default(),
        false,
        &lease_request(6, RWH, 2),
        &three,
    );
    let l = g.lease.unwrap();
    assert_eq!((l.lease_state, l.epoch), (RWH, 3));
    // Releasing every open of a lease forgets it.
    let _ = u.release(1);
    let _ = u.release(2);
    assert!(u.lease_state([2; 16], [6; 16]).is_some());
    let _ = u.release(3);
    assert!(u.lease_state([2; 16], [6; 16]).is_some());
    let _ = u.release(5);
    assert_eq!(u.lease_state([2; 16], [6; 16]), None);
}

/// Clients on the other side of the core: each acknowledges every break that needs
/// it, as a well-behaved SMB client does (the lease to what it is asked, the oplock to
/// the level it is given). Drives the conversation until the opener may go on.
struct Pair {
    file: Holders,
    delivered: Vec<Break>,
}

impl Pair {
    fn new(file: Holders) -> Pair {
        Pair {
            file,
            delivered: Vec::new(),
        }
    }

    /// The opener's CREATE: tries, and while it must wait lets the clients
    /// acknowledge what they got, then tries again. Returns the attempts it took.
    fn open(&mut self, new: &Requester, c: Conflict) -> usize {
        let mut first = true;
        for attempt in 1..=16 {
            let d = self.file.start_breaks(new, None, c, first);
            first = false;
            let mut pending = d.breaks;
            if !d.wait {
                self.delivered.extend(pending);
                return attempt;
            }
            // Every acknowledgment may bring the next step of the break.
            while let Some(b) = pending.pop() {
                self.delivered.push(b);
                pending.extend(self.acknowledge(&b));
            }
        }
        panic!("the open still waits after 16 attempts");
    }

    fn acknowledge(&mut self, b: &Break) -> Vec<Break> {
        match *b {
            Break::Oplock { to, .. } => {
                let entry = self
                    .file
                    .oplocks
                    .iter()
                    .find(|o| o.breaking_to == Some(to))
                    .map(|o| o.entry_id);
                if let Some(e) = entry {
                    let (r, d) = self.file.ack_oplock(e, to);
                    assert_eq!(r, Ok(to));
                    assert!(d.wake);
                }
                Vec::new()
            }
            Break::Lease {
                target,
                key,
                to,
                ack_required: true,
                ..
            } => {
                let guid = target.client_guid.expect("a lease break names its client");
                let (acked, d) = self.file.ack_lease(guid, key, to).unwrap();
                assert_eq!(acked, to);
                assert!(d.wake);
                d.breaks
            }
            Break::Lease { .. } => Vec::new(),
        }
    }
}

#[test]
fn pair_overwrite_walks_a_rwh_lease_down_to_none() {
    let mut h = Holders::default();
    rwh(&mut h);
    let mut p = Pair::new(h);
    let attempts = p.open(&REQ, OVERWRITE);
    let steps: Vec<_> = p.delivered.iter().map(lease_break).collect();
    // One notification RWH -> NONE, acknowledged in one go.
    assert_eq!(steps, vec![(RWH, NONE, 2, true)]);
    assert_eq!(attempts, 2);
    assert_eq!(p.file.lease_state([1; 16], [9; 16]), Some(NONE));
}

#[test]
fn pair_open_then_overwrite_continue_the_break_step_by_step() {
    let mut h = Holders::default();
    rwh(&mut h);
    let mut p = Pair::new(h);
    // A plain open breaks W; while that break is outstanding an overwrite arrives.
    let d = p.file.start_breaks(&REQ, None, Conflict::default(), true);
    assert!(d.wait);
    p.delivered.extend(d.breaks);
    let d = p.file.start_breaks(&REQ, None, OVERWRITE, true);
    assert!(d.breaks.is_empty() && d.wait);
    // The client acknowledges RH; the core continues RH -> R -> NONE, one step per
    // acknowledgment, all with the epoch of the first notification.
    let first = p.delivered[0];
    let next = p.acknowledge(&first);
    assert_eq!(next.len(), 1);
    let after = p.acknowledge(&next[0]);
    assert_eq!(after.len(), 1);
    assert_eq!(lease_break(&next[0]), (RH, R, 2, true));
    assert_eq!(lease_break(&after[0]), (R, NONE, 2, false));
    assert!(p.acknowledge(&after[0]).is_empty());
    let d = p.file.start_breaks(&REQ, None, OVERWRITE, false);
    assert!(!d.wait && d.breaks.is_empty());
}

#[test]
fn pair_batch_holder_and_sharing_conflict() {
    let mut h = Holders::default();
    holder(&mut h, 1, OplockLevel::BATCH);
    let mut p = Pair::new(h);
    assert_eq!(p.open(&REQ, SHARING), 2);
    assert_eq!(p.delivered.len(), 1);
    assert_eq!(oplock_break(&p.delivered[0]), OplockLevel::II);
    assert_eq!(p.file.oplock_level(1), OplockLevel::II);
    // Once at LEVEL_II a further open waits for nothing.
    assert_eq!(p.open(&REQ, SHARING), 1);
}
