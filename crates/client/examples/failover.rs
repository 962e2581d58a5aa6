//! A checksummed transfer over a multichannel session while links fail, for
//! bench/multichannel-failover.sh and by hand: writes a file of pseudo-random
//! data in 1 MiB pieces (32 at a time), runs `--down CMD` once a quarter is
//! written, `--up CMD` once every write has completed, reads the file back the
//! same way and compares SHA-256. Prints one JSON object: sizes, seconds, both
//! digests, `ok`, and each channel's requests, bytes, replays and reconnects.
//!
//! ```text
//! cargo build --release -p smbx-client --example failover
//! SMBX_PASSWORD=secret target/release/examples/failover \
//!     'smb://alice@10.0.0.1/share/big.bin?multichannel=3' [--mib 1024] \
//!     [--timeout 5] [--down 'ip link set eth1 down'] [--up 'ip link set eth1 up'] \
//!     [--socket-options 'SO_KEEPALIVE TCP_USER_TIMEOUT=4000']
//! ```
//!
//! `--timeout` (seconds, default 5) is how long a request waits before its
//! channel counts as failed; `--socket-options` (smb.conf's syntax) are set on
//! each connection. `reestablished` in the output says whether the session was
//! replaced (the server dropped it; the durable opens were reclaimed on a new
//! one), and the channels listed are the session's at the end. Exits 0 when
//! the digests match, 1 otherwise.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use smbx_client::{ClientOptions, OpenOptions, SmbUrl};

/// Bytes per WRITE and READ.
const PIECE: usize = 1 << 20;
/// Requests kept in flight.
const DEPTH: usize = 32;

fn usage() -> ! {
    eprintln!(
        "usage: failover smb://[user@]host[:port]/share/file[?multichannel=N] [--mib N] \
         [--timeout SECS] [--down CMD] [--up CMD] [--socket-options OPTS]"
    );
    std::process::exit(2)
}

/// Piece `i` of the file: xorshift from a per-piece seed.
fn piece(i: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    let mut v = Vec::with_capacity(PIECE);
    while v.len() < PIECE {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn shell(cmd: &Option<String>) {
    if let Some(c) = cmd {
        match std::process::Command::new("sh").args(["-c", c]).status() {
            Ok(st) if st.success() => eprintln!("failover: ran `{c}`"),
            r => eprintln!("failover: `{c}` failed: {r:?}"),
        }
    }
}

async fn run(args: &[String]) -> Result<serde_json::Value, String> {
    let url = SmbUrl::parse(args.first().map(String::as_str).unwrap_or_else(|| usage()))
        .map_err(|e| e.to_string())?;
    let (mut mib, mut timeout, mut down, mut up) = (1024usize, 5u64, None, None);
    let mut socket = smbx_transport::SocketOptions::default();
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_else(|| usage());
        match a.as_str() {
            "--mib" => mib = val().parse().unwrap_or_else(|_| usage()),
            "--timeout" => timeout = val().parse().unwrap_or_else(|_| usage()),
            "--down" => down = Some(val()),
            "--up" => up = Some(val()),
            "--socket-options" => {
                let (o, warnings) = smbx_transport::SocketOptions::parse(&val());
                for w in warnings {
                    eprintln!("failover: {w}; ignored");
                }
                socket = o;
            }
            _ => usage(),
        }
    }
    let opts = ClientOptions {
        timeout: Some(Duration::from_secs(timeout)),
        socket,
        ..ClientOptions::default()
    };
    let password = std::env::var("SMBX_PASSWORD").ok();
    let (tree, path) = url
        .open(password.as_deref(), opts)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let session = tree.session().clone();

    let t0 = Instant::now();
    let f = Arc::new(
        tree.open(&path, &OpenOptions::create_truncate())
            .await
            .map_err(|e| format!("create {path}: {e}"))?,
    );
    let done = Arc::new(AtomicUsize::new(0));
    let down = Arc::new(down);
    stream::iter(0..mib)
        .map(|i| {
            let (f, done, down) = (f.clone(), done.clone(), down.clone());
            async move {
                let data = piece(i);
                let n = f.write_at((i * PIECE) as u64, &data).await?;
                if n != PIECE {
                    return Err(smbx_client::Error::from(
                        smbx_client::ProtocolError::ShortWrite {
                            written: n,
                            len: PIECE,
                        },
                    ));
                }
                if done.fetch_add(1, Ordering::AcqRel) + 1 == mib / 4 {
                    tokio::task::spawn_blocking(move || shell(&down));
                }
                Ok(())
            }
        })
        .buffer_unordered(DEPTH)
        .try_collect::<Vec<()>>()
        .await
        .map_err(|e| format!("write: {e}"))?;
    let f = Arc::into_inner(f).expect("writes done");
    f.close().await.map_err(|e| format!("close: {e}"))?;
    let write_s = t0.elapsed().as_secs_f64();
    let mut expect = Sha256::new();
    for i in 0..mib {
        expect.update(piece(i));
    }
    let expect = hex(&expect.finalize());
    shell(&up);

    let t1 = Instant::now();
    let g = tree
        .open(&path, &OpenOptions::read_only())
        .await
        .map_err(|e| format!("open {path}: {e}"))?;
    let mut got = Sha256::new();
    let mut reads = stream::iter(0..mib)
        .map(|i| g.read_at((i * PIECE) as u64, PIECE))
        .buffered(DEPTH);
    while let Some(r) = reads.next().await {
        got.update(r.map_err(|e| format!("read: {e}"))?);
    }
    drop(reads);
    g.close().await.map_err(|e| format!("close: {e}"))?;
    let read_s = t1.elapsed().as_secs_f64();
    let got = hex(&got.finalize());
    // A session the server dropped was replaced by a new one.
    let now = tree.session();
    let reestablished = now.id() != session.id();
    let channels: Vec<serde_json::Value> = now
        .channel_stats()
        .iter()
        .map(|c| {
            serde_json::json!({
                "address": c.addr.map(|a| a.to_string()),
                "requests": c.requests,
                "bytes": c.bytes_sent + c.bytes_received,
                "replayed": c.replayed,
                "reconnects": c.reconnects,
                "live": c.live,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "bytes": (mib * PIECE) as u64,
        "write_s": write_s,
        "read_s": read_s,
        "sha256_written": expect,
        "sha256_read": got,
        "ok": expect == got,
        "reestablished": reestablished,
        "channels": channels,
    }))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(v) => {
            println!("{v}");
            std::process::exit(if v["ok"] == true { 0 } else { 1 });
        }
        Err(e) => {
            println!("{}", serde_json::json!({ "ok": false, "error": e }));
            std::process::exit(1);
        }
    }
}
