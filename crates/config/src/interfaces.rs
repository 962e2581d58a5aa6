//! `interfaces`: which addresses the server binds (with `bind interfaces only`) and
//! advertises to multichannel clients (FSCTL_QUERY_NETWORK_INTERFACE_INFO), in
//! Samba's syntax:
//!
//! ```text
//! interfaces = "eth0;speed=10000000000,capability=RSS,capability=RDMA" \
//!              "192.168.1.10/24;speed=1000000000" lo
//! ```
//!
//! An entry names an interface (`eth0`, with `*` and `?` wildcards), one address
//! (`192.168.1.10`, `fd00::2`) or an address with its prefix (`192.168.1.10/24`,
//! `192.168.1.0/255.255.255.0`). An address/prefix whose address is the network (or
//! IPv4 broadcast) address stands for every local address in that network; any other
//! address/prefix stands for that one address. After a `;` come options, separated
//! by commas (so the entry must be quoted): `speed=` (bits per second),
//! `capability=RSS` and `capability=RDMA` (each may be given; together they replace
//! what the server detects) and `if_index=` (the InterfaceIndex advertised). Values
//! given here override what the system reports.

use std::fmt;
use std::net::IpAddr;

/// Where an `interfaces` entry points (the part before `;`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterfaceTarget {
    /// An interface name; `*` and `?` are wildcards (`eth*`). `localhost` stands for
    /// the loopback addresses.
    Name(String),
    /// One address.
    Address(IpAddr),
    /// `address/prefix`: the whole network when `addr` is its network or broadcast
    /// address, else that one address.
    Network {
        /// The address as written.
        addr: IpAddr,
        /// Prefix length (a dotted IPv4 mask is converted).
        prefix: u8,
    },
}

/// Capabilities an entry sets (`capability=RSS`, `capability=RDMA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InterfaceCaps {
    /// RSS_CAPABLE.
    pub rss: bool,
    /// RDMA_CAPABLE.
    pub rdma: bool,
}

/// One `interfaces` entry with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The interface, address or network.
    pub target: InterfaceTarget,
    /// `speed=`: link speed in bits per second (overrides the system's).
    pub speed: Option<u64>,
    /// `capability=`: replaces the detected capabilities when set.
    pub capability: Option<InterfaceCaps>,
    /// `if_index=`: the InterfaceIndex advertised (overrides the kernel's).
    pub if_index: Option<u32>,
}

/// What an entry may look like, for error messages.
const ACCEPTED: &str = "accepted values: NAME, ADDRESS or ADDRESS/PREFIX, optionally followed \
     by ;speed=BITS_PER_SECOND,capability=RSS,capability=RDMA,if_index=N (quote such entries: \
     \"eth0;speed=10000000000,capability=RSS\")";

impl Interface {
    /// An entry for one address, without options.
    pub fn address(addr: IpAddr) -> Interface {
        Interface {
            target: InterfaceTarget::Address(addr),
            speed: None,
            capability: None,
            if_index: None,
        }
    }

    /// True if this entry selects the address `addr` of interface `name`.
    pub fn selects(&self, name: &str, addr: IpAddr) -> bool {
        match &self.target {
            InterfaceTarget::Name(n) if n.eq_ignore_ascii_case("localhost") => addr.is_loopback(),
            InterfaceTarget::Name(n) => glob(n.as_bytes(), name.as_bytes()),
            InterfaceTarget::Address(a) => *a == addr,
            InterfaceTarget::Network { addr: a, prefix } => {
                let (net, bcast) = (masked(*a, *prefix, false), masked(*a, *prefix, true));
                let whole_net = Some(*a) == net || (a.is_ipv4() && Some(*a) == bcast);
                if whole_net {
                    net.is_some() && net == masked(addr, *prefix, false)
                } else {
                    *a == addr
                }
            }
        }
    }
}

impl From<IpAddr> for Interface {
    fn from(addr: IpAddr) -> Interface {
        Interface::address(addr)
    }
}

impl From<std::net::Ipv4Addr> for Interface {
    fn from(addr: std::net::Ipv4Addr) -> Interface {
        Interface::address(addr.into())
    }
}

