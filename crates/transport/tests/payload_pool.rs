//! The registered payload pool over a real SMB Direct connection (soft-iWARP):
//! the server's READ and WRITE data move by RDMA from and into pooled buffers,
//! steady state registers nothing, and the peer cannot reach a pooled buffer.

use std::time::Duration;

use smbx_transport::Access;

mod common;
use common::pair;

const ROUNDS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_transfers_register_nothing() {
    let (server, client) = pair().await;
    // The client's buffers, exposed to the server as a READ's sink and a
    // WRITE's source would be.
    const BIG: usize = 512 << 10;
    let sink = client
        .register(vec![0; BIG], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let sink_desc = sink.descriptor(0, BIG as u32).unwrap();
    let pattern: Vec<u8> = (0..BIG).map(|i| (i * 7 + 3) as u8).collect();
    let source = client
        .register(pattern.clone(), Access::REMOTE_READ)
        .unwrap();
    let source_desc = source.descriptor(0, BIG as u32).unwrap();
    for round in 0..ROUNDS {
        for len in [4096usize, BIG] {
            // READ: the server fills a pooled buffer and RDMA-Writes it.
            let fill = (round * 31 + len) as u8;
            let buf = server.payload(len).unwrap();
            assert_eq!(buf.len(), len);
            buf.with_mut(&mut |b| b.fill(fill));
            server
                .rdma_write(buf.as_ref(), 0, len as u64, &[sink_desc])
                .await
                .unwrap();
            drop(buf);
            // A Send behind the Write: once it arrives, the Write has been placed.
            server.send(b"done", None).await.unwrap();
            assert_eq!(client.recv().await.unwrap().bytes(), b"done");
            let mut ok = false;
            sink.with(&mut |b| ok = b[..len].iter().all(|&x| x == fill));
            assert!(
                ok,
                "round {round}, {len} bytes: the RDMA Write did not land"
            );
            // WRITE: the server RDMA-Reads the client's source into a pooled buffer.
            let buf = server.payload(len).unwrap();
            server
                .rdma_read(buf.as_ref(), 0, len as u64, &[source_desc])
                .await
                .unwrap();
            let mut ok = false;
            buf.with(&mut |b| ok = b == &pattern[..len]);
            assert!(ok, "round {round}, {len} bytes: the RDMA Read did not land");
        }
    }
    let s = server.payload_stats();
    assert_eq!(s.takes, (4 * ROUNDS) as u64);
    // One region per size, registered by the first round; none since.
    assert_eq!(s.registrations, 2, "{s:?}");
    assert_eq!(s.in_use, 0);
    // The client's own payload pool was never used.
    assert_eq!(client.payload_stats().registrations, 0);
}

/// A pooled buffer is registered for local access only: a peer that learns
/// its STag still cannot read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_cannot_read_a_pooled_buffer() {
    let (server, client) = pair().await;
    let secret = server.payload(4096).unwrap();
    secret.with_mut(&mut |b| b.fill(0x5a));
    let desc = secret.descriptor(0, 4096).unwrap();
    let sink = client.register(vec![0; 4096], Access::LOCAL_WRITE).unwrap();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        client.rdma_read(sink.as_ref(), 0, 4096, &[desc]),
    )
    .await
    .expect("the read is answered or the connection ends");
    assert!(r.is_err(), "a peer read a pooled buffer");
    let mut leaked = false;
    sink.with(&mut |b| leaked = b.contains(&0x5a));
    assert!(!leaked);
}

/// A WRITE's data RDMA-Read into a pooled buffer at the file offset's place in a
/// cache line (`rdma_read_at`, `placement::line_pad`): the bytes land from that
/// position on, the buffer of a 64 KiB or 512 KiB WRITE is of its own class (the
/// regions' slack holds the move), and a transfer past the buffer's end is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_reads_land_at_the_offsets_place_in_a_line() {
    use smbx_transport::placement::{line_pad, CACHE_LINE};
    let (server, client) = pair().await;
    const BIG: usize = 512 << 10;
    let pattern: Vec<u8> = (0..BIG).map(|i| (i * 13 + 5) as u8).collect();
    let source = client
        .register(pattern.clone(), Access::REMOTE_READ)
        .unwrap();
    let desc = source.descriptor(0, BIG as u32).unwrap();
    for len in [64 << 10, BIG] {
        for offset in [0u64, 1, 16, 48, 63, 4096 + 17] {
            let buf = server.payload(len + CACHE_LINE - 1).unwrap();
            let mut start = 0;
            buf.with(&mut |b| start = b.as_ptr() as usize);
            let at = line_pad(start, offset);
            server
                .rdma_read(buf.as_ref(), at as u64, len as u64, &[desc])
                .await
                .unwrap();
            let mut ok = false;
            buf.with(&mut |b| {
                ok = b[at..at + len] == pattern[..len]
                    && (b[at..].as_ptr() as usize) % CACHE_LINE == (offset % 64) as usize
            });
            assert!(ok, "{len} bytes for offset {offset}, at {at}");
            // Past the buffer's end: refused, nothing sent.
            let r = server
                .rdma_read(buf.as_ref(), (CACHE_LINE) as u64, len as u64, &[desc])
                .await;
            assert!(r.is_err(), "{len} bytes at {CACHE_LINE}");
        }
    }
    // One region per size, of the 64 KiB class and the 512 KiB class (not 128 KiB
    // and 1 MiB): what is idle now.
    let s = server.payload_stats();
    assert_eq!((s.registrations, s.in_use), (2, 0), "{s:?}");
    assert_eq!(s.idle_bytes, (64 << 10) + BIG as u64, "{s:?}");
}

/// A READ's data RDMA-Written from a pooled buffer from its place in a cache line on
/// (`rdma_write_posted` at a position): the bytes from that position land at the start of the
/// client's buffer, for every line position; a transfer past the buffer's end is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdma_writes_go_from_the_offsets_place_in_a_line() {
    use smbx_transport::placement::{line_pad, CACHE_LINE};
    let (server, client) = pair().await;
    const LEN: usize = 64 << 10;
    let sink = client
        .register(vec![0; LEN], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let desc = sink.descriptor(0, LEN as u32).unwrap();
    for (round, offset) in [0u64, 1, 16, 48, 63, 4096 + 17].into_iter().enumerate() {
        let buf = server.payload(LEN + CACHE_LINE - 1).unwrap();
        let mut start = 0;
        buf.with(&mut |b| start = b.as_ptr() as usize);
        let at = line_pad(start, offset);
        let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + round) as u8).collect();
        buf.with_mut(&mut |b| {
            b.fill(0xee);
            b[at..at + LEN].copy_from_slice(&data);
        });
        // Past the end: refused before anything is posted.
        let r = server
            .rdma_write_posted(server.payload(LEN).unwrap(), 1, LEN as u64, &[desc], None)
            .await;
        assert!(r.is_err(), "offset {offset}");
        server
            .rdma_write_posted(buf, at as u64, LEN as u64, &[desc], None)
            .await
            .unwrap();
        // A Send behind the Writes: once it arrives, they have been placed.
        server.send(b"done", None).await.unwrap();
        assert_eq!(client.recv().await.unwrap().bytes(), b"done");
        let mut ok = false;
        sink.with(&mut |b| ok = b == &data[..]);
        assert!(ok, "offset {offset}, at {at}");
    }
}
