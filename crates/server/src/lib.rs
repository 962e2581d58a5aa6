//! smbx-server: the SMB 2.0.2–3.1.1 file server core.
//!
//! Boundaries: owns the file server; imports wire, security, config, passdb, rpc, vfs
//! and transport, never the client or bench. Inside, state/ never imports the handlers
//! (tests/layering.rs).
//!
//! See `README.md` in this crate for the handler interface, how to go async, the
//! state tables and how to add a command.
//!
//! Layout:
//! - [`listener`]: bind per interface/port, accept loop, connection limit.
//! - [`control`]: the control socket of `smbx status` and `smbx reload`, and live reload.
//! - [`shutdown`]: the graceful-shutdown signal (stop reading, drain, close).
//! - [`memory`]: freed heap memory given back to the system when the server goes quiet.
//! - [`conn`]: per-connection read loop and writer task; [`conn::Connection::send`]
//!   queues a message at any time (interim responses, completions, oplock breaks).
//! - `dispatch`: frame → (unseal) → compound members → credits → handlers.
//! - `respond`: response headers, compound padding, signing, sealing, async completion.
//! - [`credits`]: the sequence window.
//! - [`state`]: sessions, trees, opens (server-wide tables resolved by id).
//! - [`breaks`]: delivery of oplock and lease breaks decided by `state::oplock`,
//!   and the waits of CREATE and rename for their acknowledgments.
//! - [`metrics`]: Prometheus counters fed by dispatch and the handlers, and the
//!   opt-in `/metrics` endpoint (`metrics listen`).
//! - [`handlers`]: one module per command.
//! - `security`: the seam to smbx-security (keys, signing, sealing, preauth).

#![deny(unsafe_code)]
#![warn(missing_docs)]
pub mod breaks;
pub mod conn;
pub mod control;
pub mod credits;
mod dispatch;
pub mod handlers;
pub mod kerberos;
pub mod listener;
pub mod memory;
pub mod metrics;
mod respond;
pub mod security;
pub mod shutdown;
pub mod state;

use std::io;
use std::sync::Arc;

pub use listener::Server;
use smbx_config::Config;

/// Binds the configured addresses and serves until an accept loop fails.
pub async fn run(config: Arc<Config>) -> io::Result<()> {
    Server::bind(config).await?.run().await
}
