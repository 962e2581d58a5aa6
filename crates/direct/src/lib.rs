//! MS-SMBD (SMB Direct): SMB3 over RDMA.
//!
//! Boundaries: owns MS-SMBD; imports smbx-wire and smbx-rdma only, never the transport,
//! server or client.
//!
//! The protocol core is sans-IO: [`Connection`] takes received messages and
//! the current time, and hands out messages to send, receives to post,
//! events and deadlines. It implements negotiation for both roles, credit
//! accounting with the reserved last credit ([`credits`]), fragmentation and
//! bounded reassembly ([`reassembly`]), keepalive and the negotiate timeout.
//! [`pdu`] holds the wire formats, including the Buffer Descriptor V1 lists
//! SMB2 READ and WRITE carry for RDMA transfers.
//!
//! [`SmbDirectConnection`] ([`adapter`]) drives the core over any
//! `smbx_rdma` provider queue pair: `connect`/`accept`, `send_message`
//! (optionally as Send with Invalidate), `recv_message`, and `rdma_write` /
//! `rdma_read` against Buffer Descriptor V1 lists; a connection's own driver and its
//! provider's run in one task with `smbx_task::together`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod connection;
pub mod credits;
pub mod payload;
pub mod pdu;
pub mod pools;
pub mod reassembly;

pub use config::{
    Config, ConfigError, NegotiatedParams, DEFAULT_MESSAGE_SIZE, PEER_DEFAULT_SEND_SIZE,
};
pub use connection::{
    Connection, DisconnectReason, Event, OutgoingMessage, Role, SendError, Stats, Transmit,
};
pub use payload::{Payload, PayloadPool, PayloadStats};
pub use pdu::{BufferDescriptorV1, DataHeader, NegotiateRequest, NegotiateResponse, PduError};

pub mod adapter;
pub use adapter::{DirectError, Release, SmbDirectConnection};
