//! The request core driven directly, without sockets or tasks: credit window,
//! MessageIds, interim then final responses, compound members, timeouts by a given
//! clock, late responses, hostile frames, and requests handed back on channel loss.

use std::time::{Duration, Instant};

use smbx_security::protection::Protection;
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_wire::header::{FLAGS_ASYNC_COMMAND, FLAGS_REPLAY_OPERATION, FLAGS_SERVER_TO_REDIR};
use smbx_wire::simple::encode_simple;
use smbx_wire::{Command, Dialect, Header, InMessage, NtStatus, Writer, HEADER_SIZE};

use super::inbound::{self, SessionSecurity};
use smbx_security::transform::TRANSFORM_HEADER_LEN;

use super::outbound::{self, body_writer, HEADROOM};
use super::*;

type Core = RequestCore<u32, u32>;

fn core() -> Core {
    let mut c = Core::new(64);
    c.set_negotiated(Dialect::SMB3_1_1, true);
    c
}

fn reply(message_id: u64, status: NtStatus, credits: u16, flags: u32) -> Header {
    Header {
        status,
        credits,
        flags: FLAGS_SERVER_TO_REDIR | flags,
        message_id,
        async_id: if flags & FLAGS_ASYNC_COMMAND != 0 {
            77
        } else {
            0
        },
        ..Default::default()
    }
}

/// Charges and begins a send of `charges`, tokens numbered from `tok`.
fn send(c: &mut Core, charges: &[u16], tok: u32, deadline: Option<Instant>) -> Issued {
    let total = charges.iter().map(|&x| x as u32).sum();
    assert!(matches!(c.acquire(total), Acquire::Charged));
    c.begin(charges, Sent::default(), deadline, |i| tok + i as u32)
        .unwrap()
}

fn no_waiters(_: u32) -> bool {
    panic!("nobody waits")
}

#[test]
fn message_ids_follow_charges_and_credits_come_back() {
    let mut c = core();
    let a = send(&mut c, &[1], 0, None);
    assert_eq!(a.first_id, 0);
    // The first request asks its own credit back and the window's target more.
    assert_eq!(a.ask, 65);
    assert_eq!(c.credits(), 0);
    assert!(matches!(c.acquire(1), Acquire::Wait));
    match c.on_response(&reply(0, NtStatus::SUCCESS, 10, 0), true, no_waiters) {
        Matched::Done {
            token: 0,
            request: None,
        } => {}
        m => panic!("{m:?}"),
    }
    assert_eq!((c.credits(), c.in_flight(), c.pending()), (10, 0, 0));
    // A multi-credit member takes as many MessageIds as it costs.
    let b = send(&mut c, &[4, 1], 10, None);
    assert_eq!(b.first_id, 1);
    let hs = outbound::headers(
        &[
            Request::new(Command::Read, vec![], 1),
            Request::new(Command::Close, vec![], 1),
        ],
        &[4, 1],
        b,
        Dialect::SMB3_1_1,
        9,
    );
    assert_eq!(
        hs.iter()
            .map(|h| (h.message_id, h.credit_charge))
            .collect::<Vec<_>>(),
        [(1, 4), (5, 1)]
    );
    assert_eq!(send(&mut c, &[1], 20, None).first_id, 6);
    assert_eq!(c.in_flight(), 6);
}

#[test]
fn the_window_is_never_exceeded_and_waiters_go_in_order() {
    let mut c = core();
    send(&mut c, &[1], 0, None);
    // Three senders wait: 2 credits, then 1, then 1.
    for (need, tok) in [(2, 100), (1, 101), (1, 102)] {
        assert!(matches!(c.acquire(need), Acquire::Wait));
        c.enqueue(need, tok);
    }
    let mut woken = Vec::new();
    // One credit back: the first waiter needs two, so nobody moves (no overtaking).
    c.on_response(&reply(0, NtStatus::SUCCESS, 1, 0), true, |w| {
        woken.push(w);
        true
    });
    assert!(woken.is_empty());
    assert_eq!(c.credits(), 1);
    c.release(2, |w| {
        woken.push(w);
        true
    });
    assert_eq!(woken, [100, 101]);
    assert_eq!(c.credits(), 0);
    // A waiter that left gives its credits on to the next.
    c.release(1, |w| w != 102);
    assert_eq!(c.credits(), 1);
    // Randomised: whatever the server grants, what is in flight never exceeds
    // what was granted.
    let mut c = core();
    let mut granted: u64 = 1;
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut outstanding: Vec<u64> = Vec::new();
    for _ in 0..5000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if !x.is_multiple_of(3) {
            let need = 1 + (x % 5) as u16;
            if matches!(c.acquire(need as u32), Acquire::Charged) {
                let i = c.begin(&[need], Sent::default(), None, |_| 0).unwrap();
                outstanding.push(i.first_id);
            }
        } else if let Some(id) = outstanding.pop() {
            let g = (x >> 8) as u16 % 4;
            granted += g as u64;
            c.on_response(&reply(id, NtStatus::SUCCESS, g, 0), true, no_waiters);
        }
        assert!((c.credits() + c.in_flight()) as u64 <= granted);
    }
}

