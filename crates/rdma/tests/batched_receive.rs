//! A burst of small Sends that reaches the peer in one socket read (a queue
//! depth's worth of requests or responses) is handed on a batch of completions
//! at a time, the rest of the buffer taken after the consumers ran: every
//! message still arrives once, in order and with its bytes, a long RDMA Write
//! among them lands whole, and what the consumer posts back while the burst is
//! taken (an answer per message) reaches the sender.

use smbx_rdma::iwarp::IwarpOptions;
use smbx_rdma::*;

#[path = "support/soft_pair.rs"]
mod soft_pair;
use soft_pair::{connected_pds, next_ok, pattern};

/// Messages in the burst (several of the driver's batches).
const N: usize = 100;
/// Receive slot per message.
const SLOT: usize = 64;
/// The RDMA Write in the middle of the burst (long enough to be placed straight
/// from the socket).
const WRITE: usize = 300_000;

/// Message `i`'s length: 1 to 61 bytes.
fn len_of(i: usize) -> usize {
    1 + (i * 7) % 61
}

/// The burst, the receiver having told its queue pair `in_flight` messages are
/// coming (batches of half of it) when given.
async fn burst(opts: IwarpOptions, in_flight: Option<usize>) {
    let (sqp, spd, cqp, cpd) = connected_pds(opts).await;
    if let Some(n) = in_flight {
        cqp.set_in_flight(n);
    }
    // The receiver: a slot per message, and a sink for the Write.
    let rbuf = cpd.alloc(N * SLOT, Access::LOCAL_WRITE).unwrap();
    for i in 0..N {
        cqp.post_recv(i as u64, &[Sge::new(&rbuf, (i * SLOT) as u64, SLOT as u32)])
            .unwrap();
    }
    let sink = cpd
        .alloc(WRITE, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let remote = sink.remote(0, WRITE as u32).unwrap();
    // The sender's receives for the answers.
    let abuf = spd.alloc(N * 8, Access::LOCAL_WRITE).unwrap();
    for i in 0..N {
        sqp.post_recv(1000 + i as u64, &[Sge::new(&abuf, (i * 8) as u64, 8)])
            .unwrap();
    }
    // All of it posted at once: the sender's driver writes it together.
    let msgs = spd.register(pattern(N * SLOT), Access::LOCAL_READ).unwrap();
    let data = pattern(WRITE + 1)[1..].to_vec();
    let wsrc = spd.register(data.clone(), Access::LOCAL_READ).unwrap();
    for i in 0..N {
        if i == N / 2 {
            sqp.post_write(5000, &[Sge::new(&wsrc, 0, WRITE as u32)], remote)
                .unwrap();
        }
        let sg = [Sge::new(&msgs, (i * SLOT) as u64, len_of(i) as u32)];
        sqp.post_send_simple(2000 + i as u64, &sg).unwrap();
    }
    // The receiver answers each message as it comes.
    let answers = cpd.alloc(N * 8, Access::LOCAL_WRITE).unwrap();
    let want = pattern(N * SLOT);
    // The receiver's answers sent (its completion queue has both).
    let mut sent = 0;
    for i in 0..N {
        let mut c = next_ok(&cqp).await;
        while c.opcode == WcOpcode::Send {
            assert_eq!(c.wr_id, 3000 + sent as u64);
            sent += 1;
            c = next_ok(&cqp).await;
        }
        assert_eq!(
            (c.wr_id, c.opcode),
            (i as u64, WcOpcode::Recv),
            "message {i}"
        );
        assert_eq!(c.byte_len as usize, len_of(i), "message {i}");
        let at = i * SLOT;
        let got = rbuf.with(|b| b[at..at + len_of(i)].to_vec());
        assert_eq!(got, want[at..at + len_of(i)], "message {i}'s bytes");
        if i > N / 2 {
            // The Write was before this Send: it is placed.
            assert!(sink.with(|b| b == data.as_slice()), "the Write's bytes");
        }
        answers.write_at(i * 8, &(i as u64).to_le_bytes());
        cqp.post_send_simple(3000 + i as u64, &[Sge::new(&answers, (i * 8) as u64, 8)])
            .unwrap();
    }
    // Both sides see every completion: the receiver its answers sent, the sender its
    // Sends, its Write and every answer in order.
    while sent < N {
        let c = next_ok(&cqp).await;
        assert_eq!((c.wr_id, c.opcode), (3000 + sent as u64, WcOpcode::Send));
        sent += 1;
    }
    let (mut sends, mut write, mut answered) = (0, false, 0);
    while sends < N || !write || answered < N {
        let c = next_ok(&sqp).await;
        match c.opcode {
            WcOpcode::Send => {
                assert_eq!(c.wr_id, 2000 + sends as u64);
                sends += 1;
            }
            WcOpcode::RdmaWrite => {
                assert_eq!((c.wr_id, write), (5000, false));
                write = true;
            }
            WcOpcode::Recv => {
                assert_eq!(c.wr_id, 1000 + answered as u64);
                let at = answered * 8;
                let v = abuf.with(|b| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()));
                assert_eq!(v, answered as u64, "answer {answered}");
                answered += 1;
            }
            o => panic!("unexpected {o:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_sends_arrives_whole_in_order_and_is_answered_crc_off() {
    burst(
        IwarpOptions {
            crc: false,
            ..IwarpOptions::default()
        },
        None,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_sends_arrives_whole_in_order_and_is_answered_crc_on() {
    burst(
        IwarpOptions {
            crc: true,
            ..IwarpOptions::default()
        },
        None,
    )
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_burst_of_sends_is_answered_on_a_current_thread_runtime() {
    burst(IwarpOptions::default(), None).await;
}

/// With a hint of 8 messages in flight the driver hands on 4 at a time (its
/// smallest batch), with a hint of 0 as well: more rounds, the same messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_handed_on_in_small_batches_arrives_whole_and_is_answered() {
    for (crc, n) in [(false, 8), (true, 0)] {
        let opts = IwarpOptions {
            crc,
            ..IwarpOptions::default()
        };
        burst(opts, Some(n)).await;
    }
}
