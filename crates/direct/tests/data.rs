//! Data transfer: decoding checks, credits, fragmentation, reassembly and
//! keepalive, on single endpoints fed crafted bytes and on a wired pair.

mod common;

use std::time::{Duration, Instant};

use common::Pair;
use smbx_direct::credits::CreditError;
use smbx_direct::pdu::{FLAG_RESPONSE_REQUESTED, SMBD_VERSION};
use smbx_direct::reassembly::ReassemblyError;
use smbx_direct::{
    BufferDescriptorV1, Config, Connection, DataHeader, DisconnectReason, Event, NegotiateRequest,
    PduError, SendError, DEFAULT_MESSAGE_SIZE, PEER_DEFAULT_SEND_SIZE,
};
use smbx_wire::rw::READ_RESPONSE_DATA_OFFSET;
use smbx_wire::HEADER_SIZE;

fn msg(credits_granted: u16, remaining: u32, payload: &[u8]) -> Vec<u8> {
    DataHeader {
        credits_requested: 255,
        credits_granted,
        flags: 0,
        remaining_data_length: remaining,
        data_offset: 0,
        data_length: 0,
    }
    .encode_message(payload)
}

/// A server negotiated with a client that asked for `credits` credits.
fn negotiated_server(credits: u16) -> (Connection, Instant) {
    let now = Instant::now();
    let mut s = Connection::server(Config::default(), now);
    s.poll_post_receives();
    let req = NegotiateRequest {
        min_version: SMBD_VERSION,
        max_version: SMBD_VERSION,
        credits_requested: credits,
        preferred_send_size: 1364,
        max_receive_size: 1364,
        max_fragmented_size: 1 << 20,
    };
    s.handle_receive(&req.encode(), now);
    while s.poll_transmit().is_some() {}
    assert!(matches!(s.poll_event(), Some(Event::Negotiated(_))));
    (s, now)
}

fn disconnect_of(c: &mut Connection) -> Option<DisconnectReason> {
    std::iter::from_fn(|| c.poll_event()).find_map(|e| match e {
        Event::Disconnect(r) => Some(r),
        _ => None,
    })
}

#[test]
fn data_header_decode_checks() {
    let max = 1 << 20;
    let good = msg(1, 0, b"hello");
    let (h, p) = DataHeader::decode(&good, max).unwrap();
    assert_eq!((h.data_offset, h.data_length, p), (24, 5, &b"hello"[..]));
    // Empty form: 20 bytes.
    let empty = msg(3, 0, b"");
    assert_eq!(empty.len(), 20);
    let (h, p) = DataHeader::decode(&empty, max).unwrap();
    assert_eq!((h.credits_granted, p.len()), (3, 0));

    assert_eq!(
        DataHeader::decode(&good[..19], max),
        Err(PduError::TooShort { len: 19, need: 20 })
    );
    let mut b = good.clone();
    b[0..2].copy_from_slice(&0u16.to_le_bytes());
    assert_eq!(
        DataHeader::decode(&b, max),
        Err(PduError::ZeroCreditsRequested)
    );
    let mut b = good.clone();
    b[12..16].copy_from_slice(&28u32.to_le_bytes());
    assert_eq!(
        DataHeader::decode(&b, max),
        Err(PduError::MisalignedDataOffset(28))
    );
    let mut b = good.clone();
    b[12..16].copy_from_slice(&16u32.to_le_bytes()); // inside the header
    assert!(matches!(
        DataHeader::decode(&b, max),
        Err(PduError::PayloadOutOfBounds { .. })
    ));
    let mut b = good.clone();
    b[16..20].copy_from_slice(&6u32.to_le_bytes()); // past the end
    assert!(matches!(
        DataHeader::decode(&b, max),
        Err(PduError::PayloadOutOfBounds { .. })
    ));
    let mut b = good.clone();
    b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        DataHeader::decode(&b, u32::MAX),
        Err(PduError::PayloadOutOfBounds { .. })
    ));
    // RemainingDataLength + DataLength > max (and no u32 overflow).
    let b = msg(0, max - 4, b"hello");
    assert_eq!(
        DataHeader::decode(&b, max),
        Err(PduError::FragmentedTooLarge {
            total: u64::from(max) + 1,
            max
        })
    );
    let b = msg(0, max - 5, b"hello");
    assert!(DataHeader::decode(&b, max).is_ok());
    let b = msg(0, u32::MAX, b"hello");
    assert!(matches!(
        DataHeader::decode(&b, u32::MAX),
        Err(PduError::FragmentedTooLarge { .. })
    ));
    // Remaining data without payload.
    let b = msg(0, 7, b"");
    assert_eq!(
        DataHeader::decode(&b, max),
        Err(PduError::EmptyWithRemaining(7))
    );
}

