//! Fault tests of the SMB Direct server (`smbx serve` with `smb direct = yes`):
//! a client process killed in the middle of an RDMA transfer (WRITE by RDMA
//! Read, READ by RDMA Write), RDMA Read and RDMA Write against an invalid STag,
//! a peer that ignores SMB Direct credits, oversized and overlapping fragments,
//! and half-open connections (TCP only, stopped mid-MPA, no SMB Direct
//! negotiation). Each time the server must drop that connection (the raw peer
//! sees it closed; opens it held are gone), stay up without panicking, and
//! serve the next client a full round trip over SMB Direct. The other way
//! round: a server that falls silent is found out by the client's keepalive.

mod common;
#[path = "../../rdma/tests/support/soft_pair.rs"]
mod soft_pair;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use soft_pair::{dialed, post_recvs};

use common::{
    logged_on_direct, random_bytes, rdma_options, sha256, smbx_bin, start_smbx_direct, Server,
    PASSWORD, USER,
};
use smbx_client::{Client, Error, OpenOptions};
use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftMr, SoftQp};
use smbx_rdma::*;
use smbx_transport::BufferDescriptorV1;
use smbx_wire::rw::{ReadRequest, WriteRequest, CHANNEL_RDMA_V1, CHANNEL_RDMA_V1_INVALIDATE};
use smbx_wire::Dialect;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The server is alive and serves a new client: 2 MiB + 1 byte written by
/// RDMA Read and read back by RDMA Write, compared by SHA-256; and it never
/// panicked.
async fn next_client_ok(server: &Server, port: u16, what: &str) {
    let client = Client::connect(
        &format!("127.0.0.1:{port}"),
        rdma_options(Dialect::SMB3_1_1),
    )
    .await
    .unwrap_or_else(|e| panic!("after {what}: connect: {e}\n{}", server.log()));
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    let name = format!("next-{}", what.replace(' ', "-"));
    let f = tree
        .open(&name, &OpenOptions::create_truncate())
        .await
        .expect("create");
    let data = random_bytes(2 * 1024 * 1024 + 1);
    f.write_at(0, &data).await.expect("write");
    let back = f.read_at(0, data.len()).await.expect("read");
    assert_eq!(sha256(&back), sha256(&data), "after {what}: read back");
    f.close().await.expect("close");
    session.logoff().await.expect("logoff");
    assert_no_panic(server);
}

/// Open file descriptors of the server process (sockets, files, epoll).
fn fd_count(server: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
        .expect("the server process is alive")
        .count()
}

/// A warmed-up server (one round trip done) and its descriptor count then.
async fn baseline(server: &Server, port: u16) -> usize {
    next_client_ok(server, port, "warm-up").await;
    settle_fds(server, usize::MAX).await
}

/// Waits until the server holds at most `max` descriptors and no more are
/// being freed; returns the count. Panics if it stays above `max`: what the
/// faulty connections held was never freed.
async fn settle_fds(server: &Server, max: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = fd_count(server);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let n = fd_count(server);
        if n <= max && n == last {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "the server holds {n} descriptors, {max} before the faults"
        );
        last = n;
    }
}

fn assert_no_panic(server: &Server) {
    let log = server.log();
    assert!(!log.contains("panicked"), "server panicked:\n{log}");
}

/// Opens `name` exclusively (share none), retrying until the server has
/// dropped every open a dead connection held on it.
async fn open_exclusive_eventually(port: u16, name: &str) {
    let (_client, _session, tree) = logged_on_direct(port).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = OpenOptions::new()
            .read(true)
            .write(true)
            .share(smbx_client::ShareAccess::empty());
        match tree.open(name, &o).await {
            Ok(f) => {
                f.close().await.expect("close");
                return;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("{name} still held: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{name}: the dead connection's open was never freed: {e}"),
        }
    }
}

// ------------------------------------------------------------------ killed client

/// `smbx put|get --transport rdma` (`args`) on a blocking thread, SIGKILLed once
/// the file `watched` (what the transfer writes) holds 16 MiB of `total`.
async fn kill_mid_transfer(args: Vec<String>, watched: std::path::PathBuf, total: u64) {
    let progress = move || std::fs::metadata(&watched).map(|m| m.len()).unwrap_or(0);
    tokio::task::spawn_blocking(move || run_and_kill(&args, progress, 16 << 20, total))
        .await
        .unwrap();
}

