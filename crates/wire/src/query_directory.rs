//! SMB2 QUERY_DIRECTORY request and response ([MS-SMB2] 2.2.33, 2.2.34).

use crate::codec::{from_utf16le, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::FileId;

/// Flags bit SMB2_RESTART_SCANS.
pub const SMB2_RESTART_SCANS: u8 = 0x01;
/// Flags bit SMB2_RETURN_SINGLE_ENTRY.
pub const SMB2_RETURN_SINGLE_ENTRY: u8 = 0x02;
/// Flags bit SMB2_INDEX_SPECIFIED.
pub const SMB2_INDEX_SPECIFIED: u8 = 0x04;
/// Flags bit SMB2_REOPEN.
pub const SMB2_REOPEN: u8 = 0x10;

/// A decoded QUERY_DIRECTORY request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryDirectoryRequest {
    /// FileInformationClass.
    pub info_class: u8,
    /// Flags (`SMB2_RESTART_SCANS` …).
    pub flags: u8,
    /// FileIndex (meaningful with `SMB2_INDEX_SPECIFIED`).
    pub file_index: u32,
    /// The 16-byte FileId (persistent, volatile).
    pub file_id: FileId,
    /// The search pattern (empty when FileNameLength is 0).
    pub pattern: String,
    /// OutputBufferLength.
    pub output_buffer_length: u32,
}

impl QueryDirectoryRequest {
    /// Decodes from a message starting at the SMB2 header (offsets are header-relative).
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 33 {
            return Err(WireError::Invalid("QUERY_DIRECTORY StructureSize"));
        }
        let info_class = r.u8()?;
        let flags = r.u8()?;
        let file_index = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        let output_buffer_length = r.u32()?;
        let pattern = if name_len == 0 {
            String::new()
        } else {
            if name_off < HEADER_SIZE + 32 {
                return Err(WireError::Invalid("FileNameOffset inside the fixed part"));
            }
            let b = crate::codec::slice_at(msg, name_off, name_len)?;
            from_utf16le(b)?
        };
        Ok(QueryDirectoryRequest {
            info_class,
            flags,
            file_index,
            file_id,
            pattern,
            output_buffer_length,
        })
    }

    /// Encodes the body (client side / tests); the name follows the fixed part.
    pub fn encode(&self) -> Vec<u8> {
        let name = crate::codec::utf16le(&self.pattern);
        let mut w = Writer::with_capacity(32 + name.len().max(1));
        w.u16(33)
            .u8(self.info_class)
            .u8(self.flags)
            .u32(self.file_index);
        w.bytes(&self.file_id.to_bytes());
        let off = if name.is_empty() { 0 } else { HEADER_SIZE + 32 };
        w.u16(off as u16).u16(name.len() as u16);
        w.u32(self.output_buffer_length);
        if name.is_empty() {
            w.u8(0);
        } else {
            w.bytes(&name);
        }
        w.into_vec()
    }
}

/// Encodes the QUERY_DIRECTORY / QUERY_INFO response body (StructureSize 9,
/// OutputBufferOffset, OutputBufferLength, Buffer); both commands share this layout.
pub fn encode_output_response(data: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(8 + data.len().max(1));
    w.u16(9)
        .u16((HEADER_SIZE + 8) as u16)
        .u32(data.len() as u32);
    if data.is_empty() {
        w.u8(0);
    } else {
        w.bytes(data);
    }
    w.into_vec()
}

/// Decodes a QUERY_DIRECTORY / QUERY_INFO response (client side / tests): the output
/// buffer, from a message starting at the SMB2 header.
pub fn decode_output_response(msg: &[u8]) -> Result<&[u8], WireError> {
    let mut r = Reader::new(msg);
    r.seek(HEADER_SIZE)?;
    if r.u16()? != 9 {
        return Err(WireError::Invalid("output response StructureSize"));
    }
    let off = r.u16()? as usize;
    let len = r.u32()? as usize;
    if len == 0 {
        return Ok(&[]);
    }
    crate::codec::slice_at(msg, off, len)
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
    fn round_trip() {
        let q = QueryDirectoryRequest {
            info_class: 37,
            flags: SMB2_RESTART_SCANS,
            file_index: 0,
            file_id: FileId::from_bytes([7; 16]),
            pattern: "*.txt".into(),
            output_buffer_length: 65536,
        };
        assert_eq!(QueryDirectoryRequest::decode(&msg(&q.encode())).unwrap(), q);
        let q2 = QueryDirectoryRequest {
            pattern: String::new(),
            ..q
        };
        assert_eq!(
            QueryDirectoryRequest::decode(&msg(&q2.encode())).unwrap(),
            q2
        );
    }

    #[test]
    fn hostile() {
        let q = QueryDirectoryRequest {
            info_class: 1,
            flags: 0,
            file_index: 0,
            file_id: FileId::from_bytes([0; 16]),
            pattern: "abc".into(),
            output_buffer_length: 10,
        };
        let mut m = msg(&q.encode());
        // name length past the end
        m[HEADER_SIZE + 26] = 0xff;
        assert!(QueryDirectoryRequest::decode(&m).is_err());
        let mut m = msg(&q.encode());
        // offset pointing into the header
        m[HEADER_SIZE + 24] = 0;
        assert!(QueryDirectoryRequest::decode(&m).is_err());
        // odd length
        let mut m = msg(&q.encode());
        m[HEADER_SIZE + 26] = 5;
        assert!(QueryDirectoryRequest::decode(&m).is_err());
        for n in 0..HEADER_SIZE + 32 {
            assert!(QueryDirectoryRequest::decode(&m[..n]).is_err());
        }
        let mut m = msg(&q.encode());
        m[HEADER_SIZE] = 34;
        assert!(QueryDirectoryRequest::decode(&m).is_err());
    }

    #[test]
    fn output_response() {
        let b = encode_output_response(b"abcd");
        assert_eq!(&b[..8], &[9, 0, 72, 0, 4, 0, 0, 0]);
        assert_eq!(decode_output_response(&msg(&b)).unwrap(), b"abcd");
        assert_eq!(encode_output_response(&[]).len(), 9);
    }
}
