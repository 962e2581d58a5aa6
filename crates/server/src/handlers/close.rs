//! SMB2 CLOSE ([MS-SMB2] 3.3.5.10): removes the open, runs delete-on-close when the
//! last open of a delete-pending file goes away ([MS-FSA] 2.1.5.4), and tells the other
//! modules (oplocks, byte-range locks, change notify) through [`on_close`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smbx_wire::close::{CloseRequest, CloseResponse, CLOSE_FLAG_POSTQUERY_ATTRIB};
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::{Open, OpenKind, ServerState};

/// Hook for other modules when an open goes away (explicit CLOSE). Oplock/lease
/// release, byte-range lock release and pending CHANGE_NOTIFY cleanup belong here.
pub fn on_close(_server: &Arc<ServerState>, _open: &Arc<Open>) {}

/// Handles CLOSE.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let c = CloseRequest::decode(req.msg)?;
    let open = ctx.lookup_open(c.file_id)?;
    if ctx.server.opens.remove(open.file_id).is_none() {
        return Err(NtStatus::FILE_CLOSED);
    }
    on_close(ctx.server, &open);
    let mut resp = CloseResponse::default();
    if let OpenKind::File(f) = &open.kind {
        let _ = f.close();
        let info = if c.flags & CLOSE_FLAG_POSTQUERY_ATTRIB != 0 {
            // After the close: its write-time stamp is part of the answer.
            f.handle.stat().ok().map(|mut i| {
                let t = f.final_write_time.load(Ordering::Acquire);
                if t != 0 {
                    if i.change_time == i.last_write_time {
                        i.change_time = t;
                    }
                    i.last_write_time = t;
                }
                i
            })
        } else {
            None
        };
        if let Some(info) = info {
            resp = CloseResponse {
                flags: CLOSE_FLAG_POSTQUERY_ATTRIB,
                creation_time: info.creation_time,
                last_access_time: info.last_access_time,
                last_write_time: info.last_write_time,
                change_time: info.change_time,
                allocation_size: if info.is_dir { 0 } else { info.allocation_size },
                end_of_file: if info.is_dir { 0 } else { info.size },
                file_attributes: info.attributes,
            };
        }
    }
    Ok(Response::ok(resp.encode()))
}
