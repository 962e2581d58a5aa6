//! SMB2 IOCTL request and response ([MS-SMB2] 2.2.31, 2.2.32) and the FSCTL payloads
//! the server understands: server-side copy ([MS-SMB2] 2.2.31.1, 2.2.32.1,
//! 2.2.32.3), network interfaces (2.2.32.5), snapshots (2.2.32.2), and the file
//! system controls of [MS-FSCC] 2.3 (sparse, zero data, allocated ranges, object
//! ids, compression).
//!
//! Decoders take the whole message from the SMB2 header on (offsets are
//! header-relative) and check every offset and length against it.

use crate::codec::{Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::FileId;

/// Flags: the request is an FSCTL (the only kind SMB2 servers accept).
pub const SMB2_0_IOCTL_IS_FSCTL: u32 = 0x0000_0001;

/// Size of the fixed part of the request body (StructureSize 57 counts one buffer byte).
pub const REQUEST_FIXED_SIZE: usize = 56;
/// Size of the fixed part of the response body (StructureSize 49 counts one buffer byte).
pub const RESPONSE_FIXED_SIZE: usize = 48;
/// Header-relative offset of the response buffer.
pub const RESPONSE_BUFFER_OFFSET: u32 = (HEADER_SIZE + RESPONSE_FIXED_SIZE) as u32;

/// FSCTL and IOCTL control codes.
pub mod fsctl {
    /// FSCTL_DFS_GET_REFERRALS.
    pub const DFS_GET_REFERRALS: u32 = 0x0006_0194;
    /// FSCTL_DFS_GET_REFERRALS_EX.
    pub const DFS_GET_REFERRALS_EX: u32 = 0x0006_01B0;
    /// FSCTL_SET_REPARSE_POINT.
    pub const SET_REPARSE_POINT: u32 = 0x0009_00A4;
    /// FSCTL_GET_REPARSE_POINT.
    pub const GET_REPARSE_POINT: u32 = 0x0009_00A8;
    /// FSCTL_DELETE_REPARSE_POINT.
    pub const DELETE_REPARSE_POINT: u32 = 0x0009_00AC;
    /// FSCTL_GET_OBJECT_ID.
    pub const GET_OBJECT_ID: u32 = 0x0009_009C;
    /// FSCTL_SET_OBJECT_ID.
    pub const SET_OBJECT_ID: u32 = 0x0009_0098;
    /// FSCTL_DELETE_OBJECT_ID.
    pub const DELETE_OBJECT_ID: u32 = 0x0009_00A0;
    /// FSCTL_CREATE_OR_GET_OBJECT_ID.
    pub const CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;
    /// FSCTL_SET_SPARSE.
    pub const SET_SPARSE: u32 = 0x0009_00C4;
    /// FSCTL_SET_ZERO_DATA.
    pub const SET_ZERO_DATA: u32 = 0x0009_80C8;
    /// FSCTL_QUERY_ALLOCATED_RANGES.
    pub const QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
    /// FSCTL_GET_COMPRESSION.
    pub const GET_COMPRESSION: u32 = 0x0009_003C;
    /// FSCTL_SET_COMPRESSION.
    pub const SET_COMPRESSION: u32 = 0x0009_C040;
    /// FSCTL_FILE_LEVEL_TRIM.
    pub const FILE_LEVEL_TRIM: u32 = 0x0009_8208;
    /// FSCTL_GET_INTEGRITY_INFORMATION.
    pub const GET_INTEGRITY_INFORMATION: u32 = 0x0009_027C;
    /// FSCTL_SET_INTEGRITY_INFORMATION.
    pub const SET_INTEGRITY_INFORMATION: u32 = 0x0009_C280;
    /// FSCTL_QUERY_FILE_REGIONS.
    pub const QUERY_FILE_REGIONS: u32 = 0x0009_0284;
    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE.
    pub const DUPLICATE_EXTENTS_TO_FILE: u32 = 0x0009_8344;
    /// FSCTL_IS_PATHNAME_VALID.
    pub const IS_PATHNAME_VALID: u32 = 0x0009_002C;
    /// FSCTL_PIPE_PEEK.
    pub const PIPE_PEEK: u32 = 0x0011_400C;
    /// FSCTL_PIPE_TRANSCEIVE.
    pub const PIPE_TRANSCEIVE: u32 = 0x0011_C017;
    /// FSCTL_PIPE_WAIT.
    pub const PIPE_WAIT: u32 = 0x0011_0018;
    /// FSCTL_SRV_ENUMERATE_SNAPSHOTS.
    pub const SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
    /// FSCTL_SRV_REQUEST_RESUME_KEY.
    pub const SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
    /// FSCTL_SRV_READ_HASH.
    pub const SRV_READ_HASH: u32 = 0x0014_41BB;
    /// FSCTL_SRV_COPYCHUNK.
    pub const SRV_COPYCHUNK: u32 = 0x0014_40F2;
    /// FSCTL_SRV_COPYCHUNK_WRITE.
    pub const SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
    /// FSCTL_LMR_REQUEST_RESILIENCY.
    pub const LMR_REQUEST_RESILIENCY: u32 = 0x0014_01D4;
    /// FSCTL_QUERY_NETWORK_INTERFACE_INFO.
    pub const QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
    /// FSCTL_VALIDATE_NEGOTIATE_INFO.
    pub const VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;

    /// The device type of a control code (bits 16..32): 0x06 DFS, 0x09 file system,
    /// 0x11 named pipe, 0x14 network file system.
    pub fn device_type(code: u32) -> u32 {
        code >> 16
    }
}

/// An IOCTL request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlRequest<'a> {
    /// CtlCode.
    pub ctl_code: u32,
    /// FileId (all ones for FSCTLs that name no open).
    pub file_id: FileId,
    /// The input buffer (InputOffset/InputCount).
    pub input: &'a [u8],
    /// MaxInputResponse.
    pub max_input_response: u32,
    /// The output buffer sent by the client (OutputOffset/OutputCount; normally empty).
    pub output: &'a [u8],
    /// MaxOutputResponse.
    pub max_output_response: u32,
    /// Flags (SMB2_0_IOCTL_IS_FSCTL).
    pub flags: u32,
}

