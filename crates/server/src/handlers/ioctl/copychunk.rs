//! Server-side copy: FSCTL_SRV_REQUEST_RESUME_KEY, FSCTL_SRV_COPYCHUNK and
//! FSCTL_SRV_COPYCHUNK_WRITE ([MS-SMB2] 3.3.5.15.5, 3.3.5.15.6).
//!
//! A resume key is the source open's FileId followed by an 8-byte MAC of it under a
//! per-process random secret: the server maps it back to the open through the open
//! table (no extra table to leak), and a client cannot forge a key for an open it
//! was not given one for. The source must belong to the same session.

use std::sync::{Arc, OnceLock};

use smbx_wire::ioctl::{
    encode_resume_key, CopychunkCopy, CopychunkResponse, IoctlRequest, COPYCHUNK_HEADER_LEN,
    COPYCHUNK_RESPONSE_LEN, RESUME_KEY_LEN,
};
use smbx_wire::AccessMask;
use smbx_wire::NtStatus;

use super::{granted, FsctlOut, FsctlResult};
use crate::handlers::Ctx;
use crate::state::{FileId, FileOpen, Open};

/// ServerSideCopyMaxNumberofChunks.
pub const MAX_CHUNKS: u32 = 256;
/// ServerSideCopyMaxChunkSize.
pub const MAX_CHUNK_SIZE: u32 = 1024 * 1024;
/// ServerSideCopyMaxDataSize.
pub const MAX_TOTAL_SIZE: u32 = 16 * 1024 * 1024;

fn secret() -> &'static [u8; 32] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(rand::random)
}

fn mac(id: &FileId) -> [u8; 8] {
    let h = smbx_security::ntlm::hmac_md5(
        secret(),
        &[&id.persistent.to_le_bytes(), &id.volatile.to_le_bytes()],
    );
    let mut m = [0u8; 8];
    m.copy_from_slice(&h[..8]);
    m
}

/// The resume key of the open `id`.
pub fn resume_key(id: &FileId) -> [u8; RESUME_KEY_LEN] {
    let mut k = [0u8; RESUME_KEY_LEN];
    k[..8].copy_from_slice(&id.persistent.to_le_bytes());
    k[8..16].copy_from_slice(&id.volatile.to_le_bytes());
    k[16..].copy_from_slice(&mac(id));
    k
}

/// The FileId a resume key names, if its MAC is right.
pub fn parse_resume_key(k: &[u8; RESUME_KEY_LEN]) -> Option<FileId> {
    let mut p = [0u8; 8];
    p.copy_from_slice(&k[..8]);
    let mut v = [0u8; 8];
    v.copy_from_slice(&k[8..16]);
    let id = FileId {
        persistent: u64::from_le_bytes(p),
        volatile: u64::from_le_bytes(v),
    };
    // Constant-time compare of the MAC.
    let m = mac(&id);
    let diff = m
        .iter()
        .zip(&k[16..])
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    (diff == 0).then_some(id)
}

/// FSCTL_SRV_REQUEST_RESUME_KEY.
pub(super) fn request_resume_key(_ctx: &Ctx<'_>, open: &Arc<Open>, _f: &FileOpen) -> FsctlResult {
    Ok(FsctlOut::ok(encode_resume_key(&resume_key(&open.file_id))))
}

/// Checks byte-range locks for an I/O of `len` bytes at `off` through `open`.
pub(super) fn check_lock(
    _ctx: &Ctx<'_>,
    open: &Arc<Open>,
    off: u64,
    len: u64,
    write: bool,
) -> Result<(), NtStatus> {
    let Some(f) = open.as_file() else {
        return Ok(());
    };
    crate::state::locks::check_io(&f.file, f.entry_id, off, len, write)
}

fn limits() -> CopychunkResponse {
    CopychunkResponse {
        chunks_written: MAX_CHUNKS,
        chunk_bytes_written: MAX_CHUNK_SIZE,
        total_bytes_written: MAX_TOTAL_SIZE,
    }
}

fn with_response(status: NtStatus, r: CopychunkResponse) -> FsctlOut {
    FsctlOut {
        status,
        output: r.encode(),
    }
}

