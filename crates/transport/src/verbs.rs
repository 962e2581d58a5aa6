//! SMB Direct over rdma-core verbs (RDMA NICs, the kernel's siw and rxe), and
//! the choice between it and soft-iWARP per address: listeners for the
//! server ([`bind`]) and connections for the client ([`connect`]).
//!
//! [MS-SMBD] 2.1: iWARP devices are reached on port 5445, InfiniBand and RoCE
//! on 445 in the RDMA CM port space (apart from TCP's 445).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use smbx_direct::adapter::qp_caps;
use smbx_direct::{Config, DirectError, SmbDirectConnection};
use smbx_rdma::verbs::{self, Transport, Verbs, VerbsConnectRequest, VerbsListener, VerbsOptions};
use smbx_rdma::{ConnectRequest, Driver, Listener, Provider};

use crate::direct::{DirectLink, Link};
use crate::netif::local_addresses;
use crate::soft::{self, SoftDirectListener};

pub use smbx_rdma::verbs::VerbsOptions as Options;

/// Which provider carries SMB Direct (`smb direct provider`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProviderChoice {
    /// Verbs where the address has an RDMA device, soft-iWARP elsewhere.
    #[default]
    Auto,
    /// Soft-iWARP only.
    Soft,
    /// Verbs only.
    Verbs,
}

impl ProviderChoice {
    /// Parses `auto`, `soft` or `verbs`.
    pub fn parse(s: &str) -> Option<ProviderChoice> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(ProviderChoice::Auto),
            "soft" => Some(ProviderChoice::Soft),
            "verbs" => Some(ProviderChoice::Verbs),
            _ => None,
        }
    }

    /// The client's choice: `$SMBX_RDMA_PROVIDER` (`auto`, `soft`, `verbs`),
    /// else `Auto`.
    pub fn from_env() -> ProviderChoice {
        std::env::var("SMBX_RDMA_PROVIDER")
            .ok()
            .and_then(|v| ProviderChoice::parse(&v))
            .unwrap_or_default()
    }
}

/// A local address that has an RDMA device, and that device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaAddress {
    /// The address.
    pub ip: IpAddr,
    /// The interface it is on.
    pub netdev: String,
    /// The device's name.
    pub device: String,
    /// The device's transport.
    pub transport: Transport,
    /// Whether a port of the device is active.
    pub active: bool,
}

/// Every local address whose interface has an RDMA device (from sysfs and
/// getifaddrs; empty without devices).
pub fn rdma_addresses() -> Vec<RdmaAddress> {
    let devs = verbs::devices();
    if devs.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for a in local_addresses() {
        for d in &devs {
            if d.netdevs.iter().any(|n| n == &a.name) {
                out.push(RdmaAddress {
                    ip: a.addr,
                    netdev: a.name.clone(),
                    device: d.name.clone(),
                    transport: d.transport,
                    active: d.is_active(),
                });
            }
        }
    }
    out
}

pub use smbx_direct::pools::{PoolError, Pools};
pub use smbx_rdma::verbs::{DeviceLimits, Probe};

/// What SMB Direct uses on one device: its limits, what a connection's queue
/// pair gets there (the sizes SMB Direct asks for with `config`), and the
/// pools sized from that ([`smbx_direct::pools::size`]), or why none fits.
#[derive(Clone, Debug)]
pub struct DeviceUse {
    /// The device's limits and its queue pair's grant.
    pub probe: Probe,
    /// Receive credits, send buffers and RDMA work requests per connection.
    pub pools: Result<Pools, PoolError>,
}

/// Probes the device `name` as a connection with `config` and `opts` would
/// use it (`smbx rdma`).
pub fn device_use(
    name: &str,
    config: &Config,
    opts: &VerbsOptions,
) -> Result<DeviceUse, DirectError> {
    let probe = verbs::probe(name, qp_caps(config), opts)?;
    let pools = smbx_direct::pools::size(config, Some(&probe.granted));
    Ok(DeviceUse { probe, pools })
}

/// The RDMA device behind `ip`, if any (the first one listed).
pub fn rdma_address_for(ip: IpAddr) -> Option<RdmaAddress> {
    rdma_addresses().into_iter().find(|a| a.ip == ip)
}

/// One SMB Direct listener of either provider.
pub enum DirectListener {
    /// Soft-iWARP.
    Soft(SoftDirectListener),
    /// rdma-core verbs.
    Verbs(VerbsDirectListener),
}

