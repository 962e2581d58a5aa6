//! How a planned channel is connected: SMB Direct to an interface the server flags
//! RDMA_CAPABLE (when [`ClientOptions::rdma_channels`] allows it), Direct TCP to the
//! others — as Windows prefers RDMA where the server offers it ([MS-SMB2] 3.2.5.14.11,
//! [MS-SMBD]). The connection is negotiated and ready to be bound to the session.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use smbx_wire::ioctl::{NetworkInterface, NETWORK_IF_RDMA_CAPABLE};
use tokio::net::TcpStream;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// How long a channel's TCP connect may take before the address is skipped.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The addresses the server last flagged RDMA_CAPABLE (from its interface list), so
/// that a channel planned to one of them — or re-established later — is SMB Direct.
#[derive(Default)]
pub(crate) struct RdmaInterfaces(Mutex<Vec<IpAddr>>);

impl RdmaInterfaces {
    fn lock(&self) -> MutexGuard<'_, Vec<IpAddr>> {
        // A list of addresses cannot be left half-updated: a poisoned lock is fine.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers which of `ifs` are RDMA-capable.
    pub(crate) fn learn(&self, ifs: &[NetworkInterface]) {
        *self.lock() = ifs
            .iter()
            .filter(|ni| ni.capability & NETWORK_IF_RDMA_CAPABLE != 0)
            .map(|ni| crate::channels::interface_addr(ni, 0).ip())
            .collect();
    }

    /// True if `ip` was flagged RDMA-capable.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        self.lock().contains(&ip)
    }
}

/// The transport of a channel to `ip`: SMB Direct when the server flags the interface
/// RDMA-capable and `options` allows RDMA channels.
pub(crate) fn use_direct(rdma: &RdmaInterfaces, ip: IpAddr, options: &ClientOptions) -> bool {
    options.rdma_channels && rdma.contains(ip)
}

/// The channels' server addresses as [`crate::channels::plan`] names them: on the
/// Direct TCP port `tcp_port`, whichever transport (and port) each channel uses.
pub(crate) fn as_planned(addrs: &[SocketAddr], tcp_port: u16) -> Vec<SocketAddr> {
    addrs
        .iter()
        .map(|a| {
            let mut a = *a;
            a.set_port(tcp_port);
            a
        })
        .collect()
}

/// Connects a planned channel to `addr` (its Direct TCP address) and negotiates:
/// over SMB Direct to `addr`'s IP on [`ClientOptions::direct_port`] when `direct`,
/// else over Direct TCP to `addr`. `host` names the server in TREE_CONNECT paths.
pub(crate) async fn connect(
    addr: SocketAddr,
    direct: bool,
    host: &str,
    options: ClientOptions,
) -> Result<Client> {
    if direct {
        let sa = SocketAddr::new(addr.ip(), options.direct_port);
        return tokio::time::timeout(CONNECT_TIMEOUT, Client::connect_direct(sa, host, options))
            .await
            .map_err(|_| Error::Timeout)?;
    }
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| Error::Timeout)??;
    Client::from_stream(stream, host, options).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::ioctl::{IfAddr, NETWORK_IF_RSS_CAPABLE};

    fn ni(last: u8, capability: u32) -> NetworkInterface {
        NetworkInterface {
            if_index: u32::from(last),
            capability,
            link_speed: 1_000_000_000,
            addr: IfAddr::V4([10, 0, 0, last]),
        }
    }

    #[test]
    fn only_rdma_capable_interfaces_get_smb_direct_channels_when_allowed() {
        let rdma = RdmaInterfaces::default();
        rdma.learn(&[
            ni(1, NETWORK_IF_RDMA_CAPABLE | NETWORK_IF_RSS_CAPABLE),
            ni(2, NETWORK_IF_RSS_CAPABLE),
            ni(3, 0),
        ]);
        let ip = |n: u8| IpAddr::from([10, 0, 0, n]);
        let opts = ClientOptions::default();
        assert!(use_direct(&rdma, ip(1), &opts));
        assert!(!use_direct(&rdma, ip(2), &opts));
        assert!(!use_direct(&rdma, ip(3), &opts));
        let tcp_only = ClientOptions {
            rdma_channels: false,
            ..ClientOptions::default()
        };
        assert!(!use_direct(&rdma, ip(1), &tcp_only));
        // A later list replaces the earlier one.
        rdma.learn(&[ni(2, NETWORK_IF_RDMA_CAPABLE)]);
        assert!(!use_direct(&rdma, ip(1), &opts));
        assert!(use_direct(&rdma, ip(2), &opts));
    }
}
