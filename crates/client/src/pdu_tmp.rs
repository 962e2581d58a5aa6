//! Client-direction codecs for the file PDUs (CREATE, CLOSE, FLUSH, READ, WRITE,
//! QUERY_DIRECTORY, QUERY_INFO, SET_INFO) and the FSCC information classes the client
//! uses ([MS-SMB2] 2.2.13–2.2.40, [MS-FSCC] 2.4).
//!
//! Temporary home: these belong in smbx-wire next to the server-side codecs and move there
//! once those modules land. Encoders return the body (after the 64-byte header); decoders
//! take the whole message starting at the header and check every offset and length.

use smbx_wire::codec::{from_utf16le, slice_at, utf16le, Reader, WireError, Writer};
use smbx_wire::HEADER_SIZE;

/// A 16-byte SMB2_FILEID: persistent and volatile halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    /// Persistent part.
    pub persistent: u64,
    /// Volatile part.
    pub volatile: u64,
}

impl FileId {
    /// The all-ones id that means "the file opened earlier in this related compound".
    pub const RELATED: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    fn write(&self, w: &mut Writer) {
        w.u64(self.persistent).u64(self.volatile);
    }

    fn read(r: &mut Reader<'_>) -> Result<FileId, WireError> {
        Ok(FileId {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }
}

fn body_reader<'a>(
    msg: &'a [u8],
    structure_size: u16,
    what: &'static str,
) -> Result<Reader<'a>, WireError> {
    let mut r = Reader::new(msg);
    r.seek(HEADER_SIZE)?;
    if r.u16()? != structure_size {
        return Err(WireError::Invalid(what));
    }
    Ok(r)
}

/// Returns `msg[off..off+len]` or an empty slice when `len` is 0.
fn buffer_at(msg: &[u8], off: usize, len: usize) -> Result<&[u8], WireError> {
    if len == 0 {
        Ok(&[])
    } else {
        slice_at(msg, off, len)
    }
}

// ---------------------------------------------------------------------------------------------
// CREATE

/// Parameters of a CREATE request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateRequest {
    /// RequestedOplockLevel.
    pub oplock_level: u8,
    /// ImpersonationLevel (2 = Impersonation).
    pub impersonation: u32,
    /// DesiredAccess.
    pub desired_access: u32,
    /// FileAttributes.
    pub file_attributes: u32,
    /// ShareAccess.
    pub share_access: u32,
    /// CreateDisposition.
    pub disposition: u32,
    /// CreateOptions.
    pub create_options: u32,
    /// The path relative to the share, with backslashes, no leading separator.
    pub name: String,
    /// Raw create contexts (already chained and aligned), or empty.
    pub contexts: Vec<u8>,
}

impl CreateRequest {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let name = utf16le(&self.name);
        let mut w = Writer::with_capacity(56 + name.len() + 8 + self.contexts.len());
        w.u16(57)
            .u8(0)
            .u8(self.oplock_level)
            .u32(self.impersonation)
            .u64(0)
            .u64(0)
            .u32(self.desired_access)
            .u32(self.file_attributes)
            .u32(self.share_access)
            .u32(self.disposition)
            .u32(self.create_options)
            .u16((HEADER_SIZE + 56) as u16)
            .u16(name.len() as u16);
        let ctx_pos = w.len();
        w.u32(0).u32(0);
        w.bytes(&name);
        if !self.contexts.is_empty() {
            w.align(8);
            let off = HEADER_SIZE + w.len();
            w.patch_u32(ctx_pos, off as u32);
            w.patch_u32(ctx_pos + 4, self.contexts.len() as u32);
            w.bytes(&self.contexts);
        } else if name.is_empty() {
            w.u8(0);
        }
        w.into_vec()
    }
}

/// The timestamps, sizes and attributes CREATE and CLOSE responses carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileTimes {
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// AllocationSize.
    pub allocation_size: u64,
    /// EndOfFile.
    pub end_of_file: u64,
    /// FileAttributes.
    pub file_attributes: u32,
}

