//! Wire check of the soft-iWARP provider with Wireshark's dissectors.
//!
//! A loopback session (MPA Request/Reply with private data, several Sends,
//! a 1 MiB RDMA Write, a 1 MiB RDMA Read, Send with Invalidate) runs through
//! a recording TCP relay. The bytes each side sent are cut into MPA frames
//! and FPDUs (each FPDU one TCP segment, as on a real network) and written to
//! a pcap with synthesised Ethernet/IPv4/TCP headers and consistent sequence
//! numbers. tshark, with the options of the spec reference (section 4), must
//! then decode every FPDU with a good CRC (when negotiated), report nothing
//! malformed, and show exactly the RDMAP opcode/QN/MSN/MO/STag/TO sequence
//! the test sent. Variants: CRC on, CRC off, MPA revision 1.
//!
//! tshark is required (CI installs it); the tests fail loudly without it.

#[path = "support/capture.rs"]
mod capture;

#[path = "support/soft_pair.rs"]
mod soft_pair;

use soft_pair::{connected_via, listen, next_ok, post_recvs, seeded};

use std::sync::Arc;

use capture::{decode, flag, num, relay, Log, Row};
use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp};
use smbx_rdma::*;
use tokio::net::TcpListener;

/// Bytes moved by the RDMA Write and the RDMA Read.
const BULK: usize = 1 << 20;
/// Tagged payload per FPDU at the loopback MSS of 1448 (spec section 3).
const TAGGED_PAYLOAD: usize = 1428;

/// The spec's SMB Direct Negotiate Request (the payload of its FPDU test vector).
const SMBD_NEG_REQ: [u8; 20] = [
    0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0xff, 0x00, 0x54, 0x05, 0x00, 0x00, 0x54, 0x05, 0x00, 0x00,
    0x00, 0x00, 0x10, 0x00,
];

/// An SMB Direct Negotiate Response (version 0x0100, 255 credits, 1 MiB I/O).
fn smbd_neg_resp() -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..2].copy_from_slice(&0x0100u16.to_le_bytes());
    b[2..4].copy_from_slice(&0x0100u16.to_le_bytes());
    b[4..6].copy_from_slice(&0x0100u16.to_le_bytes());
    b[8..10].copy_from_slice(&255u16.to_le_bytes());
    b[10..12].copy_from_slice(&255u16.to_le_bytes());
    b[16..20].copy_from_slice(&(1u32 << 20).to_le_bytes());
    b[20..24].copy_from_slice(&1364u32.to_le_bytes());
    b[24..28].copy_from_slice(&1364u32.to_le_bytes());
    b[28..32].copy_from_slice(&(1u32 << 20).to_le_bytes());
    b
}

/// An empty SMB Direct data message: 255 credits requested, 1 granted.
fn smbd_empty() -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..2].copy_from_slice(&255u16.to_le_bytes());
    b[2..4].copy_from_slice(&1u16.to_le_bytes());
    b
}

// ------------------------------------------------------------------ session

/// What the session used, to build the expected decode.
struct Session {
    log: Vec<(bool, Vec<u8>)>,
    /// Client's RDMA Write sink (also the STag the server invalidates).
    wsink: (u32, u64),
    /// Server's RDMA Read sink.
    rsink: (u32, u64),
}

