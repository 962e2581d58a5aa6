//! NTLMSSP ([MS-NLMP]): NEGOTIATE / CHALLENGE / AUTHENTICATE messages, NTLMv2 response
//! computation and verification, session-key derivation (including KEY_EXCH), the
//! AUTHENTICATE MIC, message signatures for the SPNEGO mechListMIC, and a client
//! [`Initiator`].
//!
//! Only NTLMv2 with extended session security is supported.

use hmac::{Hmac, Mac};
use md4::{Digest, Md4};
use md5::Md5;
use rc4::{consts::U16, KeyInit, Rc4, StreamCipher};
use smbx_wire::codec::{slice_at, Reader, Writer};
use thiserror::Error;

/// The 8-byte signature that starts every NTLMSSP message.
pub const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

/// NTLMSSP_NEGOTIATE_UNICODE
pub const NEGOTIATE_UNICODE: u32 = 0x0000_0001;
/// NTLM_NEGOTIATE_OEM
pub const NEGOTIATE_OEM: u32 = 0x0000_0002;
/// NTLMSSP_REQUEST_TARGET
pub const REQUEST_TARGET: u32 = 0x0000_0004;
/// NTLMSSP_NEGOTIATE_SIGN
pub const NEGOTIATE_SIGN: u32 = 0x0000_0010;
/// NTLMSSP_NEGOTIATE_SEAL
pub const NEGOTIATE_SEAL: u32 = 0x0000_0020;
/// NTLMSSP_NEGOTIATE_LM_KEY
pub const NEGOTIATE_LM_KEY: u32 = 0x0000_0080;
/// NTLMSSP_NEGOTIATE_NTLM
pub const NEGOTIATE_NTLM: u32 = 0x0000_0200;
/// NTLMSSP_ANONYMOUS (the "J" bit)
pub const NEGOTIATE_ANONYMOUS: u32 = 0x0000_0800;
/// NTLMSSP_NEGOTIATE_OEM_DOMAIN_SUPPLIED
pub const NEGOTIATE_OEM_DOMAIN_SUPPLIED: u32 = 0x0000_1000;
/// NTLMSSP_NEGOTIATE_OEM_WORKSTATION_SUPPLIED
pub const NEGOTIATE_OEM_WORKSTATION_SUPPLIED: u32 = 0x0000_2000;
/// NTLMSSP_NEGOTIATE_ALWAYS_SIGN
pub const NEGOTIATE_ALWAYS_SIGN: u32 = 0x0000_8000;
/// NTLMSSP_TARGET_TYPE_DOMAIN
pub const TARGET_TYPE_DOMAIN: u32 = 0x0001_0000;
/// NTLMSSP_TARGET_TYPE_SERVER
pub const TARGET_TYPE_SERVER: u32 = 0x0002_0000;
/// NTLMSSP_NEGOTIATE_EXTENDED_SESSIONSECURITY
pub const NEGOTIATE_EXTENDED_SESSIONSECURITY: u32 = 0x0008_0000;
/// NTLMSSP_NEGOTIATE_IDENTIFY
pub const NEGOTIATE_IDENTIFY: u32 = 0x0010_0000;
/// NTLMSSP_REQUEST_NON_NT_SESSION_KEY
pub const REQUEST_NON_NT_SESSION_KEY: u32 = 0x0040_0000;
/// NTLMSSP_NEGOTIATE_TARGET_INFO
pub const NEGOTIATE_TARGET_INFO: u32 = 0x0080_0000;
/// NTLMSSP_NEGOTIATE_VERSION
pub const NEGOTIATE_VERSION: u32 = 0x0200_0000;
/// NTLMSSP_NEGOTIATE_128
pub const NEGOTIATE_128: u32 = 0x2000_0000;
/// NTLMSSP_NEGOTIATE_KEY_EXCH
pub const NEGOTIATE_KEY_EXCH: u32 = 0x4000_0000;
/// NTLMSSP_NEGOTIATE_56
pub const NEGOTIATE_56: u32 = 0x8000_0000;