/// A connection request of either provider; [`Incoming::negotiate`] accepts it.
pub enum Incoming {
    /// Soft-iWARP.
    Soft(soft::Incoming),
    /// Verbs.
    Verbs(VerbsIncoming),
}

impl DirectListener {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        match self {
            DirectListener::Soft(l) => l.local_addr(),
            DirectListener::Verbs(l) => l.local_addr(),
        }
    }
    /// `soft-iWARP` or `verbs (DEVICE, TRANSPORT)`.
    pub fn describe(&self) -> String {
        match self {
            DirectListener::Soft(_) => "soft-iWARP".into(),
            DirectListener::Verbs(l) => format!("verbs ({})", l.what),
        }
    }
    /// The next connection request.
    pub async fn accept(&self) -> Result<Incoming, DirectError> {
        match self {
            DirectListener::Soft(l) => l.accept().await.map(Incoming::Soft),
            DirectListener::Verbs(l) => l.accept().await.map(Incoming::Verbs),
        }
    }
}

impl Incoming {
    /// The initiator's address.
    pub fn peer_addr(&self) -> SocketAddr {
        match self {
            Incoming::Soft(i) => i.peer_addr(),
            Incoming::Verbs(i) => i.request.peer_addr(),
        }
    }
    /// Accepts and negotiates.
    pub async fn negotiate(self) -> Result<Arc<dyn DirectLink>, DirectError> {
        match self {
            Incoming::Soft(i) => i.negotiate().await,
            Incoming::Verbs(i) => i.negotiate().await,
        }
    }

    /// Accepts and negotiates; the connection's driver comes with it where the
    /// provider hands it out (soft-iWARP: [`soft::Incoming::negotiate_driven`]),
    /// for the caller to poll in the task that serves the link until it ends.
    /// `None` with verbs, whose driver runs on its own.
    pub async fn negotiate_driven(
        self,
    ) -> Result<(Arc<dyn DirectLink>, Option<Driver>), DirectError> {
        match self {
            Incoming::Soft(i) => i.negotiate_driven().await.map(|(l, d)| (l, Some(d))),
            Incoming::Verbs(i) => i.negotiate().await.map(|l| (l, None)),
        }
    }
}

/// A listening verbs endpoint for SMB Direct. When its device is removed
/// (`rdma link delete`, a driver unbound) the listener is closed, which frees
/// what it held on the device, and it listens on the same address again once
/// an RDMA device with an active port has that address (`rdma link add`),
/// looking every [`RELISTEN_INTERVAL`].
pub struct VerbsDirectListener {
    listener: tokio::sync::Mutex<Option<VerbsListener>>,
    local: SocketAddr,
    opts: VerbsOptions,
    config: Config,
    what: String,
}

/// How often a listener whose device was removed looks for a device with its
/// address again.
pub const RELISTEN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// A verbs connection request.
pub struct VerbsIncoming {
    request: VerbsConnectRequest,
    config: Config,
}

