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
                .rdma_write(buf.as_ref(), len as u64, &[sink_desc])
                .await
                .unwrap();
            drop(buf);
            // A Send behind the Write: once it arrives, the Write has been placed.
            server.send(b"done", None).await.unwrap();
            assert_eq!(client.recv().await.unwrap(), b"done");
            let mut ok = false;
            sink.with(&mut |b| ok = b[..len].iter().all(|&x| x == fill));
            assert!(
                ok,
                "round {round}, {len} bytes: the RDMA Write did not land"
            );
            // WRITE: the server RDMA-Reads the client's source into a pooled buffer.
            let buf = server.payload(len).unwrap();
            server
                .rdma_read(buf.as_ref(), len as u64, &[source_desc])
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
        client.rdma_read(sink.as_ref(), 4096, &[desc]),
    )
    .await
    .expect("the read is answered or the connection ends");
    assert!(r.is_err(), "a peer read a pooled buffer");
    let mut leaked = false;
    sink.with(&mut |b| leaked = b.contains(&0x5a));
    assert!(!leaked);
}
