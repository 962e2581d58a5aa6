//! FSCTL_QUERY_NETWORK_INTERFACE_INFO ([MS-SMB2] 3.3.5.15.11): the machine's
//! interfaces, from [`smbx_transport::netif`].
//!
//! * Only interfaces that are up (IFF_UP and IFF_RUNNING) are listed.
//! * With `bind interfaces only` and an `interfaces` list, only addresses that list
//!   names (by interface name, address, or address/prefix) are listed; otherwise every
//!   non-loopback address, or the loopback ones if nothing else exists.
//! * LinkSpeed comes from `/sys/class/net/<if>/speed` (Mbit/s, converted to bit/s).
//!   Virtual interfaces report nothing there: loopback is then advertised as 10 Gbit/s
//!   and anything else as 1 Gbit/s.
//! * RSS_CAPABLE is set when the device has more than one receive queue
//!   (`/sys/class/net/<if>/queues/rx-*`); RDMA_CAPABLE when the caller says SMB
//!   Direct serves the interface ([`InterfaceOptions::rdma`]).

use std::net::IpAddr;

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
    /// `interfaces` entries (names, addresses, address/prefix).
    pub interfaces: Vec<String>,
    /// `bind interfaces only`: restrict to `interfaces`.
    pub bind_only: bool,
    /// Set RDMA_CAPABLE on every entry (SMB Direct listens on the same addresses).
    pub rdma: bool,
}

/// True if `entry` (name, address, or address/prefix) selects `a`.
fn selects(entry: &str, a: &LocalAddress) -> bool {
    let entry = entry.trim();
    if entry.eq_ignore_ascii_case(&a.name) {
        return true;
    }
    let (ip, prefix) = match entry.split_once('/') {
        Some((ip, p)) => (ip, p.parse::<u8>().ok()),
        None => (entry, None),
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    match (ip, a.addr, prefix) {
        (IpAddr::V4(n), IpAddr::V4(h), Some(p)) if p <= 32 => {
            let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
            u32::from(n) & mask == u32::from(h) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(h), Some(p)) if p <= 128 => {
            let mask = if p == 0 { 0 } else { u128::MAX << (128 - p) };
            u128::from(n) & mask == u128::from(h) & mask
        }
        (n, h, None) => n == h,
        _ => false,
    }
}

fn sysfs_u64(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn link_speed(name: &str, loopback: bool) -> u64 {
    if !name.contains('/') && !name.contains("..") {
        if let Some(mbit) = sysfs_u64(&format!("/sys/class/net/{name}/speed")) {
            if mbit > 0 {
                return (mbit as u64).saturating_mul(1_000_000);
            }
        }
    }
    if loopback {
        LOOPBACK_SPEED
    } else {
        DEFAULT_SPEED
    }
}

fn rss_capable(name: &str) -> bool {
    if name.contains('/') || name.contains("..") {
        return false;
    }
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
                > 1
        })
        .unwrap_or(false)
}

/// The interfaces to advertise, in getifaddrs order.
pub fn local_interfaces(opts: &InterfaceOptions) -> Vec<NetworkInterface> {
    let all = local_addresses();
    let chosen: Vec<&LocalAddress> = if opts.bind_only && !opts.interfaces.is_empty() {
        all.iter()
            .filter(|a| opts.interfaces.iter().any(|e| selects(e, a)))
            .collect()
    } else {
        let non_lo: Vec<&LocalAddress> = all.iter().filter(|a| !a.loopback).collect();
        if non_lo.is_empty() {
            all.iter().collect()
        } else {
            non_lo
        }
    };
    chosen
        .into_iter()
        .map(|a| {
            let mut capability = 0;
            if rss_capable(&a.name) {
                capability |= NETWORK_IF_RSS_CAPABLE;
            }
            if opts.rdma {
                capability |= NETWORK_IF_RDMA_CAPABLE;
            }
            NetworkInterface {
                if_index: a.index,
                capability,
                link_speed: link_speed(&a.name, a.loopback),
                addr: match a.addr {
                    IpAddr::V4(v4) => IfAddr::V4(v4.octets()),
                    IpAddr::V6(v6) => IfAddr::V6(v6.octets(), a.scope),
                },
            }
        })
        .collect()
}

/// Answers FSCTL_QUERY_NETWORK_INTERFACE_INFO.
pub(super) fn query(ctx: &Ctx<'_>, io: &IoctlRequest<'_>) -> FsctlResult {
    let g = &ctx.config().global;
    let opts = InterfaceOptions {
        interfaces: g.interfaces.clone(),
        bind_only: g.bind_interfaces_only,
        rdma: g.smb_direct,
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

    fn raw(name: &str, addr: &str) -> LocalAddress {
        LocalAddress {
            name: name.into(),
            index: 1,
            addr: addr.parse().unwrap(),
            scope: 0,
            loopback: false,
        }
    }

    #[test]
    fn interface_selection() {
        let a = raw("eth0", "192.168.1.20");
        assert!(selects("eth0", &a));
        assert!(selects("192.168.1.20", &a));
        assert!(selects("192.168.1.0/24", &a));
        assert!(!selects("192.168.2.0/24", &a));
        assert!(!selects("10.0.0.1", &a));
        assert!(!selects("lo", &a));
        assert!(!selects("garbage/99", &a));
        let b = raw("eth0", "fe80::1");
        assert!(selects("fe80::/10", &b));
        assert!(!selects("192.168.1.0/24", &b));
    }

    #[test]
    fn loopback_is_found_and_bound() {
        let opts = InterfaceOptions {
            interfaces: vec!["127.0.0.1".into()],
            bind_only: true,
            rdma: true,
        };
        let ifs = local_interfaces(&opts);
        assert_eq!(ifs.len(), 1, "{ifs:?}");
        assert_eq!(ifs[0].addr, IfAddr::V4([127, 0, 0, 1]));
        assert!(ifs[0].if_index > 0);
        assert!(ifs[0].link_speed > 0);
        assert_ne!(ifs[0].capability & NETWORK_IF_RDMA_CAPABLE, 0);
        let all = local_interfaces(&InterfaceOptions::default());
        assert!(!all.is_empty());
    }
}
