//! A soft-iWARP driver with more queued to send than one pass of its write loop
//! takes (its write budget, 256 KiB) goes on with the next pass in the same poll
//! instead of waking its own task between passes: a task that wakes itself is a
//! yield, which tokio's multi-threaded scheduler answers by waking its idle
//! worker. The driver is polled here on a thread of its own, not one of the
//! runtime's workers, where a yield shows as a wake of its waker during its own
//! poll.
//!
//! What this guards is only that: no wake of itself per write budget. It does not
//! show that the driver still gives its worker up during a long burst, as tokio's
//! cooperative budget makes it on a worker (that budget does not apply off the
//! workers, and on loopback the socket fills and parks the driver long before it
//! runs out). A driver that never yielded at all lost 4 KiB random reads at queue
//! depth 32 (70K against 75-98K IOPS, 3 of 3 pairs), so keep the budget.

#[path = "support/soft_pair.rs"]
mod soft_pair;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::thread::{self, Thread, ThreadId};
use std::time::Duration;

use soft_pair::{connected_pds_held, next_ok, seeded};

use smbx_rdma::iwarp::IwarpOptions;
use smbx_rdma::*;

/// One message: a 64 KiB READ's worth.
const LEN: usize = 64 * 1024;
/// Messages queued at once: 2 MiB, eight write budgets.
const MSGS: usize = 32;

/// The driver's waker: unparks its thread, and counts the wakes that come on
/// that thread while the driver is being polled (the driver waking itself).
struct DriverWake {
    thread: Thread,
    id: ThreadId,
    polling: AtomicBool,
    own: AtomicUsize,
}

impl Wake for DriverWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if thread::current().id() == self.id && self.polling.load(Ordering::SeqCst) {
            self.own.fetch_add(1, Ordering::SeqCst);
        }
        self.thread.unpark();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_write_budget_leaves_without_the_driver_yielding() {
    let (sqp, spd, cqp, cpd) = connected_pds_held(IwarpOptions::default()).await;
    // The peer's receives, then the whole burst, posted before the driver runs.
    let rbufs: Vec<_> = (0..MSGS)
        .map(|i| {
            let b = cpd.alloc(LEN, Access::LOCAL_WRITE).unwrap();
            cqp.post_recv(i as u64, &[Sge::new(&b, 0, LEN as u32)])
                .unwrap();
            b
        })
        .collect();
    let msgs: Vec<_> = (0..MSGS).map(|i| seeded(i as u8, LEN)).collect();
    let sbufs: Vec<_> = msgs
        .iter()
        .map(|m| spd.register(m.clone(), Access::LOCAL_WRITE).unwrap())
        .collect();
    for (i, b) in sbufs.iter().enumerate() {
        sqp.post_send_simple(100 + i as u64, &[Sge::new(b, 0, LEN as u32)])
            .unwrap();
    }
    let mut driver = sqp.take_driver().expect("held");
    let (tx, rx) = std::sync::mpsc::channel();
    let rt = tokio::runtime::Handle::current();
    let polls = thread::spawn(move || {
        // The runtime's handle (the driver's timers), not one of its workers.
        let _rt = rt.enter();
        let wake = Arc::new(DriverWake {
            thread: thread::current(),
            id: thread::current().id(),
            polling: AtomicBool::new(false),
            own: AtomicUsize::new(0),
        });
        tx.send(()).unwrap();
        let waker = Waker::from(wake.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            wake.polling.store(true, Ordering::SeqCst);
            let r = driver.as_mut().poll(&mut cx);
            wake.polling.store(false, Ordering::SeqCst);
            if r.is_ready() {
                break;
            }
            // Woken (or a spurious unpark: polling again is harmless).
            thread::park_timeout(Duration::from_millis(50));
        }
        wake.own.load(Ordering::SeqCst)
    });
    rx.recv().unwrap();
    // Every message arrives whole, in order, and every Send completes.
    for (i, want) in msgs.iter().enumerate() {
        let c = next_ok(&cqp).await;
        assert_eq!((c.wr_id, c.byte_len as usize), (i as u64, LEN));
        assert!(rbufs[i].with(|b| b == want.as_slice()), "message {i}");
    }
    for i in 0..MSGS {
        assert_eq!(next_ok(&sqp).await.wr_id, 100 + i as u64);
    }
    sqp.disconnect();
    assert_eq!(cqp.closed().await, CloseReason::PeerDisconnect);
    let own = tokio::task::spawn_blocking(move || polls.join().unwrap())
        .await
        .unwrap();
    assert_eq!(
        own, 0,
        "the driver woke itself {own} times while sending {MSGS} x {LEN} bytes"
    );
}
