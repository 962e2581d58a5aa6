//! Real SMB servers for the client tests: Samba's smbd, and smbx, each started on
//! 127.0.0.1 with a free port and its own configuration under a temporary directory.
//! A missing server binary fails the test loudly; it never skips.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use smbx_client::{Client, ClientOptions, Dialect, Session, Transport, Tree};

/// The unix and SMB user the servers know.
pub const USER: &str = "alice";
/// Its password.
pub const PASSWORD: &str = "Alice-Passw0rd!";

/// A running server; killed and cleaned up on drop.
pub struct Server {
    pub kind: &'static str,
    pub port: u16,
    pub root: tempfile::TempDir,
    child: Child,
    log: PathBuf,
}

impl Server {
    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
    /// The directory behind share `name`.
    pub fn share_dir(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }
    /// The server's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM lets smbd clean up; fall back to SIGKILL below.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port that was free a moment ago (bind port 0 and let go); start
/// servers on it through [`retry_taken_ports`].
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .unwrap()
        .port()
}

fn which(bin: &str) -> Option<PathBuf> {
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
    {
        let p = Path::new(dir).join(bin);
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

fn ensure_unix_user() {
    let ok = Command::new("id")
        .arg(USER)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(ok, Ok(s) if s.success()) {
        let st = Command::new("useradd")
            .args(["-M", "-s", "/usr/sbin/nologin", USER])
            .status()
            .expect("run useradd");
        assert!(st.success(), "useradd {USER} failed");
    }
}

fn make_root(shares: &[&str], extra_dirs: &[&str]) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::Builder::new()
        .prefix("smbx-client-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    ensure_unix_user();
    for d in extra_dirs {
        std::fs::create_dir(root.path().join(d)).unwrap();
    }
    for s in shares {
        let p = root.path().join(s);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
        let st = Command::new("chown").arg(USER).arg(&p).status().unwrap();
        assert!(st.success());
    }
    root
}

/// Waits (up to 30 s) until something listens on `port`; `Err` says why not: the
/// server exited first (with its log), or the time ran out.
pub fn listening(port: u16, child: &mut Child, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!(
                "server exited ({st}) before listening:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("server did not listen on {port} within 30 s"))
}

/// Runs `start` again, up to five times in all, while it fails because a port that
/// [`free_port`] found free was taken before the server bound it (the tests running
/// beside it connect from the same ephemeral range); any other failure panics.
pub fn retry_taken_ports<T>(mut start: impl FnMut() -> Result<T, String>) -> T {
    let mut tries = 1;
    loop {
        match start() {
            Ok(v) => return v,
            Err(e) if e.contains("Address already in use") && tries < 5 => tries += 1,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Starts Samba's smbd with shares `share` (plain) and `secret` (encryption required).
/// `extra_global` is appended to [global].
pub fn start_samba(extra_global: &str) -> Server {
    retry_taken_ports(|| try_start_samba(extra_global))
}

/// [`start_samba`] once: `Err` (why, with its log) when smbd did not come to listen.
fn try_start_samba(extra_global: &str) -> Result<Server, String> {
    let smbd = which("smbd")
        .expect("smbd is not installed: apt-get install samba (these tests need a real Samba)");
    let smbpasswd =
        which("smbpasswd").expect("smbpasswd is not installed (package samba-common-bin)");
    let root = make_root(
        &["share", "secret"],
        &["private", "lock", "state", "cache", "pid", "ncalrpc", "log"],
    );
    let r = root.path().display().to_string();
    let port = free_port();
    let conf = format!(
        "[global]
    netbios name = SMBXCLIENTTEST
    workgroup = WORKGROUP
    server role = standalone server
    smb ports = {port}
    interfaces = 127.0.0.1
    bind interfaces only = yes
    disable netbios = yes
    server min protocol = SMB2_02
    passdb backend = smbpasswd:{r}/smbpasswd
    private dir = {r}/private
    lock directory = {r}/lock
    state directory = {r}/state
    cache directory = {r}/cache
    pid directory = {r}/pid
    ncalrpc dir = {r}/ncalrpc
    log file = {r}/log/log.%m
    map to guest = never
    load printers = no
    printcap name = /dev/null
    disable spoolss = yes
    kernel oplocks = no
    create mask = 0666
    directory mask = 0777
{extra_global}

[share]
    path = {r}/share
    read only = no

[secret]
    path = {r}/secret
    read only = no
    server smb encrypt = required
"
    );
    let conf_path = root.path().join("smb.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let mut add = Command::new(smbpasswd)
        .arg("-c")
        .arg(&conf_path)
        .args(["-a", "-s", USER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run smbpasswd");
    {
        use std::io::Write;
        let mut stdin = add.stdin.take().unwrap();
        writeln!(stdin, "{PASSWORD}\n{PASSWORD}").unwrap();
    }
    let out = add.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "smbpasswd -a failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = root.path().join("server.log");
    let logf = std::fs::File::create(&log).unwrap();
    // Its own process group: on SIGTERM smbd signals its whole group.
    let child = Command::new(smbd)
        .process_group(0)
        .args(["--foreground", "--no-process-group", "--debug-stdout", "-s"])
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(logf.try_clone().unwrap())
        .stderr(logf)
        .spawn()
        .expect("spawn smbd");
    let mut server = Server {
        kind: "samba",
        port,
        root,
        child,
        log,
    };
    listening(port, &mut server.child, &server.log)?;
    Ok(server)
}

/// The smbx binary: $SMBX_BIN or target/debug/smbx.
pub fn smbx_bin() -> PathBuf {
    if let Ok(p) = std::env::var("SMBX_BIN") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/smbx")
}

/// Starts `smbx serve` with the same shares.
pub fn start_smbx(extra_global: &str) -> Server {
    retry_taken_ports(|| try_start_smbx(extra_global, None))
}

/// `smbx serve` with the same shares, once: `Err` (why, with its log) when it did
/// not come to listen on its TCP port and on `also` (a further port its
/// `extra_global` gives it).
fn try_start_smbx(extra_global: &str, also: Option<u16>) -> Result<Server, String> {
    let bin = smbx_bin();
    assert!(
        bin.exists(),
        "smbx binary not found at {}: build it (cargo build -p smbx-cli) or set SMBX_BIN",
        bin.display()
    );
    let root = make_root(&["share", "secret"], &[]);
    let r = root.path().display().to_string();
    let port = free_port();
    let conf = format!(
        "[global]
    netbios name = SMBXCLIENTTEST
    smb ports = {port}
    interfaces = 127.0.0.1
    bind interfaces only = yes
    passdb backend = smbpasswd:{r}/smbpasswd
    map to guest = never
{extra_global}

[share]
    path = {r}/share
    read only = no

[secret]
    path = {r}/secret
    read only = no
    server smb encrypt = required
"
    );
    let conf_path = root.path().join("smb.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let mut add = Command::new(&bin)
        .args(["user", "add", "--config"])
        .arg(&conf_path)
        .args(["--stdin", USER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run smbx user add");
    {
        use std::io::Write;
        let mut stdin = add.stdin.take().unwrap();
        writeln!(stdin, "{PASSWORD}").unwrap();
    }
    let out = add.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "smbx user add failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = root.path().join("server.log");
    let logf = std::fs::File::create(&log).unwrap();
    let child = Command::new(&bin)
        .process_group(0)
        .args(["serve", "--config"])
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(logf.try_clone().unwrap())
        .stderr(logf)
        .spawn()
        .expect("spawn smbx");
    // Dropped on failure: stopped like any other.
    let mut server = Server {
        kind: "smbx",
        port,
        root,
        child,
        log,
    };
    for p in std::iter::once(port).chain(also) {
        listening(p, &mut server.child, &server.log)?;
    }
    Ok(server)
}

/// [`start_smbx`] with SMB Direct on a free port (and `extra_global`); returns the
/// server once that port listens too (it comes up after the TCP one), and the port.
pub fn start_smbx_direct(extra_global: &str) -> (Server, u16) {
    retry_taken_ports(|| {
        let port = free_port();
        let extra = format!("    smb direct = yes\n    smb direct port = {port}\n{extra_global}");
        try_start_smbx(&extra, Some(port)).map(|s| (s, port))
    })
}

/// Client options for SMB Direct (soft-iWARP) at `dialect`.
pub fn rdma_options(dialect: Dialect) -> ClientOptions {
    ClientOptions::default()
        .with_dialect(dialect)
        .with_transport(Transport::Rdma)
}

/// A new client logged on over SMB Direct (3.1.1) to the "share" of the server
/// on `port`.
pub async fn logged_on_direct(port: u16) -> (Client, Session, Tree) {
    let client = Client::connect(
        &format!("127.0.0.1:{port}"),
        rdma_options(Dialect::SMB3_1_1),
    )
    .await
    .expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    (client, session, tree)
}

/// Random bytes (never all zeros).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let mut x: u64 = rand_seed();
    for chunk in v.chunks_mut(8) {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    v
}

fn rand_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    t | 1
}

/// Hex SHA-256.
pub fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs test `name` of the current test binary again inside network namespace `ns`
/// (created by the caller), with `env=value` set so the inner run knows it is the
/// one to do the work; returns its output.
pub fn run_test_in_netns(ns: &str, name: &str, env: &str, value: &str) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(env, value)
        .output()
        .expect("run the test in the namespace")
}

/// Asserts the inner run of [`run_test_in_netns`] passed, and really ran its test.
pub fn assert_inner_run_passed(out: &std::process::Output) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "inside the namespace:\n{text}");
    eprintln!("inside the namespace:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the inner run did not run the test:\n{text}"
    );
}

impl Server {
    /// The server's child processes now (smbd forks one per connection).
    pub fn children(&self) -> Vec<u32> {
        let pid = self.child.id();
        let mut out = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                    out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
                }
            }
        }
        out
    }

    /// The lines of the server's output so far that contain `word`.
    pub fn log_lines(&self, word: &str) -> String {
        self.log()
            .lines()
            .filter(|l| l.contains(word))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Waits up to `max` for process `pid` to end (gone, or a zombie its parent has
/// not reaped yet); true if it did.
pub fn wait_for_exit(pid: u32, max: Duration) -> bool {
    let deadline = Instant::now() + max;
    loop {
        let ended = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the parenthesised command name.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
            Err(_) => true,
        };
        if ended {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
