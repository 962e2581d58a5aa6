//! MS-SMBD wire formats: Negotiate Request/Response, Data Transfer header and
//! Buffer Descriptor V1 ([MS-SMBD] 2.2). All fields are little-endian.
//!
//! Decoders check every length and offset and return [`PduError`]; they never
//! panic and never allocate from a wire length without a bound.

use smbx_wire::{NtStatus, Reader, WireError};
use thiserror::Error;

/// The only SMB Direct protocol version: 1.0, encoded 0x0100.
pub const SMBD_VERSION: u16 = 0x0100;
/// Size of a Negotiate Request.
pub const NEGOTIATE_REQUEST_LEN: usize = 20;
/// Size of a Negotiate Response.
pub const NEGOTIATE_RESPONSE_LEN: usize = 32;
/// Size of a Data Transfer message without payload (no Padding field).
pub const DATA_HEADER_MIN_LEN: usize = 20;
/// Offset of the payload in the messages this crate sends (header + Padding).
pub const DATA_OFFSET: usize = 24;
/// Flag: the sender asks the peer to answer promptly (keepalive).
pub const FLAG_RESPONSE_REQUESTED: u16 = 0x0001;
/// Smallest MaxReceiveSize a peer may announce.
pub const MIN_RECEIVE_SIZE: u32 = 128;
/// Smallest MaxFragmentedSize a peer may announce.
pub const MIN_FRAGMENTED_SIZE: u32 = 131_072;
/// Size of one Buffer Descriptor V1.
pub const BUFFER_DESCRIPTOR_V1_LEN: usize = 16;

/// Why a received PDU was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PduError {
    /// Fewer bytes than the fixed part of the message.
    #[error("message too short: {len} bytes, need {need}")]
    TooShort {
        /// Bytes received.
        len: usize,
        /// Bytes required.
        need: usize,
    },
    /// CreditsRequested was zero.
    #[error("CreditsRequested is zero")]
    ZeroCreditsRequested,
    /// CreditsGranted was zero in a Negotiate Response.
    #[error("CreditsGranted is zero")]
    ZeroCreditsGranted,
    /// The peer's version range does not include 1.0 (or is inverted).
    #[error("unsupported version range {min:#06x}..={max:#06x}")]
    UnsupportedVersion {
        /// Peer's MinVersion.
        min: u16,
        /// Peer's MaxVersion (or NegotiatedVersion in a response).
        max: u16,
    },
    /// MaxReceiveSize below 128.
    #[error("MaxReceiveSize {0} < 128")]
    MaxReceiveSizeTooSmall(u32),
    /// MaxFragmentedSize below 131072.
    #[error("MaxFragmentedSize {0} < 131072")]
    MaxFragmentedSizeTooSmall(u32),
    /// The Negotiate Response carried a failure status.
    #[error("negotiate failed with status {0:?}")]
    NegotiateStatus(NtStatus),
    /// DataOffset not a multiple of 8.
    #[error("DataOffset {0} is not 8-byte aligned")]
    MisalignedDataOffset(u32),
    /// DataOffset/DataLength point outside the message or into the header.
    #[error("payload {offset}+{length} outside a {len}-byte message")]
    PayloadOutOfBounds {
        /// DataOffset.
        offset: u32,
        /// DataLength.
        length: u32,
        /// Message length.
        len: usize,
    },
    /// RemainingDataLength + DataLength exceeds the receiver's maximum.
    #[error("fragmented message of {total} bytes exceeds maximum {max}")]
    FragmentedTooLarge {
        /// RemainingDataLength + DataLength (saturated).
        total: u64,
        /// The receiver's max fragmented receive size.
        max: u32,
    },
    /// A message without payload announced remaining data.
    #[error("empty message with RemainingDataLength {0}")]
    EmptyWithRemaining(u32),
    /// A buffer descriptor list whose length is not a multiple of 16.
    #[error("buffer descriptor list of {0} bytes is not a multiple of 16")]
    DescriptorListLength(usize),
}

impl From<WireError> for PduError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated { offset, needed } => PduError::TooShort {
                len: offset,
                need: offset.saturating_add(needed),
            },
            // Reader only produces Truncated; keep a sane mapping anyway.
            WireError::Invalid(_) => PduError::TooShort { len: 0, need: 0 },
        }
    }
}

/// [MS-SMBD] 2.2.1 Negotiate Request (client → server, 20 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NegotiateRequest {
    /// Lowest version the client supports.
    pub min_version: u16,
    /// Highest version the client supports.
    pub max_version: u16,
    /// Credits the client asks the server to grant (its SendCreditTarget).
    pub credits_requested: u16,
    /// The client's MaxSendSize.
    pub preferred_send_size: u32,
    /// The largest message the client can receive.
    pub max_receive_size: u32,
    /// The largest upper-layer message the client can reassemble.
    pub max_fragmented_size: u32,
}

