//! SMB2 SET_INFO request and response ([MS-SMB2] 2.2.39, 2.2.40) and the decoders of
//! the information classes a client may set ([MS-FSCC] 2.4, 2.5).
//!
//! Each info-class decoder takes the request's Buffer and returns the NTSTATUS a
//! Windows server answers for a malformed buffer: INFO_LENGTH_MISMATCH when it is
//! shorter than the fixed structure, INVALID_PARAMETER when an embedded length does
//! not fit, EA_LIST_INCONSISTENT for a malformed EA list.

use crate::codec::{from_utf16le, slice_at, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::status::NtStatus;
use crate::FileId;

/// InfoType SMB2_0_INFO_FILE.
pub const SMB2_0_INFO_FILE: u8 = 0x01;
/// InfoType SMB2_0_INFO_FILESYSTEM.
pub const SMB2_0_INFO_FILESYSTEM: u8 = 0x02;
/// InfoType SMB2_0_INFO_SECURITY.
pub const SMB2_0_INFO_SECURITY: u8 = 0x03;
/// InfoType SMB2_0_INFO_QUOTA.
pub const SMB2_0_INFO_QUOTA: u8 = 0x04;

/// FileBasicInformation.
pub const FILE_BASIC_INFORMATION: u8 = 4;
/// FileRenameInformation.
pub const FILE_RENAME_INFORMATION: u8 = 10;
/// FileLinkInformation.
pub const FILE_LINK_INFORMATION: u8 = 11;
/// FileDispositionInformation.
pub const FILE_DISPOSITION_INFORMATION: u8 = 13;
/// FilePositionInformation.
pub const FILE_POSITION_INFORMATION: u8 = 14;
/// FileFullEaInformation.
pub const FILE_FULL_EA_INFORMATION: u8 = 15;
/// FileModeInformation.
pub const FILE_MODE_INFORMATION: u8 = 16;
/// FileAllocationInformation.
pub const FILE_ALLOCATION_INFORMATION: u8 = 19;
/// FileEndOfFileInformation.
pub const FILE_END_OF_FILE_INFORMATION: u8 = 20;
/// FilePipeInformation.
pub const FILE_PIPE_INFORMATION: u8 = 23;
/// FileValidDataLengthInformation.
pub const FILE_VALID_DATA_LENGTH_INFORMATION: u8 = 39;
/// FileShortNameInformation.
pub const FILE_SHORT_NAME_INFORMATION: u8 = 40;
/// FileDispositionInformationEx.
pub const FILE_DISPOSITION_INFORMATION_EX: u8 = 64;

/// FileFsControlInformation.
pub const FILE_FS_CONTROL_INFORMATION: u8 = 6;
/// FileFsObjectIdInformation.
pub const FILE_FS_OBJECT_ID_INFORMATION: u8 = 8;

/// FileDispositionInformationEx flag FILE_DISPOSITION_DELETE.
pub const FILE_DISPOSITION_DELETE: u32 = 0x0000_0001;
/// FileDispositionInformationEx flag FILE_DISPOSITION_POSIX_SEMANTICS.
pub const FILE_DISPOSITION_POSIX_SEMANTICS: u32 = 0x0000_0002;
/// FileDispositionInformationEx flag FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK.
pub const FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK: u32 = 0x0000_0004;
/// FileDispositionInformationEx flag FILE_DISPOSITION_ON_CLOSE.
pub const FILE_DISPOSITION_ON_CLOSE: u32 = 0x0000_0008;
/// FileDispositionInformationEx flag FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE.
pub const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE: u32 = 0x0000_0010;
/// Every FileDispositionInformationEx flag defined by [MS-FSCC] 2.4.12.
pub const FILE_DISPOSITION_VALID_FLAGS: u32 = FILE_DISPOSITION_DELETE
    | FILE_DISPOSITION_POSIX_SEMANTICS
    | FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK
    | FILE_DISPOSITION_ON_CLOSE
    | FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE;

/// FileModeInformation bit FILE_WRITE_THROUGH.
pub const FILE_WRITE_THROUGH: u32 = 0x0000_0002;
/// FileModeInformation bit FILE_SEQUENTIAL_ONLY.
pub const FILE_SEQUENTIAL_ONLY: u32 = 0x0000_0004;
/// FileModeInformation bit FILE_NO_INTERMEDIATE_BUFFERING.
pub const FILE_NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
/// FileModeInformation bit FILE_SYNCHRONOUS_IO_ALERT.
pub const FILE_SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
/// FileModeInformation bit FILE_SYNCHRONOUS_IO_NONALERT.
pub const FILE_SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
/// FileModeInformation bit FILE_DELETE_ON_CLOSE.
pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;

/// FULL_EA_INFORMATION flag FILE_NEED_EA.
pub const FILE_NEED_EA: u8 = 0x80;

/// The fixed part of the request body (StructureSize 33 counts one Buffer byte).
const FIXED_LEN: usize = 32;

/// A decoded SET_INFO request. `buffer` borrows from the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfoRequest<'a> {
    /// InfoType (`SMB2_0_INFO_*`).
    pub info_type: u8,
    /// FileInfoClass.
    pub info_class: u8,
    /// AdditionalInformation (security information bits for SMB2_0_INFO_SECURITY).
    pub additional_information: u32,
    /// The 16-byte FileId (persistent, volatile).
    pub file_id: FileId,
    /// The Buffer, BufferOffset/BufferLength checked against the message.
    pub buffer: &'a [u8],
}

