//! Directory entries for QUERY_DIRECTORY ([MS-FSCC] 2.4.8 FileBothDirectoryInformation,
//! 2.4.10 FileDirectoryInformation, 2.4.14 FileFullDirectoryInformation, 2.4.17
//! FileIdBothDirectoryInformation, 2.4.18 FileIdExtdDirectoryInformation, 2.4.19
//! FileIdFullDirectoryInformation, 2.4.28 FileNamesInformation).
//!
//! Entries are chained by NextEntryOffset, each starting on an 8-byte boundary; the last
//! entry has NextEntryOffset 0 and no trailing padding.

use super::{align_up, Times};
use crate::codec::{from_utf16le, utf16le, Reader, WireError, Writer};
use crate::FileAttributes;

/// FileDirectoryInformation.
pub const FILE_DIRECTORY_INFORMATION: u8 = 1;
/// FileFullDirectoryInformation.
pub const FILE_FULL_DIRECTORY_INFORMATION: u8 = 2;
/// FileBothDirectoryInformation.
pub const FILE_BOTH_DIRECTORY_INFORMATION: u8 = 3;
/// FileNamesInformation.
pub const FILE_NAMES_INFORMATION: u8 = 12;
/// FileIdBothDirectoryInformation.
pub const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 37;
/// FileIdFullDirectoryInformation.
pub const FILE_ID_FULL_DIRECTORY_INFORMATION: u8 = 38;
/// FileIdExtdDirectoryInformation.
pub const FILE_ID_EXTD_DIRECTORY_INFORMATION: u8 = 60;

/// The directory information classes [`DirBuffer`] can encode.
pub fn is_dir_class(class: u8) -> bool {
    fixed_size(class).is_some()
}

/// Size of the fixed part of one entry (before the name) of `class`.
pub fn fixed_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_DIRECTORY_INFORMATION => 64,
        FILE_FULL_DIRECTORY_INFORMATION => 68,
        FILE_BOTH_DIRECTORY_INFORMATION => 94,
        FILE_NAMES_INFORMATION => 12,
        FILE_ID_BOTH_DIRECTORY_INFORMATION => 104,
        FILE_ID_FULL_DIRECTORY_INFORMATION => 80,
        FILE_ID_EXTD_DIRECTORY_INFORMATION => 88,
        _ => return None,
    })
}

/// One directory entry's contents.
#[derive(Debug, Clone, Default)]
pub struct DirEntryInfo<'a> {
    /// FileIndex (0: the position is not meaningful, as on NTFS).
    pub file_index: u32,
    /// The four times.
    pub times: Times,
    /// EndOfFile.
    pub end_of_file: u64,
    /// AllocationSize.
    pub allocation_size: u64,
    /// FileAttributes.
    pub attributes: FileAttributes,
    /// EaSize (the reparse tag for reparse points).
    pub ea_size: u32,
    /// ReparsePointTag (FileIdExtdDirectoryInformation).
    pub reparse_tag: u32,
    /// The 64-bit file id (FileId* classes).
    pub file_id: u64,
    /// The 128-bit file id of FileIdExtdDirectoryInformation (low 8 bytes = `file_id`,
    /// high 8 bytes = this value, typically the volume id).
    pub file_id_high: u64,
    /// The 8.3 short name (Both classes); at most 12 characters are sent.
    pub short_name: Option<&'a str>,
    /// The name.
    pub name: &'a str,
}

/// Encodes one entry of `class` with NextEntryOffset 0 and no trailing padding;
/// `None` for an unsupported class.
pub fn encode_entry(class: u8, e: &DirEntryInfo<'_>) -> Option<Vec<u8>> {
    let fixed = fixed_size(class)?;
    let name = utf16le(e.name);
    let mut w = Writer::with_capacity(fixed + name.len());
    w.u32(0).u32(e.file_index);
    if class == FILE_NAMES_INFORMATION {
        w.u32(name.len() as u32).bytes(&name);
        return Some(w.into_vec());
    }
    e.times.encode(&mut w);
    w.u64(e.end_of_file)
        .u64(e.allocation_size)
        .u32(e.attributes.bits())
        .u32(name.len() as u32);
    match class {
        FILE_DIRECTORY_INFORMATION => {}
        FILE_FULL_DIRECTORY_INFORMATION => {
            w.u32(e.ea_size);
        }
        FILE_ID_FULL_DIRECTORY_INFORMATION => {
            w.u32(e.ea_size).u32(0).u64(e.file_id);
        }
        FILE_BOTH_DIRECTORY_INFORMATION | FILE_ID_BOTH_DIRECTORY_INFORMATION => {
            w.u32(e.ea_size);
            let mut short = [0u8; 24];
            let mut short_len = 0usize;
            if let Some(s) = e.short_name {
                let b = utf16le(s);
                short_len = b.len().min(24) & !1;
                short[..short_len].copy_from_slice(&b[..short_len]);
            }
            w.u8(short_len as u8).u8(0).bytes(&short);
            if class == FILE_ID_BOTH_DIRECTORY_INFORMATION {
                w.u16(0).u64(e.file_id);
            }
        }
        FILE_ID_EXTD_DIRECTORY_INFORMATION => {
            w.u32(e.ea_size)
                .u32(e.reparse_tag)
                .u64(e.file_id)
                .u64(e.file_id_high);
        }
        _ => return None,
    }
    debug_assert_eq!(w.len(), fixed);
    w.bytes(&name);
    Some(w.into_vec())
}

