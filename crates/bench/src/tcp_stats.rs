//! The kernel's TCP counters of the bench's network namespace (`/proc/net/snmp` and
//! `/proc/net/netstat`), read at the start and end of the measured phase: how many
//! segments were retransmitted, how often a receive window was closed or a receive
//! queue dropped or pruned data, over the run. They count every TCP socket of the
//! namespace, so they describe the run alone only when nothing else uses TCP there
//! (bench/scaling.sh runs its servers and client in a network namespace of their own).

use serde::Serialize;

/// TCP counters, or their growth over the measured phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TcpCounters {
    /// Segments sent (`Tcp: OutSegs`).
    pub out_segs: u64,
    /// Segments retransmitted (`Tcp: RetransSegs`).
    pub retrans_segs: u64,
    /// Tail loss probes sent (`TCPLossProbes`): a sender heard no ACK in time.
    pub loss_probes: u64,
    /// Retransmission timeouts (`TCPTimeouts`).
    pub timeouts: u64,
    /// Segments that arrived out of order and were queued (`TCPOFOQueue`).
    pub ofo_queue: u64,
    /// Times a receiver had no room and wanted to advertise a zero window
    /// (`TCPWantZeroWindowAdv`): its reader was slower than its sender.
    pub zero_window_adv: u64,
    /// Segments dropped because the receive queue was full (`TCPRcvQDrop`).
    pub rcvq_drop: u64,
    /// Receive queues pruned for memory (`PruneCalled`).
    pub prune_called: u64,
    /// Segments collapsed to save receive memory (`TCPRcvCollapsed`).
    pub rcv_collapsed: u64,
}

impl TcpCounters {
    /// The counters of the calling thread's network namespace, or `None` when they cannot
    /// be read (no /proc).
    pub fn take() -> Option<TcpCounters> {
        let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
        let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
        Some(TcpCounters::parse(&snmp, &netstat))
    }

    /// Counters from the text of `/proc/net/snmp` and `/proc/net/netstat`: pairs of
    /// lines, a header of names and a line of values, each starting with its group
    /// (`Tcp:`, `TcpExt:`). A counter missing from the text (an older kernel) is 0.
    pub fn parse(snmp: &str, netstat: &str) -> TcpCounters {
        let tcp = group(snmp, "Tcp:");
        let ext = group(netstat, "TcpExt:");
        let get = |g: &[(String, u64)], name: &str| {
            g.iter().find(|(n, _)| n == name).map_or(0, |&(_, v)| v)
        };
        TcpCounters {
            out_segs: get(&tcp, "OutSegs"),
            retrans_segs: get(&tcp, "RetransSegs"),
            loss_probes: get(&ext, "TCPLossProbes"),
            timeouts: get(&ext, "TCPTimeouts"),
            ofo_queue: get(&ext, "TCPOFOQueue"),
            zero_window_adv: get(&ext, "TCPWantZeroWindowAdv"),
            rcvq_drop: get(&ext, "TCPRcvQDrop"),
            prune_called: get(&ext, "PruneCalled"),
            rcv_collapsed: get(&ext, "TCPRcvCollapsed"),
        }
    }

    /// What each counter grew by from `earlier` to `self` (0 where it went back).
    pub fn since(&self, earlier: &TcpCounters) -> TcpCounters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        TcpCounters {
            out_segs: d(self.out_segs, earlier.out_segs),
            retrans_segs: d(self.retrans_segs, earlier.retrans_segs),
            loss_probes: d(self.loss_probes, earlier.loss_probes),
            timeouts: d(self.timeouts, earlier.timeouts),
            ofo_queue: d(self.ofo_queue, earlier.ofo_queue),
            zero_window_adv: d(self.zero_window_adv, earlier.zero_window_adv),
            rcvq_drop: d(self.rcvq_drop, earlier.rcvq_drop),
            prune_called: d(self.prune_called, earlier.prune_called),
            rcv_collapsed: d(self.rcv_collapsed, earlier.rcv_collapsed),
        }
    }
}

/// The (name, value) pairs of `prefix`'s header and value lines (the first pair of lines
/// starting with it); values that are not unsigned numbers (`MaxConn` is -1) are skipped.
fn group(text: &str, prefix: &str) -> Vec<(String, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return Vec::new();
    };
    names
        .split_whitespace()
        .skip(1)
        .zip(values.split_whitespace().skip(1))
        .filter_map(|(n, v)| Some((n.to_string(), v.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 100
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 10 10 0 0 4 592413 590846 1567 0 3 0
Udp: InDatagrams NoPorts
Udp: 5 0
";
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent PruneCalled TCPLossProbes TCPTimeouts TCPOFOQueue TCPWantZeroWindowAdv TCPRcvQDrop TCPRcvCollapsed
TcpExt: 0 2 41 1 3344 6 7 8
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
";

    #[test]
    fn reads_the_tcp_groups_by_name() {
        let c = TcpCounters::parse(SNMP, NETSTAT);
        assert_eq!(
            c,
            TcpCounters {
                out_segs: 590846,
                retrans_segs: 1567,
                loss_probes: 41,
                timeouts: 1,
                ofo_queue: 3344,
                zero_window_adv: 6,
                rcvq_drop: 7,
                prune_called: 2,
                rcv_collapsed: 8,
            }
        );
    }

    #[test]
    fn missing_or_malformed_text_gives_zeros() {
        assert_eq!(TcpCounters::parse("", ""), TcpCounters::default());
        let c = TcpCounters::parse("Tcp: OutSegs\n", "TcpExt: TCPTimeouts\nTcpExt: x\n");
        assert_eq!(c, TcpCounters::default());
    }

    #[test]
    fn growth_never_goes_below_zero() {
        let a = TcpCounters::parse(SNMP, NETSTAT);
        let mut b = a;
        b.retrans_segs += 5;
        b.out_segs = 0;
        let d = b.since(&a);
        assert_eq!(d.retrans_segs, 5);
        assert_eq!(d.out_segs, 0);
        assert_eq!(d.ofo_queue, 0);
    }

    #[test]
    fn this_namespace_can_be_read() {
        if std::path::Path::new("/proc/net/snmp").exists() {
            assert!(TcpCounters::take().is_some());
        }
    }
}
