//! SPNEGO ([RFC 4178], [MS-SPNG]) tokens in DER: NegTokenInit (including the server's
//! NegTokenInit2 with negHints) and NegTokenResp.
//!
//! The decoder parses only this fixed structure (so nesting is bounded by construction),
//! checks that every length fits inside its parent, rejects indefinite lengths and
//! lengths over 2^24, and never panics.

use thiserror::Error;

/// DER content of the SPNEGO OID 1.3.6.1.5.5.2.
pub const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// DER content of the NTLMSSP OID 1.3.6.1.4.1.311.2.2.10.
pub const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];
/// DER content of the Kerberos 5 OID 1.2.840.113554.1.2.2.
pub const OID_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// DER content of Microsoft's Kerberos 5 OID 1.2.840.48018.1.2.2.
pub const OID_MS_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// DER content of the NEGOEX OID 1.3.6.1.4.1.311.2.2.30.
pub const OID_NEGOEX: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x1e];

/// The hint name Windows servers put in NegTokenInit2.
pub const HINT_NAME: &str = "not_defined_in_RFC4178@please_ignore";

/// Largest token accepted (16 MiB); anything longer is refused before allocation.
const MAX_LEN: usize = 1 << 24;

/// Why a SPNEGO token was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpnegoError {
    /// The DER was truncated, had a bad length, or had an unexpected tag.
    #[error("malformed SPNEGO token: {0}")]
    Malformed(&'static str),
}

type Result<T> = std::result::Result<T, SpnegoError>;

fn bad(what: &'static str) -> SpnegoError {
    SpnegoError::Malformed(what)
}

/// negState values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegState {
    /// accept-completed (0)
    AcceptCompleted,
    /// accept-incomplete (1)
    AcceptIncomplete,
    /// reject (2)
    Reject,
    /// request-mic (3)
    RequestMic,
}

impl NegState {
    fn from_u8(v: u8) -> Result<NegState> {
        Ok(match v {
            0 => NegState::AcceptCompleted,
            1 => NegState::AcceptIncomplete,
            2 => NegState::Reject,
            3 => NegState::RequestMic,
            _ => return Err(bad("unknown negState")),
        })
    }
    fn to_u8(self) -> u8 {
        match self {
            NegState::AcceptCompleted => 0,
            NegState::AcceptIncomplete => 1,
            NegState::Reject => 2,
            NegState::RequestMic => 3,
        }
    }
}

/// negHints of NegTokenInit2.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegHints {
    /// hintName (GeneralString).
    pub hint_name: Option<String>,
    /// hintAddress.
    pub hint_address: Option<Vec<u8>>,
}

/// NegTokenInit / NegTokenInit2.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegTokenInit {
    /// mechTypes, each the DER content of an OID (without tag and length).
    pub mech_types: Vec<Vec<u8>>,
    /// reqFlags (raw BIT STRING content), rarely sent.
    pub req_flags: Option<Vec<u8>>,
    /// mechToken: the optimistic token for the first mechanism.
    pub mech_token: Option<Vec<u8>>,
    /// negHints (NegTokenInit2 only).
    pub neg_hints: Option<NegHints>,
    /// mechListMIC.
    pub mech_list_mic: Option<Vec<u8>>,
}

impl NegTokenInit {
    /// The DER encoding of the MechTypeList (SEQUENCE OF OID), which mechListMIC covers.
    pub fn mech_types_der(&self) -> Vec<u8> {
        encode_mech_types(&self.mech_types)
    }
}

/// NegTokenResp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegTokenResp {
    /// negState.
    pub neg_state: Option<NegState>,
    /// supportedMech (OID content).
    pub supported_mech: Option<Vec<u8>>,
    /// responseToken.
    pub response_token: Option<Vec<u8>>,
    /// mechListMIC.
    pub mech_list_mic: Option<Vec<u8>>,
}

