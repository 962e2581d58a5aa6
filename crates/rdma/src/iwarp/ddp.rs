//! FPDU framing (RFC 5044 section 4) with DDP (RFC 5041) and RDMAP (RFC 5040)
//! headers: encoder into a reusable buffer and a zero-copy decoder.

use super::crc::Crc32c;
use crate::types::TermInfo;

/// DDP control: tagged.
pub const DDP_T: u8 = 0x80;
/// DDP control: last segment.
pub const DDP_L: u8 = 0x40;
/// DDP version 1.
pub const DDP_DV: u8 = 0x01;
/// RDMAP version 1 (RV bits = 01).
pub const RDMAP_RV: u8 = 0x40;
/// Tagged DDP+RDMAP header length.
pub const TAGGED_HDR: usize = 14;
/// Untagged DDP+RDMAP header length.
pub const UNTAGGED_HDR: usize = 18;
/// RDMAP Read Request header after the untagged header.
pub const READ_REQ_LEN: usize = 28;

/// RDMAP opcodes.
pub mod op {
    /// RDMA Write.
    pub const WRITE: u8 = 0;
    /// RDMA Read Request.
    pub const READ_REQ: u8 = 1;
    /// RDMA Read Response.
    pub const READ_RESP: u8 = 2;
    /// Send.
    pub const SEND: u8 = 3;
    /// Send with Invalidate.
    pub const SEND_INV: u8 = 4;
    /// Send with Solicited Event.
    pub const SEND_SE: u8 = 5;
    /// Send with SE and Invalidate.
    pub const SEND_SE_INV: u8 = 6;
    /// Terminate.
    pub const TERMINATE: u8 = 7;
}

/// Untagged queue numbers.
pub mod qn {
    /// Sends.
    pub const SEND: u32 = 0;
    /// Read Requests.
    pub const READ: u32 = 1;
    /// Terminate.
    pub const TERMINATE: u32 = 2;
}

/// Terminate error triples used by this provider.
pub mod term {
    use crate::types::TermInfo;
    const fn t(layer: u8, etype: u8, ecode: u8) -> TermInfo {
        TermInfo {
            layer,
            etype,
            ecode,
        }
    }
    /// RDMAP remote protection: invalid STag.
    pub const RDMAP_INVALID_STAG: TermInfo = t(0, 1, 0x00);
    /// RDMAP remote protection: base or bounds violation.
    pub const RDMAP_BASE_BOUNDS: TermInfo = t(0, 1, 0x01);
    /// RDMAP remote protection: access rights violation.
    pub const RDMAP_ACCESS: TermInfo = t(0, 1, 0x02);
    /// RDMAP remote protection: TO wrap.
    pub const RDMAP_TO_WRAP: TermInfo = t(0, 1, 0x04);
    /// RDMAP remote protection: STag cannot be invalidated.
    pub const RDMAP_CANNOT_INVALIDATE: TermInfo = t(0, 1, 0x09);
    /// RDMAP remote operation: invalid RDMAP version.
    pub const RDMAP_VERSION: TermInfo = t(0, 2, 0x05);
    /// RDMAP remote operation: unexpected opcode.
    pub const RDMAP_OPCODE: TermInfo = t(0, 2, 0x06);
    /// DDP tagged: invalid STag.
    pub const DDP_T_INVALID_STAG: TermInfo = t(1, 1, 0x00);
    /// DDP tagged: base or bounds violation.
    pub const DDP_T_BASE_BOUNDS: TermInfo = t(1, 1, 0x01);
    /// DDP tagged: TO wrap.
    pub const DDP_T_TO_WRAP: TermInfo = t(1, 1, 0x03);
    /// DDP tagged: invalid DDP version.
    pub const DDP_T_VERSION: TermInfo = t(1, 1, 0x04);
    /// DDP untagged: invalid QN.
    pub const DDP_UT_INVALID_QN: TermInfo = t(1, 2, 0x01);
    /// DDP untagged: invalid MSN, no buffer available (no posted receive).
    pub const DDP_UT_NO_BUFFER: TermInfo = t(1, 2, 0x02);
    /// DDP untagged: invalid MSN, range not valid.
    pub const DDP_UT_MSN_RANGE: TermInfo = t(1, 2, 0x03);
    /// DDP untagged: invalid MO.
    pub const DDP_UT_INVALID_MO: TermInfo = t(1, 2, 0x04);
    /// DDP untagged: message too long for the available buffer.
    pub const DDP_UT_TOO_LONG: TermInfo = t(1, 2, 0x05);
    /// DDP untagged: invalid DDP version.
    pub const DDP_UT_VERSION: TermInfo = t(1, 2, 0x06);
    /// LLP/MPA: CRC error.
    pub const MPA_CRC: TermInfo = t(2, 0, 0x02);
    /// LLP/MPA: FPDU framing error (ULPDU length does not fit).
    pub const MPA_FPDU_START: TermInfo = t(2, 0, 0x03);
    /// LLP/MPA: insufficient IRD (enhanced setup).
    pub const MPA_INSUFFICIENT_IRD: TermInfo = t(2, 0, 0x06);
    /// LLP/MPA: no matching RTR (enhanced setup).
    pub const MPA_NO_MATCHING_RTR: TermInfo = t(2, 0, 0x07);
}