fn buffer_at<'a>(
    msg: &'a [u8],
    offset: u32,
    count: u32,
    what: &'static str,
) -> Result<&'a [u8], WireError> {
    if count == 0 {
        return Ok(&[]);
    }
    let off = offset as usize;
    if off < HEADER_SIZE + REQUEST_FIXED_SIZE {
        return Err(WireError::Invalid(what));
    }
    crate::codec::slice_at(msg, off, count as usize)
}

impl<'a> IoctlRequest<'a> {
    /// Decodes a request from the message starting at its SMB2 header.
    pub fn decode(msg: &'a [u8]) -> Result<IoctlRequest<'a>, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 57 {
            return Err(WireError::Invalid("IOCTL StructureSize"));
        }
        r.skip(2)?;
        let ctl_code = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let input_offset = r.u32()?;
        let input_count = r.u32()?;
        let max_input_response = r.u32()?;
        let output_offset = r.u32()?;
        let output_count = r.u32()?;
        let max_output_response = r.u32()?;
        let flags = r.u32()?;
        r.skip(4)?;
        let input = buffer_at(msg, input_offset, input_count, "IOCTL InputOffset")?;
        let output = buffer_at(msg, output_offset, output_count, "IOCTL OutputOffset")?;
        Ok(IoctlRequest {
            ctl_code,
            file_id,
            input,
            max_input_response,
            output,
            max_output_response,
            flags,
        })
    }

