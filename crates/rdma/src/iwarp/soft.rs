//! The soft-iWARP [`Provider`]: TCP connect/listen, MPA setup, then the driver.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::engine::{max_ulpdu_for_mss, Engine, EngineConfig};
use super::mpa::{self, MpaFrame, ReplyOutcome, RequestInfo};
use super::mr::{SoftMr, SoftPd};
use super::qp::{QpShared, SoftQp};
use super::{driver, IwarpOptions};
use crate::error::{RdmaError, Result};
use crate::provider::{ConnectRequest, Connecting, Listener, Provider};
use crate::types::{ConnParams, PeerParams, QpCaps, QpState, MAX_PRIVATE_DATA};

/// The soft-iWARP provider. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct SoftIwarp {
    opts: Arc<IwarpOptions>,
}

impl SoftIwarp {
    /// A provider with `opts`.
    pub fn new(opts: IwarpOptions) -> Self {
        SoftIwarp {
            opts: Arc::new(opts),
        }
    }
    /// The options in force.
    pub fn options(&self) -> &IwarpOptions {
        &self.opts
    }
}

/// The TCP MSS for FPDU sizing: the override, 1448 on loopback (whose MSS is
/// ~64 KiB and would not match what real networks carry), else TCP_MAXSEG.
fn mss_of(stream: &TcpStream, opts: &IwarpOptions) -> u32 {
    if let Some(m) = opts.mss {
        return m;
    }
    if stream
        .peer_addr()
        .map(|a| a.ip().is_loopback())
        .unwrap_or(true)
    {
        return 1448;
    }
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: fd is a live TCP socket owned by `stream`; v and len are valid
    // for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 && v >= 536 {
        v as u32
    } else {
        1448
    }
}

