//! Connections of one SMB Direct listener live in protection domains of
//! their own: a peer that names another connection's region, even one
//! registered for remote access and even by its exact STag, can neither
//! invalidate it nor write into it; its connection is terminated and the
//! other connection carries on.

use std::time::Duration;

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftMr, SoftPd, SoftQp};
use smbx_rdma::{
    Access, ConnParams, Connecting, ProtectionDomain, Provider, QpCaps, QueuePair, RemoteBuf, STag,
    SendOp, SendWr, Sge,
};
use smbx_transport::soft::{self, SoftDirectListener};
use smbx_transport::{DirectConfig, DirectLink};

const LEN: usize = 4096;

/// A raw soft-iWARP peer of `addr` (no SMB Direct negotiation), connected;
/// its domain and receive buffer (keep it while the queue pair lives).
async fn raw_peer(addr: std::net::SocketAddr) -> (SoftQp, SoftPd, SoftMr) {
    let prov = SoftIwarp::new(IwarpOptions::default());
    let pd = prov.alloc_pd().unwrap();
    let c = prov.connect(&pd, addr, QpCaps::default()).await.unwrap();
    let rbuf = pd.alloc(LEN, Access::LOCAL_WRITE).unwrap();
    c.qp()
        .post_recv(1, &[Sge::new(&rbuf, 0, LEN as u32)])
        .unwrap();
    let (qp, _) = c
        .connect(ConnParams {
            private_data: Vec::new(),
            ird: 4,
            ord: 4,
        })
        .await
        .unwrap();
    (qp, pd, rbuf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_cannot_touch_another_connections_regions() {
    let listener = SoftDirectListener::bind(
        "127.0.0.1:0".parse().unwrap(),
        IwarpOptions::default(),
        DirectConfig::default(),
    )
    .await
    .unwrap();
    let addr = listener.local_addr();

    // The victim: a negotiated SMB Direct connection; the server side
    // registers a region for the client to write into (as a READ's client
    // buffer would be) and hands its descriptor to the client.
    let client = tokio::spawn(soft::connect(
        addr,
        IwarpOptions::default(),
        DirectConfig::default(),
    ));
    let victim = listener.accept().await.unwrap().negotiate().await.unwrap();
    let client: std::sync::Arc<dyn DirectLink> = client.await.unwrap().unwrap();
    let region = victim
        .register(vec![0; LEN], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let desc = region.descriptor(0, LEN as u32).unwrap();

    // The attacker connects to the same listener and, knowing the exact
    // STag (the worst case: it cannot guess it), sends Send with Invalidate
    // of it, then an RDMA Write into it.
    let listener = std::sync::Arc::new(listener);
    let l = listener.clone();
    // Its negotiation never completes: it fails once the peer is cut off.
    let attacked = tokio::spawn(async move { l.accept().await.unwrap().negotiate().await });
    let (attacker, apd, _rbuf) = raw_peer(addr).await;
    let junk = apd.register(vec![0xEE; 64], Access::LOCAL_READ).unwrap();
    attacker
        .post_send(&SendWr {
            wr_id: 7,
            op: SendOp::SendWithInvalidate {
                stag: STag(desc.token),
            },
            sg: &[Sge::new(&junk, 0, 64)],
            solicited: false,
        })
        .unwrap();
    let _ = attacker.post_write(
        8,
        &[Sge::new(&junk, 0, 64)],
        RemoteBuf {
            stag: STag(desc.token),
            to: desc.offset,
            len: 64,
        },
    );
    // Only the offender's connection is terminated.
    tokio::time::timeout(Duration::from_secs(10), attacker.closed())
        .await
        .expect("the attacker's connection is terminated");

    // The victim's region is still valid and untouched: its own client
    // RDMA-Writes into it, and the bytes land.
    let pattern: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
    let src = client
        .register(pattern.clone(), Access::LOCAL_READ)
        .unwrap();
    client
        .rdma_write(src.as_ref(), 0, LEN as u64, &[desc])
        .await
        .expect("the victim's region still takes its own peer's writes");
    // A Send behind the Write: once it arrives, the Write has been placed.
    client.send(b"still here", None).await.unwrap();
    assert_eq!(victim.recv().await.unwrap().bytes(), b"still here");
    let mut got = Vec::new();
    region.with(&mut |b| got = b.to_vec());
    assert!(got == pattern, "the victim's own peer's write did not land");
    assert!(!victim.is_closed());
    assert!(attacked.await.unwrap().is_err());
}
