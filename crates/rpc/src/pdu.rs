//! Connection-oriented DCE/RPC PDU formats (C706 chapter 12, [MS-RPCE] 2.2.2): the common
//! header, bind/alter_context parsing and the server's PDU builders.

use crate::RpcError;
use smbx_wire::{Reader, WireError, Writer};

/// Length of the common header.
pub const HEADER_LEN: usize = 16;
/// Length of the request/response header (common header + alloc_hint, context id, opnum).
pub const REQUEST_HEADER_LEN: usize = 24;

/// `request` PDU type.
pub const PTYPE_REQUEST: u8 = 0;
/// `response` PDU type.
pub const PTYPE_RESPONSE: u8 = 2;
/// `fault` PDU type.
pub const PTYPE_FAULT: u8 = 3;
/// `bind` PDU type.
pub const PTYPE_BIND: u8 = 11;
/// `bind_ack` PDU type.
pub const PTYPE_BIND_ACK: u8 = 12;
/// `bind_nak` PDU type.
pub const PTYPE_BIND_NAK: u8 = 13;
/// `alter_context` PDU type.
pub const PTYPE_ALTER_CONTEXT: u8 = 14;
/// `alter_context_resp` PDU type.
pub const PTYPE_ALTER_CONTEXT_RESP: u8 = 15;
/// `auth3` PDU type.
pub const PTYPE_AUTH3: u8 = 16;
/// `shutdown` PDU type.
pub const PTYPE_SHUTDOWN: u8 = 17;
/// `co_cancel` PDU type.
pub const PTYPE_CO_CANCEL: u8 = 18;
/// `orphaned` PDU type.
pub const PTYPE_ORPHANED: u8 = 19;

/// First fragment of a call.
pub const PFC_FIRST_FRAG: u8 = 0x01;
/// Last fragment of a call.
pub const PFC_LAST_FRAG: u8 = 0x02;
/// Cancel was pending at the sender.
pub const PFC_PENDING_CANCEL: u8 = 0x04;
/// Concurrent multiplexing supported (bind).
pub const PFC_CONC_MPX: u8 = 0x10;
/// The call did not execute (fault).
pub const PFC_DID_NOT_EXECUTE: u8 = 0x20;
/// An object UUID follows the request header.
pub const PFC_OBJECT_UUID: u8 = 0x80;

/// Fault: operation number out of range.
pub const NCA_OP_RNG_ERROR: u32 = 0x1c01_0002;
/// Fault: unknown interface / presentation context.
pub const NCA_UNK_IF: u32 = 0x1c01_0003;
/// Fault: protocol error.
pub const NCA_PROTO_ERROR: u32 = 0x1c01_000b;
/// Fault: the stub data did not unmarshal (RPC_X_BAD_STUB_DATA).
pub const NCA_S_FAULT_NDR: u32 = 0x0000_06f7;
/// Fault: access denied (used for authenticated PDUs, which are not supported).
pub const NCA_S_FAULT_ACCESS_DENIED: u32 = 0x0000_0005;
/// Fault: unsupported data representation (big-endian or non-ASCII/IEEE).
pub const NCA_S_UNSUPPORTED_TYPE: u32 = 0x1c00_0017;

/// Presentation result: accepted.
pub const RESULT_ACCEPTANCE: u16 = 0;
/// Presentation result: provider rejection.
pub const RESULT_PROVIDER_REJECTION: u16 = 2;
/// Presentation result: bind time feature negotiation acknowledged ([MS-RPCE]).
pub const RESULT_NEGOTIATE_ACK: u16 = 3;
/// Rejection reason: abstract syntax not supported.
pub const REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED: u16 = 1;
/// Rejection reason: proposed transfer syntaxes not supported.
pub const REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED: u16 = 2;

/// bind_nak reason: not specified.
pub const NAK_REASON_NOT_SPECIFIED: u16 = 0;
/// bind_nak reason: protocol version not supported.
pub const NAK_PROTOCOL_VERSION_NOT_SUPPORTED: u16 = 4;
/// bind_nak reason: authentication type not recognized.
pub const NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED: u16 = 8;

