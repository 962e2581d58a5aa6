//! Direct TCP transport framing ([MS-SMB2] 2.1): every message is preceded by a
//! 4-byte big-endian length whose top byte must be zero (so at most 16 MiB − 1).

use crate::codec::WireError;

/// Size of the Direct TCP frame header.
pub const FRAME_HEADER_SIZE: usize = 4;
/// Largest length the 24-bit field can carry.
pub const MAX_FRAME_LEN: usize = 0x00FF_FFFF;

/// Decodes a frame header, refusing a non-zero top byte, an empty frame, or a
/// length above `max_pdu`.
pub fn decode_frame_header(hdr: [u8; 4], max_pdu: usize) -> Result<usize, WireError> {
    if hdr[0] != 0 {
        return Err(WireError::Invalid("frame header top byte is not zero"));
    }
    let len = u32::from_be_bytes(hdr) as usize;
    if len == 0 {
        return Err(WireError::Invalid("empty frame"));
    }
    if len > max_pdu {
        return Err(WireError::Invalid("frame exceeds the maximum PDU size"));
    }
    Ok(len)
}

/// Encodes a frame header for a message of `len` bytes.
pub fn encode_frame_header(len: usize) -> Result<[u8; 4], WireError> {
    if len > MAX_FRAME_LEN {
        return Err(WireError::Invalid("message too large for Direct TCP"));
    }
    Ok((len as u32).to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn frame_headers() {
        assert_eq!(encode_frame_header(0x1234).unwrap(), [0, 0, 0x12, 0x34]);
        assert_eq!(
            decode_frame_header([0, 0, 0x12, 0x34], 1 << 20).unwrap(),
            0x1234
        );
        assert!(decode_frame_header([1, 0, 0, 0], usize::MAX).is_err());
        assert!(decode_frame_header([0, 0, 0, 0], 100).is_err());
        assert!(decode_frame_header([0, 0x10, 0, 0], 100).is_err());
        assert!(encode_frame_header(MAX_FRAME_LEN + 1).is_err());
    }
}
