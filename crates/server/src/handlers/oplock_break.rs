//! SMB2 OPLOCK_BREAK acknowledgments ([MS-SMB2] 3.3.5.22): the oplock form (24 bytes,
//! by FileId) and the lease form (36 bytes, by LeaseKey of this client).

use smbx_wire::oplock::{break_ack_structure_size, LeaseBreakAck, OplockBreak, OplockLevel};
use smbx_wire::{Dialect, NtStatus};

use super::{Ctx, HandlerResult, Request, Response};

/// Handles an OPLOCK_BREAK acknowledgment.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let size = break_ack_structure_size(req.msg)?;
    match size {
        24 => {
            let ack = OplockBreak::decode(req.msg)?;
            let id = ack.file_id;
            let open = ctx.lookup_open(id)?;
            let f = open.as_file().ok_or(NtStatus::INVALID_PARAMETER)?;
            let requested = ack.oplock_level;
            if requested == OplockLevel::LEASE {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let level = f.file.oplocks.ack_oplock(f.entry_id, requested)?;
            Ok(Response::ok(
                OplockBreak {
                    oplock_level: level,
                    file_id: ack.file_id,
                }
                .encode(),
            ))
        }
        36 => {
            if ctx.dialect() < Dialect::SMB2_1 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let ack = LeaseBreakAck::decode(req.msg)?;
            let guid = ctx.conn.negotiate.lock().client_guid;
            let file = ctx
                .server
                .leases
                .get(guid, ack.lease_key)
                .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
            let state = crate::breaks::acknowledge_lease_break(
                ctx.server,
                &file,
                guid,
                ack.lease_key,
                ack.lease_state,
            )?;
            Ok(Response::ok(
                LeaseBreakAck {
                    flags: 0,
                    lease_key: ack.lease_key,
                    lease_state: state,
                    lease_duration: 0,
                }
                .encode(),
            ))
        }
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}