/// `smbx put|get --transport rdma`, killed once `progress()` passes `at` bytes.
fn run_and_kill(args: &[String], progress: impl Fn() -> u64, at: u64, total: u64) {
    let mut child = Command::new(smbx_bin())
        .args(args)
        .env("SMBX_PASSWORD", PASSWORD)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn smbx");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).ok();
            panic!("smbx {args:?} ended ({st}) before it could be killed mid-transfer: {err}");
        }
        let p = progress();
        if p >= at {
            assert!(p < total, "transfer already complete ({p} of {total})");
            break;
        }
        assert!(Instant::now() < deadline, "no progress: {p} bytes");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("SIGKILL the client");
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_killed_mid_rdma_transfer() {
    let (server, port) = start_smbx_direct("");
    let fds = baseline(&server, port).await;
    let share = server.share_dir("share");
    const TOTAL: u64 = 256 << 20;
    let url = |name: &str| format!("smb://{USER}@127.0.0.1:{port}/share/{name}");

    // WRITE by RDMA Read: `smbx put` killed once 16 MiB reached the server.
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("big.bin");
    std::fs::File::create(&local)
        .unwrap()
        .set_len(TOTAL)
        .unwrap();
    let remote = share.join("put.bin");
    let args: Vec<String> = vec![
        "put".into(),
        "--transport".into(),
        "rdma".into(),
        local.display().to_string(),
        url("put.bin"),
    ];
    kill_mid_transfer(args, remote, TOTAL).await;
    open_exclusive_eventually(port, "put.bin").await;
    next_client_ok(&server, port, "put killed").await;

    // READ by RDMA Write: `smbx get` killed once 16 MiB arrived.
    std::fs::File::create(share.join("get.bin"))
        .unwrap()
        .set_len(TOTAL)
        .unwrap();
    let out = tmp.path().join("got.bin");
    let args: Vec<String> = vec![
        "get".into(),
        "--transport".into(),
        "rdma".into(),
        url("get.bin"),
        out.display().to_string(),
    ];
    kill_mid_transfer(args, out, TOTAL).await;
    open_exclusive_eventually(port, "get.bin").await;
    next_client_ok(&server, port, "get killed").await;
    settle_fds(&server, fds).await;
}

// ------------------------------------------------------------------ silent server

/// Sends `signal` (STOP or CONT) to the server process.
fn signal_server(server: &Server, signal: &str) {
    let ok = Command::new("kill")
        .args([format!("-{signal}"), server.pid().to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{signal} the server");
}

/// Resumes a stopped server even when the test fails half-way.
struct Resume<'a>(&'a Server);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        signal_server(self.0, "CONT");
    }
}

/// A server that falls silent with its connection up (the process stopped:
/// its TCP socket stays open, as an RDMA queue pair over a downed port does)
/// is found out by the client's own SMB Direct keepalive: a READ waiting on
/// it fails with the connection dropped after about 15 s (10 s idle, 5 s for
/// the answer), not by the 120 s request timeout. Resumed, the server serves
/// the next client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_server_is_found_out_by_the_client_keepalive() {
    let (server, port) = start_smbx_direct("");
    std::fs::write(server.share_dir("share").join("quiet.bin"), vec![7u8; 4096]).unwrap();
    let (_client, _session, tree) = logged_on_direct(port).await;
    let f = tree
        .open("quiet.bin", &OpenOptions::new().read(true))
        .await
        .expect("open");
    assert_eq!(f.read_at(0, 4096).await.expect("read"), vec![7u8; 4096]);

    signal_server(&server, "STOP");
    let resume = Resume(&server);
    let t0 = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(60), f.read_at(0, 4096))
        .await
        .expect("the READ still waits after 60 s: no keepalive found the server silent");
    let took = t0.elapsed();
    drop(resume);
    match r {
        Err(Error::Disconnected(reason)) => eprintln!("after {took:?}: {reason}"),
        other => panic!("after {took:?}: {other:?}, not the connection dropped"),
    }
    assert!(
        took >= Duration::from_secs(10),
        "failed after {took:?}, before the keepalive was even due"
    );
    next_client_ok(&server, port, "silent server").await;
}

