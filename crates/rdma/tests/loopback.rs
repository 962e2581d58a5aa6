//! End-to-end soft-iWARP over 127.0.0.1: connect/accept with private data,
//! Send/Recv, Send with Invalidate, 8 MiB RDMA Write and Read.

#[path = "support/soft_pair.rs"]
mod soft_pair;

use soft_pair::{next_ok, seeded};

use smbx_rdma::iwarp::{IwarpOptions, Rtr, SoftIwarp};
use smbx_rdma::*;

const BIG: usize = 8 << 20;

pub async fn exercise(opts: IwarpOptions) {
    let prov = SoftIwarp::new(opts.clone());
    let cpd = prov.alloc_pd().unwrap();
    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();

    let server = tokio::spawn(async move {
        let req = lis.accept().await.unwrap();
        // The connection's own protection domain.
        let spd = req.pd().clone();
        assert_eq!(req.peer().private_data, b"client-hello");
        if opts.mpa_revision == 2 {
            assert_eq!((req.peer().ird, req.peer().ord), (8, 4));
        }
        let rbuf = spd.alloc(4096, Access::LOCAL_WRITE).unwrap();
        req.qp().post_recv(10, &[Sge::new(&rbuf, 0, 4096)]).unwrap();
        req.qp().post_recv(11, &[Sge::new(&rbuf, 0, 4096)]).unwrap();
        let qp = req
            .accept(ConnParams {
                private_data: b"server-hi".to_vec(),
                ird: 16,
                ord: 16,
            })
            .await
            .unwrap();
        // 1. A Send arrives.
        let c = next_ok(&qp).await;
        assert_eq!((c.wr_id, c.opcode, c.byte_len), (10, WcOpcode::Recv, 5));
        assert!(c.solicited);
        assert_eq!(rbuf.with(|b| b[..5].to_vec()), b"hello");
        // 2. A descriptor message: the client's buffers.
        let c = next_ok(&qp).await;
        assert_eq!(c.byte_len, 32);
        let (wdesc, rdesc) = rbuf.with(|b| {
            let d = |o: usize| RemoteBuf {
                stag: STag(u32::from_le_bytes(b[o..o + 4].try_into().unwrap())),
                to: u64::from_le_bytes(b[o + 4..o + 12].try_into().unwrap()),
                len: u32::from_le_bytes(b[o + 12..o + 16].try_into().unwrap()),
            };
            (d(0), d(16))
        });
        // RDMA Write 8 MiB into the client's sink, RDMA Read 8 MiB from its source.
        let src = spd.register(seeded(1, BIG), Access::LOCAL_READ).unwrap();
        let sink = spd.alloc(BIG, Access::LOCAL_WRITE).unwrap();
        let sbuf = spd.alloc(16, Access::LOCAL_WRITE).unwrap();
        qp.post_write(20, &[Sge::new(&src, 0, BIG as u32)], wdesc)
            .unwrap();
        qp.post_read(21, Sge::new(&sink, 0, BIG as u32), rdesc)
            .unwrap();
        let c = next_ok(&qp).await;
        assert_eq!(
            (c.wr_id, c.opcode, c.byte_len as usize),
            (20, WcOpcode::RdmaWrite, BIG)
        );
        let c = next_ok(&qp).await;
        assert_eq!(
            (c.wr_id, c.opcode, c.byte_len as usize),
            (21, WcOpcode::RdmaRead, BIG)
        );
        assert!(
            sink.with(|b| b == seeded(2, BIG).as_slice()),
            "RDMA Read data differs"
        );
        // 3. Reply with Send with Invalidate of the client's write sink.
        sbuf.write_at(0, b"done");
        qp.post_send_inv(22, &[Sge::new(&sbuf, 0, 4)], wdesc.stag)
            .unwrap();
        let c = next_ok(&qp).await;
        assert_eq!((c.wr_id, c.opcode), (22, WcOpcode::Send));
        qp.closed().await
    });

    let c = prov.connect(&cpd, addr, QpCaps::default()).await.unwrap();
    let rbuf = cpd.alloc(4096, Access::LOCAL_WRITE).unwrap();
    c.qp().post_recv(1, &[Sge::new(&rbuf, 0, 4096)]).unwrap();
    let (qp, peer) = c
        .connect(ConnParams {
            private_data: b"client-hello".to_vec(),
            ird: 8,
            ord: 4,
        })
        .await
        .unwrap();
    assert_eq!(peer.private_data, b"server-hi");
    if opts.mpa_revision == 2 {
        assert_eq!(
            (peer.ird, peer.ord),
            (16, 8),
            "responder ORD clamped to our IRD"
        );
        assert_eq!(qp.read_limits(), (8, 4));
    }
    let sbuf = cpd.alloc(64, Access::LOCAL_WRITE).unwrap();
    sbuf.write_at(0, b"hello");
    qp.post_send(&SendWr {
        wr_id: 2,
        op: SendOp::Send,
        sg: &[Sge::new(&sbuf, 0, 5)],
        solicited: true,
    })
    .unwrap();
    assert_eq!(next_ok(&qp).await.wr_id, 2);
    let wsink = cpd
        .alloc(BIG, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let rsrc = cpd.register(seeded(2, BIG), Access::REMOTE_READ).unwrap();
    let mut desc = Vec::new();
    for r in [
        wsink.remote(0, BIG as u32).unwrap(),
        rsrc.remote(0, BIG as u32).unwrap(),
    ] {
        desc.extend_from_slice(&r.stag.0.to_le_bytes());
        desc.extend_from_slice(&r.to.to_le_bytes());
        desc.extend_from_slice(&r.len.to_le_bytes());
    }
    sbuf.write_at(0, &desc);
    qp.post_send_simple(3, &[Sge::new(&sbuf, 0, 32)]).unwrap();
    assert_eq!(next_ok(&qp).await.wr_id, 3);
    let c = next_ok(&qp).await;
    assert_eq!((c.wr_id, c.opcode, c.byte_len), (1, WcOpcode::Recv, 4));
    assert_eq!(c.invalidated, Some(wsink.stag()));
    assert!(
        !wsink.is_valid(),
        "Send with Invalidate invalidated the local MR"
    );
    assert!(
        wsink.with(|b| b == seeded(1, BIG).as_slice()),
        "RDMA Write data differs"
    );
    // Local invalidation.
    qp.post_local_invalidate(4, rsrc.stag()).unwrap();
    let c = next_ok(&qp).await;
    assert_eq!(c.opcode, WcOpcode::LocalInvalidate);
    assert!(!rsrc.is_valid());
    qp.disconnect();
    assert_eq!(qp.closed().await, CloseReason::LocalDisconnect);
    assert!(qp.cq().next().await.is_none());
    assert_eq!(server.await.unwrap(), CloseReason::PeerDisconnect);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_crc_on() {
    exercise(IwarpOptions {
        crc: true,
        ..Default::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_crc_off() {
    exercise(IwarpOptions {
        crc: false,
        ..Default::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_mpa_rev1() {
    exercise(IwarpOptions {
        mpa_revision: 1,
        ..Default::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_p2p_rtr() {
    for rtr in [Rtr::Read, Rtr::Write, Rtr::Send] {
        exercise(IwarpOptions {
            rtr: Some(rtr),
            ..Default::default()
        })
        .await;
    }
}
