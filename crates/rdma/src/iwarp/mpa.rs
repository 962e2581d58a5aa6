//! MPA connection setup (RFC 5044 section 7, enhanced by RFC 6581): the
//! Request/Reply frames and the initiator and responder state machines.
//! Sans-IO: bytes in, frames/decisions out.

/// Key of an MPA Request frame.
pub const KEY_REQ: &[u8; 16] = b"MPA ID Req Frame";
/// Key of an MPA Reply frame.
pub const KEY_REP: &[u8; 16] = b"MPA ID Rep Frame";
/// Flag: markers.
pub const FLAG_M: u8 = 0x80;
/// Flag: CRC.
pub const FLAG_C: u8 = 0x40;
/// Flag: reject.
pub const FLAG_R: u8 = 0x20;
/// Flag: enhanced connection establishment (RFC 6581).
pub const FLAG_ENHANCED: u8 = 0x10;
/// Largest private data length accepted on the wire (RFC 5044).
pub const MAX_WIRE_PRIVATE_DATA: usize = 512;

/// IRD word: peer-to-peer mode requested/accepted.
pub const IRD_P2P: u16 = 0x8000;
/// IRD word: zero-length Send RTR.
pub const IRD_SEND_RTR: u16 = 0x4000;
/// ORD word: zero-length RDMA Write RTR.
pub const ORD_WRITE_RTR: u16 = 0x8000;
/// ORD word: zero-length RDMA Read RTR.
pub const ORD_READ_RTR: u16 = 0x4000;
/// Mask of the IRD/ORD value bits.
pub const IRD_ORD_MASK: u16 = 0x3FFF;

/// Magic of smbx's large-FPDU offer: the first 8 of the [`LARGE_TRAILER`] bytes
/// at the end of an MPA frame's private data.
pub const LARGE_MAGIC: [u8; 8] = *b"smbxLFPD";
/// Bytes of the offer: [`LARGE_MAGIC`], then the largest ULPDU its sender
/// receives in the long form ([`super::ddp::LONG_PREFIX`]), a big-endian u32.
pub const LARGE_TRAILER: usize = 12;
/// Most private data (the enhanced IRD/ORD word included) an offer may bring a
/// frame to: Linux siw refuses a frame with more than 256 bytes.
const OFFER_MAX_PRIVATE_DATA: usize = 256;

/// smbx's large FPDUs on a connection where both ends offered them: ULPDUs
/// above MPA's 16-bit length, framed in the long form
/// ([`super::ddp::LONG_PREFIX`]).
///
/// The initiator offers them in a trailer at the end of its Request's private
/// data ([`offer_large`]); a responder that knows it answers with the same
/// trailer in its Reply ([`accept_large`]), each naming the largest ULPDU it
/// receives. Both strip the trailer before the consumer sees the private data
/// ([`split_large`]). Only with CRC off (an FPDU is then placed as it arrives
/// instead of gathered whole to be checked). A standard peer never sends the
/// trailer: Linux siw hands a Request's private data after the enhanced
/// IRD/ORD word to its consumer (ksmbd reads it only when it is exactly 8
/// bytes) and its Reply carries only what its own consumer gives, so towards
/// it the connection keeps standard MPA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeFpdus {
    /// Largest ULPDU this end sends: the peer's offer (at most our own).
    pub send: usize,
    /// Largest ULPDU this end receives: its own offer.
    pub recv: usize,
}

impl LargeFpdus {
    /// The limits when we offered `ours` and the peer `theirs`.
    fn new(ours: u32, theirs: u32) -> LargeFpdus {
        LargeFpdus {
            send: theirs.min(ours) as usize,
            recv: ours as usize,
        }
    }
}

/// The offer's trailer for receiving ULPDUs of up to `max` bytes.
fn large_trailer(max: u32) -> [u8; LARGE_TRAILER] {
    let mut t = [0u8; LARGE_TRAILER];
    t[..8].copy_from_slice(&LARGE_MAGIC);
    t[8..].copy_from_slice(&max.to_be_bytes());
    t
}