// ------------------------------------------------------------------ invalid STag

/// A WRITE (the server RDMA-Reads) and a READ (the server RDMA-Writes) whose
/// descriptor names an STag the client never registered: the client's
/// provider answers with a Terminate, the connection ends, the request never
/// succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_against_invalid_stag() {
    let (server, port) = start_smbx_direct("");
    let fds = baseline(&server, port).await;
    for (op, channel) in [
        ("write", CHANNEL_RDMA_V1),
        ("read", CHANNEL_RDMA_V1_INVALIDATE),
    ] {
        let (client, session, tree) = logged_on_direct(port).await;
        let name = format!("stag-{op}.bin");
        let f = tree
            .open(&name, &OpenOptions::create_truncate())
            .await
            .expect("create");
        f.write_at(0, &random_bytes(1 << 16)).await.expect("fill");
        let desc = BufferDescriptorV1 {
            offset: 0x1000,
            token: 0xdead_be00,
            length: 1 << 16,
        }
        .encode();
        let id = f.id();
        let (cmd, body) = if op == "write" {
            let body = WriteRequest {
                offset: 0,
                file_id: id,
                channel,
                remaining_bytes: 1 << 16,
                channel_info: &desc,
                ..Default::default()
            }
            .encode();
            (smbx_wire::Command::Write, body)
        } else {
            let body = ReadRequest {
                length: 1 << 16,
                offset: 0,
                file_id: id,
                channel,
                remaining_bytes: 1 << 16,
                channel_info: &desc,
                ..Default::default()
            }
            .encode();
            (smbx_wire::Command::Read, body)
        };
        // The client's provider answers the server's RDMA operation with a
        // Terminate (invalid STag) and tears the connection down.
        let r = tree.call_raw(cmd, body).await;
        assert!(
            matches!(r, Err(Error::Disconnected(_))),
            "{op} against an invalid STag: {:?}",
            r.map(|resp| resp.status())
        );
        assert!(client.connection().is_closed(), "{op}: connection still up");
        drop(f);
        drop(tree);
        drop(session);
        client.connection().close();
        drop(client);
        open_exclusive_eventually(port, &name).await;
        next_client_ok(&server, port, &format!("invalid stag {op}")).await;
    }
    settle_fds(&server, fds).await;
}

// ------------------------------------------------------------------ raw peers

/// A hand-driven SMB Direct peer over soft-iWARP: negotiates, then sends
/// whatever the test builds, ignoring every rule it likes.
struct RawPeer {
    qp: SoftQp,
    sbuf: SoftMr,
    /// Send credits the server granted in its Negotiate Response.
    granted: u16,
    /// The server's MaxReceiveSize.
    max_receive: u32,
    /// Next free offset in `sbuf`.
    at: usize,
    _rbuf: SoftMr,
}

const RECV: usize = 8192;
const NRECV: usize = 64;

