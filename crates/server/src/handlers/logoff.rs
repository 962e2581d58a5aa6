//! LOGOFF ([MS-SMB2] 3.3.5.6).

use smbx_wire::simple::{decode_simple, encode_simple};
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::ServerState;

/// Handles LOGOFF: tears the session down; the response is still signed with its key.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    decode_simple(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let sid = ctx.session()?.id;
    ctx.conn.pending.cancel_all(Some(sid));
    ctx.conn.sessions.lock().retain(|s| *s != sid);
    // Durable opens outlive the session for their timeout (handlers/create).
    crate::state::open::preserve_durable_opens_of_session(ctx.server, sid);
    destroy_session(ctx.server, sid);
    Ok(Response::ok(encode_simple()))
}

/// Removes a session with its trees and opens.
pub fn destroy_session(server: &ServerState, session_id: u64) {
    if let Some(s) = server.sessions.remove(session_id) {
        s.trees.lock().trees.clear();
    }
    server.opens.remove_where(|o| o.session_id == session_id);
}
