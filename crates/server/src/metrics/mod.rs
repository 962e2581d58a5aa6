//! Prometheus metrics: a registry of relaxed atomic counters and histograms fed
//! from the request path, the text exposition format, and the opt-in HTTP
//! endpoint (`metrics listen`).
//!
//! The hot path takes no lock and allocates nothing: counts per command are
//! arrays indexed by the command code, statuses a small fixed table per command
//! ([`status_counts`]), latencies fixed atomic buckets ([`histogram`]). Gauges
//! (connections, sessions, channels, opens, SMB Direct resources) are read from
//! the state tables when scraped, not kept up to date per request.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `smbx_requests_total` | counter | `command`, `status` (`OTHER` past 16 statuses of one command) |
//! | `smbx_request_duration_seconds` | histogram | `command` |
//! | `smbx_bytes_total` | counter | `direction` (`read`, `write`: READ/WRITE file data), `transport` |
//! | `smbx_network_bytes_total` | counter | `direction` (`received`, `sent`: SMB2 messages), `transport` |
//! | `smbx_credits_granted_total` | counter | |
//! | `smbx_connections` | gauge | `transport` |
//! | `smbx_sessions` | gauge | |
//! | `smbx_channels` | gauge | `transport` |
//! | `smbx_opens` | gauge | |
//! | `smbx_direct_queue_pairs` | gauge | |
//! | `smbx_direct_memory_regions` | gauge | |
//! | `smbx_direct_registered_bytes` | gauge | |
//! | `smbx_direct_rdma_operations_total` | counter | `op` (`read`, `write`) |
//! | `smbx_direct_rdma_bytes_total` | counter | `op` |
//!
//! `transport` is `tcp` (Direct TCP) or `smbdirect` (SMB Direct).

pub mod exposition;
pub mod histogram;
pub mod http;
pub mod status_counts;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use smbx_wire::{Command, NtStatus};

use crate::state::ServerState;
use exposition::{Exposition, Kind};
use histogram::Histogram;
use status_counts::StatusCounts;

pub use http::Endpoint;

/// Slots per-command arrays have: every SMB2 command code, then one for codes
/// that name no command.
const COMMAND_SLOTS: usize = Command::OplockBreak as usize + 2;
/// The slot of an unknown command code.
const UNKNOWN_COMMAND: usize = COMMAND_SLOTS - 1;

/// The transport a connection runs over (its link says: [`crate::conn::Connection::transport`]).
pub use smbx_transport::link::Transport;

/// Which way file data or a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// READ data to the client; a message received from it.
    In = 0,
    /// WRITE data from the client; a message sent to it.
    Out = 1,
}

/// An RDMA transfer the server started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaOp {
    /// RDMA Read: WRITE data pulled from the client's buffers.
    Read = 0,
    /// RDMA Write: READ data pushed into the client's buffers.
    Write = 1,
}

/// One command's counts.
#[derive(Default)]
struct CommandMetrics {
    statuses: StatusCounts,
    latency: Histogram,
}

/// The counters of one server (in [`ServerState::metrics`]).
pub struct Metrics {
    commands: [CommandMetrics; COMMAND_SLOTS],
    /// READ (`[0]`) and WRITE (`[1]`) data bytes, by transport.
    data: [[AtomicU64; 2]; 2],
    /// Message bytes received (`[0]`) and sent (`[1]`), by transport.
    network: [[AtomicU64; 2]; 2],
    credits_granted: AtomicU64,
    rdma_ops: [AtomicU64; 2],
    rdma_bytes: [AtomicU64; 2],
    endpoint: OnceLock<SocketAddr>,
}

impl Default for Metrics {
    fn default() -> Self {
        fn pair() -> [AtomicU64; 2] {
            [AtomicU64::new(0), AtomicU64::new(0)]
        }
        Metrics {
            commands: std::array::from_fn(|_| CommandMetrics::default()),
            data: [pair(), pair()],
            network: [pair(), pair()],
            credits_granted: AtomicU64::new(0),
            rdma_ops: pair(),
            rdma_bytes: pair(),
            endpoint: OnceLock::new(),
        }
    }
}

impl Metrics {
    /// Counts a request answered with `status` after `elapsed` (from its
    /// arrival to its final response being built).
    pub fn request(&self, command: u16, status: NtStatus, elapsed: Duration) {
        let c = self.command(command);
        c.statuses.add(status.0);
        c.latency.observe(elapsed);
    }

    /// Counts file data a READ returned (`write` false) or a WRITE wrote.
    pub fn data(&self, write: bool, transport: Transport, bytes: usize) {
        self.data[usize::from(write)][transport as usize].fetch_add(bytes as u64, Relaxed);
    }

