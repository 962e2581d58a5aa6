//! The Prometheus endpoint (`metrics listen`): after an exact sequence of
//! requests, a scrape counts each of them by command and status, the file data
//! bytes, the latency histograms and the gauges; hostile HTTP gets an error or a
//! close, never a hang; without the option no endpoint is bound.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use smbx_wire::oplock::OplockLevel;
use smbx_wire::rw::{ReadRequest, WriteRequest};
use smbx_wire::{Command, NtStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on any wait of these tests (they assert behaviour, not speed).
const BOUND: Duration = Duration::from_secs(30);

/// Sends `request` as is and returns everything the endpoint answers until it
/// closes the connection.
async fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // The server may close as soon as it has answered (or refused) the head.
    let _ = s.write_all(request).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(BOUND, s.read_to_end(&mut out))
        .await
        .expect("the endpoint neither answered nor closed");
    String::from_utf8_lossy(&out).into_owned()
}

/// Scrapes `/metrics`: `series (name and labels as written) -> value`.
async fn scrape(addr: SocketAddr) -> HashMap<String, f64> {
    let answer = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .unwrap();
    assert_eq!(len, body.len());
    let mut out = HashMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("name value");
        out.insert(series.to_string(), value.parse().expect("a number"));
    }
    out
}

fn get(m: &HashMap<String, f64>, series: &str) -> f64 {
    *m.get(series)
        .unwrap_or_else(|| panic!("no {series} in the scrape"))
}

fn requests(m: &HashMap<String, f64>, command: &str, status: NtStatus) -> f64 {
    let series = format!(
        "smbx_requests_total{{command=\"{command}\",status=\"{}\"}}",
        status.name().unwrap()
    );
    m.get(&series).copied().unwrap_or(0.0)
}

