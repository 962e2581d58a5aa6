//! The checksum workload shared by `examples/checksum` (run in the RDMA test
//! guest, tests/guest) and `tests/direct_integrity.rs`: writes at random
//! offsets with random sizes from 1 byte to 8 MiB (both inline I/O and RDMA
//! channels), reads at random offsets compared by SHA-256 with a local model
//! of the file, then the whole file.

use sha2::{Digest, Sha256};
use smbx_client::File;

/// The largest single read or write.
pub const MAX_IO: usize = 8 << 20;

/// Lower-case hex SHA-256.
pub fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// xorshift64*: fast, reproducible.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    /// 1..=MAX_IO: half uniform (mostly large, RDMA), half log-uniform (many
    /// small ones, inline and just around the threshold).
    pub fn size(&mut self) -> usize {
        if self.next() & 1 == 0 {
            self.range(1, MAX_IO)
        } else {
            let bits = self.range(0, 23) as u32;
            self.range(1 << bits, (2usize << bits).min(MAX_IO))
        }
    }
    /// Fill `b` with random bytes.
    pub fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
    }
}

/// A seed from `var` when set, else from the clock.
pub fn seed(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        })
}

/// What a run did.
pub struct Outcome {
    /// Bytes written and how many writes.
    pub written: u64,
    /// Number of writes.
    pub writes: u64,
    /// Bytes read (and compared) and how many reads.
    pub read: u64,
    /// Number of reads.
    pub reads: u64,
    /// Seconds spent writing, reading.
    pub secs: (f64, f64),
    /// The file's size: the end of the furthest write.
    pub end: usize,
    /// SHA-256 of the whole file, as read back and as the model has it.
    pub sha256: String,
}

/// Writes `total` bytes at random offsets into the first `span` bytes of
/// `f` (an empty file), reads `total` bytes back at random offsets, each
/// read checked by SHA-256 against the model, then the whole file. Errors
/// name the operation, its size and offset.
pub async fn random_io(
    f: &File,
    rng: &mut Rng,
    span: usize,
    total: u64,
) -> Result<Outcome, String> {
    let mut model = vec![0u8; span];
    let mut end = 0usize;
    let started = std::time::Instant::now();
    let (mut written, mut writes) = (0u64, 0u64);
    let mut buf = vec![0u8; MAX_IO.min(span)];
    while written < total {
        let n = rng.size().min(span);
        let off = rng.range(0, span - n);
        rng.fill(&mut buf[..n]);
        let got = f
            .write_at(off as u64, &buf[..n])
            .await
            .map_err(|e| format!("write {n} at {off}: {e}"))?;
        if got != n {
            return Err(format!("write {n} at {off}: {got} written"));
        }
        model[off..off + n].copy_from_slice(&buf[..n]);
        end = end.max(off + n);
        written += n as u64;
        writes += 1;
    }
    let wsecs = started.elapsed().as_secs_f64();
    let started = std::time::Instant::now();
    let (mut read, mut reads) = (0u64, 0u64);
    while read < total {
        let n = rng.size().min(end);
        let off = rng.range(0, end - n);
        let back = f
            .read_at(off as u64, n)
            .await
            .map_err(|e| format!("read {n} at {off}: {e}"))?;
        if back.len() != n {
            return Err(format!("read {n} at {off}: {} bytes came back", back.len()));
        }
        if sha256(&back) != sha256(&model[off..off + n]) {
            return Err(format!(
                "read {n} at {off}: SHA-256 differs from what was written"
            ));
        }
        read += n as u64;
        reads += 1;
    }
    let rsecs = started.elapsed().as_secs_f64();
    // The size from the server's EndOfFile, then exactly that many bytes: no READ at or
    // past end of file, whose STATUS_END_OF_FILE response ksmbd (Linux 6.1) signs over
    // the wrong bytes.
    let size = f
        .stat()
        .await
        .map_err(|e| format!("stat the file: {e}"))?
        .size;
    if size != end as u64 {
        return Err(format!("file size {size} (want {end})"));
    }
    let whole = f
        .read_at(0, end)
        .await
        .map_err(|e| format!("read the whole file: {e}"))?;
    if whole.len() != end {
        return Err(format!(
            "read the whole file: {} bytes (want {end})",
            whole.len()
        ));
    }
    let want = sha256(&model[..end]);
    if sha256(&whole) != want {
        return Err("the whole file's SHA-256 differs from what was written".into());
    }
    Ok(Outcome {
        written,
        writes,
        read,
        reads,
        secs: (wsecs, rsecs),
        end,
        sha256: want,
    })
}
