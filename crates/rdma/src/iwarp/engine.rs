//! The sans-IO RDMAP/DDP connection engine: bytes from TCP in, placement
//! into registered memory, completions, and FPDU bytes out. One engine per
//! connection, driven by [`super::driver`] or directly by tests.

use std::collections::VecDeque;
use std::sync::Arc;

use super::crc::Crc32c;
use super::ddp::{self, op, qn, term, DdpHdr, ReadReq, TAGGED_HDR, UNTAGGED_HDR};
use super::mpa::LargeFpdus;
use super::mr::SoftMr;
use super::qp::{OwnedSend, QpShared, RecvWqe, Seg, SendWqe, WqeKind};
use super::Rtr;
use crate::provider::MemoryRegion;
use crate::sink::FileSink;
use crate::source::FileRange;
use crate::types::{Access, CloseReason, Completion, STag, TermInfo, WcOpcode, WcStatus};

/// A Read Request we sent, awaiting its Read Responses.
#[derive(Debug)]
struct OutRead {
    wr_id: u64,
    sink: ReadSink,
    sink_stag: u32,
    sink_to: u64,
    size: u64,
    received: u64,
}

/// Where a Read Request's data lands.
#[derive(Debug)]
enum ReadSink {
    /// A range of a region.
    Mr(Seg),
    /// A file range, from its byte `.1` ([`crate::QueuePair::post_read_file`]).
    File(Arc<dyn FileSink>, usize),
}

impl ReadSink {
    /// The file range it is, if one.
    fn file(&self) -> Option<&Arc<dyn FileSink>> {
        match self {
            ReadSink::File(f, _) => Some(f),
            ReadSink::Mr(_) => None,
        }
    }
}

/// The STag a Read Request into a file names as its sink: no region's (the Read
/// Responses are matched to the request, never looked up), echoed by the peer.
const FILE_SINK_STAG: u32 = u32::MAX;

/// A Read Request we received, to answer with Read Responses.
#[derive(Debug)]
struct InRead {
    src: Option<(SoftMr, usize)>,
    len: usize,
    sink_stag: u32,
    sink_to: u64,
    sent: usize,
}

#[derive(Debug)]
enum TxMsg {
    Sq { wqe: SendWqe, sent: usize, msn: u32 },
    Resp(InRead),
}

#[derive(Debug)]
struct RxRecv {
    wqe: RecvWqe,
    received: usize,
    /// An owned receive's buffer ([`RecvWqe::is_owned`]), allocated at its
    /// first segment: the payload is appended to it instead of scattered.
    owned: Option<Vec<u8>>,
}

/// Negotiated settings for one connection.
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    /// CRC-32C on.
    pub crc: bool,
    /// Largest ULPDU to send (FPDU fits one TCP segment).
    pub max_ulpdu: usize,
    /// Inbound Read Requests allowed at once.
    pub ird: u16,
    /// Outbound Read Requests allowed at once.
    pub ord: u16,
    /// As initiator: the RTR to send first.
    pub send_rtr: Option<Rtr>,
    /// As responder: the RTR expected as the first FPDU (we send nothing before it).
    pub expect_rtr: Option<Rtr>,
    /// smbx's large FPDUs, when both ends offered them: RDMA Writes and Read
    /// Responses go in FPDUs of up to `send` bytes of ULPDU (the long form above
    /// MPA's 16 bits), and FPDUs of up to `recv` are taken in.
    pub large: Option<LargeFpdus>,
}

/// Largest ULPDU for a TCP MSS: `(mss & !7) - 6`, as the FPDU then fits one segment.
pub fn max_ulpdu_for_mss(mss: u32) -> usize {
    let m = (mss.clamp(64, 65536) & !7) as usize;
    (m - 6).min(usize::from(u16::MAX) & !3)
}

/// The connection engine.
#[derive(Debug)]
pub struct Engine {
    qp: Arc<QpShared>,
    cfg: EngineConfig,
    tx_send_msn: u32,
    tx_rreq_msn: u32,
    tx_term_msn: u32,
    cur_tx: Option<TxMsg>,
    irq: VecDeque<InRead>,
    orq: VecDeque<OutRead>,
    rx_send_msn: u32,
    rx_rreq_msn: u32,
    cur_rx: Option<RxRecv>,
    send_rtr: Option<Rtr>,
    expect_rtr: Option<Rtr>,
    rtr_read_pending: bool,
    write_cache: Option<SoftMr>,
    /// The tagged payload being placed straight from the socket.
    placing: Option<Placing>,
    /// Bytes of the placed FPDU's pad and CRC still to skip.
    rx_skip: usize,
    /// The most bytes the driver should read next (see
    /// [`Engine::read_limit`]).
    read_hint: Option<usize>,
    /// Short FPDUs still read one at a time (bounded reads) before a long
    /// tagged one comes again.
    short_run: u8,
    /// Vectored output ([`Engine::set_vectored`]): payloads not copied into
    /// `out` but sent from their regions.
    vectored: bool,
    /// The payloads `out` leaves out, in order (vectored output).
    holes: VecDeque<Hole>,
    /// Their bytes.
    hole_bytes: usize,
    /// Send and Write completions waiting for their last byte to be written
    /// (vectored output): the position in `out` after their last FPDU.
    tx_done: VecDeque<(usize, Completion)>,
    closed: Option<CloseReason>,
    completions: Vec<Completion>,
    /// Received Sends that filled their receive buffer to the last byte, ever:
    /// most likely a fragment of a longer upper-layer message (an SMB Direct
    /// peer sends every fragment but the last at the receive size), which
    /// [`Engine::on_input_some`] does not count towards its batch.
    rx_filled: u64,
}

/// Least payload still to come for an FPDU to be placed directly: below it,
/// the extra read costs more than the copy it saves (and FPDUs sized for an
/// Ethernet MSS never qualify).
const PLACE_MIN: usize = 16 * 1024;

/// Bytes a bounded read takes past the end of the FPDU it completes: the
/// next FPDU's header (at most 20 bytes) and a little of its payload, so a
/// long tagged payload behind it is placed straight from the socket (all but
/// these bytes of it), and short FPDUs behind it come in the same read: the
/// last, short FPDU of an RDMA Read or Write that is not a whole number of
/// FPDUs (a 64 KiB one is 65,459 + 77 bytes of payload on loopback, a 512 KiB
/// one ends with 616) and the Send that follows it (an SMB2 WRITE request or
/// response), which with 64 bytes each took a read of their own.
const LOOKAHEAD: usize = 1024;

/// Short FPDUs (an SMB Direct Send between two RDMA Writes) read one at a
/// time, each with [`LOOKAHEAD`], after a long tagged one, before the driver
/// goes back to reading all it can: a stream of long Writes or Read Responses
/// keeps being placed directly across the Sends between them, a stream of
/// short messages is read many to a read.
const SHORT_RUN: u8 = 4;

/// Most payload pieces one vectored write sends.
const MAX_HOLES: usize = 64;

/// Least message (RDMA Write, Read Response, Send) whose payload vectored
/// output sends from its region; shorter ones (every SMB Direct Send: at most
/// the send size, 8 KiB by default) are copied into `out` as without vectored output. Many small messages then go
/// out in one write of one buffer, the Send completes (its slot is free for
/// the next message) as soon as it is copied, and the region is not locked
/// through the socket write while its owner fills the next slot: at 4 KiB
/// QD32 gathering each Send cost the server ~25% (a writev and three futex
/// calls per request).
const GATHER_MIN: usize = 16 * 1024;

/// Most payload bytes of one FPDU of an RDMA Write sent from a file: 15 pages of the
/// page cache, which span at most 16 pages wherever they start, so that with the
/// FPDU's header (one more fragment) they fit one socket buffer, whose fragments
/// Linux bounds at 17 (`net.core.max_skb_frags`' default). On loopback an FPDU's
/// largest payload (65,456 bytes) spans 17 pages unless it starts within 80 bytes
/// of a page, and the socket then sends its header and first 16 pages as one
/// segment and the last page as another; at 15 pages the header (written with
/// `MSG_MORE`, see [`Engine::write_vectored`]) and the payload (sendfile) leave as
/// one segment. One size for every FPDU of the message but the last keeps the
/// stream as the receiver predicts it (each FPDU as long as the one before). A
/// 512 KiB READ is then eight FPDUs of 60 KiB and one of 32 KiB, where it was eight
/// of 65,456 bytes and one of 640: as many FPDUs, about half the segments.
const FILE_FPDU_MAX: usize = 15 * 4096;

/// Smallest Read Response sent in large FPDUs where both ends agreed to them.
/// Shorter ones (a 64 KiB WRITE's) keep standard FPDUs: large ones cost the
/// 64 KiB WRITE's client more (s38, 2 of 2 pairs).
const RESP_LARGE_MIN: usize = 128 * 1024;

/// A payload of an RDMA Write sent from a file shorter than this, where the MSS
/// allows longer FPDUs (loopback), is read into the output (one pread, sent with
/// the headers and messages around it) rather than sent by sendfile: the 4 KiB
/// left of a 64 KiB READ after one FPDU of [`FILE_FPDU_MAX`] then costs no header
/// write and sendfile of its own (one header write and sendfile a READ). 64 KiB
/// sequential READs QD8 from the file this way against the registered-buffer copy
/// (one binary, env toggles, alternated, loaded 2-core machine): MB/s higher in 11
/// of 14 pairs, server CPU per READ lower in 12 of 14; the client's higher in 9 of
/// 14 (likely: it copies page-cache pages no CPU has touched, where it copied what
/// the server's writev had just written).
const FILE_COPY_MAX: usize = 16 * 1024;

/// A payload that vectored output sends from its region (or file): it goes on
/// the wire before `out[at..]`.
#[derive(Debug)]
struct Hole {
    at: usize,
    src: HoleSrc,
    /// Offset in the source of the next byte to send.
    off: usize,
    len: usize,
}

/// Where a hole's bytes are.
#[derive(Debug)]
enum HoleSrc {
    /// A registered region (gathered by `writev`).
    Mr(SoftMr),
    /// A file (sent by `sendfile`).
    File(Arc<dyn FileRange>),
    /// Read in here: the part of a file that ended before it was sent (zeros for
    /// what it no longer holds).
    Owned(Vec<u8>),
    /// The consumer's own buffer of a Send posted from it (nothing else reads
    /// or writes it: gathered without a lock).
    Shared(Arc<Vec<u8>>),
}

/// Where a payload placed as it arrives goes.
#[derive(Debug)]
enum PlaceDst {
    /// A region (read into from the socket).
    Mr(SoftMr),
    /// A file range (spliced into from the socket).
    File(Arc<dyn FileSink>),
}

/// Which checked destination a tagged payload goes to.
enum Target {
    /// The region of [`Engine::write_cache`] (an RDMA Write).
    Write,
    /// The sink of the oldest outstanding Read Request (a Read Response).
    ReadResp,
}

/// A tagged FPDU whose payload is placed as it arrives: checked whole when
/// its header arrived.
#[derive(Debug)]
struct Placing {
    dst: PlaceDst,
    /// Offset in the region's buffer of the next byte.
    off: usize,
    /// Payload bytes still to come.
    left: usize,
    /// Pad and CRC after the payload.
    trailer: usize,
    /// Bytes of its length field (2, or [`ddp::LONG_PREFIX`] for a large FPDU).
    prefix: usize,
    /// The Read Response's completion, delivered once the payload is in.
    done: Option<Completion>,
}

fn comp(wr_id: u64, opcode: WcOpcode, status: WcStatus, byte_len: usize) -> Completion {
    Completion {
        wr_id,
        opcode,
        status,
        byte_len: byte_len as u32,
        invalidated: None,
        solicited: false,
    }
}

/// Copy `src` to logical offset `at` of a scatter list.
fn scatter(sg: &[Seg], mut at: usize, src: &[u8]) {
    let mut s = 0;
    for (mr, off, len) in sg {
        if s == src.len() {
            break;
        }
        if at >= *len {
            at -= len;
            continue;
        }
        let n = (len - at).min(src.len() - s);
        let mut b = mr.lock();
        if let Some(d) = b.get_mut(off + at..off + at + n) {
            d.copy_from_slice(&src[s..s + n]);
        }
        s += n;
        at = 0;
    }
}

/// Append one FPDU with header `h` whose payload is `n` bytes at logical
/// offset `at` of `sg`: appended to `out` from the regions (never through a
/// zero-filled range), or, given `holes` (vectored output of a message of at
/// least [`GATHER_MIN`] bytes), queued as references to the regions (`out`
/// then holds the header and trailer). The CRC, when on, is computed over the
/// regions in place. Returns the payload bytes queued in `holes`.
fn encode_payload(
    out: &mut Vec<u8>,
    mut holes: Option<&mut VecDeque<Hole>>,
    h: &DdpHdr,
    sg: &[Seg],
    at: usize,
    n: usize,
    crc: bool,
) -> usize {
    let start = out.len();
    if holes.is_none() {
        out.reserve(2 + h.len() + n + 3 + 4);
    }
    ddp::encode_fpdu_head(out, h, n);
    let mut c = crc.then(|| {
        let mut c = Crc32c::new();
        c.update(&out[start..]);
        c
    });
    let (mut skip, mut left, mut queued) = (at, n, 0);
    for (mr, off, len) in sg {
        if left == 0 {
            break;
        }
        if skip >= *len {
            skip -= len;
            continue;
        }
        let k = (len - skip).min(left);
        let range = off + skip..off + skip + k;
        match holes.as_deref_mut() {
            None => {
                let b = mr.lock();
                let p = out.len();
                match b.get(range) {
                    Some(b) => out.extend_from_slice(b),
                    // Outside its region (checked when posted): zeros keep
                    // the FPDU's length.
                    None => out.resize(p + k, 0),
                }
                if let Some(c) = c.as_mut() {
                    c.update(&out[p..]);
                }
            }
            Some(holes) => {
                if let Some(c) = c.as_mut() {
                    if let Some(b) = mr.lock().get(range.clone()) {
                        c.update(b);
                    }
                }
                holes.push_back(Hole {
                    at: out.len(),
                    src: HoleSrc::Mr(mr.clone()),
                    off: range.start,
                    len: k,
                });
                queued += k;
            }
        }
        left -= k;
        skip = 0;
    }
    if left > 0 {
        // The scatter list is shorter than the message (checked when posted).
        out.resize(out.len() + left, 0);
        if let Some(c) = c.as_mut() {
            c.update(&out[out.len() - left..]);
        }
    }
    ddp::encode_fpdu_tail(out, h.len() + n, c);
    queued
}

/// Least part of an owned Send's body that vectored output sends from the
/// buffer itself; a shorter one (a credit grant, a short response) is copied
/// into `out`, cheaper than an entry of its own in the write.
const OWNED_GATHER_MIN: usize = 512;

/// Append one FPDU with header `h` whose payload is the `n` bytes at logical
/// offset `at` of the owned Send `msg` (its head, then its body): the head's
/// part copied into `out`, the body's part, given `holes` (vectored output) and
/// at least [`OWNED_GATHER_MIN`] bytes, queued as a reference to the buffer,
/// else copied too. Returns the payload bytes queued in `holes`.
fn encode_owned(
    out: &mut Vec<u8>,
    holes: Option<&mut VecDeque<Hole>>,
    h: &DdpHdr,
    msg: &OwnedSend,
    at: usize,
    n: usize,
    crc: bool,
) -> usize {
    let (head, body) = (msg.head(), msg.body());
    let hs = at.min(head.len());
    let he = at.saturating_add(n).min(head.len());
    let left = n - (he - hs);
    let bs = at.saturating_sub(head.len());
    let part = body.get(bs..bs.saturating_add(left));
    let holes = holes.filter(|_| left >= OWNED_GATHER_MIN && part.is_some());
    let start = out.len();
    if holes.is_none() {
        out.reserve(2 + h.len() + n + 3 + 4);
    }
    ddp::encode_fpdu_head(out, h, n);
    out.extend_from_slice(&head[hs..he]);
    let mut c = crc.then(|| {
        let mut c = Crc32c::new();
        c.update(&out[start..]);
        c
    });
    let mut queued = 0;
    match (holes, part) {
        (_, _) if left == 0 => {}
        (Some(holes), Some(b)) => {
            if let Some(c) = c.as_mut() {
                c.update(b);
            }
            holes.push_back(Hole {
                at: out.len(),
                src: HoleSrc::Shared(msg.body.clone()),
                off: msg.range.start + bs,
                len: left,
            });
            queued = left;
        }
        (_, part) => {
            let p = out.len();
            match part {
                Some(b) => out.extend_from_slice(b),
                // Outside its buffer (checked when posted): zeros keep the
                // FPDU's length.
                None => out.resize(p + left, 0),
            }
            if let Some(c) = c.as_mut() {
                c.update(&out[p..]);
            }
        }
    }
    ddp::encode_fpdu_tail(out, h.len() + n, c);
    queued
}