async fn endpoint(srv: &TestServer) -> SocketAddr {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        if let Some(a) = srv.state.metrics.endpoint() {
            return a;
        }
        assert!(tokio::time::Instant::now() < deadline, "no endpoint bound");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn metrics_config(dir: &std::path::Path) -> smbx_config::Config {
    let mut c = test_config(dir);
    c.global.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    c
}

#[tokio::test]
async fn counts_the_requests_a_client_sent() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(metrics_config(dir.path())).await;
    let addr = endpoint(&srv).await;
    let before = scrape(addr).await;
    assert_eq!(get(&before, "smbx_sessions"), 0.0);
    assert_eq!(get(&before, "smbx_opens"), 0.0);

    let mut c = connect_share(&srv).await;
    let missing = c
        .request(Command::Create, &create_with("nope", OplockLevel::NONE, 1))
        .await;
    assert_eq!(missing.status(), NtStatus::OBJECT_NAME_NOT_FOUND);
    let f = created(
        &c.request(Command::Create, &create_body("f", OplockLevel::NONE))
            .await,
    );
    let (p, v) = (f.file_id.persistent, f.file_id.volatile);
    let data = vec![0x5a; 1000];
    for i in 0..3u64 {
        let body = WriteRequest {
            offset: i * 1000,
            file_id: smbx_wire::FileId {
                persistent: p,
                volatile: v,
            },
            length: 1000,
            data: &data,
            ..Default::default()
        }
        .encode();
        assert_eq!(
            c.request(Command::Write, &body).await.status(),
            NtStatus::SUCCESS
        );
    }
    for (offset, want) in [
        (0u64, NtStatus::SUCCESS),
        (2500, NtStatus::SUCCESS),
        (5000, NtStatus::END_OF_FILE),
    ] {
        let body = ReadRequest {
            length: 500,
            offset,
            file_id: smbx_wire::FileId {
                persistent: p,
                volatile: v,
            },
            ..Default::default()
        }
        .encode();
        assert_eq!(c.request(Command::Read, &body).await.status(), want);
    }

    let m = scrape(addr).await;
    assert_eq!(requests(&m, "NEGOTIATE", NtStatus::SUCCESS), 1.0);
    assert_eq!(requests(&m, "SESSION_SETUP", NtStatus::SUCCESS), 1.0);
    assert_eq!(
        requests(&m, "SESSION_SETUP", NtStatus::MORE_PROCESSING_REQUIRED),
        1.0
    );
    assert_eq!(requests(&m, "TREE_CONNECT", NtStatus::SUCCESS), 1.0);
    assert_eq!(requests(&m, "CREATE", NtStatus::SUCCESS), 1.0);
    assert_eq!(requests(&m, "CREATE", NtStatus::OBJECT_NAME_NOT_FOUND), 1.0);
    assert_eq!(requests(&m, "WRITE", NtStatus::SUCCESS), 3.0);
    assert_eq!(requests(&m, "READ", NtStatus::SUCCESS), 2.0);
    assert_eq!(requests(&m, "READ", NtStatus::END_OF_FILE), 1.0);
    assert_eq!(
        get(
            &m,
            "smbx_bytes_total{direction=\"write\",transport=\"tcp\"}"
        ),
        3000.0
    );
    assert_eq!(
        get(&m, "smbx_bytes_total{direction=\"read\",transport=\"tcp\"}"),
        1000.0
    );
    assert_eq!(
        get(
            &m,
            "smbx_bytes_total{direction=\"write\",transport=\"smbdirect\"}"
        ),
        0.0
    );
    // One histogram series per command seen, its +Inf bucket and count equal.
    let count = get(&m, "smbx_request_duration_seconds_count{command=\"READ\"}");
    assert_eq!(count, 3.0);
    assert_eq!(
        get(
            &m,
            "smbx_request_duration_seconds_bucket{command=\"READ\",le=\"+Inf\"}"
        ),
        3.0
    );
    assert!(get(&m, "smbx_request_duration_seconds_sum{command=\"READ\"}") > 0.0);
    assert!(!m.keys().any(|k| k.contains("command=\"LOCK\"")));
    // Gauges.
    assert_eq!(get(&m, "smbx_sessions"), 1.0);
    assert_eq!(get(&m, "smbx_opens"), 1.0);
    assert_eq!(get(&m, "smbx_connections{transport=\"tcp\"}"), 1.0);
    assert_eq!(get(&m, "smbx_channels{transport=\"tcp\"}"), 1.0);
    assert_eq!(get(&m, "smbx_channels{transport=\"smbdirect\"}"), 0.0);
    // Every response granted at least one credit; the messages went both ways.
    assert!(get(&m, "smbx_credits_granted_total") >= 11.0);
    let received = "smbx_network_bytes_total{direction=\"received\",transport=\"tcp\"}";
    let sent = "smbx_network_bytes_total{direction=\"sent\",transport=\"tcp\"}";
    assert!(get(&m, received) > 3000.0);
    assert!(get(&m, sent) > 1000.0);

    // The connection goes away: the gauges follow, the counters stay.
    drop(c);
    let deadline = tokio::time::Instant::now() + BOUND;
    let m = loop {
        let m = scrape(addr).await;
        if get(&m, "smbx_connections{transport=\"tcp\"}") == 0.0 {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(get(&m, "smbx_sessions"), 0.0);
    assert_eq!(get(&m, "smbx_opens"), 0.0);
    assert_eq!(requests(&m, "WRITE", NtStatus::SUCCESS), 3.0);
}

#[tokio::test]
async fn hostile_http_gets_an_error_or_a_close() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(metrics_config(dir.path())).await;
    let addr = endpoint(&srv).await;
    let cases: &[(&[u8], &str)] = &[
        (b"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 "),
        (b"GET /metrics/../x HTTP/1.1\r\n\r\n", "HTTP/1.1 404 "),
        (
            b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
            "HTTP/1.1 405 ",
        ),
        (b"DELETE /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 "),
        (b"GET /metrics HTTP/9.9\r\n\r\n", "HTTP/1.1 400 "),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            "HTTP/1.1 400 ",
        ),
        (b"GET\r\n\r\n", "HTTP/1.1 400 "),
        (b"\r\n\r\n", "HTTP/1.1 400 "),
    ];
    for (req, want) in cases {
        let a = http(addr, req).await;
        assert!(a.starts_with(want), "{req:?} -> {a:?}");
    }
    // A head that never ends within the bound on its size.
    let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let a = http(addr, &big).await;
    assert!(a.is_empty() || a.starts_with("HTTP/1.1 431 "), "{a:?}");
    // A client that connects and says nothing (or half a line) is closed.
    for partial in [&b""[..], b"GET /met"] {
        let a = http(addr, partial).await;
        assert!(a.is_empty(), "{a:?}");
    }
    // HEAD: the same head, no body.
    let a = http(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n").await;
    let (head, body) = a.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(body.is_empty());
    // And it still serves.
    let m = scrape(addr).await;
    assert_eq!(get(&m, "smbx_sessions"), 0.0);
}

#[tokio::test]
async fn off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    // Once the server answers a request, run() has passed the endpoint's start.
    let mut c = connect_share(&srv).await;
    assert_eq!(
        c.request(Command::Echo, &[4, 0, 0, 0]).await.status(),
        NtStatus::SUCCESS
    );
    assert_eq!(srv.state.metrics.endpoint(), None);
    // The counters run all the same (they are what an endpoint would show).
    assert_eq!(srv.state.metrics.requests(Command::Echo), 1);
}

