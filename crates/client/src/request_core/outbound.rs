//! What the client sends, as bytes: requests, their SMB2 headers (MessageIds, credits,
//! replay flag and ChannelSequence), compound chains, signatures, and CANCEL. Sealing
//! is the last step, in place, by the session's keys.

use bytes::Bytes;
use smbx_security::protection::Protection;
use smbx_security::signing::Signer;
use smbx_security::transform::TRANSFORM_HEADER_LEN;
use smbx_wire::compound;
use smbx_wire::header::{FLAGS_ASYNC_COMMAND, FLAGS_RELATED_OPERATIONS, FLAGS_REPLAY_OPERATION};
use smbx_wire::{Command, Dialect, Header, NtStatus, Writer, HEADER_SIZE};

use super::{Issued, Members};

/// Bytes reserved before a body built with [`body_writer`]: frame header, TRANSFORM_HEADER
/// and SMB2 header.
pub(crate) const HEADROOM: usize = 4 + TRANSFORM_HEADER_LEN + HEADER_SIZE;

/// A writer for a request body, with [`HEADROOM`] reserved in front. A large one (a
/// WRITE's) is in a buffer from `pool`, which the writer task gives back once sent, so
/// its pages are not faulted in afresh for every request.
pub(crate) fn body_writer(pool: &smbx_transport::BufPool, body_len: usize) -> Writer {
    let mut w = Writer::from_vec(pool.take_spare(HEADROOM + body_len));
    w.zeros(HEADROOM);
    w
}

/// One request of a (possibly compound) send.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The command.
    pub command: Command,
    /// The body (everything after the 64-byte header).
    pub body: Vec<u8>,
    /// TreeId (0 when not tree-scoped).
    pub tree_id: u32,
    /// Credits this request costs (see [`crate::credits::charge_for`]); at least 1.
    pub charge: u16,
    /// True for the second and later members of a related compound.
    pub related: bool,
    /// True if `body` starts with [`HEADROOM`] reserved bytes, so that a lone request can
    /// become its frame without another copy.
    pub headroom: bool,
    /// Send with SMB2_FLAGS_REPLAY_OPERATION (3.x): a request resent after its
    /// channel failed (multichannel failover, channels.rs).
    pub replay: bool,
    /// ChannelSequence (3.x), carried in the low half of the header's Status
    /// field: the session's count of channel failures ([MS-SMB2] 3.2.4.1).
    pub channel_sequence: u16,
    /// A WRITE's data, sent after `body` from the caller's buffer: a lone unsigned,
    /// unsealed request over a link that sends tails gathers it from there (never
    /// copied into the request); otherwise [`frame`] copies it in behind the body.
    pub data: Option<Bytes>,
}

impl Request {
    /// A request costing one credit.
    pub fn new(command: Command, body: Vec<u8>, tree_id: u32) -> Request {
        Request {
            command,
            body,
            tree_id,
            charge: 1,
            related: false,
            headroom: false,
            replay: false,
            channel_sequence: 0,
            data: None,
        }
    }

    /// A request whose body was built with [`body_writer`].
    pub fn with_headroom(command: Command, body: Writer, tree_id: u32) -> Request {
        Request {
            headroom: true,
            ..Request::new(command, body.into_vec(), tree_id)
        }
    }

    /// The body as sent (without the reserved headroom or the [data](Request::data)
    /// that follows it).
    pub fn payload(&self) -> &[u8] {
        if self.headroom {
            self.body.get(HEADROOM..).unwrap_or_default()
        } else {
            &self.body
        }
    }

    /// Bytes the request puts on the wire after its header: body and data.
    pub fn wire_len(&self) -> usize {
        self.payload().len() + self.data.as_ref().map_or(0, |d| d.len())
    }
}

/// The SMB2 headers of a send: MessageIds from `issued`, each member's CreditCharge
/// (none at 2.0.2) and CreditRequest, the related and replay flags and, at 3.x, the
/// ChannelSequence in the Status field.
pub(crate) fn headers(
    reqs: &[Request],
    charges: &[u16],
    issued: Issued,
    dialect: Dialect,
    session_id: u64,
) -> Members<Header> {
    let smb3 = dialect.is_smb3();
    let charged = dialect != Dialect::SMB2_0_2 && dialect != Dialect::NONE;
    let mut next_id = issued.first_id;
    let mut out = Members::with_capacity(reqs.len());
    for (i, (req, &charge)) in reqs.iter().zip(charges).enumerate() {
        let mut flags = 0;
        if req.related {
            flags |= FLAGS_RELATED_OPERATIONS;
        }
        if req.replay && smb3 {
            flags |= FLAGS_REPLAY_OPERATION;
        }
        out.push(Header {
            credit_charge: if charged { charge } else { 0 },
            status: NtStatus(if smb3 { req.channel_sequence as u32 } else { 0 }),
            command: req.command as u16,
            credits: if i == 0 { issued.ask } else { charge },
            flags,
            next_command: 0,
            message_id: next_id,
            async_id: 0,
            tree_id: req.tree_id,
            session_id,
            signature: [0; 16],
        });
        next_id += charge as u64;
    }
    out
}

/// A message ready for the link: `buf[start..]` then `tail` is what is sent (a
/// TRANSFORM_HEADER's room first when it is to be sealed), with at least 4 bytes of
/// room before `start`.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The buffer.
    pub buf: Vec<u8>,
    /// Where the message (or its TRANSFORM_HEADER's room) starts.
    pub start: usize,
    /// Where the plaintext SMB2 message starts (after the TRANSFORM_HEADER's room).
    pub msg_start: usize,
    /// A lone WRITE's data, sent from the caller's buffer right after `buf`.
    pub tail: Option<Bytes>,
}

