//! Zero configuration: share one directory on localhost with a fresh user.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use rand::Rng;
use smbx_config::{Config, Global, ShareConfig};
use smbx_passdb::PassDb;

use crate::error::{other, CliError};

/// Port used when no configuration is given (445 needs privileges).
pub const ZERO_CONFIG_PORT: u16 = 4445;
/// Name of the share in zero configuration.
pub const SHARE_NAME: &str = "share";

/// Everything zero configuration decided.
#[derive(Debug)]
pub struct ZeroConf {
    /// The configuration handed to the server.
    pub config: Config,
    /// The user created.
    pub user: String,
    /// Its password.
    pub password: String,
}

/// `$XDG_STATE_HOME/smbx`, else `~/.local/state/smbx`.
pub fn state_dir() -> Result<PathBuf, CliError> {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        if x.is_absolute() {
            return Ok(x.join("smbx"));
        }
    }
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => Ok(h.join(".local/state/smbx")),
        _ => Err(other(
            "cannot find a state directory: set XDG_STATE_HOME or HOME, or use --config",
        )),
    }
}

/// `$USER` if it is a usable name, else `smbx`.
fn default_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| {
            !u.is_empty()
                && u.len() <= 64
                && u.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
        .unwrap_or_else(|| "smbx".into())
}

/// A random password of 16 letters and digits.
pub fn random_password() -> String {
    rand::thread_rng()
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(16)
        .map(char::from)
        .collect()
}

/// Creates the share directory and the user, and builds the configuration.
pub fn prepare(
    path: Option<&Path>,
    port: Option<u16>,
    listen: Option<IpAddr>,
) -> Result<ZeroConf, CliError> {
    let dir = path.map_or_else(|| PathBuf::from("share"), Path::to_path_buf);
    std::fs::create_dir_all(&dir)
        .map_err(|e| other(format!("cannot create {}: {e}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| other(format!("cannot resolve {}: {e}", dir.display())))?;
    if !dir.is_dir() {
        return Err(other(format!("{} is not a directory", dir.display())));
    }

    let passdb = state_dir()?.join("smbpasswd");
    let user = default_user();
    let password = random_password();
    PassDb::open(&passdb)
        .and_then(|mut db| db.add_or_update(&user, &password))
        .map_err(|e| other(format!("cannot write {}: {e}", passdb.display())))?;

    let listen = listen.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let global = Global {
        interfaces: vec![listen.into()],
        bind_interfaces_only: true,
        smb_ports: vec![port.unwrap_or(ZERO_CONFIG_PORT)],
        passdb_backend: passdb,
        log_level: 1,
        ..Global::default()
    };
    let mut share = ShareConfig::with_defaults(SHARE_NAME, dir, &global);
    share.read_only = false;
    share.comment = "smbx zero-configuration share".into();
    Ok(ZeroConf {
        config: Config {
            global,
            shares: vec![share],
            warnings: Vec::new(),
            source: None,
        },
        user,
        password,
    })
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn url_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// How to connect, for the operator.
pub fn connection_help(z: &ZeroConf, addr: SocketAddr) -> String {
    let host = match addr.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    };
    let port = addr.port();
    let share = &z.config.shares[0];
    format!(
        "smbx: sharing {path} as \"{SHARE_NAME}\" on {host}:{port}\n\
         \x20 user {user}, password {pw}\n\
         \x20 smbclient //{host}/{SHARE_NAME} -p {port} -U {user}%{pw}\n\
         \x20 smb://{uuser}:{upw}@{host}:{port}/{SHARE_NAME}\n",
        path = share.path.display(),
        user = z.user,
        pw = z.password,
        uuser = url_escape(&z.user),
        upw = url_escape(&z.password),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_16_alphanumerics() {
        let p = random_password();
        assert_eq!(p.len(), 16);
        assert!(p.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(p, random_password());
    }

    #[test]
    fn escapes_urls() {
        assert_eq!(url_escape("a b@c"), "a%20b%40c");
        assert_eq!(url_escape("Az09-._~"), "Az09-._~");
    }
}
