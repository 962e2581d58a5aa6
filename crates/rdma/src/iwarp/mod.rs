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
    /// TCP_NOTSENT_LOWAT for the connection's socket (bytes; 0: the system's rule;
    /// `None`: left as the socket has it): how far the sender's writes get ahead of
    /// what it has sent. Without it a receiver slower than the sender (large READs at
    /// a deep queue) has up to a whole send buffer (4 MiB) of FPDUs queued ahead of
    /// its window, which its own acknowledgements then push out, through loopback's
    /// transmit and receive paths on its CPU. The server sets the value its TCP
    /// connections get (`socket options`, 1 MiB by default).
    pub notsent_lowat: Option<u32>,
}

impl Default for IwarpOptions {
    fn default() -> Self {
        IwarpOptions {
            mpa_revision: 2,
            crc: false,
            rtr: None,
            mss: None,
            handshake_timeout: std::time::Duration::from_secs(10),
            notsent_lowat: None,
        }
    }
}