#[test]
fn buffer_descriptor_v1_list() {
    let list = vec![
        BufferDescriptorV1 {
            offset: 0x1122_3344_5566_7788,
            token: 0xdead_beef,
            length: 4096,
        },
        BufferDescriptorV1 {
            offset: 0,
            token: 1,
            length: 1 << 20,
        },
    ];
    let b = BufferDescriptorV1::encode_list(&list);
    assert_eq!(b.len(), 32);
    assert_eq!(
        &b[..16],
        &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xef, 0xbe, 0xad, 0xde, 0, 0x10, 0, 0]
    );
    assert_eq!(BufferDescriptorV1::decode_list(&b).unwrap(), list);
    assert_eq!(BufferDescriptorV1::total_length(&list), 4096 + (1 << 20));
    assert_eq!(
        BufferDescriptorV1::decode_list(&b[..31]),
        Err(PduError::DescriptorListLength(31))
    );
    assert_eq!(
        BufferDescriptorV1::decode_list(&[]),
        Err(PduError::DescriptorListLength(0))
    );
}

#[test]
fn peer_ignoring_credits_is_disconnected() {
    let (mut s, now) = negotiated_server(2);
    assert_eq!(s.granted_credits(), 2);
    s.handle_receive(&msg(0, 0, b"a"), now);
    s.handle_receive(&msg(0, 0, b"b"), now);
    assert_eq!(s.granted_credits(), 0);
    let got: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert_eq!(
        got,
        vec![
            Event::Message(b"a".to_vec().into()),
            Event::Message(b"b".to_vec().into())
        ]
    );
    // Third message with no credit granted to the peer.
    s.handle_receive(&msg(0, 0, b"c"), now);
    assert_eq!(
        disconnect_of(&mut s),
        Some(DisconnectReason::Credit(CreditError::NoCredit))
    );
    assert!(s.is_closed());
}

#[test]
fn oversized_receive_and_bad_messages_disconnect() {
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&vec![0u8; 1365], now);
    assert_eq!(
        disconnect_of(&mut s),
        Some(DisconnectReason::ReceiveTooLarge {
            len: 1365,
            max: 1364
        })
    );
    let (mut s, now) = negotiated_server(10);
    let mut b = msg(0, 0, b"x");
    b[0] = 0;
    s.handle_receive(&b, now);
    assert_eq!(
        disconnect_of(&mut s),
        Some(PduError::ZeroCreditsRequested.into())
    );
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&[1u8; 19], now);
    assert_eq!(
        disconnect_of(&mut s),
        Some(PduError::TooShort { len: 19, need: 20 }.into())
    );
}

