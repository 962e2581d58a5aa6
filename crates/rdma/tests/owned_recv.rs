//! Receives into buffers of their own (`post_recv_owned`) over soft-iWARP on
//! 127.0.0.1: each Send arrives byte-exact whatever its size (empty, one byte,
//! 4 KiB, one exactly filling the receive, one spanning several FPDUs), in
//! order with receives into a registered region, CRC on and off;
//! `take_received` hands each buffer over once and nothing for a registered
//! receive; a receive of 0 bytes is refused when posted; a Send longer than
//! the receive completes it with `LocalLengthError`.

#[path = "support/soft_pair.rs"]
mod soft_pair;

use soft_pair::{connected_with, seeded};

use smbx_rdma::iwarp::{IwarpOptions, SoftPd, SoftQp};
use smbx_rdma::*;

async fn next<Q: QueuePair>(qp: &Q) -> Completion {
    qp.cq().next().await.expect("completion")
}

/// The receives posted, in order: (message length, owned receive's length), or
/// a registered receive (`None`).
fn plan() -> Vec<(usize, Option<usize>)> {
    vec![
        (0, Some(64)),
        (1, Some(1)),
        (100, None),
        (4096, Some(8192)),
        (4096, Some(4096)),
        (150 * 1024, Some(200 * 1024)),
        (64, None),
        (8192, Some(8192)),
        // Too long: the last.
        (8193, Some(8192)),
    ]
}

async fn exercise(opts: IwarpOptions) {
    let post = |qp: &SoftQp, pd: &SoftPd| {
        let rbuf = pd.alloc(256, Access::LOCAL_WRITE).unwrap();
        assert!(qp.receives_owned());
        assert!(matches!(
            qp.post_recv_owned(99, 0),
            Err(RdmaError::InvalidRequest(_))
        ));
        for (i, (_, owned)) in plan().into_iter().enumerate() {
            match owned {
                Some(len) => qp.post_recv_owned(i as u64, len).unwrap(),
                None => qp.post_recv(i as u64, &[Sge::new(&rbuf, 0, 256)]).unwrap(),
            }
        }
        rbuf
    };
    let (s, c) = connected_with(
        opts,
        (ConnParams::default(), post),
        (ConnParams::default(), |_, _| ()),
    )
    .await;
    let server = tokio::spawn(async move {
        let (qp, rbuf) = (s.qp, s.before);
        let plan = plan();
        for (i, (len, owned)) in plan.iter().copied().enumerate() {
            let c = next(&qp).await;
            assert_eq!((c.wr_id, c.opcode), (i as u64, WcOpcode::Recv), "{c:?}");
            if i + 1 == plan.len() {
                assert_eq!(c.status, WcStatus::LocalLengthError);
                assert_eq!(qp.take_received(i as u64), None);
                break;
            }
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            assert_eq!(c.byte_len as usize, len, "message {i}");
            let want = seeded(i as u8, len);
            match owned {
                Some(_) => {
                    let got = qp.take_received(i as u64).expect("owned buffer");
                    assert!(got == want, "message {i} differs");
                    assert_eq!(qp.take_received(i as u64), None, "taken once");
                }
                None => {
                    assert_eq!(qp.take_received(i as u64), None);
                    let got = rbuf.with(|b| b[..len].to_vec());
                    assert!(got == want, "message {i} differs");
                }
            }
        }
        qp.closed().await
    });

    let (qp, cpd) = (c.qp, c.pd);
    let sbuf = cpd.alloc(200 * 1024, Access::LOCAL_WRITE).unwrap();
    for (i, (len, _)) in plan().into_iter().enumerate() {
        assert!(sbuf.write_at(0, &seeded(i as u8, len)));
        qp.post_send_simple(i as u64, &[Sge::new(&sbuf, 0, len as u32)])
            .unwrap();
        let c = next(&qp).await;
        if c.status != WcStatus::Success {
            // The peer tore the connection down over the last one.
            assert_eq!(i, plan().len() - 1, "{c:?}");
            break;
        }
        assert_eq!((c.wr_id, c.opcode), (i as u64, WcOpcode::Send));
    }
    let why = server.await.unwrap();
    assert!(matches!(why, CloseReason::LocalTerminate(_)), "{why:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_receives_crc_on() {
    exercise(IwarpOptions {
        crc: true,
        ..Default::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_receives_crc_off() {
    exercise(IwarpOptions {
        crc: false,
        ..Default::default()
    })
    .await;
}
