//! TREE_DISCONNECT ([MS-SMB2] 3.3.5.8).

use smbx_wire::simple::{decode_simple, encode_simple};
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};

/// Handles TREE_DISCONNECT: removes the tree and closes its opens.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    decode_simple(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = ctx.session()?.clone();
    let tree = ctx.tree()?.clone();
    if session.trees.lock().trees.remove(&tree.id).is_none() {
        return Err(NtStatus::NETWORK_NAME_DELETED);
    }
    ctx.server
        .opens
        .remove_where(|o| o.session_id == session.id && o.tree_id == tree.id);
    Ok(Response::ok(encode_simple()))
}
