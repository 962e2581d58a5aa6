//! SMB2 NEGOTIATE request and response, with the SMB 3.1.1 negotiate contexts
//! ([MS-SMB2] 2.2.3, 2.2.4).
//!
//! Decoders take the whole message starting at the SMB2 header, because the
//! negotiate context and security buffer offsets are relative to the header.
//! Encoders produce the body only (the bytes after the 64-byte header).

use crate::codec::{slice_at, Reader, WireError, Writer};
use crate::header::HEADER_SIZE;
use crate::Dialect;

/// Security mode: signing enabled.
pub const SECURITY_SIGNING_ENABLED: u16 = 0x0001;
/// Security mode: signing required.
pub const SECURITY_SIGNING_REQUIRED: u16 = 0x0002;

/// Capability: DFS.
pub const CAP_DFS: u32 = 0x0000_0001;
/// Capability: leasing.
pub const CAP_LEASING: u32 = 0x0000_0002;
/// Capability: multi-credit (large MTU) operations.
pub const CAP_LARGE_MTU: u32 = 0x0000_0004;
/// Capability: multichannel.
pub const CAP_MULTI_CHANNEL: u32 = 0x0000_0008;
/// Capability: persistent handles.
pub const CAP_PERSISTENT_HANDLES: u32 = 0x0000_0010;
/// Capability: directory leasing.
pub const CAP_DIRECTORY_LEASING: u32 = 0x0000_0020;
/// Capability: encryption (3.0 / 3.0.2; 3.1.1 uses the encryption context).
pub const CAP_ENCRYPTION: u32 = 0x0000_0040;

/// Context type: SMB2_PREAUTH_INTEGRITY_CAPABILITIES.
pub const CTX_PREAUTH_INTEGRITY: u16 = 0x0001;
/// Context type: SMB2_ENCRYPTION_CAPABILITIES.
pub const CTX_ENCRYPTION: u16 = 0x0002;
/// Context type: SMB2_COMPRESSION_CAPABILITIES.
pub const CTX_COMPRESSION: u16 = 0x0003;
/// Context type: SMB2_NETNAME_NEGOTIATE_CONTEXT_ID.
pub const CTX_NETNAME: u16 = 0x0005;
/// Context type: SMB2_TRANSPORT_CAPABILITIES.
pub const CTX_TRANSPORT: u16 = 0x0006;
/// Context type: SMB2_RDMA_TRANSFORM_CAPABILITIES.
pub const CTX_RDMA_TRANSFORM: u16 = 0x0007;
/// Context type: SMB2_SIGNING_CAPABILITIES.
pub const CTX_SIGNING: u16 = 0x0008;

/// Preauth integrity hash algorithm: SHA-512.
pub const HASH_SHA512: u16 = 0x0001;

/// Cipher: AES-128-CCM.
pub const CIPHER_AES128_CCM: u16 = 0x0001;
/// Cipher: AES-128-GCM.
pub const CIPHER_AES128_GCM: u16 = 0x0002;
/// Cipher: AES-256-CCM.
pub const CIPHER_AES256_CCM: u16 = 0x0003;
/// Cipher: AES-256-GCM.
pub const CIPHER_AES256_GCM: u16 = 0x0004;

/// Signing algorithm: HMAC-SHA256.
pub const SIGNING_HMAC_SHA256: u16 = 0x0000;
/// Signing algorithm: AES-CMAC.
pub const SIGNING_AES_CMAC: u16 = 0x0001;
/// Signing algorithm: AES-GMAC.
pub const SIGNING_AES_GMAC: u16 = 0x0002;

/// Upper bound on dialects accepted in one request (the protocol defines five).
const MAX_DIALECTS: usize = 64;
/// Upper bound on list entries inside one context.
const MAX_CONTEXT_LIST: usize = 64;

