//! SMB2 CHANGE_NOTIFY ([MS-SMB2] 3.3.5.19): directory change notifications from
//! `state::notify` (inotify-backed).
//!
//! The first request on a directory handle starts watching (its CompletionFilter and
//! WATCH_TREE; later requests update the filter). Changes buffered since the last
//! response complete a request at once; otherwise it goes async. Completion:
//! SUCCESS with FILE_NOTIFY_INFORMATION entries; NOTIFY_ENUM_DIR (empty) when they
//! overflowed the buffer or do not fit OutputBufferLength; NOTIFY_CLEANUP when the
//! handle closes; CANCELLED on CANCEL. A non-directory handle is INVALID_PARAMETER.

use std::os::fd::AsFd;

use smbx_wire::change_notify::{
    encode_change_notify_response, encode_notify_entries, ChangeNotifyRequest, CHANGE_ALL,
    WATCH_TREE,
};
use smbx_wire::AccessMask;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::notify::NotifyOutcome;

/// Handles CHANGE_NOTIFY.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let r = ChangeNotifyRequest::decode(req.msg)?;
    let id = r.file_id;
    let open = ctx.lookup_open(id)?;
    let f = open.as_file().ok_or(NtStatus::INVALID_PARAMETER)?;
    if !f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !f.access.intersects(AccessMask::FILE_LIST_DIRECTORY) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let max = ctx.config().global.smb2_max_trans;
    if max != 0 && r.output_buffer_length > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.check_credit_charge(r.output_buffer_length as usize)?;
    // Unknown or no filter bits are accepted (Windows): such a request waits until
    // cancelled or the handle closes (smb2.notify.mask).
    let filter = r.completion_filter & CHANGE_ALL;
    let max_len = f.notify.arm(
        f.handle.file().as_fd(),
        filter,
        r.flags & WATCH_TREE != 0,
        r.output_buffer_length,
        &f.file.notify_sinks,
    );
    if let Some(o) = f.notify.ready(max_len) {
        return Ok(respond(o));
    }
    let waiter = f.notify.waiter(max_len);
    drop(open);
    Ok(Response::pending(async move { Ok(respond(waiter.await)) }))
}

fn respond(o: NotifyOutcome) -> Response {
    match o {
        NotifyOutcome::Changes(e) => {
            Response::ok(encode_change_notify_response(&encode_notify_entries(&e)))
        }
        NotifyOutcome::EnumDir => Response::with_status(
            NtStatus::NOTIFY_ENUM_DIR,
            encode_change_notify_response(&[]),
        ),
        NotifyOutcome::Cleanup => {
            Response::with_status(NtStatus::NOTIFY_CLEANUP, encode_change_notify_response(&[]))
        }
        NotifyOutcome::DeletePending => Response::error(NtStatus::DELETE_PENDING),
    }
}
