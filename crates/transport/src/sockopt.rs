//! TCP socket options of SMB connections, written as Samba's `socket options`
//! (`SO_KEEPALIVE TCP_KEEPIDLE=30 TCP_KEEPINTVL=5 TCP_KEEPCNT=3`): tokens
//! separated by spaces, tabs or commas, each a name (case-insensitive) with an
//! optional `=value` (a name alone sets 1).
//!
//! What a peer that vanished (its link down, its host gone) costs depends on
//! them: without keepalive a silent connection lives forever, and with data
//! unacknowledged the kernel retransmits for up to ~15 minutes
//! (`net.ipv4.tcp_retries2`) before it gives up. `SO_KEEPALIVE` with
//! `TCP_KEEPIDLE`/`TCP_KEEPINTVL`/`TCP_KEEPCNT` finds an idle dead peer;
//! `TCP_USER_TIMEOUT=ms` (Linux's, not in Samba's list) bounds how long sent
//! data may stay unacknowledged, and, with keepalive on, how long keepalive
//! probes may go unanswered.
//!
//! `TCP_NOTSENT_LOWAT=bytes` (Linux's, not in Samba's list) bounds how much data a
//! connection queues that has not been sent yet: a write waits once that much is queued
//! (0: the system's `net.ipv4.tcp_notsent_lowat`). Data sent counts against it only until
//! it leaves, so it does not limit what is in flight, only how far a writer gets ahead of
//! a receiver that reads more slowly.
//!
//! `TCP_CONGESTION=name` (Linux's, not in Samba's list) sets the connection's congestion
//! control (one of `net.ipv4.tcp_allowed_congestion_control`, or any available one with
//! CAP_NET_ADMIN). bbr paces what a connection sends even over loopback, where there is no
//! queue to spare: on a 2-core VM whose default is bbr, four connections reading 512 KiB
//! from one server cost the server ~1.7x the CPU per READ of one connection, against the
//! same per READ with `TCP_CONGESTION=reno` (bench/scaling.sh, README "Benchmarks").

use smbx_rdma::sock::{get_option, set_option};
use std::os::fd::AsFd;

/// A TCP congestion control's name, as `TCP_CONGESTION` takes it: 1 to 15 ASCII letters,
/// digits, `_` or `-` (the kernel's names are shorter than its TCP_CA_NAME_MAX, 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CongestionControl {
    name: [u8; 15],
    len: u8,
}

impl CongestionControl {
    /// The name, or `None` when it is empty, too long or has other characters.
    pub fn new(name: &str) -> Option<CongestionControl> {
        let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        if name.is_empty() || name.len() > 15 || !name.bytes().all(ok) {
            return None;
        }
        let mut cc = CongestionControl {
            name: [0; 15],
            len: name.len() as u8,
        };
        cc.name[..name.len()].copy_from_slice(name.as_bytes());
        Some(cc)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.name[..usize::from(self.len)]).unwrap_or("")
    }
}

/// Socket options to set on a TCP connection; `None` leaves the system's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketOptions {
    /// `SO_KEEPALIVE`: send keepalive probes on an idle connection.
    pub keepalive: Option<bool>,
    /// `TCP_KEEPIDLE` (seconds): idle time before the first probe.
    pub keep_idle_secs: Option<u32>,
    /// `TCP_KEEPINTVL` (seconds): time between unanswered probes.
    pub keep_interval_secs: Option<u32>,
    /// `TCP_KEEPCNT`: unanswered probes before the connection is dropped.
    pub keep_count: Option<u32>,
    /// `TCP_USER_TIMEOUT` (milliseconds): how long sent data may stay
    /// unacknowledged before the connection is dropped (0: the system's rule).
    pub user_timeout_ms: Option<u32>,
    /// `TCP_NODELAY`: send small segments at once (no Nagle delay).
    pub nodelay: Option<bool>,
    /// `SO_SNDBUF` (bytes).
    pub send_buffer: Option<u32>,
    /// `SO_RCVBUF` (bytes).
    pub receive_buffer: Option<u32>,
    /// `TCP_NOTSENT_LOWAT` (bytes): the most data queued unsent before a write waits
    /// (0: the system's rule).
    pub notsent_lowat: Option<u32>,
    /// `TCP_CONGESTION`: the connection's congestion control.
    pub congestion: Option<CongestionControl>,
}

