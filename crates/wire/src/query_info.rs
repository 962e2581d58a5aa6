//! SMB2 QUERY_INFO request ([MS-SMB2] 2.2.37); the response shares the layout of
//! [`crate::query_directory::encode_output_response`].

use crate::codec::{Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::FileId;

/// InfoType SMB2_0_INFO_FILE.
pub const SMB2_0_INFO_FILE: u8 = 1;
/// InfoType SMB2_0_INFO_FILESYSTEM.
pub const SMB2_0_INFO_FILESYSTEM: u8 = 2;
/// InfoType SMB2_0_INFO_SECURITY.
pub const SMB2_0_INFO_SECURITY: u8 = 3;
/// InfoType SMB2_0_INFO_QUOTA.
pub const SMB2_0_INFO_QUOTA: u8 = 4;

/// Flags bit SL_RESTART_SCAN (FileFullEaInformation).
pub const SL_RESTART_SCAN: u32 = 0x01;
/// Flags bit SL_RETURN_SINGLE_ENTRY.
pub const SL_RETURN_SINGLE_ENTRY: u32 = 0x02;
/// Flags bit SL_INDEX_SPECIFIED.
pub const SL_INDEX_SPECIFIED: u32 = 0x04;

/// A decoded QUERY_INFO request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryInfoRequest<'a> {
    /// InfoType.
    pub info_type: u8,
    /// FileInfoClass.
    pub info_class: u8,
    /// OutputBufferLength.
    pub output_buffer_length: u32,
    /// The input buffer (EA name list for FileFullEaInformation, quota SIDs).
    pub input: &'a [u8],
    /// AdditionalInformation (security information bits, or the EA index).
    pub additional_information: u32,
    /// Flags (`SL_*`).
    pub flags: u32,
    /// The 16-byte FileId.
    pub file_id: FileId,
}

impl<'a> QueryInfoRequest<'a> {
    /// Decodes from a message starting at the SMB2 header.
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 41 {
            return Err(WireError::Invalid("QUERY_INFO StructureSize"));
        }
        let info_type = r.u8()?;
        let info_class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let in_off = r.u16()? as usize;
        r.u16()?;
        let in_len = r.u32()? as usize;
        let additional_information = r.u32()?;
        let flags = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let input = if in_len == 0 {
            &[][..]
        } else {
            if in_off < HEADER_SIZE + 40 {
                return Err(WireError::Invalid(
                    "InputBufferOffset inside the fixed part",
                ));
            }
            crate::codec::slice_at(msg, in_off, in_len)?
        };
        Ok(QueryInfoRequest {
            info_type,
            info_class,
            output_buffer_length,
            input,
            additional_information,
            flags,
            file_id,
        })
    }

    /// Encodes the body (client side / tests); the input follows the fixed part.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(40 + self.input.len().max(1));
        w.u16(41).u8(self.info_type).u8(self.info_class);
        w.u32(self.output_buffer_length);
        let off = if self.input.is_empty() {
            0
        } else {
            HEADER_SIZE + 40
        };
        w.u16(off as u16).u16(0).u32(self.input.len() as u32);
        w.u32(self.additional_information).u32(self.flags);
        w.bytes(&self.file_id.to_bytes());
        if self.input.is_empty() {
            w.u8(0);
        } else {
            w.bytes(self.input);
        }
        w.into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_hostile() {
        let input = [1u8, 2, 3, 4];
        let q = QueryInfoRequest {
            info_type: SMB2_0_INFO_FILE,
            info_class: 15,
            output_buffer_length: 100,
            input: &input,
            additional_information: 0,
            flags: SL_RESTART_SCAN,
            file_id: FileId::from_bytes([3; 16]),
        };
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(&q.encode());
        assert_eq!(QueryInfoRequest::decode(&m).unwrap(), q);
        for n in 0..m.len() {
            assert!(QueryInfoRequest::decode(&m[..n]).is_err(), "{n}");
        }
        let mut bad = m.clone();
        bad[HEADER_SIZE + 12] = 0xff; // InputBufferLength huge
        bad[HEADER_SIZE + 13] = 0xff;
        assert!(QueryInfoRequest::decode(&bad).is_err());
        let mut bad = m.clone();
        bad[HEADER_SIZE + 8] = 10; // offset inside header
        bad[HEADER_SIZE + 9] = 0;
        assert!(QueryInfoRequest::decode(&bad).is_err());
    }
}
