//! SMB2 LOCK ([MS-SMB2] 3.3.5). Not implemented yet: answers STATUS_NOT_SUPPORTED.

use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request};

/// Handles LOCK.
pub async fn handle(_ctx: &mut Ctx<'_>, _req: &Request<'_>) -> HandlerResult {
    Err(NtStatus::NOT_SUPPORTED)
}
