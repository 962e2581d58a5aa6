//! Test-side DCE/RPC client: an independent NDR writer/reader and PDU builders, written
//! from C706 / [MS-RPCE] / [MS-SRVS] rather than from the crate's code.
#![allow(dead_code)]

use smbx_rpc::{Pipe, PipeContext, ShareInfo};

pub const SRVSVC: [u8; 16] = [
    0xc8, 0x4f, 0x32, 0x4b, 0x70, 0x16, 0xd3, 0x01, 0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1, 0x88,
];
pub const WKSSVC: [u8; 16] = [
    0x98, 0xd0, 0xff, 0x6b, 0x12, 0xa1, 0x10, 0x36, 0x98, 0x33, 0x46, 0xc3, 0xf8, 0x7e, 0x34, 0x5a,
];
pub const NDR: [u8; 16] = [
    0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48, 0x60,
];
/// 71710533-beba-4937-8319-b5dbef9ccc36
pub const NDR64: [u8; 16] = [
    0x33, 0x05, 0x71, 0x71, 0xba, 0xbe, 0x37, 0x49, 0x83, 0x19, 0xb5, 0xdb, 0xef, 0x9c, 0xcc, 0x36,
];
/// 6cb71c2c-9812-4540-0300-000000000000
pub const BTFN: [u8; 16] = [
    0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

pub fn ctx_with(shares: Vec<ShareInfo>) -> PipeContext {
    PipeContext {
        server_name: "SMBX".into(),
        domain: "WORKGROUP".into(),
        shares,
        user: "alice".into(),
        shares_denied: false,
    }
}

pub fn share(name: &str, t: u32, comment: &str, path: &str) -> ShareInfo {
    ShareInfo {
        name: name.into(),
        share_type: t,
        comment: comment.into(),
        path: path.into(),
    }
}

pub fn default_ctx() -> PipeContext {
    ctx_with(vec![
        share("public", 0, "Public files", "/srv/public"),
        share("home", 0, "", "/home/alice"),
        share("IPC$", 0x8000_0003, "IPC Service", ""),
    ])
}

/// Independent little-endian NDR writer with explicit alignment.
#[derive(Default)]
pub struct Ndr {
    pub b: Vec<u8>,
    next_ref: u32,
}

impl Ndr {
    pub fn new() -> Self {
        Ndr {
            b: Vec::new(),
            next_ref: 0x1000,
        }
    }
    pub fn pad4(&mut self) -> &mut Self {
        while !self.b.len().is_multiple_of(4) {
            self.b.push(0);
        }
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.pad4();
        self.b.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn referent(&mut self) -> &mut Self {
        self.next_ref += 8;
        let r = self.next_ref;
        self.u32(r)
    }
    /// Conformant varying wide string, NUL-terminated.
    pub fn wstr(&mut self, s: &str) -> &mut Self {
        let u: Vec<u16> = s.encode_utf16().chain([0]).collect();
        self.u32(u.len() as u32).u32(0).u32(u.len() as u32);
        for c in u {
            self.b.extend_from_slice(&c.to_le_bytes());
        }
        self
    }
}

/// PDU common header with frag_length patched by `finish`.
pub fn hdr(ptype: u8, flags: u8, call_id: u32) -> Vec<u8> {
    let mut v = vec![5, 0, ptype, flags, 0x10, 0, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&call_id.to_le_bytes());
    v
}

pub fn finish(mut v: Vec<u8>) -> Vec<u8> {
    let n = v.len() as u16;
    v[8..10].copy_from_slice(&n.to_le_bytes());
    v
}

/// One offered presentation context: (id, abstract uuid, version, transfer syntaxes).
pub type Offer = (u16, [u8; 16], u32, Vec<([u8; 16], u32)>);

/// A bind/alter_context offering `ctxs` = (context id, abstract uuid, version, transfer syntaxes).
pub fn bind_pdu(ptype: u8, call_id: u32, max_recv: u16, ctxs: &[Offer]) -> Vec<u8> {
    let mut v = hdr(ptype, 3, call_id);
    v.extend_from_slice(&4280u16.to_le_bytes());
    v.extend_from_slice(&max_recv.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&[ctxs.len() as u8, 0, 0, 0]);
    for (id, uuid, ver, ts) in ctxs {
        v.extend_from_slice(&id.to_le_bytes());
        v.extend_from_slice(&[ts.len() as u8, 0]);
        v.extend_from_slice(uuid);
        v.extend_from_slice(&ver.to_le_bytes());
        for (t, tv) in ts {
            v.extend_from_slice(t);
            v.extend_from_slice(&tv.to_le_bytes());
        }
    }
    finish(v)
}

pub fn srvsvc_bind(call_id: u32, max_recv: u16) -> Vec<u8> {
    bind_pdu(11, call_id, max_recv, &[(0, SRVSVC, 3, vec![(NDR, 2)])])
}

/// A single-fragment request.
pub fn request(call_id: u32, ctx: u16, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let mut v = hdr(0, 3, call_id);
    v.extend_from_slice(&(stub.len() as u32).to_le_bytes());
    v.extend_from_slice(&ctx.to_le_bytes());
    v.extend_from_slice(&opnum.to_le_bytes());
    v.extend_from_slice(stub);
    finish(v)
}

/// NetrShareEnum stub: ServerName "\\127.0.0.1", level/container with null buffer,
/// PreferedMaximumLength, optional resume handle.
pub fn share_enum_stub(level: u32, pref_max: u32, resume: Option<u32>) -> Vec<u8> {
    let mut n = Ndr::new();
    n.referent().wstr("\\\\127.0.0.1");
    n.u32(level).u32(level); // Level, union switch
    n.referent(); // container pointer
    n.u32(0).u32(0); // EntriesRead = 0, Buffer = NULL
    n.u32(pref_max);
    match resume {
        Some(r) => {
            n.referent().u32(r);
        }
        None => {
            n.u32(0);
        }
    }
    n.b
}

pub fn get_info_stub(name: &str, level: u32) -> Vec<u8> {
    let mut n = Ndr::new();
    n.referent().wstr("\\\\127.0.0.1");
    n.wstr(name);
    n.u32(level);
    n.b
}

pub fn server_get_info_stub(level: u32) -> Vec<u8> {
    let mut n = Ndr::new();
    n.u32(0); // ServerName = NULL
    n.u32(level);
    n.b
}

/// Drains every queued response PDU.
pub fn read_all(p: &mut Pipe) -> Vec<Vec<u8>> {
    let mut pdus = Vec::new();
    while p.pending() > 0 {
        let mut msg = Vec::new();
        loop {
            let (b, more) = p.read(100_000);
            msg.extend_from_slice(&b);
            if !more {
                break;
            }
        }
        pdus.push(msg);
    }
    pdus
}

pub fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
pub fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

/// Opens srvsvc, binds (context 0) and checks the bind_ack accepted it.
pub fn bound_srvsvc(ctx: PipeContext) -> Pipe {
    let mut p = Pipe::open("srvsvc", ctx).unwrap();
    p.write(&srvsvc_bind(1, 4280)).unwrap();
    let acks = read_all(&mut p);
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0][2], 12, "bind_ack");
    p
}

