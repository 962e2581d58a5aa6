//! The CLI's side of the control socket: which socket a command talks to, and the
//! server's part of it in `smbx serve` (claim the socket before anything is bound,
//! serve it once the server state exists, reload from the same file and options).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use smbx_config::{Config, DEFAULT_CONFIG_PATH};
use smbx_server::control::{self, ControlSocket, Loader, Request, Response};
use smbx_server::state::ServerState;

use crate::args::{ControlArgs, ServeArgs};
use crate::error::{other, CliError};
use crate::zeroconf::ZERO_CONFIG_PORT;

/// How long `smbx status` and `smbx reload` wait for the server's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The socket a client command talks to: `--socket`, else the `control socket` of
/// `--config` (or of /etc/smbx/smb.conf when it exists), else the one of zero
/// configuration on its default port ([`socket_of`]).
pub fn client_socket(args: &ControlArgs) -> Result<PathBuf, CliError> {
    if let Some(s) = &args.socket {
        return Ok(s.clone());
    }
    let file = match &args.config {
        Some(f) => Some(f.clone()),
        None => Some(PathBuf::from(DEFAULT_CONFIG_PATH)).filter(|p| p.exists()),
    };
    match file {
        Some(f) => match Config::parse_file(&f) {
            Ok(c) => socket_of(&c),
            // A file broken since the server started (the reload will say where):
            // its server is still found when the socket is the derived one.
            Err(e) => {
                let derived = control::derived_socket_path(Some(&f), 0);
                if derived.exists() {
                    Ok(derived)
                } else {
                    Err(e.into())
                }
            }
        },
        None => zero_config_socket(ZERO_CONFIG_PORT),
    }
}

/// The control socket of `config`: [`control::socket_path`] for a configuration
/// file; in zero configuration (no file), `run/smbx-portPORT.sock` in the state
/// directory that also holds its password database, so servers of different
/// users or state directories never share one. On port 0 (any free port) it is
/// `run/smbx-pidPID.sock`: such servers share no port, so they share no socket
/// either (`smbx status --socket` finds them; the server logs the path).
pub fn socket_of(config: &Config) -> Result<PathBuf, CliError> {
    if config.source.is_some() || config.global.control_socket.is_some() {
        return Ok(control::socket_path(config));
    }
    zero_config_socket(
        config
            .global
            .smb_ports
            .first()
            .copied()
            .unwrap_or(ZERO_CONFIG_PORT),
    )
}

fn zero_config_socket(port: u16) -> Result<PathBuf, CliError> {
    let name = match port {
        0 => format!("smbx-pid{}.sock", std::process::id()),
        p => format!("smbx-port{p}.sock"),
    };
    Ok(crate::zeroconf::state_dir()?.join("run").join(name))
}

/// Sends `req` to the server of `args` and returns its answer; a server-side error
/// is an `Err` with the server's message.
pub fn ask(args: &ControlArgs, req: &Request) -> Result<Response, CliError> {
    let path = client_socket(args)?;
    match control::request(&path, req, ANSWER_TIMEOUT).map_err(other)? {
        Response::Error { message } => Err(other(message)),
        r => Ok(r),
    }
}

/// Claims the control socket of `config` for `smbx serve` (before the listeners
/// are bound, so a second server on the same socket stops here, naming it).
pub fn claim(config: &Config) -> Result<ControlSocket, CliError> {
    ControlSocket::claim(&socket_of(config)?).map_err(other)
}

/// How `smbx serve` reads its configuration again on a reload: the same file
/// with the same command-line overrides; zero configuration has no file and keeps
/// `config` (the password database is still read again).
pub fn loader(args: &ServeArgs, config: &Config) -> Loader {
    let Some(file) = args.config.clone() else {
        let fixed = config.clone();
        return Arc::new(move || Ok(fixed.clone()));
    };
    let (port, listen) = (args.port, args.listen);
    Arc::new(move || load(&file, port, listen).map_err(|e| e.to_string()))
}

/// Reads `file` and applies `smbx serve`'s --port and --listen.
pub fn load(
    file: &Path,
    port: Option<u16>,
    listen: Option<std::net::IpAddr>,
) -> Result<Config, CliError> {
    let mut config = Config::parse_file(file)?;
    if let Some(port) = port {
        config.global.smb_ports = vec![port];
    }
    if let Some(addr) = listen {
        config.global.interfaces = vec![addr.into()];
        config.global.bind_interfaces_only = true;
    }
    Ok(config)
}

/// Serves the claimed socket for `state` (and reloads on SIGHUP).
pub fn start(
    socket: ControlSocket,
    state: Arc<ServerState>,
    loader: Loader,
) -> Result<(), CliError> {
    let path = socket.path().display().to_string();
    socket
        .serve(state, loader)
        .map_err(|e| other(format!("cannot serve control socket {path}: {e}")))
}
