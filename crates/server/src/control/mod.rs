//! The control socket: a Unix stream socket through which `smbx status` and
//! `smbx reload` talk to a running server.
//!
//! - Where: `control socket` in `[global]`, else derived from the configuration
//!   file ([`socket_path`]): `/run/smbx/smbx.sock` for the default
//!   `/etc/smbx/smb.conf` when run as root.
//! - Who: the socket is mode 0600 in a directory of mode 0700, both owned by the
//!   user running the server (root in production); a client of any other uid is
//!   refused too (SO_PEERCRED).
//! - One server per socket: [`ControlSocket::claim`] refuses while another server
//!   answers on it, and replaces a stale socket file nobody listens on.
//! - Protocol ([`protocol`]): one bounded JSON request line, one JSON response line.

pub mod protocol;
pub mod reload;
pub mod status;

use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use smbx_config::Config;
use tokio::io::AsyncWriteExt;

use crate::state::ServerState;
pub use protocol::{Request, Response};
pub use reload::{Loader, ReloadReport};
pub use status::Status;

/// The control socket of the default configuration when run as root.
pub const DEFAULT_SOCKET: &str = "/run/smbx/smbx.sock";

/// Clients served at once; more wait in the listen backlog.
const MAX_CLIENTS: usize = 4;

/// The longest path a Unix socket address holds (sun_path less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The control socket of `config`: its `control socket`, else one derived from the
/// configuration file ([`derived_socket_path`]).
pub fn socket_path(config: &Config) -> PathBuf {
    if let Some(p) = &config.global.control_socket {
        return p.clone();
    }
    let port = config.global.smb_ports.first().copied().unwrap_or(445);
    derived_socket_path(config.source.as_deref(), port)
}

/// The control socket for a server started from `config_file` (or, without one,
/// zero configuration on `port`), in the runtime directory: `/run/smbx` for root,
/// else `$XDG_RUNTIME_DIR/smbx` or `/tmp/smbx-UID`. The default configuration's is
/// `smbx.sock`; another file's is `smbx-HASH.sock`, HASH naming its canonical path,
/// so servers of different files never share one.
pub fn derived_socket_path(config_file: Option<&Path>, port: u16) -> PathBuf {
    let dir = runtime_dir();
    let Some(file) = config_file else {
        return dir.join(format!("smbx-port{port}.sock"));
    };
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let file = canonical(file);
    if file == canonical(Path::new(smbx_config::DEFAULT_CONFIG_PATH)) {
        return dir.join("smbx.sock");
    }
    dir.join(format!(
        "smbx-{:016x}.sock",
        fnv1a(file.as_os_str().as_bytes())
    ))
}

fn runtime_dir() -> PathBuf {
    let uid = euid();
    if uid == 0 {
        return PathBuf::from("/run/smbx");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(x) if x.is_absolute() => x.join("smbx"),
        _ => PathBuf::from(format!("/tmp/smbx-{uid}")),
    }
}

/// 64-bit FNV-1a: a stable name for a path (not a security measure).
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The effective user id of this process.
fn euid() -> u32 {
    smbx_vfs::process_ids().0
}

/// A claimed control socket, bound and not yet serving.
pub struct ControlSocket {
    path: PathBuf,
    listener: std::os::unix::net::UnixListener,
}

impl ControlSocket {
    /// Binds `path` (mode 0600) in its directory (created mode 0700; an existing one
    /// must belong to this user, and loses group and other access). Refuses while
    /// another server answers on `path`; a stale socket file is replaced.
    pub fn claim(path: &Path) -> Result<ControlSocket, String> {
        let shown = path.display();
        if path.as_os_str().len() > MAX_SOCKET_PATH || !path.is_absolute() {
            return Err(format!(
                "control socket {shown}: need an absolute path of at most {MAX_SOCKET_PATH} bytes"
            ));
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .ok_or_else(|| format!("control socket {shown} has no directory"))?;
        secure_dir(dir)?;
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(format!(
                    "another smbx server is already running on control socket {shown}; \
                     stop it first, or give this server its own `control socket` in [global]"
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                // Nobody listens: a stale socket of a server that is gone.
                let meta = std::fs::symlink_metadata(path)
                    .map_err(|m| format!("control socket {shown}: {e} ({m})"))?;
                if !meta.file_type().is_socket() {
                    return Err(format!(
                        "control socket {shown} exists and is not a socket; remove it"
                    ));
                }
                tracing::info!(path = %shown, "replacing a stale control socket");
                std::fs::remove_file(path)
                    .map_err(|e| format!("cannot remove stale control socket {shown}: {e}"))?;
            }
        }
        let listener = std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| format!("cannot create control socket {shown}: {e}"))?;
        // The 0700 directory keeps everyone else out until the mode is set.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("cannot set the mode of control socket {shown}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("control socket {shown}: {e}"))?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
            listener,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves status and reload requests for `server` on the current tokio runtime
    /// until it shuts down (the socket file is removed then), and reloads on
    /// SIGHUP. `loader` reads the configuration again.
    pub fn serve(self, server: Arc<ServerState>, loader: Loader) -> io::Result<()> {
        let listener = tokio::net::UnixListener::from_std(self.listener)?;
        reload::spawn_sighup(server.clone(), loader.clone())?;
        let guard = RemoveOnDrop(self.path.clone());
        let me = Arc::new(Serving {
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            path: self.path.display().to_string(),
        });
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
        tracing::info!(path = %self.path.display(), "control socket ready");
        tokio::spawn(async move {
            let _guard = guard;
            loop {
                let stream = match listener.accept().await {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "control socket accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (server, loader, me) = (server.clone(), loader.clone(), me.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    answer(stream, server, loader, me).await;
                });
            }
        });
        Ok(())
    }
}

