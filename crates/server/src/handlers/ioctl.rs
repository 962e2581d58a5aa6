//! SMB2 IOCTL ([MS-SMB2] 3.3.5.15): request checks, then one submodule per family of
//! FSCTLs. Every FSCTL produces an output buffer that is bounded by MaxOutputResponse
//! here, once, whatever the submodule returned.

mod copychunk;
mod misc;
mod netif;
mod pipe;
mod sparse;

use std::sync::Arc;

use smbx_wire::ioctl::{fsctl, IoctlRequest, IoctlResponse, SMB2_0_IOCTL_IS_FSCTL};
use smbx_wire::{AccessMask, NtStatus};

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::{FileOpen, Open};

pub use netif::{local_interfaces, InterfaceOptions};

/// What an FSCTL implementation returns: a status (SUCCESS, BUFFER_OVERFLOW, or an
/// error that still carries an IOCTL response body, as copychunk does) and the output.
pub(crate) struct FsctlOut {
    pub status: NtStatus,
    pub output: Vec<u8>,
}

impl FsctlOut {
    /// SUCCESS with `output`.
    pub fn ok(output: Vec<u8>) -> FsctlOut {
        FsctlOut {
            status: NtStatus::SUCCESS,
            output,
        }
    }
}

/// Result of one FSCTL: `Err` is a plain error response.
pub(crate) type FsctlResult = Result<FsctlOut, NtStatus>;

/// The FSCTLs that do not name an open (FileId all-ones is allowed).
fn is_connection_level(code: u32) -> bool {
    matches!(
        code,
        fsctl::VALIDATE_NEGOTIATE_INFO
            | fsctl::QUERY_NETWORK_INTERFACE_INFO
            | fsctl::DFS_GET_REFERRALS
            | fsctl::DFS_GET_REFERRALS_EX
            | fsctl::PIPE_WAIT
    )
}

/// Handles IOCTL.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let Ok(io) = IoctlRequest::decode(req.msg) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    // [MS-SMB2] 3.3.5.15: sizes against MaxTransactSize, then the credit charge.
    let max_transact = ctx.config().global.smb2_max_trans as u64;
    let in_total = io.input.len() as u64 + io.output.len() as u64;
    let resp_total = io.max_input_response as u64 + io.max_output_response as u64;
    if io.input.len() as u64 > max_transact
        || io.max_output_response as u64 > max_transact
        || io.max_input_response as u64 > max_transact
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.check_credit_charge(in_total.max(resp_total).min(usize::MAX as u64) as usize)?;
    if io.flags != SMB2_0_IOCTL_IS_FSCTL {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let file_id = io.file_id;
    let max_out = io.max_output_response as usize;
    let result = if is_connection_level(io.ctl_code) {
        // These name no open: any FileId but all-ones is INVALID_PARAMETER (as
        // Windows and Samba answer; smbtorture smb2.ioctl.bug14788).
        if !file_id.is_related() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        connection_fsctl(ctx, &io)
    } else {
        let open = ctx.lookup_open(file_id)?;
        open_fsctl(ctx, &io, &open).await
    };
    let out = result?;
    let mut status = out.status;
    let mut output = out.output;
    if output.len() > max_out {
        // Only the pipe and range FSCTLs produce variable output, and they fit it
        // themselves; anything else too large is reported as an overflow.
        output.truncate(max_out);
        if status == NtStatus::SUCCESS {
            status = NtStatus::BUFFER_OVERFLOW;
        }
    }
    let body = IoctlResponse {
        ctl_code: io.ctl_code,
        file_id: io.file_id,
        output,
    }
    .encode();
    Ok(Response::with_status(status, body))
}

/// FSCTLs addressed to the connection rather than an open.
fn connection_fsctl(ctx: &mut Ctx<'_>, io: &IoctlRequest<'_>) -> FsctlResult {
    match io.ctl_code {
        fsctl::VALIDATE_NEGOTIATE_INFO => {
            let out = super::validate_negotiate::validate_negotiate_info(ctx.conn, io.input)?;
            if out.len() > io.max_output_response as usize {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            Ok(FsctlOut::ok(out))
        }
        fsctl::QUERY_NETWORK_INTERFACE_INFO => netif::query(ctx, io),
        // No DFS: as Samba without "host msdfs".
        fsctl::DFS_GET_REFERRALS | fsctl::DFS_GET_REFERRALS_EX => Err(NtStatus::FS_DRIVER_REQUIRED),
        // FSCTL_PIPE_WAIT names the pipe in its input; our pipes are always ready.
        fsctl::PIPE_WAIT => {
            if ctx.tree()?.share.is_ipc() {
                Ok(FsctlOut::ok(Vec::new()))
            } else {
                Err(NtStatus::INVALID_DEVICE_REQUEST)
            }
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// FSCTLs on an open (file, directory or pipe).
async fn open_fsctl(ctx: &mut Ctx<'_>, io: &IoctlRequest<'_>, open: &Arc<Open>) -> FsctlResult {
    if let Some(p) = open.as_pipe() {
        return match io.ctl_code {
            fsctl::PIPE_TRANSCEIVE => pipe::transceive(p, io),
            fsctl::PIPE_PEEK => pipe::peek(p, io),
            _ => Err(NtStatus::NOT_SUPPORTED),
        };
    }
    let Some(f) = open.as_file() else {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    };
    match io.ctl_code {
        fsctl::PIPE_TRANSCEIVE | fsctl::PIPE_PEEK => Err(NtStatus::INVALID_DEVICE_REQUEST),
        fsctl::SRV_REQUEST_RESUME_KEY => copychunk::request_resume_key(ctx, open, f),
        fsctl::SRV_COPYCHUNK | fsctl::SRV_COPYCHUNK_WRITE => {
            copychunk::copychunk(ctx, io, open, f).await
        }
        fsctl::SET_SPARSE => sparse::set_sparse(f, io),
        fsctl::SET_ZERO_DATA => sparse::set_zero_data(ctx, open, f, io),
        fsctl::QUERY_ALLOCATED_RANGES => sparse::query_allocated_ranges(f, io),
        fsctl::SRV_ENUMERATE_SNAPSHOTS => misc::enumerate_snapshots(io),
        fsctl::GET_OBJECT_ID | fsctl::CREATE_OR_GET_OBJECT_ID => misc::object_id(f, io),
        fsctl::SET_OBJECT_ID | fsctl::DELETE_OBJECT_ID => Err(NtStatus::ACCESS_DENIED),
        fsctl::GET_REPARSE_POINT => Err(NtStatus::NOT_A_REPARSE_POINT),
        fsctl::SET_REPARSE_POINT | fsctl::DELETE_REPARSE_POINT => Err(NtStatus::ACCESS_DENIED),
        fsctl::GET_COMPRESSION => misc::get_compression(io),
        fsctl::SET_COMPRESSION => misc::set_compression(f, io),
        fsctl::FILE_LEVEL_TRIM => misc::file_level_trim(f, io),
        fsctl::IS_PATHNAME_VALID => Ok(FsctlOut::ok(Vec::new())),
        fsctl::GET_INTEGRITY_INFORMATION | fsctl::SET_INTEGRITY_INFORMATION => {
            Err(NtStatus::INVALID_DEVICE_REQUEST)
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// True if `f` was granted any of `bits`.
pub(crate) fn granted(f: &FileOpen, bits: AccessMask) -> bool {
    f.access.intersects(bits)
}
