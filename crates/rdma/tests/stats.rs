//! The soft-iWARP provider's resource counts (the server's SMB Direct metrics):
//! registered regions and bytes, and queue pairs, go up when created and back
//! down when dropped. One test in its own binary: the counts are process-wide.

use smbx_rdma::iwarp::{stats, SoftIwarp};
use smbx_rdma::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_and_queue_pairs_are_counted_while_they_exist() {
    let base = stats();
    let prov = SoftIwarp::default();
    let pd = prov.alloc_pd().unwrap();
    let a = pd.alloc(4096, Access::LOCAL_WRITE).unwrap();
    let b = pd.register(vec![7u8; 10_000], Access::LOCAL_READ).unwrap();
    let b2 = b.clone();
    let s = stats();
    assert_eq!(s.memory_regions, base.memory_regions + 2);
    assert_eq!(s.registered_bytes, base.registered_bytes + 14_096);
    drop(a);
    drop(b);
    // Another handle keeps the region registered.
    assert_eq!(stats().registered_bytes, base.registered_bytes + 10_000);
    drop(b2);
    assert_eq!(stats().memory_regions, base.memory_regions);
    assert_eq!(stats().registered_bytes, base.registered_bytes);

    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();
    let server = tokio::spawn(async move {
        let req = lis.accept().await.unwrap();
        req.accept(ConnParams::default()).await.unwrap()
    });
    let connecting = prov.connect(&pd, addr, QpCaps::default()).await.unwrap();
    let (qp, _) = connecting.connect(ConnParams::default()).await.unwrap();
    let sqp = server.await.unwrap();
    // Both ends of the connection live in this process.
    assert_eq!(stats().queue_pairs, base.queue_pairs + 2);
    qp.disconnect();
    drop(qp);
    drop(sqp);
    // The drivers let go of their queue pairs once the connection has closed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stats().queue_pairs != base.queue_pairs && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(stats().queue_pairs, base.queue_pairs);
}