/// FSCTL_SRV_COPYCHUNK / FSCTL_SRV_COPYCHUNK_WRITE into the target open `dst`.
pub(super) async fn copychunk(
    ctx: &mut Ctx<'_>,
    io: &IoctlRequest<'_>,
    dst_open: &Arc<Open>,
    dst: &FileOpen,
) -> FsctlResult {
    let is_write_variant = io.ctl_code == smbx_wire::ioctl::fsctl::SRV_COPYCHUNK_WRITE;
    if io.input.len() < COPYCHUNK_HEADER_LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if (io.max_output_response as usize) < COPYCHUNK_RESPONSE_LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Ok(cc) = CopychunkCopy::decode(io.input, MAX_CHUNKS) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    // Target access: WRITE_DATA, plus READ_DATA for FSCTL_SRV_COPYCHUNK.
    if !granted(dst, AccessMask::FILE_WRITE_DATA)
        || (!is_write_variant && !granted(dst, AccessMask::FILE_READ_DATA))
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if dst.is_dir {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let session_id = ctx.session()?.id;
    let src_open = parse_resume_key(&cc.source_key)
        .and_then(|id| ctx.server.opens.get(id))
        .filter(|o| o.session_id == session_id)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let Some(src) = src_open.as_file() else {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    };
    // The source needs READ_DATA or EXECUTE (smbtorture copy_chunk_bad_access).
    if !granted(src, AccessMask::FILE_READ_DATA | AccessMask::FILE_EXECUTE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if src.is_dir {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    // Limits ([MS-SMB2] 3.3.5.15.6): too many chunks, a chunk too large or empty, or a
    // total too large: INVALID_PARAMETER with the limits in the response.
    let total: u64 = cc.chunks.iter().map(|c| c.length as u64).sum();
    if cc.chunk_count > MAX_CHUNKS
        || cc
            .chunks
            .iter()
            .any(|c| c.length == 0 || c.length > MAX_CHUNK_SIZE)
        || total > MAX_TOTAL_SIZE as u64
    {
        return Ok(with_response(NtStatus::INVALID_PARAMETER, limits()));
    }
    let mut done = CopychunkResponse::default();
    for c in &cc.chunks {
        let len = c.length as u64;
        let (Some(src_end), Some(_)) = (
            c.source_offset.checked_add(len),
            c.target_offset.checked_add(len),
        ) else {
            return Ok(with_response(NtStatus::INVALID_PARAMETER, done));
        };
        let src_size = match src.handle.stat() {
            Ok(i) => i.size,
            Err(e) => return Ok(with_response(e, done)),
        };
        if src_end > src_size {
            return Ok(with_response(NtStatus::INVALID_VIEW_SIZE, done));
        }
        if let Err(e) = check_lock(ctx, &src_open, c.source_offset, len, false)
            .and_then(|_| check_lock(ctx, dst_open, c.target_offset, len, true))
        {
            return Ok(with_response(e, done));
        }
        let n = match copy_range(src, dst, c.source_offset, c.target_offset, len) {
            Ok(n) => n,
            Err(e) => return Ok(with_response(e, done)),
        };
        done.chunks_written += 1;
        done.total_bytes_written = done.total_bytes_written.saturating_add(n as u32);
    }
    Ok(with_response(NtStatus::SUCCESS, done))
}

/// Copies `len` bytes; copy_file_range(2) between default streams of different
/// files, a buffered copy otherwise (and whenever the kernel declines).
fn copy_range(
    src: &FileOpen,
    dst: &FileOpen,
    src_off: u64,
    dst_off: u64,
    len: u64,
) -> Result<u64, NtStatus> {
    let plain = src.handle.stream_name().is_none() && dst.handle.stream_name().is_none();
    let same_file = Arc::ptr_eq(&src.file, &dst.file);
    if plain && !same_file {
        if let Some(n) = copy_file_range(src, dst, src_off, dst_off, len) {
            return Ok(n);
        }
    }
    // One buffer for the whole chunk (≤ 1 MiB): overlapping ranges in the same file
    // copy as if read completely before being written, like Windows 2012.
    copy_range_buffered(src, dst, src_off, dst_off, len)?;
    Ok(len)
}

/// The kernel copy; `None` to fall back (unsupported, cross-device, nothing copied).
/// A copy the kernel stopped part-way is finished through the buffered path.
fn copy_file_range(
    src: &FileOpen,
    dst: &FileOpen,
    src_off: u64,
    dst_off: u64,
    len: u64,
) -> Option<u64> {
    let done = src
        .handle
        .copy_range_in_kernel(&dst.handle, src_off, dst_off, len);
    if done == 0 {
        return None;
    }
    if done < len {
        copy_range_buffered(src, dst, src_off + done, dst_off + done, len - done).ok()?;
    }
    Some(len)
}

fn copy_range_buffered(
    src: &FileOpen,
    dst: &FileOpen,
    src_off: u64,
    dst_off: u64,
    len: u64,
) -> Result<(), NtStatus> {
    let mut buf = vec![0u8; len as usize];
    let mut got = 0usize;
    while got < buf.len() {
        let n = src.handle.read_at(&mut buf[got..], src_off + got as u64)?;
        if n == 0 {
            return Err(NtStatus::INVALID_VIEW_SIZE);
        }
        got += n;
    }
    let mut put = 0usize;
    while put < got {
        let n = dst.handle.write_at(&buf[put..], dst_off + put as u64)?;
        if n == 0 {
            return Err(NtStatus::DISK_FULL);
        }
        put += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_keys_round_trip_and_resist_forgery() {
        let id = FileId {
            persistent: 5,
            volatile: 77,
        };
        let k = resume_key(&id);
        assert_eq!(parse_resume_key(&k), Some(id));
        let mut forged = k;
        forged[8] ^= 1; // another open's id with the old MAC
        assert_eq!(parse_resume_key(&forged), None);
        let mut bad_mac = k;
        bad_mac[23] ^= 0x80;
        assert_eq!(parse_resume_key(&bad_mac), None);
        assert_eq!(parse_resume_key(b"deadbeefdeadbeefdeadbeef"), None);
    }
}
