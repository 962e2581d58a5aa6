//! DOS file attributes and their on-disk record.
//!
//! When `store_dos_attributes` is on, attributes and the creation time live in the
//! extended attribute [`DOS_XATTR`] in this format (all little-endian):
//!
//! ```text
//! offset size field
//! 0      1    version = 1
//! 1      1    flags: bit 0 = creation time present
//! 2      4    DOS attributes (u32); DIRECTORY is never stored (derived from the mode)
//! 6      8    creation time (FILETIME, u64), meaningful when flag bit 0 is set
//! ```
//!
//! Records with another version or a short length are ignored (treated as absent).
//! The name differs from Samba's `user.DOSATTRIB` so the two never misread each other.

/// FILE_ATTRIBUTE_READONLY.
pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0000_0001;
/// FILE_ATTRIBUTE_HIDDEN.
pub const FILE_ATTRIBUTE_HIDDEN: u32 = 0x0000_0002;
/// FILE_ATTRIBUTE_SYSTEM.
pub const FILE_ATTRIBUTE_SYSTEM: u32 = 0x0000_0004;
/// FILE_ATTRIBUTE_DIRECTORY.
pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;
/// FILE_ATTRIBUTE_ARCHIVE.
pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0000_0020;
/// FILE_ATTRIBUTE_NORMAL (only ever reported alone).
pub const FILE_ATTRIBUTE_NORMAL: u32 = 0x0000_0080;
/// FILE_ATTRIBUTE_TEMPORARY.
pub const FILE_ATTRIBUTE_TEMPORARY: u32 = 0x0000_0100;
/// FILE_ATTRIBUTE_SPARSE_FILE.
pub const FILE_ATTRIBUTE_SPARSE_FILE: u32 = 0x0000_0200;
/// FILE_ATTRIBUTE_REPARSE_POINT.
pub const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x0000_0400;
/// FILE_ATTRIBUTE_COMPRESSED.
pub const FILE_ATTRIBUTE_COMPRESSED: u32 = 0x0000_0800;
/// FILE_ATTRIBUTE_OFFLINE.
pub const FILE_ATTRIBUTE_OFFLINE: u32 = 0x0000_1000;
/// FILE_ATTRIBUTE_NOT_CONTENT_INDEXED.
pub const FILE_ATTRIBUTE_NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
/// FILE_ATTRIBUTE_ENCRYPTED.
pub const FILE_ATTRIBUTE_ENCRYPTED: u32 = 0x0000_4000;

/// Attributes a client may set through SetInfo / CREATE (others are derived or ignored).
pub const SETTABLE_ATTRIBUTES: u32 = FILE_ATTRIBUTE_READONLY
    | FILE_ATTRIBUTE_HIDDEN
    | FILE_ATTRIBUTE_SYSTEM
    | FILE_ATTRIBUTE_ARCHIVE
    | FILE_ATTRIBUTE_TEMPORARY
    | FILE_ATTRIBUTE_OFFLINE
    | FILE_ATTRIBUTE_NOT_CONTENT_INDEXED;

/// Attributes kept in the on-disk record.
pub(crate) const STORED_ATTRIBUTES: u32 = SETTABLE_ATTRIBUTES | FILE_ATTRIBUTE_SPARSE_FILE;

/// Name of the extended attribute holding the [`DosMeta`] record.
pub const DOS_XATTR: &std::ffi::CStr = c"user.smbx.dosattrib";

const VERSION: u8 = 1;
const FLAG_CREATION: u8 = 1;
const RECORD_LEN: usize = 14;

/// DOS metadata kept beside a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DosMeta {
    /// Stored attribute bits (never DIRECTORY or NORMAL).
    pub attributes: u32,
    /// Creation time (FILETIME), if recorded.
    pub creation: Option<u64>,
}

impl DosMeta {
    /// Encodes the record.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0] = VERSION;
        b[1] = if self.creation.is_some() {
            FLAG_CREATION
        } else {
            0
        };
        b[2..6].copy_from_slice(&(self.attributes & STORED_ATTRIBUTES).to_le_bytes());
        b[6..14].copy_from_slice(&self.creation.unwrap_or(0).to_le_bytes());
        b
    }

    /// Decodes a record; `None` for unknown versions or short input.
    pub fn decode(b: &[u8]) -> Option<DosMeta> {
        if b.len() < RECORD_LEN || b[0] != VERSION {
            return None;
        }
        let attributes = u32::from_le_bytes(b.get(2..6)?.try_into().ok()?) & STORED_ATTRIBUTES;
        let ct = u64::from_le_bytes(b.get(6..14)?.try_into().ok()?);
        Some(DosMeta {
            attributes,
            creation: (b[1] & FLAG_CREATION != 0).then_some(ct),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = DosMeta {
            attributes: FILE_ATTRIBUTE_HIDDEN | FILE_ATTRIBUTE_SPARSE_FILE,
            creation: Some(0x01d9_0000_1234_5678),
        };
        assert_eq!(DosMeta::decode(&m.encode()), Some(m));
        let m = DosMeta {
            attributes: FILE_ATTRIBUTE_READONLY,
            creation: None,
        };
        assert_eq!(DosMeta::decode(&m.encode()), Some(m));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(DosMeta::decode(&[]), None);
        assert_eq!(DosMeta::decode(&[1, 0, 0]), None);
        let mut b = DosMeta::default().encode();
        b[0] = 9;
        assert_eq!(DosMeta::decode(&b), None);
        // DIRECTORY is never taken from disk.
        let mut b = DosMeta::default().encode();
        b[2] = 0x10;
        assert_eq!(DosMeta::decode(&b).unwrap().attributes, 0);
    }
}