async fn run_session(opts: IwarpOptions) -> Session {
    // FPDUs sized for an Ethernet segment (loopback's MSS is ~64 KiB), and
    // standard ones: tshark knows nothing of smbx's large FPDUs.
    let opts = IwarpOptions {
        mss: Some(capture::MSS as u32),
        large_fpdus: false,
        ..opts
    };
    let prov = SoftIwarp::new(opts.clone());
    let lis = listen(&prov).await;
    let rl = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = rl.local_addr().unwrap();
    let log: Log = Arc::default();
    let relay = tokio::spawn(relay(rl, lis.local_addr(), log.clone()));
    let accepting = ConnParams {
        private_data: b"server-hi".to_vec(),
        ird: 16,
        ord: 16,
    };
    let connecting = ConnParams {
        private_data: b"client-hello".to_vec(),
        ird: 8,
        ord: 4,
    };
    let (s, c) = connected_via(
        &prov,
        lis,
        relay_addr,
        (accepting, |qp, pd| post_recvs(qp, pd, 10, 3, 1024)),
        (connecting, |qp, pd| post_recvs(qp, pd, 1, 2, 1024)),
    )
    .await;
    assert_eq!(s.peer.private_data, b"client-hello");
    assert_eq!(c.peer.private_data, b"server-hi");

    let server = tokio::spawn(async move {
        // The connection's own protection domain.
        let (qp, spd, rbuf) = (s.qp, s.pd, s.before);
        let c = next_ok(&qp).await;
        assert_eq!((c.wr_id, c.byte_len), (10, 20));
        assert_eq!(rbuf.with(|b| b[..20].to_vec()), SMBD_NEG_REQ);
        let sbuf = spd.alloc(64, Access::LOCAL_READ).unwrap();
        sbuf.write_at(0, &smbd_neg_resp());
        qp.post_send_simple(20, &[Sge::new(&sbuf, 0, 32)]).unwrap();
        // Send and receive completions may come in either order.
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(next_ok(&qp).await);
        }
        got.sort_by_key(|c| c.wr_id);
        let got: Vec<_> = got
            .iter()
            .map(|c| (c.wr_id, c.byte_len, c.solicited))
            .collect();
        assert_eq!(got, [(11, 5, true), (12, 32, false), (20, 32, false)]);
        let (wdesc, rdesc) = rbuf.with(|b| {
            let d = |o: usize| RemoteBuf {
                stag: STag(u32::from_le_bytes(b[o..o + 4].try_into().unwrap())),
                to: u64::from_le_bytes(b[o + 4..o + 12].try_into().unwrap()),
                len: u32::from_le_bytes(b[o + 12..o + 16].try_into().unwrap()),
            };
            (d(2048), d(2048 + 16))
        });
        let src = spd.register(seeded(1, BULK), Access::LOCAL_READ).unwrap();
        let sink = spd.alloc(BULK, Access::LOCAL_WRITE).unwrap();
        qp.post_write(21, &[Sge::new(&src, 0, BULK as u32)], wdesc)
            .unwrap();
        qp.post_read(22, Sge::new(&sink, 0, BULK as u32), rdesc)
            .unwrap();
        assert_eq!(next_ok(&qp).await.opcode, WcOpcode::RdmaWrite);
        assert_eq!(next_ok(&qp).await.opcode, WcOpcode::RdmaRead);
        assert!(sink.with(|b| b == seeded(2, BULK).as_slice()));
        // As in an SMB2 READ answered over RDMA_V1_INVALIDATE: an SMB Direct
        // message (here an empty one granting a credit) in Send with Invalidate.
        sbuf.write_at(0, &smbd_empty());
        qp.post_send_inv(23, &[Sge::new(&sbuf, 0, 20)], wdesc.stag)
            .unwrap();
        assert_eq!(next_ok(&qp).await.wr_id, 23);
        assert_eq!(qp.closed().await, CloseReason::PeerDisconnect);
        (sink.stag().0, sink.addr())
    });

    let (qp, cpd, _rbuf) = (c.qp, c.pd, c.before);
    let wsink = cpd
        .alloc(BULK, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let rsrc = cpd.register(seeded(2, BULK), Access::REMOTE_READ).unwrap();
    let sbuf = cpd.alloc(128, Access::LOCAL_READ).unwrap();
    sbuf.write_at(0, &SMBD_NEG_REQ);
    sbuf.write_at(32, b"hello");
    let mut desc = Vec::new();
    for r in [
        wsink.remote(0, BULK as u32).unwrap(),
        rsrc.remote(0, BULK as u32).unwrap(),
    ] {
        desc.extend_from_slice(&r.stag.0.to_le_bytes());
        desc.extend_from_slice(&r.to.to_le_bytes());
        desc.extend_from_slice(&r.len.to_le_bytes());
    }
    sbuf.write_at(64, &desc);
    qp.post_send_simple(3, &[Sge::new(&sbuf, 0, 20)]).unwrap();
    qp.post_send(&SendWr {
        wr_id: 4,
        op: SendOp::Send,
        sg: &[Sge::new(&sbuf, 32, 5)],
        solicited: true,
    })
    .unwrap();
    qp.post_send_simple(5, &[Sge::new(&sbuf, 64, 32)]).unwrap();
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(next_ok(&qp).await);
    }
    got.sort_by_key(|c| c.wr_id);
    assert_eq!(
        got.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(got[0].byte_len, 32);
    assert_eq!(
        (got[1].byte_len, got[1].invalidated),
        (20, Some(wsink.stag()))
    );
    assert!(wsink.with(|b| b == seeded(1, BULK).as_slice()));
    qp.disconnect();
    assert_eq!(qp.closed().await, CloseReason::LocalDisconnect);
    let rsink = server.await.unwrap();
    relay.await.unwrap();
    let log = std::mem::take(&mut *log.lock().unwrap());
    Session {
        log,
        wsink: (wsink.stag().0, wsink.addr()),
        rsink,
    }
}

