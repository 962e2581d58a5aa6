//! SMB2 QUERY_DIRECTORY ([MS-SMB2] 3.3.5.18, [MS-FSA] 2.1.5.6.3).
//!
//! Each directory open keeps an enumeration cursor in [`QueryState`](crate::state::open::QueryState) (stored in the
//! `FileOpen`): the pattern and the sorted names that matched it, listed at the first
//! query and again on RESTART_SCANS / REOPEN. Metadata is read only for the entries a
//! request returns (so a listing costs one directory read plus one stat per entry), and
//! entries deleted after the listing are skipped, as on Windows.

use smbx_vfs::{short_name, DirEntry};
use smbx_wire::fscc::dir::{self, DirBuffer, DirEntryInfo};
use smbx_wire::query_directory::{
    encode_output_response, QueryDirectoryRequest, SMB2_REOPEN, SMB2_RESTART_SCANS,
    SMB2_RETURN_SINGLE_ENTRY,
};
use smbx_wire::AccessMask;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::open::DirCursor;

/// Converts vfs metadata to a directory entry of the wire encoder.
pub(crate) fn entry_info<'a>(e: &'a DirEntry, short: Option<&'a str>) -> DirEntryInfo<'a> {
    let i = &e.info;
    DirEntryInfo {
        file_index: 0,
        times: super::query_info::times(i),
        end_of_file: if i.is_dir { 0 } else { i.size },
        allocation_size: if i.is_dir { 0 } else { i.allocation_size },
        attributes: i.attributes,
        ea_size: 0,
        reparse_tag: 0,
        file_id: i.file_id,
        file_id_high: 0,
        short_name: short,
        name: &e.name,
    }
}

/// Handles QUERY_DIRECTORY.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let q = QueryDirectoryRequest::decode(req.msg)?;
    let id = q.file_id;
    let open = ctx.lookup_open(id)?;
    let Some(f) = open.as_file() else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    let Some(fixed) = dir::fixed_size(q.info_class) else {
        return Err(NtStatus::INVALID_INFO_CLASS);
    };
    if !f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let max = q.output_buffer_length as usize;
    let max_trans = if ctx.dialect() <= smbx_wire::Dialect::SMB2_0_2 {
        65536
    } else {
        (ctx.config().global.smb2_max_trans as usize).max(65536)
    };
    if max > max_trans {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.check_credit_charge(max)?;
    if !f.access.intersects(AccessMask::FILE_LIST_DIRECTORY) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if q.pattern.contains(['\\', '/']) {
        return Err(NtStatus::OBJECT_PATH_INVALID);
    }
    if max < fixed {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }

    let restart = q.flags & (SMB2_RESTART_SCANS | SMB2_REOPEN) != 0;
    let mut state = f.query.lock();
    let first = restart || state.dir.is_none();
    if first {
        let pattern = if q.pattern.is_empty() {
            "*".to_string()
        } else {
            q.pattern.clone()
        };
        let names = f.handle.list_names_matching(&pattern)?;
        state.dir = Some(DirCursor {
            pattern,
            names,
            pos: 0,
        });
    }
    let Some(cur) = state.dir.as_mut() else {
        return Err(NtStatus::INTERNAL_ERROR);
    };
    // FileIndex values are not meaningful on this file system (always 0): with
    // INDEX_SPECIFIED the enumeration continues where it was, as on NTFS.
    let needs_short = matches!(
        q.info_class,
        dir::FILE_BOTH_DIRECTORY_INFORMATION | dir::FILE_ID_BOTH_DIRECTORY_INFORMATION
    );
    let Some(mut buf) = DirBuffer::new(q.info_class, max) else {
        return Err(NtStatus::INVALID_INFO_CLASS);
    };
    let mut blocked = false;
    while let Some(name) = cur.names.get(cur.pos) {
        let Some(e) = f.handle.dir_entry(name) else {
            // Removed since the listing (or hidden): skip it.
            cur.pos += 1;
            continue;
        };
        let short = if needs_short {
            short_name(&e.name)
        } else {
            None
        };
        if !buf.push(&entry_info(&e, short.as_deref())) {
            blocked = true;
            break;
        }
        cur.pos += 1;
        if q.flags & SMB2_RETURN_SINGLE_ENTRY != 0 {
            break;
        }
    }
    drop(state);
    if buf.is_empty() {
        return Err(if blocked {
            NtStatus::INFO_LENGTH_MISMATCH
        } else if first {
            NtStatus::NO_SUCH_FILE
        } else {
            NtStatus::NO_MORE_FILES
        });
    }
    Ok(Response::ok(encode_output_response(&buf.into_vec())))
}
