//! Sends posted from the consumer's own buffer (`post_send_owned`) over
//! soft-iWARP on 127.0.0.1: each arrives byte-exact (head then the body's range)
//! whatever its size (head only, a body copied into the stream, one sent from its
//! buffer, one spanning several FPDUs), in order with Sends from registered
//! regions, CRC on and off; a range outside the buffer or a head too long is
//! refused when posted.

#[path = "support/soft_pair.rs"]
mod soft_pair;

use soft_pair::{connected_with, next_ok, post_recvs, seeded};

use std::sync::Arc;

use smbx_rdma::iwarp::IwarpOptions;
use smbx_rdma::*;

/// Receive buffer size: larger than one FPDU's payload.
const RECV: usize = 200 * 1024;

/// The messages sent, in order: (head, body range) of one shared body, or a
/// Send from a registered region (`None`).
fn plan(body_len: usize) -> Vec<Option<(Vec<u8>, std::ops::Range<usize>)>> {
    vec![
        Some((b"head only".to_vec(), 0..0)),
        Some((vec![7; 24], 3..103)),
        None,
        Some((vec![9; 24], 100..100 + 4096)),
        Some((Vec::new(), 5..5 + 8192)),
        Some((vec![1; 20], 0..body_len)),
        None,
        Some((vec![2; 32], body_len - 600..body_len)),
    ]
}

async fn exercise(opts: IwarpOptions) {
    let body_len = 150 * 1024;
    let body = Arc::new(seeded(3, body_len));
    let expect: Vec<Vec<u8>> = plan(body_len)
        .into_iter()
        .enumerate()
        .map(|(i, m)| match m {
            Some((h, r)) => [h.as_slice(), &body[r]].concat(),
            None => seeded(i as u8, 64),
        })
        .collect();
    let n = expect.len();
    let (s, c) = connected_with(
        opts,
        (ConnParams::default(), |qp, pd| {
            post_recvs(qp, pd, 0, n, RECV)
        }),
        (ConnParams::default(), |_, _| ()),
    )
    .await;
    let want = expect.clone();
    let server = tokio::spawn(async move {
        let (qp, rbuf) = (s.qp, s.before);
        for (i, w) in want.iter().enumerate() {
            let c = next_ok(&qp).await;
            assert_eq!((c.wr_id, c.opcode), (i as u64, WcOpcode::Recv));
            assert_eq!(c.byte_len as usize, w.len(), "message {i}");
            let got = rbuf.with(|b| b[i * RECV..i * RECV + w.len()].to_vec());
            assert!(got == *w, "message {i} differs");
        }
        qp.closed().await
    });

    let (qp, cpd) = (c.qp, c.pd);
    assert!(qp.sends_owned());
    // Refused when posted: nothing reaches the peer.
    let too_long = [0u8; OWNED_HEAD_MAX + 1];
    assert!(matches!(
        qp.post_send_owned(99, &too_long, body.clone(), 0..1, None),
        Err(RdmaError::InvalidRequest(_))
    ));
    assert!(matches!(
        qp.post_send_owned(99, b"h", body.clone(), body_len - 1..body_len + 1, None),
        Err(RdmaError::InvalidRequest(_))
    ));
    let sbuf = cpd.alloc(64, Access::LOCAL_WRITE).unwrap();
    for (i, m) in plan(body_len).into_iter().enumerate() {
        match m {
            Some((h, r)) => qp
                .post_send_owned(i as u64, &h, body.clone(), r, None)
                .unwrap(),
            None => {
                // The region's bytes are this message's until it completes.
                assert!(sbuf.write_at(0, &expect[i]));
                qp.post_send_simple(i as u64, &[Sge::new(&sbuf, 0, 64)])
                    .unwrap();
                let c = next_ok(&qp).await;
                assert_eq!((c.wr_id, c.opcode), (i as u64, WcOpcode::Send));
                continue;
            }
        }
        let c = next_ok(&qp).await;
        assert_eq!((c.wr_id, c.opcode), (i as u64, WcOpcode::Send));
        assert_eq!(c.byte_len as usize, expect[i].len());
    }
    // Only the test and the queued work held the body.
    let server_done = server;
    qp.disconnect();
    assert_eq!(qp.closed().await, CloseReason::LocalDisconnect);
    assert_eq!(server_done.await.unwrap(), CloseReason::PeerDisconnect);
    assert_eq!(Arc::strong_count(&body), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_sends_crc_on() {
    exercise(IwarpOptions {
        crc: true,
        ..Default::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_sends_crc_off() {
    exercise(IwarpOptions {
        crc: false,
        ..Default::default()
    })
    .await;
}
