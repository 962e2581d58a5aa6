//! srvsvc / wkssvc calls: request stubs built by hand, responses decoded field by field.
mod common;
use common::*;
use smbx_rpc::Pipe;

#[test]
fn request_stub_layout_is_what_clients_send() {
    // NetrShareEnum as smbclient/impacket marshal it (hand-checked offsets).
    let s = share_enum_stub(1, u32::MAX, Some(0));
    assert_eq!(u32_at(&s, 4), 12); // max_count of "\\127.0.0.1" + NUL
    assert_eq!(u32_at(&s, 12), 12); // actual_count
    assert_eq!(u32_at(&s, 40), 1); // Level
    assert_eq!(u32_at(&s, 44), 1); // union switch
    assert_eq!(u32_at(&s, 52), 0); // EntriesRead
    assert_eq!(u32_at(&s, 56), 0); // Buffer NULL
    assert_eq!(u32_at(&s, 60), u32::MAX); // PreferedMaximumLength
    assert_eq!(u32_at(&s, 68), 0); // *ResumeHandle
    assert_eq!(s.len(), 72);
}

#[test]
fn share_enum_level1_exact_bytes() {
    let ctx = ctx_with(vec![
        share("a", 0, "", "/x"),
        share("IPC$", 0x8000_0003, "IPC", ""),
    ]);
    let mut p = bound_srvsvc(ctx);
    let stub = call(&mut p, 2, 15, &share_enum_stub(1, u32::MAX, Some(0))).unwrap();
    let mut want: Vec<u32> = vec![
        1,
        1,       // Level, switch
        0x20000, // container referent
        2,
        0x20004, // EntriesRead, Buffer referent
        2,       // array max_count
        0x20008,
        0,
        0x2000c, // [0] name ptr, type, remark ptr
        0x20010,
        0x8000_0003,
        0x20014, // [1]
    ];
    let mut bytes: Vec<u8> = want.drain(..).flat_map(u32::to_le_bytes).collect();
    let mut push_str = |s: &str| {
        let u: Vec<u16> = s.encode_utf16().chain([0]).collect();
        for v in [u.len() as u32, 0, u.len() as u32] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        for c in u {
            bytes.extend_from_slice(&c.to_le_bytes());
        }
        while !bytes.len().is_multiple_of(4) {
            bytes.push(0);
        }
    };
    push_str("a");
    push_str("");
    push_str("IPC$");
    push_str("IPC");
    for v in [2u32, 0x20018, 0, 0] {
        // TotalEntries, resume referent, *ResumeHandle, WERROR
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    // Referent ids (0x2xxxx in `want`) may be any non-zero value; all else must match.
    assert_eq!(stub.len(), bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let (g, w) = (u32_at(&stub, i), u32_at(&bytes, i));
        if w & 0xffff_0000 == 0x20000 {
            assert_ne!(g, 0, "referent at {i}");
        } else {
            assert_eq!(g, w, "u32 at offset {i}");
        }
        i += 4;
    }
}

fn enum_level(level: u32) -> (Vec<u8>, Vec<String>) {
    let mut p = bound_srvsvc(default_ctx());
    let stub = call(&mut p, 2, 15, &share_enum_stub(level, u32::MAX, None)).unwrap();
    let mut r = Rd::new(&stub);
    assert_eq!(r.u32(), level);
    assert_eq!(r.u32(), level);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 3);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 3);
    let mut out = Vec::new();
    let fields = match level {
        0 => 1,
        1 => 3,
        2 => 8,
        501 => 4,
        _ => unreachable!(),
    };
    let mut rows = Vec::new();
    for _ in 0..3 {
        rows.push((0..fields).map(|_| r.u32()).collect::<Vec<_>>());
    }
    for row in &rows {
        let ptr_fields: &[usize] = match level {
            0 => &[0],
            1 | 501 => &[0, 2],
            _ => &[0, 2, 6, 7],
        };
        for &f in ptr_fields {
            if row[f] != 0 {
                out.push(r.wstr());
            } else {
                out.push("<null>".into());
            }
        }
    }
    assert_eq!(r.u32(), 3, "TotalEntries");
    assert_eq!(r.u32(), 0, "no resume handle pointer");
    assert_eq!(r.u32(), 0, "WERR_OK");
    r.done();
    let types: Vec<u8> = rows
        .iter()
        .map(|row| if fields > 1 { (row[1] >> 24) as u8 } else { 0 })
        .collect();
    if level == 2 {
        assert_eq!(rows[0][4], u32::MAX, "max_uses unlimited");
    }
    (types, out)
}

