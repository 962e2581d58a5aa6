//! Alternate data streams and extended attributes (EAs), both kept in Linux xattrs.
//!
//! - Stream `name` of a file is the xattr `user.DosStream.<name>:$DATA`, at most
//!   [`MAX_STREAM_SIZE`] bytes (less if the file system allows less; ext4 without the
//!   `ea_inode` feature holds about one block per inode).
//! - EA `name` is the xattr `user.EA.<name>`, value at most [`MAX_EA_VALUE`] bytes.

use std::ffi::CString;
use std::io;
use std::os::fd::BorrowedFd;

use smbx_wire::NtStatus;

use crate::sys;

/// Prefix of stream xattr names.
pub const STREAM_PREFIX: &str = "user.DosStream.";
/// Suffix of stream xattr names.
pub const STREAM_SUFFIX: &str = ":$DATA";
/// Largest named stream accepted.
pub const MAX_STREAM_SIZE: usize = 64 * 1024;
/// Prefix of EA xattr names.
pub const EA_PREFIX: &str = "user.EA.";
/// Largest EA value (the wire field is 16 bits).
pub const MAX_EA_VALUE: usize = 65535;
/// Longest EA name (the wire field is 8 bits; also bounded by XATTR_NAME_MAX).
pub const MAX_EA_NAME: usize = 255 - EA_PREFIX.len();

fn cstr(s: String) -> Result<CString, NtStatus> {
    CString::new(s).map_err(|_| NtStatus::OBJECT_NAME_INVALID)
}

pub(crate) fn stream_xattr(name: &str) -> Result<CString, NtStatus> {
    cstr(format!("{STREAM_PREFIX}{name}{STREAM_SUFFIX}"))
}

fn stream_of_xattr(x: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(x).ok()?;
    s.strip_prefix(STREAM_PREFIX)?.strip_suffix(STREAM_SUFFIX)
}

/// Maps an xattr error for stream/EA data: size limits become DISK_FULL.
pub(crate) fn xattr_err(e: io::Error) -> NtStatus {
    match e.raw_os_error() {
        Some(libc::E2BIG) | Some(libc::ENOSPC) | Some(libc::ERANGE) | Some(libc::EDQUOT) => {
            NtStatus::DISK_FULL
        }
        Some(libc::ENOTSUP) => NtStatus::NOT_SUPPORTED,
        Some(libc::EBADF) => NtStatus::ACCESS_DENIED,
        _ => e.into(),
    }
}

/// Finds the stored name of stream `name`: exact first, then (when `!case_sensitive`)
/// case-insensitively among the file's streams.
pub(crate) fn find_stream(
    fd: BorrowedFd<'_>,
    name: &str,
    case_sensitive: bool,
) -> Result<Option<String>, NtStatus> {
    match sys::fgetxattr(fd, &stream_xattr(name)?, MAX_STREAM_SIZE) {
        Ok(Some(_)) => return Ok(Some(name.to_string())),
        Ok(None) => {}
        Err(e) if e.raw_os_error() == Some(libc::E2BIG) => return Ok(Some(name.to_string())),
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(None),
        Err(e) => return Err(xattr_err(e)),
    }
    if case_sensitive {
        return Ok(None);
    }
    let want = name.to_lowercase();
    Ok(list_stream_names(fd)?
        .into_iter()
        .find(|s| s.to_lowercase() == want))
}

/// Names of all named streams of a file.
pub(crate) fn list_stream_names(fd: BorrowedFd<'_>) -> Result<Vec<String>, NtStatus> {
    let names = match sys::flistxattr(fd) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(xattr_err(e)),
    };
    let mut out: Vec<String> = names
        .iter()
        .filter_map(|n| stream_of_xattr(n.to_bytes()))
        .map(str::to_string)
        .collect();
    out.sort();
    Ok(out)
}

