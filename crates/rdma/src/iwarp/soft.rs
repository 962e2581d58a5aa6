//! The soft-iWARP [`Provider`]: TCP connect/listen, MPA setup, then the driver.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::engine::{Engine, EngineConfig};
use super::mpa::{self, MpaFrame, RequestInfo};
use super::mr::{SoftMr, SoftPd};
use super::qp::{QpShared, SoftQp};
use super::sansio::{open_qp, responder_setup, InitiatorOutcome, InitiatorSetup};
use super::{driver, IwarpOptions};
use crate::error::{RdmaError, Result};
use crate::provider::{ConnectRequest, Connecting, Listener, Provider};
use crate::types::{ConnParams, PeerParams, QpCaps, MAX_PRIVATE_DATA};

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

/// The TCP MSS for FPDU sizing: the override, else the connection's segment size
/// ([`segment_size`] of its TCP_MAXSEG and advertised MSS; 1448 on Ethernet, about
/// 64 KiB on loopback, where one FPDU per segment means 45 times fewer FPDUs to
/// frame, place and complete).
fn mss_of(stream: &TcpStream, opts: &IwarpOptions) -> u32 {
    if let Some(m) = opts.mss {
        return m;
    }
    use crate::sock::get_option;
    use std::os::fd::AsFd;
    let fd = stream.as_fd();
    let mut v = [0u8; std::mem::size_of::<libc::c_int>()];
    let maxseg = get_option(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, &mut v)
        .ok()
        .map(|_| libc::c_int::from_ne_bytes(v));
    // The kernel writes as much of struct tcp_info as it has; the rest stays zero.
    let mut info = [0u8; std::mem::size_of::<libc::tcp_info>()];
    let at = std::mem::offset_of!(libc::tcp_info, tcpi_advmss);
    let advertised = get_option(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info)
        .ok()
        .and_then(|_| info.get(at..at + 4)?.try_into().ok())
        .map(u32::from_ne_bytes);
    segment_size(maxseg.and_then(|v| u32::try_from(v).ok()), advertised)
}

/// TCP_MAXSEG beyond which it is taken for Linux's half-window bound rather than the
/// path's segment size (above any Ethernet jumbo frame's 8948).
const BOUNDED_MAXSEG: u32 = 16 * 1024;

/// The TCP option bytes a segment carries besides its header (timestamps).
const TCP_OPTIONS: u32 = 12;