impl FileTimes {
    fn read(r: &mut Reader<'_>) -> Result<FileTimes, WireError> {
        Ok(FileTimes {
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: r.u32()?,
        })
    }
}

/// A decoded CREATE response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateResponse {
    /// OplockLevel granted.
    pub oplock_level: u8,
    /// Flags.
    pub flags: u8,
    /// CreateAction (superseded, opened, created, overwritten).
    pub create_action: u32,
    /// Times, sizes and attributes.
    pub info: FileTimes,
    /// The handle.
    pub file_id: FileId,
    /// Raw create contexts returned.
    pub contexts: Vec<u8>,
}

impl CreateResponse {
    /// Decodes from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<CreateResponse, WireError> {
        let mut r = body_reader(msg, 89, "create response StructureSize")?;
        let oplock_level = r.u8()?;
        let flags = r.u8()?;
        let create_action = r.u32()?;
        let t = [r.u64()?, r.u64()?, r.u64()?, r.u64()?];
        let allocation_size = r.u64()?;
        let end_of_file = r.u64()?;
        let file_attributes = r.u32()?;
        r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        let contexts = buffer_at(msg, ctx_off, ctx_len)?.to_vec();
        Ok(CreateResponse {
            oplock_level,
            flags,
            create_action,
            info: FileTimes {
                creation_time: t[0],
                last_access_time: t[1],
                last_write_time: t[2],
                change_time: t[3],
                allocation_size,
                end_of_file,
                file_attributes,
            },
            file_id,
            contexts,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// CLOSE, FLUSH

/// CLOSE flag: return the file's attributes in the response.
pub const CLOSE_FLAG_POSTQUERY_ATTRIB: u16 = 0x0001;

/// Encodes a CLOSE request body.
pub fn encode_close(file_id: FileId, flags: u16) -> Vec<u8> {
    let mut w = Writer::with_capacity(24);
    w.u16(24).u16(flags).u32(0);
    file_id.write(&mut w);
    w.into_vec()
}

/// Decodes a CLOSE response; the info is meaningful only with POSTQUERY_ATTRIB.
pub fn decode_close_response(msg: &[u8]) -> Result<FileTimes, WireError> {
    let mut r = body_reader(msg, 60, "close response StructureSize")?;
    r.u16()?;
    r.u32()?;
    FileTimes::read(&mut r)
}

/// Encodes a FLUSH request body.
pub fn encode_flush(file_id: FileId) -> Vec<u8> {
    let mut w = Writer::with_capacity(24);
    w.u16(24).u16(0).u32(0);
    file_id.write(&mut w);
    w.into_vec()
}

// ---------------------------------------------------------------------------------------------
// READ, WRITE

/// Encodes a READ request body.
pub fn encode_read(file_id: FileId, offset: u64, length: u32, minimum: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(49);
    w.u16(49).u8(0x50).u8(0).u32(length).u64(offset);
    file_id.write(&mut w);
    w.u32(minimum).u32(0).u32(0).u16(0).u16(0).u8(0);
    w.into_vec()
}

/// Decodes a READ response, returning the data's position and length inside `msg`
/// (so the caller can take the bytes without another copy).
pub fn decode_read_response(msg: &[u8]) -> Result<std::ops::Range<usize>, WireError> {
    let mut r = body_reader(msg, 17, "read response StructureSize")?;
    let off = r.u8()? as usize;
    r.u8()?;
    let len = r.u32()? as usize;
    if len == 0 {
        return Ok(msg.len()..msg.len());
    }
    slice_at(msg, off, len)?;
    Ok(off..off + len)
}

/// WRITE flag: write through.
pub const WRITEFLAG_WRITE_THROUGH: u32 = 0x0000_0001;

/// Size of the fixed WRITE request body before its data.
pub const WRITE_FIXED: usize = 48;

/// Appends a WRITE request body (fixed part and `data`) to `w`.
pub fn encode_write_into(w: &mut Writer, file_id: FileId, offset: u64, data: &[u8], flags: u32) {
    w.u16(49)
        .u16((HEADER_SIZE + WRITE_FIXED) as u16)
        .u32(data.len() as u32)
        .u64(offset);
    file_id.write(w);
    w.u32(0).u32(0).u16(0).u16(0).u32(flags);
    if data.is_empty() {
        w.u8(0);
    } else {
        w.bytes(data);
    }
}

/// Decodes a WRITE response: the count written.
pub fn decode_write_response(msg: &[u8]) -> Result<u32, WireError> {
    let mut r = body_reader(msg, 17, "write response StructureSize")?;
    r.u16()?;
    r.u32()
}

// ---------------------------------------------------------------------------------------------
// QUERY_DIRECTORY, QUERY_INFO, SET_INFO

/// QUERY_DIRECTORY flag: restart the scan.
pub const QD_RESTART_SCANS: u8 = 0x01;
/// FileInformationClass: FileIdBothDirectoryInformation.
pub const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 37;

/// Encodes a QUERY_DIRECTORY request body.
pub fn encode_query_directory(
    file_id: FileId,
    class: u8,
    flags: u8,
    pattern: &str,
    output_len: u32,
) -> Vec<u8> {
    let name = utf16le(pattern);
    let mut w = Writer::with_capacity(32 + name.len() + 1);
    w.u16(33).u8(class).u8(flags).u32(0);
    file_id.write(&mut w);
    w.u16((HEADER_SIZE + 32) as u16)
        .u16(name.len() as u16)
        .u32(output_len)
        .bytes(&name);
    if name.is_empty() {
        w.u8(0);
    }
    w.into_vec()
}

/// Decodes a QUERY_DIRECTORY or QUERY_INFO response (both StructureSize 9 with an
/// output buffer), returning the buffer's range inside `msg`.
pub fn decode_output_buffer(msg: &[u8]) -> Result<std::ops::Range<usize>, WireError> {
    let mut r = body_reader(msg, 9, "output buffer response StructureSize")?;
    let off = r.u16()? as usize;
    let len = r.u32()? as usize;
    if len == 0 {
        return Ok(msg.len()..msg.len());
    }
    slice_at(msg, off, len)?;
    Ok(off..off + len)
}

/// InfoType: file.
pub const INFO_FILE: u8 = 1;
/// InfoType: file system.
pub const INFO_FILESYSTEM: u8 = 2;
/// FileInformationClass: FileBasicInformation.
pub const FILE_BASIC_INFORMATION: u8 = 4;
/// FileInformationClass: FileStandardInformation.
pub const FILE_STANDARD_INFORMATION: u8 = 5;
/// FileInformationClass: FileRenameInformation.
pub const FILE_RENAME_INFORMATION: u8 = 10;
/// FileInformationClass: FileDispositionInformation.
pub const FILE_DISPOSITION_INFORMATION: u8 = 13;
/// FileInformationClass: FileAllInformation.
pub const FILE_ALL_INFORMATION: u8 = 18;
/// FileInformationClass: FileEndOfFileInformation.
pub const FILE_END_OF_FILE_INFORMATION: u8 = 20;
/// FileInformationClass: FileNetworkOpenInformation.
pub const FILE_NETWORK_OPEN_INFORMATION: u8 = 34;

/// Encodes a QUERY_INFO request body (no input buffer).
pub fn encode_query_info(file_id: FileId, info_type: u8, class: u8, output_len: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(41);
    w.u16(41)
        .u8(info_type)
        .u8(class)
        .u32(output_len)
        .u16(0)
        .u16(0)
        .u32(0)
        .u32(0)
        .u32(0);
    file_id.write(&mut w);
    w.u8(0);
    w.into_vec()
}

/// Encodes a SET_INFO request body.
pub fn encode_set_info(file_id: FileId, info_type: u8, class: u8, buffer: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(32 + buffer.len());
    w.u16(33)
        .u8(info_type)
        .u8(class)
        .u32(buffer.len() as u32)
        .u16((HEADER_SIZE + 32) as u16)
        .u16(0)
        .u32(0);
    file_id.write(&mut w);
    w.bytes(buffer);
    w.into_vec()
}

// ---------------------------------------------------------------------------------------------
// FSCC information classes

/// FileRenameInformation (SMB2 form) for SET_INFO.
pub fn encode_rename_info(new_name: &str, replace_if_exists: bool) -> Vec<u8> {
    let name = utf16le(new_name);
    let mut w = Writer::with_capacity(20 + name.len());
    w.u8(replace_if_exists as u8)
        .zeros(7)
        .u64(0)
        .u32(name.len() as u32)
        .bytes(&name);
    w.into_vec()
}

/// FileDispositionInformation for SET_INFO.
pub fn encode_disposition_info(delete_pending: bool) -> Vec<u8> {
    vec![delete_pending as u8]
}

/// FileEndOfFileInformation for SET_INFO.
pub fn encode_end_of_file_info(size: u64) -> Vec<u8> {
    size.to_le_bytes().to_vec()
}

/// FileAllInformation, the fields the client reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllInformation {
    /// Times and attributes (allocation and end of file from the standard part).
    pub times: FileTimes,
    /// NumberOfLinks.
    pub number_of_links: u32,
    /// DeletePending.
    pub delete_pending: bool,
    /// Directory.
    pub directory: bool,
    /// IndexNumber (the file id on the server).
    pub index_number: u64,
    /// EaSize.
    pub ea_size: u32,
    /// The file name the server reports (may be truncated or empty).
    pub name: String,
}

/// Decodes FileAllInformation. A name cut short by a small buffer is tolerated.
pub fn decode_all_information(buf: &[u8]) -> Result<AllInformation, WireError> {
    let mut r = Reader::new(buf);
    let t = [r.u64()?, r.u64()?, r.u64()?, r.u64()?];
    let file_attributes = r.u32()?;
    r.u32()?;
    let allocation_size = r.u64()?;
    let end_of_file = r.u64()?;
    let number_of_links = r.u32()?;
    let delete_pending = r.u8()? != 0;
    let directory = r.u8()? != 0;
    r.u16()?;
    let index_number = r.u64()?;
    let ea_size = r.u32()?;
    r.u32()?; // access flags
    r.u64()?; // position
    r.u32()?; // mode
    r.u32()?; // alignment
    let name_len = r.u32()? as usize;
    let avail = r.remaining().min(name_len) & !1;
    let name = from_utf16le(r.bytes(avail)?).unwrap_or_default();
    Ok(AllInformation {
        times: FileTimes {
            creation_time: t[0],
            last_access_time: t[1],
            last_write_time: t[2],
            change_time: t[3],
            allocation_size,
            end_of_file,
            file_attributes,
        },
        number_of_links,
        delete_pending,
        directory,
        index_number,
        ea_size,
        name,
    })
}

/// Decodes FileNetworkOpenInformation.
pub fn decode_network_open_information(buf: &[u8]) -> Result<FileTimes, WireError> {
    let mut r = Reader::new(buf);
    let t = [r.u64()?, r.u64()?, r.u64()?, r.u64()?];
    Ok(FileTimes {
        creation_time: t[0],
        last_access_time: t[1],
        last_write_time: t[2],
        change_time: t[3],
        allocation_size: r.u64()?,
        end_of_file: r.u64()?,
        file_attributes: r.u32()?,
    })
}

/// One FileIdBothDirectoryInformation entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirectoryEntry {
    /// FileName.
    pub name: String,
    /// Times, sizes and attributes.
    pub times: FileTimes,
    /// FileId (server index number).
    pub file_id: u64,
    /// The 8.3 short name, if any.
    pub short_name: String,
}

/// Largest number of entries accepted from one QUERY_DIRECTORY buffer.
const MAX_DIR_ENTRIES: usize = 65536;

/// Decodes a chain of FileIdBothDirectoryInformation entries.
pub fn decode_id_both_directory(buf: &[u8]) -> Result<Vec<DirectoryEntry>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        if out.len() >= MAX_DIR_ENTRIES {
            return Err(WireError::Invalid("too many directory entries"));
        }
        let entry = buf.get(pos..).ok_or(WireError::Invalid("entry offset"))?;
        let mut r = Reader::new(entry);
        let next = r.u32()? as usize;
        r.u32()?; // FileIndex
        let t = [r.u64()?, r.u64()?, r.u64()?, r.u64()?];
        let end_of_file = r.u64()?;
        let allocation_size = r.u64()?;
        let file_attributes = r.u32()?;
        let name_len = r.u32()? as usize;
        r.u32()?; // EaSize
        let short_len = (r.u8()? as usize).min(24);
        r.u8()?;
        let short = r.bytes(24)?;
        r.u16()?;
        let file_id = r.u64()?;
        let name = from_utf16le(r.bytes(name_len)?)?;
        let short_name = from_utf16le(&short[..short_len & !1]).unwrap_or_default();
        out.push(DirectoryEntry {
            name,
            times: FileTimes {
                creation_time: t[0],
                last_access_time: t[1],
                last_write_time: t[2],
                change_time: t[3],
                allocation_size,
                end_of_file,
                file_attributes,
            },
            file_id,
            short_name,
        });
        if next == 0 {
            break;
        }
        if next < 104 {
            return Err(WireError::Invalid("NextEntryOffset too small"));
        }
        pos = pos
            .checked_add(next)
            .ok_or(WireError::Invalid("NextEntryOffset"))?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Oplock break notification

/// A decoded server-to-client OPLOCK_BREAK notification (StructureSize 24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OplockBreak {
    /// The level the server breaks the oplock to.
    pub oplock_level: u8,
    /// The handle whose oplock breaks.
    pub file_id: FileId,
}

