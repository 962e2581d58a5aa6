//! Stable-Rust fuzzing of the MPA and FPDU decoders: random bytes, every
//! truncation and seeded mutations of valid frames must never panic; the
//! decoders answer with a frame, "need more bytes", or an error (whose
//! Terminate triple is one the provider defines).
//!
//! `SMBX_FUZZ_ITERS` sets the mutation count per seed (default 3000).

use smbx_rdma::iwarp::ddp::{self, op, qn, term, DdpHdr, ReadReq};
use smbx_rdma::iwarp::mpa::{self, MpaFrame, RequestInfo};
use smbx_rdma::iwarp::Rtr;

/// xorshift64* with a small set of structure-aware mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn mutate(&mut self, input: &[u8]) -> Vec<u8> {
        const EDGE: [u16; 9] = [0, 1, 3, 13, 14, 17, 18, 0x7FFF, 0xFFFF];
        let mut v = input.to_vec();
        for _ in 0..1 + self.below(4) {
            match self.below(6) {
                0 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] ^= 1 << self.below(8);
                }
                1 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] = self.next() as u8;
                }
                // Length-like fields are big-endian u16s on the wire.
                2 if v.len() >= 2 => {
                    let i = self.below(v.len() - 1);
                    let x = EDGE[self.below(EDGE.len())];
                    v[i..i + 2].copy_from_slice(&x.to_be_bytes());
                }
                3 => {
                    let n = self.below(v.len() + 1);
                    v.truncate(n);
                }
                4 => {
                    let at = self.below(v.len() + 1);
                    let k = 1 + self.below(8);
                    let b = self.bytes(k);
                    v.splice(at..at, b);
                }
                _ if !v.is_empty() => {
                    let at = self.below(v.len());
                    let n = 1 + self.below(v.len() - at);
                    v.drain(at..at + n);
                }
                _ => {}
            }
        }
        v
    }
}

