//! SMB2 LOCK request and response ([MS-SMB2] 2.2.26, 2.2.27).

use crate::codec::{Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::FileId;

/// SMB2_LOCKFLAG_SHARED_LOCK.
pub const LOCKFLAG_SHARED: u32 = 0x0000_0001;
/// SMB2_LOCKFLAG_EXCLUSIVE_LOCK.
pub const LOCKFLAG_EXCLUSIVE: u32 = 0x0000_0002;
/// SMB2_LOCKFLAG_UNLOCK.
pub const LOCKFLAG_UNLOCK: u32 = 0x0000_0004;
/// SMB2_LOCKFLAG_FAIL_IMMEDIATELY.
pub const LOCKFLAG_FAIL_IMMEDIATELY: u32 = 0x0000_0010;

/// Size of one SMB2_LOCK_ELEMENT.
pub const LOCK_ELEMENT_SIZE: usize = 24;

/// One SMB2_LOCK_ELEMENT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockElement {
    /// Starting offset of the range.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u64,
    /// `LOCKFLAG_*` bits.
    pub flags: u32,
}

/// A decoded LOCK request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRequest {
    /// LockSequenceNumber (low 4 bits of the LockSequence field).
    pub lock_sequence_number: u8,
    /// LockSequenceIndex (high 28 bits of the LockSequence field).
    pub lock_sequence_index: u32,
    /// The raw 16-byte FileId (persistent, volatile).
    pub file_id: FileId,
    /// The lock elements (at least one).
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    /// Decodes a LOCK request from a message starting at its SMB2 header. A LockCount
    /// of zero or one whose elements do not fit the message is an error.
    pub fn decode(msg: &[u8]) -> Result<LockRequest, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 48 {
            return Err(WireError::Invalid("LOCK StructureSize is not 48"));
        }
        let count = r.u16()? as usize;
        let seq = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        if count == 0 {
            return Err(WireError::Invalid("LockCount is 0"));
        }
        let need = count
            .checked_mul(LOCK_ELEMENT_SIZE)
            .ok_or(WireError::Invalid("LockCount overflow"))?;
        if r.remaining() < need {
            return Err(WireError::Truncated {
                offset: r.pos(),
                needed: need,
            });
        }
        let mut locks = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = r.u64()?;
            let length = r.u64()?;
            let flags = r.u32()?;
            r.u32()?;
            locks.push(LockElement {
                offset,
                length,
                flags,
            });
        }
        Ok(LockRequest {
            lock_sequence_number: (seq & 0xF) as u8,
            lock_sequence_index: seq >> 4,
            file_id,
            locks,
        })
    }

    /// Encodes the request body (after the header); for clients and tests.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(24 + self.locks.len() * LOCK_ELEMENT_SIZE);
        w.u16(48)
            .u16(self.locks.len() as u16)
            .u32((self.lock_sequence_index << 4) | u32::from(self.lock_sequence_number & 0xF))
            .bytes(&self.file_id.to_bytes());
        for l in &self.locks {
            w.u64(l.offset).u64(l.length).u32(l.flags).u32(0);
        }
        w.into_vec()
    }
}

/// Encodes the 4-byte LOCK response body.
pub fn encode_lock_response() -> Vec<u8> {
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
    fn round_trip() {
        let req = LockRequest {
            lock_sequence_number: 3,
            lock_sequence_index: 17,
            file_id: FileId::from_bytes([9; 16]),
            locks: vec![
                LockElement {
                    offset: 10,
                    length: 5,
                    flags: LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY,
                },
                LockElement {
                    offset: u64::MAX,
                    length: 1,
                    flags: LOCKFLAG_UNLOCK,
                },
            ],
        };
        let body = req.encode();
        assert_eq!(body.len(), 24 + 48);
        assert_eq!(LockRequest::decode(&msg(&body)).unwrap(), req);
    }

    #[test]
    fn rejects_zero_and_short_counts() {
        let mut req = LockRequest {
            lock_sequence_number: 0,
            lock_sequence_index: 0,
            file_id: FileId::from_bytes([0; 16]),
            locks: vec![LockElement {
                offset: 0,
                length: 1,
                flags: LOCKFLAG_SHARED,
            }],
        };
        let mut body = req.encode();
        // Claim two elements but carry one.
        body[2] = 2;
        assert!(LockRequest::decode(&msg(&body)).is_err());
        // Claim 65535 elements.
        body[2] = 0xFF;
        body[3] = 0xFF;
        assert!(LockRequest::decode(&msg(&body)).is_err());
        req.locks.clear();
        assert!(LockRequest::decode(&msg(&req.encode())).is_err());
        assert!(LockRequest::decode(&msg(&[48, 0])).is_err());
        assert!(LockRequest::decode(&[0; 10]).is_err());
    }
}
