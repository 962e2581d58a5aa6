//! Multichannel against real servers (smbx and Samba's smbd): a session binds a
//! second connection to the server's second address and one file's writes and
//! reads go over both channels, checksums right.
//!
//! The servers need two addresses of their own: each test creates a network
//! namespace whose loopback carries 127.0.0.1 and 127.0.0.2 and runs itself
//! again inside it (`ip netns exec`), so nothing outside the namespace changes.
//! It needs root (as the other server tests, which add a unix user).

mod common;

use std::process::Command;

use common::{PASSWORD, USER};
use futures_util::future::try_join_all;
use smbx_client::{Client, ClientOptions, OpenOptions, Session, Tree};

/// Set in the copy of the test that runs inside the namespace.
const INNER: &str = "SMBX_MULTICHANNEL_NETNS";

/// Runs test `name` of this binary in a fresh network namespace with two
/// loopback addresses; returns true when the caller is that inner run (and
/// should do the work), false after the inner run passed.
fn in_netns(name: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let ns = format!("smbxmc{}{}", std::process::id(), name.len());
    let ip = |args: &[&str]| {
        let st = Command::new("ip").args(args).status().expect("run ip");
        assert!(st.success(), "ip {args:?} failed");
    };
    ip(&["netns", "add", &ns]);
    let run = std::panic::catch_unwind(|| {
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        ip(&["-n", &ns, "addr", "add", "127.0.0.2/8", "dev", "lo"]);
        common::run_test_in_netns(&ns, name, INNER, "1")
    });
    let _ = Command::new("ip").args(["netns", "del", &ns]).status();
    let out = run.unwrap_or_else(|e| std::panic::resume_unwind(e));
    common::assert_inner_run_passed(&out);
    false
}

/// Writes and reads back 8 MiB in 64 KiB pieces, all at once, then checks the
/// checksum; returns the session for the caller to inspect.
async fn spread_io(addr: &str) -> Session {
    let opts = ClientOptions::default().with_max_channels(2);
    let client = Client::connect(addr, opts).await.expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    assert_eq!(
        session.channel_count(),
        2,
        "the session should have bound the server's second address: {:?}",
        session.channel_stats()
    );
    write_read_check(&tree, "mc.bin").await;
    session
}

