//! A long RDMA Write that reaches its receiver in small, spaced pieces (as a
//! congestion control that paces sends delivers it), between two smbx
//! soft-iWARP ends that agreed on large FPDUs: one 512 KiB FPDU, placed by
//! reads that come back short. The receiver then waits for the rest of the
//! payload (its socket's receive low-water mark); the Write must still arrive
//! whole, and a small Send that comes well after it must be received: the mark
//! is lowered again once the payload is placed (left raised, the Send's few
//! bytes would never wake the receiver).

#[path = "support/capture.rs"]
mod capture;
#[path = "support/soft_pair.rs"]
mod soft_pair;

use capture::paced_relay;
use soft_pair::{connected_via, listen, next_ok, post_recvs, seeded};

use std::time::Duration;

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp};
use smbx_rdma::*;
use tokio::net::TcpListener;

/// Bytes of each RDMA Write (one large FPDU).
const BULK: usize = 512 * 1024;
/// Most bytes the relay forwards towards the receiver at a time, and the pause
/// after each piece.
const PIECE: usize = 16 * 1024;
const PAUSE: Duration = Duration::from_millis(2);
/// How long after its Write completes the sender posts the Send: far longer than
/// the relay takes to hand the Write on (32 pieces).
const SEND_AFTER: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_long_write_is_placed_whole_and_a_later_send_still_arrives() {
    let opts = IwarpOptions::default();
    assert!(opts.large_fpdus, "the test is about large FPDUs");
    let prov = SoftIwarp::new(opts);
    let lis = listen(&prov).await;
    let rl = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = rl.local_addr().unwrap();
    let relay = tokio::spawn(paced_relay(rl, lis.local_addr(), PIECE, PAUSE));
    let (s, c) = connected_via(
        &prov,
        lis,
        relay_addr,
        (ConnParams::default(), |_, _| ()),
        (ConnParams::default(), |qp, pd| post_recvs(qp, pd, 1, 2, 64)),
    )
    .await;
    let (qp, cpd, rbuf) = (c.qp, c.pd, c.before);

    let (to_server, from_client) = tokio::sync::oneshot::channel::<Vec<RemoteBuf>>();
    let server = tokio::spawn(async move {
        let (qp, spd) = (s.qp, s.pd);
        let sinks = from_client.await.unwrap();
        let note = spd.alloc(64, Access::LOCAL_READ).unwrap();
        for (i, sink) in sinks.into_iter().enumerate() {
            let src = spd
                .register(seeded(i as u8 + 1, BULK), Access::LOCAL_READ)
                .unwrap();
            qp.post_write(10 + i as u64, &[Sge::new(&src, 0, BULK as u32)], sink)
                .unwrap();
            assert_eq!(next_ok(&qp).await.opcode, WcOpcode::RdmaWrite);
            // The Write has left; the Send comes long after the relay handed it on.
            tokio::time::sleep(SEND_AFTER).await;
            note.write_at(0, &[i as u8 + 1; 24]);
            qp.post_send_simple(20 + i as u64, &[Sge::new(&note, 0, 24)])
                .unwrap();
            assert_eq!(next_ok(&qp).await.wr_id, 20 + i as u64);
        }
        qp
    });

    let sinks: Vec<_> = (0..2)
        .map(|_| {
            cpd.alloc(BULK, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap()
        })
        .collect();
    to_server
        .send(
            sinks
                .iter()
                .map(|s| s.remote(0, BULK as u32).unwrap())
                .collect(),
        )
        .unwrap();
    for (i, sink) in sinks.iter().enumerate() {
        let c = tokio::time::timeout(Duration::from_secs(20), next_ok(&qp))
            .await
            .unwrap_or_else(|_| panic!("the Send after Write {i} never arrived"));
        assert_eq!((c.wr_id, c.byte_len), (1 + i as u64, 24));
        assert_eq!(
            rbuf.with(|b| b[i * 64..i * 64 + 24].to_vec()),
            [i as u8 + 1; 24]
        );
        // The Send is ordered behind the Write: its data is all in place.
        assert!(
            sink.with(|b| b == seeded(i as u8 + 1, BULK).as_slice()),
            "Write {i} misplaced"
        );
    }
    qp.disconnect();
    let sqp = server.await.unwrap();
    drop(sqp);
    relay.await.unwrap();
}