/// Append one FPDU with header `h` whose payload is `n` bytes at byte `at` of the
/// file `src`: given `holes` (vectored output, CRC off), queued as a file hole sent
/// by sendfile between the header and the trailer in `out`; otherwise read into
/// `out` (zeros for what the file no longer holds) and the CRC, when on, computed
/// over those bytes, so the file is read once. Returns the payload bytes queued.
fn encode_file_payload(
    out: &mut Vec<u8>,
    holes: Option<&mut VecDeque<Hole>>,
    h: &DdpHdr,
    src: &Arc<dyn FileRange>,
    at: usize,
    n: usize,
    crc: bool,
) -> usize {
    let start = out.len();
    ddp::encode_fpdu_head(out, h, n);
    let queued = match holes.filter(|_| !crc && n > 0) {
        Some(holes) => {
            holes.push_back(Hole {
                at: out.len(),
                src: HoleSrc::File(src.clone()),
                off: at,
                len: n,
            });
            n
        }
        None => {
            let p = out.len();
            out.reserve(n + 7);
            src.read_part(out, at, n);
            out.resize(p + n, 0);
            0
        }
    };
    let c = crc.then(|| {
        let mut c = Crc32c::new();
        c.update(&out[start..]);
        c
    });
    ddp::encode_fpdu_tail(out, h.len() + n, c);
    queued
}

impl Engine {
    /// An engine for a queue pair that has just completed MPA setup.
    pub(crate) fn new(qp: Arc<QpShared>, cfg: EngineConfig) -> Engine {
        Engine {
            qp,
            cfg,
            tx_send_msn: 1,
            tx_rreq_msn: 1,
            tx_term_msn: 1,
            cur_tx: None,
            irq: VecDeque::new(),
            orq: VecDeque::new(),
            rx_send_msn: 1,
            rx_rreq_msn: 1,
            cur_rx: None,
            send_rtr: cfg.send_rtr,
            expect_rtr: cfg.expect_rtr,
            rtr_read_pending: false,
            write_cache: None,
            placing: None,
            rx_skip: 0,
            read_hint: None,
            short_run: 0,
            vectored: false,
            holes: VecDeque::new(),
            hole_bytes: 0,
            tx_done: VecDeque::new(),
            closed: None,
            completions: Vec::new(),
            rx_filled: 0,
        }
    }

    /// Why the engine stopped, once it has (no more input is accepted).
    pub fn closed(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// Completions produced since the last call.
    pub fn take_completions(&mut self) -> std::vec::Drain<'_, Completion> {
        self.completions.drain(..)
    }

    /// Move produced completions to the queue pair's completion queue.
    pub fn deliver_completions(&mut self) {
        if !self.completions.is_empty() {
            self.qp.cq.push_all(self.completions.drain(..));
        }
    }

    /// Whether a message is part-way encoded (a long one cut at the output's
    /// budget): its next FPDUs are ready to encode.
    pub fn in_message(&self) -> bool {
        self.cur_tx.is_some()
    }

    /// Whether there is send work the engine could encode now: what
    /// [`Engine::pump_tx`] would start or go on with. An RDMA Read at the send
    /// queue's head while ORD Reads are outstanding is not ([`Engine::waits_for_ord`]):
    /// it waits for a Read Response, and a driver that took it for work would go
    /// round its loop without waiting until one came.
    pub fn has_tx_work(&self) -> bool {
        if self.closed.is_some() {
            return false;
        }
        if self.send_rtr.is_some() || self.cur_tx.is_some() {
            return true;
        }
        if self.expect_rtr.is_some() {
            return false;
        }
        !self.irq.is_empty()
            || self
                .qp
                .lock()
                .sq
                .front()
                .is_some_and(|w| !self.waits_for_ord(w))
    }

    /// Whether `w`, at the send queue's head, must wait: an RDMA Read while ORD
    /// Reads are outstanding (their responses not all in).
    fn waits_for_ord(&self, w: &SendWqe) -> bool {
        matches!(w.kind, WqeKind::Read { .. } | WqeKind::ReadFile { .. })
            && self.orq.len() >= usize::from(self.cfg.ord.max(1))
    }

    // ---------------------------------------------------------------- TX

    /// Encode FPDUs into `out` until it holds at least `budget` bytes or there
    /// is nothing more to send now.
    pub fn pump_tx(&mut self, out: &mut Vec<u8>, budget: usize) {
        while self.closed.is_none() && out.len() + self.hole_bytes < budget {
            if self.cur_tx.is_none() && !self.start_next(out) {
                break;
            }
            self.step_tx(out);
        }
    }

    /// Pick the next message; false when nothing can be sent now.
    fn start_next(&mut self, out: &mut Vec<u8>) -> bool {
        if let Some(rtr) = self.send_rtr.take() {
            self.encode_rtr(rtr, out);
            return true;
        }
        if self.expect_rtr.is_some() {
            return false;
        }
        if let Some(r) = self.irq.pop_front() {
            self.cur_tx = Some(TxMsg::Resp(r));
            return true;
        }
        loop {
            let wqe = {
                let mut g = self.qp.lock();
                match g.sq.front() {
                    None => return false,
                    Some(w) if self.waits_for_ord(w) => return false,
                    Some(_) => {}
                }
                match g.sq.pop_front() {
                    Some(w) => w,
                    None => return false,
                }
            };
            if let WqeKind::LocalInv { stag } = wqe.kind {
                let st = if self.qp.pd.invalidate(STag(stag)) {
                    WcStatus::Success
                } else {
                    WcStatus::LocalProtectionError
                };
                self.completions
                    .push(comp(wqe.wr_id, WcOpcode::LocalInvalidate, st, 0));
                continue;
            }
            let msn = match wqe.kind {
                WqeKind::Send { .. } | WqeKind::SendOwned { .. } => {
                    let m = self.tx_send_msn;
                    self.tx_send_msn = m.wrapping_add(1);
                    m
                }
                WqeKind::Read { .. } | WqeKind::ReadFile { .. } => {
                    let m = self.tx_rreq_msn;
                    self.tx_rreq_msn = m.wrapping_add(1);
                    m
                }
                _ => 0,
            };
            self.cur_tx = Some(TxMsg::Sq { wqe, sent: 0, msn });
            return true;
        }
    }

    fn encode_rtr(&mut self, rtr: Rtr, out: &mut Vec<u8>) {
        let crc = self.cfg.crc;
        match rtr {
            Rtr::Send => {
                let msn = self.tx_send_msn;
                self.tx_send_msn += 1;
                let h = DdpHdr::Untagged {
                    last: true,
                    opcode: op::SEND,
                    inv_stag: 0,
                    qn: qn::SEND,
                    msn,
                    mo: 0,
                };
                ddp::encode_fpdu(out, &h, &[], crc);
            }
            Rtr::Write => {
                let h = DdpHdr::Tagged {
                    last: true,
                    opcode: op::WRITE,
                    stag: 1,
                    to: 0,
                };
                ddp::encode_fpdu(out, &h, &[], crc);
            }
            Rtr::Read => {
                let msn = self.tx_rreq_msn;
                self.tx_rreq_msn += 1;
                self.rtr_read_pending = true;
                let h = DdpHdr::Untagged {
                    last: true,
                    opcode: op::READ_REQ,
                    inv_stag: 0,
                    qn: qn::READ,
                    msn,
                    mo: 0,
                };
                let body = ReadReq {
                    sink_stag: 1,
                    sink_to: 0,
                    size: 0,
                    src_stag: 1,
                    src_to: 0,
                }
                .encode();
                ddp::encode_fpdu(out, &h, &[&body], crc);
            }
        }
    }

    /// Encode a zero-length RDMA Write (STag 1, TO 0; nothing is placed).
    ///
    /// The wake-up an initiator sends while it has heard nothing since the
    /// MPA Reply: Linux siw (`siw_accept`) sends its Reply before it hands
    /// the socket's data-ready upcall to the queue pair, so FPDUs arriving
    /// in between wait unread in its socket until more bytes arrive.
    pub(crate) fn encode_nudge(&mut self, out: &mut Vec<u8>) {
        if self.closed.is_none() {
            self.encode_rtr(Rtr::Write, out);
        }
    }

    /// Encode one FPDU of the current message.
    fn step_tx(&mut self, out: &mut Vec<u8>) {
        let crc = self.cfg.crc;
        let max = self.cfg.max_ulpdu;
        // RDMA Writes and Read Responses: large FPDUs where both ends offered them.
        let tagged_max = self.tagged_max();
        let holes = self.vectored.then_some(&mut self.holes);
        let mut finished: Option<Completion> = None;
        let mut queued = 0;
        // The message's bytes are the engine's own (a Send from an owned
        // buffer): its completion waits for no write.
        let mut settled = false;
        let Some(cur) = self.cur_tx.as_mut() else {
            return;
        };
        let done = match cur {
            TxMsg::Resp(r) => {
                let rmax = if r.len >= RESP_LARGE_MIN {
                    tagged_max
                } else {
                    max - TAGGED_HDR
                };
                let n = (r.len - r.sent).min(rmax);
                let last = r.sent + n == r.len;
                let h = DdpHdr::Tagged {
                    last,
                    opcode: op::READ_RESP,
                    stag: r.sink_stag,
                    to: r.sink_to.wrapping_add(r.sent as u64),
                };
                let at = r.sent;
                match &r.src {
                    Some((mr, off)) => {
                        let sg = [(mr.clone(), *off, r.len)];
                        let holes = holes.filter(|_| r.len >= GATHER_MIN);
                        queued += encode_payload(out, holes, &h, &sg, at, n, crc);
                    }
                    None => ddp::encode_fpdu(out, &h, &[], crc),
                }
                r.sent += n;
                last
            }
            TxMsg::Sq { wqe, sent, msn } => match wqe.kind {
                WqeKind::Send { inv } | WqeKind::SendOwned { inv, .. } => {
                    let n = (wqe.total - *sent).min(max - UNTAGGED_HDR);
                    let last = *sent + n == wqe.total;
                    let opcode = match (inv.is_some(), wqe.solicited) {
                        (false, false) => op::SEND,
                        (true, false) => op::SEND_INV,
                        (false, true) => op::SEND_SE,
                        (true, true) => op::SEND_SE_INV,
                    };
                    let h = DdpHdr::Untagged {
                        last,
                        opcode,
                        inv_stag: inv.unwrap_or(0),
                        qn: qn::SEND,
                        msn: *msn,
                        mo: *sent as u32,
                    };
                    let at = *sent;
                    match &wqe.kind {
                        WqeKind::SendOwned { msg, .. } => {
                            // Nothing outside the engine holds its bytes: it
                            // completes as it is queued.
                            settled = true;
                            queued += encode_owned(out, holes, &h, msg, at, n, crc);
                        }
                        _ => {
                            let holes = holes.filter(|_| wqe.total >= GATHER_MIN);
                            queued += encode_payload(out, holes, &h, &wqe.sg, at, n, crc);
                        }
                    }
                    *sent += n;
                    if last {
                        finished = Some(comp(
                            wqe.wr_id,
                            WcOpcode::Send,
                            WcStatus::Success,
                            wqe.total,
                        ));
                    }
                    last
                }
                WqeKind::Write { remote } => {
                    let mut n = (wqe.total - *sent).min(tagged_max);
                    if wqe.file.is_some() && holes.is_some() && !crc && self.cfg.large.is_none() {
                        // Sent from the file (sendfile) in standard FPDUs.
                        n = n.min(FILE_FPDU_MAX);
                    }
                    let last = *sent + n == wqe.total;
                    let h = DdpHdr::Tagged {
                        last,
                        opcode: op::WRITE,
                        stag: remote.stag.0,
                        to: remote.to.wrapping_add(*sent as u64),
                    };
                    let at = *sent;
                    match &wqe.file {
                        Some((src, base)) => {
                            // A short payload where FPDUs are long (loopback's MSS)
                            // is read in; at an Ethernet MSS every payload is short.
                            let short = n < FILE_COPY_MAX && max - TAGGED_HDR > FILE_COPY_MAX;
                            let holes = holes.filter(|_| !short);
                            queued += encode_file_payload(out, holes, &h, src, base + at, n, crc);
                        }
                        None => {
                            let holes = holes.filter(|_| wqe.total >= GATHER_MIN);
                            queued += encode_payload(out, holes, &h, &wqe.sg, at, n, crc);
                        }
                    }
                    *sent += n;
                    if last {
                        finished = Some(comp(
                            wqe.wr_id,
                            WcOpcode::RdmaWrite,
                            WcStatus::Success,
                            wqe.total,
                        ));
                    }
                    last
                }
                WqeKind::Read { .. } | WqeKind::ReadFile { .. } => {
                    let (sink, sink_stag, sink_to, remote) = match &wqe.kind {
                        WqeKind::ReadFile { remote, sink, at } => (
                            ReadSink::File(sink.clone(), *at),
                            FILE_SINK_STAG,
                            *at as u64,
                            *remote,
                        ),
                        WqeKind::Read { remote } => {
                            let Some(seg) = wqe.sg.first().cloned() else {
                                return;
                            };
                            let stag = seg.0.stag().0;
                            let to = seg.0.addr().wrapping_add(seg.1 as u64);
                            (ReadSink::Mr(seg), stag, to, *remote)
                        }
                        _ => return,
                    };
                    let h = DdpHdr::Untagged {
                        last: true,
                        opcode: op::READ_REQ,
                        inv_stag: 0,
                        qn: qn::READ,
                        msn: *msn,
                        mo: 0,
                    };
                    let body = ReadReq {
                        sink_stag,
                        sink_to,
                        size: remote.len,
                        src_stag: remote.stag.0,
                        src_to: remote.to,
                    }
                    .encode();
                    ddp::encode_fpdu(out, &h, &[&body], crc);
                    self.orq.push_back(OutRead {
                        wr_id: wqe.wr_id,
                        sink,
                        sink_stag,
                        sink_to,
                        size: u64::from(remote.len),
                        received: 0,
                    });
                    true
                }
                WqeKind::LocalInv { .. } => true,
            },
        };
        if done {
            self.cur_tx = None;
        }
        self.hole_bytes += queued;
        if let Some(c) = finished {
            if (!settled && !self.holes.is_empty()) || !self.tx_done.is_empty() {
                // Its bytes (or an earlier message's, whose completion comes
                // first) are read from the regions until written.
                self.tx_done.push_back((out.len(), c));
            } else {
                self.completions.push(c);
            }
        }
    }

    /// Most payload of one FPDU of an RDMA Write or Read Response: a large FPDU's
    /// where both ends offered them, else what the MSS allows.
    fn tagged_max(&self) -> usize {
        let std = self.cfg.max_ulpdu - TAGGED_HDR;
        // Whole pages, so a payload from a file starts where a page does.
        self.cfg.large.map_or(std, |l| {
            (l.send.saturating_sub(TAGGED_HDR) & !4095).max(std)
        })
    }

    /// The largest ULPDU taken in the long form, where large FPDUs were agreed.
    fn long_recv(&self) -> Option<usize> {
        self.cfg.large.map(|l| l.recv)
    }

    /// Bytes on the wire of the longest FPDU the peer may send: a receive buffer
    /// that FPDUs are decoded from whole must have room for one.
    pub fn max_fpdu_in(&self) -> usize {
        ddp::fpdu_len(self.long_recv().unwrap_or(ddp::MPA_MAX_ULPDU))
    }

    // ------------------------------------------------- vectored output

    /// Sends payloads from their regions instead of copying them into `out`
    /// (the TCP driver; tests and [`super::SansIoConn`] want whole bytes).
    /// Then `out` holds headers and trailers, [`Engine::write_vectored`]
    /// gathers the rest, and [`Engine::advance`] accounts for what the socket
    /// took; a Send or RDMA Write completes once its last byte was taken.
    pub fn set_vectored(&mut self, on: bool) {
        self.vectored = on;
    }

    /// Payload bytes queued besides `out` (vectored output).
    pub fn queued_payload(&self) -> usize {
        self.hole_bytes
    }

