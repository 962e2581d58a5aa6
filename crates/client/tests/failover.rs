//! Multichannel failover against real servers (smbx and Samba's smbd): a
//! session over three links loses one of them in the middle of a transfer.
//!
//! Each test builds two network namespaces joined by three veth pairs
//! (10.231.k.2 on the client side, 10.231.k.1 on the server side, k = 1..3) and
//! runs itself again inside the server's namespace, where the server starts as
//! in the other tests; the test's client runs on a runtime whose threads enter
//! the client's namespace, so its connections cross the veth links. Taking a
//! link down is `ip link set fcK down` on the client side: packets stop, the
//! connection over it hangs until the request timeout.
//!
//! What is shown: 64 MiB written in 256 KiB pieces, all at once, while the
//! logon's own link goes down; every write completes (replayed on the other
//! channels), the channel comes back once its link is up again, the data read
//! back over all channels and the server's copy have the written SHA-256; then
//! an oplock break the server sends on a channel other than the logon's first
//! connection reaches `Client::events`. Needs root (namespaces, a unix user).
//!
//! The `*_reclaims_after_the_server_drops_the_session` tests take every link
//! down for longer than the server's TCP keepalive and user timeout (smb.conf
//! `socket options`), so the server drops the connections and with them the
//! session, keeping the durable opens; once the server shows that (`smbx status`,
//! `smbstatus`) the links come back, and the client — its own connections given
//! up by `ClientOptions::socket`'s user timeout — logs on again with
//! PreviousSessionId, reclaims the open (same persistent FileId, not a new open)
//! and replays the writes that were in flight: the data read back and the
//! server's copy have the written SHA-256.

mod common;

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{PASSWORD, USER};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use smbx_client::{Client, ClientOptions, Event, OpenOptions, Session, Tree};
use smbx_wire::create::CreateRequestBuilder;
use smbx_wire::oplock::OplockLevel;
use smbx_wire::{AccessMask, CreateOptions, FileAttributes, ShareAccess};

/// Set in the copy of the test that runs inside the server's namespace; its
/// value names the client's namespace.
const INNER: &str = "SMBX_FAILOVER_CLIENT_NETNS";
/// Links (veth pairs) between the namespaces.
const LINKS: u8 = 3;
/// Bytes written and read back.
const TOTAL: usize = 64 << 20;
/// Bytes per WRITE and READ.
const PIECE: usize = 256 << 10;

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// Runs test `name` of this binary inside a fresh server namespace joined to a
/// fresh client namespace by [`LINKS`] veth pairs; returns true when the caller
/// is that inner run (and should do the work), false after it passed.
fn in_netns(name: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let tag = format!("{}{}", std::process::id(), name.len());
    let (srv, cli) = (format!("smbxfoS{tag}"), format!("smbxfoC{tag}"));
    ip(&["netns", "add", &srv]);
    ip(&["netns", "add", &cli]);
    let run = std::panic::catch_unwind(|| {
        ip(&["-n", &srv, "link", "set", "lo", "up"]);
        ip(&["-n", &cli, "link", "set", "lo", "up"]);
        for k in 1..=LINKS {
            let (c, s) = (format!("fc{k}"), format!("fs{k}"));
            ip(&[
                "-n", &cli, "link", "add", &c, "type", "veth", "peer", "name", &s, "netns", &srv,
            ]);
            ip(&[
                "-n",
                &cli,
                "addr",
                "add",
                &format!("10.231.{k}.2/24"),
                "dev",
                &c,
            ]);
            ip(&[
                "-n",
                &srv,
                "addr",
                "add",
                &format!("10.231.{k}.1/24"),
                "dev",
                &s,
            ]);
            ip(&["-n", &cli, "link", "set", &c, "up"]);
            ip(&["-n", &srv, "link", "set", &s, "up"]);
        }
        // The kernel reports carrier a moment after both ends are up; the
        // server lists only running interfaces. Bounded: 10 s.
        for _ in 0..200 {
            let out = Command::new("ip")
                .args(["-n", &srv, "-o", "link"])
                .output()
                .expect("ip link");
            if !String::from_utf8_lossy(&out.stdout).contains("NO-CARRIER") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        common::run_test_in_netns(&srv, name, INNER, &cli)
    });
    let _ = Command::new("ip").args(["netns", "del", &cli]).status();
    let _ = Command::new("ip").args(["netns", "del", &srv]).status();
    let out = run.unwrap_or_else(|e| std::panic::resume_unwind(e));
    common::assert_inner_run_passed(&out);
    false
}

/// Moves the calling thread into network namespace `name`.
fn enter_netns(name: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open the namespace");
    // SAFETY: setns(2) with a namespace file descriptor that stays open for the
    // call; it changes only the calling thread's network namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
}

/// Runs `body` on a runtime whose threads live in the client's namespace.
fn client_side<F: std::future::Future<Output = ()> + Send + 'static>(body: F) {
    let ns = std::env::var(INNER).expect("client namespace");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || enter_netns(&ns))
        .build()
        .expect("runtime");
    // Spawned, so that no socket is made on this (the server namespace's) thread.
    rt.block_on(async { tokio::spawn(body).await.expect("client side") });
}