async fn read_frame(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    reply: bool,
) -> Result<(MpaFrame, Vec<u8>)> {
    loop {
        match MpaFrame::decode(buf, reply) {
            Ok(Some((f, n))) => return Ok((f, buf[n..].to_vec())),
            Ok(None) => {}
            Err(e) => return Err(RdmaError::Setup(e.to_string())),
        }
        let mut tmp = [0u8; 1024];
        let n = stream.read(&mut tmp).await?;
        if n == 0 {
            return Err(RdmaError::Setup(
                "connection closed during MPA setup".into(),
            ));
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn start(
    stream: TcpStream,
    shared: Arc<QpShared>,
    cfg: EngineConfig,
    peer: PeerParams,
    leftover: Vec<u8>,
) {
    {
        let mut g = shared.lock();
        g.state = QpState::Rts;
        g.peer = peer;
        g.ird = cfg.ird;
        g.ord = cfg.ord;
        g.local = stream.local_addr().ok();
        g.remote = stream.peer_addr().ok();
    }
    let eng = Engine::new(shared.clone(), cfg);
    tokio::spawn(driver::run(stream, eng, shared, leftover));
}

/// An active connection whose queue pair exists (TCP connected, MPA not yet sent).
#[derive(Debug)]
pub struct SoftConnecting {
    stream: TcpStream,
    qp: SoftQp,
    opts: Arc<IwarpOptions>,
}

impl Connecting for SoftConnecting {
    type Qp = SoftQp;
    fn qp(&self) -> &SoftQp {
        &self.qp
    }
    async fn connect(self, params: ConnParams) -> Result<(SoftQp, PeerParams)> {
        let SoftConnecting {
            mut stream,
            qp,
            opts,
        } = self;
        if params.private_data.len() > MAX_PRIVATE_DATA {
            return Err(RdmaError::InvalidRequest("private data too long"));
        }
        let rev = opts.mpa_revision.clamp(1, 2);
        let rtr = if rev == 2 { opts.rtr } else { None };
        let req = mpa::build_request(
            rev,
            opts.crc,
            params.ird,
            params.ord,
            rtr,
            &params.private_data,
        );
        let mut b = Vec::new();
        req.encode(&mut b);
        let fut = async {
            stream.write_all(&b).await?;
            let mut buf = Vec::new();
            read_frame(&mut stream, &mut buf, true).await
        };
        let (rep, leftover) = tokio::time::timeout(opts.handshake_timeout, fut)
            .await
            .map_err(|_| RdmaError::Setup("MPA reply timed out".into()))??;
        let our_ird = params.ird.min(mpa::IRD_ORD_MASK);
        let outcome = mpa::read_reply(&rep, rev, opts.crc, our_ird, rtr)
            .map_err(|e| RdmaError::Setup(e.to_string()))?;
        match outcome {
            ReplyOutcome::Rejected(pd) => {
                let _ = stream.shutdown().await;
                qp.shared()
                    .set_closed(crate::types::CloseReason::PeerDisconnect);
                qp.shared().cq.close();
                Err(RdmaError::Rejected(pd))
            }
            ReplyOutcome::Accepted {
                crc,
                peer_ird,
                peer_ord,
                rtr,
                private_data,
            } => {
                let enhanced = rep.enhanced();
                let ord = if enhanced {
                    params.ord.min(peer_ird)
                } else {
                    params.ord
                };
                let cfg = EngineConfig {
                    crc,
                    max_ulpdu: max_ulpdu_for_mss(mss_of(&stream, &opts)),
                    ird: our_ird,
                    ord,
                    send_rtr: rtr,
                    expect_rtr: None,
                };
                let peer = PeerParams {
                    private_data,
                    ird: peer_ird,
                    ord: peer_ord,
                };
                start(stream, qp.shared().clone(), cfg, peer.clone(), leftover);
                Ok((qp, peer))
            }
        }
    }
}

/// A soft-iWARP listener.
#[derive(Debug)]
pub struct SoftListener {
    tcp: TcpListener,
    pd: SoftPd,
    caps: QpCaps,
    opts: Arc<IwarpOptions>,
    local: SocketAddr,
}

/// A received MPA Request, not yet answered.
#[derive(Debug)]
pub struct SoftConnectRequest {
    stream: TcpStream,
    info: RequestInfo,
    peer: PeerParams,
    peer_addr: SocketAddr,
    qp: SoftQp,
    opts: Arc<IwarpOptions>,
    leftover: Vec<u8>,
}

impl Listener for SoftListener {
    type Qp = SoftQp;
    type Request = SoftConnectRequest;

    async fn accept(&self) -> Result<SoftConnectRequest> {
        loop {
            let (mut stream, peer_addr) = self.tcp.accept().await?;
            let _ = stream.set_nodelay(true);
            let mut buf = Vec::new();
            let got = tokio::time::timeout(
                self.opts.handshake_timeout,
                read_frame(&mut stream, &mut buf, false),
            )
            .await;
            let (req, leftover) = match got {
                Ok(Ok(x)) => x,
                Ok(Err(e)) => {
                    tracing::debug!(%peer_addr, "iwarp: bad MPA request: {e}");
                    continue;
                }
                Err(_) => {
                    tracing::debug!(%peer_addr, "iwarp: MPA request timed out");
                    continue;
                }
            };
            let info = RequestInfo::from_frame(&req);
            if info.markers {
                // Markers are never supported: reject.
                let mut b = Vec::new();
                mpa::reject_reply(info.revision, b"").encode(&mut b);
                let _ = stream.write_all(&b).await;
                let _ = stream.shutdown().await;
                tracing::debug!(%peer_addr, "iwarp: rejected MPA request asking for markers");
                continue;
            }
            let peer = PeerParams {
                private_data: info.private_data.clone(),
                ird: info.ird,
                ord: info.ord,
            };
            let qp = SoftQp::new(QpShared::new(self.pd.clone(), self.caps));
            return Ok(SoftConnectRequest {
                stream,
                info,
                peer,
                peer_addr,
                qp,
                opts: self.opts.clone(),
                leftover,
            });
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl ConnectRequest for SoftConnectRequest {
    type Qp = SoftQp;
    fn peer(&self) -> &PeerParams {
        &self.peer
    }
    fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }
    fn qp(&self) -> &SoftQp {
        &self.qp
    }
    async fn accept(self, params: ConnParams) -> Result<SoftQp> {
        let SoftConnectRequest {
            mut stream,
            info,
            peer,
            qp,
            opts,
            leftover,
            ..
        } = self;
        if params.private_data.len() > MAX_PRIVATE_DATA {
            return Err(RdmaError::InvalidRequest("private data too long"));
        }
        let acc = mpa::accept_request(
            &info,
            opts.crc,
            params.ird,
            params.ord,
            &params.private_data,
        );
        let mut b = Vec::new();
        acc.reply.encode(&mut b);
        stream.write_all(&b).await?;
        let cfg = EngineConfig {
            crc: acc.crc,
            max_ulpdu: max_ulpdu_for_mss(mss_of(&stream, &opts)),
            ird: acc.ird,
            ord: acc.ord,
            send_rtr: None,
            expect_rtr: acc.rtr,
        };
        start(stream, qp.shared().clone(), cfg, peer, leftover);
        Ok(qp)
    }
    async fn reject(self, private_data: &[u8]) -> Result<()> {
        let mut s = self.stream;
        let mut b = Vec::new();
        mpa::reject_reply(self.info.revision, private_data).encode(&mut b);
        s.write_all(&b).await?;
        s.shutdown().await?;
        self.qp
            .shared()
            .set_closed(crate::types::CloseReason::LocalDisconnect);
        self.qp.shared().cq.close();
        Ok(())
    }
}

impl Provider for SoftIwarp {
    type Mr = SoftMr;
    type Pd = SoftPd;
    type Qp = SoftQp;
    type Connecting = SoftConnecting;
    type Listener = SoftListener;

    fn alloc_pd(&self) -> Result<SoftPd> {
        Ok(SoftPd::new())
    }

    async fn connect(&self, pd: &SoftPd, addr: SocketAddr, caps: QpCaps) -> Result<SoftConnecting> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(SoftConnecting {
            stream,
            qp: SoftQp::new(QpShared::new(pd.clone(), caps)),
            opts: self.opts.clone(),
        })
    }

    async fn listen(&self, pd: &SoftPd, addr: SocketAddr, caps: QpCaps) -> Result<SoftListener> {
        let tcp = TcpListener::bind(addr).await?;
        let local = tcp.local_addr()?;
        Ok(SoftListener {
            tcp,
            pd: pd.clone(),
            caps,
            opts: self.opts.clone(),
            local,
        })
    }
}
