//! Two sans-IO endpoints wired back to back exchange 10,000 messages of
//! random sizes in both directions, with periods in which one direction is
//! stalled (credit starvation). The harness checks that no message is sent
//! without a credit (from the bytes on the wire), that the last credit
//! always carries a grant, that no message arrives without a posted
//! receive, and that every message arrives intact and in order.

mod common;

use std::collections::VecDeque;

use common::Pair;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smbx_direct::Config;

fn random_size(rng: &mut StdRng) -> usize {
    match rng.gen_range(0..100) {
        0 => rng.gen_range(1..=1 << 20),
        1..=9 => rng.gen_range(1..=64 * 1024),
        _ => rng.gen_range(1..=4096),
    }
}

fn payload(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..]);
    v
}

fn exchange(seed: u64, client: Config, server: Config, total: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut p = Pair::new(client, server);
    p.run(10);
    assert!(p.client.negotiated && p.server.negotiated);
    let mut to_server: VecDeque<Vec<u8>> = VecDeque::new();
    let mut to_client: VecDeque<Vec<u8>> = VecDeque::new();
    let (mut got_s, mut got_c) = (0usize, 0usize);
    let mut queued = 0usize;
    // Stall countdowns: while non-zero, that direction delivers nothing.
    let (mut stall_cs, mut stall_sc) = (0u32, 0u32);
    let mut rounds = 0usize;
    let limit = 200_000;
    while got_s + got_c < total {
        rounds += 1;
        assert!(
            rounds < limit,
            "no progress: {} of {total} delivered",
            got_s + got_c
        );
        // The upper layers queue a few messages each round.
        if queued < total {
            for _ in 0..rng.gen_range(0..4) {
                if queued == total {
                    break;
                }
                let n = random_size(&mut rng);
                let data = payload(&mut rng, n);
                if rng.gen_bool(0.5) {
                    p.client.conn.send_message(&data).unwrap();
                    to_server.push_back(data);
                } else {
                    p.server.conn.send_message(&data).unwrap();
                    to_client.push_back(data);
                }
                queued += 1;
            }
        }
        if stall_cs == 0 && rng.gen_range(0..50) == 0 {
            stall_cs = rng.gen_range(1..40);
        }
        if stall_sc == 0 && rng.gen_range(0..50) == 0 {
            stall_sc = rng.gen_range(1..40);
        }
        p.transmit(true);
        p.transmit(false);
        if stall_cs == 0 {
            p.deliver(false);
        } else {
            stall_cs -= 1;
        }
        if stall_sc == 0 {
            p.deliver(true);
        } else {
            stall_sc -= 1;
        }
        for m in p.server.delivered.drain(..) {
            assert_eq!(
                Some(m),
                to_server.pop_front(),
                "message {got_s} to the server"
            );
            got_s += 1;
        }
        for m in p.client.delivered.drain(..) {
            assert_eq!(
                Some(m),
                to_client.pop_front(),
                "message {got_c} to the client"
            );
            got_c += 1;
        }
        assert!(p.client.disconnect.is_none(), "{:?}", p.client.disconnect);
        assert!(p.server.disconnect.is_none(), "{:?}", p.server.disconnect);
        for side in [&p.client, &p.server] {
            assert!(side.wire_credits >= 0);
            assert_eq!(side.conn.send_credits() as i64, side.wire_credits);
            assert!(side.conn.granted_credits() <= side.conn.posted_receives());
        }
    }
    assert!(to_server.is_empty() && to_client.is_empty());
    // Afterwards the pair falls silent: no credit-only ping-pong.
    let r = p.run(1000);
    assert!(r < 1000);
    assert_eq!(p.transmit(true) + p.transmit(false), 0);
    let sent = p.client.transmitted + p.server.transmitted;
    let empty = p.client.empty_transmitted + p.server.empty_transmitted;
    assert!(empty * 10 < sent, "{empty} credit-only messages of {sent}");
}

#[test]
fn ten_thousand_messages_default_parameters() {
    exchange(1, Config::default(), Config::default(), 10_000);
}

#[test]
fn small_credit_windows() {
    // Few credits on both sides make starvation the normal state.
    let c = Config {
        receive_credit_max: 4,
        send_credit_target: 4,
        ..Config::default()
    };
    let s = Config {
        receive_credit_max: 6,
        send_credit_target: 5,
        ..Config::default()
    };
    exchange(2, c, s, 2_000);
}
