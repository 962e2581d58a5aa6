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
//! 14     8    change time (FILETIME), meaningful when flag bit 1 is set
//! 22     8    the last write time (FILETIME) the file had when the change time was
//!             set: the stored change time holds only while the file keeps that
//!             last write time (a later write or time change makes it stale)
//! ```
//!
//! Records with another version or a short length are ignored (treated as absent);
//! 14-byte records (without the change time) are still read.
//! The name differs from Samba's `user.DOSATTRIB` so the two never misread each other.

pub use smbx_wire::FileAttributes;

/// Attributes a client may set through SetInfo / CREATE (others are derived or ignored).
pub const SETTABLE_ATTRIBUTES: FileAttributes = FileAttributes::READONLY
    .union(FileAttributes::HIDDEN)
    .union(FileAttributes::SYSTEM)
    .union(FileAttributes::ARCHIVE)
    .union(FileAttributes::TEMPORARY)
    .union(FileAttributes::OFFLINE)
    .union(FileAttributes::NOT_CONTENT_INDEXED);

/// Attributes kept in the on-disk record.
pub(crate) const STORED_ATTRIBUTES: FileAttributes =
    SETTABLE_ATTRIBUTES.union(FileAttributes::SPARSE_FILE);

/// Name of the extended attribute holding the [`DosMeta`] record.
pub const DOS_XATTR: &std::ffi::CStr = c"user.smbx.dosattrib";

const VERSION: u8 = 1;
const FLAG_CREATION: u8 = 1;
const FLAG_CHANGE: u8 = 2;
const MIN_RECORD_LEN: usize = 14;
const RECORD_LEN: usize = 30;

/// DOS metadata kept beside a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DosMeta {
    /// Stored attribute bits (never DIRECTORY or NORMAL).
    pub attributes: FileAttributes,
    /// Creation time (FILETIME), if recorded.
    pub creation: Option<u64>,
    /// A client-set ChangeTime and the last write time it belongs to, if recorded.
    pub change: Option<StoredChange>,
}

/// A ChangeTime set by a client (SET_INFO FileBasicInformation). POSIX ctime cannot
/// be set, so it is kept here; it is reported while the file's last write time is
/// still `write_time` (as when it was set), after that the last write time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredChange {
    /// The ChangeTime (FILETIME).
    pub change_time: u64,
    /// The file's last write time (FILETIME) when it was set.
    pub write_time: u64,
}

impl StoredChange {
    /// The ChangeTime to report for a file whose last write time is `last_write`:
    /// the stored one while it is current, else `last_write`.
    pub fn resolve(change: Option<StoredChange>, last_write: u64) -> u64 {
        match change {
            Some(c) if c.write_time == last_write => c.change_time,
            _ => last_write,
        }
    }
}

impl DosMeta {
    /// Encodes the record.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0] = VERSION;
        let mut flags = 0;
        if self.creation.is_some() {
            flags |= FLAG_CREATION;
        }
        if self.change.is_some() {
            flags |= FLAG_CHANGE;
        }
        b[1] = flags;
        b[2..6].copy_from_slice(&(self.attributes & STORED_ATTRIBUTES).bits().to_le_bytes());
        b[6..14].copy_from_slice(&self.creation.unwrap_or(0).to_le_bytes());
        let c = self.change.unwrap_or_default();
        b[14..22].copy_from_slice(&c.change_time.to_le_bytes());
        b[22..30].copy_from_slice(&c.write_time.to_le_bytes());
        b
    }

    /// Decodes a record; `None` for unknown versions or short input.
    pub fn decode(b: &[u8]) -> Option<DosMeta> {
        if b.len() < MIN_RECORD_LEN || b[0] != VERSION {
            return None;
        }
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        let attributes =
            FileAttributes(u32::from_le_bytes(b.get(2..6)?.try_into().ok()?)) & STORED_ATTRIBUTES;
        let ct = u64_at(6)?;
        let change = if b[1] & FLAG_CHANGE != 0 {
            Some(StoredChange {
                change_time: u64_at(14)?,
                write_time: u64_at(22)?,
            })
        } else {
            None
        };
        Some(DosMeta {
            attributes,
            creation: (b[1] & FLAG_CREATION != 0).then_some(ct),
            change,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = DosMeta {
            attributes: FileAttributes::HIDDEN | FileAttributes::SPARSE_FILE,
            creation: Some(0x01d9_0000_1234_5678),
            change: None,
        };
        assert_eq!(DosMeta::decode(&m.encode()), Some(m));
        let m = DosMeta {
            attributes: FileAttributes::READONLY,
            creation: None,
            change: Some(StoredChange {
                change_time: 5,
                write_time: 9,
            }),
        };
        assert_eq!(DosMeta::decode(&m.encode()), Some(m));
        // Old 14-byte records still read; a change flag without its bytes does not.
        let mut old = m.encode();
        old[1] = 0;
        assert_eq!(
            DosMeta::decode(&old[..14]),
            Some(DosMeta {
                attributes: FileAttributes::READONLY,
                creation: None,
                change: None
            })
        );
        assert_eq!(DosMeta::decode(&m.encode()[..20]), None);
    }

    #[test]
    fn stored_change_is_current_only_with_its_write_time() {
        let c = Some(StoredChange {
            change_time: 5,
            write_time: 9,
        });
        assert_eq!(StoredChange::resolve(c, 9), 5);
        assert_eq!(StoredChange::resolve(c, 10), 10);
        assert_eq!(StoredChange::resolve(None, 10), 10);
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
        assert_eq!(
            DosMeta::decode(&b).unwrap().attributes,
            FileAttributes::empty()
        );
    }
}
