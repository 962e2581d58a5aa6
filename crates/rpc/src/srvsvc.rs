//! [MS-SRVS] server service: NetrShareEnum (15), NetrShareGetInfo (16),
//! NetrServerGetInfo (21).

use crate::ndr::{Field, NdrError, NdrReader, NdrWriter};
use crate::pdu::{NCA_OP_RNG_ERROR, NCA_S_FAULT_NDR};
use crate::{PipeContext, ShareInfo};

/// ERROR_SUCCESS.
pub(crate) const WERR_OK: u32 = 0;
/// ERROR_ACCESS_DENIED.
pub(crate) const WERR_ACCESS_DENIED: u32 = 5;
/// ERROR_INVALID_LEVEL.
pub(crate) const WERR_INVALID_LEVEL: u32 = 124;
/// ERROR_MORE_DATA.
pub(crate) const WERR_MORE_DATA: u32 = 234;
/// NERR_NetNameNotFound.
pub(crate) const NERR_NET_NAME_NOT_FOUND: u32 = 2310;

/// PLATFORM_ID_NT.
pub(crate) const PLATFORM_ID_NT: u32 = 500;
/// SV_TYPE_WORKSTATION | SV_TYPE_SERVER | SV_TYPE_NT | SV_TYPE_SERVER_NT.
pub(crate) const SERVER_TYPE: u32 = 0x0000_9003;
/// SHI_USES_UNLIMITED.
const SHI_USES_UNLIMITED: u32 = 0xffff_ffff;

const OP_NETR_SHARE_ENUM: u16 = 15;
const OP_NETR_SHARE_GET_INFO: u16 = 16;
const OP_NETR_SERVER_GET_INFO: u16 = 21;

/// Runs srvsvc operation `opnum` on `stub`; `Err` is a fault status.
pub(crate) fn dispatch(ctx: &PipeContext, opnum: u16, stub: &[u8]) -> Result<Vec<u8>, u32> {
    let r = match opnum {
        OP_NETR_SHARE_ENUM => share_enum(ctx, stub),
        OP_NETR_SHARE_GET_INFO => share_get_info(ctx, stub),
        OP_NETR_SERVER_GET_INFO => server_get_info(ctx, stub),
        _ => return Err(NCA_OP_RNG_ERROR),
    };
    r.map_err(|NdrError| NCA_S_FAULT_NDR)
}

/// The members of a SHARE_INFO_`level` struct, or `None` for levels we do not fill in.
fn share_fields(level: u32, s: &ShareInfo) -> Option<Vec<Field<'_>>> {
    Some(match level {
        0 => vec![Field::Str(&s.name)],
        1 => vec![
            Field::Str(&s.name),
            Field::U32(s.share_type),
            Field::Str(&s.comment),
        ],
        2 => vec![
            Field::Str(&s.name),
            Field::U32(s.share_type),
            Field::Str(&s.comment),
            Field::U32(0),                  // shi2_permissions
            Field::U32(SHI_USES_UNLIMITED), // shi2_max_uses
            Field::U32(0),                  // shi2_current_uses
            Field::Str(&s.path),
            Field::Null, // shi2_passwd
        ],
        501 => vec![
            Field::Str(&s.name),
            Field::U32(s.share_type),
            Field::Str(&s.comment),
            Field::U32(0), // shi501_flags: manual caching
        ],
        1005 => vec![Field::U32(0)], // shi1005_flags
        _ => return None,
    })
}

/// Wire layout of the SHARE_INFO_`level` structs a client may send in an enum container:
/// `true` marks a string pointer.
fn enum_layout(level: u32) -> Option<&'static [bool]> {
    Some(match level {
        0 => &[true],
        1 => &[true, false, true],
        2 => &[true, false, true, false, false, false, true, true],
        501 => &[true, false, true, false],
        _ => return None,
    })
}

/// Rough marshalled size of one enum entry, for PreferedMaximumLength.
fn entry_size(level: u32, s: &ShareInfo) -> usize {
    let strlen = |t: &str| 12 + 2 * (t.encode_utf16().count() + 1) + 3;
    match level {
        0 => 4 + strlen(&s.name),
        1 => 12 + strlen(&s.name) + strlen(&s.comment),
        2 => 32 + strlen(&s.name) + strlen(&s.comment) + strlen(&s.path),
        _ => 16 + strlen(&s.name) + strlen(&s.comment),
    }
}

