//! SMB2 CANCEL ([MS-SMB2] 3.3.5.16). The dispatcher handles CANCEL itself before
//! credit checks and never answers it; this entry exists only for completeness.

use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request};

/// Never reached: see `dispatch::cancel`.
pub async fn handle(_ctx: &mut Ctx<'_>, _req: &Request<'_>) -> HandlerResult {
    Err(NtStatus::INVALID_PARAMETER)
}
