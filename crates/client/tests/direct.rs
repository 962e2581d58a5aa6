//! The client over SMB Direct (soft-iWARP) against `smbx serve` with `smb direct = yes`:
//! every SMB3 dialect, plain, signed and sealed; READ and WRITE above the RDMA
//! threshold go by RDMA Read/Write, smaller ones and sealed ones inline. Data is
//! checked by SHA-256 and against the file the server wrote.

mod common;

use common::{
    logged_on_direct, random_bytes, rdma_options, sha256, start_smbx_direct, PASSWORD, USER,
};
use smbx_client::{Client, ClientOptions, Encryption, File, OpenOptions, Session, Signing};
use smbx_wire::Dialect;

/// Logs in over SMB Direct (3.1.1) to the server on `port` and opens `name` in its
/// "share" with `opts`: the session (for its RDMA counters) and the file.
async fn open_over_direct(port: u16, name: &str, opts: &OpenOptions) -> (Session, File) {
    let (_client, session, tree) = logged_on_direct(port).await;
    let f = tree.open(name, opts).await.expect("open");
    (session, f)
}

/// `f` (`name` in `dir`) reads back as `model`, is closed, and the server's file holds
/// `model` on disk.
async fn assert_lands_whole(f: File, dir: &std::path::Path, name: &str, model: &[u8]) {
    let back = f.read_at(0, model.len() + 100).await.expect("read back");
    assert_eq!(sha256(&back), sha256(model), "read back");
    f.close().await.expect("close");
    let on_disk = std::fs::read(dir.join(name)).expect("file on the server");
    assert_eq!(on_disk.len(), model.len());
    assert_eq!(sha256(&on_disk), sha256(model), "on disk");
}

