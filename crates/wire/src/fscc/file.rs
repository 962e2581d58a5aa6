//! File information classes for QUERY_INFO ([MS-FSCC] 2.4).

use super::{align_up, Times};
use crate::codec::{utf16le, Writer};
use crate::status::NtStatus;
use crate::FileAttributes;

/// FileBasicInformation.
pub const FILE_BASIC_INFORMATION: u8 = 4;
/// FileStandardInformation.
pub const FILE_STANDARD_INFORMATION: u8 = 5;
/// FileInternalInformation.
pub const FILE_INTERNAL_INFORMATION: u8 = 6;
/// FileEaInformation.
pub const FILE_EA_INFORMATION: u8 = 7;
/// FileAccessInformation.
pub const FILE_ACCESS_INFORMATION: u8 = 8;
/// FileNameInformation.
pub const FILE_NAME_INFORMATION: u8 = 9;
/// FilePositionInformation.
pub const FILE_POSITION_INFORMATION: u8 = 14;
/// FileFullEaInformation.
pub const FILE_FULL_EA_INFORMATION: u8 = 15;
/// FileModeInformation.
pub const FILE_MODE_INFORMATION: u8 = 16;
/// FileAlignmentInformation.
pub const FILE_ALIGNMENT_INFORMATION: u8 = 17;
/// FileAllInformation.
pub const FILE_ALL_INFORMATION: u8 = 18;
/// FileAlternateNameInformation.
pub const FILE_ALTERNATE_NAME_INFORMATION: u8 = 21;
/// FileStreamInformation.
pub const FILE_STREAM_INFORMATION: u8 = 22;
/// FileCompressionInformation.
pub const FILE_COMPRESSION_INFORMATION: u8 = 28;
/// FileNetworkOpenInformation.
pub const FILE_NETWORK_OPEN_INFORMATION: u8 = 34;
/// FileAttributeTagInformation.
pub const FILE_ATTRIBUTE_TAG_INFORMATION: u8 = 35;
/// FileNormalizedNameInformation.
pub const FILE_NORMALIZED_NAME_INFORMATION: u8 = 48;

/// The minimum OutputBufferLength of each class (smaller is STATUS_INFO_LENGTH_MISMATCH):
/// Windows uses the C `sizeof` of the structure, which for the variable-length classes
/// includes the first name character and padding (FileAllInformation 104,
/// FILE_NAME_INFORMATION-shaped classes 8, FileStreamInformation 32).
pub fn min_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_BASIC_INFORMATION => 40,
        FILE_STANDARD_INFORMATION => 24,
        FILE_INTERNAL_INFORMATION => 8,
        FILE_EA_INFORMATION => 4,
        FILE_ACCESS_INFORMATION => 4,
        FILE_NAME_INFORMATION => 8,
        FILE_POSITION_INFORMATION => 8,
        FILE_FULL_EA_INFORMATION => 0,
        FILE_MODE_INFORMATION => 4,
        FILE_ALIGNMENT_INFORMATION => 4,
        FILE_ALL_INFORMATION => 104,
        FILE_ALTERNATE_NAME_INFORMATION => 8,
        FILE_STREAM_INFORMATION => 32,
        FILE_COMPRESSION_INFORMATION => 16,
        FILE_NETWORK_OPEN_INFORMATION => 56,
        FILE_ATTRIBUTE_TAG_INFORMATION => 8,
        FILE_NORMALIZED_NAME_INFORMATION => 8,
        _ => return None,
    })
}

/// FileBasicInformation (40 bytes).
pub fn basic(times: &Times, attributes: FileAttributes) -> Vec<u8> {
    let mut w = Writer::with_capacity(40);
    times.encode(&mut w);
    w.u32(attributes.bits()).u32(0);
    w.into_vec()
}

/// FileStandardInformation contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Standard {
    /// AllocationSize.
    pub allocation_size: u64,
    /// EndOfFile.
    pub end_of_file: u64,
    /// NumberOfLinks.
    pub number_of_links: u32,
    /// DeletePending.
    pub delete_pending: bool,
    /// Directory.
    pub directory: bool,
}

/// FileStandardInformation (24 bytes).
pub fn standard(s: &Standard) -> Vec<u8> {
    let mut w = Writer::with_capacity(24);
    w.u64(s.allocation_size)
        .u64(s.end_of_file)
        .u32(s.number_of_links)
        .u8(s.delete_pending as u8)
        .u8(s.directory as u8)
        .u16(0);
    w.into_vec()
}

