//! TREE_DISCONNECT ([MS-SMB2] 3.3.5.8).

use smbx_wire::simple::{decode_simple, encode_simple};
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::OpenKind;

/// Handles TREE_DISCONNECT: removes the tree and closes its opens.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    decode_simple(req.msg)?;
    let session = ctx.session()?.clone();
    let tree = ctx.tree()?.clone();
    if session.trees.lock().trees.remove(&tree.id).is_none() {
        return Err(NtStatus::NETWORK_NAME_DELETED);
    }
    // Closed now, not when the last reference drops (a pending operation may still
    // hold one): delete-on-close and byte-range locks take effect before the response.
    for open in ctx
        .server
        .opens
        .remove_where(|o| o.session_id == session.id && o.tree_id == tree.id)
    {
        if let OpenKind::File(f) = &open.kind {
            let _ = f.close();
        }
    }
    Ok(Response::ok(encode_simple()))
}
