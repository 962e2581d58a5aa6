//! Durable handle v2 create context data ([MS-SMB2] 2.2.13.2.11 `DH2Q`,
//! 2.2.13.2.12 `DH2C`): what a client sends to ask for a durable open and to
//! reclaim it on a new session.

use crate::codec::{Reader, WireError, Writer};
use crate::FileId;

/// SMB2_DHANDLE_FLAG_PERSISTENT: a persistent (continuously available) open.
pub const DHANDLE_FLAG_PERSISTENT: u32 = 0x0000_0002;

/// SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2 (`DH2Q`, 32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurableV2Request {
    /// How long (ms) the server keeps the open after a disconnect; 0: its default.
    pub timeout_ms: u32,
    /// Flags ([`DHANDLE_FLAG_PERSISTENT`]).
    pub flags: u32,
    /// The client's CreateGuid: names the open for replays and reconnects.
    pub create_guid: [u8; 16],
}

impl DurableV2Request {
    /// Size of the context data.
    pub const SIZE: usize = 32;

    /// Encodes the context data.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::SIZE);
        w.u32(self.timeout_ms)
            .u32(self.flags)
            .u64(0)
            .bytes(&self.create_guid);
        w.into_vec()
    }

    /// Decodes the context data: exactly 32 bytes.
    pub fn decode(data: &[u8]) -> Result<DurableV2Request, WireError> {
        if data.len() != Self::SIZE {
            return Err(WireError::Invalid("DH2Q size"));
        }
        let mut r = Reader::new(data);
        let timeout_ms = r.u32()?;
        let flags = r.u32()?;
        r.u64()?;
        let create_guid = r.array::<16>()?;
        Ok(DurableV2Request {
            timeout_ms,
            flags,
            create_guid,
        })
    }
}

/// SMB2_CREATE_DURABLE_HANDLE_RECONNECT_V2 (`DH2C`, 36 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurableV2Reconnect {
    /// The FileId the open had.
    pub file_id: FileId,
    /// The CreateGuid it was opened with.
    pub create_guid: [u8; 16],
    /// Flags ([`DHANDLE_FLAG_PERSISTENT`]).
    pub flags: u32,
}

impl DurableV2Reconnect {
    /// Size of the context data.
    pub const SIZE: usize = 36;

    /// Encodes the context data.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::SIZE);
        w.bytes(&self.file_id.to_bytes())
            .bytes(&self.create_guid)
            .u32(self.flags);
        w.into_vec()
    }

    /// Decodes the context data: exactly 36 bytes.
    pub fn decode(data: &[u8]) -> Result<DurableV2Reconnect, WireError> {
        if data.len() != Self::SIZE {
            return Err(WireError::Invalid("DH2C size"));
        }
        let mut r = Reader::new(data);
        let file_id = FileId::decode(&mut r)?;
        let create_guid = r.array::<16>()?;
        let flags = r.u32()?;
        Ok(DurableV2Reconnect {
            file_id,
            create_guid,
            flags,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dh2q_roundtrip_and_layout() {
        let q = DurableV2Request {
            timeout_ms: 60_000,
            flags: 0,
            create_guid: [7; 16],
        };
        let b = q.encode();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[0..4], &60_000u32.to_le_bytes());
        assert_eq!(&b[8..16], &[0; 8], "Reserved");
        assert_eq!(&b[16..], &[7; 16]);
        assert_eq!(DurableV2Request::decode(&b).unwrap(), q);
        assert!(DurableV2Request::decode(&b[..31]).is_err());
        assert!(DurableV2Request::decode(&[0; 33]).is_err());
    }

    #[test]
    fn dh2c_roundtrip_and_layout() {
        let c = DurableV2Reconnect {
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            create_guid: [9; 16],
            flags: DHANDLE_FLAG_PERSISTENT,
        };
        let b = c.encode();
        assert_eq!(b.len(), 36);
        assert_eq!(&b[0..8], &1u64.to_le_bytes());
        assert_eq!(&b[8..16], &2u64.to_le_bytes());
        assert_eq!(&b[16..32], &[9; 16]);
        assert_eq!(DurableV2Reconnect::decode(&b).unwrap(), c);
        assert!(DurableV2Reconnect::decode(&b[..35]).is_err());
        assert!(DurableV2Reconnect::decode(&[]).is_err());
    }
}
