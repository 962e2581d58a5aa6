//! FSCTL_PIPE_TRANSCEIVE and FSCTL_PIPE_PEEK on `IPC$` pipe opens.

use smbx_wire::codec::Writer;
use smbx_wire::ioctl::IoctlRequest;
use smbx_wire::NtStatus;

use super::{FsctlOut, FsctlResult};
use crate::state::PipeOpen;

/// Writes the input to the pipe and reads up to MaxOutputResponse bytes of the reply
/// message; BUFFER_OVERFLOW when the message has more ([MS-SMB2] 3.3.5.15.3).
pub(super) fn transceive(p: &PipeOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    let mut pipe = p.pipe.lock();
    if !io.input.is_empty() {
        pipe.write(io.input)
            .map_err(|_| NtStatus::INVALID_PIPE_STATE)?;
    }
    let (data, more) = pipe.read(io.max_output_response as usize);
    Ok(FsctlOut {
        status: if more {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        },
        output: data,
    })
}

/// FSCTL_PIPE_PEEK ([MS-FSCC] 2.3.33): NamedPipeState (connected = 3),
/// ReadDataAvailable, NumberOfMessages, MessageLength; no data bytes.
pub(super) fn peek(p: &PipeOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    if (io.max_output_response as usize) < 16 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let pending = p.pipe.lock().pending().min(u32::MAX as usize) as u32;
    let mut w = Writer::with_capacity(16);
    w.u32(3)
        .u32(pending)
        .u32(u32::from(pending > 0))
        .u32(pending);
    Ok(FsctlOut::ok(w.into_vec()))
}