/// Our largest fragment, sent and received (the Windows default).
pub const MAX_FRAG: u16 = 4280;
/// The smallest fragment size every implementation must accept (C706 12.6.3.1).
pub const MIN_FRAG: u16 = 1432;

/// The common header of a connection-oriented PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// PDU type (`PTYPE_*`).
    pub ptype: u8,
    /// `PFC_*` flags.
    pub flags: u8,
    /// Data representation label.
    pub drep: [u8; 4],
    /// Total length of this fragment including the header.
    pub frag_len: u16,
    /// Length of the authentication verifier.
    pub auth_len: u16,
    /// Call identifier.
    pub call_id: u32,
}

impl Header {
    /// True if integers are little-endian (`drep[0]` high nibble 1).
    pub fn little_endian(&self) -> bool {
        self.drep[0] & 0xf0 == 0x10
    }

    /// True if the data representation is the one we speak: little-endian, ASCII, IEEE.
    pub fn supported_drep(&self) -> bool {
        self.little_endian() && self.drep[0] & 0x0f == 0 && self.drep[1] == 0
    }

    /// Parses the common header from the first 16 bytes of `b`, honouring its byte order.
    pub fn parse(b: &[u8]) -> Result<Header, RpcError> {
        let h = b
            .get(..HEADER_LEN)
            .ok_or(RpcError::Malformed("short header"))?;
        if h[0] != 5 || h[1] > 1 {
            return Err(RpcError::Malformed("not DCE/RPC version 5.0/5.1"));
        }
        let drep = [h[4], h[5], h[6], h[7]];
        let le = drep[0] & 0xf0 == 0x10;
        let u16_at = |i: usize| {
            let v = [h[i], h[i + 1]];
            if le {
                u16::from_le_bytes(v)
            } else {
                u16::from_be_bytes(v)
            }
        };
        let call = [h[12], h[13], h[14], h[15]];
        let call_id = if le {
            u32::from_le_bytes(call)
        } else {
            u32::from_be_bytes(call)
        };
        let hdr = Header {
            ptype: h[2],
            flags: h[3],
            drep,
            frag_len: u16_at(8),
            auth_len: u16_at(10),
            call_id,
        };
        if usize::from(hdr.frag_len) < HEADER_LEN {
            return Err(RpcError::Malformed("fragment shorter than its header"));
        }
        Ok(hdr)
    }
}

/// Writes a common header (little-endian, no auth) with a frag_length to patch later.
fn header(w: &mut Writer, ptype: u8, flags: u8, call_id: u32) {
    w.u8(5).u8(0).u8(ptype).u8(flags);
    w.bytes(&[0x10, 0, 0, 0]);
    w.u16(0).u16(0).u32(call_id);
}

fn finish(mut w: Writer) -> Vec<u8> {
    // Every PDU we build is bounded by MAX_FRAG or a few hundred bytes.
    let len = u16::try_from(w.len()).unwrap_or(u16::MAX);
    w.patch_u16(8, len);
    w.into_vec()
}

/// An interface or transfer syntax identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxId {
    /// UUID in wire form.
    pub uuid: [u8; 16],
    /// Version: major in the low 16 bits, minor in the high 16 bits.
    pub version: u32,
}

impl SyntaxId {
    fn read(r: &mut Reader<'_>) -> Result<SyntaxId, WireError> {
        Ok(SyntaxId {
            uuid: r.guid()?,
            version: r.u32()?,
        })
    }
    const ZERO: SyntaxId = SyntaxId {
        uuid: [0; 16],
        version: 0,
    };
}

/// One presentation context offered in a bind or alter_context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextElem {
    /// Presentation context identifier.
    pub id: u16,
    /// The interface.
    pub abstract_syntax: SyntaxId,
    /// Offered transfer syntaxes.
    pub transfer_syntaxes: Vec<SyntaxId>,
}