const FIELDS: [&str; 15] = [
    "tcp.srcport",
    "iwarp_mpa.crc_check",
    "iwarp_mpa.crc",
    "iwarp_mpa.rev",
    "iwarp_mpa.privatedata",
    "iwarp_rdma.opcode",
    "iwarp_ddp.qn",
    "iwarp_ddp.msn",
    "iwarp_ddp.mo",
    "iwarp_ddp.last_flag",
    "iwarp_rdma.inval_stag",
    "iwarp_ddp.stag",
    "iwarp_ddp.tagged_offset",
    "smb_direct.credits.requested",
    "smb_direct.credits.granted",
];

/// A compact form of what an FPDU should decode to.
fn untagged(opcode: u8, qn: u32, msn: u32, inv: Option<u32>) -> String {
    format!(
        "op={opcode} qn={qn} msn={msn} mo=0 L=1 inv={}",
        inv.map(|s| format!("{s:#010x}")).unwrap_or_default()
    )
}

fn tagged(opcode: u8, stag: u32, to: u64, last: bool) -> String {
    format!(
        "op={opcode} stag={stag:#010x} to={to:#018x} L={}",
        u8::from(last)
    )
}

/// The observed form of a decoded FPDU row.
fn observed(r: &Row) -> String {
    let opcode = num(r.get("iwarp_rdma.opcode")) as u8;
    let last = flag(r.get("iwarp_ddp.last_flag"));
    if r.get("iwarp_ddp.stag").is_empty() {
        let inv = r.get("iwarp_rdma.inval_stag");
        format!(
            "op={opcode} qn={} msn={} mo={} L={last} inv={}",
            num(r.get("iwarp_ddp.qn")),
            num(r.get("iwarp_ddp.msn")),
            num(r.get("iwarp_ddp.mo")),
            if inv.is_empty() {
                String::new()
            } else {
                format!("{:#010x}", num(inv))
            }
        )
    } else {
        format!(
            "op={opcode} stag={:#010x} to={:#018x} L={last}",
            num(r.get("iwarp_ddp.stag")),
            num(r.get("iwarp_ddp.tagged_offset")),
        )
    }
}

fn tagged_run(opcode: u8, (stag, base): (u32, u64)) -> Vec<String> {
    let n = BULK.div_ceil(TAGGED_PAYLOAD);
    (0..n)
        .map(|i| tagged(opcode, stag, base + (i * TAGGED_PAYLOAD) as u64, i + 1 == n))
        .collect()
}

