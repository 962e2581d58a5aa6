//! SMB2 LOCK ([MS-SMB2] 3.3.5.14): byte-range locks through `state::locks`.
//!
//! - The first element decides the mode: if it is UNLOCK every element must be exactly
//!   UNLOCK; otherwise every element must be SHARED or EXCLUSIVE, optionally with
//!   FAIL_IMMEDIATELY (anything else: INVALID_PARAMETER); with more than one element
//!   every one must carry FAIL_IMMEDIATELY (only a lone lock may block).
//! - Unlocks are applied in order; the first that names no lock of this open fails
//!   with RANGE_NOT_LOCKED.
//! - Locks are taken all-or-nothing. A conflict fails with LOCK_NOT_GRANTED, except
//!   for a single lock without FAIL_IMMEDIATELY, which goes async (STATUS_PENDING)
//!   until the conflicting lock goes away; CANCEL ends it with STATUS_CANCELLED and
//!   closing its handle with RANGE_NOT_LOCKED.
//! - Lock sequence verification (replay detection): on durable opens (2.1 and later) and
//!   on every open of a 3.x connection that advertised multichannel, a request whose
//!   LockSequenceIndex (1..=64) and LockSequenceNumber repeat the last successful
//!   request of that bucket is answered SUCCESS without being applied (`state::locks`,
//!   [`LockSequences`]).

use std::sync::Arc;

use smbx_wire::lock::{
    encode_lock_response, LockRequest, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY,
    LOCKFLAG_SHARED, LOCKFLAG_UNLOCK,
};
use smbx_wire::negotiate::CAP_MULTI_CHANNEL;
use smbx_wire::AccessMask;
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::file::SharedFile;
use crate::state::locks::LockSequences;
use crate::state::FileOpen;

/// Whether LOCK requests on `f` get lock sequence verification ([MS-SMB2] 3.3.5.14):
/// never in 2.0.2; for durable opens; for every open of a 3.x connection whose
/// NEGOTIATE response carried SMB2_GLOBAL_CAP_MULTI_CHANNEL (as Samba; Windows limits
/// it to resilient and persistent opens).
fn verifies_lock_sequence(ctx: &Ctx<'_>, f: &FileOpen) -> bool {
    let dialect = ctx.dialect();
    if dialect <= Dialect::SMB2_0_2 || dialect == Dialect::WILDCARD {
        return false;
    }
    if f.durable.lock().is_some() {
        return true;
    }
    dialect >= Dialect::SMB3_0
        && ctx.conn.negotiate.lock().server_capabilities & CAP_MULTI_CHANNEL != 0
}

/// A LockSequence to remember once the request succeeds.
struct Sequence {
    seqs: Arc<LockSequences>,
    index: u32,
    number: u8,
}

impl Sequence {
    fn record(&self) {
        self.seqs.record(self.index, self.number);
    }
}

/// Handles LOCK.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let r = LockRequest::decode(req.msg)?;
    let id = r.file_id;
    let open = ctx.lookup_open(id)?;
    let f = open.as_file().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !f.access.intersects(
        AccessMask::FILE_READ_DATA | AccessMask::FILE_WRITE_DATA | AccessMask::FILE_APPEND_DATA,
    ) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let file = f.file.clone();
    let owner = f.entry_id;
    let seq = verifies_lock_sequence(ctx, f).then(|| Sequence {
        seqs: f.lock_sequences.clone(),
        index: r.lock_sequence_index,
        number: r.lock_sequence_number,
    });
    drop(open);
    if let Some(s) = &seq {
        if s.seqs.is_replay(s.index, s.number) {
            return Ok(Response::ok(encode_lock_response()));
        }
    }

    if r.locks[0].flags & LOCKFLAG_UNLOCK != 0 {
        for l in &r.locks {
            if l.flags != LOCKFLAG_UNLOCK {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            file.locks.unlock(owner, l.offset, l.length)?;
        }
        if let Some(s) = &seq {
            s.record();
        }
        return Ok(Response::ok(encode_lock_response()));
    }

    let mut wanted = Vec::with_capacity(r.locks.len());
    for l in &r.locks {
        let exclusive = match l.flags & !LOCKFLAG_FAIL_IMMEDIATELY {
            LOCKFLAG_SHARED => false,
            LOCKFLAG_EXCLUSIVE => true,
            _ => return Err(NtStatus::INVALID_PARAMETER),
        };
        // Only a lone lock may block.
        if r.locks.len() > 1 && l.flags & LOCKFLAG_FAIL_IMMEDIATELY == 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        wanted.push((l.offset, l.length, exclusive));
    }
    let blocking = r.locks.len() == 1 && r.locks[0].flags & LOCKFLAG_FAIL_IMMEDIATELY == 0;
    // Taking a byte-range lock breaks LEVEL_II oplocks (this open's too) and read
    // leases to NONE (smb2.oplock.brl1, brl3).
    crate::breaks::break_level2(ctx.server, &file, owner).await;
    match file.locks.try_lock_all(owner, &wanted) {
        Ok(()) => {
            if let Some(s) = &seq {
                s.record();
            }
            Ok(Response::ok(encode_lock_response()))
        }
        Err((_, NtStatus::LOCK_NOT_GRANTED)) if blocking => {
            let (offset, length, exclusive) = wanted[0];
            Ok(Response::pending(async move {
                let r = wait_for_lock(file, owner, offset, length, exclusive).await;
                if r.is_ok() {
                    if let Some(s) = &seq {
                        s.record();
                    }
                }
                r
            }))
        }
        Err((_, st)) => Err(st),
    }
}

fn alive(file: &SharedFile, owner: u64) -> bool {
    file.opens().iter().any(|o| o.entry_id == owner)
}

/// The async part of a blocking lock: retries whenever a lock of the file goes away.
async fn wait_for_lock(
    file: Arc<SharedFile>,
    owner: u64,
    offset: u64,
    length: u64,
    exclusive: bool,
) -> HandlerResult {
    loop {
        let changed = file.locks.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        match file.locks.try_lock(owner, offset, length, exclusive) {
            Ok(()) => {
                if !alive(&file, owner) {
                    // The handle closed meanwhile; its locks are gone with it.
                    file.locks.release_owner(owner);
                }
                return Ok(Response::ok(encode_lock_response()));
            }
            Err(NtStatus::LOCK_NOT_GRANTED) => {
                if !alive(&file, owner) {
                    return Err(NtStatus::RANGE_NOT_LOCKED);
                }
            }
            Err(st) => return Err(st),
        }
        changed.await;
    }
}