    /// Encodes the request body (after the header), buffers placed right after the
    /// fixed part: input first, then output.
    pub fn encode(&self) -> Vec<u8> {
        let base = (HEADER_SIZE + REQUEST_FIXED_SIZE) as u32;
        let in_off = if self.input.is_empty() { 0 } else { base };
        let out_off = if self.output.is_empty() {
            0
        } else {
            base + self.input.len() as u32
        };
        let mut w = Writer::with_capacity(REQUEST_FIXED_SIZE + self.input.len());
        w.u16(57)
            .u16(0)
            .u32(self.ctl_code)
            .bytes(&self.file_id.to_bytes())
            .u32(in_off)
            .u32(self.input.len() as u32)
            .u32(self.max_input_response)
            .u32(out_off)
            .u32(self.output.len() as u32)
            .u32(self.max_output_response)
            .u32(self.flags)
            .u32(0)
            .bytes(self.input)
            .bytes(self.output);
        w.into_vec()
    }
}

/// An IOCTL response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IoctlResponse {
    /// CtlCode, echoed.
    pub ctl_code: u32,
    /// FileId, echoed.
    pub file_id: FileId,
    /// Output data.
    pub output: Vec<u8>,
}

impl IoctlResponse {
    /// Encodes the response body (InputCount 0, both offsets at the buffer).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(RESPONSE_FIXED_SIZE + self.output.len());
        w.u16(49)
            .u16(0)
            .u32(self.ctl_code)
            .bytes(&self.file_id.to_bytes())
            .u32(RESPONSE_BUFFER_OFFSET)
            .u32(0)
            .u32(RESPONSE_BUFFER_OFFSET)
            .u32(self.output.len() as u32)
            .u32(0)
            .u32(0)
            .bytes(&self.output);
        w.into_vec()
    }

    /// Decodes a response body (`msg` from the SMB2 header on): (CtlCode, output).
    pub fn decode(msg: &[u8]) -> Result<IoctlResponse, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 49 {
            return Err(WireError::Invalid("IOCTL response StructureSize"));
        }
        r.skip(2)?;
        let ctl_code = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        r.skip(8)?;
        let out_off = r.u32()?;
        let out_count = r.u32()?;
        let output = if out_count == 0 {
            Vec::new()
        } else {
            crate::codec::slice_at(msg, out_off as usize, out_count as usize)?.to_vec()
        };
        Ok(IoctlResponse {
            ctl_code,
            file_id,
            output,
        })
    }
}

/// Length of a resume key.
pub const RESUME_KEY_LEN: usize = 24;

/// SRV_REQUEST_RESUME_KEY response: the key, ContextLength 0 and 4 reserved context
/// bytes (32 bytes, as Windows and Samba send).
pub fn encode_resume_key(key: &[u8; RESUME_KEY_LEN]) -> Vec<u8> {
    let mut w = Writer::with_capacity(32);
    w.bytes(key).u32(0).u32(0);
    w.into_vec()
}

/// One SRV_COPYCHUNK entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// SourceOffset.
    pub source_offset: u64,
    /// TargetOffset.
    pub target_offset: u64,
    /// Length.
    pub length: u32,
}

/// Size of the SRV_COPYCHUNK_COPY header (key, count, reserved).
pub const COPYCHUNK_HEADER_LEN: usize = 32;
/// Size of one SRV_COPYCHUNK entry.
pub const CHUNK_LEN: usize = 24;

/// SRV_COPYCHUNK_COPY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopychunkCopy {
    /// SourceKey.
    pub source_key: [u8; RESUME_KEY_LEN],
    /// ChunkCount as sent.
    pub chunk_count: u32,
    /// The chunks (decoded only when they fit in the input and `chunk_count` is at
    /// most the `max_chunks` given to [`CopychunkCopy::decode`]; empty otherwise).
    pub chunks: Vec<Chunk>,
}