/// AV pair ids (MS-NLMP 2.2.2.1).
pub mod av {
    /// MsvAvEOL
    pub const EOL: u16 = 0;
    /// MsvAvNbComputerName
    pub const NB_COMPUTER_NAME: u16 = 1;
    /// MsvAvNbDomainName
    pub const NB_DOMAIN_NAME: u16 = 2;
    /// MsvAvDnsComputerName
    pub const DNS_COMPUTER_NAME: u16 = 3;
    /// MsvAvDnsDomainName
    pub const DNS_DOMAIN_NAME: u16 = 4;
    /// MsvAvDnsTreeName
    pub const DNS_TREE_NAME: u16 = 5;
    /// MsvAvFlags
    pub const FLAGS: u16 = 6;
    /// MsvAvTimestamp
    pub const TIMESTAMP: u16 = 7;
    /// MsvAvSingleHost
    pub const SINGLE_HOST: u16 = 8;
    /// MsvAvTargetName
    pub const TARGET_NAME: u16 = 9;
    /// MsvAvChannelBindings
    pub const CHANNEL_BINDINGS: u16 = 10;
    /// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
    pub const FLAG_MIC_PRESENT: u32 = 0x2;
}

/// Why an NTLMSSP message was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NtlmError {
    /// The message was truncated, had a bad signature/type, or a field pointed outside it.
    #[error("malformed NTLMSSP message: {0}")]
    Malformed(&'static str),
    /// The peer does not support what we require (NTLMv2, extended session security).
    #[error("unsupported NTLM variant: {0}")]
    Unsupported(&'static str),
}

impl From<smbx_wire::WireError> for NtlmError {
    fn from(_: smbx_wire::WireError) -> Self {
        NtlmError::Malformed("truncated")
    }
}

type HmacMd5 = Hmac<Md5>;

/// HMAC-MD5 over the concatenation of `parts`.
pub fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut m = <HmacMd5 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn utf16(s: &str) -> Vec<u8> {
    smbx_wire::codec::utf16le(s)
}

/// RC4 with a 16-byte key applied to `data` (encrypt == decrypt).
pub fn rc4(key: &[u8; 16], data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut c = Rc4::<U16>::new(key.into());
    c.apply_keystream(&mut out);
    out
}

/// The NT hash (NTOWFv1): MD4 of the UTF-16LE password.
pub fn nt_hash(password: &str) -> [u8; 16] {
    let mut h = Md4::new();
    h.update(utf16(password));
    h.finalize().into()
}

/// NTOWFv2 = HMAC_MD5(NT hash, UNICODE(UPPER(user) || domain)).
pub fn ntowfv2(nt_hash: &[u8; 16], user: &str, domain: &str) -> [u8; 16] {
    let mut s = user.to_uppercase();
    s.push_str(domain);
    hmac_md5(nt_hash, &[&utf16(&s)])
}

/// Builds the NTLMv2 client blob ("temp" in MS-NLMP 3.3.2) that follows NTProofStr.
pub fn ntlmv2_blob(timestamp: u64, client_challenge: &[u8; 8], target_info: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(32 + target_info.len());
    w.u8(1)
        .u8(1)
        .zeros(6)
        .u64(timestamp)
        .bytes(client_challenge)
        .zeros(4);
    w.bytes(target_info).zeros(4);
    w.into_vec()
}

/// NTProofStr = HMAC_MD5(NTOWFv2, ServerChallenge || blob).
pub fn nt_proof_str(ntowfv2: &[u8; 16], server_challenge: &[u8; 8], blob: &[u8]) -> [u8; 16] {
    hmac_md5(ntowfv2, &[server_challenge, blob])
}

/// SessionBaseKey = HMAC_MD5(NTOWFv2, NTProofStr).
pub fn session_base_key(ntowfv2: &[u8; 16], nt_proof: &[u8; 16]) -> [u8; 16] {
    hmac_md5(ntowfv2, &[nt_proof])
}

/// LMv2 response = HMAC_MD5(NTOWFv2, ServerChallenge || ClientChallenge) || ClientChallenge.
pub fn lmv2_response(
    ntowfv2: &[u8; 16],
    server_challenge: &[u8; 8],
    client_challenge: &[u8; 8],
) -> [u8; 24] {
    let mut out = [0u8; 24];
    out[..16].copy_from_slice(&hmac_md5(ntowfv2, &[server_challenge, client_challenge]));
    out[16..].copy_from_slice(client_challenge);
    out
}

/// The AUTHENTICATE MIC: HMAC_MD5(ExportedSessionKey, NEGOTIATE || CHALLENGE || AUTHENTICATE),
/// with the AUTHENTICATE's MIC field zeroed by the caller.
pub fn compute_mic(
    exported_session_key: &[u8],
    negotiate: &[u8],
    challenge: &[u8],
    authenticate: &[u8],
) -> [u8; 16] {
    hmac_md5(exported_session_key, &[negotiate, challenge, authenticate])
}

/// Constant-time equality for secrets.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a, b).is_ok()
}

