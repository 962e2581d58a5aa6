//! FSCTL_QUERY_NETWORK_INTERFACE_INFO ([MS-SMB2] 3.3.5.15.11): the addresses this
//! server offers multichannel clients, from [`smbx_transport::netif`] and the
//! `interfaces` option.
//!
//! * Only interfaces that are up (IFF_UP and IFF_RUNNING) are listed.
//! * With an `interfaces` list (as in Samba, whatever `bind interfaces only` says,
//!   which decides only what is bound), the addresses its entries select (by
//!   interface name with wildcards, address, or network), in the order of the
//!   entries; otherwise every non-loopback address, or the loopback ones if nothing
//!   else exists.
//! * LinkSpeed: an entry's `speed=`, else `/sys/class/net/<if>/speed` (Mbit/s,
//!   converted to bit/s); virtual interfaces report nothing there: loopback is then
//!   advertised as 10 Gbit/s and anything else as 1 Gbit/s.
//! * RSS_CAPABLE: an entry's `capability=` list when it has one, else whether the
//!   device has more than one receive queue (`/sys/class/net/<if>/queues/rx-*`).
//! * RDMA_CAPABLE: an entry's `capability=RDMA`, and every address an SMB Direct
//!   listener is bound to (a wildcard listener covers its whole family).
//! * InterfaceIndex: an entry's `if_index=`, else the kernel's.

use std::net::{IpAddr, SocketAddr};

use smbx_config::Interface;
use smbx_transport::netif::{local_addresses, LocalAddress};

use smbx_wire::ioctl::{
    encode_network_interfaces, IfAddr, IoctlRequest, NetworkInterface, NETWORK_IF_RDMA_CAPABLE,
    NETWORK_IF_RSS_CAPABLE,
};
use smbx_wire::NtStatus;

use super::{FsctlOut, FsctlResult};
use crate::handlers::Ctx;

/// Link speed advertised for loopback when sysfs has none (bit/s).
pub const LOOPBACK_SPEED: u64 = 10_000_000_000;
/// Link speed advertised for other interfaces when sysfs has none (bit/s).
pub const DEFAULT_SPEED: u64 = 1_000_000_000;

/// Which interfaces to report and how.
#[derive(Debug, Clone, Default)]
pub struct InterfaceOptions {
    /// The `interfaces` entries (empty: every non-loopback address).
    pub interfaces: Vec<Interface>,
    /// The addresses SMB Direct listens on: these are advertised RDMA_CAPABLE.
    pub rdma_listeners: Vec<SocketAddr>,
}

/// What the system says about one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// Link speed in bit/s, if the device reports one.
    pub speed: Option<u64>,
    /// More than one receive queue.
    pub rss: bool,
}

fn sysfs_i64(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Reads link speed and receive queues of interface `name` from sysfs.
fn probe_sysfs(name: &str) -> Probed {
    if name.is_empty() || name.contains('/') || name.contains("..") {
        return Probed {
            speed: None,
            rss: false,
        };
    }
    let speed = sysfs_i64(&format!("/sys/class/net/{name}/speed"))
        .filter(|&mbit| mbit > 0)
        .map(|mbit| (mbit as u64).saturating_mul(1_000_000));
    let rss = std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
                > 1
        })
        .unwrap_or(false);
    Probed { speed, rss }
}

/// True if an SMB Direct listener bound to one of `listeners` accepts on `addr`.
fn rdma_listens(listeners: &[SocketAddr], addr: IpAddr) -> bool {
    listeners
        .iter()
        .any(|l| l.ip() == addr || (l.ip().is_unspecified() && l.ip().is_ipv4() == addr.is_ipv4()))
}

/// The local addresses `entries` select, each with the entry that selected it
/// (`None` without an `interfaces` list), in the order of the entries.
fn selected<'a>(
    entries: &'a [Interface],
    all: &'a [LocalAddress],
) -> Vec<(&'a LocalAddress, Option<&'a Interface>)> {
    if entries.is_empty() {
        let non_lo: Vec<&LocalAddress> = all.iter().filter(|a| !a.loopback).collect();
        let list = if non_lo.is_empty() {
            all.iter().collect()
        } else {
            non_lo
        };
        return list.into_iter().map(|a| (a, None)).collect();
    }
    let mut out: Vec<(&LocalAddress, Option<&Interface>)> = Vec::new();
    for e in entries {
        for a in all {
            let seen = out.iter().any(|(s, _)| std::ptr::eq(*s, a));
            if !seen && e.selects(&a.name, a.addr) {
                out.push((a, Some(e)));
            }
        }
    }
    out
}

