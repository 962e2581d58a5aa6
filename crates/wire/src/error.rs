//! The SMB2 ERROR response ([MS-SMB2] 2.2.2) and 3.1.1 error contexts (2.2.2.1).

use crate::codec::{Reader, WireError, Writer};
use crate::header::HEADER_SIZE;

/// Error context id: default.
pub const ERROR_ID_DEFAULT: u32 = 0x0000_0000;
/// Error context id: share redirect.
pub const ERROR_ID_SHARE_REDIRECT: u32 = 0x7261_6C72;

/// An SMB2 ERROR response body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorResponse {
    /// ErrorContextCount (3.1.1; 0 otherwise).
    pub context_count: u8,
    /// ErrorData: error contexts (3.1.1) or command-specific data (e.g. a symlink error).
    pub data: Vec<u8>,
}

impl ErrorResponse {
    /// An error response without data.
    pub fn empty() -> Self {
        ErrorResponse::default()
    }

    /// Encodes the body: 8 fixed bytes plus the data, or one zero byte if there is none.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(9 + self.data.len());
        w.u16(9)
            .u8(self.context_count)
            .u8(0)
            .u32(self.data.len() as u32);
        if self.data.is_empty() {
            w.u8(0);
        } else {
            w.bytes(&self.data);
        }
        w.into_vec()
    }

    /// Decodes from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<ErrorResponse, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 9 {
            return Err(WireError::Invalid("error response StructureSize"));
        }
        let context_count = r.u8()?;
        r.u8()?;
        let n = r.u32()? as usize;
        let data = r.bytes(n)?.to_vec();
        Ok(ErrorResponse {
            context_count,
            data,
        })
    }
}

/// Encodes one 3.1.1 error context (ErrorDataLength, ErrorId, data), 8-byte padded.
pub fn encode_error_context(w: &mut Writer, error_id: u32, data: &[u8]) {
    w.u32(data.len() as u32).u32(error_id).bytes(data);
    w.align(8);
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn empty_error_is_nine_bytes() {
        let e = ErrorResponse::empty().encode();
        assert_eq!(e, vec![9, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(&e);
        assert_eq!(ErrorResponse::decode(&m).unwrap(), ErrorResponse::empty());
        let with = ErrorResponse {
            context_count: 0,
            data: vec![1, 2, 3],
        };
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(&with.encode());
        assert_eq!(ErrorResponse::decode(&m).unwrap(), with);
        m.truncate(m.len() - 1);
        assert!(ErrorResponse::decode(&m).is_err());
    }
}