// ---------------------------------------------------------------------------------------------
// AV pairs

/// A decoded list of AV pairs (MS-NLMP 2.2.2.1), in wire order, without the terminating EOL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AvPairs(pub Vec<(u16, Vec<u8>)>);

impl AvPairs {
    /// Parses AV pairs up to MsvAvEOL. Fails if a pair runs past the buffer or EOL is missing.
    pub fn decode(buf: &[u8]) -> Result<AvPairs, NtlmError> {
        let mut r = Reader::new(buf);
        let mut v = Vec::new();
        loop {
            let id = r.u16()?;
            let len = r.u16()? as usize;
            let val = r.bytes(len)?;
            if id == av::EOL {
                return Ok(AvPairs(v));
            }
            if v.len() >= 64 {
                return Err(NtlmError::Malformed("too many AV pairs"));
            }
            v.push((id, val.to_vec()));
        }
    }

    /// Encodes the pairs followed by MsvAvEOL.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        for (id, val) in &self.0 {
            w.u16(*id).u16(val.len() as u16).bytes(val);
        }
        w.u16(av::EOL).u16(0);
        w.into_vec()
    }

    /// The value of the first pair with `id`.
    pub fn get(&self, id: u16) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v.as_slice())
    }

    /// Sets (replaces or appends) the pair `id`.
    pub fn set(&mut self, id: u16, val: Vec<u8>) {
        if let Some(e) = self.0.iter_mut().find(|(i, _)| *i == id) {
            e.1 = val;
        } else {
            self.0.push((id, val));
        }
    }

    /// MsvAvTimestamp as a FILETIME, if present and well-formed.
    pub fn timestamp(&self) -> Option<u64> {
        let v = self.get(av::TIMESTAMP)?;
        Some(u64::from_le_bytes(v.try_into().ok()?))
    }

    /// MsvAvFlags, if present and well-formed.
    pub fn flags(&self) -> Option<u32> {
        let v = self.get(av::FLAGS)?;
        Some(u32::from_le_bytes(v.try_into().ok()?))
    }
}

// ---------------------------------------------------------------------------------------------
// Messages

/// The 8-byte VERSION structure we send: Windows 10.0 build 20348, NTLM revision 15.
pub const OUR_VERSION: [u8; 8] = [10, 0, 0x7c, 0x4f, 0, 0, 0, 0x0f];

fn check_header(buf: &[u8], msg_type: u32) -> Result<(), NtlmError> {
    if buf.len() < 12 || &buf[..8] != SIGNATURE {
        return Err(NtlmError::Malformed("bad signature"));
    }
    if u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) != msg_type {
        return Err(NtlmError::Malformed("unexpected message type"));
    }
    Ok(())
}

/// Reads a (Len, MaxLen, Offset) field descriptor at `at` and returns the payload it names.
fn field(buf: &[u8], at: usize) -> Result<&[u8], NtlmError> {
    let mut r = Reader::new(buf);
    r.seek(at)?;
    let len = r.u16()? as usize;
    let _max = r.u16()?;
    let off = r.u32()? as usize;
    if len == 0 {
        return Ok(&[]);
    }
    Ok(slice_at(buf, off, len)?)
}

fn decode_string(b: &[u8], unicode: bool) -> Result<String, NtlmError> {
    if unicode {
        if b.len() & 1 != 0 {
            return Err(NtlmError::Malformed("odd-length UTF-16 string"));
        }
        let units: Vec<u16> = b
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        Ok(String::from_utf16_lossy(&units))
    } else {
        Ok(b.iter().map(|&c| c as char).collect())
    }
}

fn encode_string(s: &str, unicode: bool) -> Vec<u8> {
    if unicode {
        utf16(s)
    } else {
        s.chars()
            .map(|c| if (c as u32) < 256 { c as u8 } else { b'?' })
            .collect()
    }
}

/// Lays out a message: a fixed header of `fixed_len` bytes followed by payloads whose
/// descriptors are patched in at the given offsets.
struct Layout {
    w: Writer,
    payload: Vec<(usize, Vec<u8>)>,
}

