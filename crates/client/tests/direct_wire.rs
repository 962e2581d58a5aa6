//! tshark check of a whole SMB session over SMB Direct (soft-iWARP) on
//! loopback: the client (Transport::Rdma) talks to `smbx serve` with
//! `smb direct = yes` through a recording TCP relay; the session is NEGOTIATE,
//! SESSION_SETUP, TREE_CONNECT, CREATE, a 1 MiB WRITE whose data the server
//! RDMA-Reads, a 1 MiB READ whose data the server RDMA-Writes, CLOSE, LOGOFF.
//! The recorded streams are cut into MPA frames and FPDUs (one TCP segment
//! each) and written to a pcap that tshark, with the options of the spec
//! reference (section 4), must decode: every FPDU with a good CRC32 (or, with
//! CRC off, none), nothing malformed, and the SMB2 commands through the
//! smb_direct dissector, next to RDMA Read Request/Read Response and RDMA
//! Write. Variants: CRC on (the client asks), CRC off (the default: neither asks),
//! MPA revision 1. The capture machinery is shared with
//! crates/rdma/tests/tshark_wire.rs. tshark is required; the tests fail
//! without it. SMBX_KEEP_PCAP=<dir> keeps the captures.

#[path = "../../rdma/tests/support/capture.rs"]
mod capture;
mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capture::{decode, num, relay, write_pcap_port, Log, Row};
use common::{random_bytes, rdma_options, sha256, start_smbx_direct, PASSWORD, USER};
use smbx_client::{Client, OpenOptions};
use smbx_transport::soft::Options as IwarpOptions;
use smbx_wire::Dialect;
use tokio::net::TcpListener;

/// The SMB2 WRITE and READ sizes.
const BULK: usize = 1 << 20;
/// Tagged payload per FPDU at the loopback MSS of 1448.
const TAGGED_PAYLOAD: usize = 1428;
/// Expert severity of a warning (PI_WARN); errors are above.
const PI_WARN: u64 = 0x0060_0000;
/// The one expert warning the capture may hold, and only on the server's
/// NEGOTIATE response: Wireshark's SPNEGO dissector decodes a negTokenInit
/// as [MS-SPNG] NegTokenInit2 (with negHints, which Windows, Samba and smbx
/// send in the NEGOTIATE response) only when the packet's port type is TCP
/// and its source port below 1024; under the iWARP dissectors the port type
/// is iWARP MPA, so it parses negHints as an RFC 4178 mechListMIC. The test
/// proves the same SMB2 bytes decode clean over Direct TCP from port 445.
const SPNEGO_NEGHINTS_ARTIFACT: &str =
    "BER Error: OctetString expected but class:UNIVERSAL(0) Constructed tag:16 was unexpected";

const FIELDS: [&str; 11] = [
    "tcp.srcport",
    "frame.protocols",
    "iwarp_mpa.rev",
    "iwarp_mpa.crc_check",
    "iwarp_mpa.crc",
    "iwarp_rdma.opcode",
    "iwarp_rdma.inval_stag",
    "smb_direct.credits.granted",
    "smb2.cmd",
    "smb2.flags.response",
    "smb2.channel",
];

// SMB2 command codes.
const NEGOTIATE: u64 = 0;
const SESSION_SETUP: u64 = 1;
const LOGOFF: u64 = 2;
const TREE_CONNECT: u64 = 3;
const CREATE: u64 = 5;
const CLOSE: u64 = 6;
const READ: u64 = 8;
const WRITE: u64 = 9;

// RDMAP opcodes.
const RDMA_WRITE: u64 = 0;
const READ_REQUEST: u64 = 1;
const READ_RESPONSE: u64 = 2;
const SEND_INVALIDATE: u64 = 4;