    /// Counts an SMB2 message (or compound, or TRANSFORM) received or sent.
    pub fn network(&self, dir: Direction, transport: Transport, bytes: usize) {
        self.network[dir as usize][transport as usize].fetch_add(bytes as u64, Relaxed);
    }

    /// Counts credits granted in a response.
    pub fn credits_granted(&self, n: u16) {
        self.credits_granted.fetch_add(u64::from(n), Relaxed);
    }

    /// Counts an RDMA transfer of `bytes` the server completed.
    pub fn rdma(&self, op: RdmaOp, bytes: usize) {
        self.rdma_ops[op as usize].fetch_add(1, Relaxed);
        self.rdma_bytes[op as usize].fetch_add(bytes as u64, Relaxed);
    }

    /// Requests of `command` answered so far (every status).
    pub fn requests(&self, command: Command) -> u64 {
        self.command(command as u16).statuses.total()
    }

    /// Where the endpoint listens, once it is bound.
    pub fn endpoint(&self) -> Option<SocketAddr> {
        self.endpoint.get().copied()
    }

    pub(crate) fn set_endpoint(&self, addr: SocketAddr) {
        let _ = self.endpoint.set(addr);
    }

    fn command(&self, code: u16) -> &CommandMetrics {
        let i = usize::from(code).min(UNKNOWN_COMMAND);
        &self.commands[i]
    }
}

/// The label of a command slot.
fn command_label(slot: usize) -> &'static str {
    let Some(c) = u16::try_from(slot).ok().and_then(Command::from_u16) else {
        return "UNKNOWN";
    };
    match c {
        Command::Negotiate => "NEGOTIATE",
        Command::SessionSetup => "SESSION_SETUP",
        Command::Logoff => "LOGOFF",
        Command::TreeConnect => "TREE_CONNECT",
        Command::TreeDisconnect => "TREE_DISCONNECT",
        Command::Create => "CREATE",
        Command::Close => "CLOSE",
        Command::Flush => "FLUSH",
        Command::Read => "READ",
        Command::Write => "WRITE",
        Command::Lock => "LOCK",
        Command::Ioctl => "IOCTL",
        Command::Cancel => "CANCEL",
        Command::Echo => "ECHO",
        Command::QueryDirectory => "QUERY_DIRECTORY",
        Command::ChangeNotify => "CHANGE_NOTIFY",
        Command::QueryInfo => "QUERY_INFO",
        Command::SetInfo => "SET_INFO",
        Command::OplockBreak => "OPLOCK_BREAK",
    }
}

/// A status label: its name (`STATUS_ACCESS_DENIED`) or `0xC0000022` if it has none.
fn status_label(status: u32) -> String {
    match NtStatus(status).name() {
        Some(n) => n.to_string(),
        None => format!("0x{status:08X}"),
    }
}

/// Live connections, sessions' channels by transport.
struct Live {
    connections: [u64; 2],
    channels: [u64; 2],
}

fn live(state: &ServerState) -> Live {
    let conns = state.live_connections();
    let mut l = Live {
        connections: [0; 2],
        channels: [0; 2],
    };
    for c in conns {
        let t = c.transport() as usize;
        l.connections[t] += 1;
        l.channels[t] += c.sessions.lock().len() as u64;
    }
    l
}

