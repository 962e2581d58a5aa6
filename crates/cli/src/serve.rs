//! `smbx serve`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use smbx_config::Config;

use crate::args::ServeArgs;
use crate::error::{other, CliError};
use crate::{logging, zeroconf};

/// Runs the server until it fails or is interrupted.
pub fn run(args: &ServeArgs, log_file: Option<&Path>) -> Result<(), CliError> {
    let (config, zero) = match &args.config {
        Some(file) => {
            if args.path.is_some() {
                return Err(other(
                    "PATH cannot be combined with --config; use a share section",
                ));
            }
            let mut config = Config::parse_file(file)?;
            if let Some(port) = args.port {
                config.global.smb_ports = vec![port];
            }
            if let Some(addr) = args.listen {
                config.global.interfaces = vec![addr.to_string()];
                config.global.bind_interfaces_only = true;
            }
            (config, None)
        }
        None => {
            let z = zeroconf::prepare(args.path.as_deref(), args.port, args.listen)?;
            (z.config.clone(), Some(z))
        }
    };
    logging::init(config.global.log_level, log_file)?;
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    preflight(&config);
    match crate::rlimit::raise_nofile() {
        Ok((before, after)) => {
            tracing::info!(before, after, "descriptor limit (RLIMIT_NOFILE)")
        }
        Err(e) => tracing::warn!("cannot raise the descriptor limit (RLIMIT_NOFILE): {e}"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("smbx")
        .build()
        .map_err(|e| other(format!("cannot start the async runtime: {e}")))?;
    let config = Arc::new(config);
    runtime.block_on(async move {
        let announce = |addrs: &[SocketAddr]| {
            if let (Some(z), Some(addr)) = (&zero, addrs.first()) {
                print!("{}", zeroconf::connection_help(z, *addr));
            }
        };
        tokio::select! {
            r = backend::serve(config, announce) => r,
            _ = shutdown_signal() => {
                tracing::info!("shutting down");
                Ok(())
            }
        }
    })
}

/// Warns about things that will surely not work: missing share directories,
/// no users and no guest shares.
fn preflight(config: &Config) {
    for s in &config.shares {
        if !s.path.is_dir() {
            tracing::warn!(share = %s.name, "share path {} is not a directory", s.path.display());
        }
    }
    let users = smbx_passdb::PassDb::open(&config.global.passdb_backend)
        .map(|db| db.list().len())
        .unwrap_or(0);
    if users == 0 && !config.shares.iter().any(|s| s.guest_ok) {
        tracing::warn!(
            "no users in {} and no guest shares: add one with `smbx user add NAME`",
            config.global.passdb_backend.display()
        );
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

mod backend {
    use super::*;

    /// Binds the configured listeners, reports them, and serves.
    pub async fn serve(
        config: Arc<Config>,
        announce: impl FnOnce(&[SocketAddr]),
    ) -> Result<(), CliError> {
        let server = smbx_server::Server::bind(config)
            .await
            .map_err(|e| other(e.to_string()))?;
        announce(&server.local_addrs());
        server
            .run()
            .await
            .map_err(|e| other(format!("server failed: {e}")))
    }
}