/// The segment size FPDUs are sized for, from a new connection's TCP_MAXSEG and the
/// MSS it advertised (`tcpi_advmss`, from its route's MTU). Linux bounds TCP_MAXSEG
/// to half the largest window the peer has offered so far: right after the handshake
/// on loopback that is 32 KiB while the segments soon carry ~64 KiB, and 32 KiB
/// FPDUs made twice the FPDUs (reads, placements, completions) of what the path
/// carries (a 512 KiB RDMA Read took 16 reads). A TCP_MAXSEG above any Ethernet
/// frame's is taken for that bound: the advertised MSS less the timestamp option,
/// when larger (both ends of such a path, loopback or a 64 KiB veth, share the MTU).
/// Below, TCP_MAXSEG as it is; 1448 when unknown.
fn segment_size(maxseg: Option<u32>, advertised: Option<u32>) -> u32 {
    match maxseg {
        Some(m) if m > BOUNDED_MAXSEG => {
            let path = advertised.map_or(0, |a| a.saturating_sub(TCP_OPTIONS));
            m.max(path).min(65536)
        }
        Some(m) if m >= 536 => m,
        _ => 1448,
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

/// Gives a connection's socket what `opts` asks before its driver starts.
fn tune(stream: &TcpStream, opts: &IwarpOptions) {
    if let Some(setup) = &opts.socket_setup {
        setup.run(std::os::fd::AsFd::as_fd(stream));
    }
}

fn start(
    stream: TcpStream,
    shared: Arc<QpShared>,
    cfg: EngineConfig,
    peer: PeerParams,
    leftover: Vec<u8>,
    initiator: bool,
    opts: &IwarpOptions,
) {
    tune(&stream, opts);
    open_qp(&shared, &cfg, peer);
    {
        let mut g = shared.lock();
        g.local = stream.local_addr().ok();
        g.remote = stream.peer_addr().ok();
    }
    let eng = Engine::new(shared.clone(), cfg);
    let run = driver::run(stream, eng, shared.clone(), leftover, initiator);
    let mut slot = shared.driver_slot();
    if slot.hold {
        // The consumer polls it in its own task (QueuePair::take_driver).
        slot.held = Some(Box::pin(run));
    } else {
        drop(slot);
        tokio::spawn(run);
    }
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
        let (setup, req) = InitiatorSetup::new(&opts, &params);
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
        match setup.on_reply(&rep, mss_of(&stream, &opts))? {
            InitiatorOutcome::Rejected(pd) => {
                let _ = stream.shutdown().await;
                qp.shared()
                    .set_closed(crate::types::CloseReason::PeerDisconnect);
                qp.shared().cq.close();
                Err(RdmaError::Rejected(pd))
            }
            InitiatorOutcome::Accepted(cfg, peer) => {
                start(
                    stream,
                    qp.shared().clone(),
                    cfg,
                    peer.clone(),
                    leftover,
                    true,
                    &opts,
                );
                Ok((qp, peer))
            }
        }
    }
}

/// Most TCP connections whose MPA Request is still awaited, per listener;
/// beyond it new connections are closed at once.
const MAX_PENDING_HANDSHAKES: usize = 256;

/// A soft-iWARP listener. A background task accepts TCP connections and reads
/// each one's MPA Request in a task of its own (bounded by the handshake
/// timeout), so a silent or slow peer holds up nobody else's connection setup.
#[derive(Debug)]
pub struct SoftListener {
    requests: tokio::sync::Mutex<tokio::sync::mpsc::Receiver<SoftConnectRequest>>,
    acceptor: tokio::task::JoinHandle<()>,
    local: SocketAddr,
}

impl Drop for SoftListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

/// Accepts TCP connections forever, handing each to [`read_request`].
async fn accept_loop(
    tcp: TcpListener,
    caps: QpCaps,
    opts: Arc<IwarpOptions>,
    tx: tokio::sync::mpsc::Sender<SoftConnectRequest>,
) {
    let pending = Arc::new(tokio::sync::Semaphore::new(MAX_PENDING_HANDSHAKES));
    loop {
        let (stream, peer_addr) = match tcp.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!("iwarp: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            tracing::debug!(%peer_addr, "iwarp: too many pending MPA handshakes; closing");
            continue;
        };
        let (opts, tx) = (opts.clone(), tx.clone());
        tokio::spawn(async move {
            if let Some(req) = read_request(stream, peer_addr, caps, opts).await {
                // The listener is gone when this fails: the request drops.
                let _ = tx.send(req).await;
            }
            drop(permit);
        });
    }
}

/// Reads and checks one connection's MPA Request; `None` (connection
/// dropped) on timeout, a bad frame or a request for markers (rejected).
async fn read_request(
    mut stream: TcpStream,
    peer_addr: SocketAddr,
    caps: QpCaps,
    opts: Arc<IwarpOptions>,
) -> Option<SoftConnectRequest> {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let got = tokio::time::timeout(
        opts.handshake_timeout,
        read_frame(&mut stream, &mut buf, false),
    )
    .await;
    let (req, leftover) = match got {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            tracing::debug!(%peer_addr, "iwarp: bad MPA request: {e}");
            return None;
        }
        Err(_) => {
            tracing::debug!(%peer_addr, "iwarp: MPA request timed out");
            return None;
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
        return None;
    }
    let peer = PeerParams {
        private_data: info.private_data.clone(),
        ird: info.ird,
        ord: info.ord,
    };
    // A domain of its own: this peer can name no other connection's memory.
    let pd = SoftPd::new();
    let qp = SoftQp::new(QpShared::new(pd.clone(), caps));
    Some(SoftConnectRequest {
        stream,
        pd,
        info,
        peer,
        peer_addr,
        qp,
        opts,
        leftover,
    })
}

/// A received MPA Request, not yet answered.
#[derive(Debug)]
pub struct SoftConnectRequest {
    stream: TcpStream,
    info: RequestInfo,
    peer: PeerParams,
    peer_addr: SocketAddr,
    pd: SoftPd,
    qp: SoftQp,
    opts: Arc<IwarpOptions>,
    leftover: Vec<u8>,
}

impl Listener for SoftListener {
    type Qp = SoftQp;
    type Pd = SoftPd;
    type Request = SoftConnectRequest;

    async fn accept(&self) -> Result<SoftConnectRequest> {
        self.requests
            .lock()
            .await
            .recv()
            .await
            .ok_or(RdmaError::InvalidRequest("listener closed"))
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl ConnectRequest for SoftConnectRequest {
    type Qp = SoftQp;
    type Pd = SoftPd;
    fn peer(&self) -> &PeerParams {
        &self.peer
    }
    fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }
    fn qp(&self) -> &SoftQp {
        &self.qp
    }
    fn pd(&self) -> &SoftPd {
        &self.pd
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
        let (reply, cfg) = responder_setup(&info, &opts, &params, mss_of(&stream, &opts));
        let mut b = Vec::new();
        reply.encode(&mut b);
        stream.write_all(&b).await?;
        start(
            stream,
            qp.shared().clone(),
            cfg,
            peer,
            leftover,
            false,
            &opts,
        );
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

    async fn listen(&self, addr: SocketAddr, caps: QpCaps) -> Result<SoftListener> {
        let tcp = TcpListener::bind(addr).await?;
        let local = tcp.local_addr()?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio::spawn(accept_loop(tcp, caps, self.opts.clone(), tx));
        Ok(SoftListener {
            requests: tokio::sync::Mutex::new(rx),
            acceptor,
            local,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iwarp::SocketSetup;

    /// Ethernet's and jumbo frames' TCP_MAXSEG stand as they are; a loopback
    /// connection's half-window bound (32 KiB) gives way to the MSS it advertised
    /// less the timestamp option; nonsense falls back to Ethernet's.
    #[test]
    fn segment_size_sees_past_the_half_window_bound() {
        assert_eq!(segment_size(Some(1448), Some(1460)), 1448);
        assert_eq!(segment_size(Some(8948), Some(8960)), 8948);
        assert_eq!(segment_size(Some(32741), Some(65483)), 65471);
        assert_eq!(segment_size(Some(65483), Some(65483)), 65483);
        assert_eq!(segment_size(Some(32741), None), 32741);
        assert_eq!(segment_size(Some(32768), Some(1 << 20)), 65536);
        assert_eq!(segment_size(Some(100), Some(65483)), 1448);
        assert_eq!(segment_size(None, Some(65483)), 1448);
    }

    /// On loopback (MTU 64 KiB) a new connection's FPDUs are sized for ~64 KiB
    /// segments, not the 32 KiB its TCP_MAXSEG says right after the handshake.
    #[tokio::test]
    async fn loopback_connections_get_64k_segments() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, a) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (c, (a, _)) = (c.unwrap(), a.unwrap());
        let opts = IwarpOptions::default();
        for s in [&c, &a] {
            let mss = mss_of(s, &opts);
            assert!(mss > 60_000, "loopback segment size {mss}");
        }
        let fixed = IwarpOptions {
            mss: Some(1448),
            ..IwarpOptions::default()
        };
        assert_eq!(mss_of(&c, &fixed), 1448);
    }

    /// A connection's socket is handed to the options' socket setup (the server's
    /// `socket options`), and to nothing without one.
    #[tokio::test]
    async fn the_socket_setup_is_given_the_connections_socket() {
        use std::os::fd::AsRawFd;
        use std::sync::Mutex;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, a) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (c, (a, _)) = (c.unwrap(), a.unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let opts = IwarpOptions {
            socket_setup: Some(SocketSetup::new({
                let seen = seen.clone();
                move |fd| seen.lock().unwrap().push(fd.as_raw_fd())
            })),
            ..IwarpOptions::default()
        };
        tune(&a, &IwarpOptions::default());
        tune(&c, &opts);
        assert_eq!(*seen.lock().unwrap(), vec![c.as_raw_fd()]);
    }
}