/// The `interfaces` line both servers get: the three server-side link
/// addresses at 1 Gbit/s, and loopback (which the tests' start-up check
/// needs) as the slowest, so the client never chooses it.
fn interfaces() -> String {
    let mut line = String::from("    interfaces = \"127.0.0.1;speed=1000\"");
    for k in 1..=LINKS {
        line.push_str(&format!(" \"10.231.{k}.1;speed=1000000000\""));
    }
    line + "\n    server multi channel support = yes\n"
}

fn link(k: u8, up: bool) {
    let ns = std::env::var(INNER).expect("client namespace");
    ip(&[
        "-n",
        &ns,
        "link",
        "set",
        &format!("fc{k}"),
        if up { "up" } else { "down" },
    ]);
}

fn options() -> ClientOptions {
    let mut o = ClientOptions::default().with_max_channels(LINKS as usize);
    // A channel whose link is down is noticed by this timeout.
    o.timeout = Some(Duration::from_secs(5));
    o
}

/// Polls (bounded: 60 s) until channel `i` is live again after a reconnect.
async fn wait_reestablished(session: &Session, i: usize) {
    for _ in 0..600 {
        let s = &session.channel_stats()[i];
        if s.live && s.reconnects >= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "channel {i} did not come back: {:?}",
        session.channel_stats()
    );
}