#[test]
fn interim_then_final() {
    let mut c = core();
    send(&mut c, &[1], 7, None);
    let interim = reply(0, NtStatus::PENDING, 3, FLAGS_ASYNC_COMMAND);
    assert!(matches!(
        c.on_response(&interim, true, no_waiters),
        Matched::Interim
    ));
    assert_eq!(c.pending(), 1);
    // The interim's credits count; the request's own is still spent.
    assert_eq!(c.credits(), 3);
    // Cancelling it now names the AsyncId.
    let f = c.forget(&[0]).pop().unwrap();
    assert_eq!(f.cancel().async_id, Some(77));
    let mut c = core();
    send(&mut c, &[1], 7, None);
    // An interim that failed verification does not mark anything async: it ends
    // the request (the driver hands its waiter the error).
    assert!(matches!(
        c.on_response(&interim, false, no_waiters),
        Matched::Done { token: 7, .. }
    ));
    let fin = reply(0, NtStatus::SUCCESS, 0, FLAGS_ASYNC_COMMAND);
    assert!(matches!(
        c.on_response(&fin, true, no_waiters),
        Matched::Unknown
    ));
}

#[test]
fn unsolicited_and_server_requests() {
    let mut c = core();
    let brk = reply(UNSOLICITED_ID, NtStatus::SUCCESS, 0, 0);
    assert!(matches!(
        c.on_response(&brk, true, no_waiters),
        Matched::Unsolicited
    ));
    let mut req = reply(0, NtStatus::SUCCESS, 50, 0);
    req.flags = 0;
    assert!(matches!(
        c.on_response(&req, true, no_waiters),
        Matched::NotAResponse
    ));
    assert_eq!(c.credits(), 1, "a server's request grants nothing");
}

#[test]
fn timeout_then_late_response() {
    let t0 = Instant::now();
    let mut c = core();
    send(&mut c, &[1], 1, Some(t0 + Duration::from_secs(5)));
    c.on_response(&reply(0, NtStatus::SUCCESS, 2, 0), true, no_waiters);
    send(&mut c, &[1], 2, Some(t0 + Duration::from_secs(10)));
    assert!(c.expire(t0 + Duration::from_secs(9)).is_empty());
    let due = c.expire(t0 + Duration::from_secs(10));
    assert_eq!(due.len(), 1);
    assert_eq!(
        (due[0].message_id, due[0].token, due[0].async_id),
        (1, 2, None)
    );
    assert_eq!((c.pending(), c.in_flight()), (0, 0));
    // The late answer is quietly unknown, and its credits still count.
    let held = c.credits();
    let late = reply(1, NtStatus::SUCCESS, 2, 0);
    assert!(matches!(
        c.on_response(&late, true, no_waiters),
        Matched::Unknown
    ));
    assert_eq!(c.credits(), held + 2);
}

#[test]
fn closing_hands_back_everything() {
    let mut c = core();
    c.release(8, no_waiters);
    send(&mut c, &[2], 1, None);
    send(&mut c, &[1, 1], 2, None);
    assert!(matches!(c.acquire(100), Acquire::Wait));
    c.enqueue(100, 9);
    let (lost, waiting) = c.close(DisconnectReason::ClosedByServer);
    assert_eq!(
        lost.iter().map(|f| f.message_id).collect::<Vec<_>>(),
        [0, 2, 3]
    );
    assert_eq!(waiting, [9]);
    assert!(matches!(c.acquire(1), Acquire::Closed(_)));
    assert!(c.begin(&[1], Sent::default(), None, |_| 0).is_err());
}