/// The body of a bind or alter_context PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// Largest fragment the client will send.
    pub max_xmit_frag: u16,
    /// Largest fragment the client can receive.
    pub max_recv_frag: u16,
    /// Association group requested (0 = new).
    pub assoc_group_id: u32,
    /// Offered presentation contexts.
    pub contexts: Vec<ContextElem>,
}

impl Bind {
    /// Parses a little-endian bind/alter_context PDU (header included).
    pub fn parse(pdu: &[u8]) -> Result<Bind, WireError> {
        let mut r = Reader::new(pdu);
        r.skip(HEADER_LEN)?;
        let max_xmit_frag = r.u16()?;
        let max_recv_frag = r.u16()?;
        let assoc_group_id = r.u32()?;
        let n = r.u8()?;
        r.skip(3)?;
        let mut contexts = Vec::new();
        for _ in 0..n {
            let id = r.u16()?;
            let n_ts = r.u8()?;
            r.skip(1)?;
            let abstract_syntax = SyntaxId::read(&mut r)?;
            let mut transfer_syntaxes = Vec::new();
            for _ in 0..n_ts {
                transfer_syntaxes.push(SyntaxId::read(&mut r)?);
            }
            contexts.push(ContextElem {
                id,
                abstract_syntax,
                transfer_syntaxes,
            });
        }
        Ok(Bind {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            contexts,
        })
    }
}

/// One entry of a bind_ack/alter_context_resp result list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextResult {
    /// `RESULT_*`.
    pub result: u16,
    /// Rejection reason, or the acknowledged feature bits for negotiate_ack.
    pub reason: u16,
    /// Accepted transfer syntax (zero when rejected).
    pub transfer_syntax: SyntaxId,
}

impl ContextResult {
    /// An acceptance of `ts`.
    pub fn accept(ts: SyntaxId) -> Self {
        ContextResult {
            result: RESULT_ACCEPTANCE,
            reason: 0,
            transfer_syntax: ts,
        }
    }
    /// A provider rejection for `reason`.
    pub fn reject(reason: u16) -> Self {
        ContextResult {
            result: RESULT_PROVIDER_REJECTION,
            reason,
            transfer_syntax: SyntaxId::ZERO,
        }
    }
    /// A bind time feature negotiation acknowledgement with the agreed `features`.
    pub fn negotiate_ack(features: u16) -> Self {
        ContextResult {
            result: RESULT_NEGOTIATE_ACK,
            reason: features,
            transfer_syntax: SyntaxId::ZERO,
        }
    }
}

/// Builds a bind_ack (or alter_context_resp when `ptype` says so).
pub fn bind_ack(
    ptype: u8,
    call_id: u32,
    max_frag: u16,
    assoc_group_id: u32,
    sec_addr: &str,
    results: &[ContextResult],
) -> Vec<u8> {
    let mut w = Writer::with_capacity(64 + results.len() * 24);
    header(&mut w, ptype, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id);
    w.u16(max_frag).u16(max_frag).u32(assoc_group_id);
    if sec_addr.is_empty() {
        w.u16(0);
    } else {
        let len = u16::try_from(sec_addr.len() + 1).unwrap_or(0);
        w.u16(len).bytes(sec_addr.as_bytes()).u8(0);
    }
    w.align(4);
    let n = u8::try_from(results.len()).unwrap_or(u8::MAX);
    w.u8(n).u8(0).u16(0);
    for res in results.iter().take(usize::from(n)) {
        w.u16(res.result).u16(res.reason);
        w.bytes(&res.transfer_syntax.uuid)
            .u32(res.transfer_syntax.version);
    }
    finish(w)
}

/// Builds a bind_nak with `reason`, listing protocol version 5.0 as supported.
pub fn bind_nak(call_id: u32, reason: u16) -> Vec<u8> {
    let mut w = Writer::with_capacity(24);
    header(
        &mut w,
        PTYPE_BIND_NAK,
        PFC_FIRST_FRAG | PFC_LAST_FRAG,
        call_id,
    );
    w.u16(reason).u8(1).u8(5).u8(0);
    w.align(4);
    finish(w)
}

