//! SMB2 CREATE request and response ([MS-SMB2] 2.2.13, 2.2.14) and the create
//! context chain (2.2.13.2, 2.2.14.2).

use crate::codec::{from_utf16le, slice_at, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::oplock::OplockLevel;
use crate::FileId;
use crate::{AccessMask, CreateDisposition, CreateOptions, FileAttributes, ShareAccess};

pub mod contexts;
pub use contexts::{ContextError, CreateContexts, DurableReconnect, DurableRequest};

/// Fixed part of the request body (StructureSize 57 minus the 1-byte buffer).
const REQ_FIXED: usize = 56;
/// Fixed part of the response body (StructureSize 89 minus the 1-byte buffer).
const RESP_FIXED: usize = 88;
/// Longest file name accepted, in bytes of UTF-16 (Windows: 32767 characters).
pub const MAX_NAME_BYTES: usize = 65534;
/// Most create contexts accepted in one request.
pub const MAX_CONTEXTS: usize = 64;

/// Impersonation level: Anonymous.
pub const IMPERSONATION_ANONYMOUS: u32 = 0;
/// Impersonation level: Delegate (the highest valid value).
pub const IMPERSONATION_DELEGATE: u32 = 3;

/// Create context names ([MS-SMB2] 2.2.13.2).
pub mod ctx {
    /// SMB2_CREATE_EA_BUFFER.
    pub const EXTA: &[u8] = b"ExtA";
    /// SMB2_CREATE_SD_BUFFER.
    pub const SECD: &[u8] = b"SecD";
    /// SMB2_CREATE_DURABLE_HANDLE_REQUEST.
    pub const DHNQ: &[u8] = b"DHnQ";
    /// SMB2_CREATE_DURABLE_HANDLE_RECONNECT.
    pub const DHNC: &[u8] = b"DHnC";
    /// SMB2_CREATE_ALLOCATION_SIZE.
    pub const ALSI: &[u8] = b"AlSi";
    /// SMB2_CREATE_QUERY_MAXIMAL_ACCESS_REQUEST.
    pub const MXAC: &[u8] = b"MxAc";
    /// SMB2_CREATE_TIMEWARP_TOKEN.
    pub const TWRP: &[u8] = b"TWrp";
    /// SMB2_CREATE_QUERY_ON_DISK_ID.
    pub const QFID: &[u8] = b"QFid";
    /// SMB2_CREATE_REQUEST_LEASE (v1 and v2).
    pub const RQLS: &[u8] = b"RqLs";
    /// SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2.
    pub const DH2Q: &[u8] = b"DH2Q";
    /// SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2.
    pub const DH2C: &[u8] = b"DH2C";
    /// SMB2_CREATE_APP_INSTANCE_ID.
    pub const APP_INSTANCE_ID: &[u8] = &[
        0x45, 0xBC, 0xA6, 0x6A, 0xEF, 0xA7, 0xF7, 0x4A, 0x90, 0x08, 0xFA, 0x46, 0x2E, 0x14, 0x4D,
        0x74,
    ];
}

/// One create context: its name and data, borrowed from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateContext<'a> {
    /// Context name (usually 4 ASCII bytes, or a 16-byte GUID).
    pub name: &'a [u8],
    /// Context data.
    pub data: &'a [u8],
}