/// Decodes an oplock break notification; `None` for other shapes (lease breaks).
pub fn decode_oplock_break(msg: &[u8]) -> Option<OplockBreak> {
    let mut r = body_reader(msg, 24, "oplock break").ok()?;
    let oplock_level = r.u8().ok()?;
    r.u8().ok()?;
    r.u32().ok()?;
    let file_id = FileId::read(&mut r).ok()?;
    Some(OplockBreak {
        oplock_level,
        file_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn create_request_layout() {
        let req = CreateRequest {
            impersonation: 2,
            desired_access: 0x0012_0089,
            share_access: 7,
            disposition: 1,
            name: "a\\b.txt".into(),
            ..Default::default()
        };
        let b = req.encode();
        assert_eq!(&b[..2], &57u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes([b[44], b[45]]), 120);
        assert_eq!(u16::from_le_bytes([b[46], b[47]]) as usize, 14);
        assert_eq!(from_utf16le(&b[56..70]).unwrap(), "a\\b.txt");
        // The root directory: an empty name still has one buffer byte.
        let root = CreateRequest::default().encode();
        assert_eq!(root.len(), 57);
    }

    #[test]
    fn create_response_checks_contexts() {
        let mut b = Writer::new();
        b.u16(89).u8(0).u8(0).u32(1);
        b.zeros(32).u64(4096).u64(10).u32(0x20).u32(0);
        b.u64(1).u64(2).u32(0).u32(0);
        let m = msg(b.as_slice());
        let r = CreateResponse::decode(&m).unwrap();
        assert_eq!(
            r.file_id,
            FileId {
                persistent: 1,
                volatile: 2
            }
        );
        assert_eq!(r.info.end_of_file, 10);
        let mut bad = m.clone();
        let p = HEADER_SIZE + 80;
        bad[p..p + 4].copy_from_slice(&0xFFFF_FF00u32.to_le_bytes());
        bad[p + 4..p + 8].copy_from_slice(&16u32.to_le_bytes());
        assert!(CreateResponse::decode(&bad).is_err());
        for n in 0..m.len() {
            assert!(CreateResponse::decode(&m[..n]).is_err());
        }
    }

    #[test]
    fn read_response_range() {
        let mut b = Writer::new();
        b.u16(17)
            .u8(80)
            .u8(0)
            .u32(3)
            .u32(0)
            .u32(0)
            .bytes(&[7, 8, 9]);
        let m = msg(b.as_slice());
        let r = decode_read_response(&m).unwrap();
        assert_eq!(&m[r], &[7, 8, 9]);
        let mut long = m.clone();
        long[HEADER_SIZE + 4] = 200;
        assert!(decode_read_response(&long).is_err());
    }

    #[test]
    fn write_request_layout() {
        let mut w = Writer::new();
        encode_write_into(&mut w, FileId::RELATED, 5, b"hey", 0);
        let b = w.into_vec();
        assert_eq!(b.len(), WRITE_FIXED + 3);
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 112);
        assert_eq!(&b[WRITE_FIXED..], b"hey");
    }

    fn dir_entry(name: &str, next: u32) -> Vec<u8> {
        let n = utf16le(name);
        let mut w = Writer::new();
        w.u32(next).u32(0).zeros(32).u64(5).u64(8).u32(0x20);
        w.u32(n.len() as u32)
            .u32(0)
            .u8(0)
            .u8(0)
            .zeros(24)
            .u16(0)
            .u64(99);
        w.bytes(&n);
        w.into_vec()
    }

    #[test]
    fn directory_entries() {
        let mut first = dir_entry("a.txt", 0);
        let len = first.len().next_multiple_of(8);
        first.resize(len, 0);
        first[..4].copy_from_slice(&(len as u32).to_le_bytes());
        let mut buf = first;
        buf.extend_from_slice(&dir_entry("bb", 0));
        let e = decode_id_both_directory(&buf).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "a.txt");
        assert_eq!(e[1].name, "bb");
        assert_eq!(e[1].times.end_of_file, 5);
        assert_eq!(e[1].file_id, 99);
        // A loop (NextEntryOffset pointing at itself) or past the end is an error.
        let mut lp = dir_entry("x", 0);
        lp[..4].copy_from_slice(&0u32.to_le_bytes());
        assert!(decode_id_both_directory(&lp).is_ok());
        lp[..4].copy_from_slice(&4u32.to_le_bytes());
        assert!(decode_id_both_directory(&lp).is_err());
        lp[..4].copy_from_slice(&4096u32.to_le_bytes());
        assert!(decode_id_both_directory(&lp).is_err());
        for n in 0..buf.len() {
            let _ = decode_id_both_directory(&buf[..n]);
        }
    }

    #[test]
    fn all_information() {
        let name = utf16le("f");
        let mut w = Writer::new();
        w.zeros(32)
            .u32(0x10)
            .u32(0)
            .u64(0)
            .u64(77)
            .u32(1)
            .u8(0)
            .u8(1)
            .u16(0);
        w.u64(42)
            .u32(0)
            .u32(0)
            .u64(0)
            .u32(0)
            .u32(0)
            .u32(name.len() as u32);
        w.bytes(&name);
        let i = decode_all_information(w.as_slice()).unwrap();
        assert!(i.directory);
        assert_eq!(i.times.end_of_file, 77);
        assert_eq!(i.index_number, 42);
        assert_eq!(i.name, "f");
        assert!(decode_all_information(&w.as_slice()[..50]).is_err());
    }
}
