//! `smbx serve` end to end.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

/// Kills the server when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn zero_config_serves_and_prints_how_to_connect() {
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("files");
    let state = dir.path().join("state");
    let child = Command::new(env!("CARGO_BIN_EXE_smbx"))
        .args(["serve", share.to_str().unwrap(), "--port", "0"])
        .env("XDG_STATE_HOME", &state)
        .env("USER", "tester")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    let stdout = child.0.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut printed = Vec::new();
    let mut url = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push(line.clone());
        if line.trim_start().starts_with("smb://") {
            url = Some(line.trim().to_string());
            break;
        }
    }
    let url = url.unwrap_or_else(|| panic!("no smb:// line in {printed:?}"));
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
