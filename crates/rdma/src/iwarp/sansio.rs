//! Soft-iWARP connection setup without a socket: the MPA Request/Reply
//! exchange as plain functions of bytes, and [`SansIoConn`], a queue pair
//! whose [`Engine`] is driven by the caller. The provider's TCP code
//! ([`super::soft`]) uses the same setup functions; tests and fuzzers use
//! [`SansIoConn`] to feed a connection any byte stream a peer could send.

use std::sync::Arc;

use super::engine::{max_ulpdu_for_mss, Engine, EngineConfig};
use super::mpa::{self, MpaFrame, ReplyOutcome, RequestInfo};
use super::mr::SoftPd;
use super::qp::{QpShared, SoftQp};
use super::{IwarpOptions, Rtr, LARGE_ULPDU};
use crate::error::{RdmaError, Result};
use crate::types::{CloseReason, ConnParams, PeerParams, QpCaps, QpState};

/// The responder's answer to a Request: the Reply to send and the engine
/// settings it implies.
pub(crate) fn responder_setup(
    info: &RequestInfo,
    opts: &IwarpOptions,
    params: &ConnParams,
    mss: u32,
) -> (MpaFrame, EngineConfig) {
    let mut acc = mpa::accept_request(info, opts.crc, params.ird, params.ord, &params.private_data);
    if opts.large_fpdus {
        mpa::accept_large(&mut acc, info, LARGE_ULPDU);
    }
    let cfg = EngineConfig {
        crc: acc.crc,
        max_ulpdu: max_ulpdu_for_mss(mss),
        ird: acc.ird,
        ord: acc.ord,
        send_rtr: None,
        expect_rtr: acc.rtr,
        large: acc.large,
    };
    (acc.reply, cfg)
}

/// The initiator's side of MPA setup: what it asked for, to judge the Reply.
#[derive(Clone, Debug)]
pub(crate) struct InitiatorSetup {
    rev: u8,
    crc: bool,
    rtr: Option<Rtr>,
    ird: u16,
    ord: u16,
    /// The large-FPDU offer it made (the largest ULPDU it receives).
    large: Option<u32>,
}

/// What the initiator learned from the Reply.
pub(crate) enum InitiatorOutcome {
    /// Accepted: run the engine with these settings.
    Accepted(EngineConfig, PeerParams),
    /// The responder refused, with its private data.
    Rejected(Vec<u8>),
}

impl InitiatorSetup {
    /// The Request to send for `opts` and `params`.
    pub(crate) fn new(opts: &IwarpOptions, params: &ConnParams) -> (InitiatorSetup, MpaFrame) {
        let rev = opts.mpa_revision.clamp(1, 2);
        let rtr = if rev == 2 { opts.rtr } else { None };
        let mut req = mpa::build_request(
            rev,
            opts.crc,
            params.ird,
            params.ord,
            rtr,
            &params.private_data,
        );
        let large =
            (opts.large_fpdus && mpa::offer_large(&mut req, LARGE_ULPDU)).then_some(LARGE_ULPDU);
        let s = InitiatorSetup {
            rev,
            crc: opts.crc,
            rtr,
            ird: params.ird.min(mpa::IRD_ORD_MASK),
            ord: params.ord,
            large,
        };
        (s, req)
    }

    /// Judges the Reply; `mss` sizes the FPDUs.
    pub(crate) fn on_reply(&self, rep: &MpaFrame, mss: u32) -> Result<InitiatorOutcome> {
        let outcome = mpa::read_reply(rep, self.rev, self.crc, self.ird, self.rtr)
            .map_err(|e| RdmaError::Setup(e.to_string()))?;
        match outcome {
            ReplyOutcome::Rejected(pd) => Ok(InitiatorOutcome::Rejected(pd)),
            ReplyOutcome::Accepted {
                crc,
                peer_ird,
                peer_ord,
                rtr,
                private_data,
                large,
            } => {
                let ord = if rep.enhanced() {
                    self.ord.min(peer_ird)
                } else {
                    self.ord
                };
                let cfg = EngineConfig {
                    crc,
                    max_ulpdu: max_ulpdu_for_mss(mss),
                    ird: self.ird,
                    ord,
                    send_rtr: rtr,
                    expect_rtr: None,
                    large: mpa::large_agreed(self.large, large, crc),
                };
                let peer = PeerParams {
                    private_data,
                    ird: peer_ird,
                    ord: peer_ord,
                };
                Ok(InitiatorOutcome::Accepted(cfg, peer))
            }
        }
    }
}