/// Sends a request and reassembles the response stub; `Err(status)` for a fault.
pub fn call(p: &mut Pipe, call_id: u32, opnum: u16, stub: &[u8]) -> Result<Vec<u8>, u32> {
    p.write(&request(call_id, 0, opnum, stub)).unwrap();
    let pdus = read_all(p);
    let mut out = Vec::new();
    for (i, pdu) in pdus.iter().enumerate() {
        assert_eq!(u32_at(pdu, 12), call_id);
        assert_eq!(u16_at(pdu, 8) as usize, pdu.len());
        match pdu[2] {
            3 => {
                assert_eq!(pdus.len(), 1);
                return Err(u32_at(pdu, 24));
            }
            2 => {
                assert_eq!(pdu[3] & 1 != 0, i == 0, "FIRST_FRAG");
                assert_eq!(pdu[3] & 2 != 0, i + 1 == pdus.len(), "LAST_FRAG");
                out.extend_from_slice(&pdu[24..]);
            }
            t => panic!("unexpected ptype {t}"),
        }
    }
    Ok(out)
}

/// Independent NDR reader for responses.
pub struct Rd<'a> {
    pub b: &'a [u8],
    pub pos: usize,
}

impl<'a> Rd<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Rd { b, pos: 0 }
    }
    pub fn u32(&mut self) -> u32 {
        self.pos = self.pos.div_ceil(4) * 4;
        let v = u32_at(self.b, self.pos);
        self.pos += 4;
        v
    }
    pub fn wstr(&mut self) -> String {
        let max = self.u32();
        let off = self.u32();
        let act = self.u32();
        assert_eq!(off, 0);
        assert_eq!(max, act);
        let units: Vec<u16> = (0..act as usize)
            .map(|i| u16_at(self.b, self.pos + 2 * i))
            .collect();
        self.pos += 2 * act as usize;
        assert_eq!(units.last(), Some(&0), "NUL-terminated");
        String::from_utf16(&units[..units.len() - 1]).unwrap()
    }
    pub fn done(&self) {
        assert_eq!(self.pos, self.b.len(), "trailing bytes in stub");
    }
}
