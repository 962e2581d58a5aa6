//! A soft-iWARP connection whose driver its consumer polls in its own task
//! (`QueuePair::hold_driver`/`take_driver`), on a single-threaded runtime: the
//! driver is handed out once, only when asked; traffic flows both ways while the
//! consumer polls it beside its own work; it ends when the consumer disconnects
//! and when the peer goes away; one never taken is dropped with the queue pair,
//! which closes the socket.

#[path = "support/soft_pair.rs"]
mod soft_pair;

use soft_pair::{next_ok, seeded};

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftPd, SoftQp};
use smbx_rdma::*;

const LEN: usize = 4096;

/// A connection whose accepting side asked (`hold`) to poll its driver: the
/// accepting side's queue pair with one receive posted into `rbuf`, the
/// connecting side's (its driver a task of its own) and protection domain.
async fn pair(
    hold: bool,
) -> (
    SoftQp,
    <SoftIwarp as Provider>::Mr,
    SoftQp,
    <SoftIwarp as Provider>::Pd,
) {
    let hold_and_post = move |qp: &SoftQp, pd: &SoftPd| {
        if hold {
            assert!(qp.hold_driver(), "soft-iWARP hands its driver out");
        }
        soft_pair::post_recvs(qp, pd, 1, 1, LEN)
    };
    let (s, c) = soft_pair::connected_with(
        IwarpOptions::default(),
        (ConnParams::default(), hold_and_post),
        (ConnParams::default(), |_: &SoftQp, _: &SoftPd| ()),
    )
    .await;
    (s.qp, s.before, c.qp, c.pd)
}

/// One Send from the connecting side, received byte-exact, and one back.
async fn exchange(
    sqp: &SoftQp,
    rbuf: &<SoftIwarp as Provider>::Mr,
    cqp: &SoftQp,
    cpd: &<SoftIwarp as Provider>::Pd,
) {
    let msg = seeded(5, LEN);
    let cbuf = cpd.alloc(LEN, Access::LOCAL_WRITE).unwrap();
    cqp.post_recv(2, &[Sge::new(&cbuf, 0, LEN as u32)]).unwrap();
    let sbuf = cpd.register(msg.clone(), Access::LOCAL_WRITE).unwrap();
    cqp.post_send_simple(3, &[Sge::new(&sbuf, 0, LEN as u32)])
        .unwrap();
    assert_eq!(next_ok(cqp).await.wr_id, 3);
    let c = next_ok(sqp).await;
    assert_eq!(
        (c.wr_id, c.opcode, c.byte_len as usize),
        (1, WcOpcode::Recv, LEN)
    );
    assert!(rbuf.with(|b| b == msg.as_slice()));
    // And back, from the same region.
    sqp.post_send_simple(4, &[Sge::new(rbuf, 0, 100)]).unwrap();
    assert_eq!(next_ok(sqp).await.wr_id, 4);
    let c = next_ok(cqp).await;
    assert_eq!((c.wr_id, c.byte_len), (2, 100));
    assert!(cbuf.with(|b| b[..100] == msg[..100]));
}

#[tokio::test(flavor = "current_thread")]
async fn a_held_driver_runs_in_its_consumers_task_until_it_disconnects() {
    let (sqp, rbuf, cqp, cpd) = pair(true).await;
    let driver = sqp.take_driver().expect("held for the consumer");
    assert!(sqp.take_driver().is_none(), "handed out once");
    let work = async {
        exchange(&sqp, &rbuf, &cqp, &cpd).await;
        sqp.disconnect();
        assert_eq!(cqp.closed().await, CloseReason::PeerDisconnect);
    };
    // The driver ends once the connection has closed.
    tokio::join!(driver, work);
    assert_eq!(sqp.close_reason(), Some(CloseReason::LocalDisconnect));
    assert_eq!(sqp.state(), QpState::Closed);
}

#[tokio::test(flavor = "current_thread")]
async fn a_held_driver_ends_when_the_peer_goes_away() {
    let (sqp, rbuf, cqp, cpd) = pair(true).await;
    let driver = sqp.take_driver().expect("held");
    let work = async {
        exchange(&sqp, &rbuf, &cqp, &cpd).await;
        drop(cqp);
        assert_eq!(sqp.closed().await, CloseReason::PeerDisconnect);
    };
    tokio::join!(driver, work);
    // Its completion queue is closed: nothing more will come.
    assert!(sqp.cq().next().await.is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn a_held_driver_never_taken_goes_with_the_queue_pair() {
    let (sqp, _rbuf, cqp, _cpd) = pair(true).await;
    // Nothing runs the connection; dropping the queue pair drops its driver,
    // which closes the socket: the peer sees the connection end.
    drop(sqp);
    assert_eq!(cqp.closed().await, CloseReason::PeerDisconnect);
}

#[tokio::test(flavor = "current_thread")]
async fn unasked_the_provider_runs_its_own_driver() {
    let (sqp, rbuf, cqp, cpd) = pair(false).await;
    assert!(sqp.take_driver().is_none());
    exchange(&sqp, &rbuf, &cqp, &cpd).await;
    sqp.disconnect();
    assert_eq!(cqp.closed().await, CloseReason::PeerDisconnect);
}

/// A peer that stops reading (here: the connecting side, its driver held and never
/// polled) leaves the other side's driver waiting for its socket to take more bytes;
/// a disconnect asked for meanwhile must still close the connection (the driver gives
/// the unsent bytes a bounded time, then drops the socket), not wait for the peer.
/// (The accepting side sends: a connecting one's nudges would wake its driver.)
#[tokio::test(flavor = "current_thread")]
async fn a_disconnect_is_heard_while_the_peer_reads_nothing() {
    let (s, c) = soft_pair::connected_with(
        IwarpOptions::default(),
        (ConnParams::default(), |_: &SoftQp, _: &SoftPd| ()),
        (ConnParams::default(), |qp: &SoftQp, _: &SoftPd| {
            assert!(qp.hold_driver(), "soft-iWARP hands its driver out");
        }),
    )
    .await;
    const BIG: usize = 64 * 1024;
    let sbuf = s.pd.alloc(BIG, Access::LOCAL_WRITE).unwrap();
    // More than the sockets hold between them: the driver is left with bytes to send.
    for i in 0..200 {
        s.qp.post_send_simple(100 + i, &[Sge::new(&sbuf, 0, BIG as u32)])
            .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        s.qp.state(),
        QpState::Rts,
        "still open, waiting for the socket"
    );
    s.qp.disconnect();
    let closed = tokio::time::timeout(std::time::Duration::from_secs(30), s.qp.closed()).await;
    assert_eq!(closed.ok(), Some(CloseReason::LocalDisconnect));
    drop(c);
}
