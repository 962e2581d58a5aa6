//! SESSION_SETUP and LOGOFF ([MS-SMB2] 2.2.5–2.2.8).

use crate::codec::{slice_at, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;

/// Request flag: bind this session to a new channel.
pub const SESSION_FLAG_BINDING: u8 = 0x01;
/// Response session flag: guest.
pub const SESSION_FLAG_IS_GUEST: u16 = 0x0001;
/// Response session flag: anonymous.
pub const SESSION_FLAG_IS_NULL: u16 = 0x0002;
/// Response session flag: the session must encrypt.
pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x0004;

/// A SESSION_SETUP request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSetupRequest {
    /// Flags (SESSION_FLAG_BINDING).
    pub flags: u8,
    /// SecurityMode.
    pub security_mode: u8,
    /// Capabilities.
    pub capabilities: u32,
    /// Channel (must be 0).
    pub channel: u32,
    /// PreviousSessionId.
    pub previous_session_id: u64,
    /// The GSS token.
    pub security_buffer: Vec<u8>,
}

impl SessionSetupRequest {
    /// Decodes from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<SessionSetupRequest, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 25 {
            return Err(WireError::Invalid("session setup StructureSize"));
        }
        let flags = r.u8()?;
        let security_mode = r.u8()?;
        let capabilities = r.u32()?;
        let channel = r.u32()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let previous_session_id = r.u64()?;
        let security_buffer = if len == 0 {
            Vec::new()
        } else {
            slice_at(msg, off, len)?.to_vec()
        };
        Ok(SessionSetupRequest {
            flags,
            security_mode,
            capabilities,
            channel,
            previous_session_id,
            security_buffer,
        })
    }

    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u16(25)
            .u8(self.flags)
            .u8(self.security_mode)
            .u32(self.capabilities)
            .u32(self.channel)
            .u16((HEADER_SIZE + 24) as u16)
            .u16(self.security_buffer.len() as u16)
            .u64(self.previous_session_id)
            .bytes(&self.security_buffer);
        if self.security_buffer.is_empty() {
            w.u8(0);
        }
        w.into_vec()
    }
}

/// A SESSION_SETUP response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSetupResponse {
    /// SessionFlags.
    pub session_flags: u16,
    /// The GSS token.
    pub security_buffer: Vec<u8>,
}

impl SessionSetupResponse {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u16(9)
            .u16(self.session_flags)
            .u16(if self.security_buffer.is_empty() {
                0
            } else {
                (HEADER_SIZE + 8) as u16
            })
            .u16(self.security_buffer.len() as u16)
            .bytes(&self.security_buffer);
        if self.security_buffer.is_empty() {
            w.u8(0);
        }
        w.into_vec()
    }

    /// Decodes from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<SessionSetupResponse, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 9 {
            return Err(WireError::Invalid("session setup response StructureSize"));
        }
        let session_flags = r.u16()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let security_buffer = if len == 0 {
            Vec::new()
        } else {
            slice_at(msg, off, len)?.to_vec()
        };
        Ok(SessionSetupResponse {
            session_flags,
            security_buffer,
        })
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
    fn round_trips() {
        let req = SessionSetupRequest {
            flags: SESSION_FLAG_BINDING,
            security_mode: 1,
            capabilities: 1,
            channel: 0,
            previous_session_id: 42,
            security_buffer: vec![0x60, 0x01, 0x02],
        };
        assert_eq!(
            SessionSetupRequest::decode(&msg(&req.encode())).unwrap(),
            req
        );
        let resp = SessionSetupResponse {
            session_flags: SESSION_FLAG_IS_GUEST,
            security_buffer: vec![0xa1, 3],
        };
        assert_eq!(
            SessionSetupResponse::decode(&msg(&resp.encode())).unwrap(),
            resp
        );
    }

    #[test]
    fn buffer_outside_message_is_error() {
        let req = SessionSetupRequest {
            security_buffer: vec![1, 2, 3],
            ..Default::default()
        };
        let mut m = msg(&req.encode());
        m[HEADER_SIZE + 14] = 0xff; // length low byte
        assert!(SessionSetupRequest::decode(&m).is_err());
        let good = msg(&req.encode());
        for n in 0..good.len() {
            assert!(SessionSetupRequest::decode(&good[..n]).is_err());
        }
    }
}
