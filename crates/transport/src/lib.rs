//! SMB message transports for the server and the client.
//!
//! Boundaries: owns moving whole SMB2 messages (Direct TCP, SMB Direct) and the host's
//! interface list; imports smbx-wire, smbx-direct and smbx-rdma, never the server or
//! the client, which both build on it.
//!
//! Direct TCP (a 4-byte length prefix per message) is read by one
//! [`tcp::FrameReader`] on both sides. This crate also holds SMB Direct as one
//! object-safe interface, [`DirectLink`]: whole SMB2 messages in and out
//! (optionally sent with remote invalidation), memory registration, and the
//! RDMA Write and RDMA Read that carry READ and WRITE payloads. It is
//! implemented once, generically, over any `smbx_rdma` provider
//! ([`direct::Link`]), so the server and the client never name a provider's
//! types; [`soft`] binds it to the soft-iWARP provider (listen and connect).
//! [`link`] puts both behind one message link (a sender and a receiver), so a
//! connection sends and receives without asking which transport it runs on: the
//! client's and the server's connections both run on it. The Direct TCP link holds
//! what only a socket can do (the one writer, READ data sent from the file with
//! sendfile, WRITE data spliced into a pipe); the server asks the link for
//! capabilities (can it send a file tail, how large may a message be), and uses
//! [`DirectLink`] itself only for RDMA transfers.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod direct;
pub mod link;
pub mod netif;
pub mod placement;
pub mod pool;
pub mod sockopt;
pub mod soft;
pub mod splice;
pub mod tcp;
pub mod verbs;

pub use direct::{DirectLink, Link, RegisteredBuf};
pub use pool::BufPool;
pub use smbx_direct::{BufferDescriptorV1, Config as DirectConfig, DirectError, NegotiatedParams};
pub use smbx_rdma::{Access, Driver, FileRange, FileSink};
pub use sockopt::SocketOptions;

/// The default SMB Direct port for iWARP ([MS-SMBD] 2.1).
pub const SMB_DIRECT_PORT: u16 = 5445;
