//! A message received into a buffer of its own (`handle_receive_owned`, the
//! soft-iWARP path) gives the same events as one copied out of a receive slot
//! (`handle_receive`): one fragment, two, many up to the maximum fragmented
//! size, a fragment with padding before and after its payload, and hostile
//! sequences (too large, inconsistent, a new message over an unfinished one,
//! random mutations) end the connection with the same reason.

mod common;

use common::pattern;

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smbx_direct::pdu::SMBD_VERSION;
use smbx_direct::{Config, Connection, DataHeader, Event, NegotiateRequest};

const MAX_FRAGMENTED: u32 = 64 * 1024;

/// A server that negotiated with a client sending fragments of up to 8 KiB.
fn server(now: Instant) -> Connection {
    let cfg = Config {
        max_fragmented_size: MAX_FRAGMENTED,
        ..Config::default()
    };
    let mut s = Connection::server(cfg, now);
    s.poll_post_receives();
    let req = NegotiateRequest {
        min_version: SMBD_VERSION,
        max_version: SMBD_VERSION,
        credits_requested: 255,
        preferred_send_size: 8192,
        max_receive_size: 8192,
        max_fragmented_size: 1 << 20,
    };
    s.handle_receive(&req.encode(), now);
    while s.poll_transmit().is_some() {}
    s
}

fn fragment(remaining: u32, payload: &[u8]) -> Vec<u8> {
    DataHeader {
        credits_requested: 255,
        credits_granted: 1,
        remaining_data_length: remaining,
        ..DataHeader::default()
    }
    .encode_message(payload)
}

/// The fragments of `msg`, at most `max` payload bytes each.
fn fragments(msg: &[u8], max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < msg.len() {
        let n = max.min(msg.len() - at);
        out.push(fragment((msg.len() - at - n) as u32, &msg[at..at + n]));
        at += n;
    }
    out
}

/// Feeds `msgs` to a server copying out of slots and to one taking them owned;
/// both must give the same events (messages of the same bytes). Returns the
/// owned one's.
fn both(msgs: &[Vec<u8>]) -> Vec<Event> {
    let now = Instant::now();
    let (mut copied, mut owned) = (server(now), server(now));
    for m in msgs {
        copied.handle_receive(m, now);
        owned.handle_receive_owned(m.clone(), now);
        for s in [&mut copied, &mut owned] {
            s.poll_post_receives();
            while s.poll_transmit().is_some() {}
        }
    }
    let a: Vec<Event> = std::iter::from_fn(|| copied.poll_event()).collect();
    let b: Vec<Event> = std::iter::from_fn(|| owned.poll_event()).collect();
    assert_eq!(a, b);
    assert_eq!(copied.is_closed(), owned.is_closed());
    // The copying server's messages start their buffers.
    assert!(starts(&a).iter().all(|&s| s == 0), "{:?}", starts(&a));
    b
}

/// Where each message starts in the buffer it was handed up in.
fn starts(evs: &[Event]) -> Vec<usize> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(m.start()),
            _ => None,
        })
        .collect()
}

fn messages(evs: &[Event]) -> Vec<&[u8]> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(m.bytes()),
            _ => None,
        })
        .collect()
}

fn disconnected(evs: &[Event]) -> bool {
    matches!(evs.last(), Some(Event::Disconnect(_)))
}

#[test]
fn messages_arrive_whole_at_every_fragment_boundary() {
    let max = 8192 - 24;
    for len in [
        1,
        7,
        100,
        4096,
        max - 1,
        max,
        max + 1,
        2 * max,
        2 * max + 1,
        MAX_FRAGMENTED as usize,
    ] {
        let msg = pattern(len as u32, len);
        // Each message twice: the second after the first reassembled.
        let frags: Vec<Vec<u8>> = [fragments(&msg, max), fragments(&msg, max)].concat();
        let evs = both(&frags);
        assert!(!disconnected(&evs), "{len}: {evs:?}");
        assert_eq!(messages(&evs), vec![&msg[..], &msg[..]], "{len}");
        // One fragment: handed up in its own buffer, past the 24-byte header.
        let start = if len <= max { 24 } else { 0 };
        assert_eq!(starts(&evs), vec![start, start], "{len}");
    }
}

#[test]
fn padding_around_a_payload_is_not_delivered() {
    // Data offset 32 (8 bytes after the header) and 5 bytes after the payload.
    let mut m = fragment(0, b"");
    let payload = pattern(9, 300);
    m[12..16].copy_from_slice(&32u32.to_le_bytes());
    m[16..20].copy_from_slice(&300u32.to_le_bytes());
    m.resize(32, 0xEE);
    m.extend_from_slice(&payload);
    m.extend_from_slice(&[0xDD; 5]);
    // The first of two fragments, with the same 8 bytes before its payload.
    let mut first = [m[..32].to_vec(), payload[..100].to_vec()].concat();
    first[8..12].copy_from_slice(&200u32.to_le_bytes());
    first[16..20].copy_from_slice(&100u32.to_le_bytes());
    let mut second = fragment(0, &payload[100..]);
    second.extend_from_slice(&[0xCC; 3]);
    let evs = both(&[m, first, second]);
    assert!(!disconnected(&evs), "{evs:?}");
    assert_eq!(messages(&evs), vec![&payload[..], &payload[..]]);
    // At its data offset; the second was reassembled.
    assert_eq!(starts(&evs), vec![32, 0]);
}

#[test]
fn hostile_sequences_end_it_alike() {
    let max = 8192 - 24;
    let cases: Vec<Vec<Vec<u8>>> = vec![
        // Larger than the maximum fragmented size in one claim.
        vec![fragment(MAX_FRAGMENTED, b"x")],
        // A new message over an unfinished one.
        vec![fragment(10, b"abc"), fragment(0, b"def")],
        // More than is outstanding.
        vec![fragment(3, b"abc"), fragment(0, b"defg")],
        // Remaining that does not follow.
        vec![fragment(10, b"abc"), fragment(9, b"def")],
        // Payload past the end of the message.
        {
            let mut m = fragment(0, &[1; 100]);
            m[16..20].copy_from_slice(&101u32.to_le_bytes());
            vec![m]
        },
        // A fragment larger than a receive.
        vec![fragment(0, &vec![0; max + 1])],
    ];
    for (i, c) in cases.iter().enumerate() {
        let evs = both(c);
        assert!(disconnected(&evs), "case {i}: {evs:?}");
    }
    // Random mutations of a two-fragment message.
    let mut rng = StdRng::seed_from_u64(11);
    let base = fragments(&pattern(1, 300), 200);
    let mut ends = 0;
    for _ in 0..300 {
        let msgs: Vec<Vec<u8>> = (0..rng.gen_range(1..6))
            .map(|_| {
                let mut m = base[rng.gen_range(0..2)].clone();
                if rng.gen_bool(0.5) {
                    let i = rng.gen_range(0..m.len());
                    m[i] = rng.gen();
                }
                if rng.gen_bool(0.2) {
                    m.truncate(rng.gen_range(0..m.len()));
                }
                m
            })
            .collect();
        ends += usize::from(disconnected(&both(&msgs)));
    }
    assert!(ends > 0);
}