/// Marks `shared` connected with the negotiated values.
pub(crate) fn open_qp(shared: &QpShared, cfg: &EngineConfig, peer: PeerParams) {
    let mut g = shared.lock();
    g.state = QpState::Rts;
    g.peer = peer;
    g.ird = cfg.ird;
    g.ord = cfg.ord;
    g.crc = cfg.crc;
}

/// A soft-iWARP connection driven by its caller instead of a TCP task:
/// bytes the peer sent go in with [`on_input`](SansIoConn::on_input), bytes
/// to send come out of [`pump_tx`](SansIoConn::pump_tx), and work is posted
/// through [`qp`](SansIoConn::qp) as with any provider.
#[derive(Debug)]
pub struct SansIoConn {
    engine: Engine,
    qp: SoftQp,
    peer: PeerParams,
}

/// A connection whose MPA Request is sent and whose Reply is awaited.
#[derive(Debug)]
pub struct SansIoConnecting {
    setup: InitiatorSetup,
    qp: SoftQp,
    mss: u32,
}

impl SansIoConn {
    /// As responder: decodes the MPA Request at the front of `input` and
    /// accepts it with `params` (a request for markers is refused with an
    /// error, as the provider does). Returns `Ok(None)` while the Request is
    /// incomplete, else the connection, the Reply bytes to send and how many
    /// input bytes the Request took (the rest is FPDU stream).
    pub fn accept(
        pd: &SoftPd,
        caps: QpCaps,
        opts: &IwarpOptions,
        params: &ConnParams,
        mss: u32,
        input: &[u8],
    ) -> Result<Option<(SansIoConn, Vec<u8>, usize)>> {
        let Some((req, used)) =
            MpaFrame::decode(input, false).map_err(|e| RdmaError::Setup(e.to_string()))?
        else {
            return Ok(None);
        };
        let info = RequestInfo::from_frame(&req);
        if info.markers {
            return Err(RdmaError::Setup("MPA request asks for markers".into()));
        }
        let (reply, cfg) = responder_setup(&info, opts, params, mss);
        let peer = PeerParams {
            private_data: info.private_data.clone(),
            ird: info.ird,
            ord: info.ord,
        };
        let mut out = Vec::new();
        reply.encode(&mut out);
        Ok(Some((Self::open(pd, caps, cfg, peer), out, used)))
    }

    /// As initiator: the pending connection and the MPA Request bytes to
    /// send. Receives may be posted on its queue pair before the Reply.
    pub fn connect(
        pd: &SoftPd,
        caps: QpCaps,
        opts: &IwarpOptions,
        params: &ConnParams,
        mss: u32,
    ) -> (SansIoConnecting, Vec<u8>) {
        let (setup, req) = InitiatorSetup::new(opts, params);
        let mut out = Vec::new();
        req.encode(&mut out);
        let qp = SoftQp::new(QpShared::new(pd.clone(), caps));
        (SansIoConnecting { setup, qp, mss }, out)
    }

    fn open(pd: &SoftPd, caps: QpCaps, cfg: EngineConfig, peer: PeerParams) -> SansIoConn {
        let shared = QpShared::new(pd.clone(), caps);
        Self::with_qp(SoftQp::new(shared), cfg, peer)
    }

    fn with_qp(qp: SoftQp, cfg: EngineConfig, peer: PeerParams) -> SansIoConn {
        let shared: Arc<QpShared> = qp.shared().clone();
        open_qp(&shared, &cfg, peer.clone());
        SansIoConn {
            engine: Engine::new(shared, cfg),
            qp,
            peer,
        }
    }

