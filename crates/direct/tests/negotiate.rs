//! Negotiation: happy paths, every rejection, timeouts, the spec's bytes.

mod common;

use std::time::{Duration, Instant};

use common::Pair;
use smbx_direct::pdu::{FLAG_RESPONSE_REQUESTED, NEGOTIATE_RESPONSE_LEN, SMBD_VERSION};
use smbx_direct::{
    Config, Connection, DisconnectReason, Event, NegotiateRequest, NegotiateResponse, PduError,
    DEFAULT_MESSAGE_SIZE,
};
use smbx_wire::NtStatus;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn good_request() -> NegotiateRequest {
    NegotiateRequest {
        min_version: SMBD_VERSION,
        max_version: SMBD_VERSION,
        credits_requested: 255,
        preferred_send_size: 1364,
        max_receive_size: 1364,
        max_fragmented_size: 1 << 20,
    }
}

fn good_response() -> NegotiateResponse {
    NegotiateResponse {
        min_version: SMBD_VERSION,
        max_version: SMBD_VERSION,
        negotiated_version: SMBD_VERSION,
        credits_requested: 255,
        credits_granted: 255,
        status: NtStatus::SUCCESS,
        max_read_write_size: 1 << 20,
        preferred_send_size: 1364,
        max_receive_size: 8192,
        max_fragmented_size: 1 << 20,
    }
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// Feeds a Negotiate Request to a fresh server; returns the server, what it
/// sent and its events.
fn serve(bytes: &[u8], cfg: Config) -> (Connection, Vec<smbx_direct::OutgoingMessage>, Vec<Event>) {
    let now = Instant::now();
    let mut s = Connection::server(cfg, now);
    assert_eq!(s.poll_post_receives(), 1);
    s.handle_receive(bytes, now);
    let out: Vec<_> = std::iter::from_fn(|| s.poll_transmit()).collect();
    let ev = events(&mut s);
    (s, out, ev)
}

/// Feeds a Negotiate Response to a client that has sent its request.
fn connect(bytes: &[u8], cfg: Config) -> (Connection, Vec<Event>) {
    let now = Instant::now();
    let mut c = Connection::client(cfg, now);
    assert_eq!(c.poll_post_receives(), 1);
    let req = c.poll_transmit().unwrap();
    assert!(!req.needs_credit);
    c.handle_receive(bytes, now);
    let ev = events(&mut c);
    (c, ev)
}

#[test]
fn spec_test_vector_negotiate_request() {
    // The MS-SMBD part of the spec's FPDU test vector, bytes as transmitted.
    let b = hex("0001 0001 0000 ff00 54050000 54050000 00001000");
    assert_eq!(b.len(), 20);
    let r = NegotiateRequest::decode(&b).unwrap();
    assert_eq!(r.min_version, 0x0100);
    assert_eq!(r.max_version, 0x0100);
    assert_eq!(r.credits_requested, 255);
    assert_eq!(r.preferred_send_size, 1364);
    assert_eq!(r.max_receive_size, 1364);
    assert_eq!(r.max_fragmented_size, 0x0010_0000);
    assert_eq!(r.encode().to_vec(), b);
    // A client with the Linux parameters produces exactly these bytes.
    let cfg = Config {
        max_send_size: 1364,
        max_receive_size: 1364,
        ..Config::default()
    };
    let mut c = Connection::client(cfg, Instant::now());
    assert_eq!(c.poll_transmit().unwrap().bytes, b);
}

#[test]
fn happy_path_defaults() {
    let p = Pair::negotiated();
    let cp = *p.client.conn.params().unwrap();
    let sp = *p.server.conn.params().unwrap();
    // Two endpoints with the defaults: the client prefers to send 8704 (8 KiB
    // and 512 bytes), so the server receives 8704 and sends as large.
    assert_eq!(DEFAULT_MESSAGE_SIZE, 8704);
    assert_eq!(sp.max_receive_size, DEFAULT_MESSAGE_SIZE);
    assert_eq!(sp.max_send_size, DEFAULT_MESSAGE_SIZE);
    assert_eq!(cp.max_send_size, DEFAULT_MESSAGE_SIZE);
    assert_eq!(cp.max_receive_size, DEFAULT_MESSAGE_SIZE);
    assert_eq!(cp.max_fragmented_send_size, 1 << 20);
    assert_eq!(sp.max_fragmented_send_size, 1 << 20);
    assert_eq!(cp.max_read_write_size, 8 << 20);
    assert_eq!(cp.initial_send_credits, 255);
    assert_eq!(sp.receive_credit_target, 255);
    assert!(p.client.conn.is_connected() && p.server.conn.is_connected());
}

#[test]
fn windows_sized_peers_get_windows_sized_messages() {
    // Windows' client: PreferredSendSize 1364, MaxReceiveSize 8192. The server
    // could send it 8192-byte messages but sends 1364, as Windows does.
    let mut req = good_request();
    req.max_receive_size = 8192;
    let (s, out, ev) = serve(&req.encode(), Config::default());
    assert!(matches!(ev[..], [Event::Negotiated(_)]), "{ev:?}");
    let sp = *s.params().unwrap();
    assert_eq!((sp.max_send_size, sp.max_receive_size), (1364, 1364));
    let rsp = NegotiateResponse::decode(&out[0].bytes).unwrap();
    assert_eq!(
        (rsp.preferred_send_size, rsp.max_receive_size),
        (1364, 1364)
    );
    // A client that asks to send 4096 gets 4096 (and no more than it receives).
    req.preferred_send_size = 4096;
    let (s, _, _) = serve(&req.encode(), Config::default());
    assert_eq!(s.params().unwrap().max_send_size, 4096);
    req.max_receive_size = 2000;
    let (s, _, _) = serve(&req.encode(), Config::default());
    assert_eq!(s.params().unwrap().max_send_size, 2000);
    // A server configured for Windows' 1364 sends 1364 to anyone.
    req.max_receive_size = 8192;
    let windows = Config {
        max_send_size: 1364,
        ..Config::default()
    };
    let (s, _, _) = serve(&req.encode(), windows);
    assert_eq!(s.params().unwrap().max_send_size, 1364);
    // Windows' server answers PreferredSendSize 1364, MaxReceiveSize 8192: the
    // client sends it 1364-byte messages too.
    let (c, ev) = connect(&good_response().encode(), Config::default());
    assert!(matches!(ev[..], [Event::Negotiated(_)]), "{ev:?}");
    assert_eq!(c.params().unwrap().max_send_size, 1364);
    // A server that sends 8192 and receives 8192 gets 8192.
    let mut rsp = good_response();
    rsp.preferred_send_size = 8192;
    let (c, _) = connect(&rsp.encode(), Config::default());
    assert_eq!(c.params().unwrap().max_send_size, 8192);
}

#[test]
fn server_response_fields_and_clamps() {
    let mut req = good_request();
    req.credits_requested = 1000;
    req.max_receive_size = 1024; // server must clamp its send size
    req.preferred_send_size = 64; // receive size floors at 128
    let (s, out, ev) = serve(&req.encode(), Config::default());
    assert_eq!(out.len(), 1);
    assert!(!out[0].needs_credit);
    assert_eq!(out[0].bytes.len(), NEGOTIATE_RESPONSE_LEN);
    let rsp = NegotiateResponse::decode(&out[0].bytes).unwrap();
    assert_eq!(rsp.credits_granted, 255);
    assert_eq!(
        out[0].post_receives, 255,
        "granted receives are posted first"
    );
    assert_eq!(rsp.preferred_send_size, 1024);
    assert_eq!(rsp.max_receive_size, 128);
    assert_eq!(rsp.max_read_write_size, 8 << 20);
    assert_eq!(rsp.max_fragmented_size, 1 << 20);
    assert_eq!(rsp.credits_requested, 255);
    assert_eq!(s.receive_buffer_size(), 128);
    assert_eq!(s.granted_credits(), 255);
    assert!(matches!(ev[..], [Event::Negotiated(_)]));

    // ReceiveCreditMax bounds the grant.
    let cfg = Config {
        receive_credit_max: 10,
        ..Config::default()
    };
    let (_, out, _) = serve(&good_request().encode(), cfg);
    assert_eq!(
        NegotiateResponse::decode(&out[0].bytes)
            .unwrap()
            .credits_granted,
        10
    );
    assert_eq!(out[0].post_receives, 10);

    // Boundary values are accepted.
    let mut req = good_request();
    req.max_receive_size = 128;
    req.max_fragmented_size = 131_072;
    req.min_version = 0x0001;
    req.max_version = 0x0300;
    let (s, _, _) = serve(&req.encode(), Config::default());
    assert!(s.is_connected());
}

fn assert_server_rejects(bytes: &[u8], expect: PduError, responds: bool) {
    let (s, out, ev) = serve(bytes, Config::default());
    assert_eq!(
        ev,
        vec![Event::Disconnect(DisconnectReason::Protocol(expect))]
    );
    assert!(s.is_closed());
    if responds {
        assert_eq!(out.len(), 1);
        let r = NegotiateResponse::parse(&out[0].bytes).unwrap();
        assert_eq!(r.status, NtStatus::NOT_SUPPORTED);
        assert_eq!(r.negotiated_version, 0);
        assert_eq!(r.credits_granted, 0);
        assert_eq!(r.max_receive_size, 0);
        assert_eq!(
            NegotiateResponse::decode(&out[0].bytes),
            Err(PduError::NegotiateStatus(NtStatus::NOT_SUPPORTED))
        );
    } else {
        assert!(out.is_empty(), "no response expected");
    }
}

#[test]
fn server_rejections() {
    let b = good_request().encode();
    assert_server_rejects(&b[..19], PduError::TooShort { len: 19, need: 20 }, false);
    assert_server_rejects(&[], PduError::TooShort { len: 0, need: 20 }, false);

    let mut r = good_request();
    r.min_version = 0x0200;
    r.max_version = 0x0200;
    assert_server_rejects(
        &r.encode(),
        PduError::UnsupportedVersion {
            min: 0x200,
            max: 0x200,
        },
        true,
    );
    let mut r = good_request();
    r.max_version = 0x00ff;
    r.min_version = 0x0001;
    assert_server_rejects(
        &r.encode(),
        PduError::UnsupportedVersion { min: 1, max: 0xff },
        true,
    );
    let mut r = good_request();
    r.min_version = 0x0100;
    r.max_version = 0x0001; // inverted
    assert_server_rejects(
        &r.encode(),
        PduError::UnsupportedVersion { min: 0x100, max: 1 },
        true,
    );

    let mut r = good_request();
    r.credits_requested = 0;
    assert_server_rejects(&r.encode(), PduError::ZeroCreditsRequested, false);
    let mut r = good_request();
    r.max_receive_size = 127;
    assert_server_rejects(&r.encode(), PduError::MaxReceiveSizeTooSmall(127), false);
    let mut r = good_request();
    r.max_fragmented_size = 131_071;
    assert_server_rejects(
        &r.encode(),
        PduError::MaxFragmentedSizeTooSmall(131_071),
        false,
    );
}

#[test]
fn client_rejections() {
    let cases: Vec<(Vec<u8>, DisconnectReason)> = {
        let g = good_response();
        let mut v = Vec::new();
        v.push((
            g.encode()[..31].to_vec(),
            PduError::TooShort { len: 31, need: 32 }.into(),
        ));
        v.push((
            NegotiateResponse::not_supported().encode().to_vec(),
            PduError::NegotiateStatus(NtStatus::NOT_SUPPORTED).into(),
        ));
        let mut r = g;
        r.negotiated_version = 0x0200;
        v.push((
            r.encode().to_vec(),
            PduError::UnsupportedVersion {
                min: 0x100,
                max: 0x200,
            }
            .into(),
        ));
        let mut r = g;
        r.credits_requested = 0;
        v.push((r.encode().to_vec(), PduError::ZeroCreditsRequested.into()));
        let mut r = g;
        r.credits_granted = 0;
        v.push((r.encode().to_vec(), PduError::ZeroCreditsGranted.into()));
        let mut r = g;
        r.max_receive_size = 127;
        v.push((
            r.encode().to_vec(),
            PduError::MaxReceiveSizeTooSmall(127).into(),
        ));
        let mut r = g;
        r.max_fragmented_size = 131_071;
        v.push((
            r.encode().to_vec(),
            PduError::MaxFragmentedSizeTooSmall(131_071).into(),
        ));
        let mut r = g;
        r.preferred_send_size = DEFAULT_MESSAGE_SIZE + 1; // above the client's MaxReceiveSize
        v.push((
            r.encode().to_vec(),
            DisconnectReason::PeerSendSizeTooLarge {
                peer: DEFAULT_MESSAGE_SIZE + 1,
                own: DEFAULT_MESSAGE_SIZE,
            },
        ));
        v
    };
    for (bytes, reason) in cases {
        let (c, ev) = connect(&bytes, Config::default());
        assert_eq!(ev, vec![Event::Disconnect(reason)]);
        assert!(c.is_closed());
    }
    // And a good one succeeds, with the server's parameters applied.
    let (c, ev) = connect(&good_response().encode(), Config::default());
    let Event::Negotiated(p) = ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(p.max_send_size, 1364);
    assert_eq!(p.max_receive_size, 1364);
    assert_eq!(p.max_read_write_size, 1 << 20);
    assert_eq!(c.send_credits(), 255);
}

#[test]
fn send_before_negotiation_is_refused() {
    let mut c = Connection::client(Config::default(), Instant::now());
    assert_eq!(
        c.send_message(b"x"),
        Err(smbx_direct::SendError::NotConnected)
    );
}

#[test]
fn negotiate_timeout_server_and_client() {
    let t0 = Instant::now();
    let mut s = Connection::server(Config::default(), t0);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    s.handle_timeout(t0 + Duration::from_millis(4999));
    assert!(s.poll_event().is_none());
    s.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(
        s.poll_event(),
        Some(Event::Disconnect(DisconnectReason::NegotiateTimeout))
    );
    assert!(s.is_closed());
    // Late request is ignored.
    s.handle_receive(&good_request().encode(), t0 + Duration::from_secs(6));
    assert!(s.poll_event().is_none());
    assert!(s.poll_transmit().is_none());

    let mut c = Connection::client(Config::default(), t0);
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(120)));
    c.handle_timeout(t0 + Duration::from_secs(119));
    assert!(c.poll_event().is_none());
    c.handle_timeout(t0 + Duration::from_secs(120));
    assert_eq!(
        c.poll_event(),
        Some(Event::Disconnect(DisconnectReason::NegotiateTimeout))
    );

    // Configurable, and cleared by a successful negotiation.
    let cfg = Config {
        negotiate_timeout: Some(Duration::from_secs(1)),
        ..Config::default()
    };
    let mut s = Connection::server(cfg, t0);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(1)));
    s.handle_receive(&good_request().encode(), t0);
    assert_eq!(
        s.poll_timeout(),
        Some(t0 + Duration::from_secs(10)),
        "idle timer only"
    );
}

#[test]
fn keepalive_flag_constant() {
    assert_eq!(FLAG_RESPONSE_REQUESTED, 1);
}