/// Parses a create context chain ([MS-SMB2] 2.2.13.2): each element's Next,
/// NameOffset/NameLength and DataOffset/DataLength must lie within the chain, Next and
/// DataOffset must be 8-byte aligned, names are at least 4 bytes.
pub fn parse_contexts(buf: &[u8]) -> Result<Vec<CreateContext<'_>>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    if buf.is_empty() {
        return Ok(out);
    }
    loop {
        let rest = buf.get(pos..).ok_or(WireError::Invalid("context offset"))?;
        let mut r = Reader::new(rest);
        let next = r.u32()? as usize;
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        r.u16()?;
        let data_off = r.u16()? as usize;
        let data_len = r.u32()? as usize;
        let len = if next == 0 { rest.len() } else { next };
        if !next.is_multiple_of(8) || len > rest.len() || len < 16 {
            return Err(WireError::Invalid("context Next"));
        }
        let elem = &rest[..len];
        if name_off < 16 || name_len < 4 {
            return Err(WireError::Invalid("context name"));
        }
        let name = slice_at(elem, name_off, name_len)?;
        let data = if data_len == 0 {
            &[][..]
        } else {
            if !data_off.is_multiple_of(8) || data_off < name_off + name_len {
                return Err(WireError::Invalid("context DataOffset"));
            }
            slice_at(elem, data_off, data_len)?
        };
        out.push(CreateContext { name, data });
        if out.len() > MAX_CONTEXTS {
            return Err(WireError::Invalid("too many create contexts"));
        }
        if next == 0 {
            return Ok(out);
        }
        pos += next;
    }
}

/// Encodes a create context chain: each context 8-byte aligned, Next linking them,
/// the last one's Next 0. Names and data are placed as Windows does (name at 16,
/// data at the next 8-byte boundary).
pub fn encode_contexts(ctxs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut w = Writer::new();
    for (i, (name, data)) in ctxs.iter().enumerate() {
        let start = w.len();
        let name_off = 16usize;
        let data_off = if data.is_empty() {
            0
        } else {
            (name_off + name.len()).next_multiple_of(8)
        };
        w.u32(0)
            .u16(name_off as u16)
            .u16(name.len() as u16)
            .u16(0)
            .u16(data_off as u16)
            .u32(data.len() as u32)
            .bytes(name);
        if !data.is_empty() {
            w.align_from(start, 8);
            w.bytes(data);
        }
        if i + 1 < ctxs.len() {
            w.align_from(start, 8);
            let next = w.len() - start;
            w.patch_u32(start, next as u32);
        }
    }
    w.into_vec()
}

trait AlignFrom {
    fn align_from(&mut self, start: usize, a: usize);
}

impl AlignFrom for Writer {
    fn align_from(&mut self, start: usize, a: usize) {
        let rel = self.len() - start;
        let pad = rel.next_multiple_of(a) - rel;
        self.zeros(pad);
    }
}

/// An SMB2 CREATE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest<'a> {
    /// SecurityFlags (reserved).
    pub security_flags: u8,
    /// RequestedOplockLevel.
    pub oplock_level: OplockLevel,
    /// ImpersonationLevel.
    pub impersonation_level: u32,
    /// SmbCreateFlags (reserved).
    pub smb_create_flags: u64,
    /// DesiredAccess.
    pub desired_access: AccessMask,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
    /// ShareAccess.
    pub share_access: ShareAccess,
    /// CreateDisposition as sent (a value above 5 is the receiver's to refuse, in
    /// its order of checks; [`CreateDisposition::from_u32`] decodes it).
    pub create_disposition: u32,
    /// CreateOptions.
    pub create_options: CreateOptions,
    /// The raw UTF-16LE name bytes.
    pub name_utf16: &'a [u8],
    /// The raw create context chain.
    pub contexts: &'a [u8],
}

