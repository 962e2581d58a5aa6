//! SMB2 FLUSH ([MS-SMB2] 3.3.5.11): fsync of the file; needs write access.

use smbx_wire::close::{encode_flush_response, FlushRequest};
use smbx_wire::AccessMask;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::OpenKind;

/// Handles FLUSH.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let f = FlushRequest::decode(req.msg)?;
    let open = ctx.lookup_open(f.file_id)?;
    let OpenKind::File(file) = &open.kind else {
        return Ok(Response::ok(encode_flush_response()));
    };
    if !file
        .access
        .intersects(AccessMask::FILE_WRITE_DATA | AccessMask::FILE_APPEND_DATA)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let handle = file.handle.clone();
    super::read::run_blocking(true, move || handle.flush()).await?;
    // A pending delayed write-time update happens now.
    file.file
        .times
        .flush_pending(smbx_wire::time::now_filetime());
    Ok(Response::ok(encode_flush_response()))
}