/// The text of one scrape of `state`.
pub fn render(state: &ServerState) -> String {
    let m = &state.metrics;
    let mut e = Exposition::default();

    e.family(
        "smbx_requests_total",
        Kind::Counter,
        "SMB2 requests answered, by command and NTSTATUS of the final response.",
    );
    for (slot, c) in m.commands.iter().enumerate() {
        let (seen, other) = c.statuses.snapshot();
        let command = command_label(slot);
        for (status, n) in seen {
            let status = status_label(status);
            e.sample(
                "smbx_requests_total",
                &[("command", command), ("status", &status)],
                n,
            );
        }
        if other > 0 {
            e.sample(
                "smbx_requests_total",
                &[("command", command), ("status", "OTHER")],
                other,
            );
        }
    }

    e.family(
        "smbx_request_duration_seconds",
        Kind::Histogram,
        "Time from a request's arrival to its final response, by command.",
    );
    for (slot, c) in m.commands.iter().enumerate() {
        let h = c.latency.snapshot();
        if h.count > 0 {
            e.histogram(
                "smbx_request_duration_seconds",
                &[("command", command_label(slot))],
                &h,
            );
        }
    }

    e.family(
        "smbx_bytes_total",
        Kind::Counter,
        "File data bytes moved by READ (read) and WRITE (write), by transport.",
    );
    for (dir, name) in [(0, "read"), (1, "write")] {
        for t in Transport::ALL {
            e.sample(
                "smbx_bytes_total",
                &[("direction", name), ("transport", t.label())],
                m.data[dir][t as usize].load(Relaxed),
            );
        }
    }

    e.family(
        "smbx_network_bytes_total",
        Kind::Counter,
        "SMB2 message bytes received and sent (without the Direct TCP length prefix), by transport.",
    );
    for (dir, name) in [(Direction::In, "received"), (Direction::Out, "sent")] {
        for t in Transport::ALL {
            e.sample(
                "smbx_network_bytes_total",
                &[("direction", name), ("transport", t.label())],
                m.network[dir as usize][t as usize].load(Relaxed),
            );
        }
    }

    e.family(
        "smbx_credits_granted_total",
        Kind::Counter,
        "Credits granted to clients in responses.",
    );
    e.sample(
        "smbx_credits_granted_total",
        &[],
        m.credits_granted.load(Relaxed),
    );

    let l = live(state);
    e.family(
        "smbx_connections",
        Kind::Gauge,
        "Client connections open, by transport.",
    );
    for t in Transport::ALL {
        e.sample(
            "smbx_connections",
            &[("transport", t.label())],
            l.connections[t as usize],
        );
    }
    e.family(
        "smbx_sessions",
        Kind::Gauge,
        "Sessions (logged on or logging on).",
    );
    e.sample("smbx_sessions", &[], state.sessions.len() as u64);
    e.family(
        "smbx_channels",
        Kind::Gauge,
        "Session channels (a session bound to a connection), by transport.",
    );
    for t in Transport::ALL {
        e.sample(
            "smbx_channels",
            &[("transport", t.label())],
            l.channels[t as usize],
        );
    }
    e.family(
        "smbx_opens",
        Kind::Gauge,
        "Open files, directories and pipes.",
    );
    e.sample("smbx_opens", &[], state.opens.len() as u64);

    let d = smbx_transport::soft::provider_stats();
    e.family(
        "smbx_direct_queue_pairs",
        Kind::Gauge,
        "RDMA queue pairs of the soft-iWARP provider (one per SMB Direct connection).",
    );
    e.sample("smbx_direct_queue_pairs", &[], d.queue_pairs);
    e.family(
        "smbx_direct_memory_regions",
        Kind::Gauge,
        "RDMA memory regions registered (receive buffers and RDMA transfers).",
    );
    e.sample("smbx_direct_memory_regions", &[], d.memory_regions);
    e.family(
        "smbx_direct_registered_bytes",
        Kind::Gauge,
        "Bytes of memory registered for RDMA.",
    );
    e.sample("smbx_direct_registered_bytes", &[], d.registered_bytes);
    e.family(
        "smbx_direct_rdma_operations_total",
        Kind::Counter,
        "RDMA transfers the server completed: read (WRITE data pulled), write (READ data pushed).",
    );
    for (op, name) in [(RdmaOp::Read, "read"), (RdmaOp::Write, "write")] {
        e.sample(
            "smbx_direct_rdma_operations_total",
            &[("op", name)],
            m.rdma_ops[op as usize].load(Relaxed),
        );
    }
    e.family(
        "smbx_direct_rdma_bytes_total",
        Kind::Counter,
        "Bytes moved by the server's RDMA transfers.",
    );
    for (op, name) in [(RdmaOp::Read, "read"), (RdmaOp::Write, "write")] {
        e.sample(
            "smbx_direct_rdma_bytes_total",
            &[("op", name)],
            m.rdma_bytes[op as usize].load(Relaxed),
        );
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_statuses_are_labelled() {
        assert_eq!(COMMAND_SLOTS, 20);
        assert_eq!(command_label(Command::Read as usize), "READ");
        assert_eq!(command_label(Command::OplockBreak as usize), "OPLOCK_BREAK");
        assert_eq!(command_label(UNKNOWN_COMMAND), "UNKNOWN");
        assert_eq!(status_label(0), "STATUS_SUCCESS");
        assert_eq!(status_label(0xC0FF_EE00), "0xC0FFEE00");
        let m = Metrics::default();
        m.request(
            Command::Read as u16,
            NtStatus::SUCCESS,
            Duration::from_micros(30),
        );
        m.request(0xFFFF, NtStatus::INVALID_PARAMETER, Duration::ZERO);
        assert_eq!(m.requests(Command::Read), 1);
        assert_eq!(m.commands[UNKNOWN_COMMAND].statuses.total(), 1);
    }
}
