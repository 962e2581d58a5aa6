//! Listening sockets and the accept loop.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smbx_config::Config;
use smbx_transport::soft::{Options as IwarpOptions, SocketSetup};
use smbx_transport::verbs::{DirectListener, ProviderChoice};
use smbx_transport::{DirectConfig, SocketOptions};
use tokio::net::{TcpListener, TcpStream};

use crate::shutdown::{CLOSE_GRACE, DRAIN_TIMEOUT};
use crate::state::ServerState;

/// A bound server, ready to run.
pub struct Server {
    state: Arc<ServerState>,
    listeners: Vec<TcpListener>,
    direct: Vec<DirectListener>,
}

/// The addresses to bind: each configured interface address when
/// `bind interfaces only` is set, otherwise the wildcard address, on every port.
pub fn bind_addresses(config: &Config) -> Vec<SocketAddr> {
    let g = &config.global;
    let ports: Vec<u16> = if g.smb_ports.is_empty() {
        vec![445]
    } else {
        g.smb_ports.clone()
    };
    let mut ips: Vec<SocketAddr> = Vec::new();
    if g.bind_interfaces_only && !g.interfaces.is_empty() {
        ips = interface_addresses(&g.interfaces, &smbx_transport::netif::local_addresses());
    }
    if ips.is_empty() {
        ips.push(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
    }
    ips.iter()
        .flat_map(|ip| {
            ports.iter().map(move |p| {
                let mut a = *ip;
                a.set_port(*p);
                a
            })
        })
        .collect()
}

/// The addresses `interfaces` names, as Samba binds them with `bind interfaces
/// only`: an address as written; an interface name or a network, the host's
/// addresses it selects (IPv6 ones with their scope). Entries that select
/// nothing are logged and skipped.
fn interface_addresses(
    entries: &[smbx_config::Interface],
    host: &[smbx_transport::netif::LocalAddress],
) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for e in entries {
        let found: Vec<SocketAddr> = match e.target {
            smbx_config::InterfaceTarget::Address(ip) => vec![SocketAddr::new(ip, 0)],
            _ => host
                .iter()
                .filter(|a| e.selects(&a.name, a.addr))
                .map(|a| match a.addr {
                    IpAddr::V6(v6) => std::net::SocketAddrV6::new(v6, 0, 0, a.scope).into(),
                    ip => SocketAddr::new(ip, 0),
                })
                .collect(),
        };
        if found.is_empty() {
            tracing::warn!(interface = %e, "interface selects no address of this host; skipping");
        }
        for a in found {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

/// The SMB Direct (soft-iWARP) addresses: the TCP listening addresses with
/// `smb direct port`, when `smb direct = yes` — only those of the `interfaces`
/// entries marked `capability=RDMA` when some are and `bind interfaces only` is set.
pub fn direct_addresses(config: &Config) -> Vec<SocketAddr> {
    let g = &config.global;
    if !g.smb_direct {
        return Vec::new();
    }
    // With `bind interfaces only`, entries marked `capability=RDMA` (if any) say
    // which interfaces are the RDMA ones: SMB Direct listens on those alone, so a
    // server can offer it on one link and plain TCP on the others (multichannel).
    let rdma: Vec<smbx_config::Interface> = g
        .interfaces
        .iter()
        .filter(|e| e.capability.is_some_and(|c| c.rdma))
        .cloned()
        .collect();
    let tcp = bind_addresses(config);
    let base = if g.bind_interfaces_only && !rdma.is_empty() {
        let ips = interface_addresses(&rdma, &smbx_transport::netif::local_addresses());
        tcp.into_iter()
            .filter(|a| ips.iter().any(|i| i.ip() == a.ip()))
            .collect()
    } else {
        tcp
    };
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in base {
        let d = SocketAddr::new(a.ip(), config.global.smb_direct_port);
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The transport's name for `smb direct provider`.
fn provider_choice(p: smbx_config::SmbDirectProvider) -> ProviderChoice {
    match p {
        smbx_config::SmbDirectProvider::Auto => ProviderChoice::Auto,
        smbx_config::SmbDirectProvider::Soft => ProviderChoice::Soft,
        smbx_config::SmbDirectProvider::Verbs => ProviderChoice::Verbs,
    }
}

/// Soft-iWARP's options from the configuration. An SMB Direct connection's socket gets
/// the `socket options` a TCP connection gets, read as each is accepted (keepalive;
/// NOTSENT_LOWAT, as its FPDUs queue unsent as a TCP connection's responses do).
fn iwarp_options(state: &Arc<ServerState>) -> IwarpOptions {
    let config = state.config();
    let state = Arc::downgrade(state);
    IwarpOptions {
        crc: config.global.smb_direct_crc,
        large_fpdus: config.global.smb_direct_large_fpdus,
        mss: Some(config.global.smb_direct_mss).filter(|&m| m != 0),
        socket_setup: Some(SocketSetup::new(move |fd| {
            let Some(state) = state.upgrade() else { return };
            if let Err(e) = socket_options(&state.config()).0.apply(&fd) {
                tracing::debug!(error = %e, "socket options not set on an SMB Direct socket");
            }
        })),
        ..IwarpOptions::default()
    }
}

impl Server {
    /// Builds server state and binds every listening address.
    pub async fn bind(config: Arc<Config>) -> io::Result<Server> {
        let state = Arc::new(ServerState::new(config)?);
        Self::bind_state(state).await
    }

    /// Binds with an explicit credential store instead of `passdb backend`.
    pub async fn bind_with_credentials(
        config: Arc<Config>,
        credentials: Arc<dyn smbx_security::auth::CredentialStore>,
    ) -> io::Result<Server> {
        Self::bind_state(Arc::new(ServerState::with_credentials(config, credentials))).await
    }

    async fn bind_state(state: Arc<ServerState>) -> io::Result<Server> {
        crate::memory::limit_arenas();
        let config = state.config();
        let addrs = bind_addresses(&config);
        let (sockopts, warnings) = socket_options(&config);
        for w in warnings {
            tracing::warn!("socket options: {w}; ignored");
        }
        // A value the system refuses is told once here, on a socket like the ones
        // accepted later.
        if let Ok(probe) = tokio::net::TcpSocket::new_v4() {
            if let Err(e) = sockopts.apply(&probe) {
                tracing::warn!("socket options: {e}");
            }
        }
        let mut listeners = Vec::new();
        for a in addrs {
            let l = TcpListener::bind(a)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {a}: {e}")))?;
            tracing::info!(addr = %l.local_addr()?, "listening");
            listeners.push(l);
        }
        let iwarp = iwarp_options(&state);
        let addrs = direct_addresses(&config);
        let direct = smbx_transport::verbs::bind(
            &addrs,
            provider_choice(config.global.smb_direct_provider),
            iwarp,
            smbx_transport::verbs::Options {
                busy_poll: config.global.smb_direct_poll,
                ..smbx_transport::verbs::Options::default()
            },
            DirectConfig {
                max_send_size: config.global.smb_direct_max_send_size,
                max_receive_size: config.global.smb_direct_max_receive_size,
                max_fragmented_size: config.global.smb_direct_max_fragmented_size,
                ..DirectConfig::default()
            },
        )
        .await
        .map_err(|e| io::Error::other(format!("cannot listen for SMB Direct on {addrs:?}: {e}")))?;
        for l in &direct {
            tracing::info!(addr = %l.local_addr(), provider = %l.describe(), "listening for SMB Direct");
        }
        state.set_direct_listening(direct.iter().map(|l| l.local_addr()).collect());
        Ok(Server {
            state,
            listeners,
            direct,
        })
    }

    /// The bound SMB Direct addresses.
    pub fn direct_addrs(&self) -> Vec<SocketAddr> {
        self.direct.iter().map(|l| l.local_addr()).collect()
    }

    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Server-wide state (tests and admin tooling).
    pub fn state(&self) -> Arc<ServerState> {
        self.state.clone()
    }

    /// Accepts connections forever (until an accept loop fails).
    pub async fn run(self) -> io::Result<()> {
        self.run_until(std::future::pending()).await
    }

    /// Accepts connections until `shutdown` resolves, then shuts down gracefully:
    /// stops accepting (every listener is closed), lets requests in flight finish
    /// for up to [`DRAIN_TIMEOUT`] (each connection stops reading new ones), closes
    /// the connections, and returns `Ok` once they are gone (or
    /// [`CLOSE_GRACE`] after the deadline). An accept loop that fails ends it with
    /// the error.
    pub async fn run_until(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> io::Result<()> {
        let slots = Slots {
            active: Arc::new(AtomicUsize::new(0)),
            max: self.state.config().global.max_connections as usize,
        };
        // Freed memory goes back to the system when the server goes quiet.
        let _trimmer = crate::memory::Trimmer::spawn();
        // The Prometheus endpoint (`metrics listen`; off by default) while the server runs.
        let _metrics = crate::metrics::Endpoint::start(&self.state).await?;
        let mut tasks = tokio::task::JoinSet::new();
        for l in self.listeners {
            tasks.spawn(accept_loop(l, self.state.clone(), slots.clone()));
        }
        for l in self.direct {
            tasks.spawn(direct_accept_loop(l, self.state.clone(), slots.clone()));
        }
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                r = tasks.join_next() => match r {
                    None => return Ok(()),
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => return Err(e),
                    Some(Err(e)) => return Err(io::Error::other(e)),
                },
            }
        }
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        self.state.shutdown.begin(deadline);
        // Dropping the accept loops closes their listeners.
        tasks.shutdown().await;
        let n = self.state.connections.len();
        tracing::info!(
            connections = n,
            "shutting down: no new connections; waiting for requests in flight"
        );
        if !wait_for_no_connections(&self.state, deadline).await {
            let left = self.state.live_connections();
            tracing::warn!(
                connections = left.len(),
                "requests still in flight after {} s; closing their connections",
                DRAIN_TIMEOUT.as_secs()
            );
            for c in left {
                c.close();
            }
            wait_for_no_connections(&self.state, deadline + CLOSE_GRACE).await;
        }
        tracing::info!("all connections closed");
        Ok(())
    }
}

/// Waits until no connection is left, or `deadline`; true if none is left.
async fn wait_for_no_connections(state: &ServerState, deadline: tokio::time::Instant) -> bool {
    // Checked every few milliseconds during a shutdown only; bounded by the deadline.
    const POLL: Duration = Duration::from_millis(20);
    loop {
        if state.connections.is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep_until((tokio::time::Instant::now() + POLL).min(deadline)).await;
    }
}

/// Live connections of every listener, against `max connections` (0: no limit).
#[derive(Clone)]
struct Slots {
    active: Arc<AtomicUsize>,
    max: usize,
}

/// One admitted connection; its slot is freed when it is dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Slots {
    /// A slot for a connection from `peer`, or `None` (logged) at the limit.
    fn admit(&self, peer: SocketAddr) -> Option<Slot> {
        if self.max > 0 && self.active.load(Ordering::Relaxed) >= self.max {
            tracing::warn!(%peer, max = self.max, "max connections reached; refusing");
            return None;
        }
        self.active.fetch_add(1, Ordering::Relaxed);
        Some(Slot(self.active.clone()))
    }
}

async fn accept_loop(l: TcpListener, state: Arc<ServerState>, slots: Slots) -> io::Result<()> {
    let mut acceptor = Acceptor::new();
    loop {
        let (stream, peer) = acceptor.accept(&l).await;
        let Some(slot) = slots.admit(peer) else {
            drop(stream);
            continue;
        };
        if let Err(e) = socket_options(&state.config()).0.apply(&stream) {
            tracing::debug!(%peer, error = %e, "socket options not set");
        }
        let state = state.clone();
        tokio::spawn(async move {
            let (tx, rx, writer) = crate::conn::tcp_link(&state, stream);
            let writer = tokio::spawn(writer);
            crate::conn::serve(state, tx, rx).await;
            // The writer ends once every sender (async completions hold the
            // connection) is gone.
            let _ = writer.await;
            drop(slot);
        });
    }
}

/// The options every accepted TCP connection gets: SO_KEEPALIVE (as smbd sets
/// it) and TCP_NOTSENT_LOWAT ([`NOTSENT_LOWAT`]), then `socket options`; and a
/// message per token of it not applied.
fn socket_options(config: &Config) -> (SocketOptions, Vec<String>) {
    let (user, warnings) = SocketOptions::parse(&config.global.socket_options);
    let base = SocketOptions {
        keepalive: Some(true),
        notsent_lowat: Some(NOTSENT_LOWAT),
        ..SocketOptions::default()
    };
    (base.overridden_by(&user), warnings)
}

/// Response bytes a TCP connection may hold queued but not yet sent (TCP_NOTSENT_LOWAT):
/// a client that reads more slowly than the server sends (large READs at a deep queue)
/// otherwise has the server copy up to a whole send buffer (4 MiB) of responses ahead per
/// connection, which sit in memory until the client's window opens, long out of the cache
/// by the time the client copies them, and its receive window closes again and again.
/// What is in flight is not limited (sent data does not count), so a long fat link still
/// fills. With 1 MiB, 512 KiB READs on 2 cores (loopback, same client, 3 alternated
/// rounds): at -t4 -o32 client and server CPU together 0.81-0.90x (the client's about
/// halved), the client's zero-window advertisements 862-3869 -> 52-136 per 4000 READs.
/// `socket options = TCP_NOTSENT_LOWAT=0` leaves the system's rule.
const NOTSENT_LOWAT: u32 = 1 << 20;

/// How long the accept loop waits after an accept failed for want of descriptors
/// or memory before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts TCP connections through descriptor exhaustion (EMFILE / ENFILE): a
/// spare descriptor is given up to accept and close the waiting connection (its
/// client hears at once instead of hanging in the backlog), then the loop waits
/// [`ACCEPT_BACKOFF`] instead of spinning on a listener that stays readable. A burst
/// of failures is logged once when it starts and once when it ends.
struct Acceptor {
    /// A descriptor held in reserve (`/dev/null`), released to accept-and-close.
    spare: Option<std::fs::File>,
    /// Failed accepts in the current burst (0: accepting normally).
    failures: u64,
}

impl Acceptor {
    fn new() -> Acceptor {
        Acceptor {
            spare: Self::open_spare(),
            failures: 0,
        }
    }

    fn open_spare() -> Option<std::fs::File> {
        std::fs::File::open("/dev/null").ok()
    }

    /// The next connection; failures are handled (and logged) here.
    async fn accept(&mut self, l: &TcpListener) -> (TcpStream, SocketAddr) {
        loop {
            let e = match l.accept().await {
                Ok(x) => {
                    if self.failures > 0 {
                        tracing::info!(failed = self.failures, "accepting connections again");
                        self.failures = 0;
                    }
                    if self.spare.is_none() {
                        self.spare = Self::open_spare();
                    }
                    return x;
                }
                Err(e) => e,
            };
            // A connection that went away before it was accepted: nothing is wrong.
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::Interrupted
            ) {
                continue;
            }
            if self.failures == 0 {
                tracing::warn!(
                    error = %e,
                    "accept failed; refusing new connections until it succeeds again"
                );
            }
            self.failures = self.failures.saturating_add(1);
            if out_of_descriptors(&e) && self.spare.take().is_some() {
                // The freed descriptor takes the waiting connection, which closes.
                if let Ok(Ok((s, peer))) =
                    tokio::time::timeout(Duration::from_millis(10), l.accept()).await
                {
                    tracing::debug!(%peer, "out of descriptors: connection closed");
                    drop(s);
                }
                self.spare = Self::open_spare();
            }
            tokio::time::sleep(ACCEPT_BACKOFF).await;
        }
    }
}

/// EMFILE (per process) or ENFILE (system-wide).
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Accepts SMB Direct connections: each is negotiated in its own task (a slow
/// or silent peer holds up nobody), then served like a TCP connection.
async fn direct_accept_loop(
    l: DirectListener,
    state: Arc<ServerState>,
    slots: Slots,
) -> io::Result<()> {
    // The TCP accepts happen in the provider's listener (smbx-rdma), which backs off
    // on its own failures; a failure here is logged once per burst.
    let mut failures = 0u64;
    loop {
        let incoming = match l.accept().await {
            Ok(x) => {
                if failures > 0 {
                    tracing::info!(failed = failures, "accepting SMB Direct connections again");
                    failures = 0;
                }
                x
            }
            Err(e) => {
                if failures == 0 {
                    tracing::warn!(error = %e, "smb direct accept failed");
                }
                failures = failures.saturating_add(1);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let peer = incoming.peer_addr();
        let Some(slot) = slots.admit(peer) else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            // The connection's driver (soft-iWARP's socket I/O, the SMB Direct
            // timers) runs in this task beside the read loop, polled also while
            // the read loop awaits a request's handling, and their wakes of each
            // other are taken in the same poll (`together`): a request and its
            // response cross no task boundary. It ends once the link has closed,
            // which the read loop's end does. 64 KiB WRITEs at queue depth 8, one
            // binary alternating with the driver spawned: server futex calls per
            // WRITE 0.01 against 0.29-0.31, context switches 0.39-0.47 against
            // 0.50-0.59, server CPU per WRITE lower in 3 of 3 pairs; tokio::join!
            // instead of `together` woke the task at every hand-over (futex 0.6
            // per WRITE, 1.9 per 4 KiB READ at depth 1).
            match incoming.negotiate_driven().await {
                Ok((link, driver)) => {
                    // Messages are posted on the link as they are sent: no writer.
                    let (tx, rx) = smbx_transport::link::direct(link);
                    let serve = crate::conn::serve(state, tx, rx);
                    match driver {
                        Some(driver) => smbx_task::together(serve, driver).await,
                        None => serve.await,
                    }
                }
                Err(e) => tracing::debug!(%peer, error = %e, "smb direct negotiation failed"),
            }
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_bound_their_unsent_responses_unless_configured() {
        let (o, w) = socket_options(&Config::default());
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.keepalive, Some(true));
        assert_eq!(o.notsent_lowat, Some(NOTSENT_LOWAT));
        let mut c = Config::default();
        c.global.socket_options = "TCP_NOTSENT_LOWAT=0".into();
        assert_eq!(socket_options(&c).0.notsent_lowat, Some(0));
    }

    /// A server on 127.0.0.1 with SMB Direct over soft-iWARP, on free ports; its
    /// SMB Direct address.
    async fn direct_server() -> (Server, SocketAddr) {
        let mut c = Config::default();
        c.global.smb_ports = vec![0];
        c.global.interfaces = vec!["127.0.0.1".parse().unwrap()];
        c.global.bind_interfaces_only = true;
        c.global.smb_direct = true;
        c.global.smb_direct_port = 0;
        c.global.smb_direct_provider = smbx_config::SmbDirectProvider::Soft;
        let server = Server::bind(Arc::new(c)).await.expect("bind");
        let addr = server.direct_addrs()[0];
        (server, addr)
    }

    /// A client's SMB Direct link to `addr`, once the server has registered the
    /// connection (its read loop runs).
    async fn direct_client(
        state: &ServerState,
        addr: SocketAddr,
    ) -> Arc<dyn smbx_transport::DirectLink> {
        let link =
            smbx_transport::soft::connect(addr, IwarpOptions::default(), DirectConfig::default())
                .await
                .expect("smb direct connect");
        assert!(
            until(|| state.connections.len() == 1).await,
            "connection registered"
        );
        link
    }

    /// Whether `done` holds within 10 s, looked at every 10 ms.
    async fn until(done: impl Fn() -> bool) -> bool {
        for _ in 0..1000 {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        done()
    }

    /// The connection's driver runs in the task of its read loop: when the read
    /// loop ends first (a frame that is no SMB2 message), the connection is gone
    /// from the server and its socket closed (the client's receive fails).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_smb_direct_connection_closes_when_its_read_loop_ends() {
        let (server, addr) = direct_server().await;
        let state = server.state();
        tokio::spawn(server.run());
        let link = direct_client(&state, addr).await;
        link.send(b"\xfeSMB but not a message", None)
            .await
            .expect("sent");
        assert!(link.recv().await.is_err(), "the server closed it");
        assert!(until(|| state.connections.is_empty()).await);
    }

    /// A client that goes away ends its connection on the server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_smb_direct_connection_closes_when_the_client_goes_away() {
        let (server, addr) = direct_server().await;
        let state = server.state();
        tokio::spawn(server.run());
        let link = direct_client(&state, addr).await;
        drop(link);
        assert!(until(|| state.connections.is_empty()).await);
    }

    /// A shutdown closes an idle SMB Direct connection (its read loop, then its
    /// driver: the client sees the end) and the server's run returns.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shutdown_closes_smb_direct_connections() {
        let (server, addr) = direct_server().await;
        let state = server.state();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(server.run_until(async {
            let _ = stopped.await;
        }));
        let link = direct_client(&state, addr).await;
        stop.send(()).unwrap();
        assert!(link.recv().await.is_err(), "the server closed it");
        run.await.unwrap().expect("shut down");
        assert!(state.connections.is_empty());
    }

    /// An SMB Direct connection's socket gets the server's socket options, as a TCP
    /// connection's does (soft-iWARP hands each one to `socket_setup`).
    #[tokio::test]
    async fn smb_direct_sockets_get_the_socket_options() {
        let mut c = Config::default();
        c.global.socket_options = "TCP_NOTSENT_LOWAT=65536 TCP_KEEPIDLE=42".into();
        let state = Arc::new(ServerState::new(Arc::new(c)).unwrap());
        let setup = iwarp_options(&state).socket_setup.expect("a socket setup");
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        setup.run(std::os::fd::AsFd::as_fd(&sock));
        let got = SocketOptions::current(&sock).unwrap();
        assert_eq!(got.notsent_lowat, Some(65536));
        assert_eq!(got.keep_idle_secs, Some(42));
        assert_eq!(got.keepalive, Some(true));
    }

    #[test]
    fn addresses_from_config() {
        let mut c = Config::default();
        c.global.smb_ports = vec![445, 139];
        assert_eq!(bind_addresses(&c).len(), 2);
        c.global.bind_interfaces_only = true;
        c.global.interfaces =
            smbx_config::interfaces::parse_interfaces("127.0.0.1/8 \"127.0.0.1;speed=5\" eth9")
                .unwrap();
        c.global.smb_ports = vec![0];
        let a = bind_addresses(&c);
        assert_eq!(a, vec!["127.0.0.1:0".parse().unwrap()]);
    }

    #[test]
    fn interface_names_and_networks_bind_the_host_addresses() {
        let host = |name: &str, addr: &str, scope: u32| smbx_transport::netif::LocalAddress {
            name: name.into(),
            index: 2,
            addr: addr.parse().unwrap(),
            scope,
            loopback: false,
        };
        let host = vec![
            host("eth0", "192.168.1.20", 0),
            host("eth0", "fe80::1", 2),
            host("eth1", "10.0.0.5", 0),
        ];
        let entries = smbx_config::interfaces::parse_interfaces(
            "\"eth0;speed=10000000000,capability=RSS\" 10.0.0.0/8 10.0.0.5 eth9 192.0.2.7",
        )
        .unwrap();
        let got = interface_addresses(&entries, &host);
        let want: Vec<SocketAddr> = vec![
            "192.168.1.20:0".parse().unwrap(),
            std::net::SocketAddrV6::new("fe80::1".parse().unwrap(), 0, 0, 2).into(),
            "10.0.0.5:0".parse().unwrap(),
            "192.0.2.7:0".parse().unwrap(),
        ];
        assert_eq!(got, want);
    }

    /// smb.conf's SMB Direct sizes default to what an smbx client offers
    /// (`DirectConfig::default`), so two smbx ends negotiate them.
    #[test]
    fn smb_direct_sizes_default_to_the_clients() {
        let g = Config::default().global;
        let d = DirectConfig::default();
        assert_eq!(
            (
                g.smb_direct_max_send_size,
                g.smb_direct_max_receive_size,
                g.smb_direct_max_fragmented_size
            ),
            (d.max_send_size, d.max_receive_size, d.max_fragmented_size)
        );
    }
}