/// One negotiate context (3.1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiateContext {
    /// Preauth integrity: hash algorithm ids and salt.
    PreauthIntegrity {
        /// Hash algorithm ids.
        hash_algorithms: Vec<u16>,
        /// Salt.
        salt: Vec<u8>,
    },
    /// Encryption: cipher ids, in preference order.
    Encryption {
        /// Cipher ids.
        ciphers: Vec<u16>,
    },
    /// Compression: flags and algorithm ids.
    Compression {
        /// Flags.
        flags: u32,
        /// Algorithm ids.
        algorithms: Vec<u16>,
    },
    /// Net name: the server name the client used (UTF-16LE, raw).
    NetName(Vec<u8>),
    /// Transport capabilities flags.
    Transport {
        /// Flags.
        flags: u32,
    },
    /// RDMA transform ids.
    RdmaTransform {
        /// Transform ids.
        ids: Vec<u16>,
    },
    /// Signing algorithm ids, in preference order.
    Signing {
        /// Algorithm ids.
        algorithms: Vec<u16>,
    },
    /// A context type this crate does not know; kept raw.
    Unknown {
        /// ContextType.
        context_type: u16,
        /// Data.
        data: Vec<u8>,
    },
}

impl NegotiateContext {
    /// The wire ContextType.
    pub fn context_type(&self) -> u16 {
        match self {
            NegotiateContext::PreauthIntegrity { .. } => CTX_PREAUTH_INTEGRITY,
            NegotiateContext::Encryption { .. } => CTX_ENCRYPTION,
            NegotiateContext::Compression { .. } => CTX_COMPRESSION,
            NegotiateContext::NetName(_) => CTX_NETNAME,
            NegotiateContext::Transport { .. } => CTX_TRANSPORT,
            NegotiateContext::RdmaTransform { .. } => CTX_RDMA_TRANSFORM,
            NegotiateContext::Signing { .. } => CTX_SIGNING,
            NegotiateContext::Unknown { context_type, .. } => *context_type,
        }
    }

    fn decode_data(context_type: u16, data: &[u8]) -> Result<NegotiateContext, WireError> {
        let mut r = Reader::new(data);
        Ok(match context_type {
            CTX_PREAUTH_INTEGRITY => {
                let count = r.u16()? as usize;
                let salt_len = r.u16()? as usize;
                if count == 0 {
                    return Err(WireError::Invalid("preauth: no hash algorithms"));
                }
                let hash_algorithms = u16_list(&mut r, count)?;
                let salt = r.bytes(salt_len)?.to_vec();
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms,
                    salt,
                }
            }
            CTX_ENCRYPTION => {
                let count = r.u16()? as usize;
                if count == 0 {
                    return Err(WireError::Invalid("encryption: no ciphers"));
                }
                NegotiateContext::Encryption {
                    ciphers: u16_list(&mut r, count)?,
                }
            }
            CTX_COMPRESSION => {
                let count = r.u16()? as usize;
                r.u16()?; // padding
                let flags = r.u32()?;
                NegotiateContext::Compression {
                    flags,
                    algorithms: u16_list(&mut r, count)?,
                }
            }
            CTX_NETNAME => NegotiateContext::NetName(data.to_vec()),
            CTX_TRANSPORT => NegotiateContext::Transport { flags: r.u32()? },
            CTX_RDMA_TRANSFORM => {
                let count = r.u16()? as usize;
                r.u16()?;
                r.u32()?;
                NegotiateContext::RdmaTransform {
                    ids: u16_list(&mut r, count)?,
                }
            }
            CTX_SIGNING => {
                let count = r.u16()? as usize;
                if count == 0 {
                    return Err(WireError::Invalid("signing: no algorithms"));
                }
                NegotiateContext::Signing {
                    algorithms: u16_list(&mut r, count)?,
                }
            }
            other => NegotiateContext::Unknown {
                context_type: other,
                data: data.to_vec(),
            },
        })
    }

    fn encode_data(&self, w: &mut Writer) {
        match self {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms,
                salt,
            } => {
                w.u16(hash_algorithms.len() as u16).u16(salt.len() as u16);
                hash_algorithms.iter().for_each(|a| {
                    w.u16(*a);
                });
                w.bytes(salt);
            }
            NegotiateContext::Encryption { ciphers } => {
                w.u16(ciphers.len() as u16);
                ciphers.iter().for_each(|a| {
                    w.u16(*a);
                });
            }
            NegotiateContext::Compression { flags, algorithms } => {
                w.u16(algorithms.len() as u16).u16(0).u32(*flags);
                algorithms.iter().for_each(|a| {
                    w.u16(*a);
                });
            }
            NegotiateContext::NetName(name) => {
                w.bytes(name);
            }
            NegotiateContext::Transport { flags } => {
                w.u32(*flags);
            }
            NegotiateContext::RdmaTransform { ids } => {
                w.u16(ids.len() as u16).u16(0).u32(0);
                ids.iter().for_each(|a| {
                    w.u16(*a);
                });
            }
            NegotiateContext::Signing { algorithms } => {
                w.u16(algorithms.len() as u16);
                algorithms.iter().for_each(|a| {
                    w.u16(*a);
                });
            }
            NegotiateContext::Unknown { data, .. } => {
                w.bytes(data);
            }
        }
    }
}