impl Layout {
    fn new(fixed_len: usize) -> Layout {
        let mut w = Writer::with_capacity(fixed_len + 128);
        w.zeros(fixed_len);
        Layout {
            w,
            payload: Vec::new(),
        }
    }
    fn put(&mut self, at: usize, data: Vec<u8>) {
        self.payload.push((at, data));
    }
    fn finish(mut self, head: &[u8]) -> Vec<u8> {
        let mut buf = self.w.into_vec();
        buf[..head.len()].copy_from_slice(head);
        for (at, data) in self.payload.drain(..) {
            let off = buf.len();
            buf[at..at + 2].copy_from_slice(&(data.len() as u16).to_le_bytes());
            buf[at + 2..at + 4].copy_from_slice(&(data.len() as u16).to_le_bytes());
            buf[at + 4..at + 8].copy_from_slice(&(off as u32).to_le_bytes());
            buf.extend_from_slice(&data);
        }
        self.w = Writer::new();
        buf
    }
}

/// NEGOTIATE_MESSAGE (type 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateMessage {
    /// NegotiateFlags.
    pub flags: u32,
    /// DomainName (OEM), if supplied.
    pub domain: String,
    /// Workstation (OEM), if supplied.
    pub workstation: String,
    /// Version, if NEGOTIATE_VERSION is set.
    pub version: Option<[u8; 8]>,
}

impl NegotiateMessage {
    /// Parses a NEGOTIATE_MESSAGE.
    pub fn decode(buf: &[u8]) -> Result<NegotiateMessage, NtlmError> {
        check_header(buf, 1)?;
        let mut r = Reader::new(buf);
        r.seek(12)?;
        let flags = r.u32()?;
        // Domain and workstation fields are optional in very old clients (16-byte message).
        let (domain, workstation) = if buf.len() >= 32 {
            (
                decode_string(field(buf, 16)?, false)?,
                decode_string(field(buf, 24)?, false)?,
            )
        } else {
            (String::new(), String::new())
        };
        let version = if flags & NEGOTIATE_VERSION != 0 && buf.len() >= 40 {
            Some(buf[32..40].try_into().expect("8 bytes"))
        } else {
            None
        };
        Ok(NegotiateMessage {
            flags,
            domain,
            workstation,
            version,
        })
    }

    /// Encodes a NEGOTIATE_MESSAGE.
    pub fn encode(&self) -> Vec<u8> {
        let mut l = Layout::new(40);
        let mut head = Vec::with_capacity(40);
        head.extend_from_slice(SIGNATURE);
        head.extend_from_slice(&1u32.to_le_bytes());
        head.extend_from_slice(&self.flags.to_le_bytes());
        head.extend_from_slice(&[0, 0, 0, 0, 40, 0, 0, 0]);
        head.extend_from_slice(&[0, 0, 0, 0, 40, 0, 0, 0]);
        head.extend_from_slice(&self.version.unwrap_or([0; 8]));
        if !self.domain.is_empty() {
            l.put(16, encode_string(&self.domain, false));
        }
        if !self.workstation.is_empty() {
            l.put(24, encode_string(&self.workstation, false));
        }
        l.finish(&head)
    }
}

/// CHALLENGE_MESSAGE (type 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChallengeMessage {
    /// NegotiateFlags chosen by the server.
    pub flags: u32,
    /// TargetName.
    pub target_name: String,
    /// ServerChallenge.
    pub server_challenge: [u8; 8],
    /// TargetInfo (raw AV pairs).
    pub target_info: Vec<u8>,
    /// Version, if NEGOTIATE_VERSION is set.
    pub version: Option<[u8; 8]>,
}

impl ChallengeMessage {
    /// Parses a CHALLENGE_MESSAGE.
    pub fn decode(buf: &[u8]) -> Result<ChallengeMessage, NtlmError> {
        check_header(buf, 2)?;
        let mut r = Reader::new(buf);
        r.seek(20)?;
        let flags = r.u32()?;
        let server_challenge = r.array::<8>()?;
        let unicode = flags & NEGOTIATE_UNICODE != 0;
        let target_name = decode_string(field(buf, 12)?, unicode)?;
        let target_info = if buf.len() >= 48 {
            field(buf, 40)?.to_vec()
        } else {
            Vec::new()
        };
        let version = if flags & NEGOTIATE_VERSION != 0 && buf.len() >= 56 {
            Some(buf[48..56].try_into().expect("8 bytes"))
        } else {
            None
        };
        Ok(ChallengeMessage {
            flags,
            target_name,
            server_challenge,
            target_info,
            version,
        })
    }

