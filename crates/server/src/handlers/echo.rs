//! SMB2 ECHO ([MS-SMB2] 3.3.5.17).

use smbx_wire::simple::{decode_simple, encode_simple};

use super::{Ctx, HandlerResult, Request, Response};

/// Handles ECHO: an empty 4-byte answer.
pub async fn handle(_ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    decode_simple(req.msg)?;
    Ok(Response::ok(encode_simple()))
}