impl From<std::net::Ipv6Addr> for Interface {
    fn from(addr: std::net::Ipv6Addr) -> Interface {
        Interface::address(addr.into())
    }
}

/// `addr` with the bits past `prefix` cleared (or set, for `ones`); `None` when the
/// prefix is too long for the family.
fn masked(addr: IpAddr, prefix: u8, ones: bool) -> Option<IpAddr> {
    match addr {
        IpAddr::V4(v4) if prefix <= 32 => {
            let host = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            let v = u32::from(v4);
            Some(IpAddr::V4(if ones { v | host } else { v & !host }.into()))
        }
        IpAddr::V6(v6) if prefix <= 128 => {
            let host = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            let v = u128::from(v6);
            Some(IpAddr::V6(if ones { v | host } else { v & !host }.into()))
        }
        _ => None,
    }
}

/// fnmatch-style matching with `*` and `?` (iterative, no recursion).
fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while i < s.len() {
        match pat.get(p) {
            Some(b'*') => {
                back = Some((p, i));
                p += 1;
            }
            Some(&c) if c == b'?' || c == s[i] => {
                p += 1;
                i += 1;
            }
            _ => match back {
                Some((bp, bi)) => {
                    p = bp + 1;
                    i = bi + 1;
                    back = Some((bp, bi + 1));
                }
                None => return false,
            },
        }
    }
    pat[p.min(pat.len())..].iter().all(|&c| c == b'*')
}

/// Parses an address, with or without `[...]` around an IPv6 one.
fn parse_ip(s: &str) -> Option<IpAddr> {
    s.strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(s)
        .parse()
        .ok()
}

/// The prefix length of a dotted IPv4 mask (contiguous ones only).
fn mask_prefix(mask: &str) -> Option<u8> {
    let m = u32::from(mask.parse::<std::net::Ipv4Addr>().ok()?);
    let ones = m.leading_ones();
    (m.checked_shl(ones).unwrap_or(0) == 0).then_some(ones as u8)
}

fn parse_target(t: &str, entry: &str) -> Result<InterfaceTarget, String> {
    let bad = |what: String| format!("entry {entry:?}: {what}; {ACCEPTED}");
    if t.is_empty() {
        return Err(bad("no interface name or address".into()));
    }
    if let Some((a, p)) = t.split_once('/') {
        let addr = parse_ip(a).ok_or_else(|| bad(format!("{a:?} is not an IP address")))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p.parse::<u8>() {
            Ok(n) if n <= max => n,
            _ if addr.is_ipv4() && p.contains('.') => {
                mask_prefix(p).ok_or_else(|| bad(format!("{p:?} is not a contiguous netmask")))?
            }
            _ => return Err(bad(format!("prefix {p:?} is not a number from 0 to {max}"))),
        };
        return Ok(InterfaceTarget::Network { addr, prefix });
    }
    if let Some(addr) = parse_ip(t) {
        return Ok(InterfaceTarget::Address(addr));
    }
    if t.contains('=') {
        return Err(bad(
            "options must follow an interface after ';', inside the same quotes".into(),
        ));
    }
    if t.len() > 255 || t.contains(|c: char| c.is_whitespace() || c == ',' || c == '"') {
        return Err(bad("not an interface name".into()));
    }
    Ok(InterfaceTarget::Name(t.to_string()))
}

