//! FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA and FSCTL_QUERY_ALLOCATED_RANGES
//! ([MS-FSA] 2.1.5.9.36, 2.1.5.9.38, 2.1.5.9.23), through the vfs.

use std::sync::Arc;

use smbx_wire::codec::Writer;
use smbx_wire::ioctl::{
    decode_allocated_range, decode_zero_data, encode_allocated_range, IoctlRequest,
    ALLOCATED_RANGE_LEN,
};
use smbx_wire::AccessMask;
use smbx_wire::FileAttributes;
use smbx_wire::NtStatus;

use super::{granted, FsctlOut, FsctlResult};
use crate::handlers::Ctx;
use crate::state::{FileOpen, Open};

/// FSCTL_SET_SPARSE: no buffer means "set"; otherwise the first byte decides (a
/// longer buffer is accepted as Windows does). Needs WRITE_DATA, APPEND_DATA or
/// WRITE_ATTRIBUTES; directories are INVALID_PARAMETER.
pub(super) fn set_sparse(f: &FileOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !granted(
        f,
        AccessMask::FILE_WRITE_DATA
            | AccessMask::FILE_APPEND_DATA
            | AccessMask::FILE_WRITE_ATTRIBUTES,
    ) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let sparse = io.input.first().is_none_or(|b| *b != 0);
    f.handle.set_sparse(sparse)?;
    Ok(FsctlOut::ok(Vec::new()))
}

/// FSCTL_SET_ZERO_DATA: needs WRITE_DATA; FileOffset > BeyondFinalZero or negative
/// values are INVALID_PARAMETER; the file never grows; a byte-range lock held by
/// another open over the range is FILE_LOCK_CONFLICT.
pub(super) fn set_zero_data(
    ctx: &Ctx<'_>,
    open: &Arc<Open>,
    f: &FileOpen,
    io: &IoctlRequest<'_>,
) -> FsctlResult {
    let Ok((off, beyond)) = decode_zero_data(io.input) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if off < 0 || beyond < 0 || off > beyond {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !granted(f, AccessMask::FILE_WRITE_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let (off, len) = (off as u64, (beyond - off) as u64);
    if len == 0 {
        return Ok(FsctlOut::ok(Vec::new()));
    }
    let size = f.handle.stat()?.size;
    if off < size {
        let end = (off + len).min(size);
        super::copychunk::check_lock(ctx, open, off, end - off, true)?;
    }
    f.handle.punch_hole(off, len)?;
    Ok(FsctlOut::ok(Vec::new()))
}

/// FSCTL_QUERY_ALLOCATED_RANGES: needs READ_DATA; an input shorter than one
/// FILE_ALLOCATED_RANGE_BUFFER or a negative/overflowing range is INVALID_PARAMETER;
/// output that does not fit is BUFFER_OVERFLOW with as many whole entries as fit
/// (BUFFER_TOO_SMALL when not even one fits).
pub(super) fn query_allocated_ranges(f: &FileOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    let Ok((off, len)) = decode_allocated_range(io.input) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if off < 0 || len < 0 || off.checked_add(len).is_none() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !granted(f, AccessMask::FILE_READ_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (off, len) = (off as u64, len as u64);
    let info = f.handle.stat()?;
    let ranges = if len == 0 || off >= info.size {
        Vec::new()
    } else if !info.attributes.contains(FileAttributes::SPARSE_FILE) {
        // A file that is not sparse is fully allocated as far as clients are
        // concerned ([MS-FSA] 2.1.5.9.23), whatever the file system did with
        // zeroed ranges.
        vec![(off, (off + len).min(info.size) - off)]
    } else {
        f.handle.allocated_ranges(off, len)?
    };
    let max = io.max_output_response as usize;
    let fit = max / ALLOCATED_RANGE_LEN;
    if !ranges.is_empty() && fit == 0 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let mut w = Writer::with_capacity(ranges.len().min(fit) * ALLOCATED_RANGE_LEN);
    for (o, l) in ranges.iter().take(fit) {
        encode_allocated_range(&mut w, *o, *l);
    }
    Ok(FsctlOut {
        status: if ranges.len() > fit {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        },
        output: w.into_vec(),
    })
}