/// Both channels carried writes and reads: each sent and received at least a
/// quarter of what one channel alone would have.
fn assert_both_carried(session: &Session) {
    let stats = session.channel_stats();
    eprintln!("channels: {stats:?}");
    assert_eq!(stats.len(), 2);
    let addrs: Vec<String> = stats
        .iter()
        .map(|s| s.addr.expect("channel address").ip().to_string())
        .collect();
    assert_eq!(addrs, vec!["127.0.0.1", "127.0.0.2"], "{stats:?}");
    for s in &stats {
        assert!(s.live, "{stats:?}");
        assert!(
            s.bytes_sent >= 1 << 20 && s.bytes_received >= 1 << 20,
            "a channel carried too little of the 8 MiB written and read: {stats:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smbx_binds_second_address_and_spreads_io() {
    if !in_netns("smbx_binds_second_address_and_spreads_io") {
        return;
    }
    let server = common::start_smbx(
        "    interfaces = 127.0.0.1 127.0.0.2\n    server multi channel support = yes\n",
    );
    let session = spread_io(&server.addr()).await;
    let disk = std::fs::read(server.share_dir("share").join("mc.bin")).unwrap();
    assert_eq!(disk.len(), 8 << 20);
    assert_both_carried(&session);

    // The server lists the session with both channels, one per address.
    let conf = server.root.path().join("smb.conf");
    let out = Command::new(common::smbx_bin())
        .args(["status", "--json", "--config"])
        .arg(&conf)
        .output()
        .expect("smbx status");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "smbx status: {text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("status JSON");
    let sessions = json["sessions"].as_array().expect("sessions");
    let me = sessions
        .iter()
        .find(|s| s["session_id"].as_u64() == Some(session.id()))
        .unwrap_or_else(|| panic!("session {:#x} not listed: {text}", session.id()));
    let mut locals: Vec<String> = me["channels"]
        .as_array()
        .expect("channels")
        .iter()
        .map(|c| {
            let l = c["local"].as_str().unwrap_or_default();
            l.rsplit_once(':').map_or(l, |(ip, _)| ip).to_string()
        })
        .collect();
    locals.sort();
    assert_eq!(locals, vec!["127.0.0.1", "127.0.0.2"], "{text}");
    session.logoff().await.expect("logoff");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_binds_second_address_and_spreads_io() {
    if !in_netns("samba_binds_second_address_and_spreads_io") {
        return;
    }
    let server = common::start_samba(
        "    server multi channel support = yes\n    interfaces = \"127.0.0.1;speed=1000000000,capability=RSS\" \"127.0.0.2;speed=1000000000,capability=RSS\"\n",
    );
    let session = spread_io(&server.addr()).await;
    let disk = std::fs::read(server.share_dir("share").join("mc.bin")).unwrap();
    assert_eq!(disk.len(), 8 << 20);
    assert_both_carried(&session);
    session.logoff().await.expect("logoff");
}

/// Writes and reads back 8 MiB through `session` (as [`spread_io`]) and checks it.
async fn checked_io(session: &Session, name: &str) {
    let tree = session.tree("share").await.expect("tree");
    write_read_check(&tree, name).await;
}

/// Writes 8 MiB to `name` in 64 KiB pieces, all at once, reads it back the same way
/// and checks the SHA-256.
async fn write_read_check(tree: &Tree, name: &str) {
    let data = common::random_bytes(8 << 20);
    let f = tree
        .open(name, &OpenOptions::create_truncate())
        .await
        .expect("open");
    let piece = 64 * 1024;
    let writes = data
        .chunks(piece)
        .enumerate()
        .map(|(i, c)| f.write_at((i * piece) as u64, c));
    try_join_all(writes).await.expect("writes");
    let reads = (0..data.len() / piece).map(|i| f.read_at((i * piece) as u64, piece));
    let back: Vec<u8> = try_join_all(reads).await.expect("reads").concat();
    assert_eq!(common::sha256(&back), common::sha256(&data));
    f.close().await.expect("close");
}

/// The server addresses of the session's channels ("ip:port"), the logon's first.
fn channel_addrs(session: &Session) -> Vec<String> {
    session
        .channel_stats()
        .iter()
        .map(|s| s.addr.expect("channel address").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smbx_channel_to_an_rdma_capable_interface_is_smb_direct() {
    if !in_netns("smbx_channel_to_an_rdma_capable_interface_is_smb_direct") {
        return;
    }
    // SMB Direct (soft-iWARP) listens on both addresses, so both are advertised
    // RDMA_CAPABLE; the TCP logon's second channel goes there over SMB Direct.
    let (server, direct) = common::start_smbx_direct(
        "    interfaces = 127.0.0.1 127.0.0.2\n    server multi channel support = yes\n",
    );
    let tcp = server.addr();
    let opts = ClientOptions {
        direct_port: direct,
        ..ClientOptions::default().with_max_channels(2)
    };
    let client = Client::connect(&tcp, opts.clone()).await.expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    checked_io(&session, "direct-channel.bin").await;
    assert_eq!(
        channel_addrs(&session),
        vec![tcp.clone(), format!("127.0.0.2:{direct}")],
        "the second channel is SMB Direct to the second address"
    );
    let stats = session.channel_stats();
    eprintln!("TCP logon, SMB Direct channel: {stats:?}");
    assert!(stats.iter().all(|s| s.live), "{stats:?}");
    // Both channels carried data; the SMB Direct one moved its share of the
    // 64 KiB WRITEs and READs by RDMA, through buffers registered with its own
    // link (not the logon's TCP one), none of it inline.
    let (on_tcp, on_rdma) = (&stats[0], &stats[1]);
    assert!(
        on_tcp.bytes_sent >= 1 << 20 && on_tcp.bytes_received >= 1 << 20,
        "the TCP channel carried too little: {stats:?}"
    );
    assert_eq!((on_tcp.rdma_sent, on_tcp.rdma_received), (0, 0));
    assert!(
        on_rdma.rdma_sent >= 1 << 20 && on_rdma.rdma_received >= 1 << 20,
        "the SMB Direct channel moved too little by RDMA: {stats:?}"
    );
    assert!(
        on_rdma.bytes_sent < 1 << 20 && on_rdma.bytes_received < 1 << 20,
        "the SMB Direct channel carried data inline: {stats:?}"
    );
    assert!(
        on_tcp.bytes_sent + on_rdma.rdma_sent >= 8 << 20,
        "{stats:?}"
    );
    session.logoff().await.expect("logoff");

    // RDMA channels not allowed: the second channel is Direct TCP.
    let tcp_only = ClientOptions {
        rdma_channels: false,
        ..opts.clone()
    };
    let client = Client::connect(&tcp, tcp_only).await.expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    checked_io(&session, "tcp-channel.bin").await;
    let port = tcp.rsplit_once(':').unwrap().1;
    assert_eq!(
        channel_addrs(&session),
        vec![tcp.clone(), format!("127.0.0.2:{port}")]
    );
    session.logoff().await.expect("logoff");

    // Logged on over SMB Direct: the session binds a further SMB Direct channel
    // (it no longer keeps its one channel).
    let rdma = ClientOptions::default()
        .with_max_channels(2)
        .with_transport(smbx_client::Transport::Rdma);
    let client = Client::connect(&format!("127.0.0.1:{direct}"), rdma)
        .await
        .expect("connect over SMB Direct");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    checked_io(&session, "direct-logon.bin").await;
    assert_eq!(
        channel_addrs(&session),
        vec![format!("127.0.0.1:{direct}"), format!("127.0.0.2:{direct}")]
    );
    // Both SMB Direct channels move data by RDMA, each with its own link.
    let stats = session.channel_stats();
    eprintln!("SMB Direct logon and channel: {stats:?}");
    assert_eq!(
        stats.iter().map(|s| s.rdma_sent).sum::<u64>(),
        8 << 20,
        "{stats:?}"
    );
    for s in &stats {
        assert!(
            s.rdma_sent >= 1 << 20 && s.rdma_received >= 1 << 20,
            "a channel moved too little by RDMA: {stats:?}"
        );
    }
    session.logoff().await.expect("logoff");
}

/// Writes `pieces` pieces of 4 MiB to `name` at once, reads them back the same
/// way and checks the SHA-256: each piece is larger than what one SMB Direct
/// transfer may carry in the tests below.
async fn large_io_check(tree: &Tree, name: &str, pieces: usize) {
    const PIECE: usize = 4 << 20;
    let data = common::random_bytes(pieces * PIECE);
    let f = tree
        .open(name, &OpenOptions::create_truncate())
        .await
        .expect("open");
    let writes = data
        .chunks(PIECE)
        .enumerate()
        .map(|(i, c)| f.write_at((i * PIECE) as u64, c));
    try_join_all(writes).await.expect("writes");
    let reads = (0..pieces).map(|i| f.read_at((i * PIECE) as u64, PIECE));
    let back: Vec<u8> = try_join_all(reads).await.expect("reads").concat();
    assert_eq!(common::sha256(&back), common::sha256(&data));
    f.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smbx_sizes_each_request_for_the_channel_it_goes_on() {
    if !in_netns("smbx_sizes_each_request_for_the_channel_it_goes_on") {
        return;
    }
    // The logon is TCP (MaxReadSize/MaxWriteSize 8 MiB); the second channel is
    // SMB Direct, where one RDMA transfer carries at most 1 MiB (the client's
    // MaxReadWriteSize) and one message at most 1 MiB (the server's fragmented
    // size). 4 MiB I/O, eight at once, lands on both channels: each READ and
    // WRITE must be sized for the SMB Direct one too.
    let (server, direct) = common::start_smbx_direct(
        "    interfaces = 127.0.0.1 127.0.0.2\n    server multi channel support = yes\n",
    );
    let mut opts = ClientOptions {
        direct_port: direct,
        ..ClientOptions::default().with_max_channels(2)
    };
    opts.direct.max_read_write_size = 1 << 20;
    let client = Client::connect(&server.addr(), opts)
        .await
        .expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    // By RDMA on the plain share.
    let tree = session.tree("share").await.expect("tree");
    assert_eq!(session.channel_count(), 2, "{:?}", session.channel_stats());
    large_io_check(&tree, "large.bin", 8).await;
    let stats = session.channel_stats();
    eprintln!("4 MiB I/O, TCP logon and SMB Direct channel: {stats:?}");
    assert!(
        stats[0].bytes_sent >= 4 << 20 && stats[0].bytes_received >= 4 << 20,
        "the TCP channel carried too little: {stats:?}"
    );
    assert!(
        stats[1].rdma_sent >= 1 << 20 && stats[1].rdma_received >= 1 << 20,
        "the SMB Direct channel moved too little by RDMA: {stats:?}"
    );
    // Inline on the sealed share (no RDMA for encrypted data): every message on
    // the SMB Direct channel fits its fragmented size.
    let before = session.channel_stats()[1].bytes_sent;
    let secret = session.tree("secret").await.expect("sealed tree");
    large_io_check(&secret, "sealed.bin", 4).await;
    let stats = session.channel_stats();
    eprintln!("sealed 4 MiB I/O: {stats:?}");
    assert!(stats.iter().all(|s| s.live), "{stats:?}");
    assert!(
        stats[1].bytes_sent > before,
        "the SMB Direct channel carried nothing sealed: {stats:?}"
    );
    session.logoff().await.expect("logoff");
}
