//! The checksum workload against any SMB3 server, for the RDMA test guest
//! (tests/guest) and by hand: create a file, write at random offsets with
//! random sizes from 1 byte to 8 MiB, read back at random offsets comparing
//! SHA-256 with a local model, check the whole file, rename it, delete it.
//!
//! ```text
//! cargo build --release -p smbx-client --example checksum
//! SMBX_PASSWORD=secret target/release/examples/checksum \
//!     'smb://alice@host/share/dir?transport=rdma' [--dialect 3.0|3.0.2|3.1.1] \
//!     [--sign] [--seal] [--bytes N] [--span N]
//! ```
//!
//! The URL names the share and a directory in it (may be empty) where
//! `checksum-<seed>` is created. `--bytes` is the total written and the total
//! read (default 32 MiB), `--span` the file's extent (default 16 MiB).
//! `SMBX_CHECKSUM_SEED` fixes the random sequence. Prints one `checksum:`
//! line and exits 0 on success; otherwise prints what failed and exits 1.

mod workload;

use smbx_client::{ClientOptions, Dialect, Encryption, OpenOptions, Signing, SmbUrl};
use workload::{random_io, seed, Rng};

fn parse_size(s: &str) -> Option<u64> {
    let (n, m) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    n.parse::<u64>().ok()?.checked_mul(m)
}

fn usage() -> ! {
    eprintln!(
        "usage: checksum smb://[user@]host[:port]/share[/dir][?transport=rdma] \
         [--dialect 3.0|3.0.2|3.1.1] [--sign] [--seal] [--bytes N] [--span N]"
    );
    std::process::exit(2)
}

async fn run(args: &[String]) -> Result<String, String> {
    let url = SmbUrl::parse(args.first().map(String::as_str).unwrap_or_else(|| usage()))
        .map_err(|e| e.to_string())?;
    let mut opts = ClientOptions::default();
    let (mut total, mut span) = (32u64 << 20, 16usize << 20);
    let mut it = args[1..].iter();
    let mut label = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dialect" => {
                let d = match it.next().map(String::as_str) {
                    Some("3.0") => Dialect::SMB3_0,
                    Some("3.0.2") => Dialect::SMB3_0_2,
                    Some("3.1.1") => Dialect::SMB3_1_1,
                    _ => usage(),
                };
                opts = opts.with_dialect(d);
            }
            "--sign" => {
                opts = opts.with_signing(Signing::Required);
                label.push("signed");
            }
            "--seal" => {
                opts = opts.with_encryption(Encryption::Required);
                label.push("sealed");
            }
            "--bytes" => {
                total = it
                    .next()
                    .and_then(|s| parse_size(s))
                    .unwrap_or_else(|| usage())
            }
            "--span" => {
                span = it
                    .next()
                    .and_then(|s| parse_size(s))
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    let password = std::env::var("SMBX_PASSWORD").ok();
    let (tree, dir) = url
        .open(password.as_deref(), opts)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let seed = seed("SMBX_CHECKSUM_SEED");
    let dir = dir.trim_matches(|c| c == '/' || c == '\\').to_string();
    let join = |n: &str| {
        if dir.is_empty() {
            n.to_string()
        } else {
            format!("{dir}/{n}")
        }
    };
    let name = join(&format!("checksum-{seed}"));
    let moved = join(&format!("checksum-{seed}.renamed"));
    let ctx = |e: String| format!("{e} (SMBX_CHECKSUM_SEED={seed})");
    let f = tree
        .open(&name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| ctx(format!("create {name}: {e}")))?;
    let mut rng = Rng(seed);
    let o = random_io(&f, &mut rng, span, total).await.map_err(ctx)?;
    f.close().await.map_err(|e| ctx(format!("close: {e}")))?;
    tree.rename(&name, &moved)
        .await
        .map_err(|e| ctx(format!("rename to {moved}: {e}")))?;
    let g = tree
        .open(&moved, &OpenOptions::read_only())
        .await
        .map_err(|e| ctx(format!("open {moved}: {e}")))?;
    // The size the open reported, then exactly that many bytes (no READ past end of
    // file: see random_io).
    if g.size_at_open() != o.end as u64 {
        return Err(ctx(format!(
            "{moved}: {} bytes after the rename (want {})",
            g.size_at_open(),
            o.end
        )));
    }
    let back = g
        .read_at(0, o.end)
        .await
        .map_err(|e| ctx(format!("read {moved}: {e}")))?;
    g.close()
        .await
        .map_err(|e| ctx(format!("close {moved}: {e}")))?;
    if workload::sha256(&back) != o.sha256 {
        return Err(ctx(format!("{moved}: SHA-256 changed by the rename")));
    }
    tree.remove(&moved)
        .await
        .map_err(|e| ctx(format!("delete {moved}: {e}")))?;
    if tree.open(&moved, &OpenOptions::read_only()).await.is_ok() {
        return Err(ctx(format!("{moved} still opens after the delete")));
    }
    Ok(format!(
        "{} write(s) of {} bytes ({:.1} s), {} read(s) of {} bytes ({:.1} s), file {} bytes, \
         sha256 {}, renamed and deleted{}",
        o.writes,
        o.written,
        o.secs.0,
        o.reads,
        o.read,
        o.secs.1,
        o.end,
        o.sha256,
        if label.is_empty() {
            String::new()
        } else {
            format!(" ({})", label.join(", "))
        }
    ))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(line) => println!("checksum: {line}"),
        Err(e) => {
            println!("checksum: FAILED: {e}");
            std::process::exit(1);
        }
    }
}