#[test]
fn share_enum_levels() {
    assert_eq!(enum_level(0).1, ["public", "home", "IPC$"]);
    let (t, s) = enum_level(1);
    assert_eq!(
        s,
        ["public", "Public files", "home", "", "IPC$", "IPC Service"]
    );
    assert_eq!(t, [0, 0, 0x80]);
    let (_, s) = enum_level(2);
    assert_eq!(
        s,
        [
            "public",
            "Public files",
            "/srv/public",
            "<null>",
            "home",
            "",
            "/home/alice",
            "<null>",
            "IPC$",
            "IPC Service",
            "",
            "<null>"
        ]
    );
    assert_eq!(enum_level(501).1.len(), 6);
}

#[test]
fn share_enum_unsupported_level_502() {
    let mut p = bound_srvsvc(default_ctx());
    let stub = call(&mut p, 2, 15, &share_enum_stub(502, u32::MAX, Some(0))).unwrap();
    let mut r = Rd::new(&stub);
    assert_eq!((r.u32(), r.u32(), r.u32()), (502, 502, 0));
    assert_eq!(r.u32(), 0);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 0);
    assert_eq!(r.u32(), 124, "ERROR_INVALID_LEVEL");
    r.done();
}

#[test]
fn share_enum_with_input_buffer_and_resume() {
    // A client may send a non-empty container; it must be skipped correctly.
    let mut n = Ndr::new();
    n.u32(0); // ServerName NULL
    n.u32(1).u32(1).referent();
    n.u32(1).referent(); // EntriesRead 1, Buffer
    n.u32(1); // max_count
    n.referent().u32(0).referent(); // entry
    n.wstr("junk").wstr("more junk");
    n.u32(0xffff_ffff);
    n.referent().u32(2); // resume at index 2
    let mut p = bound_srvsvc(default_ctx());
    let stub = call(&mut p, 2, 15, &n.b).unwrap();
    let mut r = Rd::new(&stub);
    r.u32();
    r.u32();
    r.u32();
    assert_eq!(r.u32(), 1, "only IPC$ after resume handle 2");
    r.u32();
    assert_eq!(r.u32(), 1);
    r.u32();
    r.u32();
    r.u32();
    assert_eq!(r.wstr(), "IPC$");
}

#[test]
fn share_enum_preferred_max_length_pages() {
    let ctx = ctx_with(
        (0..50)
            .map(|i| share(&format!("s{i}"), 0, "c", "/p"))
            .collect(),
    );
    let mut p = bound_srvsvc(ctx);
    let mut seen = Vec::new();
    let mut resume = 0;
    for call_id in 2.. {
        let stub = call(&mut p, call_id, 15, &share_enum_stub(0, 200, Some(resume))).unwrap();
        let mut r = Rd::new(&stub);
        r.u32();
        r.u32();
        r.u32();
        let n = r.u32();
        assert!(n >= 1);
        r.u32();
        assert_eq!(r.u32(), n);
        for _ in 0..n {
            r.u32();
        }
        for _ in 0..n {
            seen.push(r.wstr());
        }
        assert_eq!(r.u32(), 50);
        assert_ne!(r.u32(), 0);
        resume = r.u32();
        let werr = r.u32();
        r.done();
        if werr == 0 {
            assert_eq!(resume, 0);
            break;
        }
        assert_eq!(werr, 234, "ERROR_MORE_DATA");
        assert_eq!(resume as usize, seen.len());
    }
    assert_eq!(seen, (0..50).map(|i| format!("s{i}")).collect::<Vec<_>>());
}

fn get_info(name: &str, level: u32) -> Vec<u8> {
    let mut p = bound_srvsvc(default_ctx());
    call(&mut p, 2, 16, &get_info_stub(name, level)).unwrap()
}

