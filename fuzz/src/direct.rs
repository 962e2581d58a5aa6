//! SMB Direct targets (`smbx-direct`): the [MS-SMBD] PDU decoders, and the
//! sans-IO [`Connection`] state machine fed a script of received messages,
//! upper-layer sends and clock ticks.

use std::time::{Duration, Instant};

use smbx_direct::pdu::{
    BufferDescriptorV1, DataHeader, NegotiateRequest, NegotiateResponse, DATA_HEADER_MIN_LEN,
    MIN_FRAGMENTED_SIZE, NEGOTIATE_REQUEST_LEN, NEGOTIATE_RESPONSE_LEN, SMBD_VERSION,
};
use smbx_direct::{Config, Connection, Event, Role};

/// Negotiate Request/Response, Data Transfer header and Buffer Descriptor V1
/// lists: decoding, the checks each decoder promises, and re-encoding.
pub fn direct_pdu(data: &[u8]) {
    if let Ok(r) = NegotiateRequest::parse(data) {
        assert_eq!(NegotiateRequest::parse(&r.encode()), Ok(r));
        if let Ok(d) = NegotiateRequest::decode(data) {
            assert_eq!(d, r);
            assert!(d.min_version <= SMBD_VERSION && d.max_version >= SMBD_VERSION);
            assert!(d.credits_requested != 0);
            assert!(d.max_fragmented_size >= MIN_FRAGMENTED_SIZE);
        }
    } else {
        assert!(data.len() < NEGOTIATE_REQUEST_LEN);
    }
    if let Ok(r) = NegotiateResponse::parse(data) {
        assert_eq!(NegotiateResponse::parse(&r.encode()), Ok(r));
        if let Ok(d) = NegotiateResponse::decode(data) {
            assert_eq!(d, r);
            assert_eq!(d.negotiated_version, SMBD_VERSION);
            assert!(d.credits_granted != 0 && d.credits_requested != 0);
        }
    } else {
        assert!(data.len() < NEGOTIATE_RESPONSE_LEN);
    }
    for max in [0, 1, MIN_FRAGMENTED_SIZE, 1 << 20, u32::MAX] {
        let Ok((h, payload)) = DataHeader::decode(data, max) else {
            continue;
        };
        assert!(data.len() >= DATA_HEADER_MIN_LEN);
        assert_eq!(payload.len(), h.data_length as usize);
        assert!(u64::from(h.remaining_data_length) + u64::from(h.data_length) <= u64::from(max));
        if !payload.is_empty() {
            let off = h.data_offset as usize;
            assert!(off >= DATA_HEADER_MIN_LEN && off.is_multiple_of(8));
            assert_eq!(&data[off..off + payload.len()], payload);
        }
        // What we would send for this header decodes to the same fields.
        let again = h.encode_message(payload);
        let (h2, p2) = DataHeader::decode(&again, max).expect("re-encoded message decodes");
        assert_eq!(p2, payload);
        assert_eq!(
            (h2.credits_requested, h2.credits_granted, h2.flags),
            (h.credits_requested, h.credits_granted, h.flags)
        );
        assert_eq!(
            (h2.remaining_data_length, h2.data_length),
            (h.remaining_data_length, h.data_length)
        );
        // A READ/WRITE channel info may follow the SMB2 header in the payload.
        descriptors(payload);
    }
    descriptors(data);
}

fn descriptors(data: &[u8]) {
    if let Ok(list) = BufferDescriptorV1::decode_list(data) {
        assert_eq!(list.len() * 16, data.len());
        assert_eq!(BufferDescriptorV1::encode_list(&list), data);
        let _ = BufferDescriptorV1::total_length(&list);
    }
}

/// Script opcodes of [`direct_connection`] (low two bits of an op byte).
pub mod script {
    /// `[op][len u16 LE][len bytes]`: a receive completion with those bytes.
    pub const RECEIVE: u8 = 0;
    /// `[op][len u16 LE]`: the upper layer sends a message of `len` bytes;
    /// bit 2 of the op asks for Send with Invalidate.
    pub const SEND: u8 = 1;
    /// `[op][secs]`: the clock advances by `secs` seconds; due timers fire.
    pub const TICK: u8 = 2;
    /// `[op]`: the upper layer closes the connection.
    pub const CLOSE: u8 = 3;
}

/// The configuration a script's first byte selects (bits 1..3): Windows'
/// defaults, or small sizes and credit windows that make every message
/// fragment and every credit count.
pub fn direct_config(selector: u8) -> Config {
    let mut c = Config::default();
    match (selector >> 1) & 3 {
        0 => {}
        1 => {
            c.max_send_size = 128;
            c.max_receive_size = 128;
            c.max_fragmented_size = MIN_FRAGMENTED_SIZE;
        }
        2 => {
            c.receive_credit_max = 2;
            c.send_credit_target = 2;
            c.max_send_size = 256;
        }
        _ => {
            c.receive_credit_max = 1;
            c.send_credit_target = 1;
            c.max_receive_size = 1024;
        }
    }
    c.validate().expect("fuzz configuration is valid");
    c
}

