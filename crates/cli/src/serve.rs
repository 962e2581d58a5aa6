//! `smbx serve`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use smbx_config::Config;
use smbx_server::state::ServerState;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::args::ServeArgs;
use crate::error::{other, CliError};
use crate::sd_notify::{self, Notifier};
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
            let config = crate::control::load(file, args.port, args.listen)?;
            (config, None)
        }
        None => {
            let z = zeroconf::prepare(args.path.as_deref(), args.port, args.listen)?;
            (z.config.clone(), Some(z))
        }
    };
    logging::init_with(&logging::LogOptions {
        level: config.global.log_level,
        file: log_file
            .map(Path::to_path_buf)
            .or_else(|| config.global.log_file.clone()),
        max_size_kib: config.global.max_log_size_kib,
    })?;
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    preflight(&config);
    // Before any listener is bound: a second server on the same socket stops here.
    let control = crate::control::claim(&config)?;
    let loader = crate::control::loader(args, &config);
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
    let notifier = match sd_notify::Notifier::from_env() {
        Ok(n) => n.map(Arc::new),
        Err(e) => {
            tracing::warn!("ignoring {}: {e}", sd_notify::NOTIFY_SOCKET);
            None
        }
    };
    runtime.block_on(async move {
        // Installed before anything is bound: a SIGTERM from now on is a graceful stop.
        let stop = StopSignals::install()?;
        let announce = |addrs: &[SocketAddr]| {
            if let (Some(z), Some(addr)) = (&zero, addrs.first()) {
                print!("{}", zeroconf::connection_help(z, *addr));
            }
        };
        backend::serve(config, announce, notifier, stop, (control, loader)).await
    })
}

/// SIGTERM and SIGINT, each a request to stop gracefully (SIGHUP is a reload).
struct StopSignals {
    term: Signal,
    int: Signal,
}

impl StopSignals {
    fn install() -> Result<StopSignals, CliError> {
        let install = |kind: SignalKind| {
            signal(kind).map_err(|e| other(format!("cannot install a signal handler: {e}")))
        };
        Ok(StopSignals {
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
        })
    }

    /// Resolves with the name of the first stop signal that arrives.
    async fn recv(mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
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

mod backend {
    use super::*;

    /// Binds the configured listeners, reports them (READY=1 to systemd once every
    /// listener accepts), and serves until a stop signal; then stops gracefully
    /// (STOPPING=1) and returns `Ok`.
    pub(super) async fn serve(
        config: Arc<Config>,
        announce: impl FnOnce(&[SocketAddr]),
        notifier: Option<Arc<Notifier>>,
        stop: StopSignals,
        (control, loader): (
            smbx_server::control::ControlSocket,
            smbx_server::control::Loader,
        ),
    ) -> Result<(), CliError> {
        let server = smbx_server::Server::bind(config)
            .await
            .map_err(|e| other(e.to_string()))?;
        announce(&server.local_addrs());
        let state = server.state();
        crate::control::start(control, state.clone(), loader)?;
        let _status = notifier.clone().map(|n| {
            let state = state.clone();
            notify(&n, &format!("READY=1\n{}", summary(&state)));
            AbortOnDrop(tokio::spawn(status_updates(n, state)))
        });
        let stopping = async {
            let signal = stop.recv().await;
            tracing::info!(
                signal,
                "stopping: no new connections, finishing requests in flight"
            );
            if let Some(n) = &notifier {
                notify(
                    n,
                    "STOPPING=1\nSTATUS=stopping: finishing requests in flight",
                );
            }
        };
        server
            .run_until(stopping)
            .await
            .map_err(|e| other(format!("server failed: {e}")))?;
        tracing::info!("stopped");
        Ok(())
    }

    /// The STATUS= line for the server's state now.
    fn summary(state: &ServerState) -> String {
        let connections = state.connections.len();
        sd_notify::status_line(connections, state.sessions.len())
    }

    fn notify(n: &Notifier, msg: &str) {
        if let Err(e) = n.notify(msg) {
            tracing::warn!("cannot notify systemd: {e}");
        }
    }

    /// Sends STATUS= every [`STATUS_INTERVAL`] when it changed.
    async fn status_updates(n: Arc<Notifier>, state: Arc<ServerState>) {
        let mut last = summary(&state);
        let mut tick = tokio::time::interval(STATUS_INTERVAL);
        loop {
            tick.tick().await;
            if state.shutdown.deadline().is_some() {
                return;
            }
            let now = summary(&state);
            if now != last {
                notify(&n, &now);
                last = now;
            }
        }
    }

    /// How often the STATUS= summary is refreshed.
    const STATUS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

    /// Aborts a task when dropped.
    struct AbortOnDrop(tokio::task::JoinHandle<()>);

    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
}
