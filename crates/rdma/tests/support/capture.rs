//! Capture machinery for the tshark wire checks, shared by the soft-iWARP
//! test (crates/rdma/tests/tshark_wire.rs) and the whole-SMB-session test
//! (crates/client/tests/direct_wire.rs, which includes this file by path).
//!
//! * [`relay`]: a recording TCP relay (one connection, both directions);
//!   [`paced_relay`] hands the server's bytes on in small, spaced pieces (as a
//!   pacing congestion control delivers them: crates/rdma/tests/paced_write.rs).
//! * [`segments`]: the recorded byte streams cut into the MPA frame and the
//!   FPDUs of each direction (lengths read independently of the provider).
//! * [`write_pcap`]: a pcap with synthesised Ethernet/IPv4/TCP headers and
//!   consistent sequence numbers, one TCP segment per MPA frame or FPDU.
//! * [`decode`], [`run_tshark`]: tshark with the options of the spec
//!   reference, section 4.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The client port written to captures.
pub const CLIENT_PORT: u16 = 49822;
/// The server port written to captures (5445 is the iWARP SMB Direct port,
/// claimed by another dissector: the spec's `tcp.try_heuristic_first` is what
/// makes it work).
pub const SERVER_PORT: u16 = 5445;

/// The tshark binary; panics when it is missing (the wire checks never skip).
pub fn tshark() -> PathBuf {
    let p = PathBuf::from("/usr/bin/tshark");
    if p.exists() {
        return p;
    }
    if let Ok(o) = Command::new("tshark").arg("--version").output() {
        if o.status.success() {
            return PathBuf::from("tshark");
        }
    }
    panic!(
        "tshark is required for the iWARP wire checks and was not found \
         (install it: apt-get install tshark); CI installs it"
    );
}

// ------------------------------------------------------------------ relay

/// Chunks in the order the relay read them: (client to server?, bytes).
pub type Log = Arc<Mutex<Vec<(bool, Vec<u8>)>>>;

/// Forwards `r` to `w` until either side closes: at most `piece` bytes at a
/// time with `pause` after each, each chunk recorded in `rec`'s log (with its
/// direction) before it is forwarded, so an answer is never logged ahead of
/// what caused it.
async fn pipe(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    piece: usize,
    pause: Duration,
    rec: Option<(bool, Log)>,
) {
    let mut buf = vec![0u8; piece];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Some((c2s, log)) = &rec {
                    log.lock().unwrap().push((*c2s, buf[..n].to_vec()));
                }
                if w.write_all(&buf[..n]).await.is_err() {
                    break;
                }
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
    let _ = w.shutdown().await;
}

/// Accepts one connection on `lis` and connects it to `server`: the two
/// streams' halves, connecting side first.
async fn accept_pair(
    lis: TcpListener,
    server: SocketAddr,
) -> (
    (
        tokio::net::tcp::OwnedReadHalf,
        tokio::net::tcp::OwnedWriteHalf,
    ),
    (
        tokio::net::tcp::OwnedReadHalf,
        tokio::net::tcp::OwnedWriteHalf,
    ),
) {
    let (c, _) = lis.accept().await.unwrap();
    let s = TcpStream::connect(server).await.unwrap();
    c.set_nodelay(true).unwrap();
    s.set_nodelay(true).unwrap();
    (c.into_split(), s.into_split())
}

/// Accepts one connection on `lis`, connects to `server`, forwards both ways
/// until both sides closed, recording everything in `log`.
pub async fn relay(lis: TcpListener, server: SocketAddr, log: Log) {
    let ((cr, cw), (sr, sw)) = accept_pair(lis, server).await;
    let a = tokio::spawn(pipe(
        cr,
        sw,
        RELAY_CHUNK,
        Duration::ZERO,
        Some((true, log.clone())),
    ));
    let b = tokio::spawn(pipe(
        sr,
        cw,
        RELAY_CHUNK,
        Duration::ZERO,
        Some((false, log)),
    ));
    a.await.unwrap();
    b.await.unwrap();
}

/// Accepts one connection on `lis` and relays it to `server`: towards the
/// connecting side in pieces of at most `piece` bytes spaced by `pause`, the
/// other way at once. Records nothing.
pub async fn paced_relay(lis: TcpListener, server: SocketAddr, piece: usize, pause: Duration) {
    let ((cr, cw), (sr, sw)) = accept_pair(lis, server).await;
    let up = tokio::spawn(pipe(cr, sw, RELAY_CHUNK, Duration::ZERO, None));
    let down = tokio::spawn(pipe(sr, cw, piece, pause, None));
    up.await.unwrap();
    down.await.unwrap();
}