/// Splits private data into the consumer's part and a large-FPDU offer at its
/// end, if one is there: the largest ULPDU the offer's sender receives (`None`
/// as well for an offer of no more than MPA's 16 bits, which adds nothing).
pub fn split_large(pd: &[u8]) -> (&[u8], Option<u32>) {
    let Some(at) = pd.len().checked_sub(LARGE_TRAILER) else {
        return (pd, None);
    };
    let (head, t) = pd.split_at(at);
    if t[..8] != LARGE_MAGIC {
        return (pd, None);
    }
    let max = u32::from_be_bytes([t[8], t[9], t[10], t[11]]);
    (
        head,
        Some(max).filter(|&m| m as usize > super::ddp::MPA_MAX_ULPDU),
    )
}

/// Adds a large-FPDU offer (ULPDUs of up to `max` bytes received) to a
/// Request: not with CRC on, nor where it would take the private data past
/// what Linux siw accepts. Returns whether it did.
pub fn offer_large(req: &mut MpaFrame, max: u32) -> bool {
    if req.flags & FLAG_C != 0
        || req.private_data.len() + LARGE_TRAILER > OFFER_MAX_PRIVATE_DATA
        || max as usize <= super::ddp::MPA_MAX_ULPDU
    {
        return false;
    }
    req.private_data.extend_from_slice(&large_trailer(max));
    true
}

/// Accepts the large-FPDU offer of `req`, if it made one, for ULPDUs of up to
/// `max` bytes received here: adds the trailer to the Reply and sets
/// [`Accepted::large`]. Not with CRC on.
pub fn accept_large(acc: &mut Accepted, req: &RequestInfo, max: u32) {
    let Some(theirs) = req.large else {
        return;
    };
    if acc.crc
        || acc.reply.private_data.len() + LARGE_TRAILER > OFFER_MAX_PRIVATE_DATA
        || max as usize <= super::ddp::MPA_MAX_ULPDU
    {
        return;
    }
    acc.reply
        .private_data
        .extend_from_slice(&large_trailer(max));
    acc.large = Some(LargeFpdus::new(max, theirs));
}

/// The large FPDUs of a connection whose Request offered `ours` (`None`: it
/// did not) and whose accepting Reply offered `theirs`, with CRC `crc`.
pub fn large_agreed(ours: Option<u32>, theirs: Option<u32>, crc: bool) -> Option<LargeFpdus> {
    match (ours, theirs) {
        (Some(o), Some(t)) if !crc => Some(LargeFpdus::new(o, t)),
        _ => None,
    }
}

/// An MPA Request or Reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpaFrame {
    /// True for a Reply, false for a Request.
    pub reply: bool,
    /// Flags byte (M, C, R, enhanced).
    pub flags: u8,
    /// Revision (1 or 2).
    pub revision: u8,
    /// Private data as carried (including the enhanced IRD/ORD header).
    pub private_data: Vec<u8>,
}

/// Why an MPA frame could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MpaError {
    /// The key is not the one expected.
    #[error("bad MPA key")]
    BadKey,
    /// Unsupported revision.
    #[error("unsupported MPA revision {0}")]
    BadRevision(u8),
    /// Private data longer than allowed.
    #[error("MPA private data too long ({0})")]
    TooLong(usize),
    /// Enhanced flag without the 4-byte IRD/ORD header.
    #[error("enhanced MPA frame without IRD/ORD")]
    NoEnhancedHeader,
}

impl MpaFrame {
    /// Encode into `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self.reply { KEY_REP } else { KEY_REQ });
        out.push(self.flags);
        out.push(self.revision);
        out.extend_from_slice(&(self.private_data.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.private_data);
    }

    /// Decode a frame of the expected kind from the front of `buf`:
    /// `Ok(None)` when more bytes are needed, else the frame and its length.
    pub fn decode(buf: &[u8], reply: bool) -> Result<Option<(MpaFrame, usize)>, MpaError> {
        let Some(hdr) = buf.get(..20) else {
            // Check the key early when we can, so garbage fails fast.
            let key = if reply { KEY_REP } else { KEY_REQ };
            let n = buf.len().min(16);
            if buf[..n] != key[..n] {
                return Err(MpaError::BadKey);
            }
            return Ok(None);
        };
        let key = if reply { KEY_REP } else { KEY_REQ };
        if &hdr[..16] != key {
            return Err(MpaError::BadKey);
        }
        let flags = hdr[16];
        let revision = hdr[17];
        if revision != 1 && revision != 2 {
            return Err(MpaError::BadRevision(revision));
        }
        let pd_len = usize::from(u16::from_be_bytes([hdr[18], hdr[19]]));
        if pd_len > MAX_WIRE_PRIVATE_DATA {
            return Err(MpaError::TooLong(pd_len));
        }
        let Some(pd) = buf.get(20..20 + pd_len) else {
            return Ok(None);
        };
        if revision == 2 && flags & FLAG_ENHANCED != 0 && pd_len < 4 {
            return Err(MpaError::NoEnhancedHeader);
        }
        Ok(Some((
            MpaFrame {
                reply,
                flags,
                revision,
                private_data: pd.to_vec(),
            },
            20 + pd_len,
        )))
    }