    /// Encodes a CHALLENGE_MESSAGE.
    pub fn encode(&self) -> Vec<u8> {
        let mut l = Layout::new(56);
        let mut head = Vec::with_capacity(56);
        head.extend_from_slice(SIGNATURE);
        head.extend_from_slice(&2u32.to_le_bytes());
        head.extend_from_slice(&[0, 0, 0, 0, 56, 0, 0, 0]);
        head.extend_from_slice(&self.flags.to_le_bytes());
        head.extend_from_slice(&self.server_challenge);
        head.extend_from_slice(&[0; 8]);
        head.extend_from_slice(&[0, 0, 0, 0, 56, 0, 0, 0]);
        head.extend_from_slice(&self.version.unwrap_or([0; 8]));
        if !self.target_name.is_empty() {
            l.put(
                12,
                encode_string(&self.target_name, self.flags & NEGOTIATE_UNICODE != 0),
            );
        }
        if !self.target_info.is_empty() {
            l.put(40, self.target_info.clone());
        }
        l.finish(&head)
    }
}

/// Offset of the MIC field in an AUTHENTICATE_MESSAGE that carries one.
pub const MIC_OFFSET: usize = 72;

/// AUTHENTICATE_MESSAGE (type 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticateMessage {
    /// NegotiateFlags.
    pub flags: u32,
    /// LmChallengeResponse.
    pub lm_response: Vec<u8>,
    /// NtChallengeResponse (NTProofStr || blob for NTLMv2).
    pub nt_response: Vec<u8>,
    /// DomainName.
    pub domain: String,
    /// UserName.
    pub user: String,
    /// Workstation.
    pub workstation: String,
    /// EncryptedRandomSessionKey.
    pub encrypted_session_key: Vec<u8>,
    /// Version, if NEGOTIATE_VERSION is set.
    pub version: Option<[u8; 8]>,
    /// The MIC, when the message is long enough to have one (payload starts at or after 88).
    /// Whether it is meaningful is told by MsvAvFlags in the NTLMv2 blob.
    pub mic: Option<[u8; 16]>,
}

impl AuthenticateMessage {
    /// Parses an AUTHENTICATE_MESSAGE.
    pub fn decode(buf: &[u8]) -> Result<AuthenticateMessage, NtlmError> {
        check_header(buf, 3)?;
        let mut r = Reader::new(buf);
        r.seek(60)?;
        let flags = r.u32()?;
        let unicode = flags & NEGOTIATE_UNICODE != 0;
        let lm_response = field(buf, 12)?.to_vec();
        let nt_response = field(buf, 20)?.to_vec();
        let domain = decode_string(field(buf, 28)?, unicode)?;
        let user = decode_string(field(buf, 36)?, unicode)?;
        let workstation = decode_string(field(buf, 44)?, unicode)?;
        let encrypted_session_key = field(buf, 52)?.to_vec();
        // The payload begins at the lowest non-empty offset; fixed fields end before it.
        let mut payload_start = buf.len();
        for at in [12usize, 20, 28, 36, 44, 52] {
            let len = u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
            let off = u32::from_le_bytes([buf[at + 4], buf[at + 5], buf[at + 6], buf[at + 7]]);
            if len > 0 {
                payload_start = payload_start.min(off as usize);
            }
        }
        let version = if flags & NEGOTIATE_VERSION != 0 && payload_start >= 72 && buf.len() >= 72 {
            Some(buf[64..72].try_into().expect("8 bytes"))
        } else {
            None
        };
        let mic = if payload_start >= MIC_OFFSET + 16 && buf.len() >= MIC_OFFSET + 16 {
            Some(
                buf[MIC_OFFSET..MIC_OFFSET + 16]
                    .try_into()
                    .expect("16 bytes"),
            )
        } else {
            None
        };
        Ok(AuthenticateMessage {
            flags,
            lm_response,
            nt_response,
            domain,
            user,
            workstation,
            encrypted_session_key,
            version,
            mic,
        })
    }

    /// Encodes an AUTHENTICATE_MESSAGE with room for a MIC (88-byte fixed part). The MIC
    /// field holds `self.mic` or zeros.
    pub fn encode(&self) -> Vec<u8> {
        let unicode = self.flags & NEGOTIATE_UNICODE != 0;
        let mut l = Layout::new(88);
        let mut head = Vec::with_capacity(88);
        head.extend_from_slice(SIGNATURE);
        head.extend_from_slice(&3u32.to_le_bytes());
        for _ in 0..6 {
            head.extend_from_slice(&[0, 0, 0, 0, 88, 0, 0, 0]);
        }
        head.extend_from_slice(&self.flags.to_le_bytes());
        head.extend_from_slice(&self.version.unwrap_or([0; 8]));
        head.extend_from_slice(&self.mic.unwrap_or([0; 16]));
        let fields: [(usize, Vec<u8>); 6] = [
            (28, encode_string(&self.domain, unicode)),
            (36, encode_string(&self.user, unicode)),
            (44, encode_string(&self.workstation, unicode)),
            (12, self.lm_response.clone()),
            (20, self.nt_response.clone()),
            (52, self.encrypted_session_key.clone()),
        ];
        for (at, data) in fields {
            if !data.is_empty() {
                l.put(at, data);
            }
        }
        l.finish(&head)
    }