/// Names in Samba's list that are recognised but not applied (logged once).
const IGNORED: &[&str] = &[
    "SO_REUSEADDR",
    "SO_BROADCAST",
    "SO_REUSEPORT",
    "SO_SNDLOWAT",
    "SO_RCVLOWAT",
    "SO_SNDTIMEO",
    "SO_RCVTIMEO",
    "IPTOS_LOWDELAY",
    "IPTOS_THROUGHPUT",
    "TCP_QUICKACK",
    "TCP_FASTACK",
    "TCP_KEEPALIVE_THRESHOLD",
    "TCP_KEEPALIVE_ABORT_THRESHOLD",
];

impl SocketOptions {
    /// Parses a `socket options` value. Returns the options and one message per
    /// token that was not applied (unknown name, a name smbx ignores, a bad
    /// value): Samba logs such tokens and goes on, and so do the callers.
    pub fn parse(s: &str) -> (SocketOptions, Vec<String>) {
        let mut o = SocketOptions::default();
        let mut warnings = Vec::new();
        for tok in s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
        {
            let (name, value) = match tok.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (tok, None),
            };
            let name = name.to_ascii_uppercase();
            // The one option whose value is a name.
            if name == "TCP_CONGESTION" {
                match value.and_then(CongestionControl::new) {
                    Some(cc) => o.congestion = Some(cc),
                    None => warnings.push(format!(
                        "socket option {tok}: the value is not a congestion control's name"
                    )),
                }
                continue;
            }
            let n = match value.map(str::parse::<u32>) {
                None => 1,
                Some(Ok(n)) => n,
                Some(Err(_)) => {
                    warnings.push(format!(
                        "socket option {tok}: the value is not a number from 0 to {}",
                        u32::MAX
                    ));
                    continue;
                }
            };
            match name.as_str() {
                "SO_KEEPALIVE" => o.keepalive = Some(n != 0),
                "TCP_KEEPIDLE" => o.keep_idle_secs = Some(n),
                "TCP_KEEPINTVL" => o.keep_interval_secs = Some(n),
                "TCP_KEEPCNT" => o.keep_count = Some(n),
                "TCP_USER_TIMEOUT" => o.user_timeout_ms = Some(n),
                "TCP_NODELAY" => o.nodelay = Some(n != 0),
                "SO_SNDBUF" => o.send_buffer = Some(n),
                "SO_RCVBUF" => o.receive_buffer = Some(n),
                "TCP_NOTSENT_LOWAT" => o.notsent_lowat = Some(n),
                k if IGNORED.contains(&k) => {
                    warnings.push(format!("socket option {tok} is not applied by smbx"))
                }
                _ => warnings.push(format!("unknown socket option {tok}")),
            }
        }
        (o, warnings)
    }

    /// These options, with `other`'s where it sets them.
    pub fn overridden_by(self, other: &SocketOptions) -> SocketOptions {
        SocketOptions {
            keepalive: other.keepalive.or(self.keepalive),
            keep_idle_secs: other.keep_idle_secs.or(self.keep_idle_secs),
            keep_interval_secs: other.keep_interval_secs.or(self.keep_interval_secs),
            keep_count: other.keep_count.or(self.keep_count),
            user_timeout_ms: other.user_timeout_ms.or(self.user_timeout_ms),
            nodelay: other.nodelay.or(self.nodelay),
            send_buffer: other.send_buffer.or(self.send_buffer),
            receive_buffer: other.receive_buffer.or(self.receive_buffer),
            notsent_lowat: other.notsent_lowat.or(self.notsent_lowat),
            congestion: other.congestion.or(self.congestion),
        }
    }

    /// Sets every option that is `Some` on `sock`. All are tried; the first
    /// failure is returned, naming its option.
    pub fn apply(&self, sock: &impl AsFd) -> std::io::Result<()> {
        let mut first = None;
        for (name, level, opt, v) in self.entries() {
            let Some(v) = v else { continue };
            if let Err(e) = set_int(sock, level, opt, v) {
                first.get_or_insert(std::io::Error::new(e.kind(), format!("{name}={v}: {e}")));
            }
        }
        if let Some(cc) = &self.congestion {
            if let Err(e) = set_congestion(sock, cc) {
                let what = format!("TCP_CONGESTION={}: {e}", cc.as_str());
                first.get_or_insert(std::io::Error::new(e.kind(), what));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The values `sock` has now, for every option.
    pub fn current(sock: &impl AsFd) -> std::io::Result<SocketOptions> {
        let get = |level, opt| get_int(sock, level, opt).map(|v| Some(v as u32));
        let flag = |level, opt| get_int(sock, level, opt).map(|v| Some(v != 0));
        Ok(SocketOptions {
            keepalive: flag(libc::SOL_SOCKET, libc::SO_KEEPALIVE)?,
            keep_idle_secs: get(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE)?,
            keep_interval_secs: get(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL)?,
            keep_count: get(libc::IPPROTO_TCP, libc::TCP_KEEPCNT)?,
            user_timeout_ms: get(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT)?,
            nodelay: flag(libc::IPPROTO_TCP, libc::TCP_NODELAY)?,
            send_buffer: get(libc::SOL_SOCKET, libc::SO_SNDBUF)?,
            receive_buffer: get(libc::SOL_SOCKET, libc::SO_RCVBUF)?,
            notsent_lowat: get(libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT)?,
            congestion: get_congestion(sock)?,
        })
    }

    fn entries(&self) -> [(&'static str, i32, i32, Option<u32>); 9] {
        let b = |f: Option<bool>| f.map(u32::from);
        [
            (
                "SO_KEEPALIVE",
                libc::SOL_SOCKET,
                libc::SO_KEEPALIVE,
                b(self.keepalive),
            ),
            (
                "TCP_KEEPIDLE",
                libc::IPPROTO_TCP,
                libc::TCP_KEEPIDLE,
                self.keep_idle_secs,
            ),
            (
                "TCP_KEEPINTVL",
                libc::IPPROTO_TCP,
                libc::TCP_KEEPINTVL,
                self.keep_interval_secs,
            ),
            (
                "TCP_KEEPCNT",
                libc::IPPROTO_TCP,
                libc::TCP_KEEPCNT,
                self.keep_count,
            ),
            (
                "TCP_USER_TIMEOUT",
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                self.user_timeout_ms,
            ),
            (
                "TCP_NODELAY",
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                b(self.nodelay),
            ),
            (
                "SO_SNDBUF",
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                self.send_buffer,
            ),
            (
                "SO_RCVBUF",
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                self.receive_buffer,
            ),
            (
                "TCP_NOTSENT_LOWAT",
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                self.notsent_lowat,
            ),
        ]
    }
}

/// Sets the integer socket option `opt` at `level` to `v` (clamped to a C int).
pub(crate) fn set_int(sock: &impl AsFd, level: i32, opt: i32, v: u32) -> std::io::Result<()> {
    let v = libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX);
    set_option(sock.as_fd(), level, opt, &v.to_ne_bytes())
}

/// Sets the socket's congestion control (TCP_CONGESTION).
fn set_congestion(sock: &impl AsFd, cc: &CongestionControl) -> std::io::Result<()> {
    set_option(
        sock.as_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        cc.as_str().as_bytes(),
    )
}

/// The socket's congestion control (TCP_CONGESTION; `None` if the kernel's name is not
/// one [`CongestionControl`] holds).
fn get_congestion(sock: &impl AsFd) -> std::io::Result<Option<CongestionControl>> {
    let mut buf = [0u8; 16];
    let n = get_option(
        sock.as_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        &mut buf,
    )?;
    let got = &buf[..n];
    let end = got.iter().position(|&b| b == 0).unwrap_or(got.len());
    Ok(std::str::from_utf8(&got[..end])
        .ok()
        .and_then(CongestionControl::new))
}

/// The integer socket option `opt` at `level`.
fn get_int(sock: &impl AsFd, level: i32, opt: i32) -> std::io::Result<i32> {
    let mut v = [0u8; std::mem::size_of::<libc::c_int>()];
    get_option(sock.as_fd(), level, opt, &mut v)?;
    Ok(libc::c_int::from_ne_bytes(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samba_syntax() {
        let (o, w) = SocketOptions::parse(
            "so_keepalive TCP_KEEPIDLE=3,TCP_KEEPINTVL=1\tTCP_KEEPCNT=2 TCP_USER_TIMEOUT=4000 TCP_NODELAY=0",
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            o,
            SocketOptions {
                keepalive: Some(true),
                keep_idle_secs: Some(3),
                keep_interval_secs: Some(1),
                keep_count: Some(2),
                user_timeout_ms: Some(4000),
                nodelay: Some(false),
                ..SocketOptions::default()
            }
        );
        let (o, w) = SocketOptions::parse("IPTOS_LOWDELAY SO_RCVBUF=x BOGUS=1 SO_SNDBUF=65536");
        assert_eq!(
            o,
            SocketOptions {
                send_buffer: Some(65536),
                ..SocketOptions::default()
            }
        );
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("IPTOS_LOWDELAY") && w[0].contains("not applied"));
        assert!(w[1].contains("SO_RCVBUF=x"));
        assert!(w[2].contains("unknown") && w[2].contains("BOGUS"));
        assert_eq!(
            SocketOptions::parse("  "),
            (SocketOptions::default(), vec![])
        );
    }

    #[test]
    fn a_congestion_control_is_a_name() {
        let (o, w) = SocketOptions::parse("tcp_congestion=reno TCP_NODELAY");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            o.congestion.map(|c| c.as_str().to_string()),
            Some("reno".into())
        );
        assert_eq!(o.nodelay, Some(true));
        for bad in [
            "TCP_CONGESTION",
            "TCP_CONGESTION=",
            "TCP_CONGESTION=a/b",
            "TCP_CONGESTION=sixteen_letters_",
        ] {
            let (o, w) = SocketOptions::parse(bad);
            assert_eq!(o.congestion, None, "{bad}");
            assert!(
                w.len() == 1 && w[0].contains("congestion control"),
                "{bad}: {w:?}"
            );
        }
        let cubic = SocketOptions::parse("TCP_CONGESTION=cubic").0;
        let reno = SocketOptions::parse("TCP_CONGESTION=reno").0;
        assert_eq!(cubic.overridden_by(&reno), reno);
        assert_eq!(reno.overridden_by(&SocketOptions::default()), reno);
    }

    #[test]
    fn later_options_override_earlier_ones() {
        let base = SocketOptions {
            keepalive: Some(true),
            keep_idle_secs: Some(60),
            ..SocketOptions::default()
        };
        let (user, _) = SocketOptions::parse("TCP_KEEPIDLE=5 SO_KEEPALIVE=0");
        let o = base.overridden_by(&user);
        assert_eq!((o.keepalive, o.keep_idle_secs), (Some(false), Some(5)));
        assert_eq!(base.overridden_by(&SocketOptions::default()), base);
    }

    #[test]
    fn applied_to_a_real_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (o, _) = SocketOptions::parse(
            "SO_KEEPALIVE TCP_KEEPIDLE=7 TCP_KEEPINTVL=2 TCP_KEEPCNT=4 TCP_USER_TIMEOUT=9000 TCP_NODELAY \
             TCP_NOTSENT_LOWAT=131072",
        );
        o.apply(&s).unwrap();
        let now = SocketOptions::current(&s).unwrap();
        assert_eq!(now.keepalive, Some(true));
        assert_eq!(now.keep_idle_secs, Some(7));
        assert_eq!(now.keep_interval_secs, Some(2));
        assert_eq!(now.keep_count, Some(4));
        assert_eq!(now.user_timeout_ms, Some(9000));
        assert_eq!(now.nodelay, Some(true));
        assert_eq!(now.notsent_lowat, Some(131072));
        // The kernel refuses an idle time of 0: the failure names the option, and
        // the options after it are still set.
        let bad = SocketOptions {
            keep_idle_secs: Some(0),
            keep_count: Some(5),
            ..SocketOptions::default()
        };
        let e = bad.apply(&s).unwrap_err();
        assert!(e.to_string().contains("TCP_KEEPIDLE=0"), "{e}");
        assert_eq!(SocketOptions::current(&s).unwrap().keep_count, Some(5));
    }

    /// reno is built into every kernel and always allowed.
    #[test]
    fn a_congestion_control_applied_to_a_real_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (o, _) = SocketOptions::parse("TCP_CONGESTION=reno");
        o.apply(&s).unwrap();
        let now = SocketOptions::current(&s).unwrap().congestion;
        assert_eq!(now.map(|c| c.as_str().to_string()), Some("reno".into()));
        // One the kernel does not have: the failure names it.
        let (o, _) = SocketOptions::parse("TCP_CONGESTION=no_such_cc");
        let e = o.apply(&s).unwrap_err();
        assert!(e.to_string().contains("TCP_CONGESTION=no_such_cc"), "{e}");
    }
}