    /// Whether the frame uses enhanced connection establishment.
    pub fn enhanced(&self) -> bool {
        self.revision == 2 && self.flags & FLAG_ENHANCED != 0
    }

    /// The enhanced `(ird word, ord word)` and the consumer private data.
    pub fn split_enhanced(&self) -> (Option<(u16, u16)>, &[u8]) {
        if self.enhanced() {
            if let Some(h) = self.private_data.get(..4) {
                let ird = u16::from_be_bytes([h[0], h[1]]);
                let ord = u16::from_be_bytes([h[2], h[3]]);
                return (Some((ird, ord)), &self.private_data[4..]);
            }
        }
        (None, &self.private_data)
    }
}

/// The RTR kinds, as carried in the enhanced IRD/ORD words.
fn rtr_bits(rtr: super::Rtr) -> (u16, u16) {
    match rtr {
        super::Rtr::Send => (IRD_SEND_RTR, 0),
        super::Rtr::Write => (0, ORD_WRITE_RTR),
        super::Rtr::Read => (0, ORD_READ_RTR),
    }
}

/// Build a Request.
pub fn build_request(
    revision: u8,
    crc: bool,
    ird: u16,
    ord: u16,
    rtr: Option<super::Rtr>,
    private_data: &[u8],
) -> MpaFrame {
    let mut flags = if crc { FLAG_C } else { 0 };
    let mut pd = Vec::with_capacity(private_data.len() + 4);
    if revision == 2 {
        flags |= FLAG_ENHANCED;
        let (mut iw, mut ow) = (ird.min(IRD_ORD_MASK), ord.min(IRD_ORD_MASK));
        if let Some(r) = rtr {
            let (i, o) = rtr_bits(r);
            iw |= IRD_P2P | i;
            ow |= o;
        }
        pd.extend_from_slice(&iw.to_be_bytes());
        pd.extend_from_slice(&ow.to_be_bytes());
    }
    pd.extend_from_slice(private_data);
    MpaFrame {
        reply: false,
        flags,
        revision,
        private_data: pd,
    }
}

/// What the responder learned from a Request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// Revision of the request.
    pub revision: u8,
    /// The initiator asked for CRC.
    pub crc: bool,
    /// The initiator asked for markers (must be rejected).
    pub markers: bool,
    /// Enhanced (IRD/ORD present).
    pub enhanced: bool,
    /// Initiator's IRD/ORD (0 when not enhanced).
    pub ird: u16,
    /// Initiator's ORD.
    pub ord: u16,
    /// The RTR kinds the initiator offers in peer-to-peer mode (empty: no p2p).
    pub rtr_offered: Vec<super::Rtr>,
    /// Consumer private data (without a large-FPDU offer).
    pub private_data: Vec<u8>,
    /// The initiator's large-FPDU offer: the largest ULPDU it receives
    /// ([`LargeFpdus`]).
    pub large: Option<u32>,
}

impl RequestInfo {
    /// Interpret a Request frame.
    pub fn from_frame(f: &MpaFrame) -> RequestInfo {
        let (e, pd) = f.split_enhanced();
        let (pd, large) = split_large(pd);
        let mut info = RequestInfo {
            revision: f.revision,
            crc: f.flags & FLAG_C != 0,
            markers: f.flags & FLAG_M != 0,
            enhanced: e.is_some(),
            ird: 0,
            ord: 0,
            rtr_offered: Vec::new(),
            private_data: pd.to_vec(),
            large,
        };
        if let Some((iw, ow)) = e {
            info.ird = iw & IRD_ORD_MASK;
            info.ord = ow & IRD_ORD_MASK;
            if iw & IRD_P2P != 0 {
                // Preference order when choosing: Read, Write, Send.
                if ow & ORD_READ_RTR != 0 {
                    info.rtr_offered.push(super::Rtr::Read);
                }
                if ow & ORD_WRITE_RTR != 0 {
                    info.rtr_offered.push(super::Rtr::Write);
                }
                if iw & IRD_SEND_RTR != 0 {
                    info.rtr_offered.push(super::Rtr::Send);
                }
            }
        }
        info
    }
}

