//! Integrity over SMB Direct: against `smbx serve` with `smb direct = yes`,
//! the client writes SMBX_DIRECT_INTEGRITY_BYTES in total at random offsets
//! with random sizes from 1 byte to 8 MiB (so both inline I/O below the 4 KiB
//! RDMA threshold and RDMA Read/Write channels of up to 8 MiB), then reads the
//! same total back at random offsets and sizes, each read compared by SHA-256
//! with a local model of the file; finally the whole file, read back and on
//! the server's disk, must match the model. Plain, signed and sealed (SMB
//! 3.1.1; sealed I/O goes inline).
//!
//! SMBX_DIRECT_INTEGRITY_BYTES: total written (and total read) per
//! variant. Default: 1 GiB in a release test binary, 64 MiB in a debug one.
//! The 1 GiB run, with a release server:
//!
//! ```text
//! cargo build --release -p smbx-cli
//! SMBX_BIN=target/release/smbx cargo test --release -p smbx-client --test direct_integrity
//! ```
//!
//! SMBX_DIRECT_INTEGRITY_SEED fixes the random sequence (printed on failure).

mod common;
#[path = "../examples/checksum/workload.rs"]
mod workload;

use common::{rdma_options, sha256, start_smbx_direct, PASSWORD, USER};
use smbx_client::{Client, ClientOptions, Encryption, OpenOptions, Signing};
use smbx_wire::Dialect;
use workload::{random_io, seed, Rng};

/// The file the random I/O lands in (and the local model's size).
const SPAN: usize = 64 << 20;

fn total_bytes() -> u64 {
    if let Ok(v) = std::env::var("SMBX_DIRECT_INTEGRITY_BYTES") {
        return v
            .parse()
            .unwrap_or_else(|_| panic!("SMBX_DIRECT_INTEGRITY_BYTES={v}: not a byte count"));
    }
    if cfg!(debug_assertions) {
        64 << 20
    } else {
        1 << 30
    }
}

async fn integrity(addr: &str, o: ClientOptions, name: &str, dir: &std::path::Path, total: u64) {
    let seed = seed("SMBX_DIRECT_INTEGRITY_SEED");
    let mut rng = Rng(seed);
    let ctx = format!("{name} (SMBX_DIRECT_INTEGRITY_SEED={seed})");
    let client = Client::connect(addr, o).await.expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    let f = tree
        .open(name, &OpenOptions::create_truncate())
        .await
        .expect("create");
    let out = random_io(&f, &mut rng, SPAN, total)
        .await
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    f.close().await.expect("close");
    session.logoff().await.expect("logoff");
    let on_disk = std::fs::read(dir.join(name)).unwrap();
    assert_eq!(sha256(&on_disk), out.sha256, "{ctx}: on the server's disk");
    eprintln!(
        "{name}: wrote {} bytes in {} writes ({:.1} s), read {} bytes in {} reads ({:.1} s), \
         file {} bytes, sha256 {}",
        out.written, out.writes, out.secs.0, out.read, out.reads, out.secs.1, out.end, out.sha256
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_io_plain_signed_sealed() {
    let total = total_bytes();
    let (server, port) = start_smbx_direct("");
    let addr = format!("127.0.0.1:{port}");
    let dir = server.share_dir("share");
    let rdma = || rdma_options(Dialect::SMB3_1_1);
    integrity(&addr, rdma(), "plain", &dir, total).await;
    let signed = rdma().with_signing(Signing::Required);
    integrity(&addr, signed, "signed", &dir, total).await;
    let sealed = rdma().with_encryption(Encryption::Required);
    integrity(&addr, sealed, "sealed", &dir, total).await;
    assert!(!server.log().contains("panicked"), "{}", server.log());
}