    /// For an NTLMv2 response, the AV pairs inside its blob.
    pub fn ntlmv2_av_pairs(&self) -> Option<AvPairs> {
        Ntlmv2Response::decode(&self.nt_response)
            .ok()
            .map(|r| r.client_challenge.av_pairs)
    }
}

// ---------------------------------------------------------------------------------------------
// NTLMv2 response

/// NTLMv2_CLIENT_CHALLENGE (MS-NLMP 2.2.2.7): the client's part of an NTLMv2 response,
/// over which the NTProofStr is computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ntlmv2ClientChallenge {
    /// RespType (1 in every known client).
    pub resp_type: u8,
    /// HiRespType (1 in every known client).
    pub hi_resp_type: u8,
    /// TimeStamp (FILETIME).
    pub timestamp: u64,
    /// ChallengeFromClient.
    pub challenge_from_client: [u8; 8],
    /// AvPairs, up to (not including) MsvAvEOL.
    pub av_pairs: AvPairs,
}

/// NTLMv2_RESPONSE (MS-NLMP 2.2.2.8): NTProofStr followed by the client challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ntlmv2Response {
    /// NTProofStr.
    pub nt_proof_str: [u8; 16],
    /// The NTLMv2_CLIENT_CHALLENGE (the "blob").
    pub client_challenge: Ntlmv2ClientChallenge,
}