#[test]
fn share_get_info_levels() {
    let s = get_info("PUBLIC", 0);
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 0);
    assert_ne!(r.u32(), 0);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.wstr(), "public");
    assert_eq!(r.u32(), 0);
    r.done();

    let s = get_info("IPC$", 1);
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 1);
    assert_ne!(r.u32(), 0);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 0x8000_0003);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.wstr(), "IPC$");
    assert_eq!(r.wstr(), "IPC Service");
    assert_eq!(r.u32(), 0);
    r.done();

    let s = get_info("home", 2);
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 2);
    assert_ne!(r.u32(), 0);
    let f: Vec<u32> = (0..8).map(|_| r.u32()).collect();
    assert_eq!(&f[3..6], &[0, u32::MAX, 0]);
    assert_eq!(f[7], 0, "no password");
    assert_eq!(r.wstr(), "home");
    assert_eq!(r.wstr(), "");
    assert_eq!(r.wstr(), "/home/alice");
    assert_eq!(r.u32(), 0);
    r.done();

    let s = get_info("public", 501);
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 501);
    assert_ne!(r.u32(), 0);
    let f: Vec<u32> = (0..4).map(|_| r.u32()).collect();
    assert_eq!((f[1], f[3]), (0, 0));
    assert_eq!(r.wstr(), "public");
    assert_eq!(r.wstr(), "Public files");
    assert_eq!(r.u32(), 0);
    r.done();

    let s = get_info("public", 1005);
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 1005);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 0, "shi1005_flags");
    assert_eq!(r.u32(), 0);
    r.done();
}

#[test]
fn share_get_info_errors() {
    let s = get_info("nope", 1);
    assert_eq!(
        s,
        [1, 0, 0, 0, 0, 0, 0, 0, 0x06, 0x09, 0, 0],
        "NERR_NetNameNotFound"
    );
    let s = get_info("public", 502);
    assert_eq!(u32_at(&s, 8), 124, "ERROR_INVALID_LEVEL, null arm");
    let s = get_info("public", 77);
    assert_eq!(s, [77, 0, 0, 0, 124, 0, 0, 0], "default (empty) arm");
}

#[test]
fn server_get_info() {
    let mut p = bound_srvsvc(default_ctx());
    let s = call(&mut p, 2, 21, &server_get_info_stub(100)).unwrap();
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 100);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 500);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.wstr(), "SMBX");
    assert_eq!(r.u32(), 0);
    r.done();

    let s = call(&mut p, 3, 21, &server_get_info_stub(101)).unwrap();
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 101);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 500);
    assert_ne!(r.u32(), 0);
    assert_eq!((r.u32(), r.u32(), r.u32()), (10, 0, 0x9003));
    assert_ne!(r.u32(), 0);
    assert_eq!(r.wstr(), "SMBX");
    assert_eq!(r.wstr(), "");
    assert_eq!(r.u32(), 0);
    r.done();

    let s = call(&mut p, 4, 21, &server_get_info_stub(102)).unwrap();
    assert_eq!(s, [102, 0, 0, 0, 0, 0, 0, 0, 124, 0, 0, 0]);
}

#[test]
fn wkssvc_get_info_100() {
    let mut p = Pipe::open("\\pipe\\wkssvc", default_ctx()).unwrap();
    p.write(&bind_pdu(11, 1, 4280, &[(0, WKSSVC, 1, vec![(NDR, 2)])]))
        .unwrap();
    let ack = &read_all(&mut p)[0];
    assert_eq!(&ack[26..39], b"\\PIPE\\wkssvc\0");
    let mut n = Ndr::new();
    n.referent().wstr("\\\\h").u32(100);
    let s = call(&mut p, 2, 0, &n.b).unwrap();
    let mut r = Rd::new(&s);
    assert_eq!(r.u32(), 100);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 500);
    assert_ne!(r.u32(), 0);
    assert_ne!(r.u32(), 0);
    assert_eq!((r.u32(), r.u32()), (10, 0));
    assert_eq!(r.wstr(), "SMBX");
    assert_eq!(r.wstr(), "WORKGROUP");
    assert_eq!(r.u32(), 0);
    r.done();
    assert_eq!(call(&mut p, 3, 5, &n.b), Err(0x1c01_0002));
}