impl CopychunkCopy {
    /// Decodes SRV_COPYCHUNK_COPY. At most `max_chunks` entries are parsed: a larger
    /// ChunkCount leaves `chunks` empty so the caller can answer with its limits; a
    /// ChunkCount whose entries do not fit in `input` is an error.
    pub fn decode(input: &[u8], max_chunks: u32) -> Result<CopychunkCopy, WireError> {
        let mut r = Reader::new(input);
        let source_key = r.array::<RESUME_KEY_LEN>()?;
        let chunk_count = r.u32()?;
        r.skip(4)?;
        let mut chunks = Vec::new();
        if chunk_count <= max_chunks {
            let need = (chunk_count as usize)
                .checked_mul(CHUNK_LEN)
                .ok_or(WireError::Invalid("ChunkCount"))?;
            if r.remaining() < need {
                return Err(WireError::Invalid("ChunkCount exceeds input"));
            }
            chunks.reserve(chunk_count as usize);
            for _ in 0..chunk_count {
                let source_offset = r.u64()?;
                let target_offset = r.u64()?;
                let length = r.u32()?;
                r.skip(4)?;
                chunks.push(Chunk {
                    source_offset,
                    target_offset,
                    length,
                });
            }
        }
        Ok(CopychunkCopy {
            source_key,
            chunk_count,
            chunks,
        })
    }

    /// Encodes SRV_COPYCHUNK_COPY (ChunkCount = number of chunks).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(COPYCHUNK_HEADER_LEN + CHUNK_LEN * self.chunks.len());
        w.bytes(&self.source_key)
            .u32(self.chunks.len() as u32)
            .u32(0);
        for c in &self.chunks {
            w.u64(c.source_offset)
                .u64(c.target_offset)
                .u32(c.length)
                .u32(0);
        }
        w.into_vec()
    }
}

/// SRV_COPYCHUNK_RESPONSE (12 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopychunkResponse {
    /// ChunksWritten (or the chunk-count limit on INVALID_PARAMETER).
    pub chunks_written: u32,
    /// ChunkBytesWritten (or the chunk-size limit on INVALID_PARAMETER).
    pub chunk_bytes_written: u32,
    /// TotalBytesWritten (or the total-size limit on INVALID_PARAMETER).
    pub total_bytes_written: u32,
}

/// Length of SRV_COPYCHUNK_RESPONSE.
pub const COPYCHUNK_RESPONSE_LEN: usize = 12;

impl CopychunkResponse {
    /// Encodes the 12-byte response.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(COPYCHUNK_RESPONSE_LEN);
        w.u32(self.chunks_written)
            .u32(self.chunk_bytes_written)
            .u32(self.total_bytes_written);
        w.into_vec()
    }

    /// Decodes the 12-byte response.
    pub fn decode(b: &[u8]) -> Result<CopychunkResponse, WireError> {
        let mut r = Reader::new(b);
        Ok(CopychunkResponse {
            chunks_written: r.u32()?,
            chunk_bytes_written: r.u32()?,
            total_bytes_written: r.u32()?,
        })
    }
}

/// FILE_ZERO_DATA_INFORMATION ([MS-FSCC] 2.3.67): (FileOffset, BeyondFinalZero).
pub fn decode_zero_data(input: &[u8]) -> Result<(i64, i64), WireError> {
    let mut r = Reader::new(input);
    Ok((r.u64()? as i64, r.u64()? as i64))
}

/// FILE_ALLOCATED_RANGE_BUFFER ([MS-FSCC] 2.3.36): (FileOffset, Length).
pub fn decode_allocated_range(input: &[u8]) -> Result<(i64, i64), WireError> {
    let mut r = Reader::new(input);
    Ok((r.u64()? as i64, r.u64()? as i64))
}

/// Length of one FILE_ALLOCATED_RANGE_BUFFER.
pub const ALLOCATED_RANGE_LEN: usize = 16;

/// Appends one FILE_ALLOCATED_RANGE_BUFFER.
pub fn encode_allocated_range(w: &mut Writer, offset: u64, length: u64) {
    w.u64(offset).u64(length);
}

/// FILE_OBJECTID_BUFFER ([MS-FSCC] 2.1.3.1, type 1): ObjectId, BirthVolumeId,
/// BirthObjectId, DomainId (64 bytes).
pub fn encode_object_id(object_id: &[u8; 16], birth_volume_id: &[u8; 16]) -> Vec<u8> {
    let mut w = Writer::with_capacity(64);
    w.bytes(object_id)
        .bytes(birth_volume_id)
        .bytes(object_id)
        .zeros(16);
    w.into_vec()
}

