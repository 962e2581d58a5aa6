//! SMB2 SET_INFO request and response ([MS-SMB2] 2.2.39, 2.2.40) and the decoders of
//! the information classes a client may set ([MS-FSCC] 2.4, 2.5).
//!
//! Each info-class decoder takes the request's Buffer and returns an [`InfoError`]
//! saying what failed: the buffer is shorter than the fixed structure, a value or an
//! embedded length is not acceptable, a name does not decode, an EA list entry is
//! malformed. The server maps each to the status [MS-FSA] asks for.

use crate::codec::{from_utf16le, slice_at, Reader, WireError, Writer};
pub use crate::fscc::ea::{EaListError, FullEa, FILE_NEED_EA};
use crate::header::HEADER_SIZE;
use crate::{CreateOptions, FileAttributes, FileId};

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

/// Why an information-class buffer of SET_INFO did not decode, naming the class and
/// the field. [MS-FSA] gives each kind its status: INFO_LENGTH_MISMATCH for
/// [`InfoError::TooShort`], INVALID_PARAMETER for a bad value or length,
/// EA_LIST_INCONSISTENT and INVALID_EA_NAME for EA lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InfoError {
    /// The buffer is shorter than the class's fixed structure.
    #[error("{class}: buffer of {got} bytes, the structure needs {needed}")]
    TooShort {
        /// The information class.
        class: &'static str,
        /// Bytes the fixed structure needs.
        needed: usize,
        /// Bytes the buffer holds.
        got: usize,
    },
    /// A field holds a value the class does not define.
    #[error("{class}: {field} {value:#x} is not a defined value")]
    BadValue {
        /// The information class.
        class: &'static str,
        /// The field.
        field: &'static str,
        /// The value sent.
        value: u64,
    },
    /// An embedded length is zero, odd, or runs past the buffer.
    #[error("{class}: {field} {len} does not fit a buffer of {buffer} bytes")]
    BadLength {
        /// The information class.
        class: &'static str,
        /// The length field.
        field: &'static str,
        /// Its value.
        len: usize,
        /// The buffer's length.
        buffer: usize,
    },
    /// A FileName is not valid UTF-16LE.
    #[error("{class}: FileName is not valid UTF-16")]
    BadName {
        /// The information class.
        class: &'static str,
    },
    /// A FILE_FULL_EA_INFORMATION list entry is malformed.
    #[error(transparent)]
    EaList(#[from] EaListError),
    /// An EA name NTFS refuses.
    #[error("EA name {name:?}: {why}")]
    BadEaName {
        /// The name as sent (lossily decoded).
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

const BASIC: &str = "FileBasicInformation";
const RENAME: &str = "FileRenameInformation";
const NAME: &str = "FileNameInformation";

fn need<'b>(class: &'static str, buf: &'b [u8], n: usize) -> Result<Reader<'b>, InfoError> {
    if buf.len() < n {
        return Err(InfoError::TooShort {
            class,
            needed: n,
            got: buf.len(),
        });
    }
    Ok(Reader::new(buf))
}

/// A read inside a length already checked by [`need`]: cannot fail, but if it did
/// it would be a short buffer.
fn rd<T>(class: &'static str, n: usize, v: Result<T, WireError>) -> Result<T, InfoError> {
    v.map_err(|e| InfoError::TooShort {
        class,
        needed: n,
        got: match e {
            WireError::Truncated { offset, .. } => offset,
            WireError::Invalid(_) => 0,
        },
    })
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
    /// Interprets the raw 64-bit value; other negative values are
    /// [`InfoError::BadValue`].
    pub fn from_raw(v: u64) -> Result<TimeField, InfoError> {
        match v as i64 {
            0 => Ok(TimeField::Unchanged),
            -1 => Ok(TimeField::Freeze),
            -2 => Ok(TimeField::Thaw),
            x if x < 0 => Err(InfoError::BadValue {
                class: BASIC,
                field: "time",
                value: v,
            }),
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
    /// FileAttributes (empty = leave unchanged).
    pub attributes: FileAttributes,
}

impl FileBasicInfo {
    /// Decodes 40 bytes (36 are accepted: the trailing Reserved field is optional).
    pub fn decode(buf: &[u8]) -> Result<Self, InfoError> {
        let mut r = need(BASIC, buf, 36)?;
        let creation = TimeField::from_raw(rd(BASIC, 36, r.u64())?)?;
        let last_access = TimeField::from_raw(rd(BASIC, 36, r.u64())?)?;
        let last_write = TimeField::from_raw(rd(BASIC, 36, r.u64())?)?;
        let change = TimeField::from_raw(rd(BASIC, 36, r.u64())?)?;
        let attributes = FileAttributes(rd(BASIC, 36, r.u32())?);
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
    /// Decodes; buffers shorter than 20 bytes are [`InfoError::TooShort`], an empty,
    /// odd or overlong FileNameLength is [`InfoError::BadLength`], a name that is not
    /// UTF-16 [`InfoError::BadName`].
    pub fn decode(buf: &[u8]) -> Result<Self, InfoError> {
        let mut r = need(RENAME, buf, 20)?;
        let replace_if_exists = rd(RENAME, 20, r.u8())? != 0;
        rd(RENAME, 20, r.skip(7))?;
        let root_directory = rd(RENAME, 20, r.u64())?;
        let len = rd(RENAME, 20, r.u32())? as usize;
        let bad_len = InfoError::BadLength {
            class: RENAME,
            field: "FileNameLength",
            len,
            buffer: buf.len(),
        };
        if len == 0 || !len.is_multiple_of(2) {
            return Err(bad_len);
        }
        let name = r.bytes(len).map_err(|_| bad_len)?;
        let file_name = from_utf16le(name).map_err(|_| InfoError::BadName { class: RENAME })?;
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
pub fn decode_disposition(buf: &[u8]) -> Result<bool, InfoError> {
    const C: &str = "FileDispositionInformation";
    let mut r = need(C, buf, 1)?;
    Ok(rd(C, 1, r.u8())? != 0)
}

/// FILE_DISPOSITION_INFORMATION_EX: Flags (4 bytes); undefined bits are
/// [`InfoError::BadValue`].
pub fn decode_disposition_ex(buf: &[u8]) -> Result<u32, InfoError> {
    const C: &str = "FileDispositionInformationEx";
    let mut r = need(C, buf, 4)?;
    let flags = rd(C, 4, r.u32())?;
    if flags & !FILE_DISPOSITION_VALID_FLAGS != 0 {
        return Err(InfoError::BadValue {
            class: C,
            field: "Flags",
            value: flags.into(),
        });
    }
    Ok(flags)
}

/// A structure holding one u64 (position, allocation size, end of file, valid data
/// length).
pub fn decode_u64(buf: &[u8]) -> Result<u64, InfoError> {
    const C: &str = "an 8-byte information class";
    let mut r = need(C, buf, 8)?;
    rd(C, 8, r.u64())
}

/// FILE_MODE_INFORMATION: Mode (4 bytes), whose bits are CreateOptions' ([MS-FSCC]
/// 2.4.26: FILE_WRITE_THROUGH, FILE_SEQUENTIAL_ONLY, ...).
pub fn decode_mode(buf: &[u8]) -> Result<CreateOptions, InfoError> {
    const C: &str = "FileModeInformation";
    let mut r = need(C, buf, 4)?;
    rd(C, 4, r.u32()).map(CreateOptions::from)
}

/// FILE_NAME_INFORMATION (used by FileShortNameInformation): the name. A
/// FileNameLength past the buffer is [`InfoError::BadLength`], a name that is not
/// UTF-16 [`InfoError::BadName`].
pub fn decode_file_name(buf: &[u8]) -> Result<String, InfoError> {
    let mut r = need(NAME, buf, 4)?;
    let len = rd(NAME, 4, r.u32())? as usize;
    let name = r.bytes(len).map_err(|_| InfoError::BadLength {
        class: NAME,
        field: "FileNameLength",
        len,
        buffer: buf.len(),
    })?;
    from_utf16le(name).map_err(|_| InfoError::BadName { class: NAME })
}

/// Decodes a FILE_FULL_EA_INFORMATION list ([`crate::fscc::ea::decode_full_list`]):
/// a buffer shorter than one entry header (8 bytes) is [`InfoError::TooShort`], a
/// malformed entry [`InfoError::EaList`].
pub fn decode_full_ea_list(buf: &[u8]) -> Result<Vec<FullEa>, InfoError> {
    need("FileFullEaInformation", buf, 8)?;
    Ok(crate::fscc::ea::decode_full_list(buf)?)
}

/// Encodes a FILE_FULL_EA_INFORMATION list (entries padded to 4 bytes).
pub fn encode_full_ea_list(eas: &[FullEa]) -> Vec<u8> {
    crate::fscc::ea::encode_full_list(eas)
}

/// Validates an EA name as NTFS does: 1..=255 ASCII characters, none of them control
/// characters or `" * + , / : ; < = > ? [ \ ] |`. Returns [`InfoError::BadEaName`]
/// otherwise.
pub fn validate_ea_name(name: &[u8]) -> Result<(), InfoError> {
    let bad = |why| InfoError::BadEaName {
        name: String::from_utf8_lossy(name).into_owned(),
        why,
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    for &c in name {
        if !(0x20..0x7f).contains(&c) {
            return Err(bad("not printable ASCII"));
        }
        if b"\"*+,/:;<=>?[\\]|".contains(&c) {
            return Err(bad("a character NTFS forbids"));
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
        assert_eq!(b.attributes, crate::FileAttributes::ARCHIVE);
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
            Err(InfoError::BadValue {
                class: "FileBasicInformation",
                field: "time",
                value: u64::MAX - 2
            })
        );
        assert_eq!(TimeField::from_raw(5).unwrap().value(), Some(5));
        let e = FileBasicInfo::decode(&[0; 35]).unwrap_err();
        assert_eq!(
            e,
            InfoError::TooShort {
                class: "FileBasicInformation",
                needed: 36,
                got: 35
            }
        );
        assert_eq!(
            e.to_string(),
            "FileBasicInformation: buffer of 35 bytes, the structure needs 36"
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
        assert!(matches!(
            FileRenameInfo::decode(&b[..19]),
            Err(InfoError::TooShort {
                needed: 20,
                got: 19,
                ..
            })
        ));
        assert!(matches!(
            FileRenameInfo::decode(&b[..b.len() - 2]),
            Err(InfoError::BadLength {
                len: 22,
                buffer: 40,
                ..
            })
        ));
        let mut huge = b.clone();
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            FileRenameInfo::decode(&huge),
            Err(InfoError::BadLength {
                field: "FileNameLength",
                ..
            })
        ));
        let mut empty = b.clone();
        empty[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            FileRenameInfo::decode(&empty),
            Err(InfoError::BadLength { len: 0, .. })
        ));
        // An unpaired surrogate.
        let mut lone = b.clone();
        lone[20..22].copy_from_slice(&0xD800u16.to_le_bytes());
        assert_eq!(
            FileRenameInfo::decode(&lone),
            Err(InfoError::BadName {
                class: "FileRenameInformation"
            })
        );
    }

    #[test]
    fn small_classes() {
        assert_eq!(decode_disposition(&[1]), Ok(true));
        assert!(matches!(
            decode_disposition(&[]),
            Err(InfoError::TooShort {
                needed: 1,
                got: 0,
                ..
            })
        ));
        assert_eq!(decode_disposition_ex(&[0x11, 0, 0, 0]), Ok(0x11));
        assert!(matches!(
            decode_disposition_ex(&[0, 1, 0, 0]),
            Err(InfoError::BadValue { value: 0x100, .. })
        ));
        assert_eq!(decode_u64(&7u64.to_le_bytes()), Ok(7));
        assert!(matches!(
            decode_u64(&[0; 7]),
            Err(InfoError::TooShort {
                needed: 8,
                got: 7,
                ..
            })
        ));
        assert_eq!(
            decode_mode(&[2, 0, 0, 0]),
            Ok(CreateOptions::FILE_WRITE_THROUGH)
        );
        let mut n = 4u32.to_le_bytes().to_vec();
        n.extend_from_slice(&crate::codec::utf16le("AB"));
        assert_eq!(decode_file_name(&n).unwrap(), "AB");
        assert!(matches!(
            decode_file_name(&n[..6]),
            Err(InfoError::BadLength {
                len: 4,
                buffer: 6,
                ..
            })
        ));
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
            Err(InfoError::EaList(EaListError {
                index: 0,
                offset: 0,
                what: "EaName not NUL-terminated"
            }))
        );
        assert!(matches!(
            decode_full_ea_list(&b[..7]),
            Err(InfoError::TooShort { needed: 8, .. })
        ));
        // NextEntryOffset not aligned / pointing inside the entry / past the end.
        for next in [3u32, 4, 0x1000, u32::MAX] {
            let mut bad = b.clone();
            bad[0..4].copy_from_slice(&next.to_le_bytes());
            assert!(
                matches!(decode_full_ea_list(&bad), Err(InfoError::EaList(_))),
                "{next}"
            );
        }
    }

    #[test]
    fn ea_names() {
        assert!(validate_ea_name(b"USER.ATTR_1").is_ok());
        assert!(matches!(
            validate_ea_name(b""),
            Err(InfoError::BadEaName { why: "empty", .. })
        ));
        for bad in [&b"a*b"[..], b"a\\b", b"a:b", b"a\x01", b"a\xc3"] {
            assert!(matches!(
                validate_ea_name(bad),
                Err(InfoError::BadEaName { .. })
            ));
        }
    }
}
