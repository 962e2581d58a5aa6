//! SMB2 CLOSE and FLUSH ([MS-SMB2] 2.2.15, 2.2.16, 2.2.17, 2.2.18).

use crate::codec::{Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::{FileAttributes, FileId};

/// CLOSE flag: return the file's attributes in the response.
pub const CLOSE_FLAG_POSTQUERY_ATTRIB: u16 = 0x0001;

/// A CLOSE request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseRequest {
    /// Flags.
    pub flags: u16,
    /// FileId.
    pub file_id: FileId,
}

impl CloseRequest {
    /// Decodes the request from the message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<CloseRequest, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 24 {
            return Err(WireError::Invalid("StructureSize is not 24"));
        }
        let flags = r.u16()?;
        r.u32()?;
        Ok(CloseRequest {
            flags,
            file_id: FileId::decode(&mut r)?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(24);
        w.u16(24)
            .u16(self.flags)
            .u32(0)
            .bytes(&self.file_id.to_bytes());
        w.into_vec()
    }
}

/// A CLOSE response. With `flags == 0` every other field must be zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CloseResponse {
    /// Flags (CLOSE_FLAG_POSTQUERY_ATTRIB when the attributes are valid).
    pub flags: u16,
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
}

impl CloseResponse {
    /// Encodes the 60-byte body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(60);
        w.u16(60)
            .u16(self.flags)
            .u32(0)
            .u64(self.creation_time)
            .u64(self.last_access_time)
            .u64(self.last_write_time)
            .u64(self.change_time)
            .u64(self.allocation_size)
            .u64(self.end_of_file)
            .u32(self.file_attributes.bits());
        w.into_vec()
    }

    /// Decodes a response (message starting at the header).
    pub fn decode(msg: &[u8]) -> Result<CloseResponse, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 60 {
            return Err(WireError::Invalid("StructureSize is not 60"));
        }
        let flags = r.u16()?;
        r.u32()?;
        Ok(CloseResponse {
            flags,
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: FileAttributes(r.u32()?),
        })
    }
}

/// A FLUSH request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushRequest {
    /// FileId.
    pub file_id: FileId,
}

impl FlushRequest {
    /// Decodes the request from the message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<FlushRequest, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 24 {
            return Err(WireError::Invalid("StructureSize is not 24"));
        }
        r.u16()?;
        r.u32()?;
        Ok(FlushRequest {
            file_id: FileId::decode(&mut r)?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(24);
        w.u16(24).u16(0).u32(0).bytes(&self.file_id.to_bytes());
        w.into_vec()
    }
}

/// The 4-byte FLUSH response body.
pub fn encode_flush_response() -> Vec<u8> {
    vec![4, 0, 0, 0]
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
    fn close_roundtrip() {
        let c = CloseRequest {
            flags: CLOSE_FLAG_POSTQUERY_ATTRIB,
            file_id: FileId {
                persistent: 7,
                volatile: 9,
            },
        };
        let b = c.encode();
        assert_eq!(b.len(), 24);
        assert_eq!(CloseRequest::decode(&msg(&b)).unwrap(), c);
        assert!(CloseRequest::decode(&msg(&b[..20])).is_err());
        let r = CloseResponse {
            flags: 1,
            end_of_file: 10,
            file_attributes: FileAttributes::ARCHIVE,
            ..Default::default()
        };
        let b = r.encode();
        assert_eq!(b.len(), 60);
        assert_eq!(CloseResponse::decode(&msg(&b)).unwrap(), r);
    }

    #[test]
    fn flush_roundtrip() {
        let f = FlushRequest {
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
        };
        assert_eq!(FlushRequest::decode(&msg(&f.encode())).unwrap(), f);
        let mut b = f.encode();
        b[0] = 23;
        assert!(FlushRequest::decode(&msg(&b)).is_err());
    }
}