fn u16_list(r: &mut Reader<'_>, count: usize) -> Result<Vec<u16>, WireError> {
    if count > MAX_CONTEXT_LIST {
        return Err(WireError::Invalid("context list too long"));
    }
    (0..count).map(|_| r.u16()).collect()
}

/// Decodes `count` negotiate contexts starting at `offset` of `msg` (8-byte aligned
/// each). Contexts whose data fail to parse are an error; unknown types are kept raw.
pub fn decode_contexts(
    msg: &[u8],
    offset: usize,
    count: usize,
) -> Result<Vec<NegotiateContext>, WireError> {
    if count > MAX_CONTEXT_LIST {
        return Err(WireError::Invalid("too many negotiate contexts"));
    }
    let mut out = Vec::with_capacity(count);
    let mut pos = offset;
    for i in 0..count {
        if i > 0 {
            pos = pos
                .checked_add(7)
                .map(|p| p & !7)
                .ok_or(WireError::Invalid("context offset"))?;
        }
        let hdr = slice_at(msg, pos, 8)?;
        let mut r = Reader::new(hdr);
        let context_type = r.u16()?;
        let len = r.u16()? as usize;
        let data_pos = pos + 8;
        let data = slice_at(msg, data_pos, len)?;
        out.push(NegotiateContext::decode_data(context_type, data)?);
        pos = data_pos + len;
    }
    Ok(out)
}

/// Appends contexts (each 8-byte aligned relative to the header start, given that
/// `w` holds the body and the body begins at header offset 64).
pub fn encode_contexts(w: &mut Writer, contexts: &[NegotiateContext]) {
    for (i, c) in contexts.iter().enumerate() {
        if i > 0 {
            w.align(8);
        }
        let mut d = Writer::new();
        c.encode_data(&mut d);
        w.u16(c.context_type())
            .u16(d.len() as u16)
            .u32(0)
            .bytes(d.as_slice());
    }
}

/// A NEGOTIATE request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegotiateRequest {
    /// SecurityMode.
    pub security_mode: u16,
    /// Capabilities.
    pub capabilities: u32,
    /// ClientGuid.
    pub client_guid: [u8; 16],
    /// Dialects offered.
    pub dialects: Vec<Dialect>,
    /// Negotiate contexts (only when 3.1.1 is offered).
    pub contexts: Vec<NegotiateContext>,
}

