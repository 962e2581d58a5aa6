//! SESSION_SETUP ([MS-SMB2] 3.3.5.5).

use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request};

/// Handles SESSION_SETUP.
pub async fn handle(_ctx: &mut Ctx<'_>, _req: &Request<'_>) -> HandlerResult {
    Err(NtStatus::NOT_SUPPORTED)
}