/// Most messages without payload (credit grants, keepalives and their
/// answers) one step may produce; more is a connection talking without bound.
const MAX_EMPTY_PER_STEP: usize = 4;

/// The SMB Direct connection state machine, as server (first byte even) or
/// client (odd), driven by a script of received messages, upper-layer sends,
/// clock ticks and closes ([`script`]). Checks: no panic, every message it
/// sends fits the negotiated send size, what it grants is posted, message
/// events stay within the negotiated maximum, nothing follows a disconnect,
/// and each step's output is bounded.
pub fn direct_connection(data: &[u8]) {
    let _ = run_script(data);
}

/// Runs a [`direct_connection`] script; returns the connection's counters
/// and whether it negotiated (None for an empty input).
pub fn run_script(data: &[u8]) -> Option<(smbx_direct::Stats, bool)> {
    let (&sel, mut rest) = data.split_first()?;
    let role = if sel & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let config = direct_config(sel);
    let mut now = Instant::now();
    let mut c = match role {
        Role::Server => Connection::server(config.clone(), now),
        Role::Client => Connection::client(config.clone(), now),
    };
    let mut h = Harness::default();
    h.drain(&mut c, &config);
    let mut steps = 0;
    while let Some((&op, r)) = rest.split_first() {
        rest = r;
        steps += 1;
        if steps > 10_000 {
            break;
        }
        match op & 3 {
            script::RECEIVE => {
                let (len, r) = take_u16(rest);
                let n = usize::from(len).min(r.len());
                c.handle_receive(&r[..n], now);
                rest = &r[n..];
            }
            script::SEND => {
                let (len, r) = take_u16(rest);
                rest = r;
                let msg: Vec<u8> = (0..usize::from(len)).map(|i| i as u8).collect();
                let res = if op & 4 != 0 {
                    c.send_message_with_invalidate(&msg, 0x1234_5678)
                } else {
                    c.send_message(&msg)
                };
                if res.is_ok() {
                    h.queued_bytes += msg.len();
                }
            }
            script::TICK => {
                let secs = rest.first().copied().unwrap_or(1);
                rest = rest.get(1..).unwrap_or(&[]);
                now += Duration::from_secs(u64::from(secs));
                if c.poll_timeout().is_some_and(|t| now >= t) {
                    c.handle_timeout(now);
                }
            }
            _ => c.close(),
        }
        h.drain(&mut c, &config);
    }
    Some((c.stats(), h.negotiated))
}

fn take_u16(b: &[u8]) -> (u16, &[u8]) {
    match b {
        [a, b2, rest @ ..] => (u16::from_le_bytes([*a, *b2]), rest),
        [a] => (u16::from(*a), &[]),
        [] => (0, &[]),
    }
}

#[derive(Default)]
struct Harness {
    negotiated: bool,
    disconnected: bool,
    queued_bytes: usize,
}

impl Harness {
    /// Takes everything the connection has to say, checking it.
    fn drain(&mut self, c: &mut Connection, config: &Config) {
        let _ = c.poll_post_receives();
        let mut empty = 0;
        while let Some(m) = c.poll_transmit() {
            if m.needs_credit {
                let p = *c.params().expect("data messages only once negotiated");
                assert!(!self.disconnected, "data message after the disconnect");
                assert!(
                    m.bytes.len() <= p.max_send_size as usize,
                    "sent {} bytes, send size {}",
                    m.bytes.len(),
                    p.max_send_size
                );
                let (h, payload) = DataHeader::decode(&m.bytes, u32::MAX)
                    .expect("our own Data Transfer message decodes");
                // Fragments carry only what the upper layer queued; messages
                // without payload (grants, keepalives, their answers) are few.
                assert!(
                    payload.len() <= self.queued_bytes,
                    "sent more than was queued"
                );
                self.queued_bytes -= payload.len();
                if payload.is_empty() {
                    empty += 1;
                    assert!(empty <= MAX_EMPTY_PER_STEP, "unbounded empty messages");
                }
                let _ = h;
            } else {
                assert!(
                    m.bytes.len() == NEGOTIATE_REQUEST_LEN
                        || m.bytes.len() == NEGOTIATE_RESPONSE_LEN
                );
            }
            assert!(
                c.granted_credits() <= c.posted_receives(),
                "granted {} with {} posted",
                c.granted_credits(),
                c.posted_receives()
            );
            assert!(c.posted_receives() <= u32::from(config.receive_credit_max.max(1)));
        }
        let mut events = 0;
        while let Some(ev) = c.poll_event() {
            events += 1;
            assert!(events <= 4, "unbounded events");
            assert!(!self.disconnected, "event after the disconnect: {ev:?}");
            match ev {
                Event::Negotiated(p) => {
                    self.negotiated = true;
                    assert!(p.max_send_size >= 128 && p.max_receive_size >= 128);
                    assert!(p.max_receive_size <= config.max_receive_size);
                }
                Event::Message(m) => {
                    let max = c.params().map_or(0, |p| p.max_fragmented_receive_size);
                    assert!(!m.is_empty() && m.len() <= max as usize);
                }
                Event::Disconnect(_) => {
                    self.disconnected = true;
                    assert!(c.is_closed());
                }
            }
        }
    }
}
