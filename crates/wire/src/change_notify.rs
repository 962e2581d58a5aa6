//! SMB2 CHANGE_NOTIFY request and response ([MS-SMB2] 2.2.35, 2.2.36) and the
//! FILE_NOTIFY_INFORMATION entries of the response ([MS-FSCC] 2.7.1).

use crate::codec::{Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::FileId;

/// SMB2_WATCH_TREE: watch the whole subtree.
pub const WATCH_TREE: u16 = 0x0001;

/// FILE_NOTIFY_CHANGE_FILE_NAME.
pub const CHANGE_FILE_NAME: u32 = 0x0000_0001;
/// FILE_NOTIFY_CHANGE_DIR_NAME.
pub const CHANGE_DIR_NAME: u32 = 0x0000_0002;
/// FILE_NOTIFY_CHANGE_ATTRIBUTES.
pub const CHANGE_ATTRIBUTES: u32 = 0x0000_0004;
/// FILE_NOTIFY_CHANGE_SIZE.
pub const CHANGE_SIZE: u32 = 0x0000_0008;
/// FILE_NOTIFY_CHANGE_LAST_WRITE.
pub const CHANGE_LAST_WRITE: u32 = 0x0000_0010;
/// FILE_NOTIFY_CHANGE_LAST_ACCESS.
pub const CHANGE_LAST_ACCESS: u32 = 0x0000_0020;
/// FILE_NOTIFY_CHANGE_CREATION.
pub const CHANGE_CREATION: u32 = 0x0000_0040;
/// FILE_NOTIFY_CHANGE_EA.
pub const CHANGE_EA: u32 = 0x0000_0080;
/// FILE_NOTIFY_CHANGE_SECURITY.
pub const CHANGE_SECURITY: u32 = 0x0000_0100;
/// FILE_NOTIFY_CHANGE_STREAM_NAME.
pub const CHANGE_STREAM_NAME: u32 = 0x0000_0200;
/// FILE_NOTIFY_CHANGE_STREAM_SIZE.
pub const CHANGE_STREAM_SIZE: u32 = 0x0000_0400;
/// FILE_NOTIFY_CHANGE_STREAM_WRITE.
pub const CHANGE_STREAM_WRITE: u32 = 0x0000_0800;
/// Every defined completion filter bit.
pub const CHANGE_ALL: u32 = 0x0000_0FFF;

/// FILE_ACTION_ADDED.
pub const ACTION_ADDED: u32 = 1;
/// FILE_ACTION_REMOVED.
pub const ACTION_REMOVED: u32 = 2;
/// FILE_ACTION_MODIFIED.
pub const ACTION_MODIFIED: u32 = 3;
/// FILE_ACTION_RENAMED_OLD_NAME.
pub const ACTION_RENAMED_OLD_NAME: u32 = 4;
/// FILE_ACTION_RENAMED_NEW_NAME.
pub const ACTION_RENAMED_NEW_NAME: u32 = 5;
/// FILE_ACTION_ADDED_STREAM.
pub const ACTION_ADDED_STREAM: u32 = 6;
/// FILE_ACTION_REMOVED_STREAM.
pub const ACTION_REMOVED_STREAM: u32 = 7;
/// FILE_ACTION_MODIFIED_STREAM.
pub const ACTION_MODIFIED_STREAM: u32 = 8;

/// A decoded CHANGE_NOTIFY request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeNotifyRequest {
    /// `WATCH_TREE` or 0.
    pub flags: u16,
    /// Largest response payload the client accepts.
    pub output_buffer_length: u32,
    /// The raw 16-byte FileId.
    pub file_id: FileId,
    /// `CHANGE_*` bits.
    pub completion_filter: u32,
}

impl ChangeNotifyRequest {
    /// Decodes from a message starting at its SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<ChangeNotifyRequest, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 32 {
            return Err(WireError::Invalid("CHANGE_NOTIFY StructureSize is not 32"));
        }
        let flags = r.u16()?;
        let output_buffer_length = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let completion_filter = r.u32()?;
        r.u32()?;
        Ok(ChangeNotifyRequest {
            flags,
            output_buffer_length,
            file_id,
            completion_filter,
        })
    }

    /// Encodes the request body (clients and tests).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(32);
        w.u16(32)
            .u16(self.flags)
            .u32(self.output_buffer_length)
            .bytes(&self.file_id.to_bytes())
            .u32(self.completion_filter)
            .u32(0);
        w.into_vec()
    }
}

