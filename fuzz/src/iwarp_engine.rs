//! The soft-iWARP connection (`smbx-rdma`, [`SansIoConn`]) fed the TCP byte
//! stream a peer could send: the MPA Request (as responder) or Reply (as
//! initiator), then FPDUs, in arbitrary pieces, while it also has its own
//! work queued (receives, a Send, an RDMA Read of the peer's memory).

use smbx_rdma::iwarp::{IwarpOptions, ReplyProgress, Rtr, SansIoConn, SoftMr, SoftPd};
use smbx_rdma::{
    Access, ConnParams, MemoryRegion, ProtectionDomain, QpCaps, QueuePair, RemoteBuf, SendOp,
    SendWr, Sge,
};

/// Size of each posted receive.
pub const RECV_LEN: usize = 256;
/// Receives posted before the stream starts.
pub const RECVS: u64 = 4;
/// Size of the region the peer may write to and of the one it may read.
pub const REGION_LEN: usize = 4096;
/// Bytes our own RDMA Read asks for.
pub const READ_LEN: u32 = 64;
/// TCP MSS the connection sizes its FPDUs for.
pub const MSS: u32 = 1448;
/// Budget of one `pump_tx` call.
const TX_BUDGET: usize = 64 * 1024;

/// The option byte at the front of an input: bit 0 initiator (else
/// responder), bit 1 ask for CRC, bit 2 MPA revision 1 (else 2), bits 3-4 the
/// RTR offered as initiator (none, Read, Write, Send), bits 5-7 how the
/// stream is cut into reads (0: all at once; n: pieces of up to 2^(2n) bytes).
pub fn options(sel: u8) -> (bool, IwarpOptions) {
    let initiator = sel & 1 != 0;
    let opts = IwarpOptions {
        mpa_revision: if sel & 4 != 0 { 1 } else { 2 },
        crc: sel & 2 != 0,
        rtr: match (sel >> 3) & 3 {
            0 => None,
            1 => Some(Rtr::Read),
            2 => Some(Rtr::Write),
            _ => Some(Rtr::Send),
        },
        mss: Some(MSS),
        ..IwarpOptions::default()
    };
    (initiator, opts)
}

/// The option byte for these choices (see [`options`]); `rtr` 0-3, `piece` 0-7.
pub fn selector(initiator: bool, crc: bool, rev1: bool, rtr: u8, piece: u8) -> u8 {
    u8::from(initiator)
        | u8::from(crc) << 1
        | u8::from(rev1) << 2
        | (rtr & 3) << 3
        | (piece & 7) << 5
}

/// The connection parameters both sides use.
pub fn conn_params() -> ConnParams {
    ConnParams {
        private_data: b"smbx-fuzz".to_vec(),
        ird: 4,
        ord: 4,
    }
}

/// The seed of every domain the target makes: STags are random in a server,
/// but here the same every run, so seeds keep naming the regions.
pub const PD_SEED: u64 = 0x5EED_F1AA_0000_0001;

/// Our memory: receive buffers, a region the peer may write, one it may
/// read (filled with a pattern), a send source and a read sink. Registered
/// in this order in a domain seeded with [`PD_SEED`], so their STags are the
/// same every run.
pub struct Regions {
    /// Receive buffers.
    pub recv: SoftMr,
    /// Remote-writable.
    pub writable: SoftMr,
    /// Remote-readable.
    pub readable: SoftMr,
    /// Source of our Send.
    pub send_src: SoftMr,
    /// Sink of our RDMA Read.
    pub read_sink: SoftMr,
}