/// A 4-byte value class (FileEaInformation, FileAccessInformation, FileModeInformation,
/// FileAlignmentInformation).
pub fn u32_info(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// An 8-byte value class (FileInternalInformation, FilePositionInformation).
pub fn u64_info(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A FILE_NAME_INFORMATION-shaped structure (FileNameLength + UTF-16 name):
/// FileNameInformation, FileAlternateNameInformation, FileNormalizedNameInformation.
pub fn name_info(name: &str) -> Vec<u8> {
    let n = utf16le(name);
    let mut w = Writer::with_capacity(4 + n.len());
    w.u32(n.len() as u32).bytes(&n);
    w.into_vec()
}

/// FileAllInformation contents.
#[derive(Debug, Clone, Default)]
pub struct All {
    /// Times.
    pub times: Times,
    /// FileAttributes.
    pub attributes: FileAttributes,
    /// Standard part.
    pub standard: Standard,
    /// IndexNumber.
    pub index_number: u64,
    /// EaSize.
    pub ea_size: u32,
    /// AccessFlags.
    pub access_flags: u32,
    /// CurrentByteOffset.
    pub position: u64,
    /// Mode.
    pub mode: u32,
    /// AlignmentRequirement.
    pub alignment: u32,
    /// FileName.
    pub name: String,
}

/// FileAllInformation (100 bytes + name).
pub fn all(a: &All) -> Vec<u8> {
    let mut w = Writer::with_capacity(100 + a.name.len() * 2);
    w.bytes(&basic(&a.times, a.attributes));
    w.bytes(&standard(&a.standard));
    w.u64(a.index_number)
        .u32(a.ea_size)
        .u32(a.access_flags)
        .u64(a.position)
        .u32(a.mode)
        .u32(a.alignment);
    w.bytes(&name_info(&a.name));
    w.into_vec()
}

/// FileNetworkOpenInformation (56 bytes).
pub fn network_open(
    times: &Times,
    allocation_size: u64,
    end_of_file: u64,
    attrs: FileAttributes,
) -> Vec<u8> {
    let mut w = Writer::with_capacity(56);
    times.encode(&mut w);
    w.u64(allocation_size)
        .u64(end_of_file)
        .u32(attrs.bits())
        .u32(0);
    w.into_vec()
}

/// FileAttributeTagInformation (8 bytes).
pub fn attribute_tag(attributes: FileAttributes, reparse_tag: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(8);
    w.u32(attributes.bits()).u32(reparse_tag);
    w.into_vec()
}

/// FileCompressionInformation (16 bytes) for an uncompressed file.
pub fn compression(compressed_size: u64) -> Vec<u8> {
    let mut w = Writer::with_capacity(16);
    w.u64(compressed_size).u16(0).u8(0).u8(0).u8(0).zeros(3);
    w.into_vec()
}

/// One FileStreamInformation entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry<'a> {
    /// Stream name ("::$DATA", ":name:$DATA").
    pub name: &'a str,
    /// StreamSize.
    pub size: u64,
    /// StreamAllocationSize.
    pub allocation_size: u64,
}

/// FileStreamInformation limited to `max` bytes: whole entries, 8-byte aligned.
/// Returns the bytes and whether some entries did not fit.
pub fn streams(entries: &[StreamEntry<'_>], max: usize) -> (Vec<u8>, bool) {
    let mut w = Writer::new();
    let mut last: Option<usize> = None;
    for e in entries {
        let n = utf16le(e.name);
        let start = if last.is_some() {
            align_up(w.len(), 8)
        } else {
            0
        };
        if start.saturating_add(24).saturating_add(n.len()) > max {
            return (w.into_vec(), true);
        }
        w.zeros(start - w.len());
        if let Some(p) = last {
            w.patch_u32(p, (start - p) as u32);
        }
        w.u32(0)
            .u32(n.len() as u32)
            .u64(e.size)
            .u64(e.allocation_size)
            .bytes(&n);
        last = Some(start);
    }
    (w.into_vec(), false)
}

/// Fits a fixed-plus-name structure into `max` bytes: INFO_LENGTH_MISMATCH below
/// `min`, otherwise the (possibly truncated) bytes and BUFFER_OVERFLOW if truncated.
pub fn fit(mut data: Vec<u8>, min: usize, max: usize) -> Result<(Vec<u8>, NtStatus), NtStatus> {
    if max < min {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    if data.len() > max {
        data.truncate(max);
        return Ok((data, NtStatus::BUFFER_OVERFLOW));
    }
    Ok((data, NtStatus::SUCCESS))
}

// ---------------------------------------------------------------------------------------------
// Client direction: decoding what QUERY_INFO returns.

fn decode_times(r: &mut crate::codec::Reader<'_>) -> Result<Times, crate::codec::WireError> {
    Ok(Times {
        creation: r.u64()?,
        last_access: r.u64()?,
        last_write: r.u64()?,
        change: r.u64()?,
    })
}

/// Decodes FileAllInformation. A name cut short by a small output buffer (the server
/// answers STATUS_BUFFER_OVERFLOW) is kept as far as it goes.
pub fn decode_all(buf: &[u8]) -> Result<All, crate::codec::WireError> {
    let mut r = crate::codec::Reader::new(buf);
    let times = decode_times(&mut r)?;
    let attributes = FileAttributes(r.u32()?);
    r.u32()?;
    let standard = Standard {
        allocation_size: r.u64()?,
        end_of_file: r.u64()?,
        number_of_links: r.u32()?,
        delete_pending: r.u8()? != 0,
        directory: r.u8()? != 0,
    };
    r.u16()?;
    let index_number = r.u64()?;
    let ea_size = r.u32()?;
    let access_flags = r.u32()?;
    let position = r.u64()?;
    let mode = r.u32()?;
    let alignment = r.u32()?;
    let name_len = r.u32()? as usize;
    let avail = r.remaining().min(name_len) & !1;
    let name = crate::codec::from_utf16le(r.bytes(avail)?).unwrap_or_default();
    Ok(All {
        times,
        attributes,
        standard,
        index_number,
        ea_size,
        access_flags,
        position,
        mode,
        alignment,
        name,
    })
}

/// FileNetworkOpenInformation, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetworkOpen {
    /// Times.
    pub times: Times,
    /// AllocationSize.
    pub allocation_size: u64,
    /// EndOfFile.
    pub end_of_file: u64,
    /// FileAttributes.
    pub attributes: FileAttributes,
}

/// Decodes FileNetworkOpenInformation (56 bytes).
pub fn decode_network_open(buf: &[u8]) -> Result<NetworkOpen, crate::codec::WireError> {
    let mut r = crate::codec::Reader::new(buf);
    Ok(NetworkOpen {
        times: decode_times(&mut r)?,
        allocation_size: r.u64()?,
        end_of_file: r.u64()?,
        attributes: FileAttributes(r.u32()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let t = Times::default();
        assert_eq!(basic(&t, FileAttributes::ARCHIVE).len(), 40);
        assert_eq!(standard(&Standard::default()).len(), 24);
        assert_eq!(network_open(&t, 1, 2, FileAttributes(3)).len(), 56);
        assert_eq!(attribute_tag(FileAttributes::READONLY, 0).len(), 8);
        assert_eq!(compression(0).len(), 16);
        let a = All {
            name: "\\a".into(),
            ..Default::default()
        };
        let b = all(&a);
        assert_eq!(b.len(), 104);
        assert_eq!(&b[96..100], &[4, 0, 0, 0]);
        assert_eq!(name_info("ab"), vec![4, 0, 0, 0, b'a', 0, b'b', 0]);
    }

    #[test]
    fn stream_list() {
        let e = [
            StreamEntry {
                name: "::$DATA",
                size: 10,
                allocation_size: 4096,
            },
            StreamEntry {
                name: ":x:$DATA",
                size: 1,
                allocation_size: 1,
            },
        ];
        let (b, more) = streams(&e, 1000);
        assert!(!more);
        // first entry 24 + 14 = 38 -> next at 40
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 40);
        assert_eq!(b.len(), 40 + 24 + 16);
        let (b, more) = streams(&e, 50);
        assert!(more);
        assert_eq!(b.len(), 38);
        let (b, more) = streams(&e, 10);
        assert!(more && b.is_empty());
    }

    #[test]
    fn fitting() {
        assert_eq!(fit(vec![0; 8], 8, 7), Err(NtStatus::INFO_LENGTH_MISMATCH));
        assert_eq!(
            fit(vec![0; 8], 4, 6).unwrap(),
            (vec![0; 6], NtStatus::BUFFER_OVERFLOW)
        );
        assert_eq!(
            fit(vec![0; 8], 4, 9).unwrap(),
            (vec![0; 8], NtStatus::SUCCESS)
        );
    }
}

#[cfg(test)]
mod decode_tests {
    use super::*;

    #[test]
    fn all_round_trip_and_truncated_name() {
        let a = All {
            times: Times {
                creation: 1,
                last_access: 2,
                last_write: 3,
                change: 4,
            },
            attributes: FileAttributes::DIRECTORY,
            standard: Standard {
                allocation_size: 8,
                end_of_file: 7,
                number_of_links: 1,
                delete_pending: false,
                directory: true,
            },
            index_number: 42,
            name: "dir\\name".into(),
            ..Default::default()
        };
        let b = all(&a);
        let d = decode_all(&b).unwrap();
        assert_eq!(
            (d.times, d.attributes, d.standard, d.index_number),
            (a.times, FileAttributes::DIRECTORY, a.standard, 42)
        );
        assert_eq!(d.name, a.name);
        assert_eq!(decode_all(&b[..104]).unwrap().name, "di");
        for n in 0..100 {
            assert!(decode_all(&b[..n]).is_err());
        }
    }

    #[test]
    fn network_open_round_trip() {
        let t = Times {
            creation: 9,
            last_access: 8,
            last_write: 7,
            change: 6,
        };
        let b = network_open(&t, 4096, 10, FileAttributes::ARCHIVE);
        let d = decode_network_open(&b).unwrap();
        assert_eq!(
            (d.times, d.allocation_size, d.end_of_file, d.attributes),
            (t, 4096, 10, FileAttributes::ARCHIVE)
        );
        assert!(decode_network_open(&b[..50]).is_err());
    }
}
