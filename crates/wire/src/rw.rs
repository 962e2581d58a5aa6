//! SMB2 READ and WRITE ([MS-SMB2] 2.2.19–2.2.22).

use crate::codec::{slice_at, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::FileId;

/// READ flag (3.0.2+): read unbuffered.
pub const READFLAG_READ_UNBUFFERED: u8 = 0x01;
/// READ flag (3.1.1): the response may be compressed.
pub const READFLAG_REQUEST_COMPRESSED: u8 = 0x02;
/// WRITE flag (3.0+): write through.
pub const WRITEFLAG_WRITE_THROUGH: u32 = 0x0000_0001;
/// WRITE flag (3.0.2+): write unbuffered.
pub const WRITEFLAG_WRITE_UNBUFFERED: u32 = 0x0000_0002;
/// Channel: none.
pub const CHANNEL_NONE: u32 = 0;
/// Channel: RDMA v1.
pub const CHANNEL_RDMA_V1: u32 = 1;
/// Channel: RDMA v1 with invalidate.
pub const CHANNEL_RDMA_V1_INVALIDATE: u32 = 2;
/// Channel: RDMA transform.
pub const CHANNEL_RDMA_TRANSFORM: u32 = 3;
/// DataOffset of every READ response: header + 16 fixed bytes.
pub const READ_RESPONSE_DATA_OFFSET: usize = HEADER_SIZE + 16;

/// A READ request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadRequest<'a> {
    /// Padding: requested DataOffset of the response.
    pub padding: u8,
    /// Flags.
    pub flags: u8,
    /// Length to read.
    pub length: u32,
    /// Offset.
    pub offset: u64,
    /// FileId.
    pub file_id: FileId,
    /// MinimumCount.
    pub minimum_count: u32,
    /// Channel.
    pub channel: u32,
    /// RemainingBytes.
    pub remaining_bytes: u32,
    /// ReadChannelInfo (SMB_DIRECT buffer descriptors), bounds-checked.
    pub channel_info: &'a [u8],
}

impl<'a> ReadRequest<'a> {
    /// Decodes the request from the message starting at the SMB2 header.
    pub fn decode(msg: &'a [u8]) -> Result<ReadRequest<'a>, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 49 {
            return Err(WireError::Invalid("StructureSize is not 49"));
        }
        let padding = r.u8()?;
        let flags = r.u8()?;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::decode(&mut r)?;
        let minimum_count = r.u32()?;
        let channel = r.u32()?;
        let remaining_bytes = r.u32()?;
        let ci_off = r.u16()? as usize;
        let ci_len = r.u16()? as usize;
        let channel_info = if ci_len == 0 {
            &[][..]
        } else {
            if ci_off < HEADER_SIZE + 48 {
                return Err(WireError::Invalid("ReadChannelInfoOffset"));
            }
            slice_at(msg, ci_off, ci_len)?
        };
        Ok(ReadRequest {
            padding,
            flags,
            length,
            offset,
            file_id,
            minimum_count,
            channel,
            remaining_bytes,
            channel_info,
        })
    }

    /// Encodes the body: 49 bytes, or the fixed part followed by the channel info
    /// (RDMA buffer descriptors) when there is one.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(48 + self.channel_info.len().max(1));
        self.encode_into(&mut w);
        w.into_vec()
    }

    /// Appends the body ([`ReadRequest::encode`]) to `w`: into a buffer with room
    /// for the headers in front, the request needs no copy to become its frame.
    pub fn encode_into(&self, w: &mut Writer) {
        let (ci_off, ci_len) = channel_info_fields(self.channel_info);
        w.u16(49)
            .u8(self.padding)
            .u8(self.flags)
            .u32(self.length)
            .u64(self.offset)
            .bytes(&self.file_id.to_bytes())
            .u32(self.minimum_count)
            .u32(self.channel)
            .u32(self.remaining_bytes)
            .u16(ci_off)
            .u16(ci_len);
        if self.channel_info.is_empty() {
            w.u8(0);
        } else {
            w.bytes(self.channel_info);
        }
    }
}

/// ChannelInfoOffset and ChannelInfoLength for channel info placed right after the
/// 48-byte fixed part of a READ or WRITE request (zeros when there is none).
fn channel_info_fields(info: &[u8]) -> (u16, u16) {
    if info.is_empty() {
        (0, 0)
    } else {
        (
            (HEADER_SIZE + 48) as u16,
            info.len().min(u16::MAX as usize) as u16,
        )
    }
}