/// What a serving control socket tells about itself.
struct Serving {
    started_unix: u64,
    path: String,
}

/// Removes the socket file when the serving task ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Creates `dir` mode 0700, or checks that an existing one belongs to this user
/// and takes group and other access away from it.
fn secure_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create control socket directory {shown}: {e}"))?;
    let meta = std::fs::metadata(dir).map_err(|e| format!("{shown}: {e}"))?;
    if meta.uid() != euid() {
        return Err(format!(
            "control socket directory {shown} belongs to uid {}, not to the user running \
             smbx (uid {}); choose another `control socket`",
            meta.uid(),
            euid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {shown} mode 0700: {e}"))?;
    }
    Ok(())
}

/// Serves one client: its uid is checked, one request read and answered.
async fn answer(
    mut stream: tokio::net::UnixStream,
    server: Arc<ServerState>,
    loader: Loader,
    me: Arc<Serving>,
) {
    let uid = stream.peer_cred().map(|c| c.uid()).ok();
    let response = match uid {
        Some(u) if u == 0 || u == euid() => match protocol::read_request(&mut stream).await {
            Ok(req) => handle(req, &server, &loader, &me).await,
            Err(message) => Response::Error { message },
        },
        _ => {
            tracing::warn!(
                ?uid,
                "control socket client refused: not root or the server's user"
            );
            Response::Error {
                message: "permission denied".into(),
            }
        }
    };
    let mut out = match serde_json::to_vec(&response) {
        Ok(v) => v,
        Err(e) => format!("{{\"result\":\"error\",\"message\":\"{e}\"}}").into_bytes(),
    };
    out.push(b'\n');
    let _ = tokio::time::timeout(protocol::REQUEST_TIMEOUT, async {
        let _ = stream.write_all(&out).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn handle(
    req: Request,
    server: &Arc<ServerState>,
    loader: &Loader,
    me: &Serving,
) -> Response {
    match req {
        Request::Status => {
            let settings = server.settings.current();
            let info = status::ServerInfo {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").into(),
                config_file: settings
                    .config
                    .source
                    .as_ref()
                    .map(|p| p.display().to_string()),
                config_generation: settings.generation,
                started_unix: me.started_unix,
                control_socket: me.path.clone(),
            };
            Response::Status(Box::new(status::snapshot(server, info)))
        }
        Request::Reload => {
            let (s, l) = (server.clone(), loader.clone());
            match tokio::task::spawn_blocking(move || reload::reload(&s, &l)).await {
                Ok(Ok(r)) => Response::Reloaded(r),
                Ok(Err(e)) => Response::Error {
                    message: format!("reload refused, the running configuration stays: {e}"),
                },
                Err(e) => Response::Error {
                    message: format!("reload failed: {e}"),
                },
            }
        }
    }
}

/// Sends `req` to the server on `path` and waits up to `timeout` for its answer
/// (the client side of `smbx status` and `smbx reload`; blocking).
pub fn request(path: &Path, req: &Request, timeout: Duration) -> Result<Response, String> {
    let shown = path.display();
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => format!(
            "no smbx server answers on control socket {shown} ({e}); is `smbx serve` running \
             with the same --config?"
        ),
        io::ErrorKind::PermissionDenied => format!(
            "cannot reach control socket {shown}: permission denied (run as root, or as the \
             user running smbx serve)"
        ),
        _ => format!("cannot reach control socket {shown}: {e}"),
    })?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("control socket {shown}: {e}"))?;
    let mut line = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    line.push(b'\n');
    s.write_all(&line)
        .map_err(|e| format!("cannot send to control socket {shown}: {e}"))?;
    let mut buf = Vec::new();
    s.take(protocol::MAX_RESPONSE)
        .read_to_end(&mut buf)
        .map_err(|e| format!("no answer on control socket {shown}: {e}"))?;
    serde_json::from_slice(&buf)
        .map_err(|e| format!("unreadable answer on control socket {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_paths() {
        let a = derived_socket_path(Some(Path::new("/nonexistent/a/smb.conf")), 445);
        let b = derived_socket_path(Some(Path::new("/nonexistent/b/smb.conf")), 445);
        assert_ne!(a, b);
        assert_eq!(
            a,
            derived_socket_path(Some(Path::new("/nonexistent/a/smb.conf")), 1)
        );
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("smbx-") && name.ends_with(".sock"),
            "{name}"
        );
        let z = derived_socket_path(None, 4445);
        assert!(z.ends_with("smbx-port4445.sock"), "{}", z.display());
        let d = derived_socket_path(Some(Path::new(smbx_config::DEFAULT_CONFIG_PATH)), 445);
        assert!(d.ends_with("smbx.sock"));
        if euid() == 0 {
            assert_eq!(d, PathBuf::from(DEFAULT_SOCKET));
        }
    }

    #[test]
    fn configured_path_wins() {
        let mut c = Config::default();
        c.global.control_socket = Some("/x/y.sock".into());
        assert_eq!(socket_path(&c), PathBuf::from("/x/y.sock"));
    }
}
