//! A deterministic harness wiring two sans-IO endpoints back to back.
//!
//! It plays the RDMA provider: it keeps its own count of posted receives per
//! side (a message arriving with none posted would be an RNR error on real
//! hardware) and its own view of each side's send credits, computed only
//! from the bytes on the wire.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use smbx_direct::{Config, Connection, DataHeader, Event, NegotiateResponse};

/// One endpoint plus what the harness observed of it.
pub struct Side {
    pub conn: Connection,
    /// Receives the adapter posted and the peer's messages did not consume.
    pub posted: i64,
    /// Credits this side holds according to the wire.
    pub wire_credits: i64,
    /// Messages in flight towards this side.
    pub inbox: VecDeque<Vec<u8>>,
    pub delivered: Vec<Vec<u8>>,
    pub disconnect: Option<smbx_direct::DisconnectReason>,
    pub negotiated: bool,
    pub transmitted: u64,
    pub empty_transmitted: u64,
}

impl Side {
    fn new(conn: Connection) -> Self {
        Side {
            conn,
            posted: 0,
            wire_credits: 0,
            inbox: VecDeque::new(),
            delivered: Vec::new(),
            disconnect: None,
            negotiated: false,
            transmitted: 0,
            empty_transmitted: 0,
        }
    }
}

pub struct Pair {
    pub client: Side,
    pub server: Side,
    pub now: Instant,
}

impl Pair {
    pub fn new(client_cfg: Config, server_cfg: Config) -> Self {
        let now = Instant::now();
        Pair {
            client: Side::new(Connection::client(client_cfg, now)),
            server: Side::new(Connection::server(server_cfg, now)),
            now,
        }
    }

    /// A negotiated pair with default configurations.
    pub fn negotiated() -> Self {
        Pair::negotiated_with(Config::default())
    }

    /// A negotiated pair whose two ends both use `cfg`.
    pub fn negotiated_with(cfg: Config) -> Self {
        let mut p = Pair::new(cfg.clone(), cfg);
        p.run(10);
        assert!(p.client.negotiated && p.server.negotiated);
        p
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        let now = self.now;
        self.client.conn.handle_timeout(now);
        self.server.conn.handle_timeout(now);
    }

    /// Moves everything side `from` wants to send into the other's inbox.
    /// Returns the number of messages.
    pub fn transmit(&mut self, from_client: bool) -> usize {
        let (from, to) = if from_client {
            (&mut self.client, &mut self.server)
        } else {
            (&mut self.server, &mut self.client)
        };
        let mut n = 0;
        from.posted += i64::from(from.conn.poll_post_receives());
        while let Some(m) = from.conn.poll_transmit() {
            from.posted += i64::from(m.post_receives);
            if m.needs_credit {
                if from.wire_credits == 1 {
                    let (h, _) = DataHeader::decode(&m.bytes, u32::MAX).unwrap();
                    assert!(h.credits_granted >= 1, "last credit spent without a grant");
                }
                from.wire_credits -= 1;
                assert!(from.wire_credits >= 0, "sent without a credit");
                from.transmitted += 1;
                if m.bytes.len() == 20 {
                    from.empty_transmitted += 1;
                }
            }
            to.inbox.push_back(m.bytes);
            n += 1;
        }
        n
    }

    /// Delivers every message in flight towards one side.
    pub fn deliver(&mut self, to_client: bool) -> usize {
        let now = self.now;
        let to = if to_client {
            &mut self.client
        } else {
            &mut self.server
        };
        let mut n = 0;
        while let Some(bytes) = to.inbox.pop_front() {
            assert!(
                to.posted > 0,
                "message arrived with no receive posted (RNR)"
            );
            to.posted -= 1;
            if to.negotiated {
                if let Ok((h, _)) = DataHeader::decode(&bytes, u32::MAX) {
                    to.wire_credits += i64::from(h.credits_granted);
                }
            } else if to_client {
                if let Ok(r) = NegotiateResponse::parse(&bytes) {
                    to.wire_credits = i64::from(r.credits_granted);
                }
            }
            to.conn.handle_receive(&bytes, now);
            n += 1;
            Self::drain_events(to);
        }
        n
    }

    fn drain_events(side: &mut Side) {
        while let Some(ev) = side.conn.poll_event() {
            match ev {
                Event::Negotiated(_) => side.negotiated = true,
                Event::Message(m) => side.delivered.push(m.into_vec()),
                Event::Disconnect(r) => {
                    assert!(side.disconnect.is_none(), "two disconnects");
                    side.disconnect = Some(r);
                }
            }
        }
    }

    /// Transmits and delivers in both directions until nothing moves or
    /// `max_rounds` pass; returns the rounds used.
    pub fn run(&mut self, max_rounds: usize) -> usize {
        for round in 0..max_rounds {
            let moved = self.transmit(true) + self.transmit(false);
            let got = self.deliver(false) + self.deliver(true);
            Self::drain_events(&mut self.client);
            Self::drain_events(&mut self.server);
            if moved == 0 && got == 0 {
                return round;
            }
        }
        max_rounds
    }
}

/// Bytes that differ from `seed` to `seed` and along a message (no short
/// period), so a misplaced or swapped fragment shows.
pub fn pattern(seed: u32, n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 11) as u8)
        .collect()
}