#[test]
fn overlapping_and_oversized_fragments_disconnect() {
    // Remaining not decreasing by DataLength.
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&msg(0, 100, &[1; 10]), now);
    s.handle_receive(&msg(0, 50, &[2; 10]), now);
    assert_eq!(
        disconnect_of(&mut s),
        Some(
            ReassemblyError::Inconsistent {
                outstanding: 100,
                data_length: 10,
                remaining: 50
            }
            .into()
        )
    );
    // A new message starting over an unfinished one.
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&msg(0, 100, &[1; 10]), now);
    s.handle_receive(&msg(0, 0, &[2; 10]), now);
    assert!(matches!(
        disconnect_of(&mut s),
        Some(DisconnectReason::Reassembly(_))
    ));
    // A fragment longer than what is outstanding.
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&msg(0, 5, &[1; 10]), now);
    s.handle_receive(&msg(0, 0, &[2; 10]), now);
    assert!(matches!(
        disconnect_of(&mut s),
        Some(DisconnectReason::Reassembly(_))
    ));
    // Total above the max fragmented receive size.
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&msg(0, (1 << 20) - 9, &[1; 10]), now);
    assert!(matches!(
        disconnect_of(&mut s),
        Some(DisconnectReason::Protocol(
            PduError::FragmentedTooLarge { .. }
        ))
    ));
    // Empty messages may interleave with fragments (credits, keepalive).
    let (mut s, now) = negotiated_server(10);
    s.handle_receive(&msg(0, 3, b"ab"), now);
    s.handle_receive(&msg(0, 0, b""), now);
    s.handle_receive(&msg(0, 0, b"cde"), now);
    assert_eq!(
        s.poll_event(),
        Some(Event::Message(b"abcde".to_vec().into()))
    );
}

#[test]
fn sender_keeps_last_credit_for_a_grant() {
    // The server grants the client only 8 credits.
    let scfg = Config {
        receive_credit_max: 8,
        ..Config::default()
    };
    let mut p = Pair::new(Config::default(), scfg);
    p.run(10);
    // Right after negotiation the client granted the server its receives,
    // in one credit-only message.
    assert_eq!(p.client.empty_transmitted, 1);
    assert_eq!(p.client.conn.granted_credits(), 255);
    assert_eq!(p.client.conn.send_credits(), 7);
    for i in 0..100u8 {
        p.client.conn.send_message(&[i; 100]).unwrap();
    }
    // Nothing is delivered: count what the client may send on 7 credits.
    // All 255 receives are granted already, so the last credit cannot carry
    // a grant: 6 messages go, one credit stays.
    let sent = p.transmit(true);
    assert_eq!(sent, 6);
    assert_eq!(p.client.conn.send_credits(), 1);
    assert_eq!(p.transmit(true), 0);
    // Delivering lets the server grant more; everything then flows.
    p.run(1000);
    assert_eq!(p.server.delivered.len(), 100);
    for (i, m) in p.server.delivered.iter().enumerate() {
        assert_eq!(m, &vec![i as u8; 100]);
    }
    assert!(p.client.disconnect.is_none() && p.server.disconnect.is_none());
}

#[test]
fn last_credit_is_spent_only_with_a_grant() {
    // The client grants at most 2 credits; the server may post 3 receives.
    let ccfg = Config {
        receive_credit_max: 2,
        send_credit_target: 3,
        ..Config::default()
    };
    let scfg = Config {
        receive_credit_max: 3,
        ..Config::default()
    };
    let mut p = Pair::new(ccfg, scfg);
    p.run(10);
    assert_eq!(p.server.conn.send_credits(), 2);
    for _ in 0..5 {
        p.server.conn.send_message(b"unsolicited").unwrap();
    }
    let out: Vec<_> = std::iter::from_fn(|| p.server.conn.poll_transmit()).collect();
    assert_eq!(out.len(), 2);
    let grants: Vec<u16> = out
        .iter()
        .map(|m| {
            DataHeader::decode(&m.bytes, u32::MAX)
                .unwrap()
                .0
                .credits_granted
        })
        .collect();
    // First message: two credits held, nothing to grant yet. Second: the
    // last credit, so one more receive is posted and granted.
    assert_eq!(grants, vec![0, 1]);
    assert_eq!(out[1].post_receives, 1);
    assert_eq!(p.server.conn.send_credits(), 0);
    for m in out {
        p.server.posted += i64::from(m.post_receives);
        p.server.wire_credits -= 1;
        p.client.inbox.push_back(m.bytes);
    }
    p.run(100);
    assert_eq!(p.client.delivered.len(), 5);
    assert!(p.client.disconnect.is_none() && p.server.disconnect.is_none());
}