/// An operation that goes async counts once, with its final status (never
/// STATUS_PENDING), and its latency once.
#[tokio::test]
async fn async_operations_count_their_final_status() {
    use smbx_wire::lock::{LockElement, LockRequest, LOCKFLAG_EXCLUSIVE};
    let lock = |file_id: smbx_wire::FileId| {
        LockRequest {
            lock_sequence_number: 0,
            lock_sequence_index: 0,
            file_id,
            locks: vec![LockElement {
                offset: 0,
                length: 10,
                flags: LOCKFLAG_EXCLUSIVE,
            }],
        }
        .encode()
    };
    let dir = tempfile::tempdir().unwrap();
    let srv = start(metrics_config(dir.path())).await;
    let addr = endpoint(&srv).await;
    let mut c = connect_share(&srv).await;
    let h1 = file_id_of(&created(
        &c.request(Command::Create, &create_body("f", OplockLevel::NONE))
            .await,
    ));
    let h2 = file_id_of(&created(
        &c.request(Command::Create, &create_body("f", OplockLevel::NONE))
            .await,
    ));
    assert_eq!(
        c.request(Command::Lock, &lock(h1)).await.status(),
        NtStatus::SUCCESS
    );
    // A blocking lock on the same range through the other open waits...
    let h = c.header(Command::Lock);
    c.send_raw(&Client::message(&h, &lock(h2))).await;
    let interim = c.recv().await.unwrap().remove(0);
    assert_eq!(interim.status(), NtStatus::PENDING);
    let m = scrape(addr).await;
    assert_eq!(requests(&m, "LOCK", NtStatus::SUCCESS), 1.0);
    assert_eq!(requests(&m, "LOCK", NtStatus::PENDING), 0.0);
    assert_eq!(
        get(&m, "smbx_request_duration_seconds_count{command=\"LOCK\"}"),
        1.0
    );
    // ... until it is cancelled.
    let mut cancel = c.header(Command::Cancel);
    cancel.flags |= smbx_wire::header::FLAGS_ASYNC_COMMAND;
    cancel.async_id = interim.header.async_id;
    c.send_raw(&Client::message(
        &cancel,
        &smbx_wire::simple::encode_simple(),
    ))
    .await;
    let done = c.recv().await.unwrap().remove(0);
    assert_eq!(done.status(), NtStatus::CANCELLED);
    let m = scrape(addr).await;
    assert_eq!(requests(&m, "LOCK", NtStatus::CANCELLED), 1.0);
    assert_eq!(requests(&m, "LOCK", NtStatus::PENDING), 0.0);
    assert_eq!(
        get(&m, "smbx_request_duration_seconds_count{command=\"LOCK\"}"),
        2.0
    );
    // CANCEL itself has no response and is not counted.
    assert!(!m.keys().any(|k| k.contains("command=\"CANCEL\"")));
}