impl<'a> SetInfoRequest<'a> {
    /// Decodes from a message starting at the SMB2 header (BufferOffset is
    /// header-relative). StructureSize must be 33; the buffer must lie after the fixed
    /// part and inside the message.
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 33 {
            return Err(WireError::Invalid("SET_INFO StructureSize"));
        }
        let info_type = r.u8()?;
        let info_class = r.u8()?;
        let len = r.u32()? as usize;
        let off = r.u16()? as usize;
        r.skip(2)?;
        let additional_information = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let buffer = if len == 0 {
            &[][..]
        } else {
            if off < HEADER_SIZE + FIXED_LEN {
                return Err(WireError::Invalid("BufferOffset inside the fixed part"));
            }
            slice_at(msg, off, len)?
        };
        Ok(SetInfoRequest {
            info_type,
            info_class,
            additional_information,
            file_id,
            buffer,
        })
    }

    /// Encodes the body (client side / tests); the buffer follows the fixed part.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(FIXED_LEN + self.buffer.len().max(1));
        w.u16(33).u8(self.info_type).u8(self.info_class);
        w.u32(self.buffer.len() as u32);
        w.u16((HEADER_SIZE + FIXED_LEN) as u16).u16(0);
        w.u32(self.additional_information);
        w.bytes(&self.file_id.to_bytes());
        if self.buffer.is_empty() {
            w.u8(0);
        } else {
            w.bytes(self.buffer);
        }
        w.into_vec()
    }
}

/// The SET_INFO response body (StructureSize 2).
pub fn encode_response() -> Vec<u8> {
    vec![2, 0]
}

fn need(buf: &[u8], n: usize) -> Result<Reader<'_>, NtStatus> {
    if buf.len() < n {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    Ok(Reader::new(buf))
}

fn rd<T>(v: Result<T, WireError>) -> Result<T, NtStatus> {
    v.map_err(|_| NtStatus::INFO_LENGTH_MISMATCH)
}

/// One time field of FILE_BASIC_INFORMATION ([MS-FSCC] 2.4.7, [MS-FSA] 2.1.5.14.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeField {
    /// 0: leave unchanged.
    Unchanged,
    /// -1: stop updating this time automatically for this handle.
    Freeze,
    /// -2: resume automatic updates for this handle.
    Thaw,
    /// Set to this FILETIME.
    Set(u64),
}

impl TimeField {
    /// Interprets the raw 64-bit value; other negative values are INVALID_PARAMETER.
    pub fn from_raw(v: u64) -> Result<TimeField, NtStatus> {
        match v as i64 {
            0 => Ok(TimeField::Unchanged),
            -1 => Ok(TimeField::Freeze),
            -2 => Ok(TimeField::Thaw),
            x if x < 0 => Err(NtStatus::INVALID_PARAMETER),
            _ => Ok(TimeField::Set(v)),
        }
    }

    /// The FILETIME to set, if any.
    pub fn value(self) -> Option<u64> {
        match self {
            TimeField::Set(v) => Some(v),
            _ => None,
        }
    }
}

/// FILE_BASIC_INFORMATION ([MS-FSCC] 2.4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileBasicInfo {
    /// CreationTime.
    pub creation: TimeField,
    /// LastAccessTime.
    pub last_access: TimeField,
    /// LastWriteTime.
    pub last_write: TimeField,
    /// ChangeTime.
    pub change: TimeField,
    /// FileAttributes (0 = leave unchanged).
    pub attributes: u32,
}