/// Accumulates entries into an output buffer of at most `max` bytes.
#[derive(Debug)]
pub struct DirBuffer {
    class: u8,
    max: usize,
    buf: Vec<u8>,
    last: Option<usize>,
    count: usize,
}

impl DirBuffer {
    /// A buffer for entries of `class` limited to `max` bytes; `None` for an
    /// unsupported class.
    pub fn new(class: u8, max: usize) -> Option<DirBuffer> {
        fixed_size(class)?;
        Some(DirBuffer {
            class,
            max,
            buf: Vec::new(),
            last: None,
            count: 0,
        })
    }

    /// Appends an entry if it fits (after padding the previous one to 8 bytes);
    /// returns false, leaving the buffer unchanged, when it does not.
    pub fn push(&mut self, e: &DirEntryInfo<'_>) -> bool {
        let Some(fixed) = fixed_size(self.class) else {
            return false;
        };
        // Cheap size check before encoding.
        let need = fixed.saturating_add(e.name.encode_utf16().count().saturating_mul(2));
        let start = if self.last.is_some() {
            align_up(self.buf.len(), 8)
        } else {
            0
        };
        if start.saturating_add(need) > self.max {
            return false;
        }
        let Some(bytes) = encode_entry(self.class, e) else {
            return false;
        };
        self.buf.resize(start, 0);
        if let Some(prev) = self.last {
            let off = (start - prev) as u32;
            self.buf[prev..prev + 4].copy_from_slice(&off.to_le_bytes());
        }
        self.buf.extend_from_slice(&bytes);
        self.last = Some(start);
        self.count += 1;
        true
    }

    /// Number of entries added.
    pub fn count(&self) -> usize {
        self.count
    }

    /// True when no entry was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded entries.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

// ---------------------------------------------------------------------------------------------
// Client direction: decoding the entries a server returns.

/// One decoded FileIdBothDirectoryInformation entry (owned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodedDirEntry {
    /// FileIndex.
    pub file_index: u32,
    /// The four times.
    pub times: Times,
    /// EndOfFile.
    pub end_of_file: u64,
    /// AllocationSize.
    pub allocation_size: u64,
    /// FileAttributes.
    pub attributes: FileAttributes,
    /// EaSize.
    pub ea_size: u32,
    /// The 64-bit file id.
    pub file_id: u64,
    /// The 8.3 short name (empty if none).
    pub short_name: String,
    /// The name.
    pub name: String,
}

/// Most entries accepted from one buffer (a server can send no more in 16 MiB).
const MAX_DECODED_ENTRIES: usize = 1 << 17;