/// Runs the session through a relay in front of the server's SMB Direct port;
/// returns what the relay recorded.
async fn run_session(
    direct_port: u16,
    iwarp: IwarpOptions,
    share_dir: &Path,
) -> Vec<(bool, Vec<u8>)> {
    let rl = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = rl.local_addr().unwrap();
    let log: Log = Arc::default();
    let server_addr = format!("127.0.0.1:{direct_port}").parse().unwrap();
    let relay = tokio::spawn(relay(rl, server_addr, log.clone()));

    let mut o = rdma_options(Dialect::SMB3_1_1);
    o.iwarp = iwarp;
    let client = Client::connect(&relay_addr.to_string(), o)
        .await
        .expect("connect over smb direct through the relay");
    let session = client.login(USER, PASSWORD, "").await.expect("login");
    let tree = session.tree("share").await.expect("tree connect");
    let f = tree
        .open("wire.bin", &OpenOptions::create_truncate())
        .await
        .expect("create");
    let data = random_bytes(BULK);
    assert_eq!(f.write_at(0, &data).await.expect("write"), BULK);
    let back = f.read_at(0, BULK).await.expect("read");
    assert_eq!(sha256(&back), sha256(&data), "read back");
    f.close().await.expect("close");
    session.logoff().await.expect("logoff");
    client.connection().close();
    drop(tree);
    drop(session);
    drop(client);
    tokio::time::timeout(Duration::from_secs(30), relay)
        .await
        .expect("both sides of the relay closed after the client left")
        .unwrap();
    let on_disk = std::fs::read(share_dir.join("wire.bin")).unwrap();
    assert_eq!(sha256(&on_disk), sha256(&data), "on disk");
    let recorded = std::mem::take(&mut *log.lock().unwrap());
    recorded
}

fn is_mpa(r: &Row) -> bool {
    !r.get("iwarp_mpa.rev").is_empty()
}

fn opcode(r: &Row) -> Option<u64> {
    let o = r.get("iwarp_rdma.opcode");
    (!o.is_empty()).then(|| num(o))
}

fn nums(s: &str) -> Vec<u64> {
    s.split(',').filter(|x| !x.is_empty()).map(num).collect()
}

/// (frame, message) of every expert item of warning severity or above.
fn expert_problems(cap: &Path) -> Vec<(u64, String)> {
    let out = capture::run_tshark(
        cap,
        &[
            "-Y",
            "_ws.expert.severity >= 0x600000 || _ws.malformed",
            "-T",
            "fields",
            "-E",
            "separator=;",
            "-E",
            "aggregator=|",
            "-e",
            "frame.number",
            "-e",
            "_ws.expert.severity",
            "-e",
            "_ws.expert.message",
        ],
    );
    let mut v = Vec::new();
    for l in out.lines() {
        let f: Vec<&str> = l.split(';').collect();
        assert_eq!(f.len(), 3, "{l}");
        let sev: Vec<&str> = f[1].split('|').collect();
        let msg: Vec<&str> = f[2].split('|').collect();
        assert_eq!(sev.len(), msg.len(), "{l}");
        let mut any = false;
        for (s, m) in sev.iter().zip(&msg) {
            if num(s) >= PI_WARN {
                v.push((num(f[0]), m.to_string()));
                any = true;
            }
        }
        assert!(any, "malformed without a warning or error: {l}");
    }
    v
}

/// The SMB2 message of a one-fragment SMB Direct data message in the Send
/// FPDU `fpdu`, re-framed for Direct TCP from port 445, must decode without
/// any expert warning: the control for [`SPNEGO_NEGHINTS_ARTIFACT`].
fn assert_clean_over_tcp(name: &str, fpdu: &[u8], dir: &Path) {
    // [ULPDU length 2][untagged DDP/RDMAP header 18][SMB Direct header 24]...
    let smbd = &fpdu[2 + 18..];
    let off = u32::from_le_bytes(smbd[12..16].try_into().unwrap()) as usize;
    let len = u32::from_le_bytes(smbd[16..20].try_into().unwrap()) as usize;
    assert_eq!(
        u32::from_le_bytes(smbd[8..12].try_into().unwrap()),
        0,
        "{name}: one fragment"
    );
    let smb2 = &smbd[off..off + len];
    let mut msg = (len as u32).to_be_bytes().to_vec();
    msg.extend_from_slice(smb2);
    let cap = dir.join(format!("tcp-{name}.pcap"));
    write_pcap_port(&cap, &[(false, msg)], 445);
    if let Some(keep) = std::env::var_os("SMBX_KEEP_PCAP") {
        let _ = std::fs::copy(&cap, Path::new(&keep).join(format!("tcp-{name}.pcap")));
    }
    let problems = expert_problems(&cap);
    assert!(
        problems.is_empty(),
        "{name}: the NEGOTIATE response over Direct TCP: {problems:?}"
    );
    let cmd = capture::run_tshark(
        &cap,
        &["-T", "fields", "-e", "smb2.cmd", "-e", "spnego.hintName"],
    );
    // NEGOTIATE, with the negHints of NegTokenInit2 decoded.
    assert!(
        cmd.lines().any(|l| l
            .split_once('\t')
            .is_some_and(|(c, h)| c == "0" && !h.is_empty())),
        "{name}: control decode: {cmd}"
    );
}