/// Writes `data` to `name` in [`PIECE`]s, 32 at a time, calling `fault` once
/// a quarter has been written; returns after every write completed.
async fn write_with_fault(
    tree: &Tree,
    name: &str,
    data: Arc<Vec<u8>>,
    fault: impl Fn() + Clone + Send + 'static,
) {
    let f = Arc::new(
        tree.open(name, &OpenOptions::create_truncate())
            .await
            .expect("open"),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let pieces = data.len() / PIECE;
    stream::iter(0..pieces)
        .map(|i| {
            let (f, data, done, fault) = (f.clone(), data.clone(), done.clone(), fault.clone());
            async move {
                let off = i * PIECE;
                let n = f.write_at(off as u64, &data[off..off + PIECE]).await?;
                assert_eq!(n, PIECE);
                if done.fetch_add(1, Ordering::AcqRel) + 1 == pieces / 4 {
                    fault();
                }
                smbx_client::Result::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("every write completes though a link went down");
    let f = Arc::into_inner(f).expect("the writes are done");
    f.close().await.expect("close");
}

async fn read_all(tree: &Tree, name: &str, len: usize) -> Vec<u8> {
    let f = tree
        .open(name, &OpenOptions::read_only())
        .await
        .expect("open for reading");
    let parts: Vec<Vec<u8>> = stream::iter(0..len / PIECE)
        .map(|i| f.read_at((i * PIECE) as u64, PIECE))
        .buffered(32)
        .try_collect()
        .await
        .expect("reads");
    f.close().await.expect("close");
    parts.concat()
}

/// A CREATE asking for a batch oplock (the typed API asks for none).
fn batch_create(name: &str) -> Vec<u8> {
    CreateRequestBuilder {
        oplock_level: OplockLevel::BATCH,
        impersonation_level: 2,
        desired_access: AccessMask::GENERIC_READ | AccessMask::GENERIC_WRITE,
        file_attributes: FileAttributes::NORMAL,
        share_access: ShareAccess::ALL,
        create_disposition: 5, // OVERWRITE_IF
        create_options: CreateOptions::FILE_NON_DIRECTORY_FILE,
        name: name.to_string(),
        contexts: Vec::new(),
    }
    .encode()
}

/// The whole scenario against the server at `port`, whose share lives in
/// `share_dir`.
async fn scenario(port: u16, share_dir: std::path::PathBuf) {
    let first = format!("10.231.1.1:{port}");
    let client = Client::connect(&first, options()).await.expect("connect");
    let mut events = client.events().expect("events");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    assert_eq!(
        session.channel_count(),
        LINKS as usize,
        "the session should have bound every link: {:?}",
        session.channel_stats()
    );

    // 0. A request that outlives the timeout on a channel that still answers
    // (a CHANGE_NOTIFY nothing completes) fails alone: no channel is given up.
    let dir = tree
        .open("", &OpenOptions::read_only().directory(true))
        .await
        .expect("open the share's root");
    let notify = smbx_wire::change_notify::ChangeNotifyRequest {
        flags: 0,
        output_buffer_length: 4096,
        file_id: dir.id(),
        completion_filter: smbx_wire::change_notify::CHANGE_FILE_NAME,
    };
    let r = tree
        .call_raw(smbx_wire::Command::ChangeNotify, notify.encode())
        .await;
    assert!(
        matches!(r, Err(smbx_client::Error::Timeout)),
        "{:?}",
        r.map(|r| r.status())
    );
    let stats = session.channel_stats();
    assert!(
        stats.iter().all(|s| s.live && s.reconnects == 0),
        "a slow request gave up a live channel: {stats:?}"
    );
    dir.close().await.expect("close the root");

    // 1. The logon's own link goes down in the middle of the writes.
    let data = Arc::new(common::random_bytes(TOTAL));
    write_with_fault(&tree, "failover.bin", data.clone(), || link(1, false)).await;
    let stats = session.channel_stats();
    eprintln!("after the writes: {stats:?}");
    assert!(!stats[0].live, "channel 0 should be down: {stats:?}");
    let replayed: u64 = stats.iter().map(|s| s.replayed).sum();
    assert!(replayed > 0, "nothing was replayed: {stats:?}");
    assert_eq!(stats[0].replayed, 0, "{stats:?}");

    // 2. The link comes back: so does the channel.
    link(1, true);
    wait_reestablished(&session, 0).await;
    let before = session.channel_stats()[0].requests;

    // 3. Everything reads back right, over every channel, and the server's
    // copy is the same.
    let back = read_all(&tree, "failover.bin", TOTAL).await;
    assert_eq!(common::sha256(&back), common::sha256(&data));
    let disk = std::fs::read(share_dir.join("failover.bin")).expect("server copy");
    assert_eq!(common::sha256(&disk), common::sha256(&data));
    let stats = session.channel_stats();
    eprintln!("after the reads: {stats:?}");
    assert!(
        stats[0].requests > before,
        "the re-established channel carried nothing: {stats:?}"
    );
    assert!(stats.iter().all(|s| s.live), "{stats:?}");

    // 4. A break sent on a connection other than the logon's first one (the
    // re-established channel, or another channel) reaches the events.
    let resp = tree
        .call_raw(smbx_wire::Command::Create, batch_create("brk.txt"))
        .await
        .expect("create")
        .ok()
        .expect("create status");
    let cr = smbx_wire::create::CreateResponse::decode(&resp.msg).expect("create response");
    assert_eq!(
        cr.oplock_level,
        OplockLevel::BATCH,
        "no batch oplock granted"
    );
    let other = tokio::spawn(async move {
        let c = Client::connect(&format!("10.231.2.1:{port}"), ClientOptions::default())
            .await
            .expect("second client");
        let s = c.login(USER, PASSWORD, "").await.expect("second login");
        let t = s.tree("share").await.expect("second tree");
        let _ = t.open("brk.txt", &OpenOptions::read_only()).await;
    });
    let ev = tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("no break within 30 s")
        .expect("events closed");
    match ev {
        Event::OplockBreak(b) => assert_eq!(b.file_id.volatile, cr.file_id.volatile),
        other => panic!("unexpected event {other:?}"),
    }
    other.abort();

    // 5. Every link goes down for a few seconds in the middle of the writes:
    // the session waits for a channel to come back and replays.
    let data = Arc::new(common::random_bytes(TOTAL));
    let before: u64 = session.channel_stats().iter().map(|s| s.reconnects).sum();
    // The links come back once the client has seen every channel fail (polled,
    // bounded) and a little more.
    let watcher = {
        let session = session.clone();
        tokio::spawn(async move {
            for _ in 0..1200 {
                if session.channel_stats().iter().all(|s| !s.live) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            for k in 1..=LINKS {
                link(k, true);
            }
        })
    };
    write_with_fault(&tree, "outage.bin", data.clone(), || {
        for k in 1..=LINKS {
            link(k, false);
        }
    })
    .await;
    watcher.await.expect("watcher");
    let back = read_all(&tree, "outage.bin", TOTAL).await;
    assert_eq!(common::sha256(&back), common::sha256(&data));
    let disk = std::fs::read(share_dir.join("outage.bin")).expect("server copy");
    assert_eq!(common::sha256(&disk), common::sha256(&data));
    let stats = session.channel_stats();
    eprintln!("after the outage: {stats:?}");
    let after: u64 = stats.iter().map(|s| s.reconnects).sum();
    assert!(after > before, "no channel was re-established: {stats:?}");
    session.logoff().await.expect("logoff");
}

#[test]
fn smbx_survives_losing_a_link() {
    if !in_netns("smbx_survives_losing_a_link") {
        return;
    }
    let server = common::start_smbx(&interfaces());
    let (port, dir) = (server.port, server.share_dir("share"));
    client_side(scenario(port, dir));
}

#[test]
fn samba_survives_losing_a_link() {
    if !in_netns("samba_survives_losing_a_link") {
        return;
    }
    let server = common::start_samba(&interfaces());
    let (port, dir) = (server.port, server.share_dir("share"));
    client_side(scenario(port, dir));
}

/// How quickly the server gives up a peer that went silent: keepalive after 2 s
/// idle, 2 probes 1 s apart, and sent data unacknowledged for at most 4 s.
const SERVER_SOCKET_OPTIONS: &str =
    "SO_KEEPALIVE TCP_KEEPIDLE=2 TCP_KEEPINTVL=1 TCP_KEEPCNT=2 TCP_USER_TIMEOUT=4000";

/// Which server a drop scenario runs against, and how to ask it about sessions.
#[derive(Clone)]
enum Observer {
    /// `smbx status --json --config CONF`.
    Smbx(std::path::PathBuf),
    /// `smbstatus --json -s CONF`.
    Samba(std::path::PathBuf),
}

impl Observer {
    /// (sessions the server has, durable opens it keeps for a reconnect, or
    /// None where it does not say), from its status command.
    fn sessions(&self) -> (usize, Option<u64>) {
        let out = match self {
            Observer::Smbx(conf) => Command::new(common::smbx_bin())
                .args(["status", "--json", "--config"])
                .arg(conf)
                .output(),
            Observer::Samba(conf) => Command::new("smbstatus")
                .args(["--json", "-s"])
                .arg(conf)
                .output(),
        }
        .expect("run the status command");
        assert!(
            out.status.success(),
            "status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
        match self {
            Observer::Smbx(_) => (
                v["totals"]["sessions"].as_u64().expect("sessions") as usize,
                v["totals"]["disconnected_durable_opens"].as_u64(),
            ),
            Observer::Samba(_) => (v["sessions"].as_object().map_or(0, |m| m.len()), None),
        }
    }

    /// The smbx server's opens' FileIds ("persistent:volatile"); empty for Samba.
    fn open_ids(&self) -> Vec<String> {
        let Observer::Smbx(conf) = self else {
            return Vec::new();
        };
        let out = Command::new(common::smbx_bin())
            .args(["status", "--json", "--config"])
            .arg(conf)
            .output()
            .expect("smbx status");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
        v["opens"]
            .as_array()
            .expect("opens")
            .iter()
            .filter_map(|o| o["file_id"].as_str().map(str::to_string))
            .collect()
    }
}

/// Every link down in the middle of a durable transfer until the server has
/// dropped the session; then back.
async fn dropped_session(port: u16, share_dir: std::path::PathBuf, server: Observer) {
    let mut opts = options();
    opts.durable_handles = true;
    // The client's connections give up by themselves too.
    (opts.socket, _) = smbx_transport::SocketOptions::parse(SERVER_SOCKET_OPTIONS);
    let client = Client::connect(&format!("10.231.1.1:{port}"), opts)
        .await
        .expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    assert_eq!(session.channel_count(), LINKS as usize);
    let old_session = session.id();
    drop((client, session));
    let f = Arc::new(
        tree.open("dropped.bin", &OpenOptions::create_truncate())
            .await
            .expect("open"),
    );
    assert!(f.is_durable(), "no durable handle granted");
    let old_id = f.id();
    assert_eq!(server.sessions().0, 1, "one session before the outage");

    let data = Arc::new(common::random_bytes(TOTAL / 2));
    let down = Arc::new(tokio::sync::Notify::new());
    // The links come back once the server dropped the session (polled,
    // bounded: 90 s), keeping the open for its durable timeout.
    let watcher = {
        let (down, server) = (down.clone(), server.clone());
        tokio::spawn(async move {
            down.notified().await;
            let mut seen = None;
            for _ in 0..900 {
                let s = tokio::task::spawn_blocking({
                    let server = server.clone();
                    move || server.sessions()
                })
                .await
                .expect("status");
                if s.0 == 0 {
                    seen = Some(s);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            for k in 1..=LINKS {
                link(k, true);
            }
            seen
        })
    };
    let done = Arc::new(AtomicUsize::new(0));
    let pieces = data.len() / PIECE;
    stream::iter(0..pieces)
        .map(|i| {
            let (f, data, done, down) = (f.clone(), data.clone(), done.clone(), down.clone());
            async move {
                let off = i * PIECE;
                let n = f.write_at(off as u64, &data[off..off + PIECE]).await?;
                assert_eq!(n, PIECE);
                if done.fetch_add(1, Ordering::AcqRel) + 1 == pieces / 4 {
                    for k in 1..=LINKS {
                        link(k, false);
                    }
                    down.notify_one();
                }
                smbx_client::Result::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("every write completes though the server dropped the session");
    let seen = watcher.await.expect("watcher");
    let (sessions, kept) = seen.expect("the server never dropped the session");
    eprintln!(
        "server while the links were down: {sessions} session(s), {kept:?} durable open(s) kept"
    );
    if let Some(kept) = kept {
        assert!(kept >= 1, "the server kept no durable open");
    }

    // A new session, and the same open: reclaimed, not created again.
    let session = tree.session();
    assert_ne!(
        session.id(),
        old_session,
        "the session was not re-established"
    );
    assert_eq!(
        f.id().persistent,
        old_id.persistent,
        "the open was not reclaimed: {old_id:?} -> {:?}",
        f.id()
    );
    if let Observer::Smbx(_) = server {
        let ids = server.open_ids();
        let want = format!("{:x}:", old_id.persistent);
        assert!(
            ids.iter()
                .any(|i| i.trim_start_matches("0x").starts_with(&want)),
            "the server has no open with persistent id {want}: {ids:?}"
        );
        assert_eq!(
            server.sessions(),
            (1, Some(0)),
            "one session, nothing left waiting"
        );
    }
    let back = f.read_at(0, data.len()).await.expect("read back");
    assert_eq!(common::sha256(&back), common::sha256(&data));
    Arc::into_inner(f)
        .expect("writes done")
        .close()
        .await
        .expect("close");
    let disk = std::fs::read(share_dir.join("dropped.bin")).expect("server copy");
    assert_eq!(common::sha256(&disk), common::sha256(&data));
    eprintln!("after the re-establishment: {:?}", session.channel_stats());
    session.logoff().await.expect("logoff");
}

#[test]
fn smbx_reclaims_after_the_server_drops_the_session() {
    if !in_netns("smbx_reclaims_after_the_server_drops_the_session") {
        return;
    }
    let server = common::start_smbx(&format!(
        "{}    socket options = {SERVER_SOCKET_OPTIONS}\n",
        interfaces()
    ));
    let log = server.log();
    assert!(
        !log.contains("socket options"),
        "socket options refused: {log}"
    );
    let (port, dir) = (server.port, server.share_dir("share"));
    let observer = Observer::Smbx(server.root.path().join("smb.conf"));
    client_side(dropped_session(port, dir, observer));
    let log = server.log();
    assert!(
        !log.contains("socket options"),
        "socket options refused: {log}"
    );
}

#[test]
fn samba_reclaims_after_the_server_drops_the_session() {
    if !in_netns("samba_reclaims_after_the_server_drops_the_session") {
        return;
    }
    // Samba's `socket options` has no TCP_USER_TIMEOUT: a connection with data
    // unacknowledged retransmits for net.ipv4.tcp_retries2 (15: ~15 minutes)
    // before keepalive may start. This namespace's own value bounds it instead
    // (5: about 13 s with the minimum retransmission timeout of 200 ms).
    let st = Command::new("sysctl")
        .args(["-qw", "net.ipv4.tcp_retries2=5"])
        .status()
        .expect("sysctl");
    assert!(st.success());
    let server = common::start_samba(&format!(
        "{}    socket options = SO_KEEPALIVE TCP_KEEPIDLE=2 TCP_KEEPINTVL=1 TCP_KEEPCNT=2\n    durable handles = yes\n    kernel share modes = no\n    posix locking = no\n    smb2 leases = yes\n",
        interfaces()
    ));
    let (port, dir) = (server.port, server.share_dir("share"));
    let observer = Observer::Samba(server.root.path().join("smb.conf"));
    client_side(dropped_session(port, dir, observer));
}