/// A WRITE built in place, sent retained, lost with its channel, and framed again
/// as a replay on another channel: the same bytes, with the replay flag, a new
/// MessageId and ChannelSequence.
#[test]
fn replayed_requests_are_byte_identical_except_header() {
    let pool = smbx_transport::BufPool::new(2);
    let mut w = body_writer(&pool, 1000);
    for i in 0..1000u32 {
        w.u8(i as u8);
    }
    let mut write = Request::with_headroom(Command::Write, w, 3);
    write.charge = 1;
    let path = vec![
        Request::new(Command::Create, vec![1; 60], 3),
        Request {
            related: true,
            ..Request::new(Command::Close, vec![2; 24], 3)
        },
    ];
    let signer = Signer::new(SigningAlgorithm::AesCmac, &[7; 16]);
    for reqs in [vec![write], path] {
        let before: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload().to_vec()).collect();
        let mut a = core();
        a.release(10, no_waiters);
        let charges = vec![1; reqs.len()];
        let issued = send(&mut a, &charges, 0, None);
        let hs = outbound::headers(&reqs, &charges, issued, Dialect::SMB3_1_1, 5);
        let (first, kept) = outbound::frame(
            reqs,
            &hs,
            Some(&signer),
            false,
            true,
            true,
            Vec::with_capacity,
        );
        let ids: Vec<u64> = hs.iter().map(|h| h.message_id).collect();
        assert!(a.retain(&ids, kept.unwrap()).is_none());
        let (lost, _) = a.close(DisconnectReason::ClosedByServer);
        let mut again: Vec<Request> = lost.into_iter().map(|f| f.request.unwrap()).collect();
        let after: Vec<Vec<u8>> = again.iter().map(|r| r.payload().to_vec()).collect();
        assert_eq!(before, after);
        // Framed again on another channel, as a replay.
        for r in again.iter_mut() {
            r.replay = true;
            r.channel_sequence = 1;
        }
        let mut b = core();
        b.release(100, no_waiters);
        send(&mut b, &[1], 0, None);
        let issued = send(&mut b, &charges, 0, None);
        let hs2 = outbound::headers(&again, &charges, issued, Dialect::SMB3_1_1, 5);
        let (second, _) = outbound::frame(
            again,
            &hs2,
            Some(&signer),
            false,
            true,
            false,
            Vec::with_capacity,
        );
        let one = &first.buf[first.start..];
        let two = &second.buf[second.start..];
        assert_eq!(one.len(), two.len());
        let mut at = 0;
        while at < one.len() {
            let h1 = Header::decode(&one[at..]).unwrap();
            let h2 = Header::decode(&two[at..]).unwrap();
            assert!(signer.verify(&two[at..at + member_len(&h2, two.len() - at)]));
            assert_eq!(h1.flags & FLAGS_REPLAY_OPERATION, 0);
            assert_ne!(h2.flags & FLAGS_REPLAY_OPERATION, 0);
            assert_eq!(h2.status.0, 1, "ChannelSequence");
            assert_eq!(h2.message_id, h1.message_id + 1);
            let end = at + member_len(&h1, one.len() - at);
            // Everything after the header is the same.
            assert_eq!(one[at + HEADER_SIZE..end], two[at + HEADER_SIZE..end]);
            at = end;
        }
    }
}