/// Most bytes a relay forwards at a time when it does not pace.
const RELAY_CHUNK: usize = 64 * 1024;

// ------------------------------------------------------------------ framing

/// Cuts each direction's byte stream into its MPA frame and FPDUs, in the
/// order the relay saw them complete. Lengths are read independently of the
/// provider's decoders: MPA = 20 + private data length, FPDU = 2 + ULPDU
/// length + pad + 4. Panics on trailing bytes that are not a whole FPDU.
pub fn segments(log: &[(bool, Vec<u8>)]) -> Vec<(bool, Vec<u8>)> {
    let mut bufs = [Vec::new(), Vec::new()];
    let mut mpa_done = [false, false];
    let mut out = Vec::new();
    for (c2s, chunk) in log {
        let d = usize::from(*c2s);
        bufs[d].extend_from_slice(chunk);
        loop {
            let b = &bufs[d];
            let need = if !mpa_done[d] {
                if b.len() < 20 {
                    break;
                }
                20 + usize::from(u16::from_be_bytes([b[18], b[19]]))
            } else {
                if b.len() < 2 {
                    break;
                }
                let u = usize::from(u16::from_be_bytes([b[0], b[1]]));
                2 + u + (4 - (2 + u) % 4) % 4 + 4
            };
            if b.len() < need {
                break;
            }
            out.push((*c2s, bufs[d][..need].to_vec()));
            bufs[d].drain(..need);
            mpa_done[d] = true;
        }
    }
    assert!(
        bufs.iter().all(|b| b.is_empty()),
        "trailing bytes that are not a whole FPDU: {:?}",
        bufs.iter().map(|b| b.len()).collect::<Vec<_>>()
    );
    out
}

// ------------------------------------------------------------------ pcap

fn csum(parts: &[&[u8]]) -> u16 {
    let mut s: u32 = 0;
    for p in parts {
        for ch in p.chunks(2) {
            let w = if ch.len() == 2 {
                u16::from_be_bytes([ch[0], ch[1]])
            } else {
                u16::from_be_bytes([ch[0], 0])
            };
            s += u32::from(w);
        }
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;

/// A pcap (Ethernet link type) of one TCP connection 10.0.0.1:CLIENT_PORT to
/// 10.0.0.2:`server_port`.
struct Pcap {
    out: Vec<u8>,
    server_port: u16,
    seq: [u32; 2],
    usec: u32,
    sec: u32,
}

impl Pcap {
    fn new(server_port: u16) -> Pcap {
        let mut out = Vec::new();
        out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&0i32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&65535u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        Pcap {
            out,
            server_port,
            seq: [0x1000_0000, 0x2000_0000],
            usec: 0,
            sec: 0,
        }
    }

    /// Appends a segment from the client (`c2s`) or the server.
    fn segment(&mut self, c2s: bool, flags: u8, data: &[u8]) {
        let (d, o) = if c2s { (0, 1) } else { (1, 0) };
        let (sip, dip) = if c2s {
            ([10, 0, 0, 1], [10, 0, 0, 2])
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1])
        };
        let (sp, dp) = if c2s {
            (CLIENT_PORT, self.server_port)
        } else {
            (self.server_port, CLIENT_PORT)
        };
        let mut tcp = Vec::with_capacity(20 + data.len());
        tcp.extend_from_slice(&sp.to_be_bytes());
        tcp.extend_from_slice(&dp.to_be_bytes());
        tcp.extend_from_slice(&self.seq[d].to_be_bytes());
        let ack = if flags & ACK != 0 { self.seq[o] } else { 0 };
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.push(5 << 4);
        tcp.push(flags);
        tcp.extend_from_slice(&65535u16.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(data);
        let tlen = tcp.len() as u16;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&sip);
        pseudo.extend_from_slice(&dip);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&tlen.to_be_bytes());
        let c = csum(&[&pseudo, &tcp]);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(20 + tlen).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&sip);
        ip.extend_from_slice(&dip);
        let c = csum(&[&ip]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut eth = vec![2, 0, 0, 0, 0, 2 - d as u8, 2, 0, 0, 0, 0, 1 + d as u8];
        eth.extend_from_slice(&[0x08, 0x00]);
        let len = (eth.len() + ip.len() + tcp.len()) as u32;
        self.usec += 10;
        if self.usec >= 1_000_000 {
            self.usec -= 1_000_000;
            self.sec += 1;
        }
        self.out.extend_from_slice(&self.sec.to_le_bytes());
        self.out.extend_from_slice(&self.usec.to_le_bytes());
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(&eth);
        self.out.extend_from_slice(&ip);
        self.out.extend_from_slice(&tcp);
        let adv = data.len() as u32 + u32::from(flags & (SYN | FIN) != 0);
        self.seq[d] = self.seq[d].wrapping_add(adv);
    }
}