#[test]
fn fragmentation_round_trips() {
    // Windows' send size at both ends, 8 KiB, and the default (8704).
    for send in [PEER_DEFAULT_SEND_SIZE, 8192, DEFAULT_MESSAGE_SIZE] {
        fragmentation_round_trips_at(send);
    }
}

fn fragmentation_round_trips_at(send: u32) {
    let mut p = Pair::negotiated_with(Config {
        max_send_size: send,
        ..Config::default()
    });
    let fp = p.client.conn.params().unwrap().max_fragment_payload();
    assert_eq!(fp, send as usize - 24);
    assert_eq!(p.client.conn.send_message(&[]), Err(SendError::Empty));
    assert_eq!(
        p.client.conn.send_message(&vec![0; (1 << 20) + 1]),
        Err(SendError::TooLarge {
            len: (1 << 20) + 1,
            max: 1 << 20
        })
    );
    let sizes = [1usize, fp, fp + 1, 2 * fp, 2 * fp + 1, 1 << 20];
    let frags = [1u64, 1, 2, 2, 3, (1u64 << 20).div_ceil(fp as u64)];
    for (&n, &f) in sizes.iter().zip(&frags) {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
        let before =
            p.client.conn.stats().data_messages_sent - p.client.conn.stats().empty_messages_sent;
        p.client.conn.send_message(&data).unwrap();
        p.run(100_000);
        let after =
            p.client.conn.stats().data_messages_sent - p.client.conn.stats().empty_messages_sent;
        assert_eq!(after - before, f, "fragments for {n} bytes");
        assert_eq!(p.server.delivered.pop().unwrap(), data);
        assert!(p.server.delivered.is_empty());
    }
    // Every fragment is at most the send size; a 1 MiB message from the
    // server to the client as well.
    let data: Vec<u8> = (0..1usize << 20).map(|i| (i >> 3) as u8).collect();
    p.server.conn.send_message(&data).unwrap();
    let mut max_len = 0;
    while let Some(m) = p.server.conn.poll_transmit() {
        max_len = max_len.max(m.bytes.len());
        p.server.posted += i64::from(m.post_receives);
        p.client.inbox.push_back(m.bytes);
        if p.client.inbox.len() > 50 {
            p.deliver(true);
            p.transmit(true);
            p.deliver(false);
        }
    }
    p.run(100_000);
    assert_eq!(max_len, send as usize);
    assert_eq!(p.client.delivered.pop().unwrap(), data);
}

#[test]
fn an_8k_read_response_or_write_request_is_one_message_between_default_ends() {
    // An 8 KiB READ response (SMB2 header, 16 fixed bytes, the data) and an
    // 8 KiB WRITE request (SMB2 header, 48 fixed bytes, the data; 52 bytes more
    // sealed, the transform header) go as one message of the default size; at
    // a send size of 8192 as a full message and a short one.
    let read_response = READ_RESPONSE_DATA_OFFSET + 8192;
    let write_request = HEADER_SIZE + 48 + 8192;
    let sealed_write = 52 + write_request;
    let at_8192 = Config {
        max_send_size: 8192,
        max_receive_size: 8192,
        ..Config::default()
    };
    for (cfg, fragments) in [(Config::default(), 1), (at_8192, 2)] {
        let size = cfg.max_send_size;
        let mut p = Pair::negotiated_with(cfg);
        for n in [read_response, write_request, sealed_write] {
            let data = common::pattern(n as u32, n);
            for from_client in [false, true] {
                let from = if from_client {
                    &mut p.client
                } else {
                    &mut p.server
                };
                from.conn.send_message(&data).unwrap();
                p.transmit(from_client);
                let to = if from_client { &p.server } else { &p.client };
                let lens: Vec<usize> = to.inbox.iter().map(Vec::len).collect();
                let want = if fragments == 1 {
                    vec![24 + n]
                } else {
                    vec![8192, 24 + n - (8192 - 24)]
                };
                assert_eq!(lens, want, "{n} bytes at {size}");
                p.run(1000);
                let to = if from_client {
                    &mut p.server
                } else {
                    &mut p.client
                };
                assert_eq!(to.delivered.pop().unwrap(), data);
                assert!(to.delivered.is_empty());
            }
        }
    }
}