/// NetrShareEnum: `[in,string,unique] ServerName, [in,out] SHARE_ENUM_STRUCT*,
/// [in] PreferedMaximumLength, [out] TotalEntries, [in,out,unique] ResumeHandle`.
fn share_enum(ctx: &PipeContext, stub: &[u8]) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_string()?;
    let level = r.u32()?;
    let arm = r.u32()?;
    if arm != level || !matches!(level, 0 | 1 | 2 | 501 | 502 | 503) {
        return Err(NdrError);
    }
    if r.ptr()? != 0 {
        let _entries_read = r.u32()?;
        if r.ptr()? != 0 {
            r.skip_string_struct_array(enum_layout(level).ok_or(NdrError)?)?;
        }
    }
    let pref_max = r.u32()?;
    let resume = if r.ptr()? != 0 { Some(r.u32()?) } else { None };

    let total = ctx.shares.len();
    let mut w = NdrWriter::new();
    w.u32(level);
    w.u32(level);
    // 502/503 need security descriptors / server names we do not keep. A caller
    // refused enumeration (restrict anonymous) learns nothing, not even the count.
    let refused = if ctx.shares_denied {
        Some(WERR_ACCESS_DENIED)
    } else if enum_layout(level).is_none() {
        Some(WERR_INVALID_LEVEL)
    } else {
        None
    };
    if let Some(status) = refused {
        w.ptr(false);
        w.u32(0);
        write_resume(&mut w, resume, 0);
        w.u32(status);
        return Ok(w.finish());
    }
    let start = resume
        .and_then(|v| usize::try_from(v).ok())
        .unwrap_or(0)
        .min(total);
    let mut end = start;
    let mut used = 0usize;
    for s in ctx.shares.get(start..).unwrap_or_default() {
        let sz = entry_size(level, s);
        if pref_max != u32::MAX && end > start && used.saturating_add(sz) > pref_max as usize {
            break;
        }
        used = used.saturating_add(sz);
        end += 1;
    }
    let rows: Vec<Vec<Field<'_>>> = ctx
        .shares
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| share_fields(level, s))
        .collect();
    w.ptr(true); // container
    w.u32(u32::try_from(rows.len()).unwrap_or(u32::MAX));
    w.ptr(!rows.is_empty());
    if !rows.is_empty() {
        w.record_array(&rows);
    }
    w.u32(u32::try_from(total).unwrap_or(u32::MAX));
    let more = end < total;
    let next = if more {
        u32::try_from(end).unwrap_or(u32::MAX)
    } else {
        0
    };
    write_resume(&mut w, resume, next);
    w.u32(if more { WERR_MORE_DATA } else { WERR_OK });
    Ok(w.finish())
}

fn write_resume(w: &mut NdrWriter, resume: Option<u32>, value: u32) {
    if resume.is_some() {
        w.ptr(true);
        w.u32(value);
    } else {
        w.ptr(false);
    }
}

/// NetrShareGetInfo: `[in,string,unique] ServerName, [in,string] NetName, [in] Level,
/// [out, switch_is(Level)] SHARE_INFO*`.
fn share_get_info(ctx: &PipeContext, stub: &[u8]) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_string()?;
    let name = r.string()?;
    let level = r.u32()?;
    let mut w = NdrWriter::new();
    w.u32(level);
    let share = ctx
        .shares
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(&name));
    // Union arms that exist in SHARE_INFO; anything else is the empty default arm.
    let is_arm = matches!(
        level,
        0 | 1 | 2 | 501 | 502 | 503 | 1004 | 1005 | 1006 | 1501
    );
    let status = match share {
        _ if ctx.shares_denied => {
            if is_arm {
                w.ptr(false);
            }
            WERR_ACCESS_DENIED
        }
        None => {
            if is_arm {
                w.ptr(false);
            }
            NERR_NET_NAME_NOT_FOUND
        }
        Some(s) => match share_fields(level, s) {
            Some(fields) => {
                w.ptr(true);
                w.record(&fields);
                WERR_OK
            }
            None => {
                if is_arm {
                    w.ptr(false);
                }
                WERR_INVALID_LEVEL
            }
        },
    };
    w.u32(status);
    Ok(w.finish())
}

/// NetrServerGetInfo: `[in,string,unique] ServerName, [in] Level,
/// [out, switch_is(Level)] SERVER_INFO*`.
fn server_get_info(ctx: &PipeContext, stub: &[u8]) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_string()?;
    let level = r.u32()?;
    let mut w = NdrWriter::new();
    w.u32(level);
    let status = match level {
        100 => {
            w.ptr(true);
            w.record(&[Field::U32(PLATFORM_ID_NT), Field::Str(&ctx.server_name)]);
            WERR_OK
        }
        101 => {
            w.ptr(true);
            w.record(&[
                Field::U32(PLATFORM_ID_NT),
                Field::Str(&ctx.server_name),
                Field::U32(10),
                Field::U32(0),
                Field::U32(SERVER_TYPE),
                Field::Str(""),
            ]);
            WERR_OK
        }
        _ => {
            w.ptr(false);
            WERR_INVALID_LEVEL
        }
    };
    w.u32(status);
    Ok(w.finish())
}