    /// The queue pair: post receives and sends here.
    pub fn qp(&self) -> &SoftQp {
        &self.qp
    }

    /// What the peer offered during setup.
    pub fn peer(&self) -> &PeerParams {
        &self.peer
    }

    /// Consumes FPDUs from `input` (see [`Engine::on_input`]); returns the
    /// bytes used. A Terminate, if the input broke the protocol, is
    /// appended to `out`.
    pub fn on_input(&mut self, input: &[u8], out: &mut Vec<u8>) -> usize {
        self.engine.on_input(input, out)
    }

    /// Encodes pending sends into `out` up to about `budget` bytes (see
    /// [`Engine::pump_tx`]), and moves completions to the completion queue.
    pub fn pump_tx(&mut self, out: &mut Vec<u8>, budget: usize) {
        if self.engine.closed().is_none() && self.qp.shared().lock().disconnect {
            self.engine.set_closed(CloseReason::LocalDisconnect);
        }
        self.engine.pump_tx(out, budget);
        self.engine.deliver_completions();
    }

    /// Whether there is send work the engine could encode now.
    pub fn has_tx_work(&self) -> bool {
        self.engine.has_tx_work()
    }

    /// Why the connection stopped, once it has.
    pub fn closed(&self) -> Option<&CloseReason> {
        self.engine.closed()
    }

    /// Tears down as the provider does at the end of a connection: flushes
    /// outstanding work and closes the completion queue.
    pub fn shutdown(mut self) {
        self.engine.shutdown();
    }
}

/// Where [`SansIoConnecting::on_reply`] got to.
#[derive(Debug)]
pub enum ReplyProgress {
    /// The Reply is incomplete: call again with more bytes.
    NeedMore(SansIoConnecting),
    /// Connected; the Reply took this many bytes (the rest is FPDU stream).
    Connected(Box<SansIoConn>, usize),
}

impl SansIoConnecting {
    /// The queue pair (receives may be posted before the Reply arrives).
    pub fn qp(&self) -> &SoftQp {
        &self.qp
    }

