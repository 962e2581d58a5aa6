//! LOGOFF ([MS-SMB2] 3.3.5.6).

use smbx_wire::simple::{decode_simple, encode_simple};

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::{OpenKind, ServerState, Session};

/// Handles LOGOFF: tears the session down; the response is still signed with its key.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    decode_simple(req.msg)?;
    let session = ctx.session()?.clone();
    // Durable opens outlive the session for their timeout (handlers/create).
    crate::state::open::preserve_durable_opens_of_session(ctx.server, session.id);
    // LOGOFF on any channel ends the session on all of them.
    end_session(ctx.server, &session);
    Ok(Response::ok(encode_simple()))
}

/// Ends a session on every channel: closing the opens first completes what waits
/// on them the way a CLOSE would (a blocking LOCK with RANGE_NOT_LOCKED, or granted
/// if the lock it waited on went first; a CHANGE_NOTIFY with NOTIFY_CLEANUP:
/// smb2.lock.cancel-logoff, smb2.notify.logoff); only what is still pending after
/// that is cancelled (an async completion that is ready wins over its cancel,
/// respond.rs).
pub fn end_session(server: &ServerState, session: &Session) {
    let sid = session.id;
    let conns = session.channel_conns();
    destroy_session(server, sid);
    for c in conns.iter().filter_map(|id| server.connection(*id)) {
        c.sessions.lock().retain(|s| *s != sid);
        c.pending.cancel_all(Some(sid));
    }
}

/// Removes a session with its trees and opens; every file open is closed now (its
/// byte-range locks released, waiters on it woken), not when its last reference drops.
pub fn destroy_session(server: &ServerState, session_id: u64) {
    if let Some(s) = server.sessions.remove(session_id) {
        s.trees.lock().trees.clear();
    }
    for open in server.opens.remove_where(|o| o.session_id == session_id) {
        if let OpenKind::File(f) = &open.kind {
            let _ = f.close();
        }
    }
}
