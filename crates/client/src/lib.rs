//! smbx-client: an async SMB2/3 client.
//!
//! Boundaries: owns the SMB client; imports smbx-wire, smbx-security and smbx-
//! transport, never the server.
//!
//! ```no_run
//! # async fn demo() -> smbx_client::Result<()> {
//! use smbx_client::{Client, ClientOptions, OpenOptions};
//! let client = Client::connect("127.0.0.1:445", ClientOptions::default()).await?;
//! let session = client.login("alice", "secret", "").await?;
//! let tree = session.tree("share").await?;
//! let f = tree.open("dir/file.bin", &OpenOptions::create_truncate()).await?;
//! f.write_at(0, b"hello").await?;
//! let back = f.read_at(0, 5).await?;
//! f.close().await?;
//! for e in tree.list("dir").await? {
//!     println!("{} {}", e.name, e.info.size);
//! }
//! # let _ = back; Ok(()) }
//! ```
//!
//! * [`Client`]: one Direct TCP connection, negotiated (SMB 2.0.2–3.1.1).
//! * [`Session`]: an NTLMv2 logon (SPNEGO), with signing and encryption as negotiated.
//! * [`Tree`]: a share; path operations run as compounds.
//! * [`File`]: an open handle; reads and writes at offsets, split to the server's limits
//!   and sent concurrently within the credit window.
//!
//! * Multichannel: with [`ClientOptions::max_channels`] above 1, the first tree
//!   connect asks the server for its interfaces and binds further connections to
//!   the session; each request then goes to the channel with the fewest
//!   outstanding bytes per unit of link speed ([`Session::channel_stats`]).
//!   Channels to interfaces the server flags RDMA-capable are SMB Direct
//!   ([`ClientOptions::rdma_channels`]).
//!
//! * [`ReconnectingTree`]: a share that reconnects (connection, logon, tree) and retries
//!   idempotent operations once when the connection drops.
//!
//! Errors from the server are [`Error::Status`], whose Display is the NTSTATUS name.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod breaks;
pub mod channels;
mod client;
mod conn;
pub mod credits;
mod dial;
mod durable;
mod error;
mod failover;
mod file;
pub mod info;
pub mod options;
mod reconnect;
mod request_core;
mod tree;
pub mod url;

/// Shared bytes, as [`File::write_bytes`] takes them.
pub use bytes::Bytes;
pub use channels::ChannelStats;
pub use client::{Client, Negotiated, Session};
pub use conn::{Connection, Event, Response};
pub use error::{
    AuthError, DisconnectReason, Error, InvalidArgument, ProtocolError, Result, SecurityError,
};
pub use file::{access, create_options, disposition, share, File, FileId, OpenOptions, ReadData};
pub use info::{filetime_to_system, DirEntry, FileInfo, ATTR_DIRECTORY};
pub use options::{ClientOptions, Encryption, Kerberos, Signing, Transport, DEFAULT_SPIN_WAIT};
pub use reconnect::ReconnectingTree;
pub use smbx_security::cipher::CipherId;
pub use smbx_security::signing::SigningAlgorithm;
/// The socket options of [`ClientOptions::socket`].
pub use smbx_transport::SocketOptions;
pub use smbx_wire::ioctl::{
    IfAddr, NetworkInterface, NETWORK_IF_RDMA_CAPABLE, NETWORK_IF_RSS_CAPABLE,
};
pub use smbx_wire::Dialect;
pub use smbx_wire::{
    AccessMask, CreateDisposition, CreateOptions, FileAttributes, NtStatus, ShareAccess,
};
pub use tree::{smb_path, Tree};
pub use url::SmbUrl;
