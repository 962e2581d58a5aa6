//! A soft-iWARP driver with more queued to send than one pass of its write loop
//! takes (its write budget, 256 KiB) goes on with the next pass in the same poll
//! instead of waking its own task between passes: a task that wakes itself is a
//! yield, which tokio's multi-threaded scheduler answers by waking its idle
//! worker. The driver is polled here on a thread of its own, not one of the
//! runtime's workers, where a yield shows as a wake of its waker during its own
//! poll (tokio's cooperative budget, the one thing left that makes it give its
//! worker up while it has more to send, does not apply off the workers).

#[path = "support/soft_pair.rs"]
mod soft_pair;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::thread::{self, Thread, ThreadId};
use std::time::Duration;

use soft_pair::{next_ok, seeded};

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftQp};
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

/// A connection whose accepting side holds its driver (not yet polled): the
/// accepting side's queue pair and protection domain, and the connecting side's
/// queue pair and protection domain (its driver runs on the runtime).
async fn pair() -> (
    SoftQp,
    <SoftIwarp as Provider>::Pd,
    SoftQp,
    <SoftIwarp as Provider>::Pd,
) {
    let prov = SoftIwarp::new(IwarpOptions::default());
    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();
    let cpd = prov.alloc_pd().unwrap();
    let server = async {
        let req = lis.accept().await.unwrap();
        assert!(req.qp().hold_driver(), "soft-iWARP hands its driver out");
        let pd = req.pd().clone();
        (req.accept(ConnParams::default()).await.unwrap(), pd)
    };
    let client = async {
        let c = prov.connect(&cpd, addr, QpCaps::default()).await.unwrap();
        c.connect(ConnParams::default()).await.unwrap().0
    };
    let ((sqp, spd), cqp) = tokio::join!(server, client);
    (sqp, spd, cqp, cpd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_write_budget_leaves_without_the_driver_yielding() {
    let (sqp, spd, cqp, cpd) = pair().await;
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
