//! Hostile input: random and mutated messages never panic the decoders or
//! the connection, and anything malformed ends the connection cleanly.

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smbx_direct::pdu::SMBD_VERSION;
use smbx_direct::{
    BufferDescriptorV1, Config, Connection, DataHeader, Event, NegotiateRequest, NegotiateResponse,
};

fn mutate(rng: &mut StdRng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    match rng.gen_range(0..4) {
        0 => v.truncate(rng.gen_range(0..=v.len())),
        1 => {
            for _ in 0..rng.gen_range(1..4) {
                if !v.is_empty() {
                    let i = rng.gen_range(0..v.len());
                    v[i] = rng.gen();
                }
            }
        }
        2 => {
            // A u32 field set to an extreme value.
            if v.len() >= 24 {
                let i = rng.gen_range(0..6) * 4;
                let x: u32 = [0, 1, 7, u32::MAX, u32::MAX - 23, 1 << 20][rng.gen_range(0..6)];
                v[i..i + 4].copy_from_slice(&x.to_le_bytes());
            }
        }
        _ => {
            let n = rng.gen_range(0..64);
            v.extend((0..n).map(|_| rng.gen::<u8>()));
        }
    }
    v
}

#[test]
fn decoders_survive_random_input() {
    let mut rng = StdRng::seed_from_u64(5);
    let req = NegotiateRequest {
        min_version: SMBD_VERSION,
        max_version: SMBD_VERSION,
        credits_requested: 255,
        preferred_send_size: 1364,
        max_receive_size: 8192,
        max_fragmented_size: 1 << 20,
    }
    .encode();
    let data = DataHeader {
        credits_requested: 255,
        credits_granted: 1,
        remaining_data_length: 10,
        ..DataHeader::default()
    }
    .encode_message(b"payload!");
    for _ in 0..20_000 {
        let b = mutate(&mut rng, &req);
        let _ = NegotiateRequest::decode(&b);
        let _ = NegotiateResponse::decode(&b);
        let b = mutate(&mut rng, &data);
        if let Ok((h, p)) = DataHeader::decode(&b, 1 << 20) {
            assert_eq!(p.len(), h.data_length as usize);
            assert!(u64::from(h.remaining_data_length) + p.len() as u64 <= 1 << 20);
        }
        let _ = BufferDescriptorV1::decode_list(&b);
    }
}

#[test]
fn connection_survives_random_messages() {
    let mut rng = StdRng::seed_from_u64(6);
    let base = DataHeader {
        credits_requested: 255,
        credits_granted: 1,
        remaining_data_length: 0,
        ..DataHeader::default()
    }
    .encode_message(&[0xab; 100]);
    let mut disconnects = 0;
    for _ in 0..500 {
        let now = Instant::now();
        let mut s = Connection::server(Config::default(), now);
        s.poll_post_receives();
        let req = NegotiateRequest {
            min_version: SMBD_VERSION,
            max_version: SMBD_VERSION,
            credits_requested: 255,
            preferred_send_size: 1364,
            max_receive_size: 1364,
            max_fragmented_size: 1 << 20,
        };
        s.handle_receive(&req.encode(), now);
        while s.poll_transmit().is_some() {}
        for _ in 0..50 {
            let b = mutate(&mut rng, &base);
            s.handle_receive(&b, now);
            while s.poll_transmit().is_some() {}
        }
        let evs: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
        let n = evs
            .iter()
            .filter(|e| matches!(e, Event::Disconnect(_)))
            .count();
        assert!(n <= 1);
        if n == 1 {
            assert!(
                matches!(evs.last(), Some(Event::Disconnect(_))),
                "nothing after disconnect"
            );
            assert!(s.is_closed());
            disconnects += 1;
        }
    }
    assert!(disconnects > 0);
}