#[test]
fn send_with_invalidate_marks_first_fragment() {
    let mut p = Pair::negotiated();
    p.server
        .conn
        .send_message_with_invalidate(&[5; 20_000], 0xabcd)
        .unwrap();
    let a = p.server.conn.poll_transmit().unwrap();
    let b = p.server.conn.poll_transmit();
    // The server holds no credits before the client granted some.
    assert!(a.invalidate.is_none() || b.is_some());
    let mut p = Pair::negotiated();
    p.client.conn.send_message(b"x").unwrap();
    p.run(10);
    p.server
        .conn
        .send_message_with_invalidate(&[5; 20_000], 0xabcd)
        .unwrap();
    let inv: Vec<_> = std::iter::from_fn(|| p.server.conn.poll_transmit())
        .map(|m| m.invalidate)
        .collect();
    assert_eq!(inv, vec![Some(0xabcd), None, None]);
}

#[test]
fn an_owned_message_is_sent_from_its_start_as_a_copied_one_is() {
    // Two pairs in the same state: one sends a copy of the message, the other the
    // buffer it sits in (behind 7 bytes of something else) and hands the pieces of
    // each fragment over borrowed. The fragments must be the same bytes.
    let data: Vec<u8> = (0..20_000usize).map(|i| (i * 13 + 5) as u8).collect();
    let mut buf = vec![0xee; 7];
    buf.extend_from_slice(&data);
    let (mut a, mut b) = (Pair::negotiated(), Pair::negotiated());
    for p in [&mut a, &mut b] {
        p.client.conn.send_message(b"x").unwrap();
        p.run(10);
    }
    a.server
        .conn
        .send_message_with_invalidate(&data, 0xabcd)
        .unwrap();
    b.server
        .conn
        .send_message_owned(buf, 7, Some(0xabcd))
        .unwrap();
    let copied: Vec<_> = std::iter::from_fn(|| a.server.conn.poll_transmit()).collect();
    let owned: Vec<_> = std::iter::from_fn(|| {
        b.server.conn.poll_transmit_with(|t| {
            assert_eq!(t.len(), t.header.len() + t.payload.len());
            let mut bytes = t.header.to_vec();
            bytes.extend_from_slice(t.payload);
            (bytes, t.invalidate, t.post_receives, t.needs_credit)
        })
    })
    .collect();
    assert_eq!(copied.len(), 3);
    assert_eq!(owned.len(), copied.len());
    for (o, c) in owned.iter().zip(&copied) {
        assert_eq!(
            o,
            &(
                c.bytes.clone(),
                c.invalidate,
                c.post_receives,
                c.needs_credit
            )
        );
    }
    assert_eq!(owned[0].1, Some(0xabcd));
    // And the peer puts the message back together from them.
    for (bytes, _, post, _) in owned {
        b.server.posted += i64::from(post);
        b.client.inbox.push_back(bytes);
    }
    b.run(100);
    assert_eq!(b.client.delivered.pop().unwrap(), data);
    // Nothing past its start is nothing to send.
    assert_eq!(
        b.server.conn.send_message_owned(vec![1, 2, 3], 3, None),
        Err(SendError::Empty)
    );
    assert_eq!(
        b.server.conn.send_message_owned(vec![1, 2, 3], 4, None),
        Err(SendError::Empty)
    );
}