impl<'a> CreateRequest<'a> {
    /// Decodes the request from the message starting at the SMB2 header.
    pub fn decode(msg: &'a [u8]) -> Result<CreateRequest<'a>, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 57 {
            return Err(WireError::Invalid("StructureSize is not 57"));
        }
        if msg.len() < HEADER_SIZE + REQ_FIXED {
            return Err(WireError::Invalid("CREATE body too short"));
        }
        let security_flags = r.u8()?;
        let oplock_level = OplockLevel(r.u8()?);
        let impersonation_level = r.u32()?;
        let smb_create_flags = r.u64()?;
        r.u64()?;
        let desired_access = AccessMask(r.u32()?);
        let file_attributes = FileAttributes(r.u32()?);
        let share_access = ShareAccess(r.u32()?);
        let create_disposition = r.u32()?;
        let create_options = CreateOptions(r.u32()?);
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        if !name_len.is_multiple_of(2) || name_len > MAX_NAME_BYTES {
            return Err(WireError::Invalid("NameLength"));
        }
        let name_utf16 = if name_len == 0 {
            &[][..]
        } else {
            if name_off < HEADER_SIZE + REQ_FIXED {
                return Err(WireError::Invalid("NameOffset"));
            }
            slice_at(msg, name_off, name_len)?
        };
        let contexts = if ctx_len == 0 {
            &[][..]
        } else {
            if ctx_off < HEADER_SIZE + REQ_FIXED || !ctx_off.is_multiple_of(8) {
                return Err(WireError::Invalid("CreateContextsOffset"));
            }
            slice_at(msg, ctx_off, ctx_len)?
        };
        Ok(CreateRequest {
            security_flags,
            oplock_level,
            impersonation_level,
            smb_create_flags,
            desired_access,
            file_attributes,
            share_access,
            create_disposition,
            create_options,
            name_utf16,
            contexts,
        })
    }

    /// The CreateDisposition, `None` for a value above 5.
    pub fn disposition(&self) -> Option<CreateDisposition> {
        CreateDisposition::from_u32(self.create_disposition)
    }

    /// The name as a string (INVALID_PARAMETER-worthy error for unpaired surrogates).
    pub fn name(&self) -> Result<String, WireError> {
        from_utf16le(self.name_utf16)
    }

    /// The parsed create contexts.
    pub fn create_contexts(&self) -> Result<Vec<CreateContext<'a>>, WireError> {
        parse_contexts(self.contexts)
    }
}

/// Builds a CREATE request body (for tests and the client).
#[derive(Debug, Clone, Default)]
pub struct CreateRequestBuilder {
    /// RequestedOplockLevel.
    pub oplock_level: OplockLevel,
    /// ImpersonationLevel.
    pub impersonation_level: u32,
    /// DesiredAccess.
    pub desired_access: AccessMask,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
    /// ShareAccess.
    pub share_access: ShareAccess,
    /// CreateDisposition as sent (a value above 5 is the receiver's to refuse, in
    /// its order of checks; [`CreateDisposition::from_u32`] decodes it).
    pub create_disposition: u32,
    /// CreateOptions.
    pub create_options: CreateOptions,
    /// Name.
    pub name: String,
    /// Encoded create context chain.
    pub contexts: Vec<u8>,
}

impl CreateRequestBuilder {
    /// Encodes the body (offsets assume it follows a 64-byte header).
    pub fn encode(&self) -> Vec<u8> {
        let name = crate::codec::utf16le(&self.name);
        let mut w = Writer::new();
        w.u16(57)
            .u8(0)
            .u8(self.oplock_level.bits())
            .u32(self.impersonation_level)
            .u64(0)
            .u64(0)
            .u32(self.desired_access.bits())
            .u32(self.file_attributes.bits())
            .u32(self.share_access.bits())
            .u32(self.create_disposition)
            .u32(self.create_options.bits())
            .u16((HEADER_SIZE + REQ_FIXED) as u16)
            .u16(name.len() as u16)
            .u32(0)
            .u32(self.contexts.len() as u32);
        w.bytes(&name);
        if self.contexts.is_empty() {
            if name.is_empty() {
                w.u8(0);
            }
        } else {
            w.align(8);
            let off = HEADER_SIZE + w.len();
            w.patch_u32(48, off as u32);
            w.bytes(&self.contexts);
        }
        w.into_vec()
    }
}

/// An SMB2 CREATE response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateResponse {
    /// OplockLevel granted.
    pub oplock_level: OplockLevel,
    /// Flags (SMB2_CREATE_FLAG_REPARSEPOINT).
    pub flags: u8,
    /// CreateAction.
    pub create_action: u32,
    /// CreationTime.
    pub creation_time: u64,
    /// LastAccessTime.
    pub last_access_time: u64,
    /// LastWriteTime.
    pub last_write_time: u64,
    /// ChangeTime.
    pub change_time: u64,
    /// AllocationSize.
    pub allocation_size: u64,
    /// EndofFile.
    pub end_of_file: u64,
    /// FileAttributes.
    pub file_attributes: FileAttributes,
    /// FileId.
    pub file_id: FileId,
    /// Encoded create context chain (see [`encode_contexts`]).
    pub contexts: Vec<u8>,
}

