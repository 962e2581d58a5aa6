//! A quick sequential-read check (not the benchmark): reads a file with N reads of SIZE
//! bytes in flight and prints the rate.
//!
//! `cargo run --release -p smbx-client --example seqread -- smb://user:pass@host:port/share/file [io_kib] [depth] [seal]`

use std::time::Instant;

use futures_util::stream::{self, StreamExt};
use smbx_client::{ClientOptions, Encryption, OpenOptions, SmbUrl};

#[tokio::main]
async fn main() -> smbx_client::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = SmbUrl::parse(args.get(1).map(String::as_str).unwrap_or(""))?;
    let io = args
        .get(2)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(1024)
        * 1024;
    let depth = args
        .get(3)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(4);
    let mut opts = ClientOptions::default();
    if args.get(4).map(String::as_str) == Some("seal") {
        opts = opts.with_encryption(Encryption::Required);
    }
    let (tree, path) = url.open(None, opts).await?;
    let f = tree.open(&path, &OpenOptions::read_only()).await?;
    let size = f.size_at_open();
    let start = Instant::now();
    let offsets = (0..size).step_by(io);
    let total: usize = stream::iter(offsets)
        .map(|off| {
            let f = &f;
            async move { f.read_at(off, io).await.map(|d| d.len()) }
        })
        .buffer_unordered(depth)
        .fold(0usize, |acc, r| async move { acc + r.expect("read") })
        .await;
    let secs = start.elapsed().as_secs_f64();
    f.close().await?;
    println!(
        "{} bytes in {:.3} s: {:.1} MB/s ({} KiB reads, {} in flight, dialect {})",
        total,
        secs,
        total as f64 / secs / 1e6,
        io / 1024,
        depth,
        tree.session().client().dialect()
    );
    Ok(())
}