impl NegotiateRequest {
    /// Decodes the request from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<NegotiateRequest, WireError> {
        let body = msg.get(HEADER_SIZE..).ok_or(WireError::Truncated {
            offset: 0,
            needed: HEADER_SIZE,
        })?;
        let mut r = Reader::new(body);
        if r.u16()? != 36 {
            return Err(WireError::Invalid("negotiate StructureSize"));
        }
        let dialect_count = r.u16()? as usize;
        if dialect_count == 0 || dialect_count > MAX_DIALECTS {
            return Err(WireError::Invalid("negotiate DialectCount"));
        }
        let security_mode = r.u16()?;
        r.u16()?;
        let capabilities = r.u32()?;
        let client_guid = r.guid()?;
        let ctx_offset = r.u32()? as usize;
        let ctx_count = r.u16()? as usize;
        r.u16()?;
        let dialects: Vec<Dialect> = (0..dialect_count)
            .map(|_| r.u16().map(Dialect::from_u16))
            .collect::<Result<_, _>>()?;
        let contexts = if dialects.contains(&Dialect::SMB3_1_1) && ctx_count > 0 {
            decode_contexts(msg, ctx_offset, ctx_count)?
        } else {
            Vec::new()
        };
        Ok(NegotiateRequest {
            security_mode,
            capabilities,
            client_guid,
            dialects,
            contexts,
        })
    }

    /// Encodes the request body (after the header).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u16(36)
            .u16(self.dialects.len() as u16)
            .u16(self.security_mode)
            .u16(0)
            .u32(self.capabilities)
            .bytes(&self.client_guid);
        let off_pos = w.len();
        w.u32(0).u16(self.contexts.len() as u16).u16(0);
        for d in &self.dialects {
            w.u16(d.as_u16());
        }
        if !self.contexts.is_empty() {
            w.align(8);
            let off = HEADER_SIZE + w.len();
            w.patch_u32(off_pos, off as u32);
            encode_contexts(&mut w, &self.contexts);
        }
        w.into_vec()
    }
}

/// A NEGOTIATE response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegotiateResponse {
    /// SecurityMode.
    pub security_mode: u16,
    /// DialectRevision.
    pub dialect: Dialect,
    /// ServerGuid.
    pub server_guid: [u8; 16],
    /// Capabilities.
    pub capabilities: u32,
    /// MaxTransactSize.
    pub max_transact_size: u32,
    /// MaxReadSize.
    pub max_read_size: u32,
    /// MaxWriteSize.
    pub max_write_size: u32,
    /// SystemTime (FILETIME).
    pub system_time: u64,
    /// ServerStartTime (FILETIME, usually 0).
    pub server_start_time: u64,
    /// The security buffer (SPNEGO NegTokenInit2 hint).
    pub security_buffer: Vec<u8>,
    /// Negotiate contexts (3.1.1 only).
    pub contexts: Vec<NegotiateContext>,
}