/// Writes the 16-byte READ response body header into `out[..16]` for `data_len` bytes
/// of data placed right after it (at [`READ_RESPONSE_DATA_OFFSET`]). Lets the server
/// read file data directly into the response buffer.
pub fn put_read_response_header(out: &mut [u8; 16], data_len: u32, data_remaining: u32) {
    out[0..2].copy_from_slice(&17u16.to_le_bytes());
    out[2] = READ_RESPONSE_DATA_OFFSET as u8;
    out[3] = 0;
    out[4..8].copy_from_slice(&data_len.to_le_bytes());
    out[8..12].copy_from_slice(&data_remaining.to_le_bytes());
    out[12..16].copy_from_slice(&0u32.to_le_bytes());
}

/// A decoded READ response: the data it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadResponse<'a> {
    /// DataRemaining.
    pub data_remaining: u32,
    /// The data.
    pub data: &'a [u8],
}

impl<'a> ReadResponse<'a> {
    /// Decodes a response (message starting at the header).
    pub fn decode(msg: &'a [u8]) -> Result<ReadResponse<'a>, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 17 {
            return Err(WireError::Invalid("StructureSize is not 17"));
        }
        let off = r.u8()? as usize;
        r.u8()?;
        let len = r.u32()? as usize;
        let data_remaining = r.u32()?;
        let data = if len == 0 {
            &[][..]
        } else {
            slice_at(msg, off, len)?
        };
        Ok(ReadResponse {
            data_remaining,
            data,
        })
    }
}

/// A WRITE request; `data` borrows the payload from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteRequest<'a> {
    /// Offset.
    pub offset: u64,
    /// FileId.
    pub file_id: FileId,
    /// Channel.
    pub channel: u32,
    /// RemainingBytes.
    pub remaining_bytes: u32,
    /// WriteChannelInfo, bounds-checked.
    pub channel_info: &'a [u8],
    /// Flags.
    pub flags: u32,
    /// Length as sent (equals `data.len()` unless the data comes over RDMA).
    pub length: u32,
    /// The data in the message (empty for RDMA channels).
    pub data: &'a [u8],
}

/// Fixed part of the WRITE request body.
const WRITE_FIXED: usize = 48;

impl<'a> WriteRequest<'a> {
    /// Decodes the request from the message starting at the SMB2 header. DataOffset and
    /// Length must lie within the message (unless a channel carries the data).
    pub fn decode(msg: &'a [u8]) -> Result<WriteRequest<'a>, WireError> {
        Self::decode_split(msg, 0)
    }

    /// Decodes a request whose message is `msg` followed by `more` bytes kept elsewhere (a
    /// payload spliced from the socket into a pipe): with `more` > 0 the data must start
    /// within `msg` and end exactly at the end of those bytes; `data` is its part in
    /// `msg`. With `more` = 0 this is [`WriteRequest::decode`].
    pub fn decode_split(msg: &'a [u8], more: usize) -> Result<WriteRequest<'a>, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 49 {
            return Err(WireError::Invalid("StructureSize is not 49"));
        }
        let data_off = r.u16()? as usize;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::decode(&mut r)?;
        let channel = r.u32()?;
        let remaining_bytes = r.u32()?;
        let ci_off = r.u16()? as usize;
        let ci_len = r.u16()? as usize;
        let flags = r.u32()?;
        let channel_info = if ci_len == 0 {
            &[][..]
        } else {
            if ci_off < HEADER_SIZE + WRITE_FIXED {
                return Err(WireError::Invalid("WriteChannelInfoOffset"));
            }
            slice_at(msg, ci_off, ci_len)?
        };
        let rdma = matches!(
            channel,
            CHANNEL_RDMA_V1 | CHANNEL_RDMA_V1_INVALIDATE | CHANNEL_RDMA_TRANSFORM
        );
        let data = if length == 0 || rdma {
            &[][..]
        } else {
            if data_off < HEADER_SIZE + WRITE_FIXED {
                return Err(WireError::Invalid("DataOffset"));
            }
            if more == 0 {
                slice_at(msg, data_off, length as usize)?
            } else {
                let total = msg.len().checked_add(more);
                if data_off > msg.len() || data_off.checked_add(length as usize) != total {
                    return Err(WireError::Invalid("Length does not end with the message"));
                }
                &msg[data_off..]
            }
        };
        if more > 0 && data.len() + more != length as usize {
            return Err(WireError::Invalid("Length does not end with the message"));
        }
        Ok(WriteRequest {
            offset,
            file_id,
            channel,
            remaining_bytes,
            channel_info,
            flags,
            length,
            data,
        })
    }

    /// Encodes the body with `data` right after the fixed part.
    /// Channel info (RDMA descriptors) is written after the fixed part when there is
    /// no inline data.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(WRITE_FIXED + self.data.len().max(1));
        self.encode_into(&mut w);
        w.into_vec()
    }
}