impl VerbsDirectListener {
    /// Listens on `addr` through rdma-core.
    pub async fn bind(
        addr: SocketAddr,
        opts: VerbsOptions,
        config: Config,
        what: String,
    ) -> Result<Self, DirectError> {
        config.validate()?;
        let listener = Verbs::new(opts.clone())
            .listen(addr, qp_caps(&config))
            .await?;
        Ok(VerbsDirectListener {
            local: listener.local_addr(),
            listener: tokio::sync::Mutex::new(Some(listener)),
            opts,
            config,
            what,
        })
    }
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
    /// The next connection request. While the listener's device is gone this
    /// waits, looking for a device with the address every
    /// [`RELISTEN_INTERVAL`] and listening again on it.
    pub async fn accept(&self) -> Result<VerbsIncoming, DirectError> {
        let mut slot = self.listener.lock().await;
        let mut tries = 0u64;
        loop {
            let Some(l) = slot.as_ref() else {
                tokio::time::sleep(RELISTEN_INTERVAL).await;
                // librdmacm looks at the devices again, in case the removed
                // one was still listed when its removal was reported.
                verbs::refresh_devices();
                *slot = self.relisten(&mut tries).await;
                continue;
            };
            match l.accept().await {
                Ok(request) => {
                    return Ok(VerbsIncoming {
                        request,
                        config: self.config.clone(),
                    })
                }
                Err(e) if l.device_removed() => {
                    // Dropping the listener destroys its CM id: with the
                    // connections on the device (closed on their own
                    // DEVICE_REMOVAL), that lets librdmacm close the device.
                    *slot = None;
                    tracing::warn!(addr = %self.local, device = %self.what, error = %e,
                        "the RDMA device under the SMB Direct listener was removed: listener closed; \
                         listening again once an RDMA device with an active port has the address");
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// One attempt to listen again on the address of a listener whose device
    /// was removed: made only once a device with an active port has the
    /// address. A failure is logged at the first attempt and every 30th.
    async fn relisten(&self, tries: &mut u64) -> Option<VerbsListener> {
        let dev = rdma_address_for(self.local.ip()).filter(|a| a.active)?;
        *tries += 1;
        match Verbs::new(self.opts.clone())
            .listen(self.local, qp_caps(&self.config))
            .await
        {
            Ok(l) => {
                tracing::info!(addr = %self.local, device = %dev.device, netdev = %dev.netdev,
                    "an RDMA device has the address again: listening for SMB Direct again");
                *tries = 0;
                Some(l)
            }
            Err(e) => {
                if *tries % 30 == 1 {
                    tracing::warn!(addr = %self.local, device = %dev.device, error = %e, tries = *tries,
                        "an RDMA device has the address again, but listening there failed; trying again");
                }
                None
            }
        }
    }
}

impl VerbsIncoming {
    /// Accepts and negotiates.
    pub async fn negotiate(self) -> Result<Arc<dyn DirectLink>, DirectError> {
        let pd = self.request.pd().clone();
        let conn = SmbDirectConnection::accept(self.request, self.config).await?;
        Ok(Arc::new(Link::<Verbs>::new(conn, pd)))
    }
}

/// One listener to open: where, and through which provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Planned {
    /// Soft-iWARP on this address.
    Soft(SocketAddr),
    /// Verbs on this address (the device's name and transport).
    Verbs(SocketAddr, String, Transport),
}

/// Plans SMB Direct listeners for the configured addresses `addrs` (the TCP
/// addresses with `smb direct port`) from the RDMA addresses `rdma`: verbs on
/// each address with an active device (port 5445, or the configured one, for
/// iWARP; 445 for InfiniBand and RoCE), soft-iWARP on the rest under `Auto`.
/// Also returns, for the operator, why an address gets no verbs listener.
pub fn plan(
    addrs: &[SocketAddr],
    choice: ProviderChoice,
    rdma: &[RdmaAddress],
    rdma_core: Result<(), String>,
) -> (Vec<Planned>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    if choice == ProviderChoice::Soft {
        return (addrs.iter().copied().map(Planned::Soft).collect(), notes);
    }
    let port_for = |t: Transport, configured: u16| match t {
        Transport::Iwarp => configured,
        _ => 445,
    };
    let usable: Vec<&RdmaAddress> = match &rdma_core {
        Err(e) => {
            if !rdma.is_empty() || choice == ProviderChoice::Verbs {
                notes.push(format!("no verbs SMB Direct: {e}"));
            }
            Vec::new()
        }
        Ok(()) => {
            for a in rdma.iter().filter(|a| !a.active) {
                notes.push(format!(
                    "RDMA device {} on {} ({}) has no active port: check the cable or `rdma link show`",
                    a.device, a.netdev, a.ip
                ));
            }
            rdma.iter().filter(|a| a.active).collect()
        }
    };
    if choice == ProviderChoice::Verbs && rdma.is_empty() {
        notes.push(
            "no RDMA device: install the NIC's driver, or `rdma link add NAME type siw|rxe netdev IFACE` for a software device".into(),
        );
    }
    for a in addrs {
        if a.ip().is_unspecified() {
            let mut any = false;
            for r in &usable {
                if r.ip.is_ipv4() != a.ip().is_ipv4() {
                    continue;
                }
                let p = Planned::Verbs(
                    SocketAddr::new(r.ip, port_for(r.transport, a.port())),
                    r.device.clone(),
                    r.transport,
                );
                if !out.contains(&p) {
                    out.push(p);
                }
                any = true;
            }
            if choice == ProviderChoice::Auto {
                if !any {
                    out.push(Planned::Soft(*a));
                } else {
                    // Soft-iWARP on the addresses without a device.
                    for l in local_addresses() {
                        if l.addr.is_ipv4() != a.ip().is_ipv4()
                            || rdma.iter().any(|r| r.ip == l.addr)
                        {
                            continue;
                        }
                        let p = Planned::Soft(SocketAddr::new(l.addr, a.port()));
                        if !out.contains(&p) {
                            out.push(p);
                        }
                    }
                }
            }
        } else if let Some(r) = usable.iter().find(|r| r.ip == a.ip()) {
            out.push(Planned::Verbs(
                SocketAddr::new(r.ip, port_for(r.transport, a.port())),
                r.device.clone(),
                r.transport,
            ));
        } else if choice == ProviderChoice::Auto {
            out.push(Planned::Soft(*a));
        } else {
            notes.push(format!("{a} has no RDMA device: no SMB Direct there"));
        }
    }
    (out, notes)
}

/// Opens the listeners [`plan`] chooses. A verbs listener that cannot be
/// opened is reported (and, under `Auto`, replaced by soft-iWARP), so that the
/// server keeps serving; a soft-iWARP one that cannot is an error.
pub async fn bind(
    addrs: &[SocketAddr],
    choice: ProviderChoice,
    iwarp: soft::Options,
    verbs_opts: VerbsOptions,
    config: Config,
) -> Result<Vec<DirectListener>, DirectError> {
    let rdma = if choice == ProviderChoice::Soft {
        Vec::new()
    } else {
        rdma_addresses()
    };
    let core = if rdma.is_empty() && choice == ProviderChoice::Auto {
        Ok(())
    } else {
        Verbs::available()
    };
    let (planned, notes) = plan(addrs, choice, &rdma, core);
    for n in notes {
        tracing::warn!("{n}");
    }
    let mut out = Vec::new();
    for p in planned {
        match p {
            Planned::Soft(a) => {
                let l = SoftDirectListener::bind(a, iwarp.clone(), config.clone()).await?;
                out.push(DirectListener::Soft(l));
            }
            Planned::Verbs(a, dev, t) => {
                let what = format!("{dev}, {}", t.name());
                match VerbsDirectListener::bind(a, verbs_opts.clone(), config.clone(), what).await {
                    Ok(l) => out.push(DirectListener::Verbs(l)),
                    Err(e) => {
                        tracing::warn!(addr = %a, device = %dev, error = %e,
                            "cannot listen for SMB Direct through rdma-core");
                        if choice == ProviderChoice::Auto && t == Transport::Iwarp {
                            tracing::warn!(addr = %a, "using soft-iWARP there instead");
                            let l =
                                SoftDirectListener::bind(a, iwarp.clone(), config.clone()).await?;
                            out.push(DirectListener::Soft(l));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Whether a connection from here to `peer` would leave through an interface
/// with an active RDMA device (the route's source address, found with a UDP
/// socket that sends nothing).
pub fn route_has_rdma(peer: SocketAddr) -> Option<RdmaAddress> {
    let bind: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect(peer).ok()?;
    let src = s.local_addr().ok()?.ip();
    rdma_address_for(src).filter(|a| a.active)
}

/// Connects to an SMB Direct server: through verbs when `choice` allows and
/// the route to `addr` has an RDMA device, else soft-iWARP. On verbs, a
/// server that refuses port 5445 is tried on 445 (InfiniBand and RoCE), as
/// the Linux client does. The connection's driver comes with it where the
/// provider hands it out (soft-iWARP: [`soft::connect_driven`]), for the caller
/// to poll in the task that uses the link until it ends; `None` with verbs,
/// whose driver runs on its own.
pub async fn connect(
    addr: SocketAddr,
    choice: ProviderChoice,
    iwarp: soft::Options,
    verbs_opts: VerbsOptions,
    config: Config,
) -> Result<(Arc<dyn DirectLink>, Option<Driver>), DirectError> {
    let dev = match choice {
        ProviderChoice::Soft => None,
        ProviderChoice::Auto => route_has_rdma(addr).filter(|_| Verbs::available().is_ok()),
        ProviderChoice::Verbs => {
            Verbs::available().map_err(|e| DirectError::Rdma(smbx_rdma::RdmaError::Setup(e)))?;
            Some(route_has_rdma(addr).ok_or_else(|| {
                DirectError::Rdma(smbx_rdma::RdmaError::Setup(format!(
                    "no active RDMA device on the route to {addr}"
                )))
            })?)
        }
    };
    let Some(dev) = dev else {
        return soft::connect_driven(addr, iwarp, config)
            .await
            .map(|(l, d)| (l, Some(d)));
    };
    let mut verbs_opts = verbs_opts;
    verbs_opts.busy_poll |= poll_from_env();
    tracing::debug!(%addr, device = %dev.device, "smb direct through rdma-core");
    let first = connect_verbs(addr, verbs_opts.clone(), config.clone()).await;
    let link = match first {
        Err(e) if addr.port() == crate::SMB_DIRECT_PORT && dev.transport != Transport::Iwarp => {
            tracing::debug!(error = %e, "port 5445 refused; trying 445");
            connect_verbs(SocketAddr::new(addr.ip(), 445), verbs_opts, config).await
        }
        r => r,
    }?;
    Ok((link, None))
}

/// The client's polling mode: `$SMBX_RDMA_POLL=yes` polls the completion
/// queues instead of sleeping on the completion channel (lowest latency).
pub fn poll_from_env() -> bool {
    std::env::var("SMBX_RDMA_POLL")
        .map(|v| matches!(v.to_ascii_lowercase().as_str(), "yes" | "1" | "true"))
        .unwrap_or(false)
}

/// Connects through rdma-core and negotiates.
pub async fn connect_verbs(
    addr: SocketAddr,
    opts: VerbsOptions,
    config: Config,
) -> Result<Arc<dyn DirectLink>, DirectError> {
    let provider = Verbs::new(opts);
    let pd = provider.alloc_pd()?;
    let conn = SmbDirectConnection::connect(&provider, &pd, addr, config).await?;
    Ok(Arc::new(Link::<Verbs>::new(conn, pd)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ra(ip: &str, t: Transport, active: bool) -> RdmaAddress {
        RdmaAddress {
            ip: ip.parse().unwrap(),
            netdev: "eth0".into(),
            device: "dev0".into(),
            transport: t,
            active,
        }
    }

    #[test]
    fn soft_choice_is_soft_everywhere() {
        let a: SocketAddr = "10.0.0.1:5445".parse().unwrap();
        let (p, n) = plan(
            &[a],
            ProviderChoice::Soft,
            &[ra("10.0.0.1", Transport::Roce, true)],
            Ok(()),
        );
        assert_eq!(p, vec![Planned::Soft(a)]);
        assert!(n.is_empty());
    }

    #[test]
    fn roce_on_445_iwarp_on_5445() {
        let r = [
            ra("10.0.0.1", Transport::Roce, true),
            ra("10.0.0.2", Transport::Iwarp, true),
        ];
        let a1: SocketAddr = "10.0.0.1:5445".parse().unwrap();
        let a2: SocketAddr = "10.0.0.2:5445".parse().unwrap();
        let (p, _) = plan(&[a1, a2], ProviderChoice::Auto, &r, Ok(()));
        assert_eq!(
            p,
            vec![
                Planned::Verbs(
                    "10.0.0.1:445".parse().unwrap(),
                    "dev0".into(),
                    Transport::Roce
                ),
                Planned::Verbs(
                    "10.0.0.2:5445".parse().unwrap(),
                    "dev0".into(),
                    Transport::Iwarp
                ),
            ]
        );
    }

    #[test]
    fn auto_without_rdma_core_is_soft_and_says_why() {
        let a: SocketAddr = "10.0.0.1:5445".parse().unwrap();
        let (p, n) = plan(
            &[a],
            ProviderChoice::Auto,
            &[ra("10.0.0.1", Transport::Roce, true)],
            Err("librdmacm.so.1 not found".into()),
        );
        assert_eq!(p, vec![Planned::Soft(a)]);
        assert!(n[0].contains("librdmacm.so.1"), "{n:?}");
    }

    #[test]
    fn verbs_choice_without_device_plans_nothing_and_says_what_to_do() {
        let a: SocketAddr = "10.0.0.1:5445".parse().unwrap();
        let (p, n) = plan(&[a], ProviderChoice::Verbs, &[], Ok(()));
        assert!(p.is_empty());
        assert!(n.iter().any(|s| s.contains("rdma link add")), "{n:?}");
    }

    #[test]
    fn port_down_is_reported_and_skipped() {
        let a: SocketAddr = "10.0.0.1:5445".parse().unwrap();
        let (p, n) = plan(
            &[a],
            ProviderChoice::Auto,
            &[ra("10.0.0.1", Transport::Iwarp, false)],
            Ok(()),
        );
        assert_eq!(p, vec![Planned::Soft(a)]);
        assert!(n[0].contains("no active port"), "{n:?}");
    }
}