impl RawPeer {
    /// Connects (MPA) and, with `negotiate`, runs the SMB Direct negotiation.
    async fn connect(port: u16, negotiate: bool) -> RawPeer {
        let prov = SoftIwarp::new(IwarpOptions::default());
        let end = dialed(
            &prov,
            format!("127.0.0.1:{port}").parse().unwrap(),
            (ConnParams::default(), |qp, pd| {
                post_recvs(qp, pd, 0, NRECV, RECV)
            }),
        )
        .await;
        let sbuf = end.pd.alloc(4 << 20, Access::LOCAL_READ).unwrap();
        let mut p = RawPeer {
            qp: end.qp,
            sbuf,
            granted: 0,
            max_receive: 0,
            at: 0,
            _rbuf: end.before,
        };
        if negotiate {
            let mut req = Vec::new();
            for v in [0x0100u16, 0x0100, 0, 255] {
                req.extend_from_slice(&v.to_le_bytes());
            }
            for v in [1364u32, RECV as u32, 1 << 20] {
                req.extend_from_slice(&v.to_le_bytes());
            }
            p.send(&req);
            loop {
                let c = tokio::time::timeout(Duration::from_secs(10), p.qp.cq().next())
                    .await
                    .expect("negotiate response")
                    .expect("completion");
                assert_eq!(c.status, WcStatus::Success, "{c:?}");
                if c.opcode != WcOpcode::Recv {
                    continue;
                }
                assert_eq!(c.byte_len, 32, "negotiate response length");
                let off = c.wr_id as usize * RECV;
                let b = p._rbuf.with(|b| b[off..off + 32].to_vec());
                assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 0);
                p.granted = u16::from_le_bytes([b[10], b[11]]);
                p.max_receive = u32::from_le_bytes(b[24..28].try_into().unwrap());
                break;
            }
            assert!(p.granted > 0, "the server granted no credit");
        }
        p
    }

    /// Posts one Send of `msg` (copied to its own slot of the send buffer).
    fn send(&mut self, msg: &[u8]) {
        if self.at + msg.len() > self.sbuf.len() {
            self.at = 0;
        }
        assert!(self.sbuf.write_at(self.at, msg));
        // A failed post means the connection is already down: fine for a
        // peer misbehaving on purpose.
        let _ = self
            .qp
            .post_send_simple(0, &[Sge::new(&self.sbuf, self.at as u64, msg.len() as u32)]);
        self.at += msg.len().next_multiple_of(64);
    }

    /// The server must tear the connection down.
    async fn assert_dropped(&self, what: &str) {
        let r = tokio::time::timeout(Duration::from_secs(30), self.qp.closed()).await;
        assert!(r.is_ok(), "{what}: the server kept the connection");
    }
}

/// An SMB Direct data message (DataOffset 24 when there is data).
fn data_msg(granted: u16, remaining: u32, data: &[u8]) -> Vec<u8> {
    data_msg_raw(granted, remaining, 24, data.len() as u32, data)
}

fn data_msg_raw(granted: u16, remaining: u32, offset: u32, len: u32, data: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&10u16.to_le_bytes());
    m.extend_from_slice(&granted.to_le_bytes());
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(&remaining.to_le_bytes());
    m.extend_from_slice(&offset.to_le_bytes());
    m.extend_from_slice(&len.to_le_bytes());
    if offset == 0 && len == 0 && data.is_empty() {
        return m;
    }
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(data);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_ignoring_credits() {
    let (server, port) = start_smbx_direct("");
    let fds = baseline(&server, port).await;
    let mut p = RawPeer::connect(port, true).await;
    // Every Send takes a credit; send far more than were granted, granting
    // the server none (so it cannot answer with new credits in between).
    let n = usize::from(p.granted) + NRECV * 4;
    for _ in 0..n {
        p.send(&data_msg_raw(10, 0, 0, 0, &[]));
    }
    p.assert_dropped("credits ignored").await;
    next_client_ok(&server, port, "credits ignored").await;
    settle_fds(&server, fds).await;
}

/// Builds the messages a misbehaving peer sends after negotiating.
type Case = Box<dyn Fn(&RawPeer) -> Vec<Vec<u8>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_overlapping_fragments() {
    let (server, port) = start_smbx_direct("");
    let fds = baseline(&server, port).await;
    // Each case: the messages a peer sends after negotiating.
    let cases: Vec<(&str, Case)> = vec![
        (
            "send above max receive size",
            Box::new(|p: &RawPeer| vec![data_msg(1, 0, &vec![1u8; p.max_receive as usize])]),
        ),
        (
            "remaining length above max fragmented size",
            Box::new(|_p: &RawPeer| vec![data_msg(1, 0x7fff_0000, &[1u8; 1000])]),
        ),
        (
            "data length beyond the message",
            Box::new(|_p: &RawPeer| vec![data_msg_raw(1, 0, 24, 4000, &[1u8; 100])]),
        ),
        (
            "data offset inside the header",
            Box::new(|_p: &RawPeer| vec![data_msg_raw(1, 0, 8, 100, &[1u8; 100])]),
        ),
        (
            "overlapping fragments (remaining grows)",
            Box::new(|_p: &RawPeer| {
                vec![
                    data_msg(1, 4000, &[2u8; 1000]),
                    data_msg(1, 9000, &[3u8; 1000]),
                ]
            }),
        ),
        (
            "overlapping fragments (more data than announced)",
            Box::new(|_p: &RawPeer| {
                vec![data_msg(1, 500, &[2u8; 1000]), data_msg(1, 0, &[3u8; 1000])]
            }),
        ),
    ];
    for (what, msgs) in cases {
        let mut p = RawPeer::connect(port, true).await;
        for m in msgs(&p) {
            p.send(&m);
        }
        p.assert_dropped(what).await;
        next_client_ok(&server, port, what).await;
    }
    settle_fds(&server, fds).await;
}