/// The interfaces to advertise for `opts`, given the host's addresses `all` and a
/// way to ask the system about an interface (sysfs in [`local_interfaces`]).
pub fn advertise(
    opts: &InterfaceOptions,
    all: &[LocalAddress],
    probe: &dyn Fn(&str) -> Probed,
) -> Vec<NetworkInterface> {
    selected(&opts.interfaces, all)
        .into_iter()
        .map(|(a, entry)| {
            let sys = probe(&a.name);
            let default_speed = if a.loopback {
                LOOPBACK_SPEED
            } else {
                DEFAULT_SPEED
            };
            let configured = entry.and_then(|e| e.capability);
            let rss = configured.map_or(sys.rss, |c| c.rss);
            let rdma =
                configured.is_some_and(|c| c.rdma) || rdma_listens(&opts.rdma_listeners, a.addr);
            let mut capability = 0;
            if rss {
                capability |= NETWORK_IF_RSS_CAPABLE;
            }
            if rdma {
                capability |= NETWORK_IF_RDMA_CAPABLE;
            }
            NetworkInterface {
                if_index: entry.and_then(|e| e.if_index).unwrap_or(a.index),
                capability,
                link_speed: entry
                    .and_then(|e| e.speed)
                    .or(sys.speed)
                    .unwrap_or(default_speed),
                addr: match a.addr {
                    IpAddr::V4(v4) => IfAddr::V4(v4.octets()),
                    IpAddr::V6(v6) => IfAddr::V6(v6.octets(), a.scope),
                },
            }
        })
        .collect()
}

/// The interfaces to advertise on this host, in the order of the `interfaces` entries.
pub fn local_interfaces(opts: &InterfaceOptions) -> Vec<NetworkInterface> {
    advertise(opts, &local_addresses(), &probe_sysfs)
}