fn wire_check(name: &str, opts: IwarpOptions) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(run_session(opts.clone()));
    let capture::Capture {
        dir: _dir,
        path: cap,
        segs,
    } = capture::capture(name, &format!("{name}.pcap"), &s.log);

    // 1. Every packet decodes as the test sent it.
    let rows = decode(&cap, &FIELDS);
    let data: Vec<&Row> = rows
        .iter()
        .filter(|r| !r.get("iwarp_mpa.rev").is_empty() || !r.get("iwarp_rdma.opcode").is_empty())
        .collect();
    assert_eq!(
        data.len(),
        segs.len(),
        "{name}: tshark decoded {} of {} MPA frames/FPDUs as iWARP",
        data.len(),
        segs.len()
    );
    let rev = opts.mpa_revision.to_string();
    for (i, r) in data.iter().enumerate() {
        assert_eq!(r.c2s, segs[i].0, "{name}: direction of packet {i}");
    }
    // MPA Request and Reply, private data included.
    let mpa: Vec<&&Row> = data
        .iter()
        .filter(|r| !r.get("iwarp_mpa.rev").is_empty())
        .collect();
    assert_eq!(mpa.len(), 2, "{name}: MPA Request and Reply");
    let enhanced_hdr = |r: &Row| {
        if opts.mpa_revision == 2 {
            r.get("iwarp_mpa.privatedata")
                .get(8..)
                .unwrap_or("")
                .to_string()
        } else {
            r.get("iwarp_mpa.privatedata").to_string()
        }
    };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert!(mpa[0].c2s && !mpa[1].c2s, "{name}: Request first");
    assert_eq!(mpa[0].get("iwarp_mpa.rev"), rev);
    assert_eq!(mpa[1].get("iwarp_mpa.rev"), rev);
    assert_eq!(enhanced_hdr(mpa[0]), hex(b"client-hello"), "{name}");
    assert_eq!(enhanced_hdr(mpa[1]), hex(b"server-hi"), "{name}");
    if opts.mpa_revision == 2 {
        // IRD 8 / ORD 4 offered; responder ORD clamped to 8.
        assert!(mpa[0].get("iwarp_mpa.privatedata").starts_with("00080004"));
        assert!(mpa[1].get("iwarp_mpa.privatedata").starts_with("00100008"));
    }

    let fpdus = |c2s: bool| -> Vec<String> {
        data.iter()
            .filter(|r| r.c2s == c2s && r.get("iwarp_mpa.rev").is_empty())
            .map(|r| observed(r))
            .collect()
    };
    let mut want_c2s = vec![
        untagged(3, 0, 1, None),
        untagged(5, 0, 2, None),
        untagged(3, 0, 3, None),
    ];
    want_c2s.extend(tagged_run(2, s.rsink));
    let mut want_s2c = vec![untagged(3, 0, 1, None)];
    want_s2c.extend(tagged_run(0, s.wsink));
    want_s2c.push(untagged(1, 1, 1, None));
    want_s2c.push(untagged(4, 0, 2, Some(s.wsink.0)));
    for (c2s, want) in [(true, want_c2s), (false, want_s2c)] {
        let got = fpdus(c2s);
        let who = if c2s { "client" } else { "server" };
        assert_eq!(got.len(), want.len(), "{name}: {who} FPDU count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name}: {who} FPDU {i}");
        }
    }
    // The SMB Direct heuristic found the Negotiate Request in the first Send.
    let neg = data
        .iter()
        .find(|r| r.c2s && r.get("iwarp_mpa.rev").is_empty())
        .unwrap();
    assert_eq!(neg.get("smb_direct.credits.requested"), "255", "{name}");
    // ... and the empty data message in the Send with Invalidate.
    let inv = data
        .iter()
        .rfind(|r| {
            !r.c2s && !r.get("iwarp_rdma.opcode").is_empty() && num(r.get("iwarp_rdma.opcode")) == 4
        })
        .unwrap();
    assert_eq!(inv.get("smb_direct.credits.granted"), "1", "{name}");

    // 2. CRC: every FPDU checked good when negotiated; no check otherwise.
    let fpdu_rows: Vec<&&Row> = data
        .iter()
        .filter(|r| r.get("iwarp_mpa.rev").is_empty())
        .collect();
    let (_, good, bad) = capture::assert_fpdu_crcs(name, &cap, &data, &segs, opts.crc);

    // 3. Nothing malformed, no expert errors or warnings.
    let expert = capture::assert_expert_clean(name, &cap);
    eprintln!(
        "{name}: {} MPA frames + {} FPDUs decoded; CRC good {good}, bad {bad}; expert:\n{expert}",
        mpa.len(),
        fpdu_rows.len()
    );
}

#[test]
fn wire_crc_on() {
    wire_check(
        "crc_on",
        IwarpOptions {
            crc: true,
            ..Default::default()
        },
    );
}

#[test]
fn wire_crc_off() {
    wire_check(
        "crc_off",
        IwarpOptions {
            crc: false,
            ..Default::default()
        },
    );
}

#[test]
fn wire_mpa_rev1() {
    wire_check(
        "mpa_rev1",
        IwarpOptions {
            mpa_revision: 1,
            ..Default::default()
        },
    );
}