/// Builds the frame of `reqs` with their `headers`, signing each member with
/// `signer`, leaving room for a TRANSFORM_HEADER when `sealed`. A lone request built
/// with headroom becomes the frame in place, its [data](Request::data) left in the
/// caller's buffer as the frame's tail when `tails` (the link sends tails) and it is
/// neither signed nor sealed; otherwise the data is copied in behind the body, and
/// several members are chained into one buffer. With `retain`, the requests are
/// handed back unsent (to be replayed): a chain copied them already, and a request
/// framed in place is copied into a buffer from `take` (the one copy retaining costs;
/// a tail is shared, not copied).
pub(crate) fn frame(
    mut reqs: Vec<Request>,
    headers: &[Header],
    signer: Option<&Signer>,
    sealed: bool,
    tails: bool,
    retain: bool,
    mut take: impl FnMut(usize) -> Vec<u8>,
) -> (Frame, Option<Vec<Request>>) {
    let encode = |h: &Header, to: &mut [u8]| to.copy_from_slice(&h.to_bytes());
    if reqs.len() == 1 && reqs[0].headroom && reqs[0].body.len() >= HEADROOM {
        let msg_start = HEADROOM - HEADER_SIZE;
        let start = if sealed { 4 } else { 4 + TRANSFORM_HEADER_LEN };
        let gather = tails && signer.is_none() && !sealed;
        let r = &mut reqs[0];
        let mut tail = None;
        match r.data.clone() {
            Some(d) if gather => tail = Some(d),
            // Signed or sealed over the whole message: the data joins the body, in
            // a buffer from `take` (pooled at WRITE sizes). A retained request
            // keeps its data apart.
            Some(d) => {
                let mut joined = take(r.body.len() + d.len());
                joined.extend_from_slice(&r.body);
                joined.extend_from_slice(&d);
                if retain {
                    encode(&headers[0], &mut joined[msg_start..HEADROOM]);
                    if let Some(signer) = signer {
                        signer.sign(&mut joined[msg_start..]);
                    }
                    let f = Frame {
                        buf: joined,
                        start,
                        msg_start,
                        tail: None,
                    };
                    return (f, Some(reqs));
                }
                r.body = joined;
                r.data = None;
            }
            None => {}
        }
        let b = &mut r.body;
        encode(&headers[0], &mut b[msg_start..HEADROOM]);
        if let Some(signer) = signer {
            signer.sign(&mut b[msg_start..]);
        }
        if retain {
            let mut wire = take(b.len());
            wire.extend_from_slice(b);
            let f = Frame {
                buf: wire,
                start,
                msg_start,
                tail,
            };
            return (f, Some(reqs));
        }
        let buf = std::mem::take(b);
        let f = Frame {
            buf,
            start,
            msg_start,
            tail,
        };
        return (f, None);
    }
    let body_len: usize = reqs.iter().map(|r| HEADER_SIZE + r.wire_len() + 8).sum();
    let msg_start = 4 + if sealed { TRANSFORM_HEADER_LEN } else { 0 };
    let mut b = Vec::with_capacity(msg_start + body_len);
    b.resize(msg_start, 0);
    let mut chain = compound::Builder::new(b);
    for (req, hdr) in reqs.iter().zip(headers) {
        let m = chain.member();
        let at = m.len();
        m.resize(at + HEADER_SIZE, 0);
        encode(hdr, &mut m[at..]);
        m.extend_from_slice(req.payload());
        if let Some(d) = &req.data {
            m.extend_from_slice(d);
        }
    }
    let (mut buf, members) = chain.finish(false);
    if let Some(signer) = signer {
        for r in members {
            signer.sign(&mut buf[r]);
        }
    }
    let f = Frame {
        buf,
        start: 4,
        msg_start,
        tail: None,
    };
    (f, retain.then_some(reqs))
}

/// What a CANCEL names ([MS-SMB2] 3.2.4.24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cancel {
    /// The MessageId of the request to cancel.
    pub message_id: u64,
    /// Its AsyncId, when the server answered STATUS_PENDING (the async form).
    pub async_id: Option<u64>,
    /// SessionId.
    pub session_id: u64,
    /// TreeId (sync form).
    pub tree_id: u32,
}

/// The frame of a CANCEL: no credit charged, none asked, no response of its own;
/// sealed when `seal`, else signed when `sign` (with `keys`). `None` if it must be
/// sealed and cannot be.
pub(crate) fn cancel_frame(
    c: Cancel,
    keys: Option<&Protection>,
    seal: bool,
    sign: bool,
) -> Option<(Vec<u8>, usize)> {
    let mut hdr = Header {
        command: Command::Cancel as u16,
        message_id: c.message_id,
        tree_id: c.tree_id,
        session_id: c.session_id,
        ..Default::default()
    };
    if let Some(a) = c.async_id {
        hdr.flags |= FLAGS_ASYNC_COMMAND;
        hdr.async_id = a;
    }
    let prefix = 4 + if seal { TRANSFORM_HEADER_LEN } else { 0 };
    let mut w = Writer::with_capacity(prefix + HEADER_SIZE + 4);
    w.zeros(prefix);
    hdr.encode(&mut w);
    w.bytes(&smbx_wire::simple::SIMPLE_BODY);
    let mut buf = w.into_vec();
    if seal {
        keys?.seal_in_place(c.session_id, &mut buf[4..]).ok()?;
    } else if let Some(k) = keys.filter(|_| sign) {
        k.sign(&mut buf[prefix..]);
    }
    Some((buf, 4))
}
