//! The control socket end to end, through the built binary: `smbx serve` claims it
//! (mode 0600 in a 0700 directory), a second `smbx serve` on the same socket is
//! refused naming it, a stale socket of a killed server is replaced, and
//! `smbx status` / `smbx reload` find the server from the same `--config`;
//! a broken smb.conf is refused as a whole, naming the file and line.

#[path = "../../client/tests/common/mod.rs"]
mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SMBX: &str = env!("CARGO_BIN_EXE_smbx");

/// Kills the server when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn conf_text(dir: &Path, port: u16, extra_share: &str) -> String {
    format!(
        "[global]\n\
         smb ports = {port}\n\
         interfaces = 127.0.0.1\n\
         bind interfaces only = yes\n\
         passdb backend = smbpasswd:{dir}/smbpasswd\n\
         \n\
         [share]\n\
         path = {dir}/share\n\
         {extra_share}",
        dir = dir.display()
    )
}

/// Writes `dir`'s smb.conf on a free port and starts `smbx serve` on it, again on a
/// new port if that one was taken before the server bound it; returns the server
/// and its port once it listens.
fn serve(dir: &Path, log: &Path) -> (Child, u16) {
    common::retry_taken_ports(|| {
        let port = common::free_port();
        std::fs::write(dir.join("smb.conf"), conf_text(dir, port, "")).unwrap();
        let out = std::fs::File::create(log).unwrap();
        let mut child = Child(
            Command::new(SMBX)
                .args(["serve", "--config"])
                .arg(dir.join("smb.conf"))
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .unwrap(),
        );
        common::listening(port, &mut child.0, log).map(|()| (child, port))
    })
}

fn smbx(args: &[&str]) -> Output {
    Command::new(SMBX).args(args).output().unwrap()
}

/// `smbx status --config CONF --json`, retried (bounded) until the server answers.
fn status_json(conf: &Path, server: &mut Child) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = smbx(&["status", "--config", conf.to_str().unwrap(), "--json"]);
        if out.status.success() {
            return serde_json::from_slice(&out.stdout).unwrap();
        }
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "the server exited: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            Instant::now() < deadline,
            "no status within 30 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn one_server_per_socket_status_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("share")).unwrap();
    std::fs::create_dir(dir.path().join("new")).unwrap();
    let conf = dir.path().join("smb.conf");
    let log = dir.path().join("first.log");
    let (mut first, port) = serve(dir.path(), &log);

    let st = status_json(&conf, &mut first);
    assert_eq!(st["totals"]["sessions"], 0, "{st}");
    assert_eq!(st["sessions"].as_array().unwrap().len(), 0);
    assert_eq!(st["server"]["config_generation"], 0);
    assert_eq!(
        st["server"]["config_file"].as_str().unwrap(),
        conf.to_str().unwrap()
    );
    assert_eq!(st["server"]["pid"], first.0.id());
    let socket = PathBuf::from(st["server"]["control_socket"].as_str().unwrap());
    assert_eq!(mode(&socket), 0o600, "{}", socket.display());
    assert_eq!(mode(socket.parent().unwrap()), 0o700);

    // The human form names the same server.
    let out = smbx(&["status", "--config", conf.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("(pid {})", first.0.id())), "{text}");
    assert!(text.contains("0 session(s)"), "{text}");

    // A second server on the same socket stops before binding anything, naming it.
    let second = Command::new(SMBX)
        .args(["serve", "--config", conf.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("already running on control socket") && err.contains(socket.to_str().unwrap()),
        "{err}"
    );
    // ... and the first one still answers.
    assert_eq!(
        status_json(&conf, &mut first)["server"]["pid"],
        first.0.id()
    );

    // A broken file is refused as a whole: exit status 1, the file and line named,
    // in the output and in the server's log; the running configuration stays.
    let good = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        good.replace("[share]", "[share]\nread only = perhaps"),
    )
    .unwrap();
    let out = smbx(&["reload", "--config", conf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}:8:", conf.display());
    assert!(err.contains(&at) && err.contains("read only"), "{err}");
    assert!(err.contains("running configuration stays"), "{err}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains(&at), "{logged}");
    assert_eq!(
        status_json(&conf, &mut first)["server"]["config_generation"],
        0
    );

    // A good file with a new share: exit 0, the change reported.
    std::fs::write(
        &conf,
        conf_text(
            dir.path(),
            port,
            &format!("\n[new]\npath = {}/new\n", dir.path().display()),
        ),
    )
    .unwrap();
    let out = smbx(&["reload", "--config", conf.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("shares added: new"), "{text}");
    assert!(text.contains("generation 1"), "{text}");
    assert_eq!(
        status_json(&conf, &mut first)["server"]["config_generation"],
        1
    );

    // SIGHUP reloads too.
    std::fs::write(&conf, conf_text(dir.path(), port, "")).unwrap();
    let pid = first.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_json(&conf, &mut first)["server"]["config_generation"] != 2 {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A killed server leaves its socket behind; the next one replaces it.
    let _ = first.0.kill();
    let _ = first.0.wait();
    assert!(socket.exists(), "SIGKILL leaves the socket file");
    let (mut third, _) = serve(dir.path(), &dir.path().join("third.log"));
    assert_eq!(
        status_json(&conf, &mut third)["server"]["pid"],
        third.0.id()
    );
    assert_eq!(mode(&socket), 0o600);
}

#[test]
fn without_a_server_status_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nobody.sock");
    let out = smbx(&["status", "--socket", sock.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(sock.to_str().unwrap()), "{err}");
    assert!(err.contains("no smbx server answers"), "{err}");
}