/// The responder's decision to accept: the Reply and the negotiated values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The Reply frame to send.
    pub reply: MpaFrame,
    /// CRC in use.
    pub crc: bool,
    /// Our inbound read limit.
    pub ird: u16,
    /// Our outbound read limit (clamped to the initiator's IRD when known).
    pub ord: u16,
    /// The RTR we expect as the first FPDU, when peer-to-peer was negotiated.
    pub rtr: Option<super::Rtr>,
    /// Large FPDUs, when the Request offered them and [`accept_large`] took the
    /// offer.
    pub large: Option<LargeFpdus>,
}

/// Build the responder's accepting Reply for `req`.
pub fn accept_request(
    req: &RequestInfo,
    want_crc: bool,
    ird: u16,
    ord: u16,
    private_data: &[u8],
) -> Accepted {
    let crc = want_crc || req.crc;
    let mut flags = if crc { FLAG_C } else { 0 };
    let ird = ird.min(IRD_ORD_MASK);
    let mut ord = ord.min(IRD_ORD_MASK);
    let mut pd = Vec::with_capacity(private_data.len() + 4);
    let mut rtr = None;
    if req.enhanced {
        flags |= FLAG_ENHANCED;
        ord = ord.min(req.ird);
        let (mut iw, mut ow) = (ird, ord);
        if let Some(&r) = req.rtr_offered.first() {
            rtr = Some(r);
            let (i, o) = rtr_bits(r);
            iw |= IRD_P2P | i;
            ow |= o;
        }
        pd.extend_from_slice(&iw.to_be_bytes());
        pd.extend_from_slice(&ow.to_be_bytes());
    }
    pd.extend_from_slice(private_data);
    Accepted {
        reply: MpaFrame {
            reply: true,
            flags,
            revision: req.revision,
            private_data: pd,
        },
        crc,
        ird,
        ord,
        rtr,
        large: None,
    }
}

/// Build a rejecting Reply for a request of `revision`.
pub fn reject_reply(revision: u8, private_data: &[u8]) -> MpaFrame {
    let mut pd = Vec::new();
    let mut flags = FLAG_R;
    if revision == 2 {
        flags |= FLAG_ENHANCED;
        pd.extend_from_slice(&[0, 0, 0, 0]);
    }
    pd.extend_from_slice(private_data);
    MpaFrame {
        reply: true,
        flags,
        revision: revision.clamp(1, 2),
        private_data: pd,
    }
}

/// The initiator's reading of a Reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyOutcome {
    /// Accepted.
    Accepted {
        /// CRC in use.
        crc: bool,
        /// Peer IRD (0 when not enhanced).
        peer_ird: u16,
        /// Peer ORD (0 when not enhanced).
        peer_ord: u16,
        /// The RTR we must send first (peer-to-peer negotiated).
        rtr: Option<super::Rtr>,
        /// Consumer private data (without a large-FPDU offer).
        private_data: Vec<u8>,
        /// The responder's large-FPDU offer: the largest ULPDU it receives
        /// (see [`large_agreed`]).
        large: Option<u32>,
    },
    /// Rejected, with the peer's private data.
    Rejected(Vec<u8>),
}

/// Why the initiator refuses a Reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// The responder turned markers on.
    #[error("responder requires markers")]
    Markers,
    /// The responder's ORD exceeds our IRD (Terminate LLP/MPA 0x06).
    #[error("responder ORD {peer_ord} exceeds our IRD {our_ird}")]
    InsufficientIrd {
        /// Responder's ORD.
        peer_ord: u16,
        /// Our IRD.
        our_ird: u16,
    },
    /// The revision differs from the one we sent, or p2p answered wrongly.
    #[error("incompatible reply: {0}")]
    Incompatible(&'static str),
}