impl CreateResponse {
    /// Encodes the response body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(RESP_FIXED + 8 + self.contexts.len());
        let (off, len) = if self.contexts.is_empty() {
            (0, 0)
        } else {
            (HEADER_SIZE + RESP_FIXED, self.contexts.len())
        };
        w.u16(89)
            .u8(self.oplock_level.bits())
            .u8(self.flags)
            .u32(self.create_action)
            .u64(self.creation_time)
            .u64(self.last_access_time)
            .u64(self.last_write_time)
            .u64(self.change_time)
            .u64(self.allocation_size)
            .u64(self.end_of_file)
            .u32(self.file_attributes.bits())
            .u32(0)
            .bytes(&self.file_id.to_bytes())
            .u32(off as u32)
            .u32(len as u32);
        if self.contexts.is_empty() {
            w.u8(0);
        } else {
            w.bytes(&self.contexts);
        }
        w.into_vec()
    }

    /// Decodes a response (message starting at the header); contexts are kept raw.
    pub fn decode(msg: &[u8]) -> Result<CreateResponse, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 89 {
            return Err(WireError::Invalid("StructureSize is not 89"));
        }
        let oplock_level = OplockLevel(r.u8()?);
        let flags = r.u8()?;
        let create_action = r.u32()?;
        let creation_time = r.u64()?;
        let last_access_time = r.u64()?;
        let last_write_time = r.u64()?;
        let change_time = r.u64()?;
        let allocation_size = r.u64()?;
        let end_of_file = r.u64()?;
        let file_attributes = FileAttributes(r.u32()?);
        r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let off = r.u32()? as usize;
        let len = r.u32()? as usize;
        let contexts = if len == 0 {
            Vec::new()
        } else {
            slice_at(msg, off, len)?.to_vec()
        };
        Ok(CreateResponse {
            oplock_level,
            flags,
            create_action,
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            allocation_size,
            end_of_file,
            file_attributes,
            file_id,
            contexts,
        })
    }
}

/// The data of the create contexts a server answers with ([MS-SMB2] 2.2.14.2); the
/// lease context is [`crate::oplock::encode_lease_response`].
pub mod response {
    use crate::codec::Writer;
    use crate::{AccessMask, NtStatus};

    /// SMB2_CREATE_DURABLE_HANDLE_RESPONSE (`DHnQ`): 8 reserved bytes (2.2.14.2.3).
    pub fn durable_v1() -> Vec<u8> {
        vec![0; 8]
    }

    /// SMB2_CREATE_DURABLE_HANDLE_RESPONSE_V2 (`DH2Q`): Timeout in milliseconds and
    /// Flags (2.2.14.2.12).
    pub fn durable_v2(timeout_ms: u32, flags: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(8);
        w.u32(timeout_ms).u32(flags);
        w.into_vec()
    }

    /// SMB2_CREATE_QUERY_MAXIMAL_ACCESS_RESPONSE (`MxAc`): QueryStatus and
    /// MaximalAccess (2.2.14.2.5).
    pub fn maximal_access(status: NtStatus, access: AccessMask) -> Vec<u8> {
        let mut w = Writer::with_capacity(8);
        w.u32(status.0).u32(access.bits());
        w.into_vec()
    }