/// A number as Samba reads it (decimal, or hexadecimal after `0x`).
fn parse_number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Parses one `interfaces` entry as written (quotes already removed). The error
/// says what is wrong with it and what is accepted.
pub fn parse_entry(entry: &str) -> Result<Interface, String> {
    let bad = |what: String| format!("entry {entry:?}: {what}; {ACCEPTED}");
    let (target, options) = match entry.split_once(';') {
        Some((t, o)) => (t.trim(), Some(o)),
        None => (entry.trim(), None),
    };
    let mut iface = Interface {
        target: parse_target(target, entry)?,
        speed: None,
        capability: None,
        if_index: None,
    };
    let Some(options) = options else {
        return Ok(iface);
    };
    for opt in options.split(',') {
        let opt = opt.trim();
        let Some((k, v)) = opt.split_once('=') else {
            return Err(bad(format!("option {opt:?} is not KEY=VALUE")));
        };
        let (k, v) = (k.trim(), v.trim());
        match k.to_ascii_lowercase().as_str() {
            "speed" => match parse_number(v) {
                Some(s) if s > 0 => iface.speed = Some(s),
                _ => {
                    return Err(bad(format!(
                        "speed {v:?} is not a link speed in bits per second (1 or more)"
                    )))
                }
            },
            "capability" => {
                let caps = iface.capability.get_or_insert_with(InterfaceCaps::default);
                if v.eq_ignore_ascii_case("RSS") {
                    caps.rss = true;
                } else if v.eq_ignore_ascii_case("RDMA") {
                    caps.rdma = true;
                } else {
                    return Err(bad(format!("capability {v:?} is not RSS or RDMA")));
                }
            }
            "if_index" => match parse_number(v) {
                Some(n @ 1..=0xFFFF_FFFF) => iface.if_index = Some(n as u32),
                _ => {
                    return Err(bad(format!(
                        "if_index {v:?} is not an interface index from 1 to 4294967295"
                    )))
                }
            },
            _ => {
                return Err(bad(format!(
                    "unknown option {k:?} (known: speed, capability, if_index)"
                )))
            }
        }
    }
    Ok(iface)
}

impl std::str::FromStr for Interface {
    type Err = String;
    fn from_str(s: &str) -> Result<Interface, String> {
        parse_entry(s)
    }
}

impl fmt::Display for InterfaceTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InterfaceTarget::Name(n) => f.write_str(n),
            InterfaceTarget::Address(a) => write!(f, "{a}"),
            InterfaceTarget::Network { addr, prefix } => write!(f, "{addr}/{prefix}"),
        }
    }
}

/// The entry as smb.conf spells it (without quotes): `eth0;speed=1000,capability=RSS`.
impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.target)?;
        let mut opts: Vec<String> = Vec::new();
        if let Some(s) = self.speed {
            opts.push(format!("speed={s}"));
        }
        if let Some(c) = self.capability {
            if c.rss {
                opts.push("capability=RSS".into());
            }
            if c.rdma {
                opts.push("capability=RDMA".into());
            }
        }
        if let Some(i) = self.if_index {
            opts.push(format!("if_index={i}"));
        }
        if !opts.is_empty() {
            write!(f, ";{}", opts.join(","))?;
        }
        Ok(())
    }
}

/// Parses an `interfaces` value: entries separated by spaces or commas, quoted
/// where they hold options.
pub fn parse_interfaces(v: &str) -> Result<Vec<Interface>, String> {
    crate::values::parse_list(v)
        .iter()
        .map(|e| parse_entry(e))
        .collect()
}