    /// Whether payloads are still queued besides `out`.
    pub fn has_holes(&self) -> bool {
        !self.holes.is_empty()
    }

    /// Sends the bytes to send next, from `out[wpos..]` and the queued payloads:
    /// calls `write` with them (regions locked meanwhile) up to the first payload
    /// from a file, and `send_file(src, at, n)` when that payload comes first (its
    /// `n` bytes from byte `at` of `src`). `write`'s flag says a file's payload
    /// comes right after its bytes: the driver then asks the socket to hold them
    /// for it (`MSG_MORE`), so a header and its payload leave as one segment.
    /// Returns what the call did: 0 from `send_file` means the file ended early
    /// (see [`Engine::file_ended`]).
    pub fn write_vectored(
        &self,
        out: &[u8],
        wpos: usize,
        write: impl FnOnce(&[std::io::IoSlice<'_>], bool) -> std::io::Result<usize>,
        send_file: impl FnOnce(&dyn FileRange, usize, usize) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        if let Some(h) = self.holes.front().filter(|h| h.at <= wpos) {
            if let HoleSrc::File(src) = &h.src {
                return send_file(&**src, h.off, h.len);
            }
        }
        let mut holes: Vec<&Hole> = Vec::new();
        let mut whole = true;
        for h in self.holes.iter() {
            if holes.len() == MAX_HOLES || matches!(h.src, HoleSrc::File(_)) {
                whole = false;
                break;
            }
            holes.push(h);
        }
        let mut guards: Vec<(&SoftMr, std::sync::MutexGuard<'_, Vec<u8>>)> = Vec::new();
        for h in &holes {
            if let HoleSrc::Mr(mr) = &h.src {
                if !guards.iter().any(|(m, _)| m.same(mr)) {
                    guards.push((mr, mr.lock()));
                }
            }
        }
        let mut iov = Vec::with_capacity(2 * holes.len() + 1);
        let mut pos = wpos;
        for h in &holes {
            if let Some(b) = out.get(pos..h.at).filter(|b| !b.is_empty()) {
                iov.push(std::io::IoSlice::new(b));
            }
            pos = pos.max(h.at);
            let region = match &h.src {
                HoleSrc::Mr(mr) => guards
                    .iter()
                    .find(|(m, _)| m.same(mr))
                    .and_then(|(_, g)| g.get(h.off..h.off + h.len)),
                HoleSrc::Owned(v) => v.get(h.off..h.off + h.len),
                HoleSrc::Shared(v) => v.get(h.off..h.off + h.len),
                HoleSrc::File(_) => None,
            };
            match region {
                Some(b) => iov.push(std::io::IoSlice::new(b)),
                None => return Err(std::io::Error::other("payload outside its region")),
            }
        }
        // Up to the next hole not gathered here (a file's, or past MAX_HOLES).
        let next = if whole {
            None
        } else {
            self.holes.get(holes.len())
        };
        let end = next.map_or(out.len(), |h| h.at);
        if let Some(b) = out.get(pos..end).filter(|b| !b.is_empty()) {
            iov.push(std::io::IoSlice::new(b));
        }
        write(
            &iov,
            next.is_some_and(|h| matches!(h.src, HoleSrc::File(_))),
        )
    }

    /// The file whose payload comes next ended before it was all sent (sendfile
    /// sent nothing, or refused): the rest of that payload is read in, zeros for
    /// what the file no longer holds (the FPDU's length is already on the wire).
    /// False when the next payload is not a file's.
    pub fn file_ended(&mut self) -> bool {
        let Some(h) = self.holes.front_mut() else {
            return false;
        };
        let HoleSrc::File(src) = &h.src else {
            return false;
        };
        let mut v = Vec::with_capacity(h.len);
        src.read_part(&mut v, h.off, h.len);
        v.resize(h.len, 0);
        h.src = HoleSrc::Owned(v);
        h.off = 0;
        true
    }

    /// `n` bytes from [`Engine::write_vectored`] went out: returns the new
    /// write position in `out` and releases the completions now due.
    pub fn advance(&mut self, out: &[u8], mut wpos: usize, mut n: usize) -> usize {
        loop {
            let next = self.holes.front().map_or(out.len(), |h| h.at);
            let k = next.saturating_sub(wpos).min(n);
            wpos += k;
            n -= k;
            if n == 0 {
                break;
            }
            let Some(h) = self.holes.front_mut() else {
                break;
            };
            let k = h.len.min(n);
            h.off += k;
            h.len -= k;
            n -= k;
            self.hole_bytes -= k;
            if h.len == 0 {
                self.holes.pop_front();
            }
        }
        while self.tx_done.front().is_some_and(|(at, _)| *at <= wpos) {
            if let Some((_, c)) = self.tx_done.pop_front() {
                self.completions.push(c);
            }
        }
        wpos
    }

    // ---------------------------------------------------------------- RX

    /// Consume FPDUs from `input`; returns how many bytes were used (a partial
    /// FPDU at the end is left for the next call). Protocol errors append a
    /// Terminate to `out` and close the engine.
    pub fn on_input(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        self.on_input_some(input, out, usize::MAX).0
    }

    /// [`Engine::on_input`] that stops once the FPDUs it consumed have produced
    /// `max` completions (a Send's last segment, a Read Response's last, ...;
    /// not a received Send that filled its buffer: see `rx_filled`);
    /// returns the bytes used and whether it stopped for that reason, with whole
    /// FPDUs possibly left in `input`. A caller hands the completions on and
    /// lets their consumers run (they answer, so their messages go out) before
    /// it calls again with the rest, instead of handing on a whole socket read's
    /// worth at once: the peer, waiting for those answers, gets them a batch at a
    /// time rather than all after the last.
    pub fn on_input_some(&mut self, input: &[u8], out: &mut Vec<u8>, max: usize) -> (usize, bool) {
        let mut used = 0;
        let done_before = self.completions.len();
        let filled_before = self.rx_filled;
        let mut capped = false;
        self.read_hint = None;
        if self.closed.is_some() {
            return (0, false);
        }
        // A payload being placed directly takes the first bytes (a caller
        // that does not read into `placement()` itself hands them in here).
        if let Some(p) = &self.placing {
            let n = p.left.min(input.len());
            match &p.dst {
                PlaceDst::Mr(mr) => {
                    let mut b = mr.lock();
                    if let Some(d) = b.get_mut(p.off..p.off + n) {
                        d.copy_from_slice(&input[..n]);
                    }
                }
                PlaceDst::File(f) if n > 0 => f.write_part(p.off, &input[..n]),
                PlaceDst::File(_) => {}
            }
            self.placed(n);
            used = n;
            if self.placing.is_some() {
                return (used, false);
            }
        }
        let skip = self.rx_skip.min(input.len() - used);
        self.rx_skip -= skip;
        used += skip;
        let (mut fpdus, mut long) = (0, false);
        while self.closed.is_none() {
            let rest = &input[used..];
            match ddp::decode_fpdu_long(rest, self.cfg.crc, self.long_recv()) {
                Ok(None) => {
                    match self.start_placement(rest) {
                        Ok(true) => used = input.len(),
                        Ok(false) => {}
                        Err(t) => self.terminate(t, ddp::terminated_header(rest, TAGGED_HDR), out),
                    }
                    break;
                }
                Err(e) => {
                    let hdr = ddp::terminated_header(rest, UNTAGGED_HDR);
                    self.terminate(e.term, hdr, out);
                    break;
                }
                Ok(Some(f)) => {
                    let wire = f.wire_len;
                    fpdus += 1;
                    long |= matches!(f.hdr, DdpHdr::Tagged { .. }) && f.payload.len() >= PLACE_MIN;
                    if let Err(t) = self.on_fpdu(f.hdr, f.payload) {
                        self.terminate(t, ddp::terminated_header(rest, f.hdr.len()), out);
                        break;
                    }
                    used += wire;
                    // A Send that filled its buffer (a fragment with more to follow)
                    // does not count: a batch is `max` whole messages, whatever
                    // their size.
                    let filled = (self.rx_filled - filled_before) as usize;
                    let done = self.completions.len() - done_before - filled;
                    if done >= max && used < input.len() {
                        capped = true;
                        break;
                    }
                }
            }
        }
        if self.placing.is_some() {
            self.short_run = SHORT_RUN;
        } else {
            self.bound_next_read(input.get(used..).unwrap_or_default(), fpdus, long);
        }
        (used, capped)
    }

    /// Close with a locally detected error: append a Terminate (QN 2).
    pub fn terminate(&mut self, t: TermInfo, hdr: Option<&[u8]>, out: &mut Vec<u8>) {
        if self.closed.is_some() {
            return;
        }
        let mut body = [0u8; 24];
        let n = ddp::terminate_body(t, hdr, &mut body);
        let h = DdpHdr::Untagged {
            last: true,
            opcode: op::TERMINATE,
            inv_stag: 0,
            qn: qn::TERMINATE,
            msn: self.tx_term_msn,
            mo: 0,
        };
        self.tx_term_msn += 1;
        ddp::encode_fpdu(out, &h, &[&body[..n]], self.cfg.crc);
        tracing::debug!(?t, "iwarp: sending Terminate");
        self.closed = Some(CloseReason::LocalTerminate(t));
    }

    fn on_fpdu(&mut self, hdr: DdpHdr, payload: &[u8]) -> Result<(), TermInfo> {
        if let Some(rtr) = self.expect_rtr {
            return self.on_rtr(rtr, hdr, payload);
        }
        match hdr {
            DdpHdr::Tagged {
                last,
                opcode,
                stag,
                to,
            } => match opcode {
                op::WRITE => self.on_write(last, stag, to, payload),
                op::READ_RESP => self.on_read_resp(last, stag, to, payload),
                _ => Err(term::RDMAP_OPCODE),
            },
            DdpHdr::Untagged {
                last,
                opcode,
                inv_stag,
                qn: q,
                msn,
                mo,
            } => match opcode {
                op::SEND | op::SEND_INV | op::SEND_SE | op::SEND_SE_INV => {
                    if q != qn::SEND {
                        return Err(term::DDP_UT_INVALID_QN);
                    }
                    self.on_send(last, opcode, inv_stag, msn, mo, payload)
                }
                op::READ_REQ => {
                    if q != qn::READ {
                        return Err(term::DDP_UT_INVALID_QN);
                    }
                    self.on_read_req(last, msn, mo, payload)
                }
                op::TERMINATE => {
                    if q != qn::TERMINATE {
                        return Err(term::DDP_UT_INVALID_QN);
                    }
                    let t = ddp::parse_terminate(payload).unwrap_or(TermInfo {
                        layer: 0,
                        etype: 0,
                        ecode: 0,
                    });
                    if let Some(r) = self.orq.pop_front() {
                        let st = if t.layer <= 1 && t.etype == 1 {
                            WcStatus::RemoteAccessError
                        } else {
                            WcStatus::RemoteOperationError
                        };
                        self.completions
                            .push(comp(r.wr_id, WcOpcode::RdmaRead, st, 0));
                    }
                    self.closed = Some(CloseReason::PeerTerminate(t));
                    Ok(())
                }
                _ => Err(term::RDMAP_OPCODE),
            },
        }
    }

    /// As responder in peer-to-peer mode: the first FPDU must be the RTR.
    fn on_rtr(&mut self, rtr: Rtr, hdr: DdpHdr, payload: &[u8]) -> Result<(), TermInfo> {
        let ok = match (rtr, hdr) {
            (
                Rtr::Send,
                DdpHdr::Untagged {
                    opcode: op::SEND,
                    qn: qn::SEND,
                    msn,
                    mo: 0,
                    last: true,
                    ..
                },
            ) if payload.is_empty() && msn == self.rx_send_msn => {
                self.rx_send_msn += 1;
                true
            }
            (
                Rtr::Write,
                DdpHdr::Tagged {
                    opcode: op::WRITE,
                    last: true,
                    ..
                },
            ) if payload.is_empty() => true,
            (
                Rtr::Read,
                DdpHdr::Untagged {
                    opcode: op::READ_REQ,
                    qn: qn::READ,
                    msn,
                    mo: 0,
                    last: true,
                    ..
                },
            ) if msn == self.rx_rreq_msn => match ReadReq::decode(payload) {
                Some(r) if r.size == 0 && r.sink_stag != 0 => {
                    self.rx_rreq_msn += 1;
                    self.irq.push_back(InRead {
                        src: None,
                        len: 0,
                        sink_stag: r.sink_stag,
                        sink_to: r.sink_to,
                        sent: 0,
                    });
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if ok {
            self.expect_rtr = None;
            Ok(())
        } else {
            Err(term::MPA_NO_MATCHING_RTR)
        }
    }

    /// The region `stag` names, from the one-entry cache when it is the last
    /// one written (borrowed: no reference count traffic per FPDU).
    fn lookup_remote(&mut self, stag: u32) -> Option<&SoftMr> {
        if self.write_cache.as_ref().is_none_or(|m| m.stag().0 != stag) {
            self.write_cache = Some(self.qp.pd.lookup(STag(stag))?);
        }
        self.write_cache.as_ref()
    }

    fn on_write(&mut self, last: bool, stag: u32, to: u64, payload: &[u8]) -> Result<(), TermInfo> {
        // A zero-length RDMA Write places nothing: no STag or offset is
        // checked (Linux siw does the same). Initiators use it as an RTR and
        // as the wake-up of `encode_nudge`.
        if payload.is_empty() {
            return Ok(());
        }
        let off = self.write_target(stag, to, payload.len())?;
        self.place_now(&Target::Write, off, payload)?;
        if last {
            self.write_done();
        }
        Ok(())
    }

    /// An RDMA Write's last segment is in: the engine lets go of its region,
    /// so that the consumer, told by the Send behind it, holds the only handle
    /// and can take the buffer back without a copy ([`SoftMr::into_buffer`]).
    fn write_done(&mut self) {
        self.write_cache = None;
    }

    /// Checks an RDMA Write of `len` bytes (more than zero) at `to` of `stag`;
    /// returns the offset in the region, which [`Engine::write_cache`] then holds.
    fn write_target(&mut self, stag: u32, to: u64, len: usize) -> Result<usize, TermInfo> {
        let mr = self.lookup_remote(stag).ok_or(term::DDP_T_INVALID_STAG)?;
        if !mr.is_valid() {
            return Err(term::DDP_T_INVALID_STAG);
        }
        if !mr.access().contains(Access::REMOTE_WRITE) {
            return Err(term::RDMAP_ACCESS);
        }
        let len = len as u64;
        if to.checked_add(len).is_none() {
            return Err(term::DDP_T_TO_WRAP);
        }
        mr.offset_of(to, len).ok_or(term::DDP_T_BASE_BOUNDS)
    }

    /// The region a checked placement goes to.
    fn target_mr(&self, t: &Target) -> Option<&SoftMr> {
        match t {
            Target::Write => self.write_cache.as_ref(),
            Target::ReadResp => match self.orq.front().map(|r| &r.sink) {
                Some(ReadSink::Mr((mr, _, _))) => Some(mr),
                _ => None,
            },
        }
    }

    /// Copies `bytes` to `off` of a checked target's region.
    fn place_now(&self, t: &Target, off: usize, bytes: &[u8]) -> Result<(), TermInfo> {
        if let Target::ReadResp = t {
            if let Some(f) = self.orq.front().and_then(|r| r.sink.file()) {
                // Checked against the request, which was checked against the file range.
                f.write_part(off, bytes);
                return Ok(());
            }
        }
        let mr = self.target_mr(t).ok_or(term::DDP_T_INVALID_STAG)?;
        let mut b = mr.lock();
        match off
            .checked_add(bytes.len())
            .and_then(|end| b.get_mut(off..end))
        {
            Some(d) => d.copy_from_slice(bytes),
            None => return Err(term::DDP_T_BASE_BOUNDS),
        }
        Ok(())
    }

    fn on_read_resp(
        &mut self,
        last: bool,
        stag: u32,
        to: u64,
        payload: &[u8],
    ) -> Result<(), TermInfo> {
        if self.rtr_read_pending {
            // The zero-length Read Response answering our RTR: Read Responses
            // come in request order and the RTR went before any Read Request
            // the consumer posted, so it is the first one whatever the orq holds.
            if payload.is_empty() && last {
                self.rtr_read_pending = false;
                return Ok(());
            }
            return Err(term::RDMAP_OPCODE);
        }
        let at = self.read_resp_target(last, stag, to, payload.len())?;
        self.place_now(&Target::ReadResp, at, payload)?;
        if let Some(c) = self.read_resp_advance(last, payload.len()) {
            self.completions.push(c);
        }
        Ok(())
    }

    /// Checks a Read Response segment of `len` bytes at `to` of `stag` against
    /// the oldest outstanding Read Request; returns the offset in its sink.
    fn read_resp_target(
        &self,
        last: bool,
        stag: u32,
        to: u64,
        len: usize,
    ) -> Result<usize, TermInfo> {
        let Some(r) = self.orq.front() else {
            return Err(term::RDMAP_OPCODE);
        };
        if stag != r.sink_stag {
            return Err(term::DDP_T_INVALID_STAG);
        }
        let rel = to.checked_sub(r.sink_to).ok_or(term::DDP_T_BASE_BOUNDS)?;
        let len = len as u64;
        if rel != r.received || rel + len > r.size || (last && rel + len != r.size) {
            return Err(term::DDP_T_BASE_BOUNDS);
        }
        let off = match &r.sink {
            ReadSink::Mr((_, off, _)) => off,
            ReadSink::File(_, at) => at,
        };
        usize::try_from(rel)
            .ok()
            .and_then(|rel| off.checked_add(rel))
            .ok_or(term::DDP_T_BASE_BOUNDS)
    }

    /// Counts a checked Read Response segment of `len` bytes as received; the
    /// last one retires the request and returns its completion.
    fn read_resp_advance(&mut self, last: bool, len: usize) -> Option<Completion> {
        let r = self.orq.front_mut()?;
        r.received += len as u64;
        if !last {
            return None;
        }
        // A read slot frees: the driver will call pump_tx again.
        let r = self.orq.pop_front()?;
        let st = match r.sink.file() {
            Some(f) if f.failed() => WcStatus::LocalProtectionError,
            _ => WcStatus::Success,
        };
        Some(comp(r.wr_id, WcOpcode::RdmaRead, st, r.size as usize))
    }

    // ------------------------------------------------- direct placement

    /// With the FPDU at the front of `rest` incomplete: when it is a tagged
    /// segment (RDMA Write or Read Response) with at least [`PLACE_MIN`]
    /// payload bytes still to come and CRC is off, checks it whole as if it
    /// had arrived, places what `rest` holds of its payload and returns true:
    /// the rest of the payload then goes straight into its region
    /// ([`Engine::placement`]), with no copy through the receive buffer.
    fn start_placement(&mut self, rest: &[u8]) -> Result<bool, TermInfo> {
        if self.cfg.crc || self.expect_rtr.is_some() || self.rtr_read_pending {
            return Ok(false);
        }
        let (hdr, ulpdu) = match ddp::decode_header(rest, self.long_recv()) {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(false),
            Err(e) => return Err(e.term),
        };
        let DdpHdr::Tagged {
            last,
            opcode,
            stag,
            to,
        } = hdr
        else {
            return Ok(false);
        };
        let plen = ulpdu - TAGGED_HDR;
        let at = ddp::prefix_len(ulpdu) + TAGGED_HDR;
        let have = rest.len().saturating_sub(at).min(plen);
        if plen - have < PLACE_MIN {
            return Ok(false);
        }
        let payload = &rest[at..at + have];
        let (target, off, done) = match opcode {
            op::WRITE => (Target::Write, self.write_target(stag, to, plen)?, None),
            op::READ_RESP => {
                let at = self.read_resp_target(last, stag, to, plen)?;
                (Target::ReadResp, at, Some(last))
            }
            _ => return Err(term::RDMAP_OPCODE),
        };
        if !payload.is_empty() {
            self.place_now(&target, off, payload)?;
        }
        let file = match target {
            Target::ReadResp => self.orq.front().and_then(|r| r.sink.file()).cloned(),
            Target::Write => None,
        };
        let dst = match file {
            Some(f) => PlaceDst::File(f),
            None => PlaceDst::Mr(
                self.target_mr(&target)
                    .ok_or(term::DDP_T_INVALID_STAG)?
                    .clone(),
            ),
        };
        let done = match done {
            Some(last) => self.read_resp_advance(last, plen),
            None => {
                if last {
                    // The placement holds the region until its last byte.
                    self.write_done();
                }
                None
            }
        };
        self.placing = Some(Placing {
            dst,
            off: off + have,
            left: plen - have,
            trailer: ddp::trailer_len(ulpdu),
            prefix: ddp::prefix_len(ulpdu),
            done,
        });
        Ok(true)
    }

    /// Where the next bytes from the socket go while an FPDU's payload is
    /// placed directly: (region, offset in its buffer, bytes still to come).
    /// Read into that range, then report with [`Engine::placed`]. `None`: read
    /// into the receive buffer and hand it to [`Engine::on_input`].
    pub fn placement(&self) -> Option<(&SoftMr, usize, usize)> {
        match self.placing.as_ref()? {
            Placing {
                dst: PlaceDst::Mr(mr),
                off,
                left,
                ..
            } => Some((mr, *off, *left)),
            _ => None,
        }
    }

    /// Like [`Engine::placement`] for a Read Response whose sink is a file range
    /// ([`crate::QueuePair::post_read_file`]): (the range, its byte of the next
    /// payload byte, bytes still to come). Move them with
    /// [`FileSink::recv_part`], then report with [`Engine::placed`]; nothing
    /// past the payload comes with them.
    pub fn placement_file(&self) -> Option<(Arc<dyn FileSink>, usize, usize)> {
        match self.placing.as_ref()? {
            Placing {
                dst: PlaceDst::File(f),
                off,
                left,
                ..
            } => Some((f.clone(), *off, *left)),
            _ => None,
        }
    }

    /// While a payload is placed directly: the bytes that follow it which a
    /// read may take together with its rest (the FPDU's pad and CRC, and
    /// [`LOOKAHEAD`] bytes of the next FPDU: what [`Engine::read_limit`] asks
    /// for once it is placed); 0 otherwise. Hand them to [`Engine::on_input`]
    /// after [`Engine::placed`].
    pub fn placement_tail(&self) -> usize {
        self.placing.as_ref().map_or(0, |p| p.trailer + LOOKAHEAD)
    }

    /// `n` bytes (at most the placement's remainder) were read into the
    /// placement's range. The FPDU's pad and CRC follow in the stream.
    pub fn placed(&mut self, n: usize) {
        let Some(p) = self.placing.as_mut() else {
            return;
        };
        let n = n.min(p.left);
        p.off += n;
        p.left -= n;
        if p.left == 0 {
            if let Some(p) = self.placing.take() {
                self.rx_skip = p.trailer;
                let mut next = LOOKAHEAD;
                if let PlaceDst::File(f) = &p.dst {
                    // More of a long Read Response into a file to come: read just
                    // its next header, so its payload is spliced whole rather than
                    // its first kilobyte read in and written apart.
                    let more = self.orq.front().filter(|r| r.sink.file().is_some());
                    if let Some(r) =
                        more.filter(|r| p.done.is_none() && r.size - r.received >= PLACE_MIN as u64)
                    {
                        // A large FPDU's header after a large one, while what is left
                        // does not fit 16 bits.
                        let left = usize::try_from(r.size - r.received).unwrap_or(usize::MAX);
                        let long = left.saturating_add(TAGGED_HDR) > ddp::MPA_MAX_ULPDU;
                        next = TAGGED_HDR + if long { p.prefix } else { 2 };
                    }
                    let failed = f.failed();
                    self.completions.extend(p.done.map(|mut c| {
                        if failed {
                            c.status = WcStatus::LocalProtectionError;
                        }
                        c
                    }));
                } else {
                    self.completions.extend(p.done);
                }
                self.read_hint = Some(p.trailer + next);
            }
            self.short_run = SHORT_RUN;
        }
    }

    /// The most bytes the driver should read next, when it should not read
    /// all it can: after a long tagged FPDU (placed directly or not), the
    /// rest of the FPDU under way and [`LOOKAHEAD`] bytes past it, so that a
    /// long tagged payload behind it starts being placed while most of it is
    /// still in the socket (read whole into the receive buffer, it would be
    /// copied twice); and [`LOOKAHEAD`] while a Read to place is outstanding
    /// ([`Engine::reads_to_place`]).
    /// `None` otherwise.
    pub fn read_limit(&self) -> Option<usize> {
        self.read_hint.or_else(|| {
            // A Read posted since: its Read Responses are to be placed or spliced.
            self.reads_to_place().then_some(LOOKAHEAD)
        })
    }

    /// Whether a Read is outstanding whose Read Responses are to go straight
    /// from the socket to their sink: one into a file, or (CRC off, as
    /// [`Engine::start_placement`] needs) one with at least [`PLACE_MIN`] bytes
    /// still to come. 64 KiB WRITEs at depth 8 (s46, 6 alternated pairs, Reads
    /// into regions bounded against not): MB/s 1,707 against 1,591, machine
    /// cycles/byte 2.24 against 2.41 (a memmove of every payload byte gone).
    fn reads_to_place(&self) -> bool {
        let long = |r: &OutRead| !self.cfg.crc && r.size - r.received >= PLACE_MIN as u64;
        self.orq.iter().any(|r| r.sink.file().is_some() || long(r))
    }

    /// Sets [`Engine::read_limit`] after `on_input` stopped at `rest` (the
    /// bytes it left), having completed `fpdus` FPDUs, a long tagged one
    /// among them if `long`.
    fn bound_next_read(&mut self, rest: &[u8], fpdus: usize, long: bool) {
        if long {
            self.short_run = SHORT_RUN;
        } else {
            let n = u8::try_from(fpdus).unwrap_or(u8::MAX);
            self.short_run = self.short_run.saturating_sub(n);
        }
        self.read_hint = None;
        // While a Read is outstanding reads stay bounded, so its Read Responses
        // are placed or spliced rather than read into the buffer whole.
        let to_place = self.reads_to_place();
        if (self.short_run == 0 && !to_place) || self.closed.is_some() || self.placing.is_some() {
            return;
        }
        let need = match ddp::decode_header(rest, self.long_recv()) {
            Ok(Some((_, ulpdu))) => ddp::fpdu_len(ulpdu).saturating_sub(rest.len()),
            _ => 0,
        };
        self.read_hint = Some(need + LOOKAHEAD);
    }

    fn on_send(
        &mut self,
        last: bool,
        opcode: u8,
        inv_stag: u32,
        msn: u32,
        mo: u32,
        payload: &[u8],
    ) -> Result<(), TermInfo> {
        if msn != self.rx_send_msn {
            return Err(term::DDP_UT_MSN_RANGE);
        }
        if self.cur_rx.is_none() {
            if mo != 0 {
                return Err(term::DDP_UT_INVALID_MO);
            }
            let wqe = self
                .qp
                .lock()
                .rq
                .pop_front()
                .ok_or(term::DDP_UT_NO_BUFFER)?;
            // Allocated now, not when posted: a message of one segment gets a
            // buffer of its size, taken from memory freed moments ago.
            let owned = wqe.is_owned().then(|| {
                let n = if last { payload.len() } else { wqe.total };
                Vec::with_capacity(n.min(wqe.total))
            });
            self.cur_rx = Some(RxRecv {
                wqe,
                received: 0,
                owned,
            });
        }
        let Some(rx) = self.cur_rx.as_mut() else {
            return Err(term::DDP_UT_NO_BUFFER);
        };
        if mo as usize != rx.received {
            return Err(term::DDP_UT_INVALID_MO);
        }
        let end = rx
            .received
            .checked_add(payload.len())
            .ok_or(term::DDP_UT_TOO_LONG)?;
        if end > rx.wqe.total {
            let wr_id = rx.wqe.wr_id;
            self.cur_rx = None;
            self.completions
                .push(comp(wr_id, WcOpcode::Recv, WcStatus::LocalLengthError, 0));
            return Err(term::DDP_UT_TOO_LONG);
        }
        match rx.owned.as_mut() {
            // An owned receive: appended (its length was checked above).
            Some(buf) => buf.extend_from_slice(payload),
            None => scatter(&rx.wqe.sg, rx.received, payload),
        }
        rx.received = end;
        if !last {
            return Ok(());
        }
        let mut invalidated = None;
        if opcode == op::SEND_INV || opcode == op::SEND_SE_INV {
            if !self.qp.pd.invalidate_remote(STag(inv_stag)) {
                return Err(term::RDMAP_CANNOT_INVALIDATE);
            }
            invalidated = Some(STag(inv_stag));
        }
        let Some(mut rx) = self.cur_rx.take() else {
            return Err(term::DDP_UT_NO_BUFFER);
        };
        if let Some(buf) = rx.owned.take() {
            // Handed back by take_received once the completion is taken.
            self.qp.lock().received.push_back((rx.wqe.wr_id, buf));
        }
        self.rx_send_msn = self.rx_send_msn.wrapping_add(1);
        if rx.received == rx.wqe.total {
            self.rx_filled += 1;
        }
        self.completions.push(Completion {
            wr_id: rx.wqe.wr_id,
            opcode: WcOpcode::Recv,
            status: WcStatus::Success,
            byte_len: rx.received as u32,
            invalidated,
            solicited: opcode == op::SEND_SE || opcode == op::SEND_SE_INV,
        });
        Ok(())
    }

    fn on_read_req(
        &mut self,
        last: bool,
        msn: u32,
        mo: u32,
        payload: &[u8],
    ) -> Result<(), TermInfo> {
        if msn != self.rx_rreq_msn {
            return Err(term::DDP_UT_MSN_RANGE);
        }
        if !last || mo != 0 {
            return Err(term::DDP_UT_INVALID_MO);
        }
        let r = ReadReq::decode(payload).ok_or(term::RDMAP_OPCODE)?;
        let pending = self.irq.len() + usize::from(matches!(self.cur_tx, Some(TxMsg::Resp(_))));
        if pending >= usize::from(self.cfg.ird) {
            return Err(term::DDP_UT_MSN_RANGE);
        }
        let src = if r.size == 0 {
            None
        } else {
            let mr = self
                .qp
                .pd
                .lookup(STag(r.src_stag))
                .ok_or(term::RDMAP_INVALID_STAG)?;
            if !mr.is_valid() {
                return Err(term::RDMAP_INVALID_STAG);
            }
            if !mr.access().contains(Access::REMOTE_READ) {
                return Err(term::RDMAP_ACCESS);
            }
            if r.src_to.checked_add(u64::from(r.size)).is_none()
                || r.sink_to.checked_add(u64::from(r.size)).is_none()
            {
                return Err(term::RDMAP_TO_WRAP);
            }
            let off = mr
                .offset_of(r.src_to, u64::from(r.size))
                .ok_or(term::RDMAP_BASE_BOUNDS)?;
            Some((mr, off))
        };
        self.rx_rreq_msn = self.rx_rreq_msn.wrapping_add(1);
        self.irq.push_back(InRead {
            src,
            len: r.size as usize,
            sink_stag: r.sink_stag,
            sink_to: r.sink_to,
            sent: 0,
        });
        Ok(())
    }

    /// Record a non-protocol close (peer EOF, I/O error, local disconnect).
    pub fn set_closed(&mut self, reason: CloseReason) {
        if self.closed.is_none() {
            self.closed = Some(reason);
        }
    }

    /// Tear down: flush every outstanding work request with `Flushed`, publish
    /// the close reason and close the completion queue.
    pub fn shutdown(&mut self) {
        let reason = self.closed.clone().unwrap_or(CloseReason::LocalDisconnect);
        let flushed = |wr_id, opcode| comp(wr_id, opcode, WcStatus::Flushed, 0);
        if let Some(TxMsg::Sq { wqe, .. }) = self.cur_tx.take() {
            self.completions.push(flushed(wqe.wr_id, wc_of(&wqe.kind)));
        }
        for r in self.orq.drain(..) {
            self.completions.push(flushed(r.wr_id, WcOpcode::RdmaRead));
        }
        if let Some(rx) = self.cur_rx.take() {
            self.completions.push(flushed(rx.wqe.wr_id, WcOpcode::Recv));
        }
        self.irq.clear();
        self.write_cache = None;
        if let Some(c) = self.placing.take().and_then(|p| p.done) {
            self.completions.push(flushed(c.wr_id, WcOpcode::RdmaRead));
        }
        self.holes.clear();
        self.hole_bytes = 0;
        for (_, c) in self.tx_done.drain(..) {
            self.completions.push(flushed(c.wr_id, c.opcode));
        }
        {
            let mut g = self.qp.lock();
            for w in g.sq.drain(..) {
                self.completions.push(flushed(w.wr_id, wc_of(&w.kind)));
            }
            for r in g.rq.drain(..) {
                self.completions.push(flushed(r.wr_id, WcOpcode::Recv));
            }
        }
        self.qp.set_closed(reason);
        self.deliver_completions();
        self.qp.cq.close();
    }
}

fn wc_of(k: &WqeKind) -> WcOpcode {
    match k {
        WqeKind::Send { .. } | WqeKind::SendOwned { .. } => WcOpcode::Send,
        WqeKind::Write { .. } => WcOpcode::RdmaWrite,
        WqeKind::Read { .. } | WqeKind::ReadFile { .. } => WcOpcode::RdmaRead,
        WqeKind::LocalInv { .. } => WcOpcode::LocalInvalidate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iwarp::mr::SoftPd;
    use crate::provider::ProtectionDomain;
    use crate::types::{QpCaps, QpState};

    fn engine(crc: bool) -> (Engine, Arc<QpShared>) {
        let qp = QpShared::new(SoftPd::new(), QpCaps::default());
        let cfg = EngineConfig {
            crc,
            max_ulpdu: max_ulpdu_for_mss(1448),
            ird: 2,
            ord: 2,
            send_rtr: None,
            expect_rtr: None,
            large: None,
        };
        (Engine::new(qp.clone(), cfg), qp)
    }

    /// [`engine`] with large FPDUs agreed: the provider's own limit both ways.
    fn large_engine() -> (Engine, Arc<QpShared>) {
        let (mut e, qp) = engine(false);
        e.cfg.max_ulpdu = max_ulpdu_for_mss(65_483);
        let l = crate::iwarp::LARGE_ULPDU as usize;
        e.cfg.large = Some(LargeFpdus { send: l, recv: l });
        (e, qp)
    }

    /// The FPDUs of `stream` (long form allowed): (header, payload length).
    fn fpdus_of(mut stream: &[u8]) -> Vec<(DdpHdr, usize)> {
        let mut v = Vec::new();
        let long = Some(crate::iwarp::LARGE_ULPDU as usize);
        while let Some(f) = ddp::decode_fpdu_long(stream, false, long).unwrap() {
            v.push((f.hdr, f.payload.len()));
            stream = &stream[f.wire_len..];
        }
        assert!(stream.is_empty());
        v
    }

    /// With large FPDUs agreed, a 512 KiB RDMA Write (from a region or a file) and
    /// a Read Response go out as one FPDU each in the long form, the Sends around
    /// them as before; the receiver places the long payload straight from the
    /// socket, or takes it through `on_input` alone cut anywhere around its six
    /// length bytes; a receiver that did not agree to them terminates.
    #[test]
    fn large_fpdus_carry_a_long_write_whole() {
        let (mut tx, tqp) = large_engine();
        let data = pattern(512 * 1024);
        let src = tqp.pd.register(data.clone(), Access::LOCAL_READ).unwrap();
        let (mut rx, rqp) = large_engine();
        let mr = rqp
            .pd
            .alloc(600_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        tqp.lock().sq.push_back(SendWqe {
            wr_id: 1,
            kind: WqeKind::Write {
                remote: crate::types::RemoteBuf {
                    stag: mr.stag(),
                    to: mr.addr() + 8,
                    len: data.len() as u32,
                },
            },
            sg: vec![(src.clone(), 0, data.len())],
            total: data.len(),
            solicited: false,
            file: None,
        });
        tqp.lock().sq.push_back(SendWqe {
            wr_id: 2,
            kind: WqeKind::Send { inv: None },
            sg: vec![(src.clone(), 0, 100)],
            total: 100,
            solicited: false,
            file: None,
        });
        let mut stream = Vec::new();
        tx.pump_tx(&mut stream, 4 << 20);
        let f = fpdus_of(&stream);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(matches!(f[0].0, DdpHdr::Tagged { last: true, .. }));
        assert_eq!((f[0].1, f[1].1), (512 * 1024, 100));
        assert_eq!(stream[..2], [0, 0]);
        // Placed straight from the "socket": all but what `drive`'s first read of
        // 256 KiB took into its buffer.
        let _ = post_recv(&rqp, 200);
        let placed = drive(&mut rx, &stream);
        assert!(placed > data.len() - 256 * 1024, "{placed} placed");
        mr.with(|b| assert!(b[8..8 + data.len()] == data[..]));
        assert_eq!(rx.take_completions().count(), 1);
        // Through on_input alone, cut in two anywhere around the length field and
        // the header, in the payload and in the trailer.
        let l = ddp::fpdu_len(TAGGED_HDR + data.len());
        for cut in (0..24).chain([1000, 70_000, l - 5, l - 4, l - 1, l, l + 1, l + 20]) {
            let (mut rx, rqp) = large_engine();
            let mr = rqp
                .pd
                .alloc(600_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap();
            let mut s2 = Vec::new();
            let h = DdpHdr::Tagged {
                last: true,
                opcode: op::WRITE,
                stag: mr.stag().0,
                to: mr.addr(),
            };
            ddp::encode_fpdu(&mut s2, &h, &[&data], false);
            s2.extend(send(1, 0, true, b"behind"));
            let rmr = post_recv(&rqp, 16);
            let (mut out, mut pending) = (Vec::new(), Vec::new());
            for chunk in [&s2[..cut], &s2[cut..]] {
                pending.extend_from_slice(chunk);
                loop {
                    let k = rx.on_input(&pending, &mut out);
                    pending.drain(..k);
                    if k == 0 || pending.is_empty() {
                        break;
                    }
                }
            }
            assert!(
                pending.is_empty() && out.is_empty() && rx.closed().is_none(),
                "cut {cut}"
            );
            mr.with(|b| assert!(b[..data.len()] == data[..], "cut {cut}"));
            assert_eq!(rmr.with(|b| b[..6].to_vec()), b"behind");
        }
        // A receiver without large FPDUs: a framing error, nothing placed.
        let (e, qp) = engine(false);
        expect_term(e, &qp, &stream, term::MPA_FPDU_START);
        // Longer than the receiver's limit: the same.
        let (mut e, qp) = large_engine();
        e.cfg.large = Some(LargeFpdus {
            send: 100_000,
            recv: 100_000,
        });
        expect_term(e, &qp, &stream, term::MPA_FPDU_START);
        // From a file, vectored: one payload of 512 KiB, a 64 KiB one whole (no
        // 15-page FPDU and no copied tail), a 1 MiB + 3 one in whole pages.
        let file = Arc::new(MemFile(pattern(3 << 20)));
        for (n, want) in [
            (512 << 10, vec![512 << 10]),
            (64 << 10, vec![64 << 10]),
            ((1 << 20) + 3, vec![512 << 10, 512 << 10]),
        ] {
            let (mut e, qp) = large_engine();
            e.set_vectored(true);
            queue_file_write(&qp, &file, 4096, n);
            let mut out = Vec::new();
            e.pump_tx(&mut out, 4 << 20);
            let lens: Vec<usize> = e.holes.iter().map(|h| h.len).collect();
            assert_eq!(lens, want, "{n}");
        }
        // A Read Response from a region: one long FPDU.
        let (mut e, qp) = large_engine();
        let src = qp
            .pd
            .register(data.clone(), Access::REMOTE_READ | Access::LOCAL_READ)
            .unwrap();
        let mut out = Vec::new();
        let rr = read_req(1, src.stag().0, src.addr(), 300_000);
        e.on_input(&rr, &mut out);
        assert!(out.is_empty());
        e.pump_tx(&mut out, 4 << 20);
        let f = fpdus_of(&out);
        assert_eq!(f.len(), 1);
        assert!(matches!(
            f[0].0,
            DdpHdr::Tagged {
                opcode: op::READ_RESP,
                last: true,
                ..
            }
        ));
        assert_eq!(f[0].1, 300_000);
        // Its receive buffer must take the longest FPDU.
        assert_eq!(
            e.max_fpdu_in(),
            ddp::fpdu_len(crate::iwarp::LARGE_ULPDU as usize)
        );
        assert_eq!(
            engine(false).0.max_fpdu_in(),
            ddp::fpdu_len(ddp::MPA_MAX_ULPDU)
        );
    }

    fn send(msn: u32, mo: u32, last: bool, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        let h = DdpHdr::Untagged {
            last,
            opcode: op::SEND,
            inv_stag: 0,
            qn: qn::SEND,
            msn,
            mo,
        };
        ddp::encode_fpdu(&mut b, &h, &[payload], true);
        b
    }

    fn write(stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        let h = DdpHdr::Tagged {
            last: true,
            opcode: op::WRITE,
            stag,
            to,
        };
        ddp::encode_fpdu(&mut b, &h, &[payload], true);
        b
    }

    /// Feed `input`; expect a Terminate with `want` in the output, the engine
    /// closed, and after shutdown the queue pair Closed.
    fn expect_term(mut e: Engine, qp: &Arc<QpShared>, input: &[u8], want: TermInfo) {
        let mut out = Vec::new();
        e.on_input(input, &mut out);
        assert_eq!(e.closed(), Some(&CloseReason::LocalTerminate(want)));
        let f = ddp::decode_fpdu(&out, e.cfg.crc)
            .unwrap()
            .expect("a Terminate FPDU");
        match f.hdr {
            DdpHdr::Untagged {
                opcode,
                qn: q,
                last,
                ..
            } => {
                assert_eq!((opcode, q, last), (op::TERMINATE, qn::TERMINATE, true));
            }
            h => panic!("{h:?}"),
        }
        assert_eq!(ddp::parse_terminate(f.payload), Some(want));
        assert_eq!(f.wire_len, out.len(), "nothing but the Terminate is sent");
        e.shutdown();
        assert_eq!(qp.lock().state, QpState::Closed);
        assert!(qp.cq.is_closed());
    }

    fn post_recv(qp: &Arc<QpShared>, len: usize) -> SoftMr {
        let mr = qp.pd.alloc(len, Access::LOCAL_WRITE).unwrap();
        qp.lock().rq.push_back(RecvWqe {
            wr_id: 7,
            sg: vec![(mr.clone(), 0, len)],
            total: len,
        });
        mr
    }

    /// `n` pattern bytes.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + 7) as u8).collect()
    }

    /// As the driver does while a payload is placed directly: "reads" up to
    /// `max` bytes of `src` into the placement's range.
    fn read_into_placement(e: &mut Engine, src: &mut &[u8], max: usize) {
        let (mr, off, left) = e.placement().map(|(m, o, l)| (m.clone(), o, l)).unwrap();
        let k = left.min(max).min(src.len());
        mr.lock()[off..off + k].copy_from_slice(&src[..k]);
        *src = &src[k..];
        e.placed(k);
    }

    #[test]
    fn long_write_is_placed_straight_from_the_socket() {
        let (mut e, qp) = engine(false);
        let mr = qp
            .pd
            .alloc(100_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let data = pattern(60_000);
        let rmr = post_recv(&qp, 16);
        let mut stream = write(mr.stag().0, mr.addr() + 100, &data);
        let fpdu = stream.len();
        stream.extend(send(1, 0, true, b"hi"));
        let mut out = Vec::new();
        // The header and 984 payload bytes arrive: all taken, the rest is placed.
        assert_eq!(e.on_input(&stream[..1000], &mut out), 1000);
        let (_, off, left) = e.placement().unwrap();
        assert_eq!((off, left), (100 + 984, 60_000 - 984));
        let mut rest = &stream[1000..];
        read_into_placement(&mut e, &mut rest, 30_000);
        assert!(e.read_limit().is_none());
        read_into_placement(&mut e, &mut rest, usize::MAX);
        assert!(e.placement().is_none());
        assert_eq!(e.read_limit(), Some(pad_of(60_014) + 4 + LOOKAHEAD));
        assert_eq!(rest.len(), stream.len() - fpdu + pad_of(60_014) + 4);
        // The trailer is skipped; the Send behind it is received.
        assert_eq!(e.on_input(rest, &mut out), rest.len());
        assert!(out.is_empty() && e.closed().is_none());
        mr.with(|b| assert!(b[100..60_100] == data[..]));
        assert_eq!(rmr.with(|b| b[..2].to_vec()), b"hi");
        let c: Vec<_> = e.take_completions().collect();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].opcode, WcOpcode::Recv);
    }

    /// The driver reads a placement's rest and [`Engine::placement_tail`]
    /// bytes in one read: the trailer is skipped and the next long Write's
    /// header and first payload bytes start its placement at once, so two
    /// long FPDUs take three reads (header, rest + next header, rest).
    #[test]
    fn placement_tail_starts_the_next_placement() {
        let (mut e, qp) = engine(false);
        let mr = qp
            .pd
            .alloc(200_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let (a, b) = (pattern(50_000), pattern(41_000));
        let mut stream = write(mr.stag().0, mr.addr(), &a);
        stream.extend(write(mr.stag().0, mr.addr() + 60_000, &b));
        let mut out = Vec::new();
        assert_eq!(e.placement_tail(), 0);
        // Read 1: the first header and some payload.
        assert_eq!(e.on_input(&stream[..500], &mut out), 500);
        let mut rest = &stream[500..];
        let tail = e.placement_tail();
        assert_eq!(tail, pad_of(50_014) + 4 + LOOKAHEAD);
        // Read 2: the first payload's rest into place, its trailer and the
        // next FPDU's first bytes into the receive buffer.
        let left = e.placement().unwrap().2;
        read_into_placement(&mut e, &mut rest, left);
        assert!(e.placement().is_none());
        let (extra, after) = rest.split_at(tail);
        assert_eq!(e.on_input(extra, &mut out), tail);
        let (_, off, left) = e.placement().expect("the second Write is placed directly");
        // LOOKAHEAD bytes of the second FPDU: its 16 header bytes and the
        // first payload bytes, already in place.
        let first = LOOKAHEAD - 2 - TAGGED_HDR;
        assert_eq!((off, left), (60_000 + first, 41_000 - first));
        // Read 3: the second payload's rest.
        let mut after = after;
        read_into_placement(&mut e, &mut after, left);
        assert!(e.placement().is_none() && e.closed().is_none() && out.is_empty());
        mr.with(|m| {
            assert!(m[..50_000] == a[..]);
            assert!(m[60_000..101_000] == b[..]);
        });
    }

    /// The read that takes a placed payload's rest also takes, within
    /// [`Engine::placement_tail`], a short last FPDU behind it (a 64 KiB RDMA
    /// Write or Read is 65,459 + 77 payload bytes on loopback) and the Send
    /// after that: the three messages are in after two reads.
    #[test]
    fn short_fpdus_behind_a_placed_payload_come_in_the_same_read() {
        let (mut e, qp) = engine(false);
        let mr = qp
            .pd
            .alloc(70_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let rmr = post_recv(&qp, 300);
        let (a, b) = (pattern(65_459), pattern(77));
        let h = |last, to| DdpHdr::Tagged {
            last,
            opcode: op::WRITE,
            stag: mr.stag().0,
            to,
        };
        let mut stream = Vec::new();
        ddp::encode_fpdu(&mut stream, &h(false, mr.addr()), &[&a], false);
        ddp::encode_fpdu(&mut stream, &h(true, mr.addr() + 65_459), &[&b], false);
        let hello = pattern(200);
        stream.extend(send(1, 0, true, &hello));
        let mut out = Vec::new();
        // Read 1: the first header and some payload.
        assert_eq!(e.on_input(&stream[..500], &mut out), 500);
        let mut rest = &stream[500..];
        let tail = e.placement_tail();
        // Read 2: the payload's rest into place, everything after it into the
        // receive buffer.
        let left = e.placement().unwrap().2;
        read_into_placement(&mut e, &mut rest, left);
        assert!(
            rest.len() <= tail,
            "{} bytes behind, tail {tail}",
            rest.len()
        );
        assert_eq!(e.on_input(rest, &mut out), rest.len());
        assert!(e.placement().is_none() && e.closed().is_none() && out.is_empty());
        mr.with(|m| {
            assert!(m[..65_459] == a[..]);
            assert!(m[65_459..65_536] == b[..]);
        });
        assert_eq!(rmr.with(|m| m[..200].to_vec()), hello);
        let c: Vec<_> = e.take_completions().collect();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].opcode, WcOpcode::Recv);
    }

    /// Once an RDMA Write's last segment is in, the engine holds no handle
    /// on its region (placed directly or through the receive buffer), so the
    /// consumer takes its buffer back without a copy; a Write's earlier
    /// segments keep it.
    #[test]
    fn a_written_region_is_let_go_after_the_last_segment() {
        let (mut e, qp) = engine(false);
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let mut out = Vec::new();
        // Short Writes, through on_input: the first not the last segment.
        let mr = qp.pd.alloc(100, access).unwrap();
        let stag = mr.stag().0;
        let seg = |last, to, p: &[u8]| {
            let h = DdpHdr::Tagged {
                last,
                opcode: op::WRITE,
                stag,
                to,
            };
            let mut b = Vec::new();
            ddp::encode_fpdu(&mut b, &h, &[p], true);
            b
        };
        let first = seg(false, mr.addr(), b"abc");
        assert_eq!(e.on_input(&first, &mut out), first.len());
        let mr = mr
            .into_buffer()
            .expect_err("a Write under way holds its region");
        let second = seg(true, mr.addr() + 3, b"de");
        assert_eq!(e.on_input(&second, &mut out), second.len());
        let b = mr
            .into_buffer()
            .expect("the last segment let go of the region");
        assert_eq!(&b[..5], b"abcde");
        // A long Write placed straight from the socket.
        let mr = qp.pd.alloc(100_000, access).unwrap();
        let data = pattern(60_000);
        let stream = write(mr.stag().0, mr.addr(), &data);
        assert_eq!(e.on_input(&stream[..1000], &mut out), 1000);
        let mut rest = &stream[1000..];
        read_into_placement(&mut e, &mut rest, 30_000);
        let mr = mr.into_buffer().expect_err("a placement holds its region");
        read_into_placement(&mut e, &mut rest, usize::MAX);
        assert!(e.placement().is_none());
        assert_eq!(e.on_input(rest, &mut out), rest.len());
        assert!(out.is_empty() && e.closed().is_none());
        let b = mr
            .into_buffer()
            .expect("the placed Write let go of the region");
        assert!(b[..60_000] == data[..]);
    }

    /// Feeds `stream` to `e` as the TCP driver does, the socket holding all
    /// of it: into the placement when there is one, else reads of at most
    /// `read_limit()` (or 256 KiB) bytes into a receive buffer handed to
    /// `on_input`. Returns the bytes that went through the placement.
    fn drive(e: &mut Engine, mut stream: &[u8]) -> usize {
        let (mut placed, mut pending, mut out) = (0, Vec::new(), Vec::new());
        while !stream.is_empty() {
            if let Some((_, _, left)) = e.placement() {
                let k = left.min(stream.len());
                placed += k;
                read_into_placement(e, &mut stream, k);
                continue;
            }
            let k = e.read_limit().unwrap_or(256 * 1024).min(stream.len());
            pending.extend_from_slice(&stream[..k]);
            stream = &stream[k..];
            let n = e.on_input(&pending, &mut out);
            pending.drain(..n);
        }
        assert!(pending.is_empty() && out.is_empty() && e.closed().is_none());
        placed
    }

    #[test]
    fn long_writes_between_sends_keep_being_placed_directly() {
        // 512 KiB READs over SMB Direct: each an RDMA Write in FPDUs of a
        // loopback MSS, then the READ response's Send; a read of 256 KiB
        // takes whole FPDUs, which on_input copies, until one is cut.
        let (mut e, qp) = engine(false);
        let max = max_ulpdu_for_mss(65_483) - TAGGED_HDR;
        let mr = qp
            .pd
            .alloc(1 << 20, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let data = pattern(512 * 1024);
        let mut stream = Vec::new();
        for msn in 1..=8u32 {
            let _ = post_recv(&qp, 200);
            for (i, c) in data.chunks(max).enumerate() {
                let h = DdpHdr::Tagged {
                    last: (i + 1) * max >= data.len(),
                    opcode: op::WRITE,
                    stag: mr.stag().0,
                    to: mr.addr() + (i * max) as u64,
                };
                ddp::encode_fpdu(&mut stream, &h, &[c], false);
            }
            stream.extend(send(msn, 0, true, &[7u8; 150]));
        }
        let placed = drive(&mut e, &stream);
        mr.with(|b| assert!(b[..data.len()] == data[..]));
        assert_eq!(e.take_completions().count(), 8);
        // All but the first Write's first FPDU or so go straight in.
        assert!(
            placed > 7 * data.len(),
            "{placed} of {} placed",
            8 * data.len()
        );
        // Short Sends alone are read many to a read.
        let (mut e, qp) = engine(false);
        let mut stream = Vec::new();
        for msn in 1..=64u32 {
            let _ = post_recv(&qp, 200);
            stream.extend(send(msn, 0, true, &[7u8; 150]));
            assert!(e.read_limit().is_none());
        }
        assert_eq!(drive(&mut e, &stream), 0);
        assert!(e.read_limit().is_none());
        assert_eq!(e.take_completions().count(), 64);
    }

    #[test]
    fn read_responses_behind_runs_of_sends_are_placed_directly() {
        // 64 KiB WRITEs over SMB Direct at depth: the server reads each one's
        // data by RDMA Read while the next requests (short Sends) stream in.
        // Runs of Sends longer than SHORT_RUN took reads back to 256 KiB, and
        // the Read Responses behind them were read into the buffer and copied
        // (a memmove as costly as the socket's own copy).
        let (mut e, qp) = engine(false);
        let max = max_ulpdu_for_mss(65_483) - TAGGED_HDR;
        let len = 64 * 1024;
        let sink = qp.pd.alloc(2 * len, Access::LOCAL_WRITE).unwrap();
        for i in 0..2usize {
            queue_read(&qp, i as u64, &sink, i * len, (i * len) as u64, len);
        }
        let mut out = Vec::new();
        e.pump_tx(&mut out, 1 << 20);
        assert!(qp.lock().sq.is_empty(), "both Read Requests went out");
        assert_eq!(
            e.read_limit(),
            Some(LOOKAHEAD),
            "Reads to place are outstanding"
        );
        let data = pattern(2 * len);
        let mut stream = Vec::new();
        let mut msn = 1;
        for i in 0..2usize {
            for _ in 0..2 * SHORT_RUN {
                let _ = post_recv(&qp, 200);
                stream.extend(send(msn, 0, true, &[7u8; 150]));
                msn += 1;
            }
            let part = &data[i * len..(i + 1) * len];
            for (k, c) in part.chunks(max).enumerate() {
                let h = DdpHdr::Tagged {
                    last: (k + 1) * max >= len,
                    opcode: op::READ_RESP,
                    stag: sink.stag().0,
                    to: sink.addr() + (i * len + k * max) as u64,
                };
                ddp::encode_fpdu(&mut stream, &h, &[c], false);
            }
        }
        let placed = drive(&mut e, &stream);
        sink.with(|b| assert!(b[..] == data[..]));
        assert_eq!(e.take_completions().count(), 2 + 4 * SHORT_RUN as usize);
        // All but each response's first kilobyte or so go straight in.
        assert!(placed > 2 * (len - 2048), "{placed} of {} placed", 2 * len);
        assert!(!e.reads_to_place(), "no Read is outstanding");
        // Short Reads are read into the buffer as before: no bounded reads for them.
        let (mut e, qp) = engine(false);
        queue_read(&qp, 1, &sink, 0, 0, PLACE_MIN - 1);
        e.pump_tx(&mut out, 1 << 20);
        assert!(qp.lock().sq.is_empty());
        assert!(e.read_limit().is_none());
    }

    /// Queues an RDMA Read of `len` bytes at `to` of the peer's STag 5 into
    /// `sink` from byte `at`.
    fn queue_read(qp: &Arc<QpShared>, wr_id: u64, sink: &SoftMr, at: usize, to: u64, len: usize) {
        qp.lock().sq.push_back(SendWqe {
            wr_id,
            kind: WqeKind::Read {
                remote: crate::types::RemoteBuf {
                    stag: STag(5),
                    to,
                    len: len as u32,
                },
            },
            sg: vec![(sink.clone(), at, len)],
            total: len,
            solicited: false,
            file: None,
        });
    }

    fn pad_of(ulpdu: usize) -> usize {
        ddp::fpdu_len(ulpdu) - 2 - ulpdu - 4
    }

    #[test]
    fn placement_through_on_input_alone() {
        // A caller that never reads into placement() (tests, fuzzers) hands
        // every byte to on_input: the same bytes land in the same places.
        for cut in [17usize, 1000, 20_000, 59_990, 60_016, 60_020] {
            let (mut e, qp) = engine(false);
            let mr = qp
                .pd
                .alloc(70_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap();
            let rmr = post_recv(&qp, 16);
            let data = pattern(60_000);
            let mut stream = write(mr.stag().0, mr.addr(), &data);
            stream.extend(write(mr.stag().0, mr.addr() + 60_000, b"tail"));
            stream.extend(send(1, 0, true, b"ok"));
            let mut out = Vec::new();
            let mut pending: Vec<u8> = Vec::new();
            for chunk in [&stream[..cut], &stream[cut..]] {
                pending.extend_from_slice(chunk);
                loop {
                    let n = e.on_input(&pending, &mut out);
                    pending.drain(..n);
                    if n == 0 || pending.is_empty() {
                        break;
                    }
                }
            }
            assert!(pending.is_empty(), "cut {cut}");
            assert!(out.is_empty() && e.closed().is_none(), "cut {cut}");
            mr.with(|b| {
                assert!(b[..60_000] == data[..], "cut {cut}");
                assert_eq!(&b[60_000..60_004], b"tail");
            });
            assert_eq!(rmr.with(|b| b[..2].to_vec()), b"ok");
        }
    }

    #[test]
    fn long_read_response_completes_once_placed() {
        let (mut e, qp) = engine(false);
        let sink = qp.pd.alloc(50_000, Access::LOCAL_WRITE).unwrap();
        queue_read(&qp, 9, &sink, 1000, 0, 40_000);
        let mut out = Vec::new();
        e.pump_tx(&mut out, 1 << 20);
        out.clear();
        let data = pattern(40_000);
        let mut b = Vec::new();
        let h = DdpHdr::Tagged {
            last: true,
            opcode: op::READ_RESP,
            stag: sink.stag().0,
            to: sink.addr() + 1000,
        };
        ddp::encode_fpdu(&mut b, &h, &[&data], false);
        assert_eq!(e.on_input(&b[..300], &mut out), 300);
        assert!(e.placement().is_some());
        assert_eq!(e.take_completions().count(), 0, "not before the data is in");
        let mut rest = &b[300..];
        read_into_placement(&mut e, &mut rest, usize::MAX);
        let c: Vec<_> = e.take_completions().collect();
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].wr_id, c[0].opcode, c[0].status, c[0].byte_len),
            (9, WcOpcode::RdmaRead, WcStatus::Success, 40_000)
        );
        sink.with(|s| assert!(s[1000..41_000] == data[..]));
        assert_eq!(e.on_input(rest, &mut out), rest.len());
        assert!(out.is_empty() && e.closed().is_none());
    }

    /// An RDMA Read that must wait for an ORD slot (ORD Reads outstanding, their
    /// responses not in) is no send work: `has_tx_work` said there was while
    /// `pump_tx` could start nothing, and the driver went round its loop (a yield
    /// or its cooperative budget at each pass) instead of waiting for the socket
    /// until a response came. The first response frees a slot: the Read goes out.
    #[test]
    fn a_read_waiting_for_an_ord_slot_is_no_send_work_until_a_response_frees_one() {
        let (mut e, qp) = engine(false);
        assert_eq!(e.cfg.ord, 2);
        let sink = qp.pd.alloc(300, Access::LOCAL_WRITE).unwrap();
        for i in 0..3usize {
            queue_read(&qp, i as u64, &sink, 100 * i, 100 * i as u64, 100);
        }
        assert!(e.has_tx_work());
        let mut out = Vec::new();
        e.pump_tx(&mut out, 1 << 20);
        // Two Read Requests went out; the third waits for one of their responses.
        assert_eq!(qp.lock().sq.len(), 1);
        assert!(!out.is_empty());
        assert!(!e.has_tx_work(), "a Read waiting for ORD is no work yet");
        let sent = out.len();
        e.pump_tx(&mut out, 1 << 20);
        assert_eq!(out.len(), sent, "nor does pump_tx find any");
        // The first Read's response.
        let h = DdpHdr::Tagged {
            last: true,
            opcode: op::READ_RESP,
            stag: sink.stag().0,
            to: sink.addr(),
        };
        let mut b = Vec::new();
        ddp::encode_fpdu(&mut b, &h, &[&[7u8; 100]], false);
        out.clear();
        assert_eq!(e.on_input(&b, &mut out), b.len());
        assert_eq!(e.take_completions().count(), 1);
        assert!(e.has_tx_work(), "its slot is free");
        e.pump_tx(&mut out, 1 << 20);
        assert!(qp.lock().sq.is_empty() && !out.is_empty());
        assert!(!e.has_tx_work());
    }

    #[test]
    fn long_tagged_segments_are_checked_before_any_byte_is_placed() {
        // Only the header of each has arrived: the Terminate goes at once.
        let term_of = |input: &[u8], e: &mut Engine| {
            let mut out = Vec::new();
            e.on_input(input, &mut out);
            assert!(e.placement().is_none());
            let f = ddp::decode_fpdu(&out, false).unwrap().expect("a Terminate");
            ddp::parse_terminate(f.payload)
        };
        let big = pattern(40_000);
        let (mut e, _qp) = engine(false);
        let w = write(0xABCD_0001, 0, &big);
        assert_eq!(term_of(&w[..64], &mut e), Some(term::DDP_T_INVALID_STAG));
        let (mut e, qp) = engine(false);
        let mr = qp
            .pd
            .alloc(50_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let w = write(mr.stag().0, mr.addr() + 10_001, &big);
        assert_eq!(term_of(&w[..64], &mut e), Some(term::DDP_T_BASE_BOUNDS));
        mr.with(|b| assert!(b.iter().all(|&x| x == 0)));
        let (mut e, qp) = engine(false);
        let mr = qp.pd.alloc(50_000, Access::LOCAL_WRITE).unwrap();
        let w = write(mr.stag().0, mr.addr(), &big);
        assert_eq!(term_of(&w[..64], &mut e), Some(term::RDMAP_ACCESS));
        // A Read Response nobody asked for.
        let (mut e, _qp) = engine(false);
        let mut b = Vec::new();
        let h = DdpHdr::Tagged {
            last: true,
            opcode: op::READ_RESP,
            stag: 3,
            to: 0,
        };
        ddp::encode_fpdu(&mut b, &h, &[&big], false);
        assert_eq!(term_of(&b[..64], &mut e), Some(term::RDMAP_OPCODE));
    }

    #[test]
    fn with_crc_nothing_is_placed_before_the_whole_fpdu_arrived() {
        let (mut e, qp) = engine(true);
        let mr = qp
            .pd
            .alloc(50_000, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let data = pattern(40_000);
        let w = write(mr.stag().0, mr.addr(), &data);
        let mut out = Vec::new();
        assert_eq!(e.on_input(&w[..20_000], &mut out), 0);
        assert!(e.placement().is_none());
        mr.with(|b| assert!(b.iter().all(|&x| x == 0)));
        assert_eq!(e.on_input(&w, &mut out), w.len());
        mr.with(|b| assert!(b[..40_000] == data[..]));
    }

    /// Queues an RDMA Write of `src[..]` (two scatter entries) and a Send.
    fn queue_write_and_send(qp: &Arc<QpShared>, src: &SoftMr, n: usize) {
        let mut g = qp.lock();
        g.sq.push_back(SendWqe {
            wr_id: 1,
            kind: WqeKind::Write {
                remote: crate::types::RemoteBuf {
                    stag: STag(0x1234_5601),
                    to: 4096,
                    len: n as u32,
                },
            },
            sg: vec![(src.clone(), 10, 1000), (src.clone(), 2000, n - 1000)],
            total: n,
            solicited: false,
            file: None,
        });
        g.sq.push_back(SendWqe {
            wr_id: 2,
            kind: WqeKind::Send { inv: Some(77) },
            sg: vec![(src.clone(), 0, 300)],
            total: 300,
            solicited: false,
            file: None,
        });
    }

    #[test]
    fn vectored_output_sends_the_same_bytes_and_completes_after_them() {
        for crc in [false, true] {
            let n = 100_000;
            // Copy mode: the reference bytes.
            let (mut e, qp) = engine(crc);
            let src = qp
                .pd
                .register(pattern(n + 2000), Access::LOCAL_WRITE)
                .unwrap();
            queue_write_and_send(&qp, &src, n);
            let mut want = Vec::new();
            e.pump_tx(&mut want, 1 << 20);
            assert_eq!(e.take_completions().count(), 2);
            // Vectored: `out` holds the Write's headers and trailers and the
            // short Send whole.
            let (mut e, qp) = engine(crc);
            let src = qp
                .pd
                .register(pattern(n + 2000), Access::LOCAL_WRITE)
                .unwrap();
            e.set_vectored(true);
            queue_write_and_send(&qp, &src, n);
            let mut out = Vec::new();
            e.pump_tx(&mut out, 1 << 20);
            assert!(out.len() < 2500, "{} bytes copied", out.len());
            assert_eq!(e.queued_payload(), n);
            assert_eq!(e.take_completions().count(), 0, "nothing sent yet");
            // The socket takes 7,777 bytes at a time.
            let mut got = Vec::new();
            let mut wpos = 0;
            let mut done = Vec::new();
            while wpos < out.len() || e.has_holes() {
                let k = e
                    .write_vectored(
                        &out,
                        wpos,
                        |iov, _| {
                            let mut k = 0;
                            for b in iov {
                                let t = b.len().min(7777 - k);
                                got.extend_from_slice(&b[..t]);
                                k += t;
                            }
                            Ok(k)
                        },
                        |_, _, _| unreachable!("no file payloads"),
                    )
                    .unwrap();
                wpos = e.advance(&out, wpos, k);
                for c in e.take_completions() {
                    done.push((c.wr_id, got.len()));
                }
            }
            assert!(got == want, "crc {crc}: same bytes on the wire");
            assert_eq!(e.queued_payload(), 0);
            // The Write completes once its last FPDU is out, the Send at the end.
            assert_eq!(done.len(), 2);
            assert!(done[0].0 == 1 && done[0].1 >= n);
            assert_eq!(done[1], (2, want.len()));
        }
    }

    /// Queues `n` Sends of `len` bytes each from `src`, wr_ids 1..=n.
    fn queue_sends(qp: &Arc<QpShared>, src: &SoftMr, n: u64, len: usize) {
        let mut g = qp.lock();
        for i in 1..=n {
            g.sq.push_back(SendWqe {
                wr_id: i,
                kind: WqeKind::Send { inv: None },
                sg: vec![(src.clone(), i as usize * 10, len)],
                total: len,
                solicited: false,
                file: None,
            });
        }
    }

    #[test]
    fn vectored_output_copies_short_sends_and_completes_them_at_once() {
        // Sends of an SMB Direct send size go out as without vectored output:
        // copied into `out` (one buffer, one write), completed when copied,
        // FPDUs of an Ethernet MSS or of a loopback one alike.
        for mss in [1448, 65_483] {
            let mut want = Vec::new();
            for vectored in [false, true] {
                let (mut e, qp) = engine(false);
                e.cfg.max_ulpdu = max_ulpdu_for_mss(mss);
                let src = qp
                    .pd
                    .register(pattern(GATHER_MIN + 400), Access::LOCAL_WRITE)
                    .unwrap();
                e.set_vectored(vectored);
                queue_sends(&qp, &src, 32, 4200);
                let mut out = Vec::new();
                e.pump_tx(&mut out, 1 << 20);
                assert!(!e.has_holes() && e.queued_payload() == 0, "mss {mss}");
                let c: Vec<u64> = e.take_completions().map(|c| c.wr_id).collect();
                assert_eq!(c, (1..=32).collect::<Vec<_>>(), "mss {mss}");
                if vectored {
                    assert!(out == want, "mss {mss}: the same bytes");
                } else {
                    want = out;
                }
            }
        }
    }

    #[test]
    fn a_short_send_behind_a_gathered_write_completes_after_it() {
        let (mut e, qp) = engine(false);
        let src = qp
            .pd
            .register(pattern(GATHER_MIN + 2000), Access::LOCAL_WRITE)
            .unwrap();
        e.set_vectored(true);
        // The Write is gathered, the Send behind it copied.
        queue_write_and_send(&qp, &src, GATHER_MIN);
        let mut out = Vec::new();
        e.pump_tx(&mut out, 1 << 20);
        assert_eq!(e.queued_payload(), GATHER_MIN);
        assert_eq!(e.take_completions().count(), 0);
        // The socket takes everything but the last byte: nothing completes
        // out of order, the Write once its bytes are out.
        let total = out.len() + GATHER_MIN;
        let k = e
            .write_vectored(&out, 0, |_, _| Ok(total - 1), |_, _, _| Ok(0))
            .unwrap();
        let wpos = e.advance(&out, 0, k);
        let c: Vec<u64> = e.take_completions().map(|c| c.wr_id).collect();
        assert_eq!(c, [1]);
        let k = e
            .write_vectored(
                &out,
                wpos,
                |iov, _| Ok(iov.iter().map(|b| b.len()).sum()),
                |_, _, _| Ok(0),
            )
            .unwrap();
        assert_eq!(k, 1);
        e.advance(&out, wpos, k);
        let c: Vec<u64> = e.take_completions().map(|c| c.wr_id).collect();
        assert_eq!(c, [2]);
        // With nothing gathered in front of it, a short Send completes when copied.
        queue_sends(&qp, &src, 1, 300);
        out.clear();
        e.pump_tx(&mut out, 1 << 20);
        assert_eq!(e.take_completions().count(), 1);
    }

    /// A file in memory as the source of an RDMA Write.
    #[derive(Debug)]
    struct MemFile(Vec<u8>);

    impl FileRange for MemFile {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn send_part(
            &self,
            _: std::os::fd::BorrowedFd<'_>,
            _: usize,
            _: usize,
        ) -> std::io::Result<usize> {
            unreachable!("the test sends through write_vectored's closure")
        }
        fn read_part(&self, buf: &mut Vec<u8>, at: usize, n: usize) {
            buf.extend_from_slice(&self.0[at..at + n]);
        }
    }

    fn queue_file_write(qp: &Arc<QpShared>, src: &Arc<MemFile>, at: usize, n: usize) {
        qp.lock().sq.push_back(SendWqe {
            wr_id: 5,
            kind: WqeKind::Write {
                remote: crate::types::RemoteBuf {
                    stag: STag(0x1234_5601),
                    to: 0,
                    len: n as u32,
                },
            },
            sg: Vec::new(),
            total: n,
            solicited: false,
            file: Some((src.clone() as Arc<dyn FileRange>, at)),
        });
    }

    #[test]
    fn file_payloads_are_cut_to_fifteen_pages_and_their_headers_wait_for_them() {
        let mss = 65_483; // loopback's
        let max = max_ulpdu_for_mss(mss) - TAGGED_HDR;
        assert!(max > FILE_FPDU_MAX);
        let file = Arc::new(MemFile(pattern(3 << 20)));
        let cases = [
            (0, 512 << 10),
            (100, (1 << 20) + 3),
            (4095, FILE_FPDU_MAX),
            (0, 64 << 10),
            (0, 128 << 10),
            (0, FILE_FPDU_MAX + FILE_COPY_MAX),
            (0, FILE_FPDU_MAX + FILE_COPY_MAX - 1),
        ];
        for (at, n) in cases {
            let (mut e, qp) = engine(false);
            e.cfg.max_ulpdu = max_ulpdu_for_mss(mss);
            e.set_vectored(true);
            queue_file_write(&qp, &file, at, n);
            let mut out = Vec::new();
            e.pump_tx(&mut out, 4 << 20);
            // Every payload but the last is 15 pages long, the last what is left;
            // a last one shorter than FILE_COPY_MAX is read into the output.
            let lens: Vec<usize> = e.holes.iter().map(|h| h.len).collect();
            let whole = n / FILE_FPDU_MAX;
            let mut want = vec![FILE_FPDU_MAX; whole];
            let tail = n % FILE_FPDU_MAX;
            if tail >= FILE_COPY_MAX {
                want.push(tail);
            }
            assert_eq!(lens, want, "{n} bytes from {at}");
            let copied = if tail >= FILE_COPY_MAX { 0 } else { tail };
            // Each header goes out waiting for the payload behind it (MSG_MORE);
            // the stream carries the file's bytes in order.
            let mut wpos = 0;
            let mut payload = Vec::new();
            let (mut headers_held, mut last_held) = (0, false);
            while wpos < out.len() || e.has_holes() {
                let mut follows = false;
                let mut from_file = None;
                let k = e
                    .write_vectored(
                        &out,
                        wpos,
                        |iov, more| {
                            follows = more;
                            Ok(iov.iter().map(|b| b.len()).sum())
                        },
                        |src, off, len| {
                            let mut v = Vec::new();
                            src.read_part(&mut v, off, len);
                            from_file = Some(v);
                            Ok(len)
                        },
                    )
                    .unwrap();
                match from_file {
                    Some(v) => payload.extend_from_slice(&v),
                    None => {
                        headers_held += usize::from(follows);
                        last_held = follows;
                    }
                }
                wpos = e.advance(&out, wpos, k);
            }
            assert_eq!(headers_held, lens.len(), "{n} bytes from {at}");
            // The last bytes (the final trailer) are not held: they push.
            assert!(!last_held, "{n} bytes from {at}");
            assert!(
                payload == file.0[at..at + n - copied],
                "{n} bytes from {at}"
            );
            // The copied tail is in the output, after the last header.
            let tail_bytes = &file.0[at + n - copied..at + n];
            assert!(
                copied == 0 || out.windows(copied).any(|w| w == tail_bytes),
                "{n} bytes from {at}"
            );
            assert_eq!(e.take_completions().count(), 1);
        }
        // With CRC on the payload is read in whole: FPDUs as long as the MSS allows.
        let (mut e, qp) = engine(true);
        e.cfg.max_ulpdu = max_ulpdu_for_mss(mss);
        e.set_vectored(true);
        queue_file_write(&qp, &file, 0, 512 << 10);
        let mut out = Vec::new();
        e.pump_tx(&mut out, 4 << 20);
        assert!(!e.has_holes());
        let fpdus = (512usize << 10).div_ceil(max);
        let framing = out.len() - (512 << 10);
        assert!(framing < fpdus * 32, "{framing} bytes of framing");
    }

    #[test]
    fn vectored_output_flushes_at_shutdown() {
        let (mut e, qp) = engine(false);
        let src = qp
            .pd
            .register(pattern(60_000), Access::LOCAL_WRITE)
            .unwrap();
        e.set_vectored(true);
        queue_write_and_send(&qp, &src, 50_000);
        let mut out = Vec::new();
        e.pump_tx(&mut out, 1 << 20);
        e.shutdown();
        let c: Vec<_> = std::iter::from_fn(|| qp.cq.try_next()).collect();
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|c| c.status == WcStatus::Flushed));
        assert!(!e.has_holes());
    }

    #[test]
    fn send_is_placed() {
        let (mut e, qp) = engine(true);
        let mr = post_recv(&qp, 16);
        let mut out = Vec::new();
        let mut input = send(1, 0, false, b"hel");
        input.extend(send(1, 3, true, b"lo"));
        assert_eq!(e.on_input(&input, &mut out), input.len());
        assert!(out.is_empty() && e.closed().is_none());
        let c: Vec<_> = e.take_completions().collect();
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].wr_id, c[0].byte_len), (7, 5));
        assert_eq!(mr.with(|b| b[..5].to_vec()), b"hello");
    }

    /// Several messages in one read are taken a few completions at a time, at
    /// FPDU boundaries: a message of two segments counts once, at its last; what
    /// is left is handed in again; a partial FPDU at the end waits for its rest.
    #[test]
    fn on_input_some_stops_after_max_completions_at_an_fpdu_boundary() {
        let (mut e, qp) = engine(true);
        let mrs: Vec<_> = (0..7).map(|_| post_recv(&qp, 16)).collect();
        let mut input = Vec::new();
        let mut ends = Vec::new();
        for msn in 1..=4u32 {
            input.extend(send(msn, 0, true, &[msn as u8; 4][..msn as usize]));
            ends.push(input.len());
        }
        // Message 5 in two segments, then message 6 whole.
        input.extend(send(5, 0, false, b"ab"));
        ends.push(input.len());
        input.extend(send(5, 2, true, b"cde"));
        ends.push(input.len());
        input.extend(send(6, 0, true, b"f"));
        ends.push(input.len());
        // Message 7, of which only part has arrived.
        let seven = send(7, 0, true, b"seven");
        input.extend(&seven[..seven.len() - 3]);
        let mut out = Vec::new();
        let lens = |e: &mut Engine| e.take_completions().map(|c| c.byte_len).collect::<Vec<_>>();

        let (n, capped) = e.on_input_some(&input, &mut out, 2);
        assert_eq!((n, capped), (ends[1], true));
        assert_eq!(lens(&mut e), [1, 2]);
        let mut at = n;
        let (n, capped) = e.on_input_some(&input[at..], &mut out, 2);
        assert_eq!((at + n, capped), (ends[3], true));
        assert_eq!(lens(&mut e), [3, 4]);
        at += n;
        // The two-segment message completes once, at its last segment.
        let (n, capped) = e.on_input_some(&input[at..], &mut out, 2);
        assert_eq!((at + n, capped), (ends[6], true));
        assert_eq!(lens(&mut e), [5, 1]);
        at += n;
        // Only the partial FPDU is left: nothing more to take, not capped.
        assert_eq!(e.on_input_some(&input[at..], &mut out, 2), (0, false));
        assert!(lens(&mut e).is_empty());
        // Its rest arrives: the message completes.
        let mut rest = input[at..].to_vec();
        rest.extend(&seven[seven.len() - 3..]);
        assert_eq!(e.on_input_some(&rest, &mut out, 2), (rest.len(), false));
        assert_eq!(lens(&mut e), [5]);
        assert!(out.is_empty() && e.closed().is_none());
        assert_eq!(mrs[4].with(|b| b[..5].to_vec()), b"abcde");
        assert_eq!(mrs[6].with(|b| b[..5].to_vec()), b"seven");
        // With no cap, `on_input` takes everything, as before.
        let (mut e, qp) = engine(true);
        (0..7).for_each(|_| drop(post_recv(&qp, 16)));
        input.extend(&seven[seven.len() - 3..]);
        assert_eq!(e.on_input(&input, &mut out), input.len());
        assert_eq!(e.take_completions().count(), 7);
    }

    /// A Send that fills its receive buffer (a fragment with more to follow) is
    /// not counted towards `max`: a batch is `max` messages whatever their size.
    #[test]
    fn on_input_some_does_not_count_sends_that_fill_their_buffer() {
        let (mut e, qp) = engine(true);
        let _mrs: Vec<_> = (0..6).map(|_| post_recv(&qp, 8)).collect();
        let mut input = Vec::new();
        let mut ends = Vec::new();
        // Three messages of two fragments each: 8 bytes (the whole buffer), then 3.
        for m in 0..3u32 {
            input.extend(send(2 * m + 1, 0, true, &[m as u8; 8]));
            ends.push(input.len());
            input.extend(send(2 * m + 2, 0, true, b"end"));
            ends.push(input.len());
        }
        let mut out = Vec::new();
        let lens = |e: &mut Engine| e.take_completions().map(|c| c.byte_len).collect::<Vec<_>>();
        // Two messages: four completions, two of them full buffers.
        let (n, capped) = e.on_input_some(&input, &mut out, 2);
        assert_eq!((n, capped), (ends[3], true));
        assert_eq!(lens(&mut e), [8, 3, 8, 3]);
        // A full buffer alone makes no batch: the third message is taken whole.
        let (n2, capped) = e.on_input_some(&input[n..], &mut out, 1);
        assert_eq!((n + n2, capped), (ends[5], false));
        assert_eq!(lens(&mut e), [8, 3]);
        assert!(out.is_empty() && e.closed().is_none());
    }

    #[test]
    fn terminate_bad_crc() {
        let (e, qp) = engine(true);
        post_recv(&qp, 16);
        let mut f = send(1, 0, true, b"abcd");
        f[21] ^= 0xFF;
        expect_term(e, &qp, &f, term::MPA_CRC);
    }

    #[test]
    fn terminate_no_posted_receive() {
        let (e, qp) = engine(true);
        expect_term(e, &qp, &send(1, 0, true, b"x"), term::DDP_UT_NO_BUFFER);
    }

    #[test]
    fn terminate_bad_msn() {
        let (e, qp) = engine(true);
        post_recv(&qp, 16);
        expect_term(e, &qp, &send(2, 0, true, b"x"), term::DDP_UT_MSN_RANGE);
    }

    #[test]
    fn terminate_bad_mo() {
        let (e, qp) = engine(true);
        post_recv(&qp, 16);
        let mut i = send(1, 0, false, b"ab");
        i.extend(send(1, 5, true, b"cd"));
        expect_term(e, &qp, &i, term::DDP_UT_INVALID_MO);
    }

    #[test]
    fn terminate_message_too_long() {
        let (e, qp) = engine(true);
        post_recv(&qp, 4);
        expect_term(
            e,
            &qp,
            &send(1, 0, true, b"too long"),
            term::DDP_UT_TOO_LONG,
        );
    }

    #[test]
    fn zero_length_write_is_a_no_op() {
        // The initiator's wake-up (encode_nudge) between a Send's FPDUs: the
        // responder places nothing, checks no STag and keeps going.
        let (mut tx, _) = engine(true);
        let (mut e, qp) = engine(true);
        let mr = post_recv(&qp, 16);
        let mut nudge = Vec::new();
        tx.encode_nudge(&mut nudge);
        assert!(!nudge.is_empty());
        let mut input = send(1, 0, false, b"hel");
        input.extend(&nudge);
        input.extend(send(1, 3, true, b"lo"));
        input.extend(&nudge);
        let mut out = Vec::new();
        assert_eq!(e.on_input(&input, &mut out), input.len());
        assert!(out.is_empty(), "no Terminate");
        assert!(e.closed().is_none());
        let c: Vec<_> = e.take_completions().collect();
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].status, c[0].byte_len), (WcStatus::Success, 5));
        mr.with(|b| assert_eq!(&b[..5], b"hello"));
        // A Write with bytes to an unknown STag is still refused.
        expect_term(e, &qp, &write(1, 0, b"x"), term::DDP_T_INVALID_STAG);
    }

