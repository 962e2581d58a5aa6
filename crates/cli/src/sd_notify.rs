//! The systemd notification protocol (`sd_notify(3)`): newline-separated
//! `KEY=VALUE` assignments in one datagram to the `AF_UNIX` socket named by
//! `$NOTIFY_SOCKET`, a path or, with a leading `@`, a Linux abstract name.
//! Written here instead of linking libsystemd: a datagram is all it takes.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// A connection to the service manager's notification socket.
pub struct Notifier {
    sock: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// The notifier for `$NOTIFY_SOCKET`: `Ok(None)` when it is unset or empty (not
    /// started by systemd), an error when it names no usable socket address.
    pub fn from_env() -> io::Result<Option<Notifier>> {
        match std::env::var_os(NOTIFY_SOCKET) {
            None => Ok(None),
            Some(v) if v.is_empty() => Ok(None),
            Some(v) => {
                let v = v.to_str().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "not valid UTF-8")
                })?;
                Notifier::new(v).map(Some)
            }
        }
    }

    /// A notifier for a socket named as in `$NOTIFY_SOCKET`: an absolute path, or
    /// `@name` for an abstract socket.
    pub fn new(name: &str) -> io::Result<Notifier> {
        let addr = parse_address(name)?;
        let sock = UnixDatagram::unbound()?;
        Ok(Notifier { sock, addr })
    }

    /// Sends `state` (e.g. `"READY=1\nSTATUS=serving"`) as one datagram.
    pub fn notify(&self, state: &str) -> io::Result<()> {
        let sent = self.sock.send_to_addr(state.as_bytes(), &self.addr)?;
        if sent != state.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "notification truncated",
            ));
        }
        Ok(())
    }
}

/// Parses a `$NOTIFY_SOCKET` value into a socket address.
fn parse_address(name: &str) -> io::Result<SocketAddr> {
    if let Some(abstract_name) = name.strip_prefix('@') {
        if abstract_name.is_empty() {
            return Err(invalid(name, "an empty abstract name"));
        }
        SocketAddr::from_abstract_name(abstract_name.as_bytes())
    } else if name.starts_with('/') {
        SocketAddr::from_pathname(name)
    } else {
        Err(invalid(
            name,
            "neither an absolute path nor an @abstract name",
        ))
    }
}

fn invalid(name: &str, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{NOTIFY_SOCKET}={name:?} is {what}"),
    )
}

/// The `STATUS=` line: what `systemctl status` shows under the unit.
pub fn status_line(connections: usize, sessions: usize) -> String {
    format!(
        "STATUS=serving: {connections} connection{}, {sessions} session{}",
        plural(connections),
        plural(sessions)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.to_str().unwrap()).unwrap();
        n.notify("READY=1\nSTATUS=serving").unwrap();
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=serving");
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let name = format!("smbx-test-notify-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let server = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier::new(&format!("@{name}")).unwrap();
        n.notify("STOPPING=1").unwrap();
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1");
    }

    #[test]
    fn refuses_other_addresses() {
        for bad in ["relative/path", "@", "vsock:2:1234"] {
            assert!(Notifier::new(bad).is_err(), "{bad}");
        }
        let long = format!("/{}", "x".repeat(200));
        assert!(Notifier::new(&long).is_err());
    }

    #[test]
    fn status_line_counts() {
        assert_eq!(
            status_line(1, 0),
            "STATUS=serving: 1 connection, 0 sessions"
        );
        assert_eq!(
            status_line(2, 1),
            "STATUS=serving: 2 connections, 1 session"
        );
    }
}