/// A WRITE whose data is shared: framed alone, unsigned and unsealed over a link
/// that sends tails, the data stays the frame's tail (the same memory, not copied)
/// and frame plus tail are the bytes of the request built with its data inline;
/// signed, sealed (room for the TRANSFORM_HEADER), compounded, without tails or
/// retained, the wire bytes are the same (signed over all of them) and a retained
/// request keeps its data for a replay.
#[test]
fn shared_write_data_is_sent_as_the_tail_or_joined() {
    use bytes::Bytes;
    use smbx_wire::rw::WriteRequest;
    let pool = smbx_transport::BufPool::new(2);
    let data = Bytes::from((0..300_000u32).map(|i| (i * 7) as u8).collect::<Vec<u8>>());
    let fields = WriteRequest {
        offset: 4096,
        length: data.len() as u32,
        ..Default::default()
    };
    let shared = || {
        let mut w = body_writer(&pool, 48);
        fields.encode_head_into(&mut w, data.len() as u32);
        let mut r = Request::with_headroom(Command::Write, w, 3);
        r.data = Some(data.clone());
        r
    };
    let inline = || {
        let mut w = body_writer(&pool, 48 + data.len());
        WriteRequest {
            data: &data,
            ..fields
        }
        .encode_into(&mut w);
        Request::with_headroom(Command::Write, w, 3)
    };
    let signer = Signer::new(SigningAlgorithm::AesCmac, &[7; 16]);
    let wire = |reqs: Vec<Request>, signer: Option<&Signer>, sealed, tails, retain| {
        let charges = vec![1; reqs.len()];
        let issued = Issued {
            first_id: 9,
            ask: 1,
        };
        let hs = outbound::headers(&reqs, &charges, issued, Dialect::SMB3_1_1, 5);
        let (f, kept) =
            outbound::frame(reqs, &hs, signer, sealed, tails, retain, Vec::with_capacity);
        let mut bytes = f.buf[f.msg_start..].to_vec();
        let tail = f.tail.clone();
        if let Some(t) = &f.tail {
            bytes.extend_from_slice(t);
        }
        (bytes, tail, kept, f.msg_start - f.start)
    };
    // In the caller's memory, as the frame's tail.
    let (want, none, _, _) = wire(vec![inline()], None, false, true, false);
    assert!(none.is_none());
    let (got, tail, _, room) = wire(vec![shared()], None, false, true, false);
    assert_eq!(room, 0);
    let tail = tail.expect("the data is the tail");
    assert_eq!(tail.as_ptr(), data.as_ptr(), "not copied");
    assert!(got == want);
    // Retained: the same tail, and the request keeps its data.
    let (got, tail, kept, _) = wire(vec![shared()], None, false, true, true);
    assert!(got == want && tail.is_some());
    let kept = kept.unwrap();
    assert_eq!(kept[0].data.as_deref(), Some(&data[..]));
    assert_eq!(kept[0].wire_len(), 48 + data.len());
    // A link without tails: joined.
    let (got, tail, _, _) = wire(vec![shared()], None, false, false, false);
    assert!(got == want && tail.is_none());
    // Signed over header, fields and data; retained or not.
    for retain in [false, true] {
        let (want, _, _, _) = wire(vec![inline()], Some(&signer), false, true, retain);
        let (got, tail, kept, _) = wire(vec![shared()], Some(&signer), false, true, retain);
        assert!(tail.is_none());
        assert!(got == want);
        assert!(signer.verify(&got));
        assert_eq!(kept.is_some(), retain);
        if let Some(k) = kept {
            assert_eq!(k[0].data.as_deref(), Some(&data[..]));
        }
    }
    // Sealed: joined behind room for the TRANSFORM_HEADER.
    let (want, _, _, want_room) = wire(vec![inline()], None, true, true, false);
    let (got, tail, _, room) = wire(vec![shared()], None, true, true, false);
    assert!(tail.is_none() && got == want);
    assert_eq!(
        (room, want_room),
        (TRANSFORM_HEADER_LEN, TRANSFORM_HEADER_LEN)
    );
    // In a compound: chained with its data.
    let flush = || Request::new(Command::Flush, vec![4; 24], 3);
    let (want, _, _, _) = wire(vec![inline(), flush()], None, false, true, false);
    let (got, tail, _, _) = wire(vec![shared(), flush()], None, false, true, false);
    assert!(tail.is_none() && got == want);
}

fn member_len(h: &Header, rest: usize) -> usize {
    if h.next_command == 0 {
        rest
    } else {
        h.next_command as usize
    }
}

#[test]
fn cancel_frames() {
    let c = outbound::Cancel {
        message_id: 4,
        async_id: Some(77),
        session_id: 9,
        tree_id: 3,
    };
    let (buf, start) = outbound::cancel_frame(c, None, false, false).unwrap();
    let h = Header::decode(&buf[start..]).unwrap();
    assert_eq!(h.command, Command::Cancel as u16);
    assert!(h.is_async());
    assert_eq!(
        (h.message_id, h.async_id, h.credit_charge, h.credits),
        (4, 77, 0, 0)
    );
    // Must be sealed but cannot: not sent.
    assert!(outbound::cancel_frame(c, None, true, false).is_none());
    let keys = Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &[3; 16]));
    let (buf, start) = outbound::cancel_frame(c, Some(&keys), false, true).unwrap();
    assert!(keys.verify(&buf[start..]));
}

