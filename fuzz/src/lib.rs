//! Fuzz targets for the smbx decoders: every SMB2 request decoder of `smbx-wire`, the
//! create/negotiate context chains, FSCTL payloads, SET_INFO classes, NTLMSSP and
//! SPNEGO, DCE/RPC pipe input, the iWARP MPA/FPDU decoders and the whole iWARP
//! connection engine of `smbx-rdma`, and the SMB Direct PDUs and connection
//! state machine of `smbx-direct`.
//! Each target takes arbitrary bytes and must never
//! panic, loop forever or allocate without bound.
//!
//! The same functions back the libFuzzer binaries in `fuzz_targets/` (nightly,
//! `cargo fuzz`) and the stable `cargo test` harness in `tests/seeds.rs`, which runs
//! every seed of `corpus/<target>/` and thousands of mutations of each.

pub mod direct;
pub mod iwarp_engine;
pub mod seedgen;

pub use direct::{direct_connection, direct_pdu};
pub use iwarp_engine::iwarp_engine;

use smbx_wire::codec::Reader;
use smbx_wire::HEADER_SIZE;

/// A fuzz target: its name (also its corpus directory) and entry point.
pub struct Target {
    /// Name; `corpus/<name>/` holds its seeds.
    pub name: &'static str,
    /// Entry point.
    pub run: fn(&[u8]),
    /// Extra seed directories shared with other targets.
    pub also_seeds: &'static [&'static str],
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "header",
        run: header,
        also_seeds: &["frame"],
    },
    Target {
        name: "frame",
        run: frame,
        also_seeds: &[],
    },
    Target {
        name: "negotiate",
        run: negotiate,
        also_seeds: &[],
    },
    Target {
        name: "session_setup",
        run: session_setup,
        also_seeds: &[],
    },
    Target {
        name: "tree_connect",
        run: tree_connect,
        also_seeds: &[],
    },
    Target {
        name: "create",
        run: create,
        also_seeds: &[],
    },
    Target {
        name: "close",
        run: close_flush,
        also_seeds: &[],
    },
    Target {
        name: "read",
        run: read_write,
        also_seeds: &["write"],
    },
    Target {
        name: "lock",
        run: lock,
        also_seeds: &[],
    },
    Target {
        name: "ioctl",
        run: ioctl,
        also_seeds: &[],
    },
    Target {
        name: "fsctl_input",
        run: fsctl_input,
        also_seeds: &[],
    },
    Target {
        name: "query_directory",
        run: query_directory,
        also_seeds: &[],
    },
    Target {
        name: "query_info",
        run: query_info,
        also_seeds: &[],
    },
    Target {
        name: "set_info",
        run: set_info,
        also_seeds: &[],
    },
    Target {
        name: "change_notify",
        run: change_notify,
        also_seeds: &["header"],
    },
    Target {
        name: "oplock_break",
        run: oplock_break,
        also_seeds: &["header"],
    },
    Target {
        name: "spnego",
        run: spnego,
        also_seeds: &[],
    },
    Target {
        name: "ntlm",
        run: ntlm,
        also_seeds: &[],
    },
    Target {
        name: "rpc_pipe",
        run: rpc_pipe,
        also_seeds: &["fsctl_input", "write"],
    },
    Target {
        name: "iwarp_mpa",
        run: iwarp_mpa,
        also_seeds: &[],
    },
    Target {
        name: "iwarp_fpdu",
        run: iwarp_fpdu,
        also_seeds: &[],
    },
    Target {
        name: "iwarp_engine",
        run: iwarp_engine,
        also_seeds: &[],
    },
    Target {
        name: "direct_pdu",
        run: direct_pdu,
        also_seeds: &[],
    },
    Target {
        name: "direct_connection",
        run: direct_connection,
        also_seeds: &[],
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// SMB2 header decoding, plus re-encoding what decoded.
pub fn header(data: &[u8]) {
    if let Ok(h) = smbx_wire::Header::decode(data) {
        let mut w = smbx_wire::Writer::new();
        h.encode(&mut w);
        let again = smbx_wire::Header::decode(w.as_slice()).expect("re-encoded header decodes");
        assert_eq!(again.command, h.command);
        let _ = h.cmd();
    }
}

/// A whole transport frame: 4-byte Direct TCP header, SMB1 detection, compound split by
/// NextCommand, and every request decoder on every member.
pub fn frame(data: &[u8]) {
    if data.len() >= 4 {
        let hdr = [data[0], data[1], data[2], data[3]];
        let _ = smbx_wire::framing::decode_frame_header(hdr, 16 << 20);
    }
    if smbx_wire::smb1::is_smb1(data) {
        let _ = smbx_wire::smb1::parse_negotiate(data);
        return;
    }
    let mut off = 0usize;
    for _ in 0..64 {
        let Some(rest) = data.get(off..) else { return };
        let Ok(h) = smbx_wire::Header::decode(rest) else {
            return;
        };
        let next = h.next_command as usize;
        let msg = if next == 0 {
            rest
        } else {
            rest.get(..next).unwrap_or(rest)
        };
        all_requests(msg);
        if next == 0 || next < HEADER_SIZE {
            return;
        }
        off = match off.checked_add(next) {
            Some(o) => o,
            None => return,
        };
    }
}

fn all_requests(msg: &[u8]) {
    negotiate(msg);
    session_setup(msg);
    tree_connect(msg);
    create(msg);
    close_flush(msg);
    read_write(msg);
    lock(msg);
    ioctl(msg);
    query_directory(msg);
    query_info(msg);
    set_info(msg);
    change_notify(msg);
    oplock_break(msg);
    let _ = smbx_wire::simple::decode_simple(msg);
    let _ = smbx_wire::error::ErrorResponse::decode(msg);
}

/// NEGOTIATE request, its 3.1.1 contexts, and the response decoder.
pub fn negotiate(msg: &[u8]) {
    let _ = smbx_wire::negotiate::NegotiateRequest::decode(msg);
    let _ = smbx_wire::negotiate::NegotiateResponse::decode(msg);
    // Arbitrary context offsets/counts taken from the input itself.
    if msg.len() >= 8 {
        let mut r = Reader::new(msg);
        let off = r.u32().unwrap_or(0) as usize;
        let count = r.u16().unwrap_or(0) as usize;
        let _ = smbx_wire::negotiate::decode_contexts(msg, off, count);
    }
}

/// SESSION_SETUP request and response.
pub fn session_setup(msg: &[u8]) {
    let _ = smbx_wire::session::SessionSetupRequest::decode(msg);
    let _ = smbx_wire::session::SessionSetupResponse::decode(msg);
}

/// TREE_CONNECT request and response.
pub fn tree_connect(msg: &[u8]) {
    let _ = smbx_wire::tree::TreeConnectRequest::decode(msg);
    let _ = smbx_wire::tree::TreeConnectResponse::decode(msg);
}

/// CREATE request with its name and create-context chain; each context through its
/// decoder (the typed `CreateContexts` view at 2.1 and 3.1.1, lease, EA list and
/// security descriptor data).
pub fn create(msg: &[u8]) {
    use smbx_wire::create::CreateContexts;
    use smbx_wire::Dialect;
    if let Ok(req) = smbx_wire::create::CreateRequest::decode(msg) {
        let _ = req.name();
        if let Ok(ctxs) = req.create_contexts() {
            for c in &ctxs {
                let _ = smbx_wire::oplock::decode_lease_request(c.data);
            }
            for d in [Dialect::SMB2_1, Dialect::SMB3_1_1] {
                if let Ok(cx) = CreateContexts::decode(&ctxs, d) {
                    // A reconnect never comes with a version-2 durable request.
                    assert!(!(cx.reconnect.is_some() && cx.durable.is_some_and(|q| q.v2)));
                    if let Some(ea) = cx.ea {
                        if let Ok(list) = smbx_wire::fscc::ea::decode_full_list(ea) {
                            assert!(list.len() <= ea.len() / 9 + 1);
                        }
                    }
                    if let Some(sd) = cx.sd {
                        let _ = smbx_wire::security_descriptor::SecurityDescriptor::decode(sd);
                    }
                }
            }
        }
    }
    let _ = smbx_wire::create::CreateResponse::decode(msg);
    if let Some(body) = msg.get(HEADER_SIZE..) {
        let _ = smbx_wire::create::parse_contexts(body);
    }
}

/// CLOSE and FLUSH.
pub fn close_flush(msg: &[u8]) {
    let _ = smbx_wire::close::CloseRequest::decode(msg);
    let _ = smbx_wire::close::CloseResponse::decode(msg);
    let _ = smbx_wire::close::FlushRequest::decode(msg);
}

/// READ and WRITE requests and responses.
pub fn read_write(msg: &[u8]) {
    let _ = smbx_wire::rw::ReadRequest::decode(msg);
    let _ = smbx_wire::rw::ReadResponse::decode(msg);
    let _ = smbx_wire::rw::WriteRequest::decode(msg);
    let _ = smbx_wire::rw::decode_write_response(msg);
}

/// LOCK.
pub fn lock(msg: &[u8]) {
    let _ = smbx_wire::lock::LockRequest::decode(msg);
}

/// IOCTL request and response; the input buffer through every FSCTL payload decoder.
pub fn ioctl(msg: &[u8]) {
    if let Ok(req) = smbx_wire::ioctl::IoctlRequest::decode(msg) {
        fsctl_input(req.input);
    }
    let _ = smbx_wire::ioctl::IoctlResponse::decode(msg);
}

/// FSCTL input buffers.
pub fn fsctl_input(input: &[u8]) {
    use smbx_wire::ioctl::*;
    for max in [0, 1, 256, u32::MAX] {
        if let Ok(cc) = CopychunkCopy::decode(input, max) {
            assert!(cc.chunks.len() <= max as usize);
            assert!(cc.chunks.len() * CHUNK_LEN <= input.len());
        }
    }
    let _ = CopychunkResponse::decode(input);
    let _ = decode_zero_data(input);
    let _ = decode_allocated_range(input);
}

/// QUERY_DIRECTORY.
pub fn query_directory(msg: &[u8]) {
    let _ = smbx_wire::query_directory::QueryDirectoryRequest::decode(msg);
    let _ = smbx_wire::query_directory::decode_output_response(msg);
}

/// QUERY_INFO.
pub fn query_info(msg: &[u8]) {
    let _ = smbx_wire::query_info::QueryInfoRequest::decode(msg);
}

/// SET_INFO and every information-class decoder on its buffer.
pub fn set_info(msg: &[u8]) {
    use smbx_wire::set_info::*;
    let buf = match SetInfoRequest::decode(msg) {
        Ok(req) => req.buffer,
        Err(_) => msg.get(HEADER_SIZE..).unwrap_or(&[]),
    };
    let _ = FileBasicInfo::decode(buf);
    let _ = FileRenameInfo::decode(buf);
    let _ = decode_disposition(buf);
    let _ = decode_disposition_ex(buf);
    let _ = decode_u64(buf);
    let _ = decode_mode(buf);
    let _ = decode_file_name(buf);
    let _ = decode_full_ea_list(buf);
    let _ = smbx_wire::security_descriptor::SecurityDescriptor::decode(buf);
}

/// CHANGE_NOTIFY request and FILE_NOTIFY_INFORMATION chains.
pub fn change_notify(msg: &[u8]) {
    let _ = smbx_wire::change_notify::ChangeNotifyRequest::decode(msg);
    let _ = smbx_wire::change_notify::decode_notify_entries(msg);
}

/// OPLOCK_BREAK acknowledgments and lease break messages.
pub fn oplock_break(msg: &[u8]) {
    let _ = smbx_wire::oplock::OplockBreak::decode(msg);
    let _ = smbx_wire::oplock::LeaseBreakNotification::decode(msg);
    let _ = smbx_wire::oplock::LeaseBreakAck::decode(msg);
    let _ = smbx_wire::oplock::decode_lease_request(msg);
}

/// SPNEGO tokens, and the NTLMSSP message they may carry.
pub fn spnego(data: &[u8]) {
    let _ = smbx_security::spnego::decode(data);
    if let Some(i) = find(data, b"NTLMSSP\0") {
        ntlm(&data[i..]);
    }
}

/// NTLMSSP NEGOTIATE / CHALLENGE / AUTHENTICATE and AV pairs.
pub fn ntlm(data: &[u8]) {
    use smbx_security::ntlm::*;
    let _ = NegotiateMessage::decode(data);
    let _ = ChallengeMessage::decode(data);
    if let Ok(a) = AuthenticateMessage::decode(data) {
        let _ = a.ntlmv2_av_pairs();
    }
    let _ = AvPairs::decode(data);
    let _ = Ntlmv2Response::decode(data);
}

/// DCE/RPC pipe input (srvsvc and wkssvc), read back in small pieces.
pub fn rpc_pipe(data: &[u8]) {
    for name in ["srvsvc", "wkssvc"] {
        let ctx = smbx_rpc::PipeContext {
            server_name: "FUZZ".into(),
            domain: "WORKGROUP".into(),
            shares: Vec::new(),
            user: "u".into(),
            shares_denied: false,
        };
        let Some(mut p) = smbx_rpc::Pipe::open(name, ctx) else {
            continue;
        };
        // Feed it in two parts to exercise fragment reassembly.
        let cut = data.len() / 2;
        if p.write(&data[..cut]).is_ok() && p.write(&data[cut..]).is_ok() {
            for _ in 0..64 {
                let (out, more) = p.read(97);
                if out.is_empty() && !more {
                    break;
                }
            }
        }
    }
}

/// iWARP MPA Request/Reply frames (`smbx-rdma`), both kinds, and the
/// connection-setup logic on whatever decodes.
pub fn iwarp_mpa(data: &[u8]) {
    use smbx_rdma::iwarp::mpa::{self, MpaFrame, RequestInfo};
    use smbx_rdma::iwarp::Rtr;
    for reply in [false, true] {
        if let Ok(Some((f, n))) = MpaFrame::decode(data, reply) {
            assert!(n <= data.len());
            let mut again = Vec::new();
            f.encode(&mut again);
            assert_eq!(again, data[..n], "re-encoded MPA frame differs");
            let info = RequestInfo::from_frame(&f);
            let _ = mpa::accept_request(&info, true, 8, 8, b"x");
            for (rev, rtr) in [(1, None), (2, None), (2, Some(Rtr::Read))] {
                let _ = mpa::read_reply(&f, rev, false, 8, rtr);
            }
        }
    }
}

/// iWARP FPDU streams (`smbx-rdma`): MPA framing with and without CRC, standard
/// and with smbx's long form allowed (large FPDUs), the DDP/RDMAP headers, Read
/// Request and Terminate bodies.
pub fn iwarp_fpdu(data: &[u8]) {
    use smbx_rdma::iwarp::ddp::{self, op, DdpHdr, ReadReq};
    let large = Some(smbx_rdma::iwarp::LARGE_ULPDU as usize);
    for (crc, long) in [(true, None), (false, None), (true, large), (false, large)] {
        let mut rest = data;
        let _ = ddp::decode_header(rest, long);
        for _ in 0..256 {
            match ddp::decode_fpdu_long(rest, crc, long) {
                Ok(Some(f)) => {
                    assert!(f.wire_len <= rest.len() && f.wire_len % 4 == 0);
                    if let DdpHdr::Untagged { opcode, .. } = f.hdr {
                        if opcode == op::READ_REQ {
                            let _ = ReadReq::decode(f.payload);
                        } else if opcode == op::TERMINATE {
                            let _ = ddp::parse_terminate(f.payload);
                        }
                    }
                    rest = &rest[f.wire_len..];
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A small deterministic mutator (xorshift64*): bit flips, byte sets to interesting
/// values, u16/u32 little-endian overwrites with boundary values, truncation,
/// duplication of a slice, and insertion of random bytes.
pub struct Mutator {
    state: u64,
}

impl Mutator {
    /// A mutator seeded with `seed` (never zero internally).
    pub fn new(seed: u64) -> Mutator {
        Mutator { state: seed | 1 }
    }

    fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// Returns a mutated copy of `input` (at most 64 KiB).
    pub fn mutate(&mut self, input: &[u8]) -> Vec<u8> {
        const INTERESTING: [u32; 12] = [
            0,
            1,
            2,
            7,
            8,
            0x40,
            0x48,
            0x7F,
            0x80,
            0xFFFF,
            0x7FFF_FFFF,
            0xFFFF_FFFF,
        ];
        let mut v = input.to_vec();
        let rounds = 1 + self.below(4);
        for _ in 0..rounds {
            match self.below(7) {
                0 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] ^= 1 << self.below(8);
                }
                1 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] = INTERESTING[self.below(INTERESTING.len())] as u8;
                }
                2 if v.len() >= 2 => {
                    let i = self.below(v.len() - 1);
                    let x = INTERESTING[self.below(INTERESTING.len())] as u16;
                    v[i..i + 2].copy_from_slice(&x.to_le_bytes());
                }
                3 if v.len() >= 4 => {
                    let i = self.below(v.len() - 3);
                    let mut x = INTERESTING[self.below(INTERESTING.len())];
                    if self.below(2) == 0 {
                        x = x.wrapping_add(v.len() as u32);
                    }
                    v[i..i + 4].copy_from_slice(&x.to_le_bytes());
                }
                4 => {
                    let n = self.below(v.len() + 1);
                    v.truncate(n);
                }
                5 if !v.is_empty() && v.len() < 32 * 1024 => {
                    let a = self.below(v.len());
                    let b = a + self.below(v.len() - a);
                    let chunk = v[a..=b.min(v.len() - 1)].to_vec();
                    let at = self.below(v.len() + 1);
                    v.splice(at..at, chunk);
                }
                _ => {
                    let at = self.below(v.len() + 1);
                    let n = 1 + self.below(16);
                    let bytes: Vec<u8> = (0..n).map(|_| self.next() as u8).collect();
                    v.splice(at..at, bytes);
                }
            }
        }
        v.truncate(64 * 1024);
        v
    }
}