impl NegotiateResponse {
    /// Encodes the response body (after the header).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(128 + self.security_buffer.len());
        let sec_off = HEADER_SIZE + 64;
        w.u16(65)
            .u16(self.security_mode)
            .u16(self.dialect.as_u16())
            .u16(if self.dialect.is_311() {
                self.contexts.len() as u16
            } else {
                0
            })
            .bytes(&self.server_guid)
            .u32(self.capabilities)
            .u32(self.max_transact_size)
            .u32(self.max_read_size)
            .u32(self.max_write_size)
            .u64(self.system_time)
            .u64(self.server_start_time)
            .u16(if self.security_buffer.is_empty() {
                0
            } else {
                sec_off as u16
            })
            .u16(self.security_buffer.len() as u16);
        let ctx_off_pos = w.len();
        w.u32(0);
        w.bytes(&self.security_buffer);
        if self.dialect.is_311() && !self.contexts.is_empty() {
            w.align(8);
            w.patch_u32(ctx_off_pos, (HEADER_SIZE + w.len()) as u32);
            encode_contexts(&mut w, &self.contexts);
        } else if self.security_buffer.is_empty() {
            w.u8(0); // the variable part is at least one byte
        }
        w.into_vec()
    }

    /// Decodes a response from a message starting at the SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<NegotiateResponse, WireError> {
        let body = msg.get(HEADER_SIZE..).ok_or(WireError::Truncated {
            offset: 0,
            needed: HEADER_SIZE,
        })?;
        let mut r = Reader::new(body);
        if r.u16()? != 65 {
            return Err(WireError::Invalid("negotiate response StructureSize"));
        }
        let security_mode = r.u16()?;
        let dialect = Dialect::from_u16(r.u16()?);
        let ctx_count = r.u16()? as usize;
        let server_guid = r.guid()?;
        let capabilities = r.u32()?;
        let max_transact_size = r.u32()?;
        let max_read_size = r.u32()?;
        let max_write_size = r.u32()?;
        let system_time = r.u64()?;
        let server_start_time = r.u64()?;
        let sec_off = r.u16()? as usize;
        let sec_len = r.u16()? as usize;
        let ctx_off = r.u32()? as usize;
        let security_buffer = if sec_len == 0 {
            Vec::new()
        } else {
            slice_at(msg, sec_off, sec_len)?.to_vec()
        };
        let contexts = if dialect.is_311() && ctx_count > 0 {
            decode_contexts(msg, ctx_off, ctx_count)?
        } else {
            Vec::new()
        };
        Ok(NegotiateResponse {
            security_mode,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            system_time,
            server_start_time,
            security_buffer,
            contexts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Command, Header};

    fn with_header(body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            command: Command::Negotiate as u16,
            ..Default::default()
        }
        .encode(&mut w);
        w.bytes(body);
        w.into_vec()
    }

    #[test]
    fn request_round_trip_with_contexts() {
        let req = NegotiateRequest {
            security_mode: 1,
            capabilities: 0x7f,
            client_guid: [3; 16],
            dialects: Dialect::ALL.to_vec(),
            contexts: vec![
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms: vec![HASH_SHA512],
                    salt: vec![7; 32],
                },
                NegotiateContext::Encryption {
                    ciphers: vec![CIPHER_AES128_GCM, CIPHER_AES128_CCM],
                },
                NegotiateContext::NetName(crate::codec::utf16le("srv")),
                NegotiateContext::Unknown {
                    context_type: 0x77,
                    data: vec![1, 2, 3],
                },
                NegotiateContext::Signing {
                    algorithms: vec![SIGNING_AES_GMAC, SIGNING_AES_CMAC],
                },
            ],
        };
        let msg = with_header(&req.encode());
        assert_eq!(NegotiateRequest::decode(&msg).unwrap(), req);
    }

    #[test]
    fn response_round_trip() {
        let resp = NegotiateResponse {
            security_mode: 1,
            dialect: Dialect::SMB3_1_1,
            server_guid: [9; 16],
            capabilities: CAP_LARGE_MTU,
            max_transact_size: 1 << 23,
            max_read_size: 1 << 23,
            max_write_size: 1 << 23,
            system_time: 5,
            server_start_time: 0,
            security_buffer: vec![0x60, 1, 2],
            contexts: vec![NegotiateContext::PreauthIntegrity {
                hash_algorithms: vec![HASH_SHA512],
                salt: vec![1; 32],
            }],
        };
        let msg = with_header(&resp.encode());
        assert_eq!(NegotiateResponse::decode(&msg).unwrap(), resp);
    }

    #[test]
    fn hostile_offsets_are_errors() {
        let req = NegotiateRequest {
            dialects: vec![Dialect::SMB3_1_1],
            contexts: vec![NegotiateContext::Encryption { ciphers: vec![1] }],
            ..Default::default()
        };
        let mut msg = with_header(&req.encode());
        // Context offset far past the end.
        let p = HEADER_SIZE + 28;
        msg[p..p + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        assert!(NegotiateRequest::decode(&msg).is_err());
        // Every truncation fails cleanly.
        let good = with_header(&req.encode());
        for n in 0..good.len() {
            let _ = NegotiateRequest::decode(&good[..n]);
        }
        // Zero dialects is invalid.
        let mut z = good.clone();
        z[HEADER_SIZE + 2] = 0;
        assert!(NegotiateRequest::decode(&z).is_err());
    }
}