impl Regions {
    /// Registers the regions in `pd`.
    pub fn new(pd: &SoftPd) -> Regions {
        let alloc = |len: usize, a: Access| pd.alloc(len, a).expect("alloc");
        Regions {
            recv: alloc(RECV_LEN * RECVS as usize, Access::LOCAL_WRITE),
            writable: alloc(REGION_LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            readable: pd
                .register(
                    (0..REGION_LEN).map(|i| i as u8).collect(),
                    Access::REMOTE_READ,
                )
                .expect("register"),
            send_src: pd
                .register(b"hello from the fuzz target".to_vec(), Access::LOCAL_READ)
                .expect("register"),
            read_sink: alloc(READ_LEN as usize, Access::LOCAL_WRITE),
        }
    }

    /// Posts the receives on `qp`.
    pub fn post_receives<Q: QueuePair<Mr = SoftMr>>(&self, qp: &Q) {
        for i in 0..RECVS {
            let sge = Sge::new(&self.recv, i * RECV_LEN as u64, RECV_LEN as u32);
            qp.post_recv(i, &[sge]).expect("post_recv");
        }
    }

    /// Queues our own work: a Send, and an RDMA Read of the peer's readable
    /// region (a peer set up like us registers it under the same STag).
    pub fn post_sends<Q: QueuePair<Mr = SoftMr>>(&self, qp: &Q) {
        let len = self.send_src.len() as u32;
        qp.post_send(&SendWr {
            wr_id: 100,
            op: SendOp::Send,
            sg: &[Sge::new(&self.send_src, 0, len)],
            solicited: false,
        })
        .expect("post_send");
        qp.post_send(&SendWr {
            wr_id: 101,
            op: SendOp::RdmaRead {
                remote: RemoteBuf {
                    stag: self.readable.stag(),
                    to: self.readable.addr(),
                    len: READ_LEN,
                },
            },
            sg: &[Sge::new(&self.read_sink, 0, READ_LEN)],
            solicited: false,
        })
        .expect("post_send");
    }
}

/// A connection set up by [`setup`].
pub struct Setup {
    /// The connection.
    pub conn: SansIoConn,
    /// Its memory.
    pub regions: Regions,
    /// Bytes of the stream the MPA Request or Reply took.
    pub used: usize,
    /// The MPA Request or Reply it sent.
    pub sent: Vec<u8>,
}

/// Sets up a connection from the front of `stream` as `initiator` or
/// responder, with its regions registered, receives posted and its own
/// sends queued; None when setup fails or needs more bytes.
pub fn setup(initiator: bool, opts: &IwarpOptions, stream: &[u8]) -> Option<Setup> {
    let pd = SoftPd::seeded(PD_SEED);
    let regions = Regions::new(&pd);
    let params = conn_params();
    let (conn, used, sent) = if initiator {
        let (connecting, request) = SansIoConn::connect(&pd, QpCaps::default(), opts, &params, MSS);
        regions.post_receives(connecting.qp());
        match connecting.on_reply(stream).ok()? {
            ReplyProgress::Connected(c, used) => (*c, used, request),
            ReplyProgress::NeedMore(_) => return None,
        }
    } else {
        let (c, reply, used) =
            SansIoConn::accept(&pd, QpCaps::default(), opts, &params, MSS, stream).ok()??;
        regions.post_receives(c.qp());
        (c, used, reply)
    };
    regions.post_sends(conn.qp());
    Some(Setup {
        conn,
        regions,
        used,
        sent,
    })
}

/// The target: option byte ([`options`]), then the stream.
pub fn iwarp_engine(data: &[u8]) {
    let _ = run(data);
}

/// What a run of [`iwarp_engine`] left behind.
pub struct Outcome {
    /// Every completion, in order (the flushed ones at the end).
    pub completions: Vec<smbx_rdma::Completion>,
    /// Why the connection closed before the teardown, if it did.
    pub closed: Option<smbx_rdma::CloseReason>,
    /// The regions, as the peer left them.
    pub regions: Regions,
}

/// Runs the target on `data` and returns what happened (None when MPA
/// setup failed or needed more bytes), checking as it goes that the
/// connection never panics, consumes at most what it was given, answers a
/// receive with at most one Terminate, keeps `pump_tx` within its budget,
/// produces bounded output, and completes every posted work request exactly
/// once.
pub fn run(data: &[u8]) -> Option<Outcome> {
    let (&sel, stream) = data.split_first()?;
    let (initiator, opts) = options(sel);
    let Setup {
        mut conn,
        regions,
        used,
        ..
    } = setup(initiator, &opts, stream)?;
    let stream = &stream[used..];
    let piece = match sel >> 5 {
        0 => usize::MAX,
        n => 1usize << (2 * n),
    };
    let max_fpdu = (MSS as usize & !7) + 8;
    let mut pending: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let mut completions = Vec::new();
    let mut fed = 0;
    loop {
        // Send first (the peer's answers to our Read Request come after it),
        // then take the next piece of the stream.
        conn.pump_tx(&mut out, TX_BUDGET);
        assert!(
            out.len() < TX_BUDGET + max_fpdu,
            "pump_tx overran its budget"
        );
        out.clear();
        let n = piece.min(stream.len() - fed);
        pending.extend_from_slice(&stream[fed..fed + n]);
        fed += n;
        let before = out.len();
        let used = conn.on_input(&pending, &mut out);
        assert!(used <= pending.len());
        // At most one Terminate comes out of a receive.
        assert!(
            out.len() - before <= 2 + 18 + 28 + 8,
            "receive produced {} bytes",
            out.len() - before
        );
        pending.drain(..used);
        if conn.closed().is_some() {
            assert!(!conn.has_tx_work(), "tx work after close");
        }
        out.clear();
        while let Some(c) = conn.qp().cq().try_next() {
            completions.push(c);
            assert!(c.byte_len as usize <= REGION_LEN.max(RECV_LEN), "{c:?}");
        }
        if fed == stream.len() || conn.closed().is_some() {
            break;
        }
    }
    // Whatever is left to send (Read Responses) is bounded by what IRD lets
    // the peer ask for.
    let ird = usize::from(conn_params().ird);
    let mut rounds = 0;
    loop {
        conn.pump_tx(&mut out, TX_BUDGET);
        if out.is_empty() {
            break;
        }
        out.clear();
        rounds += 1;
        assert!(
            rounds <= 1 + ird * REGION_LEN / TX_BUDGET + 1,
            "unbounded output"
        );
    }
    let _ = conn.peer();
    let closed = conn.closed().cloned();
    let qp = conn.qp().clone();
    conn.shutdown();
    completions.extend(std::iter::from_fn(|| qp.cq().try_next()));
    // Every receive and send we posted completes exactly once (or is flushed).
    let mut ids: Vec<u64> = completions.iter().map(|c| c.wr_id).collect();
    ids.sort_unstable();
    let want: Vec<u64> = (0..RECVS).chain([100, 101]).collect();
    assert_eq!(ids, want, "completions lost or duplicated");
    Some(Outcome {
        completions,
        closed,
        regions,
    })
}