/// A decoded DDP/RDMAP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DdpHdr {
    /// Tagged segment (RDMA Write, Read Response).
    Tagged {
        /// L bit.
        last: bool,
        /// RDMAP opcode.
        opcode: u8,
        /// STag.
        stag: u32,
        /// Tagged offset.
        to: u64,
    },
    /// Untagged segment (Send*, Read Request, Terminate).
    Untagged {
        /// L bit.
        last: bool,
        /// RDMAP opcode.
        opcode: u8,
        /// Invalidate STag (Send with Invalidate), else reserved.
        inv_stag: u32,
        /// Queue number.
        qn: u32,
        /// Message sequence number.
        msn: u32,
        /// Message offset.
        mo: u32,
    },
}

impl DdpHdr {
    /// Header length on the wire.
    pub fn len(&self) -> usize {
        match self {
            DdpHdr::Tagged { .. } => TAGGED_HDR,
            DdpHdr::Untagged { .. } => UNTAGGED_HDR,
        }
    }
    /// Never empty (for clippy's len/is_empty pairing).
    pub fn is_empty(&self) -> bool {
        false
    }

    fn write(&self, out: &mut Vec<u8>) {
        match *self {
            DdpHdr::Tagged {
                last,
                opcode,
                stag,
                to,
            } => {
                out.push(DDP_T | if last { DDP_L } else { 0 } | DDP_DV);
                out.push(RDMAP_RV | (opcode & 0x0F));
                out.extend_from_slice(&stag.to_be_bytes());
                out.extend_from_slice(&to.to_be_bytes());
            }
            DdpHdr::Untagged {
                last,
                opcode,
                inv_stag,
                qn,
                msn,
                mo,
            } => {
                out.push(if last { DDP_L } else { 0 } | DDP_DV);
                out.push(RDMAP_RV | (opcode & 0x0F));
                out.extend_from_slice(&inv_stag.to_be_bytes());
                out.extend_from_slice(&qn.to_be_bytes());
                out.extend_from_slice(&msn.to_be_bytes());
                out.extend_from_slice(&mo.to_be_bytes());
            }
        }
    }
}

/// Pad length so that `2 + ulpdu_len + pad` is a multiple of 4 (and so
/// `6 + ulpdu_len + pad`: the long form's FPDU is a multiple of 4 too).
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - ((2 + ulpdu_len) % 4)) % 4
}

/// Largest ULPDU MPA's 16-bit length field carries (RFC 5044).
pub const MPA_MAX_ULPDU: usize = u16::MAX as usize;