/// A decoded SPNEGO token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiationToken {
    /// NegTokenInit (or NegTokenInit2).
    Init(NegTokenInit),
    /// NegTokenResp.
    Resp(NegTokenResp),
}

// ---------------------------------------------------------------------------------------------
// DER reading

struct Der<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Der<'a> {
    fn new(buf: &'a [u8]) -> Der<'a> {
        Der { buf, pos: 0 }
    }
    fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    fn peek_tag(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }
    fn byte(&mut self) -> Result<u8> {
        let b = *self.buf.get(self.pos).ok_or(bad("truncated"))?;
        self.pos += 1;
        Ok(b)
    }
    /// Reads one TLV and returns (tag, value).
    fn tlv(&mut self) -> Result<(u8, &'a [u8])> {
        let tag = self.byte()?;
        if tag & 0x1f == 0x1f {
            return Err(bad("multi-byte tags not supported"));
        }
        let first = self.byte()?;
        let len = if first < 0x80 {
            first as usize
        } else if first == 0x80 {
            return Err(bad("indefinite length"));
        } else {
            let n = (first & 0x7f) as usize;
            if n > 3 {
                return Err(bad("length too large"));
            }
            let mut l = 0usize;
            for _ in 0..n {
                l = (l << 8) | self.byte()? as usize;
            }
            l
        };
        if len > MAX_LEN {
            return Err(bad("length too large"));
        }
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or(bad("length exceeds buffer"))?;
        let v = &self.buf[self.pos..end];
        self.pos = end;
        Ok((tag, v))
    }
    fn expect(&mut self, tag: u8) -> Result<&'a [u8]> {
        let (t, v) = self.tlv()?;
        if t != tag {
            return Err(bad("unexpected tag"));
        }
        Ok(v)
    }
}

/// Parses `v` as exactly one TLV with `tag`.
fn only(v: &[u8], tag: u8) -> Result<&[u8]> {
    let mut d = Der::new(v);
    let inner = d.expect(tag)?;
    if !d.is_empty() {
        return Err(bad("trailing data"));
    }
    Ok(inner)
}

fn parse_mech_types(v: &[u8]) -> Result<Vec<Vec<u8>>> {
    let seq = only(v, 0x30)?;
    let mut d = Der::new(seq);
    let mut out = Vec::new();
    while !d.is_empty() {
        if out.len() >= 32 {
            return Err(bad("too many mechTypes"));
        }
        out.push(d.expect(0x06)?.to_vec());
    }
    Ok(out)
}

fn parse_neg_hints(v: &[u8]) -> Result<NegHints> {
    let mut d = Der::new(v);
    let mut h = NegHints::default();
    while !d.is_empty() {
        let (t, val) = d.tlv()?;
        match t {
            0xa0 => {
                let s = only(val, 0x1b)?;
                h.hint_name = Some(String::from_utf8_lossy(s).into_owned());
            }
            0xa1 => h.hint_address = Some(only(val, 0x04)?.to_vec()),
            _ => return Err(bad("unknown negHints field")),
        }
    }
    Ok(h)
}

fn parse_init(v: &[u8]) -> Result<NegTokenInit> {
    let seq = only(v, 0x30)?;
    let mut d = Der::new(seq);
    let mut t = NegTokenInit::default();
    let mut have_types = false;
    while !d.is_empty() {
        let (tag, val) = d.tlv()?;
        match tag {
            0xa0 => {
                t.mech_types = parse_mech_types(val)?;
                have_types = true;
            }
            0xa1 => t.req_flags = Some(only(val, 0x03)?.to_vec()),
            0xa2 => t.mech_token = Some(only(val, 0x04)?.to_vec()),
            0xa3 => {
                // [3] is mechListMIC in RFC 4178 and negHints in NegTokenInit2.
                match Der::new(val).peek_tag() {
                    Some(0x30) => t.neg_hints = Some(parse_neg_hints(only(val, 0x30)?)?),
                    Some(0x04) => t.mech_list_mic = Some(only(val, 0x04)?.to_vec()),
                    _ => return Err(bad("bad [3] in NegTokenInit")),
                }
            }
            0xa4 => t.mech_list_mic = Some(only(val, 0x04)?.to_vec()),
            _ => return Err(bad("unknown NegTokenInit field")),
        }
    }
    if !have_types {
        return Err(bad("NegTokenInit without mechTypes"));
    }
    Ok(t)
}

