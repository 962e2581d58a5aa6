//! SMB2_FILEID ([MS-SMB2] 2.2.14.1): the 16-byte handle of an open, in every PDU that
//! names one.

use crate::codec::{Reader, WireError, Writer};

/// An open's FileId: a persistent half (kept across durable reconnects) and a
/// volatile half (unique per open on this server instance), each little-endian on
/// the wire, persistent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    /// Persistent part.
    pub persistent: u64,
    /// Volatile part.
    pub volatile: u64,
}

impl FileId {
    /// The all-ones FileId that related compound members use for "the file the
    /// previous member opened" ([MS-SMB2] 3.2.4.1.4, 3.3.5.2.7.2).
    pub const RELATED: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    /// The FileId of an IOCTL that names no open (FSCTL_VALIDATE_NEGOTIATE_INFO,
    /// FSCTL_QUERY_NETWORK_INTERFACE_INFO, ...): all ones as well ([MS-SMB2] 2.2.31).
    pub const NO_FILE: FileId = FileId::RELATED;

    /// True for [`FileId::RELATED`].
    pub fn is_related(&self) -> bool {
        *self == FileId::RELATED
    }

    /// Reads the 16-byte wire form.
    pub fn decode(r: &mut Reader<'_>) -> Result<FileId, WireError> {
        Ok(FileId {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }

    /// Writes the 16-byte wire form.
    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.to_bytes());
    }

    /// The 16 wire bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.persistent.to_le_bytes());
        b[8..].copy_from_slice(&self.volatile.to_le_bytes());
        b
    }

    /// From the 16 wire bytes.
    pub fn from_bytes(b: [u8; 16]) -> FileId {
        let mut p = [0u8; 8];
        let mut v = [0u8; 8];
        p.copy_from_slice(&b[..8]);
        v.copy_from_slice(&b[8..]);
        FileId {
            persistent: u64::from_le_bytes(p),
            volatile: u64::from_le_bytes(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistent_first_little_endian_and_back() {
        let id = FileId {
            persistent: 0x0102_0304_0506_0708,
            volatile: 0x1112_1314_1516_1718,
        };
        let b = id.to_bytes();
        assert_eq!(b[0], 0x08);
        assert_eq!(b[8], 0x18);
        assert_eq!(FileId::from_bytes(b), id);
        let mut w = Writer::new();
        id.encode(&mut w);
        let v = w.into_vec();
        assert_eq!(v, b);
        assert_eq!(FileId::decode(&mut Reader::new(&v)).unwrap(), id);
        assert!(FileId::decode(&mut Reader::new(&v[..15])).is_err());
        assert!(FileId::from_bytes([0xff; 16]).is_related());
    }
}