/// SRV_SNAPSHOT_ARRAY with no snapshots (12 bytes; or, when `room` ≥ 16, the
/// 2-byte empty multi-string terminator padded to 16 as Windows sends).
pub fn encode_empty_snapshots(room: usize) -> Vec<u8> {
    let mut w = Writer::with_capacity(16);
    if room >= 16 {
        w.u32(0).u32(0).u32(2).u16(0).u16(0);
    } else {
        w.u32(0).u32(0).u32(0);
    }
    w.into_vec()
}

/// Capability bits of NETWORK_INTERFACE_INFO.
pub const NETWORK_IF_RSS_CAPABLE: u32 = 0x1;
/// The interface is RDMA capable (SMB Direct).
pub const NETWORK_IF_RDMA_CAPABLE: u32 = 0x2;
/// Size of one NETWORK_INTERFACE_INFO entry.
pub const NETWORK_INTERFACE_INFO_LEN: usize = 152;

/// The address of one interface entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfAddr {
    /// IPv4 address (network byte order octets).
    V4([u8; 4]),
    /// IPv6 address and scope id.
    V6([u8; 16], u32),
}

/// One NETWORK_INTERFACE_INFO entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkInterface {
    /// IfIndex.
    pub if_index: u32,
    /// Capability (RSS / RDMA bits).
    pub capability: u32,
    /// LinkSpeed in bits per second.
    pub link_speed: u64,
    /// The address.
    pub addr: IfAddr,
}

/// Encodes a NETWORK_INTERFACE_INFO chain ([MS-SMB2] 2.2.32.5): 152 bytes per entry,
/// Next = 152 except on the last.
pub fn encode_network_interfaces(ifs: &[NetworkInterface]) -> Vec<u8> {
    let mut w = Writer::with_capacity(ifs.len() * NETWORK_INTERFACE_INFO_LEN);
    for (i, ni) in ifs.iter().enumerate() {
        let start = w.len();
        let next = if i + 1 == ifs.len() {
            0
        } else {
            NETWORK_INTERFACE_INFO_LEN as u32
        };
        w.u32(next)
            .u32(ni.if_index)
            .u32(ni.capability)
            .u32(0)
            .u64(ni.link_speed);
        match ni.addr {
            IfAddr::V4(a) => {
                w.u16(0x0002).u16(0).bytes(&a).zeros(8);
            }
            IfAddr::V6(a, scope) => {
                w.u16(0x0017).u16(0).u32(0).bytes(&a).u32(scope);
            }
        }
        let used = w.len() - start;
        w.zeros(NETWORK_INTERFACE_INFO_LEN - used);
    }
    w.into_vec()
}