fn parse_resp(v: &[u8]) -> Result<NegTokenResp> {
    let seq = only(v, 0x30)?;
    let mut d = Der::new(seq);
    let mut t = NegTokenResp::default();
    while !d.is_empty() {
        let (tag, val) = d.tlv()?;
        match tag {
            0xa0 => {
                let e = only(val, 0x0a)?;
                if e.len() != 1 {
                    return Err(bad("bad negState"));
                }
                t.neg_state = Some(NegState::from_u8(e[0])?);
            }
            0xa1 => t.supported_mech = Some(only(val, 0x06)?.to_vec()),
            0xa2 => t.response_token = Some(only(val, 0x04)?.to_vec()),
            0xa3 => t.mech_list_mic = Some(only(val, 0x04)?.to_vec()),
            _ => return Err(bad("unknown NegTokenResp field")),
        }
    }
    Ok(t)
}

/// Decodes a SPNEGO token: either a GSS InitialContextToken (`60 ..` with the SPNEGO OID
/// and a NegTokenInit), a bare `a0` NegTokenInit, or an `a1` NegTokenResp.
pub fn decode(buf: &[u8]) -> Result<NegotiationToken> {
    let mut d = Der::new(buf);
    let (tag, val) = d.tlv()?;
    if !d.is_empty() {
        return Err(bad("trailing data"));
    }
    match tag {
        0x60 => {
            let mut inner = Der::new(val);
            let oid = inner.expect(0x06)?;
            if oid != OID_SPNEGO {
                return Err(bad("not SPNEGO"));
            }
            let (t, v) = inner.tlv()?;
            if !inner.is_empty() {
                return Err(bad("trailing data"));
            }
            match t {
                0xa0 => Ok(NegotiationToken::Init(parse_init(v)?)),
                0xa1 => Ok(NegotiationToken::Resp(parse_resp(v)?)),
                _ => Err(bad("unknown NegotiationToken choice")),
            }
        }
        0xa0 => Ok(NegotiationToken::Init(parse_init(val)?)),
        0xa1 => Ok(NegotiationToken::Resp(parse_resp(val)?)),
        _ => Err(bad("not a SPNEGO token")),
    }
}

// ---------------------------------------------------------------------------------------------
// DER writing

fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 6);
    out.push(tag);
    let n = value.len();
    if n < 0x80 {
        out.push(n as u8);
    } else if n < 0x100 {
        out.extend_from_slice(&[0x81, n as u8]);
    } else if n < 0x10000 {
        out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    } else if n < 0x100_0000 {
        out.extend_from_slice(&[0x83, (n >> 16) as u8, (n >> 8) as u8, n as u8]);
    } else {
        out.extend_from_slice(&[
            0x84,
            (n >> 24) as u8,
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
        ]);
    }
    out.extend_from_slice(value);
    out
}

fn encode_mech_types(types: &[Vec<u8>]) -> Vec<u8> {
    let mut inner = Vec::new();
    for o in types {
        inner.extend_from_slice(&tlv(0x06, o));
    }
    tlv(0x30, &inner)
}

