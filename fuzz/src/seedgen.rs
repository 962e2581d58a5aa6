//! Seeds for the SMB Direct and iWARP engine targets, made by the crates'
//! own encoders and state machines: a real peer is run against the side
//! under test and everything that side receives is recorded.
//! `SMBX_FUZZ_WRITE_SEEDS=1 cargo test --release --test seeds` writes them
//! to `corpus/<target>/gen-*`.

use std::time::{Duration, Instant};

use smbx_direct::pdu::{
    BufferDescriptorV1, DataHeader, NegotiateRequest, NegotiateResponse, FLAG_RESPONSE_REQUESTED,
};
use smbx_direct::{Config, Connection, Event};
use smbx_rdma::iwarp::SansIoConn;
use smbx_rdma::{MemoryRegion, QpCaps, QueuePair, RemoteBuf, SendOp, SendWr, Sge};

use crate::direct::{direct_config, script};
use crate::iwarp_engine::{conn_params, options, selector, setup, Setup, MSS};

/// One generated seed: target, file name, bytes.
pub struct Seed {
    /// Target name.
    pub target: &'static str,
    /// File name in `corpus/<target>/`.
    pub name: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// Every generated seed.
pub fn all() -> Vec<Seed> {
    let mut v = Vec::new();
    direct_pdus(&mut v);
    for sel in [0u8, 1, 2, 3, 4, 5, 6, 7] {
        v.push(Seed {
            target: "direct_connection",
            name: format!("gen-sel{sel}"),
            bytes: direct_script(sel),
        });
    }
    // Responder and initiator; CRC or not; revision 1; each RTR; cut in
    // pieces (bits 5-7). A responder expecting an RTR gets its stream in
    // pieces, so that it answers the RTR before our Read Response arrives.
    for sel in [
        selector(false, true, false, 0, 0),
        selector(true, false, false, 0, 0),
        selector(false, true, true, 0, 1),
        selector(true, false, true, 0, 2),
        selector(false, true, false, 1, 1),
        selector(true, true, false, 1, 3),
        selector(false, true, false, 2, 2),
        selector(true, false, false, 2, 4),
        selector(false, true, false, 3, 3),
        selector(true, true, false, 3, 0),
    ] {
        v.push(Seed {
            target: "iwarp_engine",
            name: format!("gen-sel{sel:02x}"),
            bytes: iwarp_stream(sel),
        });
    }
    v
}

fn direct_pdus(v: &mut Vec<Seed>) {
    let c = Config::default();
    let req = NegotiateRequest {
        min_version: 0x0100,
        max_version: 0x0100,
        credits_requested: c.send_credit_target,
        preferred_send_size: c.max_send_size,
        max_receive_size: c.max_receive_size,
        max_fragmented_size: c.max_fragmented_size,
    };
    let rsp = NegotiateResponse {
        min_version: 0x0100,
        max_version: 0x0100,
        negotiated_version: 0x0100,
        credits_requested: 255,
        credits_granted: 255,
        status: smbx_wire::NtStatus::SUCCESS,
        max_read_write_size: c.max_read_write_size,
        preferred_send_size: c.max_send_size,
        max_receive_size: c.max_receive_size,
        max_fragmented_size: c.max_fragmented_size,
    };
    let descs = [
        BufferDescriptorV1 {
            offset: 0x1_0000_1000,
            token: 0x0000_0101,
            length: 65536,
        },
        BufferDescriptorV1 {
            offset: 0x2_0000_1000,
            token: 0x0000_029F,
            length: 4096,
        },
    ];
    let data = |credits_granted, flags, remaining, payload: &[u8]| {
        DataHeader {
            credits_requested: 255,
            credits_granted,
            flags,
            remaining_data_length: remaining,
            ..DataHeader::default()
        }
        .encode_message(payload)
    };
    let smb2ish: Vec<u8> = b"\xFESMB".iter().copied().chain(0..60).collect();
    let mut with_descs = smb2ish.clone();
    with_descs.extend(BufferDescriptorV1::encode_list(&descs));
    let items: Vec<(&str, Vec<u8>)> = vec![
        ("negotiate-request", req.encode().to_vec()),
        ("negotiate-response", rsp.encode().to_vec()),
        (
            "negotiate-not-supported",
            NegotiateResponse::not_supported().encode().to_vec(),
        ),
        ("data-empty-grant", data(10, 0, 0, &[])),
        ("data-keepalive", data(0, FLAG_RESPONSE_REQUESTED, 0, &[])),
        ("data-message", data(1, 0, 0, &smb2ish)),
        ("data-first-fragment", data(1, 0, 4000, &smb2ish)),
        ("data-with-descriptors", data(1, 0, 0, &with_descs)),
        ("descriptors", BufferDescriptorV1::encode_list(&descs)),
    ];
    for (name, bytes) in items {
        v.push(Seed {
            target: "direct_pdu",
            name: format!("gen-{name}"),
            bytes,
        });
    }
}

/// A [`crate::direct::direct_connection`] script: the side selected by
/// `sel` negotiates with a real peer, both send messages (fragmented under
/// the small configurations), the clock runs past the keepalive interval,
/// then the side under test closes.
pub fn direct_script(sel: u8) -> Vec<u8> {
    let config = direct_config(sel);
    let mut now = Instant::now();
    let (mut me, mut peer) = if sel & 1 == 0 {
        (
            Connection::server(config.clone(), now),
            Connection::client(config, now),
        )
    } else {
        (
            Connection::client(config.clone(), now),
            Connection::server(config, now),
        )
    };
    let mut s = vec![sel];
    let received = |s: &mut Vec<u8>, bytes: &[u8]| {
        s.push(script::RECEIVE);
        s.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        s.extend_from_slice(bytes);
    };
    let shuttle = |me: &mut Connection, peer: &mut Connection, s: &mut Vec<u8>, now: Instant| {
        for _ in 0..64 {
            let mut moved = false;
            me.poll_post_receives();
            peer.poll_post_receives();
            while let Some(m) = me.poll_transmit() {
                peer.handle_receive(&m.bytes, now);
                moved = true;
            }
            while let Some(m) = peer.poll_transmit() {
                received(s, &m.bytes);
                me.handle_receive(&m.bytes, now);
                moved = true;
            }
            while let Some(e) = me.poll_event() {
                assert!(!matches!(e, Event::Disconnect(_)), "seed run broke: {e:?}");
            }
            while peer.poll_event().is_some() {}
            if !moved {
                break;
            }
        }
    };
    shuttle(&mut me, &mut peer, &mut s, now);
    for (len, mine) in [(300u16, true), (2000, false), (40, true)] {
        let msg: Vec<u8> = (0..usize::from(len)).map(|i| i as u8).collect();
        if mine {
            me.send_message(&msg).expect("send");
            s.push(script::SEND);
            s.extend_from_slice(&len.to_le_bytes());
        } else {
            peer.send_message(&msg).expect("send");
        }
        shuttle(&mut me, &mut peer, &mut s, now);
    }
    // Past the keepalive interval: a keepalive goes out and is answered.
    now += Duration::from_secs(121);
    me.handle_timeout(now);
    s.extend_from_slice(&[script::TICK, 121]);
    shuttle(&mut me, &mut peer, &mut s, now);
    s.push(script::CLOSE);
    s
}

/// An [`crate::iwarp_engine::iwarp_engine`] input: the side selected by
/// `sel` is connected to a peer set up the same way that also RDMA-Writes
/// into it; the MPA message and every FPDU it receives are recorded.
pub fn iwarp_stream(sel: u8) -> Vec<u8> {
    let (initiator, opts) = options(sel);
    let request = {
        let pd = smbx_rdma::iwarp::SoftPd::seeded(crate::iwarp_engine::PD_SEED);
        SansIoConn::connect(&pd, QpCaps::default(), &opts, &conn_params(), MSS).1
    };
    let responder = setup(false, &opts, &request).expect("responder setup");
    let initiator_side = setup(true, &opts, &responder.sent).expect("initiator setup");
    let (mut me, mut peer, mpa): (Setup, Setup, Vec<u8>) = if initiator {
        let reply = responder.sent.clone();
        (initiator_side, responder, reply)
    } else {
        (responder, initiator_side, request)
    };
    // The peer also writes into our writable region (same STag as its own).
    let w = &peer.regions.writable;
    let src = &peer.regions.send_src;
    peer.conn
        .qp()
        .post_send(&SendWr {
            wr_id: 200,
            op: SendOp::RdmaWrite {
                remote: RemoteBuf {
                    stag: w.stag(),
                    to: w.addr() + 8,
                    len: src.len() as u32,
                },
            },
            sg: &[Sge::new(src, 0, src.len() as u32)],
            solicited: false,
        })
        .expect("post write");
    let mut to_me: Vec<u8> = Vec::new();
    let mut to_peer: Vec<u8> = Vec::new();
    let (mut read_me, mut read_peer) = (0, 0);
    for _ in 0..16 {
        peer.conn.pump_tx(&mut to_me, 1 << 16);
        me.conn.pump_tx(&mut to_peer, 1 << 16);
        read_me += me.conn.on_input(&to_me[read_me..], &mut to_peer);
        read_peer += peer.conn.on_input(&to_peer[read_peer..], &mut to_me);
    }
    assert!(
        me.conn.closed().is_none() && peer.conn.closed().is_none(),
        "seed run terminated: {:?} / {:?}",
        me.conn.closed(),
        peer.conn.closed()
    );
    let mut s = vec![sel];
    s.extend_from_slice(&mpa);
    s.extend_from_slice(&to_me);
    s
}