/// Bytes of the long form's length: smbx's large FPDUs, framed only between two
/// ends that both offered them in the MPA exchange ([`super::mpa::LargeFpdus`]).
/// A ULPDU longer than [`MPA_MAX_ULPDU`] is framed as a zero 16-bit length
/// (never a standard one: a ULPDU holds at least a tagged header) followed by
/// its length as a big-endian u32; every shorter ULPDU keeps the standard
/// 2-byte form, so a long length is always above [`MPA_MAX_ULPDU`]. The rest is
/// as in RFC 5044: the pad makes the whole FPDU a multiple of 4 bytes
/// ([`pad_len`] holds for both forms, as 6 and 2 leave the same remainder) and
/// the CRC, when on, covers all six length bytes, the ULPDU and the pad.
pub const LONG_PREFIX: usize = 6;

/// Bytes in front of a ULPDU of `ulpdu` bytes: 2, or [`LONG_PREFIX`] for one
/// longer than [`MPA_MAX_ULPDU`].
pub const fn prefix_len(ulpdu: usize) -> usize {
    if ulpdu > MPA_MAX_ULPDU {
        LONG_PREFIX
    } else {
        2
    }
}

/// Bytes after a ULPDU of `ulpdu` bytes: its pad and the CRC field.
pub const fn trailer_len(ulpdu: usize) -> usize {
    pad_len(ulpdu) + 4
}

/// Appends the length field of a ULPDU of `ulpdu` bytes in the form its length
/// needs ([`prefix_len`]).
fn put_len(out: &mut Vec<u8>, ulpdu: usize) {
    debug_assert!(u32::try_from(ulpdu).is_ok());
    if ulpdu > MPA_MAX_ULPDU {
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&(ulpdu as u32).to_be_bytes());
    } else {
        out.extend_from_slice(&(ulpdu as u16).to_be_bytes());
    }
}

/// Append one FPDU to `out`: header, then the payload pieces, pad and CRC
/// (zero when `crc` is off). A ULPDU longer than [`MPA_MAX_ULPDU`] takes the
/// long form ([`LONG_PREFIX`]): only for a peer that offered it.
pub fn encode_fpdu(out: &mut Vec<u8>, hdr: &DdpHdr, payload: &[&[u8]], crc: bool) {
    let plen: usize = payload.iter().map(|p| p.len()).sum();
    let ulpdu = hdr.len() + plen;
    let start = out.len();
    let pad = pad_len(ulpdu);
    out.reserve(prefix_len(ulpdu) + ulpdu + pad + 4);
    put_len(out, ulpdu);
    hdr.write(out);
    for p in payload {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(&[0u8; 3][..pad]);
    let c = if crc {
        let mut c = Crc32c::new();
        c.update(&out[start..]);
        c.finish()
    } else {
        0
    };
    out.extend_from_slice(&c.to_le_bytes());
}

/// Append the length field and header of an FPDU whose `len` payload bytes
/// are sent from elsewhere (vectored output); [`encode_fpdu_tail`] follows
/// them.
pub fn encode_fpdu_head(out: &mut Vec<u8>, hdr: &DdpHdr, len: usize) {
    put_len(out, hdr.len() + len);
    hdr.write(out);
}

/// Append the pad and CRC of an FPDU of `ulpdu` bytes; `crc` holds the CRC-32C
/// over its length field, header and payload so far (`None`: CRC off, zero).
pub fn encode_fpdu_tail(out: &mut Vec<u8>, ulpdu: usize, crc: Option<Crc32c>) {
    let pad = &[0u8; 3][..pad_len(ulpdu)];
    out.extend_from_slice(pad);
    let c = crc.map_or(0, |mut c| {
        c.update(pad);
        c.finish()
    });
    out.extend_from_slice(&c.to_le_bytes());
}

/// Append an FPDU whose payload is `len` bytes produced in place by `fill`
/// (e.g. copied from a locked memory region), without an intermediate buffer.
pub fn encode_fpdu_with(
    out: &mut Vec<u8>,
    hdr: &DdpHdr,
    len: usize,
    crc: bool,
    fill: impl FnOnce(&mut [u8]),
) {
    let ulpdu = hdr.len() + len;
    let start = out.len();
    let pad = pad_len(ulpdu);
    out.reserve(prefix_len(ulpdu) + ulpdu + pad + 4);
    put_len(out, ulpdu);
    hdr.write(out);
    let p = out.len();
    out.resize(p + len + pad, 0);
    fill(&mut out[p..p + len]);
    let c = if crc {
        let mut c = Crc32c::new();
        c.update(&out[start..]);
        c.finish()
    } else {
        0
    };
    out.extend_from_slice(&c.to_le_bytes());
}

/// One decoded FPDU borrowing the receive buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Fpdu<'a> {
    /// DDP/RDMAP header.
    pub hdr: DdpHdr,
    /// Bytes after the header.
    pub payload: &'a [u8],
    /// Total FPDU length consumed from the stream.
    pub wire_len: usize,
}