impl FileBasicInfo {
    /// Decodes 40 bytes (36 are accepted: the trailing Reserved field is optional).
    pub fn decode(buf: &[u8]) -> Result<Self, NtStatus> {
        let mut r = need(buf, 36)?;
        let creation = TimeField::from_raw(rd(r.u64())?)?;
        let last_access = TimeField::from_raw(rd(r.u64())?)?;
        let last_write = TimeField::from_raw(rd(r.u64())?)?;
        let change = TimeField::from_raw(rd(r.u64())?)?;
        let attributes = rd(r.u32())?;
        Ok(FileBasicInfo {
            creation,
            last_access,
            last_write,
            change,
            attributes,
        })
    }

    /// Encodes the 40-byte structure (raw values: 0, -1, -2 or a FILETIME).
    pub fn encode_raw(times: [u64; 4], attributes: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(40);
        for t in times {
            w.u64(t);
        }
        w.u32(attributes).u32(0);
        w.into_vec()
    }
}

/// FILE_RENAME_INFORMATION_TYPE_2 / FILE_LINK_INFORMATION_TYPE_2 ([MS-FSCC] 2.4.42.2,
/// 2.4.27.2): the SMB2 form with a 64-bit RootDirectory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRenameInfo {
    /// ReplaceIfExists.
    pub replace_if_exists: bool,
    /// RootDirectory (must be 0 over SMB2).
    pub root_directory: u64,
    /// FileName: the target, relative to the share root.
    pub file_name: String,
}

impl FileRenameInfo {
    /// Decodes; buffers shorter than 20 bytes are INFO_LENGTH_MISMATCH, an empty or
    /// overlong FileNameLength or a malformed name is INVALID_PARAMETER.
    pub fn decode(buf: &[u8]) -> Result<Self, NtStatus> {
        let mut r = need(buf, 20)?;
        let replace_if_exists = rd(r.u8())? != 0;
        rd(r.skip(7))?;
        let root_directory = rd(r.u64())?;
        let len = rd(r.u32())? as usize;
        if len == 0 || !len.is_multiple_of(2) {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let name = r.bytes(len).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        let file_name = from_utf16le(name).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
        Ok(FileRenameInfo {
            replace_if_exists,
            root_directory,
            file_name,
        })
    }

    /// Encodes the SMB2 form.
    pub fn encode(&self) -> Vec<u8> {
        let name = crate::codec::utf16le(&self.file_name);
        let mut w = Writer::with_capacity(20 + name.len());
        w.u8(self.replace_if_exists as u8).bytes(&[0; 7]);
        w.u64(self.root_directory).u32(name.len() as u32);
        w.bytes(&name);
        w.into_vec()
    }
}

/// FILE_DISPOSITION_INFORMATION: DeletePending (1 byte).
pub fn decode_disposition(buf: &[u8]) -> Result<bool, NtStatus> {
    let mut r = need(buf, 1)?;
    Ok(rd(r.u8())? != 0)
}

/// FILE_DISPOSITION_INFORMATION_EX: Flags (4 bytes); undefined bits are
/// INVALID_PARAMETER.
pub fn decode_disposition_ex(buf: &[u8]) -> Result<u32, NtStatus> {
    let mut r = need(buf, 4)?;
    let flags = rd(r.u32())?;
    if flags & !FILE_DISPOSITION_VALID_FLAGS != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(flags)
}

/// A structure holding one u64 (position, allocation size, end of file, valid data
/// length).
pub fn decode_u64(buf: &[u8]) -> Result<u64, NtStatus> {
    let mut r = need(buf, 8)?;
    rd(r.u64())
}

/// FILE_MODE_INFORMATION: Mode (4 bytes).
pub fn decode_mode(buf: &[u8]) -> Result<u32, NtStatus> {
    let mut r = need(buf, 4)?;
    rd(r.u32())
}

/// FILE_NAME_INFORMATION (used by FileShortNameInformation): the name.
pub fn decode_file_name(buf: &[u8]) -> Result<String, NtStatus> {
    let mut r = need(buf, 4)?;
    let len = rd(r.u32())? as usize;
    let name = r.bytes(len).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    from_utf16le(name).map_err(|_| NtStatus::INVALID_PARAMETER)
}

/// One FILE_FULL_EA_INFORMATION entry ([MS-FSCC] 2.4.15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullEa {
    /// Flags (FILE_NEED_EA or 0).
    pub flags: u8,
    /// EaName as sent (bytes, without the terminating NUL).
    pub name: Vec<u8>,
    /// EaValue (empty = delete the EA).
    pub value: Vec<u8>,
}