impl WriteRequest<'_> {
    /// DataOffset: right after the fixed part, or 0 when the data comes by RDMA (the
    /// request carries buffer descriptors and no data), as cifs.ko sends it; ksmbd fails
    /// an RDMA WRITE whose DataOffset or Length is not 0 with STATUS_INVALID_PARAMETER.
    fn data_offset(&self) -> u16 {
        if self.data.is_empty() && !self.channel_info.is_empty() {
            0
        } else {
            (HEADER_SIZE + WRITE_FIXED) as u16
        }
    }

    fn channel_info_fields(&self) -> (u16, u16) {
        if self.data.is_empty() {
            channel_info_fields(self.channel_info)
        } else {
            (0, 0)
        }
    }
}

/// Encodes the WRITE response body for `count` bytes written.
pub fn encode_write_response(count: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(16);
    w.u16(17).u16(0).u32(count).u32(0).u16(0).u16(0);
    w.into_vec()
}

/// Decodes the Count of a WRITE response (message starting at the header).
pub fn decode_write_response(msg: &[u8]) -> Result<u32, WireError> {
    let mut r = Reader::new(msg);
    r.seek(HEADER_SIZE)?;
    if r.u16()? != 17 {
        return Err(WireError::Invalid("StructureSize is not 17"));
    }
    r.u16()?;
    r.u32()
}

impl WriteRequest<'_> {
    /// Appends the body to `w` (client side), so a caller can build it after reserved
    /// headroom without another copy of the data. Same bytes as [`WriteRequest::encode`].
    pub fn encode_into(&self, w: &mut Writer) {
        let channel_info = self.channel_info_fields();
        self.encode_fixed(w, self.data_offset(), self.data.len() as u32, channel_info);
        if !self.data.is_empty() {
            w.bytes(self.data);
        } else if !self.channel_info.is_empty() {
            w.bytes(self.channel_info);
        } else {
            w.u8(0);
        }
    }

    /// Appends the fixed part of a request whose `data_len` (> 0) bytes of data are
    /// sent right behind it from elsewhere (the caller's buffer): the bytes of
    /// [`WriteRequest::encode_into`] with that data, less the data. `self.data` and
    /// the channel info are not written.
    pub fn encode_head_into(&self, w: &mut Writer, data_len: u32) {
        self.encode_fixed(w, (HEADER_SIZE + WRITE_FIXED) as u16, data_len, (0, 0));
    }

    /// The fixed fields (StructureSize 49 through Flags) with the given DataOffset,
    /// Length and WriteChannelInfo offset and length.
    fn encode_fixed(
        &self,
        w: &mut Writer,
        data_offset: u16,
        length: u32,
        channel_info: (u16, u16),
    ) {
        w.u16(49)
            .u16(data_offset)
            .u32(length)
            .u64(self.offset)
            .bytes(&self.file_id.to_bytes())
            .u32(self.channel)
            .u32(self.remaining_bytes)
            .u16(channel_info.0)
            .u16(channel_info.1)
            .u32(self.flags);
    }
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
    fn read_request_roundtrip() {
        let q = ReadRequest {
            length: 4096,
            offset: 8192,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            minimum_count: 5,
            ..Default::default()
        };
        let b = q.encode();
        assert_eq!(b.len(), 49);
        assert_eq!(ReadRequest::decode(&msg(&b)).unwrap(), q);
        let mut bad = b.clone();
        bad[44..46].copy_from_slice(&200u16.to_le_bytes());
        bad[46..48].copy_from_slice(&100u16.to_le_bytes());
        assert!(ReadRequest::decode(&msg(&bad)).is_err());
    }

    #[test]
    fn read_response_header() {
        let mut h = [0u8; 16];
        put_read_response_header(&mut h, 3, 0);
        let mut m = msg(&h);
        m.extend_from_slice(b"abc");
        let r = ReadResponse::decode(&m).unwrap();
        assert_eq!(r.data, b"abc");
        assert_eq!(h[2], 0x50);
    }

    #[test]
    fn write_request_bounds() {
        let q = WriteRequest {
            offset: 10,
            file_id: FileId {
                persistent: 0,
                volatile: 3,
            },
            flags: WRITEFLAG_WRITE_THROUGH,
            data: b"hello",
            length: 5,
            ..Default::default()
        };
        let b = q.encode();
        let m = msg(&b);
        let d = WriteRequest::decode(&m).unwrap();
        assert_eq!(d.data, b"hello");
        assert_eq!(d.flags, WRITEFLAG_WRITE_THROUGH);
        // Length beyond the message.
        let mut bad = b.clone();
        bad[4..8].copy_from_slice(&6u32.to_le_bytes());
        assert!(WriteRequest::decode(&msg(&bad)).is_err());
        // DataOffset inside the fixed part.
        let mut bad = b.clone();
        bad[2..4].copy_from_slice(&64u16.to_le_bytes());
        assert!(WriteRequest::decode(&msg(&bad)).is_err());
        // DataOffset huge.
        let mut bad = b;
        bad[2..4].copy_from_slice(&0xffffu16.to_le_bytes());
        assert!(WriteRequest::decode(&msg(&bad)).is_err());
        assert_eq!(
            decode_write_response(&msg(&encode_write_response(5))).unwrap(),
            5
        );
    }

    /// A WRITE whose data continues past the message (spliced): it must end exactly
    /// where the bytes kept elsewhere end.
    #[test]
    fn write_request_split() {
        let q = WriteRequest {
            offset: 10,
            data: b"hello world",
            length: 11,
            ..Default::default()
        };
        let m = msg(&q.encode());
        // All but the last 6 bytes in the message: "hello" here, 6 elsewhere.
        let head = &m[..m.len() - 6];
        let d = WriteRequest::decode_split(head, 6).unwrap();
        assert_eq!((d.data, d.length, d.offset), (&b"hello"[..], 11, 10));
        // Only the fixed part in the message.
        let d = WriteRequest::decode_split(&m[..HEADER_SIZE + 48], 11).unwrap();
        assert_eq!((d.data, d.length), (&b""[..], 11));
        // More or fewer bytes elsewhere than Length says: refused.
        assert!(WriteRequest::decode_split(head, 5).is_err());
        assert!(WriteRequest::decode_split(head, 7).is_err());
        assert!(WriteRequest::decode_split(head, usize::MAX).is_err());
        // DataOffset past what the message holds.
        let mut bad = q.encode();
        bad[2..4].copy_from_slice(&200u16.to_le_bytes());
        assert!(WriteRequest::decode_split(&msg(&bad)[..HEADER_SIZE + 48], 11).is_err());
        // A zero-length write has nothing elsewhere.
        let z = msg(&WriteRequest::default().encode());
        assert!(WriteRequest::decode_split(&z, 1).is_err());
    }
}

