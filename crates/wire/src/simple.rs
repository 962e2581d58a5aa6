//! The fixed 4-byte bodies: LOGOFF, TREE_DISCONNECT, ECHO and CANCEL requests, and the
//! LOGOFF, TREE_DISCONNECT and ECHO responses ([MS-SMB2] 2.2.7, 2.2.8, 2.2.11, 2.2.12,
//! 2.2.28, 2.2.29, 2.2.30). All have StructureSize 4 and a reserved u16.

use crate::codec::{Reader, WireError};
use crate::header::HEADER_SIZE;

/// The encoded 4-byte body shared by these messages.
pub const SIMPLE_BODY: [u8; 4] = [4, 0, 0, 0];

/// Checks that the message (starting at the SMB2 header) carries a StructureSize-4 body.
pub fn decode_simple(msg: &[u8]) -> Result<(), WireError> {
    let mut r = Reader::new(msg);
    r.seek(HEADER_SIZE)?;
    if r.u16()? != 4 {
        return Err(WireError::Invalid("StructureSize is not 4"));
    }
    r.u16()?;
    Ok(())
}

/// Encodes the 4-byte body.
pub fn encode_simple() -> Vec<u8> {
    SIMPLE_BODY.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn simple_bodies() {
        let mut m = vec![0u8; HEADER_SIZE];
        assert!(decode_simple(&m).is_err());
        m.extend_from_slice(&encode_simple());
        assert!(decode_simple(&m).is_ok());
        m[HEADER_SIZE] = 5;
        assert!(decode_simple(&m).is_err());
    }
}