/// Writes and reads back sizes below, at and above the RDMA threshold and above one
/// SMB Direct message (1 MiB), at odd offsets.
async fn round_trip(addr: &str, o: ClientOptions, share: &str, name: &str, dir: &std::path::Path) {
    let client = Client::connect(addr, o)
        .await
        .expect("connect over smb direct");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree(share).await.expect("tree connect");
    let f = tree
        .open(name, &OpenOptions::create_truncate())
        .await
        .expect("create");
    let data = random_bytes(3 * 1024 * 1024 + 777);
    let mut off = 0usize;
    for n in [1usize, 4095, 4096, 65_536, 1 << 20, (1 << 20) + 12_345] {
        let end = (off + n).min(data.len());
        f.write_at(off as u64, &data[off..end])
            .await
            .unwrap_or_else(|e| panic!("{share}/{name}: write {n}: {e}"));
        off = end;
    }
    f.write_at(off as u64, &data[off..])
        .await
        .expect("write rest");
    let back = f.read_at(0, data.len() + 100).await.expect("read");
    assert_eq!(sha256(&back), sha256(&data), "{share}/{name}: read back");
    let mut part = vec![0u8; 2 * 1024 * 1024];
    let n = f.read_into(12_345, &mut part).await.expect("read_into");
    assert_eq!(&part[..n], &data[12_345..12_345 + n]);
    f.close().await.expect("close");
    let on_disk = std::fs::read(dir.join(name)).expect("file on the server");
    assert_eq!(sha256(&on_disk), sha256(&data), "{share}/{name}: on disk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_smb3_dialect_signed_and_sealed() {
    let (server, port) = start_smbx_direct("");
    let addr = format!("127.0.0.1:{port}");
    let dir = server.share_dir("share");
    let secret = server.share_dir("secret");
    for (d, tag) in [
        (Dialect::SMB3_0, "300"),
        (Dialect::SMB3_0_2, "302"),
        (Dialect::SMB3_1_1, "311"),
    ] {
        round_trip(
            &addr,
            rdma_options(d),
            "share",
            &format!("plain{tag}"),
            &dir,
        )
        .await;
        let signed = rdma_options(d).with_signing(Signing::Required);
        round_trip(&addr, signed, "share", &format!("signed{tag}"), &dir).await;
        let sealed = rdma_options(d).with_encryption(Encryption::Required);
        round_trip(&addr, sealed, "share", &format!("sealed{tag}"), &dir).await;
        // A share that requires encryption, reached over SMB Direct.
        round_trip(
            &addr,
            rdma_options(d),
            "secret",
            &format!("s{tag}"),
            &secret,
        )
        .await;
    }
    // All inline (threshold above every I/O size).
    let mut inline = rdma_options(Dialect::SMB3_1_1);
    inline.rdma_threshold = Some(usize::MAX);
    round_trip(&addr, inline, "share", "inline", &dir).await;
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_still_served_next_to_smb_direct() {
    let (server, port) = start_smbx_direct("");
    let dir = server.share_dir("share");
    round_trip(
        &server.addr(),
        ClientOptions::default(),
        "share",
        "tcp",
        &dir,
    )
    .await;
    // SMB 2.1 over SMB Direct: messages only (RDMA channels need 3.0; the
    // server refuses them before), so 1 MiB+ I/O is split to fit one message.
    round_trip(
        &format!("127.0.0.1:{port}"),
        rdma_options(Dialect::SMB2_1),
        "share",
        "smb21",
        &dir,
    )
    .await;
}

/// Bytes moved by RDMA on the session's channels: (WRITE data sent, READ data received).
fn rdma_bytes(s: &smbx_client::Session) -> (u64, u64) {
    s.channel_stats()
        .iter()
        .fold((0, 0), |(w, r), c| (w + c.rdma_sent, r + c.rdma_received))
}

/// Left unset, the RDMA threshold is the link's: over soft-iWARP 8 KiB READs and
/// WRITEs go inline and 64 KiB ones by RDMA, 32 KiB READs by RDMA and 32 KiB WRITEs
/// inline (16 and 32 KiB, smbx_transport::soft); a threshold the caller sets wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_threshold_defaults_to_the_links() {
    let (server, port) = start_smbx_direct("");
    let addr = format!("127.0.0.1:{port}");
    let data = random_bytes(64 * 1024);
    for (threshold, small_by_rdma) in [(None, false), (Some(4096), true)] {
        let mut o = rdma_options(Dialect::SMB3_1_1);
        o.rdma_threshold = threshold;
        let client = Client::connect(&addr, o).await.expect("connect");
        let session = client.login(USER, PASSWORD, "").await.expect("login");
        let tree = session.tree("share").await.expect("tree connect");
        let f = tree
            .open(
                &format!("threshold-{}", threshold.unwrap_or(0)),
                &OpenOptions::create_truncate(),
            )
            .await
            .expect("create");
        let small = 8 * 1024;
        f.write_at(0, &data[..small]).await.expect("small write");
        let back = f.read_at(0, small).await.expect("small read");
        assert_eq!(back, &data[..small]);
        let s = if small_by_rdma { small as u64 } else { 0 };
        assert_eq!(rdma_bytes(&session), (s, s), "{threshold:?}: 8 KiB");
        let mid = 32 * 1024;
        f.write_at(0, &data[..mid]).await.expect("32 KiB write");
        let back = f.read_at(0, mid).await.expect("32 KiB read");
        assert_eq!(back, &data[..mid]);
        // The 32 KiB READ goes by RDMA either way, the WRITE only under 4 KiB.
        let m = mid as u64;
        let want = (s + if small_by_rdma { m } else { 0 }, s + m);
        assert_eq!(rdma_bytes(&session), want, "{threshold:?}: 32 KiB");
        f.write_at(0, &data).await.expect("large write");
        let back = f.read_at(0, data.len()).await.expect("large read");
        assert_eq!(back, data);
        let big = data.len() as u64;
        let want = (want.0 + big, want.1 + big);
        assert_eq!(rdma_bytes(&session), want, "{threshold:?}: 64 KiB");
        f.close().await.expect("close");
    }
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// READs by RDMA of data in the page cache (read by the server in place) and of data
/// the page cache dropped (read where waiting is fine): the same bytes, short at the
/// end of the file and empty past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_reads_in_and_out_of_the_page_cache() {
    use std::os::fd::AsRawFd;
    let (server, port) = start_smbx_direct("");
    let dir = server.share_dir("share");
    let data = random_bytes(300_000);
    std::fs::write(dir.join("cached"), &data).unwrap();
    let (session, f) = open_over_direct(port, "cached", &OpenOptions::read_only()).await;
    for round in ["cached", "dropped"] {
        if round == "dropped" {
            let disk = std::fs::File::open(dir.join("cached")).unwrap();
            disk.sync_all().unwrap();
            // SAFETY: posix_fadvise only reads its arguments; the descriptor is open.
            unsafe { libc::posix_fadvise(disk.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        let before = rdma_bytes(&session).1;
        let back = f.read_at(0, data.len()).await.expect("whole read");
        assert!(back == data, "{round}: whole file");
        let back = f.read_at(1_001, 70_000).await.expect("odd offset");
        assert!(back == data[1_001..71_001], "{round}: odd offset");
        let back = f.read_at(250_000, 65_536).await.expect("short at the end");
        assert!(back == data[250_000..], "{round}: short at the end");
        assert!(rdma_bytes(&session).1 >= before + 300_000 + 70_000 + 50_000);
        let back = f.read_at(300_000, 65_536).await.expect("past the end");
        assert!(back.is_empty(), "{round}: past the end");
    }
    f.close().await.expect("close");
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// `File::read_data` over RDMA: the data of each READ sits in its buffer at the file
/// offset's place in a cache line (the kernel copies into it from the page cache at
/// that alignment), and is the file's bytes, whole, short at the end and empty past
/// it; `read_into` (the same READs, copied out) and `read_at` (its buffer starting
/// with the data) return the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_read_data_lands_at_the_file_offsets_place_in_a_cache_line() {
    let (server, port) = start_smbx_direct("");
    let dir = server.share_dir("share");
    let data = random_bytes(700_000);
    std::fs::write(dir.join("aligned"), &data).unwrap();
    // Every READ here by RDMA.
    let mut o = rdma_options(Dialect::SMB3_1_1);
    o.rdma_threshold = Some(4096);
    let client = Client::connect(&format!("127.0.0.1:{port}"), o)
        .await
        .expect("connect");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree connect");
    let f = tree
        .open("aligned", &OpenOptions::read_only())
        .await
        .expect("open");
    let (before, mut total) = (rdma_bytes(&session).1, 0);
    let cases = [
        (0, 524_288),
        (1, 65_536),
        (4_099, 200_000),
        (63, 100_001),
        (650_017, 65_536),
    ];
    for (off, len) in cases {
        let end = data.len().min(off + len);
        total += 3 * (end - off) as u64;
        let got = f.read_data(off as u64, len).await.expect("read_data");
        assert!(got[..] == data[off..end], "read_data at {off}");
        assert_eq!(got.as_ptr() as usize % 64, off % 64, "read_data at {off}");
        // Its buffer is of the READ length's class, moved data and all (a 512 KiB
        // READ holds 512 KiB and the pool's headroom, not 1 MiB).
        let class = len.max(64 << 10).next_power_of_two();
        assert_eq!(
            got.held(),
            class + smbx_transport::BufPool::HEADROOM,
            "read_data at {off}"
        );
        let mut buf = vec![0u8; len];
        let n = f.read_into(off as u64, &mut buf).await.expect("read_into");
        assert!(buf[..n] == data[off..end], "read_into at {off}");
        let back = f.read_at(off as u64, len).await.expect("read_at");
        assert!(back == data[off..end], "read_at at {off}");
    }
    assert!(rdma_bytes(&session).1 >= before + total, "by RDMA");
    let past = f.read_data(700_000, 65_536).await.expect("past the end");
    assert!(past.is_empty());
    f.close().await.expect("close");
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// `File::write_vec` lends its buffer: a WRITE above the RDMA threshold goes by RDMA
/// from it, a small one inline, one above MaxWriteSize as several; each time the same
/// bytes land in the file and come back in the buffer. Over TCP too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_vec_lends_its_buffer_and_gets_it_back() {
    let (server, port) = start_smbx_direct("");
    let dir = server.share_dir("share");
    let data = random_bytes(3 * 1024 * 1024 + 5);
    for (addr, o, name) in [
        (
            format!("127.0.0.1:{port}"),
            rdma_options(Dialect::SMB3_1_1),
            "lent-rdma",
        ),
        (server.addr(), ClientOptions::default(), "lent-tcp"),
    ] {
        let rdma = name == "lent-rdma";
        let client = Client::connect(&addr, o).await.expect("connect");
        let session = client.login(USER, PASSWORD, "").await.expect("login");
        let tree = session.tree("share").await.expect("tree connect");
        let f = tree
            .open(name, &OpenOptions::create_truncate())
            .await
            .expect("create");
        let mut off = 0usize;
        for (n, by_rdma) in [(4096, false), (65_536, true), (524_291, true), (0, true)] {
            let end = if n == 0 { data.len() } else { off + n };
            let before = rdma_bytes(&session).0;
            let (r, back) = f.write_vec(off as u64, data[off..end].to_vec()).await;
            assert_eq!(r.expect("write_vec"), end - off, "{name}: {n}");
            assert!(
                back == data[off..end],
                "{name}: {n}: the buffer comes back as it was"
            );
            let sent = if rdma && by_rdma {
                (end - off) as u64
            } else {
                0
            };
            assert_eq!(
                rdma_bytes(&session).0,
                before + sent,
                "{name}: {n}: by RDMA"
            );
            off = end;
        }
        f.close().await.expect("close");
        let on_disk = std::fs::read(dir.join(name)).expect("file on the server");
        assert!(on_disk == data, "{name}: on disk");
    }
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// WRITEs by RDMA around the size from which the server's RDMA Read brings the data
/// straight into the file (128 KiB: smbx_server::handlers::write::RDMA_SINK_MIN, the
/// WRITE finished by the read loop once its data is in) land whole: one byte below
/// it (into a registered buffer, then written), at it and above it, past the end of
/// the file (the gap reads as zeros), and four at once (several such WRITEs under way
/// in the read loop together); read back and on the server's disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_writes_around_the_file_sink_size_land_whole() {
    const SINK: usize = 128 * 1024;
    let (server, port) = start_smbx_direct("");
    let dir = server.share_dir("share");
    let (session, f) = open_over_direct(port, "sink", &OpenOptions::create_truncate()).await;
    let mut model = Vec::new();
    let put = |model: &mut Vec<u8>, at: usize, data: &[u8]| {
        if model.len() < at + data.len() {
            model.resize(at + data.len(), 0);
        }
        model[at..at + data.len()].copy_from_slice(data);
    };
    let before = rdma_bytes(&session).0;
    // Each past the end of what is written so far (a gap of zeros before it).
    let mut at = 4_097usize;
    for n in [SINK - 1, SINK, SINK + 1, 2 * SINK] {
        let data = random_bytes(n);
        f.write_at(at as u64, &data)
            .await
            .unwrap_or_else(|e| panic!("write {n} at {at}: {e}"));
        put(&mut model, at, &data);
        at += n + 777;
    }
    let four: Vec<Vec<u8>> = (0..4).map(|_| random_bytes(SINK)).collect();
    let writes = four
        .iter()
        .enumerate()
        .map(|(i, d)| f.write_at((at + i * SINK) as u64, d));
    for r in futures_util::future::join_all(writes).await {
        r.expect("one of four at once");
    }
    for (i, d) in four.iter().enumerate() {
        put(&mut model, at + i * SINK, d);
    }
    let sent = rdma_bytes(&session).0 - before;
    assert!(sent >= (9 * SINK) as u64, "by RDMA: {sent} bytes");
    assert_lands_whole(f, &dir, "sink", &model).await;
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// More WRITEs of the sink's size at once than a connection has sink pipes
/// (smbx_transport::splice::MAX_PIPES, 16): those that find none take their data into
/// a registered buffer written out after (spawned, not run in the read loop), and
/// every one lands whole, read back and on the server's disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_sink_writes_at_once_than_pipes_land_whole() {
    const SINK: usize = 512 * 1024;
    const AT_ONCE: usize = 24;
    let (server, port) = start_smbx_direct("");
    let dir = server.share_dir("share");
    let (session, f) = open_over_direct(port, "many", &OpenOptions::create_truncate()).await;
    let before = rdma_bytes(&session).0;
    let all: Vec<Vec<u8>> = (0..AT_ONCE).map(|_| random_bytes(SINK)).collect();
    let writes = all
        .iter()
        .enumerate()
        .map(|(i, d)| f.write_at((i * SINK) as u64, d));
    for r in futures_util::future::join_all(writes).await {
        r.expect("one of the WRITEs at once");
    }
    let sent = rdma_bytes(&session).0 - before;
    assert!(sent >= (AT_ONCE * SINK) as u64, "by RDMA: {sent} bytes");
    assert_lands_whole(f, &dir, "many", &all.concat()).await;
    assert!(!server.log().contains("panicked"), "{}", server.log());
}