    #[test]
    fn terminate_unknown_stag() {
        let (e, qp) = engine(true);
        expect_term(
            e,
            &qp,
            &write(0xABCD_0001, 0, b"x"),
            term::DDP_T_INVALID_STAG,
        );
    }

    #[test]
    fn terminate_invalidated_stag() {
        let (e, qp) = engine(true);
        let mr = qp
            .pd
            .alloc(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        assert!(qp.pd.invalidate(mr.stag()));
        expect_term(
            e,
            &qp,
            &write(mr.stag().0, mr.addr(), b"x"),
            term::DDP_T_INVALID_STAG,
        );
    }

    #[test]
    fn terminate_access_violation() {
        let (e, qp) = engine(true);
        let mr = qp
            .pd
            .alloc(64, Access::LOCAL_WRITE | Access::REMOTE_READ)
            .unwrap();
        expect_term(
            e,
            &qp,
            &write(mr.stag().0, mr.addr(), b"x"),
            term::RDMAP_ACCESS,
        );
    }

    #[test]
    fn terminate_out_of_bounds() {
        let (e, qp) = engine(true);
        let mr = qp
            .pd
            .alloc(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        expect_term(
            e,
            &qp,
            &write(mr.stag().0, mr.addr() + 62, b"xyz"),
            term::DDP_T_BASE_BOUNDS,
        );
        let (e, qp) = engine(true);
        let mr = qp
            .pd
            .alloc(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        expect_term(
            e,
            &qp,
            &write(mr.stag().0, mr.addr() - 1, b"x"),
            term::DDP_T_BASE_BOUNDS,
        );
    }

    #[test]
    fn terminate_read_request_errors() {
        let rreq = |src_stag, src_to, size| read_req(1, src_stag, src_to, size);
        let (e, qp) = engine(true);
        expect_term(e, &qp, &rreq(0x55, 0, 8), term::RDMAP_INVALID_STAG);
        let (e, qp) = engine(true);
        let mr = qp.pd.alloc(64, Access::LOCAL_WRITE).unwrap();
        expect_term(e, &qp, &rreq(mr.stag().0, mr.addr(), 8), term::RDMAP_ACCESS);
        let (e, qp) = engine(true);
        let mr = qp.pd.alloc(64, Access::REMOTE_READ).unwrap();
        expect_term(
            e,
            &qp,
            &rreq(mr.stag().0, mr.addr(), 65),
            term::RDMAP_BASE_BOUNDS,
        );
    }

    /// An RDMA Read Request FPDU (MSN `msn`, with a CRC) for `size` bytes at `src_to` of
    /// `src_stag`, into STag 9 at 0x1000.
    fn read_req(msn: u32, src_stag: u32, src_to: u64, size: u32) -> Vec<u8> {
        let mut b = Vec::new();
        let body = ReadReq {
            sink_stag: 9,
            sink_to: 0x1000,
            size,
            src_stag,
            src_to,
        };
        encode_read_req(&mut b, msn, body, true);
        b
    }

    /// Appends the RDMA Read Request FPDU (MSN `msn`) that asks for `body` to `out`.
    fn encode_read_req(out: &mut Vec<u8>, msn: u32, body: ReadReq, crc: bool) {
        let h = DdpHdr::Untagged {
            last: true,
            opcode: op::READ_REQ,
            inv_stag: 0,
            qn: qn::READ,
            msn,
            mo: 0,
        };
        ddp::encode_fpdu(out, &h, &[&body.encode()], crc);
    }

    #[test]
    fn terminate_ird_overflow() {
        // IRD is 2: a third outstanding Read Request is one too many.
        let (e, qp) = engine(true);
        let mr = qp.pd.alloc(64, Access::REMOTE_READ).unwrap();
        let mut i = read_req(1, mr.stag().0, mr.addr(), 8);
        i.extend(read_req(2, mr.stag().0, mr.addr() + 8, 8));
        let third = read_req(3, mr.stag().0, mr.addr() + 16, 8);
        i.extend(&third);
        let mut out = Vec::new();
        let mut e2 = e;
        e2.on_input(&i, &mut out);
        // The Terminate names the offending segment (D flag, its DDP header).
        let f = ddp::decode_fpdu(&out, true).unwrap().unwrap();
        assert_eq!(
            ddp::parse_terminate(f.payload),
            Some(term::DDP_UT_MSN_RANGE)
        );
        assert_eq!(f.payload[2] & 0x40, 0x40, "D flag");
        assert_eq!(
            &f.payload[4..4 + 2 + UNTAGGED_HDR],
            &third[..2 + UNTAGGED_HDR]
        );
        assert_eq!(f.wire_len, out.len(), "no Read Response was sent");
        assert_eq!(
            e2.closed(),
            Some(&CloseReason::LocalTerminate(term::DDP_UT_MSN_RANGE))
        );
        e2.shutdown();
        assert_eq!(qp.lock().state, QpState::Closed);
        drop(mr);

        // Same three requests through expect_term.
        let (e, qp) = engine(true);
        let mr = qp.pd.alloc(64, Access::REMOTE_READ).unwrap();
        let mut i = read_req(1, mr.stag().0, mr.addr(), 8);
        i.extend(read_req(2, mr.stag().0, mr.addr(), 8));
        i.extend(read_req(3, mr.stag().0, mr.addr(), 8));
        expect_term(e, &qp, &i, term::DDP_UT_MSN_RANGE);
    }

    #[test]
    fn ird_counts_outstanding_reads_only() {
        // Once the Read Responses went out, the slots are free again.
        let (mut e, qp) = engine(true);
        let mr = qp
            .pd
            .register((0..64).collect(), Access::REMOTE_READ)
            .unwrap();
        let mut out = Vec::new();
        let mut i = read_req(1, mr.stag().0, mr.addr(), 8);
        i.extend(read_req(2, mr.stag().0, mr.addr() + 8, 8));
        assert_eq!(e.on_input(&i, &mut out), i.len());
        e.pump_tx(&mut out, 1 << 20);
        let mut rest = &out[..];
        for k in 0..2u8 {
            let f = ddp::decode_fpdu(rest, true).unwrap().unwrap();
            match f.hdr {
                DdpHdr::Tagged {
                    opcode, stag, last, ..
                } => assert_eq!((opcode, stag, last), (op::READ_RESP, 9, true)),
                h => panic!("{h:?}"),
            }
            assert_eq!(f.payload, (8 * k..8 * k + 8).collect::<Vec<u8>>());
            rest = &rest[f.wire_len..];
        }
        assert!(rest.is_empty());
        out.clear();
        let i = read_req(3, mr.stag().0, mr.addr() + 16, 8);
        assert_eq!(e.on_input(&i, &mut out), i.len());
        assert!(e.closed().is_none() && out.is_empty());
    }

    #[test]
    fn terminate_read_request_beyond_source_mr() {
        type Case = (fn(u64) -> u64, u32, TermInfo);
        let cases: [Case; 5] = [
            // Starts inside, ends one byte past the end.
            (|a| a + 57, 8, term::RDMAP_BASE_BOUNDS),
            // Starts exactly at the end.
            (|a| a + 64, 1, term::RDMAP_BASE_BOUNDS),
            // Starts before the base.
            (|a| a - 1, 8, term::RDMAP_BASE_BOUNDS),
            // Far beyond, 4 GiB long.
            (|a| a, u32::MAX, term::RDMAP_BASE_BOUNDS),
            // Tagged offset wraps.
            (|_| u64::MAX - 3, 8, term::RDMAP_TO_WRAP),
        ];
        for (to, size, want) in cases {
            let (e, qp) = engine(true);
            let mr = qp.pd.alloc(64, Access::REMOTE_READ).unwrap();
            expect_term(e, &qp, &read_req(1, mr.stag().0, to(mr.addr()), size), want);
        }
        // The last byte exactly is fine.
        let (mut e, qp) = engine(true);
        let mr = qp.pd.alloc(64, Access::REMOTE_READ).unwrap();
        let mut out = Vec::new();
        e.on_input(&read_req(1, mr.stag().0, mr.addr() + 56, 8), &mut out);
        assert!(e.closed().is_none() && out.is_empty());
    }

    #[test]
    fn terminate_send_with_invalidate_of_unknown_stag() {
        let (e, qp) = engine(true);
        post_recv(&qp, 16);
        let mut b = Vec::new();
        let h = DdpHdr::Untagged {
            last: true,
            opcode: op::SEND_INV,
            inv_stag: 0x77,
            qn: qn::SEND,
            msn: 1,
            mo: 0,
        };
        ddp::encode_fpdu(&mut b, &h, &[b"x"], true);
        expect_term(e, &qp, &b, term::RDMAP_CANNOT_INVALIDATE);
    }

    /// Mutated FPDU streams never panic the engine: it places data, or
    /// terminates with a Terminate FPDU and closes.
    #[test]
    fn mutated_streams_terminate_or_pass() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n.max(1) as u64) as usize
        };
        for round in 0..2000 {
            let crc = round % 2 == 0;
            let (mut e, qp) = engine(crc);
            post_recv(&qp, 64);
            post_recv(&qp, 64);
            let w = qp
                .pd
                .alloc(256, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap();
            let r = qp.pd.alloc(256, Access::REMOTE_READ).unwrap();
            let mut stream = Vec::new();
            let mut b = Vec::new();
            ddp::encode_fpdu(&mut b, &ddp::tests::first_send(), &[b"abc"], crc);
            stream.extend(&b);
            b.clear();
            let h = DdpHdr::Tagged {
                last: true,
                opcode: op::WRITE,
                stag: w.stag().0,
                to: w.addr() + 10,
            };
            ddp::encode_fpdu(&mut b, &h, &[&[7u8; 40]], crc);
            stream.extend(&b);
            b.clear();
            let body = ReadReq {
                sink_stag: 5,
                sink_to: 0,
                size: 16,
                src_stag: r.stag().0,
                src_to: r.addr(),
            };
            encode_read_req(&mut b, 1, body, crc);
            stream.extend(&b);
            for _ in 0..1 + rnd(4) {
                if stream.is_empty() {
                    break;
                }
                let i = rnd(stream.len());
                match rnd(3) {
                    0 => stream[i] ^= 1 << rnd(8),
                    1 => stream[i] = rnd(256) as u8,
                    _ => stream.truncate(i),
                }
            }
            let mut out = Vec::new();
            let used = e.on_input(&stream, &mut out);
            assert!(used <= stream.len());
            e.pump_tx(&mut out, 1 << 16);
            match e.closed() {
                None => {}
                Some(CloseReason::LocalTerminate(t)) => {
                    let mut rest = &out[..];
                    let mut last = None;
                    while let Ok(Some(f)) = ddp::decode_fpdu(rest, crc) {
                        last = Some(f.hdr);
                        if let DdpHdr::Untagged {
                            opcode: op::TERMINATE,
                            ..
                        } = f.hdr
                        {
                            assert_eq!(ddp::parse_terminate(f.payload), Some(*t));
                        }
                        rest = &rest[f.wire_len..];
                    }
                    assert!(
                        matches!(
                            last,
                            Some(DdpHdr::Untagged {
                                opcode: op::TERMINATE,
                                ..
                            })
                        ),
                        "round {round}: closed without a Terminate"
                    );
                }
                Some(CloseReason::PeerTerminate(_)) => {}
                Some(o) => panic!("round {round}: {o:?}"),
            }
            e.shutdown();
        }
    }

    #[test]
    fn peer_terminate_closes() {
        let (mut e, _qp) = engine(true);
        let mut b = Vec::new();
        let mut body = [0u8; 24];
        let n = ddp::terminate_body(term::DDP_UT_NO_BUFFER, None, &mut body);
        let h = DdpHdr::Untagged {
            last: true,
            opcode: op::TERMINATE,
            inv_stag: 0,
            qn: qn::TERMINATE,
            msn: 1,
            mo: 0,
        };
        ddp::encode_fpdu(&mut b, &h, &[&body[..n]], true);
        let mut out = Vec::new();
        e.on_input(&b, &mut out);
        assert!(out.is_empty());
        assert_eq!(
            e.closed(),
            Some(&CloseReason::PeerTerminate(term::DDP_UT_NO_BUFFER))
        );
    }

    /// A long file Write cut at the output's budget stays part-way encoded
    /// (`in_message`); encoded on behind the trailer of its last FPDU so far
    /// (what the driver does before it writes `out`'s last bytes), that trailer
    /// goes out with the next header, held for the payload after it (MSG_MORE),
    /// instead of alone; the stream's bytes are the same either way.
    #[test]
    fn a_trailer_left_at_the_budget_goes_out_with_the_next_header() {
        let file = Arc::new(MemFile(pattern(1 << 20)));
        let n = 512 << 10;
        let mut streams = Vec::new();
        for top_up in [false, true] {
            let (mut e, qp) = engine(false);
            e.cfg.max_ulpdu = max_ulpdu_for_mss(65_483);
            e.set_vectored(true);
            queue_file_write(&qp, &file, 0, n);
            let budget = 4 * FILE_FPDU_MAX;
            let mut out = Vec::new();
            e.pump_tx(&mut out, budget);
            assert!(e.in_message(), "cut at the budget");
            let (mut wpos, mut stream, mut alone) = (0, Vec::new(), 0);
            while wpos < out.len() || e.has_holes() || e.has_tx_work() {
                if wpos == out.len() && !e.has_holes() {
                    out.clear();
                    wpos = 0;
                    e.pump_tx(&mut out, budget);
                    continue;
                }
                if top_up && !e.has_holes() && e.in_message() {
                    e.pump_tx(&mut out, budget);
                }
                let bytes = std::cell::RefCell::new(Vec::new());
                let held = std::cell::Cell::new(true);
                let k = e
                    .write_vectored(
                        &out,
                        wpos,
                        |iov, more| {
                            held.set(more);
                            let mut b = bytes.borrow_mut();
                            iov.iter().for_each(|s| b.extend_from_slice(s));
                            Ok(b.len())
                        },
                        |src, off, len| {
                            src.read_part(&mut bytes.borrow_mut(), off, len);
                            Ok(len)
                        },
                    )
                    .unwrap();
                let bytes = bytes.into_inner();
                if !held.get() && k < 64 && e.in_message() {
                    alone += 1;
                }
                stream.extend_from_slice(&bytes);
                wpos = e.advance(&out, wpos, k);
            }
            assert!(!e.in_message());
            // Cut twice (at 4 and 8 FPDUs of 9): two trailers alone without the top-up.
            assert_eq!(alone, if top_up { 0 } else { 2 }, "top_up {top_up}");
            streams.push(stream);
        }
        assert_eq!(streams[0], streams[1]);
        assert!(streams[1].len() > n);
    }
}