impl NegotiateRequest {
    /// Encodes the 20-byte request.
    pub fn encode(&self) -> [u8; NEGOTIATE_REQUEST_LEN] {
        let mut b = [0u8; NEGOTIATE_REQUEST_LEN];
        b[0..2].copy_from_slice(&self.min_version.to_le_bytes());
        b[2..4].copy_from_slice(&self.max_version.to_le_bytes());
        // 4..6 Reserved = 0
        b[6..8].copy_from_slice(&self.credits_requested.to_le_bytes());
        b[8..12].copy_from_slice(&self.preferred_send_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.max_receive_size.to_le_bytes());
        b[16..20].copy_from_slice(&self.max_fragmented_size.to_le_bytes());
        b
    }

    /// Decodes the fields without judging them (only the length is checked).
    pub fn parse(buf: &[u8]) -> Result<Self, PduError> {
        if buf.len() < NEGOTIATE_REQUEST_LEN {
            return Err(PduError::TooShort {
                len: buf.len(),
                need: NEGOTIATE_REQUEST_LEN,
            });
        }
        let mut r = Reader::new(buf);
        let min_version = r.u16()?;
        let max_version = r.u16()?;
        let _reserved = r.u16()?;
        Ok(NegotiateRequest {
            min_version,
            max_version,
            credits_requested: r.u16()?,
            preferred_send_size: r.u32()?,
            max_receive_size: r.u32()?,
            max_fragmented_size: r.u32()?,
        })
    }

    /// Decodes and applies the server-side checks of [MS-SMBD] 3.3.5.2, in
    /// order: length, version range, CreditsRequested, MaxReceiveSize,
    /// MaxFragmentedSize. A version error should be answered with a
    /// STATUS_NOT_SUPPORTED response ([`NegotiateResponse::not_supported`]).
    pub fn decode(buf: &[u8]) -> Result<Self, PduError> {
        let req = Self::parse(buf)?;
        if req.min_version > SMBD_VERSION
            || req.max_version < SMBD_VERSION
            || req.min_version > req.max_version
        {
            return Err(PduError::UnsupportedVersion {
                min: req.min_version,
                max: req.max_version,
            });
        }
        if req.credits_requested == 0 {
            return Err(PduError::ZeroCreditsRequested);
        }
        if req.max_receive_size < MIN_RECEIVE_SIZE {
            return Err(PduError::MaxReceiveSizeTooSmall(req.max_receive_size));
        }
        if req.max_fragmented_size < MIN_FRAGMENTED_SIZE {
            return Err(PduError::MaxFragmentedSizeTooSmall(req.max_fragmented_size));
        }
        Ok(req)
    }
}

/// [MS-SMBD] 2.2.2 Negotiate Response (server → client, 32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NegotiateResponse {
    /// Lowest version the server supports.
    pub min_version: u16,
    /// Highest version the server supports.
    pub max_version: u16,
    /// The version chosen (0x0100), or 0 on failure.
    pub negotiated_version: u16,
    /// The server's SendCreditTarget.
    pub credits_requested: u16,
    /// Credits granted to the client.
    pub credits_granted: u16,
    /// STATUS_SUCCESS or the failure.
    pub status: NtStatus,
    /// Largest RDMA Read/Write the server performs for one request.
    pub max_read_write_size: u32,
    /// The server's send size (already clamped to the client's MaxReceiveSize).
    pub preferred_send_size: u32,
    /// The largest message the server can receive.
    pub max_receive_size: u32,
    /// The largest upper-layer message the server can reassemble.
    pub max_fragmented_size: u32,
}

impl NegotiateResponse {
    /// The failure response for a client whose version range excludes 1.0.
    pub fn not_supported() -> Self {
        NegotiateResponse {
            min_version: SMBD_VERSION,
            max_version: SMBD_VERSION,
            negotiated_version: 0,
            credits_requested: 0,
            credits_granted: 0,
            status: NtStatus::NOT_SUPPORTED,
            max_read_write_size: 0,
            preferred_send_size: 0,
            max_receive_size: 0,
            max_fragmented_size: 0,
        }
    }

    /// Encodes the 32-byte response.
    pub fn encode(&self) -> [u8; NEGOTIATE_RESPONSE_LEN] {
        let mut b = [0u8; NEGOTIATE_RESPONSE_LEN];
        b[0..2].copy_from_slice(&self.min_version.to_le_bytes());
        b[2..4].copy_from_slice(&self.max_version.to_le_bytes());
        b[4..6].copy_from_slice(&self.negotiated_version.to_le_bytes());
        // 6..8 Reserved = 0
        b[8..10].copy_from_slice(&self.credits_requested.to_le_bytes());
        b[10..12].copy_from_slice(&self.credits_granted.to_le_bytes());
        b[12..16].copy_from_slice(&self.status.0.to_le_bytes());
        b[16..20].copy_from_slice(&self.max_read_write_size.to_le_bytes());
        b[20..24].copy_from_slice(&self.preferred_send_size.to_le_bytes());
        b[24..28].copy_from_slice(&self.max_receive_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.max_fragmented_size.to_le_bytes());
        b
    }