    /// SMB2_CREATE_QUERY_ON_DISK_ID response (`QFid`): DiskFileId, VolumeId and 16
    /// reserved bytes (2.2.14.2.9).
    pub fn on_disk_id(file_id: u64, volume_id: u64) -> Vec<u8> {
        let mut w = Writer::with_capacity(32);
        w.u64(file_id).u64(volume_id).u64(0).u64(0);
        w.into_vec()
    }
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
    fn request_roundtrip_with_contexts() {
        let ctxs = encode_contexts(&[(ctx::MXAC, &[]), (ctx::QFID, &[]), (ctx::ALSI, &[1; 8])]);
        let b = CreateRequestBuilder {
            desired_access: AccessMask(0x12019f),
            share_access: ShareAccess(7),
            create_disposition: 3,
            create_options: CreateOptions(0x40),
            impersonation_level: 2,
            name: "dir\\file.txt".into(),
            contexts: ctxs,
            ..Default::default()
        }
        .encode();
        let m = msg(&b);
        let r = CreateRequest::decode(&m).unwrap();
        assert_eq!(r.name().unwrap(), "dir\\file.txt");
        assert_eq!(r.desired_access, AccessMask(0x12019f));
        assert_eq!(r.create_disposition, 3);
        assert_eq!(r.disposition(), Some(CreateDisposition::OpenIf));
        let c = r.create_contexts().unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].name, b"MxAc");
        assert!(c[0].data.is_empty());
        assert_eq!(c[2].name, b"AlSi");
        assert_eq!(c[2].data, &[1; 8]);
    }

    #[test]
    fn bad_context_chains_are_errors() {
        let good = encode_contexts(&[(ctx::MXAC, &[0; 8]), (ctx::QFID, &[])]);
        assert!(parse_contexts(&good).is_ok());
        // Next not aligned.
        let mut b = good.clone();
        b[0] = 9;
        assert!(parse_contexts(&b).is_err());
        // Next beyond the buffer.
        let mut b = good.clone();
        b[0..4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(parse_contexts(&b).is_err());
        // Data beyond the element.
        let mut b = good.clone();
        b[12..16].copy_from_slice(&100u32.to_le_bytes());
        assert!(parse_contexts(&b).is_err());
        // Name too short.
        let mut b = good.clone();
        b[6] = 2;
        assert!(parse_contexts(&b).is_err());
        // Truncated.
        assert!(parse_contexts(&good[..10]).is_err());
        // Every prefix and every single-byte corruption: no panic.
        for i in 0..good.len() {
            let _ = parse_contexts(&good[..i]);
            for v in [0u8, 0xff, 7] {
                let mut b = good.clone();
                b[i] = v;
                let _ = parse_contexts(&b);
            }
        }
    }

    /// One context element by hand: Next, NameOffset, NameLength, DataOffset,
    /// DataLength, then `rest` (name and data where the offsets say).
    fn element(next: u32, name_off: u16, name_len: u16, data_off: u16, data_len: u32) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(next)
            .u16(name_off)
            .u16(name_len)
            .u16(0)
            .u16(data_off)
            .u32(data_len);
        w.into_vec()
    }

    #[test]
    fn malformed_context_chains_are_errors() {
        // A well-formed element: name "MxAc" at 16, 8 bytes of data at 24.
        let mut good = element(0, 16, 4, 24, 8);
        good.extend_from_slice(b"MxAc\0\0\0\0");
        good.extend_from_slice(&[1; 8]);
        assert_eq!(parse_contexts(&good).unwrap()[0].data, &[1; 8]);
        assert_eq!(
            parse_contexts(&good).unwrap()[0].name,
            b"MxAc",
            "the well-formed element decodes"
        );
        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            parse_contexts(&b).map(|v| v.len())
        };
        // Name and data overlapping.
        assert!(with(&|b| b[10..12].copy_from_slice(&16u16.to_le_bytes())).is_err());
        // Data starting inside the name.
        assert!(with(&|b| {
            b[6..8].copy_from_slice(&12u16.to_le_bytes());
        })
        .is_err());
        // Name offset inside the header, or past the element.
        assert!(with(&|b| b[4..6].copy_from_slice(&8u16.to_le_bytes())).is_err());
        assert!(with(&|b| b[4..6].copy_from_slice(&u16::MAX.to_le_bytes())).is_err());
        // Data offset and length out of bounds, or overflowing.
        assert!(with(&|b| b[10..12].copy_from_slice(&40u16.to_le_bytes())).is_err());
        assert!(with(&|b| b[12..16].copy_from_slice(&u32::MAX.to_le_bytes())).is_err());
        // Data offset not 8-byte aligned.
        assert!(with(&|b| b[10..12].copy_from_slice(&20u16.to_le_bytes())).is_err());
        // Next not aligned, shorter than a header, past the end.
        for next in [4u32, 8, 12, 33, 40, u32::MAX - 7] {
            assert!(
                with(&|b| b[0..4].copy_from_slice(&next.to_le_bytes())).is_err(),
                "Next {next}"
            );
        }
        // A Next that would loop back (0 ends the chain, anything else moves forward
        // by at least a header): two elements, the second pointing at itself with 0
        // being the end, so the chain has exactly two entries.
        let mut two = element(32, 16, 4, 24, 8);
        two.extend_from_slice(b"MxAc\0\0\0\0");
        two.extend_from_slice(&[1; 8]);
        two.extend_from_slice(&good);
        assert_eq!(parse_contexts(&two).unwrap().len(), 2);
        // The first element's data running into the second element.
        let mut spill = two.clone();
        spill[12..16].copy_from_slice(&16u32.to_le_bytes());
        assert!(parse_contexts(&spill).is_err());
        // More than MAX_CONTEXTS elements.
        let many: Vec<(&[u8], &[u8])> = (0..=MAX_CONTEXTS).map(|_| (ctx::QFID, &[][..])).collect();
        assert!(parse_contexts(&encode_contexts(&many)).is_err());
        let enough: Vec<(&[u8], &[u8])> = (0..MAX_CONTEXTS).map(|_| (ctx::QFID, &[][..])).collect();
        assert_eq!(
            parse_contexts(&encode_contexts(&enough)).unwrap().len(),
            MAX_CONTEXTS
        );
    }

    #[test]
    fn request_name_bounds_checked() {
        let b = CreateRequestBuilder {
            name: "abc".into(),
            ..Default::default()
        }
        .encode();
        let mut m = msg(&b);
        // NameLength past the end.
        m[HEADER_SIZE + 46] = 200;
        assert!(CreateRequest::decode(&m).is_err());
        // Odd length.
        m[HEADER_SIZE + 46] = 5;
        assert!(CreateRequest::decode(&m).is_err());
        // Short body.
        assert!(CreateRequest::decode(&msg(&b[..40])).is_err());
    }

    #[test]
    fn context_responses() {
        use crate::{AccessMask, NtStatus};
        assert_eq!(response::durable_v1(), [0; 8]);
        assert_eq!(
            response::durable_v2(60_000, 0),
            [0x60, 0xEA, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            response::maximal_access(NtStatus::SUCCESS, AccessMask(0x001F_01FF)),
            [0, 0, 0, 0, 0xFF, 0x01, 0x1F, 0]
        );
        let q = response::on_disk_id(0x0102, 0x0304);
        assert_eq!(q.len(), 32);
        assert_eq!(&q[..16], &[2, 1, 0, 0, 0, 0, 0, 0, 4, 3, 0, 0, 0, 0, 0, 0]);
        assert!(q[16..].iter().all(|b| *b == 0));
    }

    #[test]
    fn response_roundtrip() {
        let resp = CreateResponse {
            oplock_level: OplockLevel::NONE,
            create_action: 2,
            end_of_file: 5,
            file_attributes: FileAttributes::ARCHIVE,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            contexts: encode_contexts(&[(ctx::MXAC, &[0; 8])]),
            ..Default::default()
        };
        let b = resp.encode();
        assert_eq!(b.len(), 88 + resp.contexts.len());
        assert_eq!(CreateResponse::decode(&msg(&b)).unwrap(), resp);
        let empty = CreateResponse::default().encode();
        assert_eq!(empty.len(), 89);
    }
}
