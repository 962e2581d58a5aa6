//! TREE_CONNECT and TREE_DISCONNECT ([MS-SMB2] 2.2.9–2.2.12).

use crate::codec::{from_utf16le, slice_at, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::AccessMask;

/// Tree connect flag (3.1.1): cluster reconnect.
pub const TREE_CONNECT_FLAG_CLUSTER_RECONNECT: u16 = 0x0001;
/// Tree connect flag (3.1.1): redirect to owner.
pub const TREE_CONNECT_FLAG_REDIRECT_TO_OWNER: u16 = 0x0002;
/// Tree connect flag (3.1.1): a TREE_CONNECT_REQUEST_EXTENSION is present.
pub const TREE_CONNECT_FLAG_EXTENSION_PRESENT: u16 = 0x0004;

/// Share type: disk.
pub const SHARE_TYPE_DISK: u8 = 0x01;
/// Share type: named pipe (IPC$).
pub const SHARE_TYPE_PIPE: u8 = 0x02;
/// Share type: printer.
pub const SHARE_TYPE_PRINT: u8 = 0x03;

/// Share flag: manual caching (the value 0 of the caching field).
pub const SHAREFLAG_MANUAL_CACHING: u32 = 0x0000_0000;
/// Share flag: no caching.
pub const SHAREFLAG_NO_CACHING: u32 = 0x0000_0030;
/// Share flag: access-based directory enumeration.
pub const SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM: u32 = 0x0000_0800;
/// Share flag: encrypt data.
pub const SHAREFLAG_ENCRYPT_DATA: u32 = 0x0000_8000;

/// Share capability: DFS.
pub const SHARE_CAP_DFS: u32 = 0x0000_0008;
/// Share capability: continuous availability.
pub const SHARE_CAP_CONTINUOUS_AVAILABILITY: u32 = 0x0000_0010;

/// Longest share path accepted, in bytes of UTF-16.
const MAX_PATH_BYTES: usize = 2048;

/// A TREE_CONNECT request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeConnectRequest {
    /// Flags (3.1.1), reserved before.
    pub flags: u16,
    /// The UNC path, e.g. `\\server\share`.
    pub path: String,
}

impl TreeConnectRequest {
    /// Decodes from a message starting at the SMB2 header. A 3.1.1 request
    /// extension is tolerated; its tree connect contexts are not interpreted.
    pub fn decode(msg: &[u8]) -> Result<TreeConnectRequest, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 9 {
            return Err(WireError::Invalid("tree connect StructureSize"));
        }
        let flags = r.u16()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        if len > MAX_PATH_BYTES {
            return Err(WireError::Invalid("tree connect path too long"));
        }
        let mut raw = slice_at(msg, off, len)?;
        // Some clients send a trailing NUL.
        while let [rest @ .., 0, 0] = raw {
            raw = rest;
        }
        Ok(TreeConnectRequest {
            flags,
            path: from_utf16le(raw)?,
        })
    }

    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let path = crate::codec::utf16le(&self.path);
        let mut w = Writer::new();
        w.u16(9)
            .u16(self.flags)
            .u16((HEADER_SIZE + 8) as u16)
            .u16(path.len() as u16)
            .bytes(&path);
        if path.is_empty() {
            w.u8(0);
        }
        w.into_vec()
    }

    /// The share name part of the path (`share` of `\\server\share`), if well formed.
    pub fn share_name(&self) -> Option<&str> {
        let p = self.path.strip_prefix("\\\\")?;
        let (_server, share) = p.split_once('\\')?;
        if share.is_empty() || share.contains('\\') {
            return None;
        }
        Some(share)
    }
}

/// A TREE_CONNECT response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeConnectResponse {
    /// ShareType.
    pub share_type: u8,
    /// ShareFlags.
    pub share_flags: u32,
    /// Capabilities.
    pub capabilities: u32,
    /// MaximalAccess.
    pub maximal_access: AccessMask,
}

impl TreeConnectResponse {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(16);
        w.u16(16)
            .u8(self.share_type)
            .u8(0)
            .u32(self.share_flags)
            .u32(self.capabilities)
            .u32(self.maximal_access.bits());
        w.into_vec()
    }

    /// Decodes from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<TreeConnectResponse, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 16 {
            return Err(WireError::Invalid("tree connect response StructureSize"));
        }
        let share_type = r.u8()?;
        r.u8()?;
        Ok(TreeConnectResponse {
            share_type,
            share_flags: r.u32()?,
            capabilities: r.u32()?,
            maximal_access: AccessMask(r.u32()?),
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
    fn round_trip_and_share_name() {
        let req = TreeConnectRequest {
            flags: 0,
            path: "\\\\127.0.0.1\\Public".into(),
        };
        let d = TreeConnectRequest::decode(&msg(&req.encode())).unwrap();
        assert_eq!(d, req);
        assert_eq!(d.share_name(), Some("Public"));
        let bad = TreeConnectRequest {
            flags: 0,
            path: "share".into(),
        };
        assert_eq!(bad.share_name(), None);
        let resp = TreeConnectResponse {
            share_type: SHARE_TYPE_PIPE,
            share_flags: SHAREFLAG_NO_CACHING,
            capabilities: 0,
            maximal_access: AccessMask::FILE_ALL_ACCESS,
        };
        assert_eq!(
            TreeConnectResponse::decode(&msg(&resp.encode())).unwrap(),
            resp
        );
    }

    #[test]
    fn trailing_nul_and_bad_lengths() {
        let mut body = Vec::new();
        let p = crate::codec::utf16le("\\\\s\\IPC$\0");
        body.extend_from_slice(&9u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&72u16.to_le_bytes());
        body.extend_from_slice(&(p.len() as u16).to_le_bytes());
        body.extend_from_slice(&p);
        let m = msg(&body);
        assert_eq!(
            TreeConnectRequest::decode(&m).unwrap().share_name(),
            Some("IPC$")
        );
        let mut odd = m.clone();
        odd[HEADER_SIZE + 6] = 3;
        assert!(TreeConnectRequest::decode(&odd).is_err());
        let mut far = m.clone();
        far[HEADER_SIZE + 4] = 0xff;
        assert!(TreeConnectRequest::decode(&far).is_err());
    }
}