fn iters() -> usize {
    std::env::var("SMBX_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

// ------------------------------------------------------------------ MPA

fn mpa_seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let frames = [
        mpa::build_request(2, true, 8, 4, None, b"client-hello"),
        mpa::build_request(2, false, 32, 1, Some(Rtr::Read), &[0, 0, 0, 8, 0, 0, 0, 8]),
        mpa::build_request(1, true, 0, 0, None, b""),
        mpa::accept_request(
            &RequestInfo::from_frame(&mpa::build_request(2, true, 8, 4, Some(Rtr::Send), b"")),
            true,
            16,
            16,
            b"server-hi",
        )
        .reply,
        mpa::reject_reply(2, b"no"),
        mpa::reject_reply(1, b""),
    ];
    for f in frames {
        let mut b = Vec::new();
        f.encode(&mut b);
        v.push(b);
    }
    v
}

/// Decode as both kinds, check what decodes, and push it through the
/// setup logic.
fn mpa_one(data: &[u8]) {
    for reply in [false, true] {
        match MpaFrame::decode(data, reply) {
            Ok(Some((f, n))) => {
                assert!(n <= data.len() && n >= 20);
                assert_eq!(f.reply, reply);
                let mut again = Vec::new();
                f.encode(&mut again);
                assert_eq!(again, data[..n], "re-encoding is exact");
                let info = RequestInfo::from_frame(&f);
                assert!(info.ird <= mpa::IRD_ORD_MASK && info.ord <= mpa::IRD_ORD_MASK);
                let _ = mpa::accept_request(&info, true, 8, 8, b"x");
                for (rev, rtr) in [(1, None), (2, None), (2, Some(Rtr::Read))] {
                    let _ = mpa::read_reply(&f, rev, false, 8, rtr);
                }
            }
            Ok(None) => assert!(data.len() < 20 + mpa::MAX_WIRE_PRIVATE_DATA),
            Err(_) => {}
        }
    }
}

#[test]
fn mpa_decoder_random_bytes() {
    let mut r = Rng(0x5EED_0001);
    for _ in 0..iters() * 4 {
        let n = r.below(600);
        let mut b = r.bytes(n);
        // Half of them with a valid key so the later checks are reached.
        if r.below(2) == 0 && b.len() >= 18 {
            let key = if r.below(2) == 0 {
                mpa::KEY_REQ
            } else {
                mpa::KEY_REP
            };
            b[..16].copy_from_slice(key);
            b[17] = 1 + r.below(2) as u8;
        }
        mpa_one(&b);
    }
}

#[test]
fn mpa_decoder_truncations_and_mutations() {
    let mut r = Rng(0x5EED_0002);
    for seed in mpa_seeds() {
        for n in 0..=seed.len() {
            mpa_one(&seed[..n]);
            // A truncated valid frame is never an error, only "need more".
            let reply = &seed[..16] == mpa::KEY_REP;
            assert_eq!(
                MpaFrame::decode(&seed[..n], reply).unwrap().is_none(),
                n < seed.len(),
                "prefix {n}"
            );
        }
        for _ in 0..iters() {
            mpa_one(&r.mutate(&seed));
        }
    }
}

// ------------------------------------------------------------------ FPDU

fn fpdu_seeds() -> Vec<Vec<u8>> {
    let untagged = |opcode, q, msn, mo, inv| DdpHdr::Untagged {
        last: true,
        opcode,
        inv_stag: inv,
        qn: q,
        msn,
        mo,
    };
    let rreq = ReadReq {
        sink_stag: 0x100,
        sink_to: 0x1000,
        size: 4096,
        src_stag: 0x200,
        src_to: 0x2000,
    }
    .encode();
    let mut tbody = [0u8; 24];
    let tn = ddp::terminate_body(term::DDP_UT_NO_BUFFER, None, &mut tbody);
    let msgs: Vec<(DdpHdr, Vec<u8>)> = vec![
        (untagged(op::SEND, qn::SEND, 1, 0, 0), b"hello".to_vec()),
        (untagged(op::SEND_SE_INV, qn::SEND, 7, 3, 0x42), vec![]),
        (untagged(op::READ_REQ, qn::READ, 1, 0, 0), rreq.to_vec()),
        (
            untagged(op::TERMINATE, qn::TERMINATE, 1, 0, 0),
            tbody[..tn].to_vec(),
        ),
        (
            DdpHdr::Tagged {
                last: false,
                opcode: op::WRITE,
                stag: 0x1234,
                to: 0xdead_beef,
            },
            vec![0xAB; 100],
        ),
        (
            DdpHdr::Tagged {
                last: true,
                opcode: op::READ_RESP,
                stag: 1,
                to: 0,
            },
            vec![],
        ),
    ];
    let mut v = Vec::new();
    for (h, p) in &msgs {
        for crc in [true, false] {
            let mut b = Vec::new();
            ddp::encode_fpdu(&mut b, h, &[p], crc);
            v.push(b);
        }
    }
    // Two FPDUs back to back.
    let mut two = v[0].clone();
    two.extend_from_slice(&v[4]);
    v.push(two);
    // A large FPDU (the long form of the length) and a Send behind it.
    let mut long = Vec::new();
    let h = DdpHdr::Tagged {
        last: true,
        opcode: op::WRITE,
        stag: 0x1234,
        to: 0,
    };
    ddp::encode_fpdu(&mut long, &h, &[&[0x5A; 70_000]], false);
    long.extend_from_slice(&v[1]);
    v.push(long);
    v
}

/// Every error triple the FPDU decoder may produce.
const DECODE_ERRORS: [smbx_rdma::TermInfo; 5] = [
    term::MPA_FPDU_START,
    term::MPA_CRC,
    term::DDP_T_VERSION,
    term::DDP_UT_VERSION,
    term::RDMAP_VERSION,
];

fn fpdu_one(data: &[u8]) {
    let large = Some(smbx_rdma::iwarp::LARGE_ULPDU as usize);
    for (crc, long) in [(true, None), (false, None), (true, large), (false, large)] {
        let mut rest = data;
        if let Ok(Some((h, ulpdu))) = ddp::decode_header(rest, long) {
            assert!(ulpdu >= h.len() && ulpdu <= long.unwrap_or(ddp::MPA_MAX_ULPDU));
        }
        // Walk the stream as the engine does.
        for _ in 0..64 {
            match ddp::decode_fpdu_long(rest, crc, long) {
                Ok(Some(f)) => {
                    assert!(f.wire_len <= rest.len());
                    assert_eq!(f.wire_len % 4, 0);
                    assert!(f.payload.len() + f.hdr.len() + 6 <= f.wire_len);
                    if let DdpHdr::Untagged { opcode, .. } = f.hdr {
                        if opcode == op::READ_REQ {
                            let _ = ReadReq::decode(f.payload);
                        }
                        if opcode == op::TERMINATE {
                            let _ = ddp::parse_terminate(f.payload);
                        }
                    }
                    rest = &rest[f.wire_len..];
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(DECODE_ERRORS.contains(&e.term), "{:?}", e.term);
                    break;
                }
            }
        }
    }
}

#[test]
fn fpdu_decoder_random_bytes() {
    let mut r = Rng(0x5EED_0003);
    for _ in 0..iters() * 4 {
        let n = r.below(200);
        let mut b = r.bytes(n);
        // Often a plausible length and control bytes, to get past framing.
        if r.below(2) == 0 && b.len() >= 4 {
            let u = (b.len().saturating_sub(6) & !3) as u16 + 2;
            b[..2].copy_from_slice(&u.to_be_bytes());
            b[2] = (b[2] & 0xC0) | 1;
            b[3] = 0x40 | (b[3] & 0x0F);
        }
        fpdu_one(&b);
    }
}

#[test]
fn fpdu_decoder_truncations_and_mutations() {
    let mut r = Rng(0x5EED_0004);
    for seed in fpdu_seeds() {
        for n in 0..=seed.len() {
            fpdu_one(&seed[..n]);
        }
        for _ in 0..iters() {
            fpdu_one(&r.mutate(&seed));
        }
    }
    // With CRC on, any single bit flip of a valid FPDU is caught.
    let seed = &fpdu_seeds()[0];
    for i in 0..seed.len() * 8 {
        let mut b = seed.clone();
        b[i / 8] ^= 1 << (i % 8);
        match ddp::decode_fpdu(&b, true) {
            Err(_) | Ok(None) => {}
            Ok(Some(f)) => panic!("bit {i} flipped and decoded: {f:?}"),
        }
    }
}
