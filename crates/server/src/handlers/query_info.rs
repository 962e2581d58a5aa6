//! SMB2 QUERY_INFO ([MS-SMB2] 3.3.5.20): file information classes ([MS-FSCC] 2.4),
//! file system classes (2.5) and security descriptors, with the buffer-length rules
//! Windows applies: OutputBufferLength below a class's minimum size is
//! INFO_LENGTH_MISMATCH, a truncated variable-length answer is BUFFER_OVERFLOW, and a
//! security descriptor that does not fit is BUFFER_TOO_SMALL with its size as error data.

use smbx_vfs::{short_name, FileInfo};
use smbx_wire::error::ErrorResponse;
use smbx_wire::fscc::{ea, file, fs, Times};
use smbx_wire::query_directory::encode_output_response;
use smbx_wire::query_info::{
    QueryInfoRequest, SL_INDEX_SPECIFIED, SL_RESTART_SCAN, SL_RETURN_SINGLE_ENTRY,
    SMB2_0_INFO_FILE, SMB2_0_INFO_FILESYSTEM, SMB2_0_INFO_QUOTA, SMB2_0_INFO_SECURITY,
};
use smbx_wire::security_descriptor::SACL_SECURITY_INFORMATION;
use smbx_wire::AccessMask;
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::FileOpen;

/// STATUS_NO_MORE_EAS.
const NO_MORE_EAS: NtStatus = NtStatus(0x8000_0012);
/// FileIdInformation ([MS-FSCC] 2.4.26): VolumeSerialNumber (8) + FileId (16).
const FILE_ID_INFORMATION: u8 = 59;