/// Encodes a NegTokenInit wrapped in the GSS InitialContextToken (`60 ..`). When
/// `neg_hints` is set, it is encoded as NegTokenInit2 (negHints [3], mechListMIC [4]).
pub fn encode_init(t: &NegTokenInit) -> Vec<u8> {
    let mut seq = tlv(0xa0, &encode_mech_types(&t.mech_types));
    if let Some(f) = &t.req_flags {
        seq.extend_from_slice(&tlv(0xa1, &tlv(0x03, f)));
    }
    if let Some(tok) = &t.mech_token {
        seq.extend_from_slice(&tlv(0xa2, &tlv(0x04, tok)));
    }
    if let Some(h) = &t.neg_hints {
        let mut hs = Vec::new();
        if let Some(n) = &h.hint_name {
            hs.extend_from_slice(&tlv(0xa0, &tlv(0x1b, n.as_bytes())));
        }
        if let Some(a) = &h.hint_address {
            hs.extend_from_slice(&tlv(0xa1, &tlv(0x04, a)));
        }
        seq.extend_from_slice(&tlv(0xa3, &tlv(0x30, &hs)));
        if let Some(m) = &t.mech_list_mic {
            seq.extend_from_slice(&tlv(0xa4, &tlv(0x04, m)));
        }
    } else if let Some(m) = &t.mech_list_mic {
        seq.extend_from_slice(&tlv(0xa3, &tlv(0x04, m)));
    }
    let mut inner = tlv(0x06, OID_SPNEGO);
    inner.extend_from_slice(&tlv(0xa0, &tlv(0x30, &seq)));
    tlv(0x60, &inner)
}

/// Encodes a NegTokenResp (`a1 ..`).
pub fn encode_resp(t: &NegTokenResp) -> Vec<u8> {
    let mut seq = Vec::new();
    if let Some(s) = t.neg_state {
        seq.extend_from_slice(&tlv(0xa0, &tlv(0x0a, &[s.to_u8()])));
    }
    if let Some(m) = &t.supported_mech {
        seq.extend_from_slice(&tlv(0xa1, &tlv(0x06, m)));
    }
    if let Some(tok) = &t.response_token {
        seq.extend_from_slice(&tlv(0xa2, &tlv(0x04, tok)));
    }
    if let Some(m) = &t.mech_list_mic {
        seq.extend_from_slice(&tlv(0xa3, &tlv(0x04, m)));
    }
    tlv(0xa1, &tlv(0x30, &seq))
}

// ---------------------------------------------------------------------------------------------
// Convenience wrappers

/// The server's NegTokenInit2 hint: mechTypes [NTLMSSP] and the Windows negHints name.
pub fn server_init_token() -> Vec<u8> {
    server_init_token_with(&[OID_NTLMSSP])
}

/// The server's NegTokenInit2 hint listing `mechs` (OID contents), with the Windows
/// negHints name.
pub fn server_init_token_with(mechs: &[&[u8]]) -> Vec<u8> {
    encode_init(&NegTokenInit {
        mech_types: mechs.iter().map(|m| m.to_vec()).collect(),
        neg_hints: Some(NegHints {
            hint_name: Some(HINT_NAME.to_string()),
            hint_address: None,
        }),
        ..Default::default()
    })
}

/// A client's first token: NegTokenInit offering NTLMSSP with the NTLM NEGOTIATE message.
pub fn client_init_ntlm(ntlm_negotiate: &[u8]) -> Vec<u8> {
    encode_init(&NegTokenInit {
        mech_types: vec![OID_NTLMSSP.to_vec()],
        mech_token: Some(ntlm_negotiate.to_vec()),
        ..Default::default()
    })
}

/// The mechTypes DER a client using [`client_init_ntlm`] must cover with its mechListMIC.
pub fn ntlm_only_mech_types_der() -> Vec<u8> {
    encode_mech_types(&[OID_NTLMSSP.to_vec()])
}

/// A client's follow-up token: NegTokenResp carrying `token` and an optional mechListMIC.
pub fn client_resp(token: &[u8], mech_list_mic: Option<&[u8]>) -> Vec<u8> {
    encode_resp(&NegTokenResp {
        neg_state: None,
        supported_mech: None,
        response_token: Some(token.to_vec()),
        mech_list_mic: mech_list_mic.map(|m| m.to_vec()),
    })
}