/// Decodes a NETWORK_INTERFACE_INFO chain ([MS-SMB2] 2.2.32.5), the output of
/// FSCTL_QUERY_NETWORK_INTERFACE_INFO. Every entry must be whole (152 bytes) and
/// each Next must move forward by at least one entry inside the buffer. Entries
/// of an address family other than IPv4 and IPv6 are skipped.
pub fn decode_network_interfaces(buf: &[u8]) -> Result<Vec<NetworkInterface>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    // At most one entry per 152 bytes: the loop is bounded by the buffer.
    loop {
        let end = pos
            .checked_add(NETWORK_INTERFACE_INFO_LEN)
            .filter(|&e| e <= buf.len())
            .ok_or(WireError::Invalid("NETWORK_INTERFACE_INFO entry truncated"))?;
        let mut r = Reader::new(&buf[pos..end]);
        let next = r.u32()? as usize;
        let if_index = r.u32()?;
        let capability = r.u32()?;
        r.skip(4)?;
        let link_speed = r.u64()?;
        let family = r.u16()?;
        let _port = r.u16()?;
        let addr = match family {
            0x0002 => Some(IfAddr::V4(r.array::<4>()?)),
            0x0017 => {
                r.skip(4)?;
                let a = r.array::<16>()?;
                Some(IfAddr::V6(a, r.u32()?))
            }
            _ => None,
        };
        if let Some(addr) = addr {
            out.push(NetworkInterface {
                if_index,
                capability,
                link_speed,
                addr,
            });
        }
        if next == 0 {
            return Ok(out);
        }
        if next < NETWORK_INTERFACE_INFO_LEN {
            return Err(WireError::Invalid("NETWORK_INTERFACE_INFO Next too small"));
        }
        pos = pos
            .checked_add(next)
            .ok_or(WireError::Invalid("NETWORK_INTERFACE_INFO Next overflows"))?;
    }
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
        let req = IoctlRequest {
            ctl_code: fsctl::SRV_COPYCHUNK,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            input: b"abcdef",
            max_input_response: 0,
            output: &[],
            max_output_response: 12,
            flags: SMB2_0_IOCTL_IS_FSCTL,
        };
        let m = msg_with(&req.encode());
        assert_eq!(IoctlRequest::decode(&m).unwrap(), req);
    }

    #[test]
    fn request_rejects_bad_offsets() {
        let req = IoctlRequest {
            ctl_code: 1,
            file_id: FileId {
                persistent: 0,
                volatile: 0,
            },
            input: b"abcd",
            max_input_response: 0,
            output: &[],
            max_output_response: 0,
            flags: 1,
        };
        let body = req.encode();
        // Count past the end.
        let mut m = msg_with(&body);
        m[HEADER_SIZE + 28..HEADER_SIZE + 32].copy_from_slice(&5u32.to_le_bytes());
        assert!(IoctlRequest::decode(&m).is_err());
        // Offset pointing into the fixed part.
        let mut m = msg_with(&body);
        m[HEADER_SIZE + 24..HEADER_SIZE + 28].copy_from_slice(&64u32.to_le_bytes());
        assert!(IoctlRequest::decode(&m).is_err());
        // Offset overflowing.
        let mut m = msg_with(&body);
        m[HEADER_SIZE + 24..HEADER_SIZE + 28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(IoctlRequest::decode(&m).is_err());
        // Truncated fixed part.
        assert!(IoctlRequest::decode(&msg_with(&body[..40])).is_err());
        // Wrong structure size.
        let mut m = msg_with(&body);
        m[HEADER_SIZE] = 56;
        assert!(IoctlRequest::decode(&m).is_err());
    }

    #[test]
    fn response_layout() {
        let r = IoctlResponse {
            ctl_code: fsctl::SRV_REQUEST_RESUME_KEY,
            file_id: FileId {
                persistent: 7,
                volatile: 8,
            },
            output: encode_resume_key(&[0xAA; 24]),
        };
        let b = r.encode();
        assert_eq!(b.len(), 48 + 32);
        assert_eq!(&b[0..2], &49u16.to_le_bytes());
        assert_eq!(&b[24..28], &112u32.to_le_bytes());
        assert_eq!(&b[32..36], &112u32.to_le_bytes());
        assert_eq!(&b[36..40], &32u32.to_le_bytes());
        assert_eq!(IoctlResponse::decode(&msg_with(&b)).unwrap(), r);
    }

    #[test]
    fn copychunk_decode_limits() {
        let cc = CopychunkCopy {
            source_key: [1; 24],
            chunk_count: 2,
            chunks: vec![
                Chunk {
                    source_offset: 0,
                    target_offset: 10,
                    length: 4096,
                },
                Chunk {
                    source_offset: 4096,
                    target_offset: 0,
                    length: 1,
                },
            ],
        };
        let b = cc.encode();
        assert_eq!(b.len(), 32 + 48);
        assert_eq!(CopychunkCopy::decode(&b, 256).unwrap(), cc);
        // Too many chunks for the limit: header only.
        let d = CopychunkCopy::decode(&b, 1).unwrap();
        assert_eq!(d.chunk_count, 2);
        assert!(d.chunks.is_empty());
        // Count larger than the buffer.
        assert!(CopychunkCopy::decode(&b[..b.len() - 1], 256).is_err());
        let mut big = b.clone();
        big[24..28].copy_from_slice(&200u32.to_le_bytes());
        assert!(CopychunkCopy::decode(&big, 256).is_err());
        assert!(CopychunkCopy::decode(&b[..20], 256).is_err());
    }

    #[test]
    fn network_interfaces_chain() {
        let b = encode_network_interfaces(&[
            NetworkInterface {
                if_index: 1,
                capability: NETWORK_IF_RSS_CAPABLE,
                link_speed: 10_000_000_000,
                addr: IfAddr::V4([127, 0, 0, 1]),
            },
            NetworkInterface {
                if_index: 1,
                capability: 0,
                link_speed: 1_000_000_000,
                addr: IfAddr::V6([0; 16], 3),
            },
        ]);
        assert_eq!(b.len(), 304);
        assert_eq!(&b[0..4], &152u32.to_le_bytes());
        assert_eq!(&b[24..26], &2u16.to_le_bytes());
        assert_eq!(&b[28..32], &[127, 0, 0, 1]);
        assert_eq!(&b[152..156], &0u32.to_le_bytes());
        assert_eq!(&b[152 + 24..152 + 26], &0x17u16.to_le_bytes());
        assert_eq!(&b[152 + 48..152 + 52], &3u32.to_le_bytes());
    }

    #[test]
    fn network_interfaces_decode() {
        let ifs = [
            NetworkInterface {
                if_index: 4,
                capability: NETWORK_IF_RSS_CAPABLE | NETWORK_IF_RDMA_CAPABLE,
                link_speed: 25_000_000_000,
                addr: IfAddr::V4([10, 0, 0, 2]),
            },
            NetworkInterface {
                if_index: 5,
                capability: 0,
                link_speed: 1_000_000_000,
                addr: IfAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 5),
            },
        ];
        let b = encode_network_interfaces(&ifs);
        assert_eq!(decode_network_interfaces(&b).unwrap(), ifs.to_vec());
        // Truncated entries (a Next past the end), empty input.
        assert!(decode_network_interfaces(&b[..152]).is_err());
        assert!(decode_network_interfaces(&b[..303]).is_err());
        assert!(decode_network_interfaces(&b[..100]).is_err());
        assert!(decode_network_interfaces(&[]).is_err());
        // Next pointing backwards into the entry, or past the end.
        let mut bad = b.clone();
        bad[0..4].copy_from_slice(&8u32.to_le_bytes());
        assert!(decode_network_interfaces(&bad).is_err());
        bad[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_network_interfaces(&bad).is_err());
        // An unknown family is skipped, the chain goes on.
        let mut other = b.clone();
        other[24..26].copy_from_slice(&0x1234u16.to_le_bytes());
        assert_eq!(
            decode_network_interfaces(&other).unwrap(),
            ifs[1..].to_vec()
        );
    }

    #[test]
    fn small_payloads() {
        let mut z = Vec::new();
        z.extend_from_slice(&5u64.to_le_bytes());
        z.extend_from_slice(&9u64.to_le_bytes());
        assert_eq!(decode_zero_data(&z).unwrap(), (5, 9));
        assert!(decode_zero_data(&z[..15]).is_err());
        assert_eq!(decode_allocated_range(&z).unwrap(), (5, 9));
        assert_eq!(encode_empty_snapshots(16).len(), 16);
        assert_eq!(encode_empty_snapshots(12).len(), 12);
        assert_eq!(encode_object_id(&[1; 16], &[2; 16]).len(), 64);
        let r = CopychunkResponse {
            chunks_written: 1,
            chunk_bytes_written: 2,
            total_bytes_written: 3,
        };
        assert_eq!(CopychunkResponse::decode(&r.encode()).unwrap(), r);
    }
}