/// Decodes a FILE_FULL_EA_INFORMATION list. Every entry must fit the buffer, have a
/// NUL after its name, and (except the last) a NextEntryOffset that is a multiple of
/// 4 covering the entry; otherwise EA_LIST_INCONSISTENT. Entries are bounded by the
/// buffer, so allocation is bounded by its length.
pub fn decode_full_ea_list(buf: &[u8]) -> Result<Vec<FullEa>, NtStatus> {
    if buf.len() < 8 {
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    let bad = NtStatus::EA_LIST_INCONSISTENT;
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let entry = buf.get(pos..).ok_or(bad)?;
        let mut r = Reader::new(entry);
        let next = r.u32().map_err(|_| bad)? as usize;
        let flags = r.u8().map_err(|_| bad)?;
        let name_len = r.u8().map_err(|_| bad)? as usize;
        let value_len = r.u16().map_err(|_| bad)? as usize;
        let name = r.bytes(name_len).map_err(|_| bad)?.to_vec();
        if r.u8().map_err(|_| bad)? != 0 {
            return Err(bad);
        }
        let value = r.bytes(value_len).map_err(|_| bad)?.to_vec();
        let used = r.pos();
        out.push(FullEa { flags, name, value });
        if next == 0 {
            break;
        }
        if !next.is_multiple_of(4) || next < used {
            return Err(bad);
        }
        pos = pos.checked_add(next).ok_or(bad)?;
        if pos >= buf.len() {
            return Err(bad);
        }
    }
    Ok(out)
}

/// Encodes a FILE_FULL_EA_INFORMATION list (entries padded to 4 bytes).
pub fn encode_full_ea_list(eas: &[FullEa]) -> Vec<u8> {
    let mut w = Writer::new();
    for (i, ea) in eas.iter().enumerate() {
        let start = w.len();
        w.u32(0).u8(ea.flags).u8(ea.name.len() as u8);
        w.u16(ea.value.len() as u16);
        w.bytes(&ea.name).u8(0).bytes(&ea.value);
        if i + 1 < eas.len() {
            while !(w.len() - start).is_multiple_of(4) {
                w.u8(0);
            }
            let next = (w.len() - start) as u32;
            w.patch_u32(start, next);
        }
    }
    w.into_vec()
}