/// Interpret a Reply to our Request (`our_rev`, `our_crc`, `our_ird`, `our_rtr`).
pub fn read_reply(
    rep: &MpaFrame,
    our_rev: u8,
    our_crc: bool,
    our_ird: u16,
    our_rtr: Option<super::Rtr>,
) -> Result<ReplyOutcome, ReplyError> {
    let (e, pd) = rep.split_enhanced();
    if rep.flags & FLAG_R != 0 {
        return Ok(ReplyOutcome::Rejected(pd.to_vec()));
    }
    if rep.flags & FLAG_M != 0 {
        return Err(ReplyError::Markers);
    }
    if rep.revision > our_rev {
        return Err(ReplyError::Incompatible(
            "reply revision higher than request",
        ));
    }
    let crc = our_crc || rep.flags & FLAG_C != 0;
    let (mut peer_ird, mut peer_ord, mut rtr) = (0, 0, None);
    if let Some((iw, ow)) = e {
        peer_ird = iw & IRD_ORD_MASK;
        peer_ord = ow & IRD_ORD_MASK;
        if peer_ord > our_ird {
            return Err(ReplyError::InsufficientIrd { peer_ord, our_ird });
        }
        if iw & IRD_P2P != 0 {
            let chosen = if ow & ORD_READ_RTR != 0 {
                super::Rtr::Read
            } else if ow & ORD_WRITE_RTR != 0 {
                super::Rtr::Write
            } else if iw & IRD_SEND_RTR != 0 {
                super::Rtr::Send
            } else {
                return Err(ReplyError::Incompatible("p2p reply without an RTR type"));
            };
            if our_rtr.is_none() {
                return Err(ReplyError::Incompatible("p2p reply to a non-p2p request"));
            }
            rtr = Some(chosen);
        }
    }
    let (pd, large) = split_large(pd);
    Ok(ReplyOutcome::Accepted {
        crc,
        peer_ird,
        peer_ord,
        rtr,
        private_data: pd.to_vec(),
        large,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Rtr;
    use super::*;

    #[test]
    fn request_roundtrip_enhanced() {
        let f = build_request(2, true, 32, 8, Some(Rtr::Read), b"hello");
        let mut b = Vec::new();
        f.encode(&mut b);
        assert_eq!(&b[..16], KEY_REQ);
        assert_eq!(b[16], FLAG_C | FLAG_ENHANCED);
        assert_eq!(b[17], 2);
        assert_eq!(&b[18..20], &[0, 9]);
        assert_eq!(&b[20..24], &[0x80, 32, 0x40, 8]);
        assert_eq!(&b[24..], b"hello");
        // Partial input needs more.
        assert_eq!(MpaFrame::decode(&b[..10], false).unwrap(), None);
        assert_eq!(MpaFrame::decode(&b[..22], false).unwrap(), None);
        let (g, n) = MpaFrame::decode(&b, false).unwrap().unwrap();
        assert_eq!(n, b.len());
        assert_eq!(g, f);
        let info = RequestInfo::from_frame(&g);
        assert!(info.crc && info.enhanced && !info.markers);
        assert_eq!((info.ird, info.ord), (32, 8));
        assert_eq!(info.rtr_offered, vec![Rtr::Read]);
        assert_eq!(info.private_data, b"hello");
    }

    #[test]
    fn reply_accept_clamps_ord_and_reads_back() {
        let req = RequestInfo::from_frame(&build_request(2, false, 4, 8, None, b"x"));
        let acc = accept_request(&req, false, 16, 64, b"yz");
        assert!(!acc.crc);
        assert_eq!(acc.ord, 4, "responder ORD clamped to initiator IRD");
        let mut b = Vec::new();
        acc.reply.encode(&mut b);
        let (rep, _) = MpaFrame::decode(&b, true).unwrap().unwrap();
        match read_reply(&rep, 2, false, 4, None).unwrap() {
            ReplyOutcome::Accepted {
                crc,
                peer_ird,
                peer_ord,
                rtr,
                private_data,
                large,
            } => {
                assert!(!crc);
                assert_eq!((peer_ird, peer_ord), (16, 4));
                assert_eq!(rtr, None);
                assert_eq!(private_data, b"yz");
                assert_eq!(large, None);
            }
            o => panic!("{o:?}"),
        }
        // A responder ORD above our IRD is refused.
        assert!(matches!(
            read_reply(&rep, 2, false, 2, None),
            Err(ReplyError::InsufficientIrd { .. })
        ));
    }

    #[test]
    fn crc_on_if_either_side_asks() {
        let req = RequestInfo::from_frame(&build_request(2, true, 4, 4, None, b""));
        assert!(accept_request(&req, false, 4, 4, b"").crc);
        let req = RequestInfo::from_frame(&build_request(2, false, 4, 4, None, b""));
        let acc = accept_request(&req, true, 4, 4, b"");
        assert!(acc.crc);
        assert!(matches!(
            read_reply(&acc.reply, 2, false, 4, None).unwrap(),
            ReplyOutcome::Accepted { crc: true, .. }
        ));
    }

    #[test]
    fn revision1_has_raw_private_data() {
        let f = build_request(1, true, 4, 4, None, b"pd");
        assert_eq!(f.flags, FLAG_C);
        assert_eq!(f.private_data, b"pd");
        let info = RequestInfo::from_frame(&f);
        assert!(!info.enhanced);
        let acc = accept_request(&info, true, 8, 8, b"rp");
        assert_eq!(acc.reply.revision, 1);
        assert_eq!(acc.reply.private_data, b"rp");
    }

    #[test]
    fn markers_rejected() {
        let mut f = build_request(2, true, 4, 4, None, b"");
        f.flags |= FLAG_M;
        let info = RequestInfo::from_frame(&f);
        assert!(info.markers);
        let rej = reject_reply(info.revision, b"");
        assert!(rej.flags & FLAG_R != 0 && rej.flags & FLAG_M == 0);
        assert_eq!(
            read_reply(&rej, 2, true, 4, None).unwrap(),
            ReplyOutcome::Rejected(vec![])
        );
        // A reply that turns markers on is refused by the initiator.
        let mut rep = accept_request(
            &RequestInfo::from_frame(&build_request(2, true, 4, 4, None, b"")),
            true,
            4,
            4,
            b"",
        )
        .reply;
        rep.flags |= FLAG_M;
        assert_eq!(read_reply(&rep, 2, true, 4, None), Err(ReplyError::Markers));
    }

    #[test]
    fn p2p_rtr_negotiation() {
        let req = RequestInfo::from_frame(&build_request(2, true, 4, 4, Some(Rtr::Send), b""));
        assert_eq!(req.rtr_offered, vec![Rtr::Send]);
        let acc = accept_request(&req, true, 4, 4, b"");
        assert_eq!(acc.rtr, Some(Rtr::Send));
        match read_reply(&acc.reply, 2, true, 4, Some(Rtr::Send)).unwrap() {
            ReplyOutcome::Accepted { rtr, .. } => assert_eq!(rtr, Some(Rtr::Send)),
            o => panic!("{o:?}"),
        }
    }

    /// smbx's large-FPDU offer rides at the end of the Request's private data and
    /// is answered at the end of the Reply's; neither consumer sees it; a Reply
    /// without it (a standard responder) leaves standard framing; never with CRC,
    /// nor past 256 bytes of private data.
    #[test]
    fn large_fpdus_offered_and_accepted() {
        let smbd = [0, 0, 0, 16, 0, 0, 0, 16];
        let mut f = build_request(2, false, 16, 16, None, &smbd);
        assert!(offer_large(&mut f, 1 << 20));
        assert_eq!(f.private_data.len(), 4 + 8 + LARGE_TRAILER);
        assert_eq!(f.private_data[12..20], LARGE_MAGIC);
        assert_eq!(f.private_data[20..], (1u32 << 20).to_be_bytes());
        let mut b = Vec::new();
        f.encode(&mut b);
        let (g, _) = MpaFrame::decode(&b, false).unwrap().unwrap();
        let info = RequestInfo::from_frame(&g);
        assert_eq!(info.private_data, smbd);
        assert_eq!(info.large, Some(1 << 20));
        // A responder that takes it: its own limit in the Reply, and it sends no more
        // than the smaller of the two.
        let mut acc = accept_request(&info, false, 16, 16, b"reply-pd");
        accept_large(&mut acc, &info, 300_000);
        assert_eq!(
            acc.large,
            Some(LargeFpdus {
                send: 300_000,
                recv: 300_000
            })
        );
        let mut b = Vec::new();
        acc.reply.encode(&mut b);
        let (rep, _) = MpaFrame::decode(&b, true).unwrap().unwrap();
        match read_reply(&rep, 2, false, 16, None).unwrap() {
            ReplyOutcome::Accepted {
                private_data,
                large,
                ..
            } => {
                assert_eq!(private_data, b"reply-pd");
                assert_eq!(large, Some(300_000));
                assert_eq!(
                    large_agreed(Some(1 << 20), large, false),
                    Some(LargeFpdus {
                        send: 300_000,
                        recv: 1 << 20
                    })
                );
            }
            o => panic!("{o:?}"),
        }
        // A standard responder answers without it: standard framing.
        let plain = accept_request(&info, false, 16, 16, &smbd);
        assert_eq!(plain.large, None);
        match read_reply(&plain.reply, 2, false, 16, None).unwrap() {
            ReplyOutcome::Accepted {
                private_data,
                large,
                ..
            } => {
                assert_eq!((private_data.as_slice(), large), (&smbd[..], None));
                assert_eq!(large_agreed(Some(1 << 20), large, false), None);
            }
            o => panic!("{o:?}"),
        }
        // A Request without the offer is answered without it.
        let none = RequestInfo::from_frame(&build_request(2, false, 16, 16, None, &smbd));
        assert_eq!(none.large, None);
        let mut acc = accept_request(&none, false, 16, 16, b"");
        accept_large(&mut acc, &none, 1 << 20);
        assert_eq!((acc.large, acc.reply.private_data.len()), (None, 4));
        // Never with CRC: not offered, not accepted, not agreed.
        let mut c = build_request(2, true, 16, 16, None, &smbd);
        assert!(!offer_large(&mut c, 1 << 20));
        assert_eq!(c.private_data.len(), 12);
        let mut acc = accept_request(&info, true, 16, 16, b"");
        accept_large(&mut acc, &info, 1 << 20);
        assert_eq!((acc.large, acc.reply.private_data.len()), (None, 4));
        assert_eq!(large_agreed(Some(1 << 20), Some(1 << 20), true), None);
        // Not past the 256 bytes of private data Linux siw takes.
        let mut fits = build_request(2, false, 4, 4, None, &[1; 240]);
        assert!(offer_large(&mut fits, 1 << 20));
        assert_eq!(fits.private_data.len(), 256);
        let mut over = build_request(2, false, 4, 4, None, &[1; 241]);
        assert!(!offer_large(&mut over, 1 << 20));
        // An offer of no more than 16 bits adds nothing: stripped, not taken.
        let mut small = build_request(2, false, 4, 4, None, b"");
        assert!(!offer_large(&mut small, 65_535));
        let pd = [&b"x"[..], &large_trailer(65_535)].concat();
        assert_eq!(split_large(&pd), (&b"x"[..], None));
        assert_eq!(split_large(b"hello"), (&b"hello"[..], None));
        assert_eq!(split_large(&LARGE_MAGIC), (&LARGE_MAGIC[..], None));
        // Revision 1 (no IRD/ORD word) carries it the same way.
        let mut r1 = build_request(1, false, 4, 4, None, b"pd");
        assert!(offer_large(&mut r1, 1 << 20));
        let info = RequestInfo::from_frame(&r1);
        assert_eq!(
            (info.private_data.as_slice(), info.large),
            (&b"pd"[..], Some(1 << 20))
        );
    }

    #[test]
    fn hostile_frames() {
        assert_eq!(
            MpaFrame::decode(b"GET / HTTP/1.1\r\n", false),
            Err(MpaError::BadKey)
        );
        let mut b = Vec::new();
        build_request(2, true, 4, 4, None, b"").encode(&mut b);
        b[17] = 3;
        assert_eq!(MpaFrame::decode(&b, false), Err(MpaError::BadRevision(3)));
        b[17] = 2;
        b[18] = 0x10;
        assert!(matches!(
            MpaFrame::decode(&b, false),
            Err(MpaError::TooLong(_))
        ));
        b[18] = 0;
        b[19] = 2;
        b.truncate(22);
        assert_eq!(MpaFrame::decode(&b, false), Err(MpaError::NoEnhancedHeader));
    }
}