/// Frames of every shape through open, split and verify: errors, never panics; and a
/// compound's members are matched one by one.
#[test]
fn hostile_frames_and_compounds() {
    let sec = SessionSecurity {
        keys: Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &[1; 16])),
        sign: true,
        ..SessionSecurity::default()
    };
    let mut base = Writer::new();
    Header {
        session_id: 5,
        flags: FLAGS_SERVER_TO_REDIR,
        credits: 1,
        ..Default::default()
    }
    .encode(&mut base);
    base.bytes(&encode_simple());
    let base = base.into_vec();
    let shared = std::sync::Arc::new(SessionSecurity {
        keys: Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &[1; 16])),
        sign: true,
        ..SessionSecurity::default()
    });
    let mut c = core();
    for (i, f) in hostile_variants(&base, 20_000).enumerate() {
        // Every other one past an SMB Direct header left in its buffer.
        let f = match i % 2 {
            0 => InMessage::from(f),
            _ => InMessage::at([vec![0xEE; 24], f].concat(), 24).unwrap(),
        };
        let Ok(o) = inbound::open(f, |_| Some(shared.clone()), Vec::with_capacity, drop) else {
            continue;
        };
        let _ = inbound::split(o.msg, |h, mut m| {
            let ok = inbound::verify(&h, &mut m, false, Some(&sec)).is_ok();
            c.on_response(&h, ok, |_| true);
        });
        assert!(c.credits() <= MAX_HELD as usize);
    }
    // A chain of two: each member matched to its request.
    let mut c = core();
    c.release(4, no_waiters);
    send(&mut c, &[1, 1], 40, None);
    let mut chain = Vec::new();
    for id in 0..2u64 {
        let at = chain.len();
        let mut w = Writer::new();
        reply(id, NtStatus::SUCCESS, 1, 0).encode(&mut w);
        w.bytes(&encode_simple());
        chain.extend_from_slice(w.as_slice());
        if id == 0 {
            chain.resize(chain.len().next_multiple_of(8), 0);
            let next = (chain.len() - at) as u32;
            chain[at + 20..at + 24].copy_from_slice(&next.to_le_bytes());
        }
    }
    let mut done = Vec::new();
    inbound::split(chain.into(), |h, _| {
        if let Matched::Done { token, .. } = c.on_response(&h, true, no_waiters) {
            done.push(token);
        }
    })
    .unwrap();
    assert_eq!(done, [40, 41]);
    // A session that signs refuses an unsigned member.
    let h = reply(0, NtStatus::SUCCESS, 1, 0);
    let h = Header { session_id: 5, ..h };
    assert!(inbound::verify(&h, &mut base.clone(), false, Some(&sec)).is_err());
    let _ = HEADROOM;
}

/// `n` hostile variants of the response frame `base`, the same sequence every run: a few
/// bytes overwritten, and in turn truncated, extended, given the TRANSFORM magic, or given
/// a NextCommand pointing anywhere. Shared with conn.rs's driver test.
pub(crate) fn hostile_variants(base: &[u8], n: u32) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n).map(move |i| {
        let mut f = base.to_vec();
        for _ in 0..1 + rnd() % 6 {
            let pos = (rnd() as usize) % f.len();
            f[pos] = rnd() as u8;
        }
        match i % 5 {
            0 => f.truncate((rnd() as usize) % f.len()),
            1 => f.extend((0..rnd() % 200).map(|_| rnd() as u8)),
            2 => f[..4].copy_from_slice(&smbx_wire::header::TRANSFORM_PROTOCOL_ID),
            _ => {}
        }
        // Chains: NextCommand pointing anywhere.
        if i % 7 == 0 && f.len() >= 24 {
            let next = (rnd() % 256) as u32;
            f[20..24].copy_from_slice(&next.to_le_bytes());
        }
        f
    })
}

/// A WRITE of a power of two built in place (headroom, header, fields, data) is in a
/// pooled buffer of its data's class, not the next one: 64 KiB and 512 KiB WRITEs.
#[test]
fn power_of_two_writes_are_built_in_their_own_class() {
    use smbx_wire::rw::WriteRequest;
    let pool = smbx_transport::BufPool::new(2);
    for len in [64 << 10, 512 << 10] {
        let data = vec![7u8; len];
        let mut w = body_writer(&pool, 48 + len);
        WriteRequest {
            offset: 4096,
            data: &data,
            ..Default::default()
        }
        .encode_into(&mut w);
        let buf = w.into_vec();
        assert_eq!(buf.len(), HEADROOM + 48 + len);
        assert_eq!(buf.capacity(), len + smbx_transport::BufPool::HEADROOM);
    }
}