#[test]
fn keepalive_sent_answered_and_reset() {
    let mut p = Pair::negotiated();
    let t0 = p.now;
    assert_eq!(
        p.client.conn.poll_timeout(),
        Some(t0 + Duration::from_secs(10))
    );
    p.client.conn.handle_timeout(t0 + Duration::from_secs(9));
    assert_eq!(p.transmit(true), 0);
    p.now = t0 + Duration::from_secs(10);
    p.client.conn.handle_timeout(p.now);
    let m = p.client.conn.poll_transmit().unwrap();
    let (h, _) = DataHeader::decode(&m.bytes, 1 << 20).unwrap();
    assert_eq!(h.flags, FLAG_RESPONSE_REQUESTED);
    assert_eq!(m.bytes.len(), 20);
    p.client.posted += i64::from(m.post_receives);
    p.client.wire_credits -= 1;
    p.server.inbox.push_back(m.bytes);
    assert_eq!(
        p.client.conn.poll_timeout(),
        Some(t0 + Duration::from_secs(15))
    );
    // The server answers promptly with a plain empty message.
    p.deliver(false);
    let r = p.server.conn.poll_transmit().unwrap();
    let (h, _) = DataHeader::decode(&r.bytes, 1 << 20).unwrap();
    assert_eq!(h.flags & FLAG_RESPONSE_REQUESTED, 0);
    p.server.posted += i64::from(r.post_receives);
    p.server.wire_credits -= 1;
    p.client.inbox.push_back(r.bytes);
    p.deliver(true);
    // The reply cleared the keepalive deadline and restarted the idle timer.
    assert_eq!(
        p.client.conn.poll_timeout(),
        Some(t0 + Duration::from_secs(20))
    );
    p.client.conn.handle_timeout(t0 + Duration::from_secs(15));
    assert!(p.client.conn.poll_event().is_none());
    assert!(!p.client.conn.is_closed());
    assert_eq!(p.client.conn.stats().keepalives_sent, 1);
}

#[test]
fn keepalive_without_reply_disconnects() {
    let mut p = Pair::negotiated();
    p.advance(Duration::from_secs(10));
    assert_eq!(p.transmit(true), 1); // the keepalive, never delivered
    p.advance(Duration::from_millis(4999));
    assert!(!p.client.conn.is_closed());
    p.advance(Duration::from_millis(1));
    assert_eq!(
        disconnect_of(&mut p.client.conn),
        Some(DisconnectReason::KeepaliveTimeout)
    );
}

#[test]
fn response_requested_answered_even_with_one_credit() {
    let (mut s, now) = negotiated_server(4);
    // Grant the server exactly one credit, then ask for a response.
    s.handle_receive(&msg(1, 0, b"x"), now);
    let mut ka = msg(0, 0, b"");
    ka[4..6].copy_from_slice(&FLAG_RESPONSE_REQUESTED.to_le_bytes());
    s.handle_receive(&ka, now);
    let r = s.poll_transmit().expect("answered");
    let (h, _) = DataHeader::decode(&r.bytes, 1 << 20).unwrap();
    assert!(h.credits_granted >= 1, "the last credit carries a grant");
    assert_eq!(r.post_receives as u16, h.credits_granted);
    assert_eq!(s.send_credits(), 0);
    assert!(s.poll_transmit().is_none());
}

#[test]
fn idle_pair_is_quiet() {
    let mut p = Pair::negotiated();
    for i in 0..300u32 {
        p.client.conn.send_message(&i.to_le_bytes()).unwrap();
        p.run(100);
        p.server.conn.send_message(&i.to_le_bytes()).unwrap();
        p.run(100);
    }
    let rounds = p.run(100);
    assert!(rounds < 100, "credit-only ping-pong");
    assert_eq!(p.transmit(true) + p.transmit(false), 0);
    let total = p.client.transmitted + p.server.transmitted;
    let empty = p.client.empty_transmitted + p.server.empty_transmitted;
    assert!(empty * 20 < total, "{empty} empty of {total}");
}