#[cfg(test)]
mod channel_info_tests {
    use super::*;

    fn msg(body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn rdma_read_and_write_requests_carry_descriptors() {
        let desc = [7u8; 16];
        let q = ReadRequest {
            length: 1 << 20,
            channel: CHANNEL_RDMA_V1_INVALIDATE,
            channel_info: &desc,
            ..Default::default()
        };
        let b = q.encode();
        assert_eq!(b.len(), 48 + 16);
        assert_eq!(&b[44..46], &112u16.to_le_bytes());
        assert_eq!(ReadRequest::decode(&msg(&b)).unwrap(), q);

        let w = WriteRequest {
            offset: 4096,
            channel: CHANNEL_RDMA_V1,
            remaining_bytes: 1 << 20,
            channel_info: &desc,
            ..Default::default()
        };
        let b = w.encode();
        let mut into = Writer::new();
        w.encode_into(&mut into);
        assert_eq!(into.as_slice(), &b[..]);
        let m = msg(&b);
        // Length and DataOffset are 0: the data comes by RDMA.
        assert_eq!(&b[2..8], &[0u8; 6]);
        let d = WriteRequest::decode(&m).unwrap();
        assert_eq!((d.length, d.remaining_bytes), (0, 1 << 20));
        assert_eq!(d.channel_info, &desc);
        assert!(d.data.is_empty());
    }
}

#[cfg(test)]
mod encode_into_tests {
    use super::*;

    #[test]
    fn encode_head_into_is_encode_into_less_the_data() {
        let data = b"payload";
        let req = WriteRequest {
            offset: 9,
            file_id: FileId {
                persistent: 3,
                volatile: 4,
            },
            flags: WRITEFLAG_WRITE_THROUGH,
            length: data.len() as u32,
            data,
            ..Default::default()
        };
        let mut whole = Writer::with_capacity(64);
        req.encode_into(&mut whole);
        let mut head = Writer::with_capacity(64);
        WriteRequest { data: &[], ..req }.encode_head_into(&mut head, data.len() as u32);
        let mut joined = head.into_vec();
        joined.extend_from_slice(data);
        assert_eq!(joined, whole.into_vec());
    }

    #[test]
    fn encode_into_matches_encode() {
        for data in [&b""[..], &b"payload"[..]] {
            let req = WriteRequest {
                offset: 7,
                file_id: FileId {
                    persistent: 1,
                    volatile: 2,
                },
                flags: WRITEFLAG_WRITE_THROUGH,
                length: data.len() as u32,
                data,
                ..Default::default()
            };
            let mut w = Writer::new();
            w.bytes(&[0xAA; 3]);
            req.encode_into(&mut w);
            assert_eq!(&w.as_slice()[3..], &req.encode()[..]);
        }
    }
}