/// Reads the whole value of a stream (`OBJECT_NAME_NOT_FOUND` if it vanished).
pub(crate) fn read_stream(fd: BorrowedFd<'_>, name: &str) -> Result<Vec<u8>, NtStatus> {
    match sys::fgetxattr(fd, &stream_xattr(name)?, MAX_STREAM_SIZE) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        Err(e) => Err(xattr_err(e)),
    }
}

/// Replaces the value of a stream.
pub(crate) fn write_stream(fd: BorrowedFd<'_>, name: &str, data: &[u8]) -> Result<(), NtStatus> {
    if data.len() > MAX_STREAM_SIZE {
        return Err(NtStatus::DISK_FULL);
    }
    sys::fsetxattr(fd, &stream_xattr(name)?, data).map_err(xattr_err)
}

/// Deletes a stream.
pub(crate) fn remove_stream(fd: BorrowedFd<'_>, name: &str) -> Result<(), NtStatus> {
    match sys::fremovexattr(fd, &stream_xattr(name)?) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENODATA) => Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        Err(e) => Err(xattr_err(e)),
    }
}

/// Checks an EA name: 1..=MAX_EA_NAME printable ASCII bytes without NUL.
pub(crate) fn validate_ea_name(name: &str) -> Result<(), NtStatus> {
    if name.is_empty()
        || name.len() > MAX_EA_NAME
        || !name.bytes().all(|b| (0x20..0x7f).contains(&b))
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

fn ea_xattr(name: &str) -> Result<CString, NtStatus> {
    cstr(format!("{EA_PREFIX}{name}"))
}

fn ea_err(e: io::Error) -> NtStatus {
    match e.raw_os_error() {
        Some(libc::ENOTSUP) => NtStatus::EAS_NOT_SUPPORTED,
        Some(libc::E2BIG) | Some(libc::ENOSPC) | Some(libc::ERANGE) => NtStatus::EA_TOO_LARGE,
        Some(libc::EBADF) => NtStatus::ACCESS_DENIED,
        _ => e.into(),
    }
}

/// All EAs of a file, sorted by name.
pub(crate) fn get_eas(fd: BorrowedFd<'_>) -> Result<Vec<crate::Ea>, NtStatus> {
    let names = match sys::flistxattr(fd) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(ea_err(e)),
    };
    let mut out = Vec::new();
    for n in names {
        let Some(ea) = std::str::from_utf8(n.to_bytes())
            .ok()
            .and_then(|s| s.strip_prefix(EA_PREFIX))
        else {
            continue;
        };
        if validate_ea_name(ea).is_err() {
            continue;
        }
        match sys::fgetxattr(fd, &n, MAX_EA_VALUE) {
            Ok(Some(value)) => out.push(crate::Ea {
                name: ea.to_string(),
                value,
            }),
            Ok(None) => {}
            Err(e) if e.raw_os_error() == Some(libc::E2BIG) => {}
            Err(e) => return Err(ea_err(e)),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Sets an EA; an empty value deletes it (SMB semantics; deleting a missing EA is fine).
pub(crate) fn set_ea(fd: BorrowedFd<'_>, name: &str, value: &[u8]) -> Result<(), NtStatus> {
    validate_ea_name(name)?;
    if value.len() > MAX_EA_VALUE {
        return Err(NtStatus::EA_TOO_LARGE);
    }
    let x = ea_xattr(name)?;
    if value.is_empty() {
        return match sys::fremovexattr(fd, &x) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => Ok(()),
            Err(e) => Err(ea_err(e)),
        };
    }
    sys::fsetxattr(fd, &x, value).map_err(ea_err)
}

/// Deletes every named stream of a file (overwrite / supersede of the default stream).
pub(crate) fn remove_all_streams(fd: BorrowedFd<'_>) -> Result<(), NtStatus> {
    for name in list_stream_names(fd)? {
        match remove_stream(fd, &name) {
            Ok(()) | Err(NtStatus::OBJECT_NAME_NOT_FOUND) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