    /// Decodes the fields without judging them (only the length is checked).
    pub fn parse(buf: &[u8]) -> Result<Self, PduError> {
        if buf.len() < NEGOTIATE_RESPONSE_LEN {
            return Err(PduError::TooShort {
                len: buf.len(),
                need: NEGOTIATE_RESPONSE_LEN,
            });
        }
        let mut r = Reader::new(buf);
        let min_version = r.u16()?;
        let max_version = r.u16()?;
        let negotiated_version = r.u16()?;
        let _reserved = r.u16()?;
        Ok(NegotiateResponse {
            min_version,
            max_version,
            negotiated_version,
            credits_requested: r.u16()?,
            credits_granted: r.u16()?,
            status: NtStatus(r.u32()?),
            max_read_write_size: r.u32()?,
            preferred_send_size: r.u32()?,
            max_receive_size: r.u32()?,
            max_fragmented_size: r.u32()?,
        })
    }

    /// Decodes and applies the client-side checks of [MS-SMBD] 3.2.5.2, in
    /// order: length, status, negotiated version, CreditsRequested,
    /// CreditsGranted, MaxReceiveSize, MaxFragmentedSize. (The check of
    /// PreferredSendSize against the client's own receive size needs the
    /// client's configuration and lives in the connection.)
    pub fn decode(buf: &[u8]) -> Result<Self, PduError> {
        let rsp = Self::parse(buf)?;
        if rsp.status != NtStatus::SUCCESS {
            return Err(PduError::NegotiateStatus(rsp.status));
        }
        if rsp.negotiated_version != SMBD_VERSION {
            return Err(PduError::UnsupportedVersion {
                min: rsp.min_version,
                max: rsp.negotiated_version,
            });
        }
        if rsp.credits_requested == 0 {
            return Err(PduError::ZeroCreditsRequested);
        }
        if rsp.credits_granted == 0 {
            return Err(PduError::ZeroCreditsGranted);
        }
        if rsp.max_receive_size < MIN_RECEIVE_SIZE {
            return Err(PduError::MaxReceiveSizeTooSmall(rsp.max_receive_size));
        }
        if rsp.max_fragmented_size < MIN_FRAGMENTED_SIZE {
            return Err(PduError::MaxFragmentedSizeTooSmall(rsp.max_fragmented_size));
        }
        Ok(rsp)
    }
}

/// [MS-SMBD] 2.2.3 Data Transfer message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataHeader {
    /// The sender's SendCreditTarget.
    pub credits_requested: u16,
    /// Credits newly granted to the receiver (incremental).
    pub credits_granted: u16,
    /// [`FLAG_RESPONSE_REQUESTED`] or 0.
    pub flags: u16,
    /// Bytes of the upper-layer message that follow this fragment.
    pub remaining_data_length: u32,
    /// Offset of the payload from the start of the message (0 if none).
    pub data_offset: u32,
    /// Bytes of payload in this message.
    pub data_length: u32,
}

impl DataHeader {
    /// True if the sender asked for a prompt reply.
    pub fn response_requested(&self) -> bool {
        self.flags & FLAG_RESPONSE_REQUESTED != 0
    }

    /// Writes the header for a message carrying `data_length` payload bytes
    /// at [`DATA_OFFSET`] (or the 20-byte empty form when `data_length` is
    /// 0) into the front of `out`; returns the header length (20 or 24).
    /// `out` must hold at least 24 bytes.
    pub fn write(
        out: &mut [u8],
        credits_requested: u16,
        credits_granted: u16,
        flags: u16,
        remaining_data_length: u32,
        data_length: u32,
    ) -> usize {
        let offset: u32 = if data_length == 0 {
            0
        } else {
            DATA_OFFSET as u32
        };
        out[0..2].copy_from_slice(&credits_requested.to_le_bytes());
        out[2..4].copy_from_slice(&credits_granted.to_le_bytes());
        out[4..6].copy_from_slice(&flags.to_le_bytes());
        out[6..8].copy_from_slice(&0u16.to_le_bytes());
        out[8..12].copy_from_slice(&remaining_data_length.to_le_bytes());
        out[12..16].copy_from_slice(&offset.to_le_bytes());
        out[16..20].copy_from_slice(&data_length.to_le_bytes());
        if data_length == 0 {
            DATA_HEADER_MIN_LEN
        } else {
            out[20..24].copy_from_slice(&0u32.to_le_bytes());
            DATA_OFFSET
        }
    }