/// Builds a fault PDU.
pub fn fault(call_id: u32, context_id: u16, status: u32, did_not_execute: bool) -> Vec<u8> {
    let mut w = Writer::with_capacity(32);
    let mut flags = PFC_FIRST_FRAG | PFC_LAST_FRAG;
    if did_not_execute {
        flags |= PFC_DID_NOT_EXECUTE;
    }
    header(&mut w, PTYPE_FAULT, flags, call_id);
    w.u32(0).u16(context_id).u8(0).u8(0);
    w.u32(status).u32(0);
    finish(w)
}

/// Splits a response stub into response PDUs of at most `max_frag` bytes each.
pub fn responses(call_id: u32, context_id: u16, stub: &[u8], max_frag: u16) -> Vec<Vec<u8>> {
    // Stub bytes per fragment, a multiple of 8 so every fragment keeps NDR alignment.
    let room = usize::from(max_frag.max(MIN_FRAG)) - REQUEST_HEADER_LEN;
    let room = room - room % 8;
    let mut out = Vec::with_capacity(stub.len() / room + 1);
    let mut off = 0usize;
    loop {
        let chunk = stub.get(off..).unwrap_or_default();
        let take = chunk.len().min(room);
        let mut flags = 0;
        if off == 0 {
            flags |= PFC_FIRST_FRAG;
        }
        if take == chunk.len() {
            flags |= PFC_LAST_FRAG;
        }
        let mut w = Writer::with_capacity(REQUEST_HEADER_LEN + take);
        header(&mut w, PTYPE_RESPONSE, flags, call_id);
        let alloc_hint = u32::try_from(chunk.len()).unwrap_or(u32::MAX);
        w.u32(alloc_hint).u16(context_id).u8(0).u8(0);
        w.bytes(chunk.get(..take).unwrap_or_default());
        out.push(finish(w));
        off += take;
        if off >= stub.len() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parse_checks_version_and_length() {
        let mut b = [0u8; 16];
        assert!(Header::parse(&b).is_err());
        b[0] = 5;
        b[4] = 0x10;
        b[8] = 15;
        assert!(Header::parse(&b).is_err());
        b[8] = 16;
        let h = Header::parse(&b).unwrap();
        assert!(h.little_endian() && h.supported_drep());
        b[4] = 0;
        b[8] = 0;
        b[9] = 20;
        let h = Header::parse(&b).unwrap();
        assert_eq!(h.frag_len, 20);
        assert!(!h.little_endian());
        assert!(Header::parse(&b[..10]).is_err());
    }

    #[test]
    fn fault_layout() {
        let f = fault(7, 1, NCA_OP_RNG_ERROR, true);
        assert_eq!(f.len(), 32);
        assert_eq!(&f[..4], &[5, 0, PTYPE_FAULT, 0x23]);
        assert_eq!(u16::from_le_bytes([f[8], f[9]]), 32);
        assert_eq!(u32::from_le_bytes([f[12], f[13], f[14], f[15]]), 7);
        assert_eq!(u16::from_le_bytes([f[20], f[21]]), 1);
        assert_eq!(
            u32::from_le_bytes([f[24], f[25], f[26], f[27]]),
            NCA_OP_RNG_ERROR
        );
    }

    #[test]
    fn bind_nak_layout() {
        let n = bind_nak(3, NAK_REASON_NOT_SPECIFIED);
        assert_eq!(n.len(), 24);
        assert_eq!(n[2], PTYPE_BIND_NAK);
        assert_eq!(&n[16..21], &[0, 0, 1, 5, 0]);
    }

    #[test]
    fn empty_stub_is_one_fragment() {
        let r = responses(1, 0, &[], MAX_FRAG);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].len(), 24);
        assert_eq!(r[0][3], PFC_FIRST_FRAG | PFC_LAST_FRAG);
    }
}