/// Handles QUERY_INFO.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let q = QueryInfoRequest::decode(req.msg)?;
    let id = q.file_id;
    let open = ctx.lookup_open(id)?;
    let max = q.output_buffer_length as usize;
    let max_trans = if ctx.dialect() <= smbx_wire::Dialect::SMB2_0_2 {
        65536
    } else {
        (ctx.config().global.smb2_max_trans as usize).max(65536)
    };
    if max > max_trans {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.check_credit_charge(max.max(q.input.len()))?;
    let Some(f) = open.as_file() else {
        return Err(NtStatus::NOT_SUPPORTED);
    };
    let (data, status) = match q.info_type {
        SMB2_0_INFO_FILE => {
            let dialect = ctx.dialect();
            query_file(f, &q, max, dialect)?
        }
        SMB2_0_INFO_FILESYSTEM => {
            let label = ctx.tree()?.share.name.clone();
            query_fs(f, q.info_class, max, &label)?
        }
        SMB2_0_INFO_SECURITY => return query_security(f, &q, max),
        SMB2_0_INFO_QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    Ok(Response::with_status(status, encode_output_response(&data)))
}

/// The four times of a file as clients see them. ChangeTime is the vfs's: a
/// client-set one while current, else the last write time, as Samba does (POSIX ctime
/// cannot be set).
pub(crate) fn times(i: &FileInfo) -> Times {
    Times {
        creation: i.creation_time,
        last_access: i.last_access_time,
        last_write: i.last_write_time,
        change: i.change_time,
    }
}

fn need(f: &FileOpen, access: AccessMask) -> Result<(), NtStatus> {
    if !f.access.intersects(access) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// The open's share-relative name with a stream suffix, without a leading backslash.
fn open_name(f: &FileOpen) -> String {
    let mut n = f.handle.path();
    if let Some(s) = f.handle.stream_name() {
        n.push(':');
        n.push_str(s);
    }
    n
}

/// EaSize of FileEaInformation / FileAllInformation (0 when EAs cannot be read).
fn ea_size(f: &FileOpen) -> u32 {
    match f.handle.eas() {
        Ok(eas) if !eas.is_empty() => {
            ea::ea_list_size(eas.iter().map(|e| (e.name.as_str(), e.value.len())))
        }
        _ => 0,
    }
}

type Answer = (Vec<u8>, NtStatus);

/// An EA name and value.
type NamedEa = (String, Vec<u8>);

fn query_file(
    f: &FileOpen,
    q: &QueryInfoRequest<'_>,
    max: usize,
    dialect: Dialect,
) -> Result<Answer, NtStatus> {
    let class = q.info_class;
    if class == file::FILE_FULL_EA_INFORMATION {
        need(f, AccessMask::FILE_READ_EA)?;
        return query_full_ea(f, q, max);
    }
    let min = match class {
        FILE_ID_INFORMATION => 24,
        file::FILE_NAME_INFORMATION => return Err(NtStatus::INVALID_INFO_CLASS),
        c => file::min_size(c).ok_or(NtStatus::INVALID_INFO_CLASS)?,
    };
    if class == file::FILE_NORMALIZED_NAME_INFORMATION && dialect < smbx_wire::Dialect::SMB3_1_1 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if matches!(
        class,
        file::FILE_BASIC_INFORMATION
            | file::FILE_ALL_INFORMATION
            | file::FILE_NETWORK_OPEN_INFORMATION
            | file::FILE_ATTRIBUTE_TAG_INFORMATION
    ) {
        need(f, AccessMask::FILE_READ_ATTRIBUTES)?;
    }
    if max < min {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    // With the server's visible LastWriteTime (delayed write-time updates).
    let info = f.stat()?;
    let delete_pending = f.file.delete_pending();
    let std = file::Standard {
        allocation_size: if info.is_dir { 0 } else { info.allocation_size },
        end_of_file: if info.is_dir { 0 } else { info.size },
        number_of_links: info.nlink.max(1),
        delete_pending,
        directory: f.is_dir,
    };
    let data = match class {
        file::FILE_BASIC_INFORMATION => file::basic(&times(&info), info.attributes),
        file::FILE_STANDARD_INFORMATION => file::standard(&std),
        file::FILE_INTERNAL_INFORMATION => file::u64_info(info.file_id),
        file::FILE_EA_INFORMATION => file::u32_info(ea_size(f)),
        file::FILE_ACCESS_INFORMATION => file::u32_info(f.access.bits()),
        file::FILE_POSITION_INFORMATION => {
            file::u64_info(f.position.load(std::sync::atomic::Ordering::Relaxed))
        }
        file::FILE_MODE_INFORMATION => file::u32_info(f.mode().bits()),
        file::FILE_ALIGNMENT_INFORMATION => file::u32_info(0),
        file::FILE_ALL_INFORMATION => file::all(&file::All {
            times: times(&info),
            attributes: info.attributes,
            standard: std,
            index_number: info.file_id,
            ea_size: ea_size(f),
            access_flags: f.access.bits(),
            position: f.position.load(std::sync::atomic::Ordering::Relaxed),
            mode: f.mode().bits(),
            alignment: 0,
            name: format!("\\{}", open_name(f)),
        }),
        file::FILE_ALTERNATE_NAME_INFORMATION => {
            let name = f.handle.name();
            if name.is_empty() {
                return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
            }
            file::name_info(&short_name(&name).unwrap_or(name))
        }
        file::FILE_STREAM_INFORMATION => {
            let streams = f.handle.streams()?;
            let entries: Vec<file::StreamEntry<'_>> = streams
                .iter()
                .map(|s| file::StreamEntry {
                    name: &s.name,
                    size: s.size,
                    allocation_size: s.allocation_size,
                })
                .collect();
            let (b, more) = file::streams(&entries, max);
            if more {
                let b = if b.is_empty() {
                    // Not even one entry fits: the truncated first entry, as Windows.
                    let (full, _) = file::streams(&entries, usize::MAX);
                    full.get(..max).unwrap_or(&full).to_vec()
                } else {
                    b
                };
                return Ok((b, NtStatus::BUFFER_OVERFLOW));
            }
            b
        }
        file::FILE_COMPRESSION_INFORMATION => {
            file::compression(if info.is_dir { 0 } else { info.size })
        }
        file::FILE_NETWORK_OPEN_INFORMATION => file::network_open(
            &times(&info),
            std.allocation_size,
            std.end_of_file,
            info.attributes,
        ),
        file::FILE_ATTRIBUTE_TAG_INFORMATION => file::attribute_tag(info.attributes, 0),
        file::FILE_NORMALIZED_NAME_INFORMATION => file::name_info(&open_name(f)),
        FILE_ID_INFORMATION => {
            let mut b = Vec::with_capacity(24);
            // The same serial number FileFsVolumeInformation reports.
            let serial = u64::from(f.vfs.fs_info()?.volume_serial);
            b.extend_from_slice(&serial.to_le_bytes());
            b.extend_from_slice(&info.file_id.to_le_bytes());
            b.extend_from_slice(&[0u8; 8]);
            b
        }
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    };
    file::fit(data, min, max)
}

/// FileFullEaInformation ([MS-FSA] 2.1.5.12.x / NtQueryEaFile semantics): a named list
/// from the input buffer, or the EAs from the open's index (RESTART_SCAN resets it,
/// INDEX_SPECIFIED takes a 1-based index from AdditionalInformation).
fn query_full_ea(f: &FileOpen, q: &QueryInfoRequest<'_>, max: usize) -> Result<Answer, NtStatus> {
    let eas = f.handle.eas()?;
    let single = q.flags & SL_RETURN_SINGLE_ENTRY != 0;
    let mut state = f.query.lock();
    let (selected, start): (Vec<NamedEa>, Option<usize>) = if !q.input.is_empty() {
        let names = ea::decode_get_list(q.input)?;
        let sel = names
            .into_iter()
            .map(
                |n| match eas.iter().find(|e| e.name.eq_ignore_ascii_case(&n)) {
                    Some(e) => (e.name.clone(), e.value.clone()),
                    None => (n, Vec::new()),
                },
            )
            .collect();
        (sel, None)
    } else {
        if eas.is_empty() {
            return Err(NtStatus::NO_EAS_ON_FILE);
        }
        let start = if q.flags & SL_RESTART_SCAN != 0 {
            0
        } else if q.flags & SL_INDEX_SPECIFIED != 0 {
            (q.additional_information as usize).saturating_sub(1)
        } else {
            state.ea_index
        };
        if start >= eas.len() {
            return Err(NO_MORE_EAS);
        }
        let sel = eas[start..]
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect();
        (sel, Some(start))
    };
    let mut entries = Vec::new();
    let mut used = 0usize;
    for (name, value) in &selected {
        let e = ea::encode_entry(0, name, value);
        let start_at = if entries.is_empty() {
            0
        } else {
            used.next_multiple_of(4)
        };
        if start_at.saturating_add(e.len()) > max {
            break;
        }
        used = start_at + e.len();
        entries.push(e);
        if single {
            break;
        }
    }
    if entries.is_empty() {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let returned = entries.len();
    if let Some(start) = start {
        state.ea_index = start + returned;
    }
    let status = if returned < selected.len() && !single {
        NtStatus::BUFFER_OVERFLOW
    } else {
        NtStatus::SUCCESS
    };
    Ok((ea::chain(&entries), status))
}

fn query_fs(f: &FileOpen, class: u8, max: usize, label: &str) -> Result<Answer, NtStatus> {
    let min = fs::min_size(class).ok_or(NtStatus::INVALID_INFO_CLASS)?;
    if max < min {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let info = f.vfs.fs_info()?;
    let bps = info.sector_size.max(512);
    let unit = info.block_size.max(bps);
    let spu = (unit / bps).max(1);
    let unit64 = u64::from(spu) * u64::from(bps);
    let data = match class {
        fs::FILE_FS_VOLUME_INFORMATION => {
            fs::volume(info.volume_creation_time, info.volume_serial, label, false)
        }
        fs::FILE_FS_SIZE_INFORMATION => fs::size(
            info.total_bytes / unit64,
            info.available_bytes / unit64,
            spu,
            bps,
        ),
        fs::FILE_FS_DEVICE_INFORMATION => {
            fs::device(fs::FILE_DEVICE_DISK, fs::FILE_DEVICE_IS_MOUNTED)
        }
        fs::FILE_FS_ATTRIBUTE_INFORMATION => fs::attribute(
            info.fs_attributes | fs::FileSystemAttributes::FILE_PERSISTENT_ACLS,
            info.max_name_len,
            &info.fs_name,
        ),
        fs::FILE_FS_CONTROL_INFORMATION => fs::control(),
        fs::FILE_FS_FULL_SIZE_INFORMATION => fs::full_size(
            info.total_bytes / unit64,
            info.available_bytes / unit64,
            info.free_bytes / unit64,
            spu,
            bps,
        ),
        fs::FILE_FS_OBJECT_ID_INFORMATION => {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&info.volume_serial.to_le_bytes());
            id[4..8].copy_from_slice(b"smbx");
            fs::object_id(&id)
        }
        fs::FILE_FS_SECTOR_SIZE_INFORMATION => fs::sector_size(bps),
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    };
    file::fit(data, min, max)
}

fn query_security(f: &FileOpen, q: &QueryInfoRequest<'_>, max: usize) -> HandlerResult {
    let secinfo = q.additional_information;
    if secinfo & SACL_SECURITY_INFORMATION != 0
        && !f.access.intersects(AccessMask::ACCESS_SYSTEM_SECURITY)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if secinfo & 0x7 != 0 && !f.access.intersects(AccessMask::READ_CONTROL) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let info = f.handle.stat()?;
    // The stored NT descriptor if there is one, else the POSIX-derived one (state/acl.rs).
    let stored = crate::state::acl::stored(&f.handle)?;
    let sd =
        crate::state::acl::select(&crate::state::acl::effective(stored, &info), secinfo).encode();
    if sd.len() > max {
        return Ok(Response::error_with_data(
            NtStatus::BUFFER_TOO_SMALL,
            ErrorResponse {
                context_count: 0,
                data: (sd.len() as u32).to_le_bytes().to_vec(),
            },
        ));
    }
    Ok(Response::ok(encode_output_response(&sd)))
}
