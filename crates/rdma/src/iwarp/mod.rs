//! The soft-iWARP provider: RDMA over plain TCP.
//!
//! Layers, bottom up: MPA (RFC 5044, enhanced connection setup RFC 6581)
//! frames FPDUs with a CRC-32C; DDP (RFC 5041) places tagged and untagged
//! segments; RDMAP (RFC 5040) carries Send, Send with Invalidate/SE, RDMA
//! Write, Read Request/Response and Terminate. Everything protocol-shaped is
//! sans-IO ([`crc`], [`mpa`], [`ddp`]); the tokio TCP driver is thin.

pub mod crc;
pub mod ddp;
mod driver;
pub mod engine;
pub mod mpa;
pub mod mr;
mod qp;
pub mod sansio;
mod soft;
pub mod stats;

pub use mr::{SoftMr, SoftPd};
pub use qp::SoftQp;
pub use sansio::{ReplyProgress, SansIoConn, SansIoConnecting};
pub use soft::{SoftConnectRequest, SoftConnecting, SoftIwarp, SoftListener};
pub use stats::{stats, ProviderStats};

/// Which zero-length message an initiator sends as the peer-to-peer
/// Ready-To-Receive in enhanced mode (RFC 6581).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rtr {
    /// Zero-length RDMA Read Request (Chelsio's default).
    Read,
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length Send (absorbed by the responding provider; it consumes no
    /// posted receive).
    Send,
}

/// What a connection's TCP socket is given before its driver starts, as the caller
/// gives its plain TCP connections: the server applies its `socket options` here, so
/// an SMB Direct connection's socket gets the keepalive and TCP_NOTSENT_LOWAT a TCP
/// connection gets. (Without TCP_NOTSENT_LOWAT a server sending large READs at a deep
/// queue kept up to a whole send buffer of FPDUs unsent, which the client's own
/// acknowledgements then pushed out through loopback on the client's CPU.)
#[derive(Clone)]
pub struct SocketSetup(std::sync::Arc<dyn Fn(std::os::fd::BorrowedFd<'_>) + Send + Sync>);

impl SocketSetup {
    /// Runs `f` on every connection's socket; `f` reports its own errors (a socket
    /// that refuses an option keeps the system's value and the connection goes on).
    pub fn new(f: impl Fn(std::os::fd::BorrowedFd<'_>) + Send + Sync + 'static) -> Self {
        SocketSetup(std::sync::Arc::new(f))
    }

    /// Gives `fd` (a connection's socket) what this setup sets.
    pub fn run(&self, fd: std::os::fd::BorrowedFd<'_>) {
        (self.0)(fd)
    }
}

impl std::fmt::Debug for SocketSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SocketSetup")
    }
}

/// Soft-iWARP options.
#[derive(Clone, Debug)]
pub struct IwarpOptions {
    /// MPA revision to offer as initiator (1 or 2). Revision 2 enables the
    /// enhanced connection setup carrying IRD/ORD. As responder both are accepted.
    pub mpa_revision: u8,
    /// Ask for CRC-32C (off by default: TCP's checksum already covers every byte, and
    /// CRC is used whenever the peer asks for it, as MPA requires).
    pub crc: bool,
    /// As initiator in enhanced mode, request peer-to-peer mode and send this RTR.
    pub rtr: Option<Rtr>,
    /// Override the TCP MSS used to size FPDUs (default: the connection's own, from its
    /// TCP_MAXSEG and the MSS it advertised).
    pub mss: Option<u32>,
    /// How long MPA connection setup may take.
    pub handshake_timeout: std::time::Duration,
    /// Sets up each connection's socket before its driver starts (the server's
    /// `socket options`: keepalive, TCP_NOTSENT_LOWAT, ...); `None` leaves the system's.
    pub socket_setup: Option<SocketSetup>,
    /// Offer (as initiator) and accept (as responder) smbx's large FPDUs
    /// ([`mpa::LargeFpdus`]): with a peer that offered them too, an RDMA Write or
    /// Read Response goes in FPDUs of up to [`LARGE_ULPDU`] bytes instead of
    /// MPA's 64 KiB. Standard peers never offer them. On by default; only with CRC off.
    pub large_fpdus: bool,
}

/// The largest ULPDU this provider receives in smbx's large FPDUs (and sends):
/// a 512 KiB RDMA Write or Read Response in one FPDU.
pub const LARGE_ULPDU: u32 = 512 * 1024 + ddp::UNTAGGED_HDR as u32;

impl Default for IwarpOptions {
    fn default() -> Self {
        IwarpOptions {
            mpa_revision: 2,
            crc: false,
            rtr: None,
            mss: None,
            handshake_timeout: std::time::Duration::from_secs(10),
            socket_setup: None,
            large_fpdus: true,
        }
    }
}