    /// Encodes a whole message (header plus payload) into a new vector.
    pub fn encode_message(&self, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; DATA_OFFSET + payload.len()];
        let n = Self::write(
            &mut v,
            self.credits_requested,
            self.credits_granted,
            self.flags,
            self.remaining_data_length,
            payload.len() as u32,
        );
        v.truncate(n);
        v.extend_from_slice(payload);
        v
    }

    /// Decodes a Data Transfer message and applies the receiver's checks of
    /// [MS-SMBD] 3.1.5.7: length >= 20, CreditsRequested != 0, DataOffset a
    /// multiple of 8 and the payload inside the message (not overlapping the
    /// 20-byte header), RemainingDataLength + DataLength <=
    /// `max_fragmented_receive`, and no RemainingDataLength without payload.
    /// Returns the header and the payload slice.
    pub fn decode(buf: &[u8], max_fragmented_receive: u32) -> Result<(Self, &[u8]), PduError> {
        if buf.len() < DATA_HEADER_MIN_LEN {
            return Err(PduError::TooShort {
                len: buf.len(),
                need: DATA_HEADER_MIN_LEN,
            });
        }
        let mut r = Reader::new(buf);
        let credits_requested = r.u16()?;
        let credits_granted = r.u16()?;
        let flags = r.u16()?;
        let _reserved = r.u16()?;
        let remaining_data_length = r.u32()?;
        let data_offset = r.u32()?;
        let data_length = r.u32()?;
        let h = DataHeader {
            credits_requested,
            credits_granted,
            flags,
            remaining_data_length,
            data_offset,
            data_length,
        };
        if credits_requested == 0 {
            return Err(PduError::ZeroCreditsRequested);
        }
        let total = u64::from(remaining_data_length) + u64::from(data_length);
        if total > u64::from(max_fragmented_receive) {
            return Err(PduError::FragmentedTooLarge {
                total,
                max: max_fragmented_receive,
            });
        }
        if data_length == 0 {
            if remaining_data_length != 0 {
                return Err(PduError::EmptyWithRemaining(remaining_data_length));
            }
            return Ok((h, &[]));
        }
        if data_offset % 8 != 0 {
            return Err(PduError::MisalignedDataOffset(data_offset));
        }
        let oob = PduError::PayloadOutOfBounds {
            offset: data_offset,
            length: data_length,
            len: buf.len(),
        };
        if (data_offset as usize) < DATA_HEADER_MIN_LEN {
            return Err(oob);
        }
        let payload = smbx_wire::codec::slice_at(buf, data_offset as usize, data_length as usize)
            .map_err(|_| oob)?;
        Ok((h, payload))
    }
}

/// [MS-SMBD] 2.2.3.1 Buffer Descriptor V1: one registered remote buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferDescriptorV1 {
    /// Offset (tagged offset / remote virtual address) of the buffer.
    pub offset: u64,
    /// The STag / rkey that grants access to it.
    pub token: u32,
    /// Its length in bytes.
    pub length: u32,
}

impl BufferDescriptorV1 {
    /// Encodes one 16-byte descriptor.
    pub fn encode(&self) -> [u8; BUFFER_DESCRIPTOR_V1_LEN] {
        let mut b = [0u8; BUFFER_DESCRIPTOR_V1_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.token.to_le_bytes());
        b[12..16].copy_from_slice(&self.length.to_le_bytes());
        b
    }

    /// Encodes a list (the SMB2 READ/WRITE channel info).
    pub fn encode_list(list: &[BufferDescriptorV1]) -> Vec<u8> {
        let mut v = Vec::with_capacity(list.len() * BUFFER_DESCRIPTOR_V1_LEN);
        for d in list {
            v.extend_from_slice(&d.encode());
        }
        v
    }

    /// Decodes a list; the length must be a non-zero multiple of 16. The
    /// allocation is bounded by the input length.
    pub fn decode_list(buf: &[u8]) -> Result<Vec<BufferDescriptorV1>, PduError> {
        if buf.is_empty() || buf.len() % BUFFER_DESCRIPTOR_V1_LEN != 0 {
            return Err(PduError::DescriptorListLength(buf.len()));
        }
        let mut r = Reader::new(buf);
        let mut v = Vec::with_capacity(buf.len() / BUFFER_DESCRIPTOR_V1_LEN);
        while r.remaining() > 0 {
            v.push(BufferDescriptorV1 {
                offset: r.u64()?,
                token: r.u32()?,
                length: r.u32()?,
            });
        }
        Ok(v)
    }

    /// Sum of the lengths of a list (u64, cannot overflow for any list a
    /// decoder produced from a buffer below 2^36 bytes).
    pub fn total_length(list: &[BufferDescriptorV1]) -> u64 {
        list.iter().map(|d| u64::from(d.length)).sum()
    }
}
