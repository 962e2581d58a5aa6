//! The addresses of this host's network interfaces (for FSCTL_QUERY_NETWORK_INTERFACE_INFO
//! on the server and channel selection on the client).

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One address of one interface that is up and running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAddress {
    /// The interface name (`eth0`).
    pub name: String,
    /// The interface index (`if_nametoindex`).
    pub index: u32,
    /// The address.
    pub addr: IpAddr,
    /// The IPv6 scope id (0 for IPv4).
    pub scope: u32,
    /// The interface is a loopback interface.
    pub loopback: bool,
}

/// Every address of every interface that is up and running (IFF_UP and IFF_RUNNING),
/// IPv4 and IPv6, from getifaddrs(3).
#[allow(unsafe_code)]
pub fn local_addresses() -> Vec<LocalAddress> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let flags = ifa.ifa_flags;
        if flags & libc::IFF_UP as u32 == 0 || flags & libc::IFF_RUNNING as u32 == 0 {
            continue;
        }
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null and points to a sockaddr of the family it names.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let (addr, scope) = match family {
            libc::AF_INET => {
                // SAFETY: the family is AF_INET, so this is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                (
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))),
                    0,
                )
            }
            libc::AF_INET6 => {
                // SAFETY: the family is AF_INET6, so this is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                (
                    IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)),
                    sin6.sin6_scope_id,
                )
            }
            _ => continue,
        };
        let Ok(cname) = std::ffi::CString::new(name.clone()) else {
            continue;
        };
        // SAFETY: cname is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        out.push(LocalAddress {
            name,
            index,
            addr,
            scope,
            loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
        });
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed_and_marked() {
        let all = local_addresses();
        let lo = all
            .iter()
            .find(|a| a.addr == IpAddr::V4(Ipv4Addr::LOCALHOST))
            .expect("127.0.0.1 is up");
        assert!(lo.loopback);
        assert!(lo.index > 0);
        assert_eq!(lo.name, "lo");
    }
}