/// Decodes a chain of FileIdBothDirectoryInformation entries (a QUERY_DIRECTORY output
/// buffer). NextEntryOffset must move forward by at least the fixed size and stay inside
/// `buf`; names must be valid UTF-16.
pub fn decode_id_both_entries(buf: &[u8]) -> Result<Vec<DecodedDirEntry>, WireError> {
    let fixed = 104usize;
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        if out.len() >= MAX_DECODED_ENTRIES {
            return Err(WireError::Invalid("too many directory entries"));
        }
        let entry = buf
            .get(pos..)
            .ok_or(WireError::Invalid("NextEntryOffset"))?;
        let mut r = Reader::new(entry);
        let next = r.u32()? as usize;
        let file_index = r.u32()?;
        let times = Times {
            creation: r.u64()?,
            last_access: r.u64()?,
            last_write: r.u64()?,
            change: r.u64()?,
        };
        let end_of_file = r.u64()?;
        let allocation_size = r.u64()?;
        let attributes = FileAttributes(r.u32()?);
        let name_len = r.u32()? as usize;
        let ea_size = r.u32()?;
        let short_len = (r.u8()? as usize).min(24) & !1;
        r.u8()?;
        let short = r.bytes(24)?;
        r.u16()?;
        let file_id = r.u64()?;
        let name = from_utf16le(r.bytes(name_len)?)?;
        let short_name = from_utf16le(&short[..short_len]).unwrap_or_default();
        out.push(DecodedDirEntry {
            file_index,
            times,
            end_of_file,
            allocation_size,
            attributes,
            ea_size,
            file_id,
            short_name,
            name,
        });
        if next == 0 {
            return Ok(out);
        }
        if next < fixed {
            return Err(WireError::Invalid("NextEntryOffset too small"));
        }
        pos = pos
            .checked_add(next)
            .ok_or(WireError::Invalid("NextEntryOffset"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{from_utf16le, Reader};

    fn entry(name: &str) -> DirEntryInfo<'_> {
        DirEntryInfo {
            file_index: 0,
            times: Times {
                creation: 1,
                last_access: 2,
                last_write: 3,
                change: 4,
            },
            end_of_file: 5,
            allocation_size: 4096,
            attributes: FileAttributes::ARCHIVE,
            ea_size: 0,
            reparse_tag: 0,
            file_id: 0x1122,
            file_id_high: 0x33,
            short_name: Some("LONGN~AB.TXT"),
            name,
        }
    }

    #[test]
    fn layouts() {
        for class in [1u8, 2, 3, 12, 37, 38, 60] {
            let b = encode_entry(class, &entry("ab")).unwrap();
            assert_eq!(b.len(), fixed_size(class).unwrap() + 4, "class {class}");
            assert_eq!(&b[b.len() - 4..], &[b'a', 0, b'b', 0]);
        }
        let b = encode_entry(37, &entry("ab")).unwrap();
        let mut r = Reader::new(&b);
        r.seek(60).unwrap();
        assert_eq!(r.u32().unwrap(), 4); // FileNameLength
        assert_eq!(r.u32().unwrap(), 0); // EaSize
        assert_eq!(r.u8().unwrap(), 24); // ShortNameLength
        r.u8().unwrap();
        assert_eq!(from_utf16le(r.bytes(24).unwrap()).unwrap(), "LONGN~AB.TXT");
        r.u16().unwrap();
        assert_eq!(r.u64().unwrap(), 0x1122);
        let b = encode_entry(12, &entry("xyz")).unwrap();
        assert_eq!(&b[8..12], &[6, 0, 0, 0]);
        assert!(encode_entry(99, &entry("a")).is_none());
        assert!(DirBuffer::new(99, 10).is_none());
    }

    #[test]
    fn chaining_and_budget() {
        let mut d = DirBuffer::new(1, 64 + 2 + 6 + 64 + 4).unwrap();
        assert!(d.push(&entry("a")));
        // 66 bytes -> next starts at 72; 72 + 68 = 140 == max
        assert!(d.push(&entry("bb")));
        assert!(!d.push(&entry("c")));
        assert_eq!(d.count(), 2);
        let v = d.into_vec();
        assert_eq!(v.len(), 140);
        assert_eq!(u32::from_le_bytes(v[0..4].try_into().unwrap()), 72);
        assert_eq!(u32::from_le_bytes(v[72..76].try_into().unwrap()), 0);
        let mut d = DirBuffer::new(1, 10).unwrap();
        assert!(!d.push(&entry("a")));
        assert!(d.is_empty());
    }
}

#[cfg(test)]
mod decode_tests {
    use super::*;

    fn entry(name: &str, short: Option<&str>) -> Vec<u8> {
        encode_entry(
            FILE_ID_BOTH_DIRECTORY_INFORMATION,
            &DirEntryInfo {
                end_of_file: 5,
                attributes: FileAttributes::ARCHIVE,
                file_id: 99,
                short_name: short,
                name,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn decodes_what_encode_entry_makes() {
        let mut first = entry("a.txt", None);
        let len = align_up(first.len(), 8);
        first.resize(len, 0);
        first[..4].copy_from_slice(&(len as u32).to_le_bytes());
        let mut buf = first;
        buf.extend_from_slice(&entry("bb", Some("BB")));
        let e = decode_id_both_entries(&buf).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].name.as_str(), e[1].name.as_str()), ("a.txt", "bb"));
        assert_eq!(
            (e[1].end_of_file, e[1].file_id, e[1].attributes),
            (5, 99, FileAttributes::ARCHIVE)
        );
        assert_eq!(e[1].short_name, "BB");
    }

    #[test]
    fn hostile_offsets_are_errors() {
        let mut e = entry("x", None);
        e[..4].copy_from_slice(&4u32.to_le_bytes());
        assert!(decode_id_both_entries(&e).is_err());
        e[..4].copy_from_slice(&4096u32.to_le_bytes());
        assert!(decode_id_both_entries(&e).is_err());
        e[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_id_both_entries(&e).is_err());
        let good = entry("name", None);
        for n in 0..good.len() {
            assert!(decode_id_both_entries(&good[..n]).is_err());
        }
    }
}