/// A decode failure: the Terminate to send, and the raw header bytes (up to
/// 18) for the Terminate's "terminated DDP header" field when known.
#[derive(Debug, PartialEq, Eq)]
pub struct FpduError {
    /// The error triple.
    pub term: TermInfo,
}

/// Decode the FPDU at the front of `buf` (standard MPA framing). `Ok(None)`:
/// need more bytes.
pub fn decode_fpdu(buf: &[u8], crc: bool) -> Result<Option<Fpdu<'_>>, FpduError> {
    decode_fpdu_long(buf, crc, None)
}

/// [`decode_fpdu`] on a connection whose peer may send the long form
/// ([`LONG_PREFIX`]) for ULPDUs of up to `long` bytes (`None`: it may not, and
/// a zero length is a framing error as in standard MPA). A long length at or
/// below [`MPA_MAX_ULPDU`] or above `long` is a framing error.
pub fn decode_fpdu_long(
    buf: &[u8],
    crc: bool,
    long: Option<usize>,
) -> Result<Option<Fpdu<'_>>, FpduError> {
    let Some((ulpdu, p)) = ulpdu_len(buf, long)? else {
        return Ok(None);
    };
    let total = p + ulpdu + trailer_len(ulpdu);
    let Some(f) = buf.get(..total) else {
        return Ok(None);
    };
    if crc {
        let mut c = Crc32c::new();
        c.update(&f[..total - 4]);
        let got = u32::from_le_bytes([f[total - 4], f[total - 3], f[total - 2], f[total - 1]]);
        if c.finish() != got {
            return Err(FpduError {
                term: term::MPA_CRC,
            });
        }
    }
    let u = &f[p..p + ulpdu];
    let hdr = parse_hdr(u)?;
    Ok(Some(Fpdu {
        hdr,
        payload: &u[hdr.len()..],
        wire_len: total,
    }))
}

/// Decode only the header of the FPDU at the front of `buf` (its payload may
/// not have arrived): the header and the ULPDU length. `Ok(None)`: the header
/// is not complete yet. The CRC, which covers the whole FPDU, is not checked.
/// `long` as for [`decode_fpdu_long`]; the header starts [`prefix_len`] of the
/// ULPDU's length into `buf`.
pub fn decode_header(
    buf: &[u8],
    long: Option<usize>,
) -> Result<Option<(DdpHdr, usize)>, FpduError> {
    let Some((ulpdu, p)) = ulpdu_len(buf, long)? else {
        return Ok(None);
    };
    let Some(&ctl) = buf.get(p) else {
        return Ok(None);
    };
    let need = if ctl & DDP_T != 0 {
        TAGGED_HDR
    } else {
        UNTAGGED_HDR
    };
    let Some(u) = buf.get(p..p + need.min(ulpdu)) else {
        return Ok(None);
    };
    Ok(Some((parse_hdr(u)?, ulpdu)))
}

