//! Small FSCTLs: snapshots, object ids, compression, trim.

use smbx_wire::codec::Reader;
use smbx_wire::ioctl::{encode_empty_snapshots, encode_object_id, IoctlRequest};
use smbx_wire::AccessMask;
use smbx_wire::NtStatus;

use super::{granted, FsctlOut, FsctlResult};
use crate::state::FileOpen;

/// COMPRESSION_FORMAT_NONE.
const COMPRESSION_FORMAT_NONE: u16 = 0;
/// COMPRESSION_FORMAT_DEFAULT.
const COMPRESSION_FORMAT_DEFAULT: u16 = 1;
/// COMPRESSION_FORMAT_LZNT1.
const COMPRESSION_FORMAT_LZNT1: u16 = 2;

/// FSCTL_SRV_ENUMERATE_SNAPSHOTS ([MS-SMB2] 3.3.5.15.1): no snapshots.
pub(super) fn enumerate_snapshots(io: &IoctlRequest<'_>) -> FsctlResult {
    if io.max_output_response < 16 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(FsctlOut::ok(encode_empty_snapshots(
        io.max_output_response as usize,
    )))
}

/// FSCTL_GET_OBJECT_ID / FSCTL_CREATE_OR_GET_OBJECT_ID: an object id derived from
/// the file id and the volume id (stable for the life of the inode).
pub(super) fn object_id(f: &FileOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    if io.max_output_response < 64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let info = f.handle.stat()?;
    let mut oid = [0u8; 16];
    oid[..8].copy_from_slice(&info.file_id.to_le_bytes());
    oid[8..].copy_from_slice(&info.volume_id.to_le_bytes());
    let mut vol = [0u8; 16];
    vol[..8].copy_from_slice(&info.volume_id.to_le_bytes());
    Ok(FsctlOut::ok(encode_object_id(&oid, &vol)))
}

/// FSCTL_GET_COMPRESSION: never compressed (the file system reports no
/// FILE_FILE_COMPRESSION), as WS2016 ReFS and Samba answer.
pub(super) fn get_compression(io: &IoctlRequest<'_>) -> FsctlResult {
    if io.max_output_response < 2 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(FsctlOut::ok(COMPRESSION_FORMAT_NONE.to_le_bytes().to_vec()))
}

/// FSCTL_SET_COMPRESSION: NONE succeeds, DEFAULT/LZNT1 are NOT_SUPPORTED, anything
/// else INVALID_PARAMETER. Needs write access like Windows.
pub(super) fn set_compression(f: &FileOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    let Ok(format) = Reader::new(io.input).u16() else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if !granted(
        f,
        AccessMask::FILE_WRITE_DATA
            | AccessMask::FILE_APPEND_DATA
            | AccessMask::FILE_WRITE_ATTRIBUTES,
    ) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    match format {
        COMPRESSION_FORMAT_NONE => Ok(FsctlOut::ok(Vec::new())),
        COMPRESSION_FORMAT_DEFAULT | COMPRESSION_FORMAT_LZNT1 => Err(NtStatus::NOT_SUPPORTED),
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// FSCTL_FILE_LEVEL_TRIM ([MS-FSCC] 2.3.14): accepted and ignored (the local file
/// system frees blocks itself); the output reports every range processed.
pub(super) fn file_level_trim(f: &FileOpen, io: &IoctlRequest<'_>) -> FsctlResult {
    let mut r = Reader::new(io.input);
    let (Ok(_key), Ok(count)) = (r.u32(), r.u32()) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if (count as usize).saturating_mul(16) > r.remaining() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !granted(f, AccessMask::FILE_WRITE_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if io.max_output_response < 4 {
        return Ok(FsctlOut::ok(Vec::new()));
    }
    Ok(FsctlOut::ok(count.to_le_bytes().to_vec()))
}