/// The `interfaces` value as smb.conf text (entries with options quoted).
pub fn fmt_interfaces(list: &[Interface]) -> String {
    let entries: Vec<String> = list.iter().map(Interface::to_string).collect();
    crate::values::fmt_list(&entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn samba_style_entries() {
        let e = parse_entry("eth0;speed=10000000000,capability=RSS,capability=RDMA").unwrap();
        assert_eq!(e.target, InterfaceTarget::Name("eth0".into()));
        assert_eq!(e.speed, Some(10_000_000_000));
        assert_eq!(
            e.capability,
            Some(InterfaceCaps {
                rss: true,
                rdma: true
            })
        );
        let e = parse_entry("192.168.1.10/24;Speed=0x3B9ACA00,if_index=7").unwrap();
        assert_eq!(
            e.target,
            InterfaceTarget::Network {
                addr: ip("192.168.1.10"),
                prefix: 24
            }
        );
        assert_eq!(
            (e.speed, e.if_index, e.capability),
            (Some(1_000_000_000), Some(7), None)
        );
        let e = parse_entry("10.0.0.0/255.255.0.0").unwrap();
        assert_eq!(
            e.target,
            InterfaceTarget::Network {
                addr: ip("10.0.0.0"),
                prefix: 16
            }
        );
        let e = parse_entry("fd00::2;capability=rss").unwrap();
        assert_eq!(e.target, InterfaceTarget::Address(ip("fd00::2")));
        assert_eq!(e.capability.map(|c| (c.rss, c.rdma)), Some((true, false)));
        assert_eq!(
            parse_entry("[::1]").unwrap().target,
            InterfaceTarget::Address(ip("::1"))
        );
    }

    #[test]
    fn whole_value_with_quotes_and_round_trip() {
        let v =
            r#""eth0;speed=10000000000,capability=RSS,capability=RDMA" lo, "127.0.0.1;speed=1000""#;
        let list = parse_interfaces(v).unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[1].target, InterfaceTarget::Name("lo".into()));
        let text = fmt_interfaces(&list);
        assert_eq!(
            text,
            r#""eth0;speed=10000000000,capability=RSS,capability=RDMA" lo 127.0.0.1;speed=1000"#
        );
        assert_eq!(parse_interfaces(&text).unwrap(), list);
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for (v, says) in [
            ("eth0;speed=fast", "speed \"fast\""),
            ("eth0;speed=0", "speed \"0\""),
            ("eth0;speed=99999999999999999999999", "bits per second"),
            ("eth0;capability=TURBO", "capability \"TURBO\""),
            ("eth0;colour=blue", "unknown option \"colour\""),
            ("eth0;speed", "not KEY=VALUE"),
            ("eth0;", "not KEY=VALUE"),
            ("eth0;if_index=0", "if_index \"0\""),
            ("eth0;if_index=4294967296", "if_index"),
            (";speed=1", "no interface name or address"),
            ("10.0.0.1/33", "prefix \"33\""),
            ("10.0.0.1/255.0.255.0", "contiguous netmask"),
            ("::1/129", "prefix \"129\""),
            ("nonsense/8", "not an IP address"),
        ] {
            let e = parse_entry(v).unwrap_err();
            assert!(e.contains(says), "{v}: {e}");
            assert!(e.contains("accepted values"), "{v}: {e}");
        }
        // Unquoted, the comma splits an entry: the stray option is refused.
        let e = parse_interfaces("eth0;speed=1000,capability=RSS").unwrap_err();
        assert!(e.contains("inside the same quotes"), "{e}");
    }

    #[test]
    fn selection_by_name_address_and_network() {
        let sel = |e: &str, name: &str, a: &str| parse_entry(e).unwrap().selects(name, ip(a));
        assert!(sel("eth0", "eth0", "192.168.1.20"));
        assert!(!sel("eth0", "eth1", "192.168.1.20"));
        assert!(sel("eth*", "eth1", "192.168.1.20"));
        assert!(sel("e?h1", "eth1", "192.168.1.20"));
        assert!(!sel("eth?", "eth10", "192.168.1.20"));
        assert!(sel("192.168.1.20", "x", "192.168.1.20"));
        assert!(sel("192.168.1.0/24", "x", "192.168.1.20"));
        assert!(sel("192.168.1.255/24", "x", "192.168.1.20"));
        assert!(!sel("192.168.2.0/24", "x", "192.168.1.20"));
        // A host address with a prefix is that address only, as in Samba.
        assert!(sel("192.168.1.20/24", "x", "192.168.1.20"));
        assert!(!sel("192.168.1.21/24", "x", "192.168.1.20"));
        assert!(sel("fe80::/10", "x", "fe80::1"));
        assert!(!sel("192.168.1.0/24", "x", "fe80::1"));
        assert!(sel("0.0.0.0/0", "x", "10.1.2.3"));
        assert!(sel("localhost", "lo", "::1"));
        assert!(!sel("localhost", "eth0", "10.1.2.3"));
    }

    #[test]
    fn glob_edges() {
        assert!(glob(b"*", b""));
        assert!(glob(b"**a", b"bba"));
        assert!(!glob(b"a", b""));
        assert!(glob(b"a*b*c", b"aXXbYYc"));
        assert!(!glob(b"a*b*c", b"aXXbYY"));
    }
}