// ------------------------------------------------------------------ half-open

/// The server closes `s` (EOF or reset) before the deadline.
async fn assert_closed_by_server(s: &mut TcpStream, what: &str) {
    let mut b = [0u8; 256];
    let r = tokio::time::timeout(Duration::from_secs(40), async {
        loop {
            match s.read(&mut b).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(
        r.is_ok(),
        "{what}: the server kept the half-open connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections() {
    let (server, port) = start_smbx_direct("");
    let fds = baseline(&server, port).await;
    let addr = format!("127.0.0.1:{port}");
    // TCP connected, nothing sent.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    // Stopped in the middle of the MPA Request.
    let mut mid_mpa = TcpStream::connect(&addr).await.unwrap();
    mid_mpa.write_all(b"MPA ID Req F").await.unwrap();
    // MPA done, no SMB Direct Negotiate Request ever.
    let no_negotiate = RawPeer::connect(port, false).await;
    // Negotiated, then stopped in the middle of a fragmented message.
    let mut mid_message = RawPeer::connect(port, true).await;
    mid_message.send(&data_msg(1, 100_000, &[7u8; 1000]));

    // None of them holds up a new client.
    next_client_ok(&server, port, "half-open peers waiting").await;

    // The server gives up on the ones stuck in connection setup.
    assert_closed_by_server(&mut silent, "tcp only").await;
    assert_closed_by_server(&mut mid_mpa, "mid-MPA").await;
    no_negotiate.assert_dropped("no negotiate").await;
    // The one mid-message is a live SMB Direct connection the peer stops
    // using: the test hangs up on it; the server frees it.
    mid_message.qp.disconnect();
    next_client_ok(&server, port, "half-open peers gone").await;
    settle_fds(&server, fds).await;
}

// ------------------------------------------------------------------ remote invalidation

/// Peers that have not even negotiated send Send with Invalidate naming STags
/// they were never given (every one a guess, the first ones those the
/// provider's old shared, sequential registration domain handed the server's
/// other connections) while a logged-on client moves data over SMB Direct. Each
/// offender alone is terminated; the client's transfer completes intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_invalidate_reaches_no_other_connection() {
    let (server, port) = start_smbx_direct("");
    let fds = baseline(&server, port).await;
    let victim = tokio::spawn(async move {
        let (_client, session, tree) = logged_on_direct(port).await;
        let f = tree
            .open("victim.bin", &OpenOptions::create_truncate())
            .await
            .expect("create");
        for round in 0..8u64 {
            let data = random_bytes(1024 * 1024 + round as usize);
            f.write_at(round << 21, &data).await.expect("write");
            let back = f.read_at(round << 21, data.len()).await.expect("read");
            assert_eq!(sha256(&back), sha256(&data), "round {round}");
        }
        f.close().await.expect("close");
        session.logoff().await.expect("logoff");
    });
    for i in 0..48u32 {
        let p = RawPeer::connect(port, false).await;
        // First the STags a shared, sequential domain handed out first (as
        // the provider once did: index n + 1, key mixed from n), then random.
        let stag = if i < 32 {
            ((i + 1) << 8) | ((i.wrapping_mul(0x9E37_79B9) >> 24) | 1)
        } else {
            rand::random()
        };
        let _ =
            p.qp.post_send_inv(0, &[Sge::new(&p.sbuf, 0, 32)], STag(stag));
        p.assert_dropped(&format!("invalidate {stag:#x}")).await;
    }
    victim.await.expect("the victim's transfers");
    next_client_ok(&server, port, "foreign invalidation").await;
    settle_fds(&server, fds).await;
}
