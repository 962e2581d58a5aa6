//! The soft-iWARP listener takes MPA Requests concurrently: TCP peers that
//! never finish (or never start) their MPA Request hold up nobody else's
//! connection setup, however long the handshake timeout.

use std::time::Duration;

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp};
use smbx_rdma::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_peers_do_not_block_accept() {
    // A handshake timeout far beyond the test's guard: a listener that read
    // MPA Requests one at a time would wait on the silent peers first.
    let opts = IwarpOptions {
        handshake_timeout: Duration::from_secs(3600),
        ..Default::default()
    };
    let prov = SoftIwarp::new(opts.clone());
    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();
    let _silent = TcpStream::connect(addr).await.unwrap();
    let mut partial = TcpStream::connect(addr).await.unwrap();
    partial.write_all(b"MPA ID Req").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;

    let server = tokio::spawn(async move {
        let req = lis.accept().await.unwrap();
        assert_eq!(req.peer().private_data, b"late but whole");
        req.accept(ConnParams {
            private_data: Vec::new(),
            ird: 4,
            ord: 4,
        })
        .await
        .unwrap()
    });
    let cpd = prov.alloc_pd().unwrap();
    let guard = Duration::from_secs(30);
    let c = prov.connect(&cpd, addr, QpCaps::default()).await.unwrap();
    let (qp, _) = tokio::time::timeout(
        guard,
        c.connect(ConnParams {
            private_data: b"late but whole".to_vec(),
            ird: 4,
            ord: 4,
        }),
    )
    .await
    .expect("connection setup held up by silent peers")
    .unwrap();
    let sqp = tokio::time::timeout(guard, server)
        .await
        .expect("accept held up by silent peers")
        .unwrap();
    qp.disconnect();
    assert_eq!(sqp.closed().await, CloseReason::PeerDisconnect);
}
