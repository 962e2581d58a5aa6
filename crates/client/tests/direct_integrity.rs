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

use common::{sha256, start_smbx_direct, PASSWORD, USER};
use smbx_client::{Client, ClientOptions, Encryption, OpenOptions, Signing, Transport};
use smbx_wire::Dialect;

const MAX_IO: usize = 8 << 20;
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

/// xorshift64*: fast, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    /// 1..=MAX_IO: half uniform (mostly large, RDMA), half log-uniform (many
    /// small ones, inline and just around the threshold).
    fn size(&mut self) -> usize {
        if self.next() & 1 == 0 {
            self.range(1, MAX_IO)
        } else {
            let bits = self.range(0, 23) as u32;
            self.range(1 << bits, (2usize << bits).min(MAX_IO))
        }
    }
    fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
    }
}

fn seed() -> u64 {
    std::env::var("SMBX_DIRECT_INTEGRITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

async fn integrity(addr: &str, o: ClientOptions, name: &str, dir: &std::path::Path, total: u64) {
    let seed = seed();
    let mut rng = Rng(seed);
    let ctx = format!("{name} (SMBX_DIRECT_INTEGRITY_SEED={seed})");
    let client = Client::connect(addr, o).await.expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree");
    let f = tree
        .open(name, &OpenOptions::create_truncate())
        .await
        .expect("create");
    let mut model = vec![0u8; SPAN];
    let mut end = 0usize;
    let started = std::time::Instant::now();
    let (mut written, mut writes) = (0u64, 0u64);
    let mut buf = vec![0u8; MAX_IO];
    while written < total {
        let n = rng.size().min(SPAN);
        let off = rng.range(0, SPAN - n);
        rng.fill(&mut buf[..n]);
        let got = f
            .write_at(off as u64, &buf[..n])
            .await
            .unwrap_or_else(|e| panic!("{ctx}: write {n} at {off}: {e}"));
        assert_eq!(got, n, "{ctx}: write {n} at {off}");
        model[off..off + n].copy_from_slice(&buf[..n]);
        end = end.max(off + n);
        written += n as u64;
        writes += 1;
    }
    let wtime = started.elapsed();
    let started = std::time::Instant::now();
    let (mut read, mut reads) = (0u64, 0u64);
    while read < total {
        let n = rng.size().min(end);
        let off = rng.range(0, end - n);
        let back = f
            .read_at(off as u64, n)
            .await
            .unwrap_or_else(|e| panic!("{ctx}: read {n} at {off}: {e}"));
        assert_eq!(back.len(), n, "{ctx}: read {n} at {off}: short");
        assert_eq!(
            sha256(&back),
            sha256(&model[off..off + n]),
            "{ctx}: read {n} at {off}"
        );
        read += n as u64;
        reads += 1;
    }
    let rtime = started.elapsed();
    let whole = f.read_at(0, SPAN + 1).await.expect("read whole");
    assert_eq!(whole.len(), end, "{ctx}: file size");
    let want = sha256(&model[..end]);
    assert_eq!(sha256(&whole), want, "{ctx}: whole file");
    f.close().await.expect("close");
    session.logoff().await.expect("logoff");
    let on_disk = std::fs::read(dir.join(name)).unwrap();
    assert_eq!(sha256(&on_disk), want, "{ctx}: on the server's disk");
    eprintln!(
        "{name}: wrote {written} bytes in {writes} writes ({:.1} s), read {read} bytes in \
         {reads} reads ({:.1} s), file {end} bytes, sha256 {want}",
        wtime.as_secs_f64(),
        rtime.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_io_plain_signed_sealed() {
    let total = total_bytes();
    let (server, port) = start_smbx_direct("");
    let addr = format!("127.0.0.1:{port}");
    let dir = server.share_dir("share");
    let rdma = || {
        let mut o = ClientOptions::default().with_dialect(Dialect::SMB3_1_1);
        o.transport = Transport::Rdma;
        o
    };
    integrity(&addr, rdma(), "plain", &dir, total).await;
    let signed = rdma().with_signing(Signing::Required);
    integrity(&addr, signed, "signed", &dir, total).await;
    let sealed = rdma().with_encryption(Encryption::Required);
    integrity(&addr, sealed, "sealed", &dir, total).await;
    assert!(!server.log().contains("panicked"), "{}", server.log());
}