impl Ntlmv2Response {
    /// Parses an NtChallengeResponse longer than an NTLMv1 response. Fails on any
    /// truncated field and on AvPairs that overrun the buffer or lack MsvAvEOL (as the
    /// malformed client challenge NetApp's "net diag" sends); bytes after MsvAvEOL are
    /// ignored (clients pad the blob).
    pub fn decode(buf: &[u8]) -> Result<Ntlmv2Response, NtlmError> {
        let mut r = Reader::new(buf);
        let nt_proof_str = r.array::<16>()?;
        let resp_type = r.u8()?;
        let hi_resp_type = r.u8()?;
        r.bytes(2 + 4)?; // Reserved1, Reserved2
        let timestamp = u64::from_le_bytes(r.array::<8>()?);
        let challenge_from_client = r.array::<8>()?;
        r.bytes(4)?; // Reserved3
        let av_pairs = AvPairs::decode(r.bytes(r.remaining())?)?;
        Ok(Ntlmv2Response {
            nt_proof_str,
            client_challenge: Ntlmv2ClientChallenge {
                resp_type,
                hi_resp_type,
                timestamp,
                challenge_from_client,
                av_pairs,
            },
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Session security (signing for the SPNEGO mechListMIC)

const C2S_SIGN: &[u8] = b"session key to client-to-server signing key magic constant\0";
const S2C_SIGN: &[u8] = b"session key to server-to-client signing key magic constant\0";
const C2S_SEAL: &[u8] = b"session key to client-to-server sealing key magic constant\0";
const S2C_SEAL: &[u8] = b"session key to server-to-client sealing key magic constant\0";

/// SIGNKEY for one direction (MS-NLMP 3.4.5.2).
pub fn sign_key(exported_session_key: &[u8; 16], client_to_server: bool) -> [u8; 16] {
    md5(&[
        exported_session_key,
        if client_to_server { C2S_SIGN } else { S2C_SIGN },
    ])
}

/// SEALKEY for one direction (MS-NLMP 3.4.5.3), extended session security.
pub fn seal_key(exported_session_key: &[u8; 16], flags: u32, client_to_server: bool) -> [u8; 16] {
    let k: &[u8] = if flags & NEGOTIATE_128 != 0 {
        exported_session_key
    } else if flags & NEGOTIATE_56 != 0 {
        &exported_session_key[..7]
    } else {
        &exported_session_key[..5]
    };
    md5(&[k, if client_to_server { C2S_SEAL } else { S2C_SEAL }])
}

struct Direction {
    sign: [u8; 16],
    seal: Rc4<U16>,
    seq: u32,
}

impl Direction {
    fn new(esk: &[u8; 16], flags: u32, c2s: bool) -> Direction {
        Direction {
            sign: sign_key(esk, c2s),
            seal: Rc4::<U16>::new((&seal_key(esk, flags, c2s)).into()),
            seq: 0,
        }
    }
}

/// NTLM session security state after authentication: produces and checks the 16-byte
/// NTLMSSP_MESSAGE_SIGNATURE used by SPNEGO's mechListMIC.
pub struct NtlmSession {
    flags: u32,
    c2s: Direction,
    s2c: Direction,
}

impl std::fmt::Debug for NtlmSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmSession")
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

impl NtlmSession {
    /// Sets up both directions from the exported session key and the negotiated flags.
    pub fn new(exported_session_key: &[u8; 16], flags: u32) -> NtlmSession {
        NtlmSession {
            flags,
            c2s: Direction::new(exported_session_key, flags, true),
            s2c: Direction::new(exported_session_key, flags, false),
        }
    }

    fn make(dir: &mut Direction, flags: u32, msg: &[u8]) -> [u8; 16] {
        let seq = dir.seq.to_le_bytes();
        let mac = hmac_md5(&dir.sign, &[&seq, msg]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(&mac[..8]);
        if flags & NEGOTIATE_KEY_EXCH != 0 {
            dir.seal.apply_keystream(&mut checksum);
        }
        dir.seq = dir.seq.wrapping_add(1);
        let mut out = [0u8; 16];
        out[..4].copy_from_slice(&1u32.to_le_bytes());
        out[4..12].copy_from_slice(&checksum);
        out[12..].copy_from_slice(&seq);
        out
    }

    /// Signs `msg` in the client-to-server direction (as an initiator does).
    pub fn sign_c2s(&mut self, msg: &[u8]) -> [u8; 16] {
        Self::make(&mut self.c2s, self.flags, msg)
    }

    /// Signs `msg` in the server-to-client direction (as an acceptor does).
    pub fn sign_s2c(&mut self, msg: &[u8]) -> [u8; 16] {
        Self::make(&mut self.s2c, self.flags, msg)
    }

    /// Verifies a client-to-server signature (acceptor side).
    pub fn verify_c2s(&mut self, msg: &[u8], sig: &[u8]) -> bool {
        let expect = Self::make(&mut self.c2s, self.flags, msg);
        sig.len() == 16 && ct_eq(&expect, sig)
    }

    /// Verifies a server-to-client signature (initiator side).
    pub fn verify_s2c(&mut self, msg: &[u8], sig: &[u8]) -> bool {
        let expect = Self::make(&mut self.s2c, self.flags, msg);
        sig.len() == 16 && ct_eq(&expect, sig)
    }
}

// ---------------------------------------------------------------------------------------------
// Initiator

/// The flags our initiator asks for.
pub const INITIATOR_FLAGS: u32 = NEGOTIATE_UNICODE
    | REQUEST_TARGET
    | NEGOTIATE_SIGN
    | NEGOTIATE_SEAL
    | NEGOTIATE_NTLM
    | NEGOTIATE_ALWAYS_SIGN
    | NEGOTIATE_EXTENDED_SESSIONSECURITY
    | NEGOTIATE_TARGET_INFO
    | NEGOTIATE_VERSION
    | NEGOTIATE_128
    | NEGOTIATE_KEY_EXCH
    | NEGOTIATE_56;

/// A client-side NTLMv2 context: `negotiate()` then `authenticate(challenge)`.
pub struct Initiator {
    user: String,
    password: String,
    domain: String,
    workstation: String,
    anonymous: bool,
    negotiate: Vec<u8>,
    session: Option<NtlmSession>,
    /// Fixed inputs for deterministic tests: (client challenge, random session key, time).
    fixed: Option<([u8; 8], [u8; 16], u64)>,
}

impl std::fmt::Debug for Initiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiator")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl Initiator {
    /// A context that authenticates `user` in `domain` with `password`.
    pub fn new(user: &str, password: &str, domain: &str) -> Initiator {
        Initiator {
            user: user.to_string(),
            password: password.to_string(),
            domain: domain.to_string(),
            workstation: "SMBX".to_string(),
            anonymous: false,
            negotiate: Vec::new(),
            session: None,
            fixed: None,
        }
    }

    /// A context for an anonymous (null session) logon.
    pub fn anonymous() -> Initiator {
        let mut i = Initiator::new("", "", "");
        i.anonymous = true;
        i
    }

    /// Sets the workstation name sent in AUTHENTICATE.
    pub fn with_workstation(mut self, ws: &str) -> Initiator {
        self.workstation = ws.to_string();
        self
    }

    /// Fixes the client challenge, random session key and timestamp (tests only).
    #[doc(hidden)]
    pub fn with_fixed_randomness(mut self, cc: [u8; 8], rsk: [u8; 16], time: u64) -> Initiator {
        self.fixed = Some((cc, rsk, time));
        self
    }

    /// The NEGOTIATE_MESSAGE to send first.
    pub fn negotiate(&mut self) -> Vec<u8> {
        let m = NegotiateMessage {
            flags: INITIATOR_FLAGS,
            domain: String::new(),
            workstation: String::new(),
            version: Some(OUR_VERSION),
        };
        self.negotiate = m.encode();
        self.negotiate.clone()
    }

    /// Processes the server's CHALLENGE_MESSAGE and returns the AUTHENTICATE_MESSAGE and
    /// the exported session key (all zeros for anonymous).
    pub fn authenticate(&mut self, challenge: &[u8]) -> Result<(Vec<u8>, [u8; 16]), NtlmError> {
        let ch = ChallengeMessage::decode(challenge)?;
        if ch.flags & NEGOTIATE_EXTENDED_SESSIONSECURITY == 0 && !self.anonymous {
            return Err(NtlmError::Unsupported(
                "server did not offer extended session security",
            ));
        }
        let flags = ch.flags & INITIATOR_FLAGS | NEGOTIATE_UNICODE;
        if self.negotiate.is_empty() {
            self.negotiate();
        }
        let (cc, rsk, time) = match self.fixed {
            Some(f) => f,
            None => {
                let mut cc = [0u8; 8];
                let mut rsk = [0u8; 16];
                aws_lc_rs::rand::fill(&mut cc).map_err(|_| NtlmError::Malformed("rng"))?;
                aws_lc_rs::rand::fill(&mut rsk).map_err(|_| NtlmError::Malformed("rng"))?;
                (cc, rsk, smbx_wire::time::now_filetime())
            }
        };
        if self.anonymous {
            let m = AuthenticateMessage {
                flags: flags | NEGOTIATE_ANONYMOUS,
                lm_response: vec![0],
                nt_response: Vec::new(),
                domain: String::new(),
                user: String::new(),
                workstation: self.workstation.clone(),
                encrypted_session_key: Vec::new(),
                version: Some(OUR_VERSION),
                mic: None,
            };
            return Ok((m.encode(), [0; 16]));
        }
        let mut ti = AvPairs::decode(&ch.target_info).unwrap_or_default();
        let server_time = ti.timestamp();
        let time = server_time.unwrap_or(time);
        if server_time.is_some() {
            let f = ti.flags().unwrap_or(0) | av::FLAG_MIC_PRESENT;
            ti.set(av::FLAGS, f.to_le_bytes().to_vec());
        }
        let owf = ntowfv2(&nt_hash(&self.password), &self.user, &self.domain);
        let blob = ntlmv2_blob(time, &cc, &ti.encode());
        let proof = nt_proof_str(&owf, &ch.server_challenge, &blob);
        let base = session_base_key(&owf, &proof);
        let mut nt_response = proof.to_vec();
        nt_response.extend_from_slice(&blob);
        let lm_response = if server_time.is_some() {
            vec![0; 24]
        } else {
            lmv2_response(&owf, &ch.server_challenge, &cc).to_vec()
        };
        let (esk, enc) = if flags & NEGOTIATE_KEY_EXCH != 0 {
            (rsk, rc4(&base, &rsk))
        } else {
            (base, Vec::new())
        };
        let mut m = AuthenticateMessage {
            flags,
            lm_response,
            nt_response,
            domain: self.domain.clone(),
            user: self.user.clone(),
            workstation: self.workstation.clone(),
            encrypted_session_key: enc,
            version: Some(OUR_VERSION),
            mic: None,
        };
        let mut bytes = m.encode();
        if server_time.is_some() {
            let mic = compute_mic(&esk, &self.negotiate, challenge, &bytes);
            m.mic = Some(mic);
            bytes[MIC_OFFSET..MIC_OFFSET + 16].copy_from_slice(&mic);
        }
        self.session = Some(NtlmSession::new(&esk, flags));
        Ok((bytes, esk))
    }

    /// The session security context, available after `authenticate` (not for anonymous).
    pub fn session(&mut self) -> Option<&mut NtlmSession> {
        self.session.as_mut()
    }
}
