//! `smbx serve` end to end.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Kills the server when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `smbx serve PATH --port 0` with its state under `state`.
fn serve_any_port(share: &Path, state: &Path) -> Child {
    Child(
        Command::new(env!("CARGO_BIN_EXE_smbx"))
            .args(["serve", share.to_str().unwrap(), "--port", "0"])
            .env("XDG_STATE_HOME", state)
            .env("USER", "tester")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// The server's banner up to its smb:// line, and that line; panics (with the
/// banner and the server's error output) when the server stops without one.
fn banner(child: &mut Child) -> (Vec<String>, String) {
    let stdout = child.0.stdout.take().unwrap();
    let mut printed = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        printed.push(line.clone());
        if line.trim_start().starts_with("smb://") {
            let url = line.trim().to_string();
            return (printed, url);
        }
    }
    let mut err = String::new();
    if let Some(mut e) = child.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    panic!("no smb:// line in {printed:?}; stderr: {err}");
}

#[test]
fn two_zero_config_servers_on_any_port_share_a_state_directory() {
    // Port 0 names no port, so it must not name one control socket for both.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut a = serve_any_port(&dir.path().join("a"), &state);
    let (_, url_a) = banner(&mut a);
    let mut b = serve_any_port(&dir.path().join("b"), &state);
    let (_, url_b) = banner(&mut b);
    assert_ne!(url_a, url_b);
    let run = std::fs::read_dir(state.join("smbx/run")).unwrap();
    let mut sockets: Vec<String> = run
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    sockets.sort();
    let mut want = vec![
        format!("smbx-pid{}.sock", a.0.id()),
        format!("smbx-pid{}.sock", b.0.id()),
    ];
    want.sort();
    assert_eq!(sockets, want);
}

#[test]
fn zero_config_serves_and_prints_how_to_connect() {
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("files");
    let state = dir.path().join("state");
    let mut child = serve_any_port(&share, &state);
    let (printed, url) = banner(&mut child);
    assert!(printed
        .iter()
        .any(|l| l.contains("smbclient //127.0.0.1/share -p ") && l.contains("-U tester%")));
    assert!(
        printed.iter().any(|l| l.contains(share.to_str().unwrap())),
        "{printed:?}"
    );
    assert!(share.is_dir());

    // smb://tester:PASSWORD@127.0.0.1:PORT/share
    let rest = url.strip_prefix("smb://tester:").unwrap();
    let (password, rest) = rest.split_once('@').unwrap();
    assert_eq!(password.len(), 16);
    let port: u16 = rest
        .strip_prefix("127.0.0.1:")
        .and_then(|r| r.strip_suffix("/share"))
        .unwrap()
        .parse()
        .unwrap();
    TcpStream::connect(("127.0.0.1", port)).expect("server is listening");

    let passdb = state.join("smbx/smbpasswd");
    let mode = std::fs::metadata(&passdb).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let db = smbx_passdb::PassDb::open(&passdb).unwrap();
    assert_eq!(
        db.lookup("tester").unwrap().nt_hash,
        smbx_passdb::nt_hash(password)
    );
}