/// One change: an action and a name relative to the watched directory (`\` separated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyEntry {
    /// `ACTION_*`.
    pub action: u32,
    /// Relative name.
    pub name: String,
}

/// Encodes FILE_NOTIFY_INFORMATION entries (each 4-byte aligned, NextEntryOffset
/// chained, the last one 0).
pub fn encode_notify_entries(entries: &[NotifyEntry]) -> Vec<u8> {
    let mut w = Writer::new();
    let mut prev_start: Option<usize> = None;
    for e in entries {
        w.align(4);
        let start = w.len();
        if let Some(p) = prev_start {
            w.patch_u32(p, (start - p) as u32);
        }
        let name = crate::codec::utf16le(&e.name);
        w.u32(0).u32(e.action).u32(name.len() as u32).bytes(&name);
        prev_start = Some(start);
    }
    w.into_vec()
}

/// Bytes [`encode_notify_entries`] would produce for `entries`.
pub fn notify_entries_len(entries: &[NotifyEntry]) -> usize {
    let mut len = 0usize;
    for e in entries {
        len = len.next_multiple_of(4);
        len = len.saturating_add(12 + e.name.encode_utf16().count() * 2);
    }
    len
}

/// Decodes FILE_NOTIFY_INFORMATION entries (clients and tests).
pub fn decode_notify_entries(buf: &[u8]) -> Result<Vec<NotifyEntry>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    if buf.is_empty() {
        return Ok(out);
    }
    loop {
        let mut r = Reader::new(buf);
        r.seek(pos)?;
        let next = r.u32()? as usize;
        let action = r.u32()?;
        let len = r.u32()? as usize;
        let name = crate::codec::from_utf16le(r.bytes(len)?)?;
        out.push(NotifyEntry { action, name });
        if next == 0 {
            return Ok(out);
        }
        if next < 12 {
            return Err(WireError::Invalid("NextEntryOffset too small"));
        }
        pos = pos
            .checked_add(next)
            .ok_or(WireError::Invalid("NextEntryOffset overflow"))?;
    }
}

/// Encodes a CHANGE_NOTIFY response body carrying `payload` (already-encoded entries,
/// or empty).
pub fn encode_change_notify_response(payload: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(8 + payload.len().max(1));
    let offset = if payload.is_empty() {
        0
    } else {
        (HEADER_SIZE + 8) as u16
    };
    w.u16(9)
        .u16(offset)
        .u32(payload.len() as u32)
        .bytes(payload);
    if payload.is_empty() {
        w.u8(0);
    }
    w.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip() {
        let r = ChangeNotifyRequest {
            flags: WATCH_TREE,
            output_buffer_length: 1000,
            file_id: FileId::from_bytes([3; 16]),
            completion_filter: CHANGE_FILE_NAME | CHANGE_DIR_NAME,
        };
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend(r.encode());
        assert_eq!(ChangeNotifyRequest::decode(&m).unwrap(), r);
        assert!(ChangeNotifyRequest::decode(&m[..80]).is_err());
    }

    #[test]
    fn entries_round_trip_and_alignment() {
        let e = vec![
            NotifyEntry {
                action: ACTION_ADDED,
                name: "a".into(),
            },
            NotifyEntry {
                action: ACTION_RENAMED_OLD_NAME,
                name: "dir\\bb".into(),
            },
        ];
        let b = encode_notify_entries(&e);
        // First entry: 12 + 2 bytes, padded to 16.
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 16);
        assert_eq!(b.len(), notify_entries_len(&e));
        assert_eq!(b.len(), 16 + 12 + 12);
        assert_eq!(decode_notify_entries(&b).unwrap(), e);
        assert!(decode_notify_entries(&b[..20]).is_err());
    }

    #[test]
    fn response_layout() {
        let r = encode_change_notify_response(&[]);
        assert_eq!(r, vec![9, 0, 0, 0, 0, 0, 0, 0, 0]);
        let r = encode_change_notify_response(&[1, 2, 3, 4]);
        assert_eq!(&r[..8], &[9, 0, 72, 0, 4, 0, 0, 0]);
    }
}