/// Bytes on the wire of an FPDU whose ULPDU is `ulpdu` bytes: length field
/// (either form), ULPDU, pad and CRC.
pub const fn fpdu_len(ulpdu: usize) -> usize {
    prefix_len(ulpdu) + ulpdu + trailer_len(ulpdu)
}

/// The bytes a Terminate reports as the terminated segment's length and DDP
/// header (`hdr_len` bytes of it) from the FPDU at the front of `buf`: none
/// for the long form, whose length does not fit the field.
pub fn terminated_header(buf: &[u8], hdr_len: usize) -> Option<&[u8]> {
    buf.get(..2 + hdr_len).filter(|b| b[..2] != [0, 0])
}

/// The ULPDU length at the front of `buf` and the bytes its field takes (2, or
/// [`LONG_PREFIX`] for the long form where `long` allows it), checked to hold at
/// least a tagged header and, in the long form, to be above [`MPA_MAX_ULPDU`]
/// and at most `long`; `Ok(None)` before the field arrived.
fn ulpdu_len(buf: &[u8], long: Option<usize>) -> Result<Option<(usize, usize)>, FpduError> {
    let bad = || FpduError {
        term: term::MPA_FPDU_START,
    };
    let Some(lb) = buf.get(..2) else {
        return Ok(None);
    };
    let ulpdu = usize::from(u16::from_be_bytes([lb[0], lb[1]]));
    if ulpdu == 0 {
        if let Some(max) = long {
            let Some(b) = buf.get(2..LONG_PREFIX) else {
                return Ok(None);
            };
            let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            return match usize::try_from(n) {
                Ok(n) if n > MPA_MAX_ULPDU && n <= max => Ok(Some((n, LONG_PREFIX))),
                _ => Err(bad()),
            };
        }
    }
    // The smallest legal ULPDU is a tagged header; anything shorter cannot be framed.
    if ulpdu < TAGGED_HDR {
        return Err(bad());
    }
    Ok(Some((ulpdu, 2)))
}

/// Parse the DDP/RDMAP header at the front of the ULPDU bytes `u` (at least
/// [`TAGGED_HDR`] long; an untagged header needs [`UNTAGGED_HDR`]).
fn parse_hdr(u: &[u8]) -> Result<DdpHdr, FpduError> {
    let err = |term| Err(FpduError { term });
    let (ctl, rd) = match u {
        [c, r, ..] => (*c, *r),
        _ => return err(term::MPA_FPDU_START),
    };
    let tagged = ctl & DDP_T != 0;
    let last = ctl & DDP_L != 0;
    if ctl & 0x03 != DDP_DV {
        return err(if tagged {
            term::DDP_T_VERSION
        } else {
            term::DDP_UT_VERSION
        });
    }
    if rd & 0xC0 != RDMAP_RV {
        return err(term::RDMAP_VERSION);
    }
    let opcode = rd & 0x0F;
    let need = if tagged { TAGGED_HDR } else { UNTAGGED_HDR };
    let Some(h) = u.get(..need) else {
        return err(term::MPA_FPDU_START);
    };
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    Ok(if tagged {
        DdpHdr::Tagged {
            last,
            opcode,
            stag: be32(2),
            to: (u64::from(be32(6)) << 32) | u64::from(be32(10)),
        }
    } else {
        DdpHdr::Untagged {
            last,
            opcode,
            inv_stag: be32(2),
            qn: be32(6),
            msn: be32(10),
            mo: be32(14),
        }
    })
}

/// A decoded RDMA Read Request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadReq {
    /// Sink STag (requester's buffer).
    pub sink_stag: u32,
    /// Sink tagged offset.
    pub sink_to: u64,
    /// Bytes to read.
    pub size: u32,
    /// Source STag (responder's buffer).
    pub src_stag: u32,
    /// Source tagged offset.
    pub src_to: u64,
}