/// Answers FSCTL_QUERY_NETWORK_INTERFACE_INFO.
pub(super) fn query(ctx: &Ctx<'_>, io: &IoctlRequest<'_>) -> FsctlResult {
    let opts = InterfaceOptions {
        interfaces: ctx.config().global.interfaces.clone(),
        rdma_listeners: ctx.server.direct_listening(),
    };
    let out = encode_network_interfaces(&local_interfaces(&opts));
    if out.len() > io.max_output_response as usize {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    Ok(FsctlOut::ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Vec<LocalAddress> {
        let a = |name: &str, index: u32, addr: &str, loopback: bool| LocalAddress {
            name: name.into(),
            index,
            addr: addr.parse().unwrap(),
            scope: 0,
            loopback,
        };
        vec![
            a("lo", 1, "127.0.0.1", true),
            a("eth0", 2, "192.168.1.20", false),
            a("eth0", 2, "fd00::20", false),
            a("eth1", 3, "10.0.0.5", false),
            a("ib0", 4, "10.9.0.5", false),
        ]
    }

    /// eth0 says 25 Gbit/s and has RSS queues; eth1 and ib0 report nothing.
    fn probe(name: &str) -> Probed {
        match name {
            "eth0" => Probed {
                speed: Some(25_000_000_000),
                rss: true,
            },
            _ => Probed {
                speed: None,
                rss: false,
            },
        }
    }

    fn entries(line: &str) -> Vec<Interface> {
        smbx_config::interfaces::parse_interfaces(line).unwrap()
    }

    fn ip_of(n: &NetworkInterface) -> String {
        match n.addr {
            IfAddr::V4(o) => std::net::Ipv4Addr::from(o).to_string(),
            IfAddr::V6(o, _) => std::net::Ipv6Addr::from(o).to_string(),
        }
    }

    #[test]
    fn without_a_list_every_non_loopback_address_with_what_sysfs_says() {
        let ifs = advertise(&InterfaceOptions::default(), &host(), &probe);
        let got: Vec<(String, u64, u32)> = ifs
            .iter()
            .map(|n| (ip_of(n), n.link_speed, n.capability))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "192.168.1.20".into(),
                    25_000_000_000,
                    NETWORK_IF_RSS_CAPABLE
                ),
                ("fd00::20".into(), 25_000_000_000, NETWORK_IF_RSS_CAPABLE),
                ("10.0.0.5".into(), DEFAULT_SPEED, 0),
                ("10.9.0.5".into(), DEFAULT_SPEED, 0),
            ]
        );
    }

    #[test]
    fn configured_speeds_and_capabilities_override_sysfs() {
        let opts = InterfaceOptions {
            interfaces: entries(
                "\"ib0;speed=100000000000,capability=RDMA,if_index=40\" \
                 \"eth0;speed=1000000000,capability=RDMA\" 10.0.0.0/8 lo",
            ),
            rdma_listeners: Vec::new(),
        };
        let ifs = advertise(&opts, &host(), &probe);
        let got: Vec<(String, u32, u64, u32)> = ifs
            .iter()
            .map(|n| (ip_of(n), n.if_index, n.link_speed, n.capability))
            .collect();
        assert_eq!(
            got,
            vec![
                // The order of the entries; ib0 matched first, so 10.0.0.0/8 adds eth1 only.
                (
                    "10.9.0.5".into(),
                    40,
                    100_000_000_000,
                    NETWORK_IF_RDMA_CAPABLE
                ),
                // capability= replaces sysfs's RSS.
                (
                    "192.168.1.20".into(),
                    2,
                    1_000_000_000,
                    NETWORK_IF_RDMA_CAPABLE
                ),
                ("fd00::20".into(), 2, 1_000_000_000, NETWORK_IF_RDMA_CAPABLE),
                ("10.0.0.5".into(), 3, DEFAULT_SPEED, 0),
                ("127.0.0.1".into(), 1, LOOPBACK_SPEED, 0),
            ]
        );
    }

    #[test]
    fn rdma_capable_exactly_where_smb_direct_listens() {
        let mut opts = InterfaceOptions {
            interfaces: entries("eth0 eth1 \"ib0;capability=RSS\""),
            rdma_listeners: vec!["10.0.0.5:5445".parse().unwrap()],
        };
        let rdma = |o: &InterfaceOptions| -> Vec<(String, bool)> {
            advertise(o, &host(), &probe)
                .iter()
                .map(|n| (ip_of(n), n.capability & NETWORK_IF_RDMA_CAPABLE != 0))
                .collect()
        };
        assert_eq!(
            rdma(&opts),
            vec![
                ("192.168.1.20".into(), false),
                ("fd00::20".into(), false),
                ("10.0.0.5".into(), true),
                ("10.9.0.5".into(), false),
            ]
        );
        // A wildcard IPv4 listener covers every IPv4 address, not the IPv6 one.
        opts.rdma_listeners = vec!["0.0.0.0:5445".parse().unwrap()];
        assert_eq!(
            rdma(&opts),
            vec![
                ("192.168.1.20".into(), true),
                ("fd00::20".into(), false),
                ("10.0.0.5".into(), true),
                ("10.9.0.5".into(), true),
            ]
        );
    }

    #[test]
    fn entries_that_select_nothing_advertise_nothing() {
        let opts = InterfaceOptions {
            interfaces: entries("eth9 172.16.0.1 \"wlan*;speed=5\""),
            rdma_listeners: Vec::new(),
        };
        assert!(advertise(&opts, &host(), &probe).is_empty());
    }

    #[test]
    fn loopback_is_found_on_this_host() {
        let opts = InterfaceOptions {
            interfaces: entries("\"127.0.0.1;speed=2500000000\""),
            rdma_listeners: vec!["127.0.0.1:5445".parse().unwrap()],
        };
        let ifs = local_interfaces(&opts);
        assert_eq!(ifs.len(), 1, "{ifs:?}");
        assert_eq!(ifs[0].addr, IfAddr::V4([127, 0, 0, 1]));
        assert!(ifs[0].if_index > 0);
        assert_eq!(ifs[0].link_speed, 2_500_000_000);
        assert_ne!(ifs[0].capability & NETWORK_IF_RDMA_CAPABLE, 0);
        assert!(!local_interfaces(&InterfaceOptions::default()).is_empty());
    }
}