/// Validates an EA name as NTFS does: 1..=255 ASCII characters, none of them control
/// characters or `" * + , / : ; < = > ? [ \ ] |`. Returns INVALID_EA_NAME otherwise.
pub fn validate_ea_name(name: &[u8]) -> Result<(), NtStatus> {
    if name.is_empty() {
        return Err(NtStatus::INVALID_EA_NAME);
    }
    for &c in name {
        if !(0x20..0x7f).contains(&c) || b"\"*+,/:;<=>?[\\]|".contains(&c) {
            return Err(NtStatus::INVALID_EA_NAME);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg_with(body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn request_round_trip() {
        let buf = FileBasicInfo::encode_raw([1, 2, 3, 4], 0x20);
        let req = SetInfoRequest {
            info_type: SMB2_0_INFO_FILE,
            info_class: FILE_BASIC_INFORMATION,
            additional_information: 0,
            file_id: FileId::from_bytes([7; 16]),
            buffer: &buf,
        };
        let m = msg_with(&req.encode());
        let d = SetInfoRequest::decode(&m).unwrap();
        assert_eq!(d, req);
        let b = FileBasicInfo::decode(d.buffer).unwrap();
        assert_eq!(b.creation, TimeField::Set(1));
        assert_eq!(b.change, TimeField::Set(4));
        assert_eq!(b.attributes, 0x20);
    }

    #[test]
    fn request_rejects_bad_offsets() {
        let req = SetInfoRequest {
            info_type: 1,
            info_class: 4,
            additional_information: 0,
            file_id: FileId::from_bytes([0; 16]),
            buffer: &[1, 2, 3, 4],
        };
        let mut body = req.encode();
        // BufferLength past the end.
        body[4..8].copy_from_slice(&100u32.to_le_bytes());
        assert!(SetInfoRequest::decode(&msg_with(&body)).is_err());
        // BufferLength of u32::MAX.
        body[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(SetInfoRequest::decode(&msg_with(&body)).is_err());
        // BufferOffset into the fixed part.
        let mut body = req.encode();
        body[8..10].copy_from_slice(&70u16.to_le_bytes());
        assert!(SetInfoRequest::decode(&msg_with(&body)).is_err());
        // Wrong StructureSize.
        let mut body = req.encode();
        body[0] = 32;
        assert!(SetInfoRequest::decode(&msg_with(&body)).is_err());
        // Truncated fixed part.
        assert!(SetInfoRequest::decode(&msg_with(&req.encode()[..20])).is_err());
        // Every truncation fails cleanly.
        let full = msg_with(&req.encode());
        for n in 0..full.len() - 4 {
            assert!(SetInfoRequest::decode(&full[..n]).is_err());
        }
    }

    #[test]
    fn time_fields() {
        assert_eq!(TimeField::from_raw(0), Ok(TimeField::Unchanged));
        assert_eq!(TimeField::from_raw(u64::MAX), Ok(TimeField::Freeze));
        assert_eq!(TimeField::from_raw(u64::MAX - 1), Ok(TimeField::Thaw));
        assert_eq!(
            TimeField::from_raw(u64::MAX - 2),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(TimeField::from_raw(5).unwrap().value(), Some(5));
        assert_eq!(
            FileBasicInfo::decode(&[0; 35]),
            Err(NtStatus::INFO_LENGTH_MISMATCH)
        );
    }

    #[test]
    fn rename_info() {
        let ri = FileRenameInfo {
            replace_if_exists: true,
            root_directory: 0,
            file_name: "dir\\new.txt".into(),
        };
        let b = ri.encode();
        assert_eq!(FileRenameInfo::decode(&b).unwrap(), ri);
        assert_eq!(
            FileRenameInfo::decode(&b[..19]),
            Err(NtStatus::INFO_LENGTH_MISMATCH)
        );
        assert_eq!(
            FileRenameInfo::decode(&b[..b.len() - 2]),
            Err(NtStatus::INVALID_PARAMETER)
        );
        let mut huge = b.clone();
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            FileRenameInfo::decode(&huge),
            Err(NtStatus::INVALID_PARAMETER)
        );
        let mut empty = b.clone();
        empty[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            FileRenameInfo::decode(&empty),
            Err(NtStatus::INVALID_PARAMETER)
        );
    }

    #[test]
    fn small_classes() {
        assert_eq!(decode_disposition(&[1]), Ok(true));
        assert_eq!(decode_disposition(&[]), Err(NtStatus::INFO_LENGTH_MISMATCH));
        assert_eq!(decode_disposition_ex(&[0x11, 0, 0, 0]), Ok(0x11));
        assert_eq!(
            decode_disposition_ex(&[0, 1, 0, 0]),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(decode_u64(&7u64.to_le_bytes()), Ok(7));
        assert_eq!(decode_u64(&[0; 7]), Err(NtStatus::INFO_LENGTH_MISMATCH));
        assert_eq!(decode_mode(&[2, 0, 0, 0]), Ok(2));
        let mut n = 4u32.to_le_bytes().to_vec();
        n.extend_from_slice(&crate::codec::utf16le("AB"));
        assert_eq!(decode_file_name(&n).unwrap(), "AB");
        assert_eq!(decode_file_name(&n[..6]), Err(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn ea_list() {
        let eas = vec![
            FullEa {
                flags: 0,
                name: b"EAONE".to_vec(),
                value: b"VALUE1".to_vec(),
            },
            FullEa {
                flags: 0,
                name: b"SECONDEA".to_vec(),
                value: vec![],
            },
        ];
        let b = encode_full_ea_list(&eas);
        assert_eq!(decode_full_ea_list(&b).unwrap(), eas);
        // Any truncation is refused, never panics.
        for n in 0..b.len() {
            assert!(decode_full_ea_list(&b[..n]).is_err());
        }
        // Missing NUL terminator.
        let mut bad = b.clone();
        bad[8 + 5] = b'x';
        assert_eq!(
            decode_full_ea_list(&bad),
            Err(NtStatus::EA_LIST_INCONSISTENT)
        );
        // NextEntryOffset not aligned / pointing inside the entry / past the end.
        for next in [3u32, 4, 0x1000, u32::MAX] {
            let mut bad = b.clone();
            bad[0..4].copy_from_slice(&next.to_le_bytes());
            assert!(decode_full_ea_list(&bad).is_err(), "{next}");
        }
    }

    #[test]
    fn ea_names() {
        assert!(validate_ea_name(b"USER.ATTR_1").is_ok());
        assert_eq!(validate_ea_name(b""), Err(NtStatus::INVALID_EA_NAME));
        for bad in [&b"a*b"[..], b"a\\b", b"a:b", b"a\x01", b"a\xc3"] {
            assert_eq!(validate_ea_name(bad), Err(NtStatus::INVALID_EA_NAME));
        }
    }
}