impl ReadReq {
    /// Encode the 28-byte body.
    pub fn encode(&self) -> [u8; READ_REQ_LEN] {
        let mut b = [0u8; READ_REQ_LEN];
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.src_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.src_to.to_be_bytes());
        b
    }
    /// Decode; `None` unless exactly 28 bytes.
    pub fn decode(b: &[u8]) -> Option<ReadReq> {
        if b.len() != READ_REQ_LEN {
            return None;
        }
        let be32 = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let be64 = |o: usize| (u64::from(be32(o)) << 32) | u64::from(be32(o + 4));
        Some(ReadReq {
            sink_stag: be32(0),
            sink_to: be64(4),
            size: be32(12),
            src_stag: be32(16),
            src_to: be64(20),
        })
    }
}

/// Encode a Terminate message body: the control word, then (D flag) the
/// terminated DDP segment's length and header when given.
pub fn terminate_body(t: TermInfo, ddp_hdr: Option<&[u8]>, out: &mut [u8; 4 + 2 + 18]) -> usize {
    let mut w = (u32::from(t.layer & 0x0F) << 28)
        | (u32::from(t.etype & 0x0F) << 24)
        | (u32::from(t.ecode) << 16);
    let mut n = 4;
    if let Some(h) = ddp_hdr {
        if h.len() == TAGGED_HDR + 2 || h.len() == UNTAGGED_HDR + 2 {
            w |= 0x4000;
            out[4..4 + h.len()].copy_from_slice(h);
            n += h.len();
        }
    }
    out[..4].copy_from_slice(&w.to_be_bytes());
    n
}