    /// Decodes the MPA Reply at the front of `input`: back again while it
    /// is incomplete, else the connection and how many bytes the Reply took.
    /// A rejection is [`RdmaError::Rejected`].
    pub fn on_reply(self, input: &[u8]) -> Result<ReplyProgress> {
        let Some((rep, used)) =
            MpaFrame::decode(input, true).map_err(|e| RdmaError::Setup(e.to_string()))?
        else {
            return Ok(ReplyProgress::NeedMore(self));
        };
        match self.setup.on_reply(&rep, self.mss)? {
            InitiatorOutcome::Rejected(pd) => {
                self.qp.shared().set_closed(CloseReason::PeerDisconnect);
                self.qp.shared().cq.close();
                Err(RdmaError::Rejected(pd))
            }
            InitiatorOutcome::Accepted(cfg, peer) => Ok(ReplyProgress::Connected(
                Box::new(SansIoConn::with_qp(self.qp, cfg, peer)),
                used,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{MemoryRegion, ProtectionDomain, QueuePair};
    use crate::types::{Access, SendOp, SendWr, Sge, WcOpcode, WcStatus};

    /// Initiator and responder set up over bytes and exchange a Send and an
    /// RDMA Read, with no socket in between.
    #[test]
    fn initiator_and_responder_over_bytes() {
        let opts = IwarpOptions {
            rtr: Some(Rtr::Read),
            ..IwarpOptions::default()
        };
        let params = ConnParams::default();
        let (pd_a, pd_b) = (SoftPd::new(), SoftPd::new());
        let (connecting, req) = SansIoConn::connect(&pd_a, QpCaps::default(), &opts, &params, 1448);
        // An incomplete Request needs more bytes.
        assert!(
            SansIoConn::accept(&pd_b, QpCaps::default(), &opts, &params, 1448, &req[..10])
                .unwrap()
                .is_none()
        );
        let (mut b, reply, used) =
            SansIoConn::accept(&pd_b, QpCaps::default(), &opts, &params, 1448, &req)
                .unwrap()
                .unwrap();
        assert_eq!(used, req.len());
        let connecting = match connecting.on_reply(&reply[..5]).unwrap() {
            ReplyProgress::NeedMore(c) => c,
            ReplyProgress::Connected(..) => panic!("connected on 5 bytes"),
        };
        let mut a = match connecting.on_reply(&reply).unwrap() {
            ReplyProgress::Connected(a, n) => {
                assert_eq!(n, reply.len());
                a
            }
            ReplyProgress::NeedMore(_) => panic!("complete reply not taken"),
        };

        let rx = pd_b.alloc(64, Access::LOCAL_WRITE).unwrap();
        b.qp().post_recv(1, &[Sge::new(&rx, 0, 64)]).unwrap();
        let src = pd_b
            .register(b"remote!".to_vec(), Access::REMOTE_READ)
            .unwrap();
        let tx = pd_a
            .register(b"hello".to_vec(), Access::LOCAL_READ)
            .unwrap();
        let sink = pd_a.alloc(7, Access::LOCAL_WRITE).unwrap();
        a.qp()
            .post_send(&SendWr {
                wr_id: 2,
                op: SendOp::Send,
                sg: &[Sge::new(&tx, 0, 5)],
                solicited: false,
            })
            .unwrap();
        a.qp()
            .post_send(&SendWr {
                wr_id: 3,
                op: SendOp::RdmaRead {
                    remote: crate::types::RemoteBuf {
                        stag: src.stag(),
                        to: src.addr(),
                        len: 7,
                    },
                },
                sg: &[Sge::new(&sink, 0, 7)],
                solicited: false,
            })
            .unwrap();
        // Shuttle bytes until both sides are idle.
        let (mut ab, mut ba) = (Vec::new(), Vec::new());
        for _ in 0..8 {
            a.pump_tx(&mut ab, 1 << 16);
            let n = b.on_input(&ab, &mut ba);
            ab.drain(..n);
            b.pump_tx(&mut ba, 1 << 16);
            let n = a.on_input(&ba, &mut ab);
            ba.drain(..n);
        }
        assert_eq!((a.closed(), b.closed()), (None, None));
        let got = b.qp().cq().try_next().expect("receive completed");
        assert_eq!(
            (got.wr_id, got.opcode, got.status),
            (1, WcOpcode::Recv, WcStatus::Success)
        );
        assert_eq!(rx.with(|m| m[..5].to_vec()), b"hello");
        let mut done: Vec<_> = std::iter::from_fn(|| a.qp().cq().try_next()).collect();
        done.sort_by_key(|c| c.wr_id);
        assert_eq!(done.len(), 2);
        assert_eq!(
            (done[1].opcode, done[1].status),
            (WcOpcode::RdmaRead, WcStatus::Success)
        );
        assert_eq!(sink.with(|m| m.to_vec()), b"remote!");
        a.shutdown();
        b.shutdown();
    }

    #[test]
    fn markers_and_rejections_are_errors() {
        let opts = IwarpOptions::default();
        let params = ConnParams::default();
        let pd = SoftPd::new();
        let mut req = Vec::new();
        let mut f = mpa::build_request(2, true, 4, 4, None, b"");
        f.flags |= mpa::FLAG_M;
        f.encode(&mut req);
        assert!(SansIoConn::accept(&pd, QpCaps::default(), &opts, &params, 1448, &req).is_err());
        let (connecting, _) = SansIoConn::connect(&pd, QpCaps::default(), &opts, &params, 1448);
        let mut rej = Vec::new();
        mpa::reject_reply(2, b"no").encode(&mut rej);
        match connecting.on_reply(&rej) {
            Err(RdmaError::Rejected(pd)) => assert_eq!(pd, b"no"),
            other => panic!("{other:?}"),
        }
    }
}