/// The MSS the provider sizes FPDUs for on loopback.
pub const MSS: usize = 1448;

/// A session's wire written as a pcap for tshark.
pub struct Capture {
    /// Holds the capture (and whatever else a test writes beside it).
    pub dir: tempfile::TempDir,
    /// The pcap.
    pub path: PathBuf,
    /// The MPA frames and FPDUs, in the order the relay saw them complete.
    pub segs: Vec<(bool, Vec<u8>)>,
}

/// Cuts `log` into MPA frames and FPDUs (each must fit one [`MSS`]-sized
/// segment), writes them to `<tempdir>/<file>`, and copies the capture into the
/// directory `SMBX_KEEP_PCAP` names, if set.
pub fn capture(name: &str, file: &str, log: &[(bool, Vec<u8>)]) -> Capture {
    let segs = segments(log);
    for (c2s, seg) in &segs {
        assert!(
            seg.len() <= MSS,
            "{name}: a {}-byte FPDU from the {} does not fit one {MSS}-byte segment",
            seg.len(),
            if *c2s { "client" } else { "server" }
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    write_pcap(&path, &segs);
    if let Some(keep) = std::env::var_os("SMBX_KEEP_PCAP") {
        let _ = std::fs::copy(&path, Path::new(&keep).join(file));
    }
    Capture { dir, path, segs }
}

/// Writes `segs` (client to server?, bytes) as one TCP connection, with
/// handshake and teardown, one TCP segment each.
pub fn write_pcap(path: &Path, segs: &[(bool, Vec<u8>)]) {
    write_pcap_port(path, segs, SERVER_PORT)
}

/// [`write_pcap`] with the server on `server_port`.
pub fn write_pcap_port(path: &Path, segs: &[(bool, Vec<u8>)], server_port: u16) {
    let mut p = Pcap::new(server_port);
    p.segment(true, SYN, &[]);
    p.segment(false, SYN | ACK, &[]);
    p.segment(true, ACK, &[]);
    for (c2s, data) in segs {
        p.segment(*c2s, PSH | ACK, data);
    }
    p.segment(true, FIN | ACK, &[]);
    p.segment(false, FIN | ACK, &[]);
    p.segment(true, ACK, &[]);
    std::fs::write(path, &p.out).unwrap();
}

// ------------------------------------------------------------------ tshark

/// The options of spec section 4.
pub const TSHARK_OPTS: [&str; 6] = [
    "-o",
    "tcp.try_heuristic_first:TRUE",
    "--enable-heuristic",
    "iwarp_mpa_tcp",
    "--enable-heuristic",
    "smb_direct_iwarp",
];

/// Runs tshark two-pass over `cap` with the spec's options and `extra`.
pub fn run_tshark(cap: &Path, extra: &[&str]) -> String {
    let o = Command::new(tshark())
        .arg("-2")
        .arg("-r")
        .arg(cap)
        .args(TSHARK_OPTS)
        .args(extra)
        .output()
        .expect("run tshark");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tshark failed: {err}");
    String::from_utf8(o.stdout).expect("tshark output is UTF-8")
}

/// One decoded packet, as tshark printed it.
#[derive(Debug)]
pub struct Row {
    /// Sent by the client.
    pub c2s: bool,
    /// frame.number, then the fields asked for.
    pub f: Vec<String>,
    names: Vec<&'static str>,
}

impl Row {
    /// The value of field `name` (empty when absent).
    pub fn get(&self, name: &str) -> &str {
        let i = self
            .names
            .iter()
            .position(|f| *f == name)
            .unwrap_or_else(|| panic!("field {name} not asked for"));
        &self.f[i + 1]
    }
}

/// Decodes `cap` into one row per frame with `fields` (which must include
/// `tcp.srcport`); several occurrences of a field in one frame are joined
/// with commas.
pub fn decode(cap: &Path, fields: &[&'static str]) -> Vec<Row> {
    let mut args = vec![
        "-T",
        "fields",
        "-E",
        "separator=;",
        "-E",
        "aggregator=,",
        "-e",
        "frame.number",
    ];
    for f in fields {
        args.push("-e");
        args.push(f);
    }
    let src = fields
        .iter()
        .position(|f| *f == "tcp.srcport")
        .expect("tcp.srcport among the fields");
    run_tshark(cap, &args)
        .lines()
        .map(|l| {
            let f: Vec<String> = l.split(';').map(str::to_string).collect();
            assert_eq!(f.len(), fields.len() + 1, "{l}");
            Row {
                c2s: f[src + 1] == CLIENT_PORT.to_string(),
                f,
                names: fields.to_vec(),
            }
        })
        .collect()
}

/// Parses a tshark number (decimal or 0x hex).
pub fn num(s: &str) -> u64 {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("hex {s}"))
    } else {
        s.parse().unwrap_or_else(|_| panic!("number {s:?}"))
    }
}

/// Parses a tshark boolean.
pub fn flag(s: &str) -> u8 {
    match s {
        "1" | "True" | "true" => 1,
        "0" | "False" | "false" => 0,
        o => panic!("flag {o:?}"),
    }
}

/// The expert summary of `cap` must show nothing malformed, no errors and
/// no warnings; returns it.
pub fn assert_expert_clean(name: &str, cap: &Path) -> String {
    let expert = run_tshark(cap, &["-q", "-z", "expert"]);
    assert!(
        !expert.contains("Malformed"),
        "{name}: malformed packets:\n{expert}"
    );
    assert!(
        !expert.lines().any(|l| l.starts_with("Errors")),
        "{name}: expert errors:\n{expert}"
    );
    assert!(
        !expert.lines().any(|l| l.starts_with("Warns")),
        "{name}: expert warnings:\n{expert}"
    );
    expert
}

/// Counts "Good CRC32" and "Bad CRC32" in tshark's verbose output of `cap`.
pub fn crc_counts(cap: &Path) -> (usize, usize) {
    let verbose = run_tshark(cap, &["-V"]);
    (
        verbose.matches("Good CRC32").count(),
        verbose.matches("Bad CRC32").count(),
    )
}

/// Checks every FPDU's MPA CRC as tshark decoded it against the CRC that was sent
/// (the last 4 bytes of its segment): the value, checked (`iwarp_mpa.crc_check`),
/// when CRC was negotiated; zero and unchecked (`iwarp_mpa.crc`) otherwise; then
/// tshark's Good/Bad CRC32 counts. `rows[i]` is the decode of `segs[i]`; MPA
/// frames are skipped. Returns (FPDUs, good, bad).
pub fn assert_fpdu_crcs(
    name: &str,
    cap: &Path,
    rows: &[&Row],
    segs: &[(bool, Vec<u8>)],
    crc: bool,
) -> (usize, usize, usize) {
    let mut fpdus = 0;
    for (i, r) in rows.iter().enumerate() {
        if !r.get("iwarp_mpa.rev").is_empty() {
            continue;
        }
        fpdus += 1;
        let seg = &segs[i].1;
        let sent = u32::from_be_bytes(seg[seg.len() - 4..].try_into().unwrap());
        let (check, plain) = (r.get("iwarp_mpa.crc_check"), r.get("iwarp_mpa.crc"));
        if crc {
            assert_ne!(sent, 0, "{name}: frame {}: CRC not computed", r.f[0]);
            assert_eq!(
                (check, plain),
                (format!("{sent:#010x}").as_str(), ""),
                "{name}: frame {}: CRC checked",
                r.f[0]
            );
        } else {
            assert_eq!(
                (check, plain),
                ("", "0x00000000"),
                "{name}: frame {}: no CRC check without negotiated CRC",
                r.f[0]
            );
        }
    }
    let (good, bad) = crc_counts(cap);
    assert_eq!(bad, 0, "{name}: tshark reports {bad} Bad CRC32");
    assert_eq!(
        good,
        if crc { fpdus } else { 0 },
        "{name}: Good CRC32 count"
    );
    (fpdus, good, bad)
}