/// Decode a Terminate body's error triple.
pub fn parse_terminate(payload: &[u8]) -> Option<TermInfo> {
    let b = payload.get(..4)?;
    let w = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some(TermInfo {
        layer: (w >> 28) as u8,
        etype: ((w >> 24) & 0x0F) as u8,
        ecode: ((w >> 16) & 0xFF) as u8,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The header of a whole Send, the first on its queue (MSN 1), no STag to
    /// invalidate: that of the spec reference's test vector.
    pub(crate) fn first_send() -> DdpHdr {
        DdpHdr::Untagged {
            last: true,
            opcode: op::SEND,
            inv_stag: 0,
            qn: qn::SEND,
            msn: 1,
            mo: 0,
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The spec reference's test vector: an SMB Direct Negotiate Request in a
    /// Send, MSN 1, CRC on, 44 bytes, CRC transmitted LSB first.
    #[test]
    fn negotiate_request_vector() {
        let want = hex(
            "0026 4143 00000000 00000000 00000001 00000000 0001 0001 0000 ff00 \
             54050000 54050000 00001000 1a4308ba",
        );
        assert_eq!(want.len(), 44);
        let payload = &want[20..40];
        let hdr = first_send();
        let mut out = Vec::new();
        encode_fpdu(&mut out, &hdr, &[payload], true);
        assert_eq!(out, want);
        let mut out2 = Vec::new();
        encode_fpdu_with(&mut out2, &hdr, 20, true, |b| b.copy_from_slice(payload));
        assert_eq!(out2, want);
        let f = decode_fpdu(&want, true).unwrap().unwrap();
        assert_eq!(f.hdr, hdr);
        assert_eq!(f.payload, payload);
        assert_eq!(f.wire_len, 44);
        // CRC off: field present and zero.
        let mut out3 = Vec::new();
        encode_fpdu(&mut out3, &hdr, &[payload], false);
        assert_eq!(&out3[..40], &want[..40]);
        assert_eq!(&out3[40..], &[0, 0, 0, 0]);
    }

    #[test]
    fn partial_and_bad_frames() {
        let hdr = DdpHdr::Tagged {
            last: true,
            opcode: op::WRITE,
            stag: 0x1234,
            to: 0xdead_beef_0000,
        };
        let mut out = Vec::new();
        encode_fpdu(&mut out, &hdr, &[b"abcde"], true);
        assert_eq!(out.len() % 4, 0);
        for n in 0..out.len() {
            assert_eq!(decode_fpdu(&out[..n], true).unwrap(), None);
        }
        let f = decode_fpdu(&out, true).unwrap().unwrap();
        assert_eq!(f.hdr, hdr);
        assert_eq!(f.payload, b"abcde");
        let mut bad = out.clone();
        bad[17] ^= 1;
        assert_eq!(decode_fpdu(&bad, true).unwrap_err().term, term::MPA_CRC);
        // Without CRC the flipped byte is accepted.
        assert!(decode_fpdu(&bad, false).unwrap().is_some());
        // Too-short ULPDU.
        assert_eq!(
            decode_fpdu(&[0, 3, 0, 0, 0, 0, 0, 0, 0], false)
                .unwrap_err()
                .term,
            term::MPA_FPDU_START
        );
        // Bad versions.
        let mut v = out.clone();
        v[2] = (v[2] & !3) | 2;
        assert_eq!(
            decode_fpdu(&v, false).unwrap_err().term,
            term::DDP_T_VERSION
        );
        let mut v = out.clone();
        v[3] = 0x80;
        assert_eq!(
            decode_fpdu(&v, false).unwrap_err().term,
            term::RDMAP_VERSION
        );
    }

    fn err(r: Result<Option<Fpdu<'_>>, FpduError>) -> TermInfo {
        r.unwrap_err().term
    }

    /// The long form of smbx's large FPDUs: a ULPDU above 16 bits framed as a zero
    /// length and a u32, by every encoder alike; decoded only where it is allowed and
    /// within the limit, at every byte boundary "need more", pad and CRC as in the
    /// standard form. ULPDUs up to 16 bits keep the standard form.
    #[test]
    fn long_form_frames() {
        let hdr = DdpHdr::Tagged {
            last: true,
            opcode: op::WRITE,
            stag: 7,
            to: 0x1000,
        };
        for plen in [
            MPA_MAX_ULPDU - TAGGED_HDR + 1,
            70_001,
            70_002,
            70_003,
            262_144,
        ] {
            let payload: Vec<u8> = (0..plen).map(|i| (i * 7) as u8).collect();
            let ulpdu = TAGGED_HDR + plen;
            for crc in [false, true] {
                let mut out = Vec::new();
                encode_fpdu(&mut out, &hdr, &[&payload[..10], &payload[10..]], crc);
                assert_eq!(out[..2], [0, 0]);
                assert_eq!(out[2..6], (ulpdu as u32).to_be_bytes());
                assert_eq!(out.len(), fpdu_len(ulpdu));
                assert_eq!(out.len(), LONG_PREFIX + ulpdu + trailer_len(ulpdu));
                assert_eq!(out.len() % 4, 0, "{plen}");
                // The header-and-tail encoders and the in-place one agree.
                let mut two = Vec::new();
                encode_fpdu_head(&mut two, &hdr, plen);
                let c = crc.then(|| {
                    let mut c = Crc32c::new();
                    c.update(&two);
                    c.update(&payload);
                    c
                });
                two.extend_from_slice(&payload);
                encode_fpdu_tail(&mut two, ulpdu, c);
                assert_eq!(two, out);
                let mut with = Vec::new();
                encode_fpdu_with(&mut with, &hdr, plen, crc, |b| b.copy_from_slice(&payload));
                assert_eq!(with, out);
                let f = decode_fpdu_long(&out, crc, Some(ulpdu)).unwrap().unwrap();
                assert_eq!(
                    (f.hdr, f.payload, f.wire_len),
                    (hdr, &payload[..], out.len())
                );
                assert_eq!(
                    decode_header(&out, Some(ulpdu)).unwrap(),
                    Some((hdr, ulpdu))
                );
                // Where it was not offered, or above the limit: a framing error.
                assert_eq!(err(decode_fpdu(&out, crc)), term::MPA_FPDU_START);
                assert_eq!(
                    err(decode_fpdu_long(&out, crc, Some(ulpdu - 1))),
                    term::MPA_FPDU_START
                );
                assert_eq!(
                    decode_header(&out, None).unwrap_err().term,
                    term::MPA_FPDU_START
                );
                assert_eq!(terminated_header(&out, TAGGED_HDR), None);
                if crc {
                    let mut bad = out.clone();
                    bad[LONG_PREFIX + TAGGED_HDR + plen / 2] ^= 0x10;
                    assert_eq!(
                        err(decode_fpdu_long(&bad, true, Some(ulpdu))),
                        term::MPA_CRC
                    );
                }
            }
        }
        // Every byte boundary of one: "need more" until the last byte, the header once
        // its 6 + 14 bytes are in.
        let payload = vec![0x5A; 65_600];
        let ulpdu = TAGGED_HDR + payload.len();
        let mut out = Vec::new();
        encode_fpdu(&mut out, &hdr, &[&payload], true);
        for n in 0..out.len() {
            assert_eq!(
                decode_fpdu_long(&out[..n], true, Some(ulpdu)).unwrap(),
                None,
                "{n}"
            );
            let h = decode_header(&out[..n], Some(ulpdu)).unwrap();
            assert_eq!(h.is_some(), n >= LONG_PREFIX + TAGGED_HDR, "{n}");
        }
        // A long length that fits 16 bits is not the canonical form, zero is no length;
        // an untagged header needs its 18 bytes after the six.
        for n in [0u32, TAGGED_HDR as u32, MPA_MAX_ULPDU as u32] {
            let mut b = vec![0, 0];
            b.extend_from_slice(&n.to_be_bytes());
            b.resize(LONG_PREFIX + 64, 0x41);
            assert_eq!(
                decode_fpdu_long(&b, false, Some(1 << 20)).unwrap_err().term,
                term::MPA_FPDU_START
            );
        }
        let send = first_send();
        let mut u = Vec::new();
        encode_fpdu(&mut u, &send, &[&payload], false);
        assert_eq!(
            decode_header(&u[..LONG_PREFIX + UNTAGGED_HDR - 1], Some(1 << 20)).unwrap(),
            None
        );
        assert!(
            decode_header(&u[..LONG_PREFIX + UNTAGGED_HDR], Some(1 << 20))
                .unwrap()
                .is_some()
        );
        // Up to 16 bits the standard form stays, with the long form allowed or not.
        let mut std = Vec::new();
        encode_fpdu(
            &mut std,
            &hdr,
            &[&payload[..MPA_MAX_ULPDU - TAGGED_HDR]],
            false,
        );
        assert_eq!(std[..2], [0xFF, 0xFF]);
        assert_eq!(std.len(), fpdu_len(MPA_MAX_ULPDU));
        for long in [None, Some(1 << 20)] {
            let f = decode_fpdu_long(&std, false, long).unwrap().unwrap();
            assert_eq!(f.payload.len(), MPA_MAX_ULPDU - TAGGED_HDR);
        }
        assert_eq!(terminated_header(&std, TAGGED_HDR), Some(&std[..16]));
    }

    #[test]
    fn read_request_and_terminate_bodies() {
        let r = ReadReq {
            sink_stag: 1,
            sink_to: 2,
            size: 3,
            src_stag: 4,
            src_to: 5,
        };
        assert_eq!(ReadReq::decode(&r.encode()), Some(r));
        assert_eq!(ReadReq::decode(&[0; 27]), None);
        let mut b = [0u8; 24];
        let n = terminate_body(term::DDP_UT_NO_BUFFER, None, &mut b);
        assert_eq!(n, 4);
        assert_eq!(&b[..4], &[0x12, 0x02, 0x00, 0x00]);
        assert_eq!(parse_terminate(&b[..4]), Some(term::DDP_UT_NO_BUFFER));
    }
}