fn wire_check(name: &str, iwarp: IwarpOptions, server_conf: &str) {
    // FPDUs sized for an Ethernet segment at both ends (on loopback they would
    // be sized for its ~64 KiB MSS).
    let (server, port) = start_smbx_direct(&format!(
        "    smb direct mss = {}\n{server_conf}",
        capture::MSS
    ));
    // Large FPDUs (smbx's own framing, which tshark does not know) are turned off
    // by each caller, at the client or at the server: the session stays on
    // standard MPA.
    let iwarp = IwarpOptions {
        mss: Some(capture::MSS as u32),
        ..iwarp
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let log = rt.block_on(run_session(port, iwarp.clone(), &server.share_dir("share")));
    let capture::Capture {
        dir,
        path: cap,
        segs,
    } = capture::capture(name, &format!("smb-{name}.pcap"), &log);

    // 1. Every MPA frame and FPDU decodes as iWARP, in the order sent.
    let rows = decode(&cap, &FIELDS);
    let data: Vec<&Row> = rows
        .iter()
        .filter(|r| is_mpa(r) || opcode(r).is_some())
        .collect();
    assert_eq!(
        data.len(),
        segs.len(),
        "{name}: tshark decoded {} of {} MPA frames/FPDUs as iWARP",
        data.len(),
        segs.len()
    );
    for (i, r) in data.iter().enumerate() {
        assert_eq!(r.c2s, segs[i].0, "{name}: direction of packet {i}");
    }
    let mpa: Vec<&&Row> = data.iter().filter(|r| is_mpa(r)).collect();
    assert_eq!(mpa.len(), 2, "{name}: MPA Request and Reply");
    assert!(mpa[0].c2s && !mpa[1].c2s, "{name}: Request first");
    for m in &mpa {
        assert_eq!(
            m.get("iwarp_mpa.rev"),
            iwarp.mpa_revision.to_string(),
            "{name}"
        );
    }

    // 2. CRC: every FPDU checked good when negotiated; zero otherwise.
    let (fpdus, good, bad) = capture::assert_fpdu_crcs(name, &cap, &data, &segs, iwarp.crc);

    // 3. Nothing malformed, no expert errors or warnings (but the SPNEGO
    // dissector's artifact, checked to be one).
    let expert = capture::run_tshark(&cap, &["-q", "-z", "expert"]);
    for (frame, msg) in expert_problems(&cap) {
        let i = data
            .iter()
            .position(|r| r.f[0] == frame.to_string())
            .unwrap_or_else(|| panic!("{name}: frame {frame}: {msg}\n{expert}"));
        let r = data[i];
        assert!(
            msg == SPNEGO_NEGHINTS_ARTIFACT && !r.c2s && nums(r.get("smb2.cmd")) == [NEGOTIATE],
            "{name}: frame {frame}: {msg}\n{expert}"
        );
        assert_clean_over_tcp(name, &segs[i].1, dir.path());
    }

    // 4. The SMB2 commands, decoded through smb_direct, in session order.
    let mut requests = Vec::new();
    let mut responses = Vec::new();
    for r in &data {
        let cmds = nums(r.get("smb2.cmd"));
        if cmds.is_empty() {
            continue;
        }
        assert!(
            r.get("frame.protocols")
                .contains("iwarp_ddp_rdmap:smb_direct:smb2"),
            "{name}: frame {}: SMB2 not under smb_direct: {}",
            r.f[0],
            r.get("frame.protocols")
        );
        let resp = r
            .get("smb2.flags.response")
            .split(',')
            .any(|x| x == "1" || x == "True");
        if resp {
            assert!(!r.c2s, "{name}: frame {}: response from the client", r.f[0]);
            responses.extend(cmds);
        } else {
            assert!(r.c2s, "{name}: frame {}: request from the server", r.f[0]);
            requests.extend(cmds.iter().copied());
            // The 1 MiB WRITE and READ name an RDMA channel
            // (RDMA_V1_INVALIDATE on 3.1.1).
            if cmds.contains(&WRITE) || cmds.contains(&READ) {
                assert_eq!(
                    r.get("smb2.channel"),
                    "0x00000002",
                    "{name}: frame {}",
                    r.f[0]
                );
            }
        }
    }
    let want = [
        NEGOTIATE,
        SESSION_SETUP,
        TREE_CONNECT,
        CREATE,
        WRITE,
        READ,
        CLOSE,
        LOGOFF,
    ];
    let mut it = requests.iter();
    for w in want {
        assert!(
            it.any(|c| *c == w),
            "{name}: request {w} missing or out of order in {requests:?}"
        );
    }
    for w in want {
        assert!(
            responses.contains(&w),
            "{name}: response {w} missing in {responses:?}"
        );
    }

    // 5. The RDMA operations: one Read Request (server) answered by 1 MiB of
    // Read Responses (client), 1 MiB of RDMA Writes (server), and the READ
    // and WRITE responses in Send with Invalidate.
    let count = |c2s: bool, op: u64| {
        data.iter()
            .filter(|r| r.c2s == c2s && opcode(r) == Some(op))
            .count()
    };
    let per_mib = BULK.div_ceil(TAGGED_PAYLOAD);
    assert_eq!(count(false, READ_REQUEST), 1, "{name}: RDMA Read Requests");
    assert_eq!(
        count(true, READ_RESPONSE),
        per_mib,
        "{name}: Read Responses"
    );
    assert_eq!(count(false, RDMA_WRITE), per_mib, "{name}: RDMA Writes");
    assert_eq!(
        count(true, RDMA_WRITE) + count(false, READ_RESPONSE),
        0,
        "{name}"
    );
    assert_eq!(
        count(false, SEND_INVALIDATE),
        2,
        "{name}: Send with Invalidate"
    );
    for r in data.iter().filter(|r| opcode(r) == Some(SEND_INVALIDATE)) {
        assert!(!r.get("iwarp_rdma.inval_stag").is_empty(), "{name}");
        let cmds = nums(r.get("smb2.cmd"));
        assert!(cmds == [WRITE] || cmds == [READ], "{name}: {cmds:?}");
    }
    assert!(!server.log().contains("panicked"), "{}", server.log());
    eprintln!(
        "{name}: {} MPA frames + {fpdus} FPDUs; CRC good {good}, bad {bad}; \
         requests {requests:?}; expert:\n{expert}",
        mpa.len()
    );
}

#[test]
fn smb_session_wire_crc_on() {
    // The client asks; the server (default `smb direct crc = no`) follows.
    wire_check(
        "crc_on",
        IwarpOptions {
            crc: true,
            ..Default::default()
        },
        "",
    );
}

#[test]
fn smb_session_wire_crc_off() {
    wire_check("crc_off", no_large(), "");
}

/// The client offers large FPDUs; a server with `smb direct large fpdus = no`
/// declines, and the 1 MiB WRITE and READ go in standard FPDUs that tshark
/// decodes (one in the long form would fail the decode count).
#[test]
fn smb_session_wire_server_declines_large_fpdus() {
    wire_check(
        "large_declined",
        IwarpOptions::default(),
        "    smb direct large fpdus = no\n",
    );
}

/// A client that offers no large FPDUs.
fn no_large() -> IwarpOptions {
    IwarpOptions {
        large_fpdus: false,
        ..Default::default()
    }
}

#[test]
fn smb_session_wire_mpa_rev1() {
    wire_check(
        "mpa_rev1",
        IwarpOptions {
            mpa_revision: 1,
            ..no_large()
        },
        "",
    );
}
