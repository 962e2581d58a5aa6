//! Bind, alter_context, fault and fragmentation behaviour, checked byte by byte.
mod common;
use common::*;
use smbx_rpc::{is_known_pipe, Pipe};

#[test]
fn bind_ack_exact_layout() {
    let mut p = Pipe::open("\\PIPE\\srvsvc", default_ctx()).unwrap();
    let bind = srvsvc_bind(2, 4280);
    assert_eq!(bind.len(), 72); // 16 + 8 + 4 + (4 + 20 + 20)
    assert_eq!(p.write(&bind).unwrap(), 72);
    let pdus = read_all(&mut p);
    assert_eq!(pdus.len(), 1);
    let a = &pdus[0];
    // header
    assert_eq!(&a[..8], &[5, 0, 12, 3, 0x10, 0, 0, 0]);
    assert_eq!(u16_at(a, 8) as usize, a.len());
    assert_eq!(u16_at(a, 10), 0); // auth_length
    assert_eq!(u32_at(a, 12), 2); // call_id
    assert_eq!(u16_at(a, 16), 4280);
    assert_eq!(u16_at(a, 18), 4280);
    assert_ne!(u32_at(a, 20), 0, "a new association group");
    // sec_addr "\PIPE\srvsvc\0" (13 bytes) at 24, then pad to 4: 26+13=39 -> 40
    assert_eq!(u16_at(a, 24), 13);
    assert_eq!(&a[26..39], b"\\PIPE\\srvsvc\0");
    assert_eq!(a[39], 0);
    assert_eq!(&a[40..44], &[1, 0, 0, 0]); // one result
    assert_eq!(u16_at(a, 44), 0); // acceptance
    assert_eq!(u16_at(a, 46), 0);
    assert_eq!(&a[48..64], &NDR);
    assert_eq!(u32_at(a, 64), 2);
    assert_eq!(a.len(), 68);
}

#[test]
fn bind_negotiates_ndr_rejects_ndr64_acks_btfn() {
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    let b = bind_pdu(
        11,
        1,
        4280,
        &[
            (0, SRVSVC, 3, vec![(NDR, 2)]),
            (1, SRVSVC, 3, vec![(NDR64, 1)]),
            (2, SRVSVC, 3, vec![(BTFN, 1)]),
            (3, WKSSVC, 1, vec![(NDR, 2)]),
            (4, SRVSVC, 4, vec![(NDR, 2)]),
        ],
    );
    p.write(&b).unwrap();
    let a = &read_all(&mut p)[0];
    assert_eq!(a[2], 12);
    assert_eq!(a[40], 5);
    let res = |i: usize| {
        (
            u16_at(a, 44 + 24 * i),
            u16_at(a, 46 + 24 * i),
            &a[48 + 24 * i..64 + 24 * i],
        )
    };
    assert_eq!(res(0), (0, 0, &NDR[..]));
    assert_eq!(
        res(1),
        (2, 2, &[0u8; 16][..]),
        "NDR64: proposed transfer syntaxes not supported"
    );
    assert_eq!(res(2).0, 3, "negotiate_ack");
    assert_eq!(res(2).1 & !0x3, 0, "only offered features acknowledged");
    assert_eq!(res(3).0, 2);
    assert_eq!(res(3).1, 1, "abstract syntax not supported");
    assert_eq!(res(4).1, 1, "wrong major version");
    assert_eq!(a.len(), 44 + 5 * 24);

    // context 1 was rejected: a request on it faults with nca_unk_if
    p.write(&request(2, 1, 15, &share_enum_stub(1, u32::MAX, None)))
        .unwrap();
    let f = &read_all(&mut p)[0];
    assert_eq!(f[2], 3);
    assert_eq!(u32_at(f, 24), 0x1c01_0003);
    // context 0 works
    assert!(call(&mut p, 3, 15, &share_enum_stub(1, u32::MAX, None)).is_ok());
}

#[test]
fn alter_context_adds_a_context() {
    let mut p = bound_srvsvc(default_ctx());
    let alt = bind_pdu(14, 5, 4280, &[(7, SRVSVC, 3, vec![(NDR, 2)])]);
    p.write(&alt).unwrap();
    let a = &read_all(&mut p)[0];
    assert_eq!(a[2], 15, "alter_context_resp");
    assert_eq!(u32_at(a, 12), 5);
    assert_eq!(u16_at(a, 24), 0, "empty secondary address");
    assert_eq!(&a[28..32], &[1, 0, 0, 0]);
    assert_eq!(u16_at(a, 32), 0);
    assert_eq!(&a[36..52], &NDR);
    p.write(&request(6, 7, 21, &server_get_info_stub(100)))
        .unwrap();
    let r = &read_all(&mut p)[0];
    assert_eq!(r[2], 2);
    assert_eq!(u16_at(r, 20), 7, "response on the altered context");
}

#[test]
fn unknown_interface_is_rejected_in_bind_ack() {
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    p.write(&bind_pdu(11, 1, 4280, &[(0, WKSSVC, 1, vec![(NDR, 2)])]))
        .unwrap();
    let a = &read_all(&mut p)[0];
    assert_eq!(a[2], 12);
    assert_eq!((u16_at(a, 44), u16_at(a, 46)), (2, 1));
    p.write(&request(2, 0, 0, &[])).unwrap();
    assert_eq!(u32_at(&read_all(&mut p)[0], 24), 0x1c01_0003);
}

#[test]
fn bind_with_auth_or_big_endian_is_nakked() {
    let mut b = srvsvc_bind(1, 4280);
    b[10] = 8; // auth_length > 0
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    p.write(&b).unwrap();
    let n = &read_all(&mut p)[0];
    assert_eq!(n[2], 13, "bind_nak");
    assert_eq!(u16_at(n, 16), 8, "authentication type not recognized");
    assert_eq!(&n[18..21], &[1, 5, 0]);

    // big-endian data representation: header fields are big-endian too
    let mut b = srvsvc_bind(1, 4280);
    let len = b.len() as u16;
    b[4] = 0x00;
    b[8..10].copy_from_slice(&len.to_be_bytes());
    b[12..16].copy_from_slice(&9u32.to_be_bytes());
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    p.write(&b).unwrap();
    let n = &read_all(&mut p)[0];
    assert_eq!(n[2], 13);
    assert_eq!(u32_at(n, 12), 9, "call id echoed");
}

#[test]
fn faults() {
    // request before bind
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    p.write(&request(1, 0, 15, &share_enum_stub(1, u32::MAX, None)))
        .unwrap();
    let f = &read_all(&mut p)[0];
    assert_eq!((f[2], f.len()), (3, 32));
    assert_eq!(u32_at(f, 24), 0x1c01_000b);

    let mut p = bound_srvsvc(default_ctx());
    assert_eq!(call(&mut p, 2, 99, &[]), Err(0x1c01_0002), "op range");
    assert_eq!(call(&mut p, 3, 15, &[1, 2, 3]), Err(0x6f7), "bad stub");
    // union switch differs from level
    let mut bad = share_enum_stub(1, u32::MAX, None);
    assert_eq!(u32_at(&bad, 44), 1);
    bad[44] = 2;
    assert_eq!(call(&mut p, 4, 15, &bad), Err(0x6f7));
    // level that is no union arm
    assert_eq!(
        call(&mut p, 5, 15, &share_enum_stub(7, u32::MAX, None)),
        Err(0x6f7)
    );

    // big-endian request
    let mut r = request(6, 0, 15, &share_enum_stub(1, u32::MAX, None));
    let len = r.len() as u16;
    r[4] = 0;
    r[8..10].copy_from_slice(&len.to_be_bytes());
    r[12..16].copy_from_slice(&6u32.to_be_bytes());
    p.write(&r).unwrap();
    let f = &read_all(&mut p)[0];
    assert_eq!(f[2], 3);
    assert_eq!(u32_at(f, 12), 6);

    // authenticated request
    let mut r = request(7, 0, 15, &share_enum_stub(1, u32::MAX, None));
    r[10] = 16;
    p.write(&r).unwrap();
    assert_eq!(read_all(&mut p)[0][2], 3);

    // the pipe still works
    assert!(call(&mut p, 8, 15, &share_enum_stub(1, u32::MAX, None)).is_ok());

    // lsarpc binds, every opnum faults
    let mut l = Pipe::open("LSARPC", default_ctx()).unwrap();
    let lsa = [
        0x78, 0x57, 0x34, 0x12, 0x34, 0x12, 0xcd, 0xab, 0xef, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89,
        0xab,
    ];
    l.write(&bind_pdu(11, 1, 4280, &[(0, lsa, 0, vec![(NDR, 2)])]))
        .unwrap();
    assert_eq!(u16_at(&read_all(&mut l)[0], 44), 0);
    assert_eq!(call(&mut l, 2, 44, &[]), Err(0x1c01_0002));
}

#[test]
fn garbage_header_breaks_the_pipe() {
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    assert!(p.write(b"GET / HTTP/1.1\r\n\r\n").is_err());
    assert!(p.write(&srvsvc_bind(1, 4280)).is_err());
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    // frag_length smaller than the header
    let mut b = srvsvc_bind(1, 4280);
    b[8] = 10;
    b[9] = 0;
    assert!(p.write(&b).is_err());
    // a response PDU from a "client"
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    assert!(p.write(&finish(hdr(2, 3, 1))).is_err());
}

#[test]
fn open_only_known_pipes() {
    assert!(Pipe::open("samr", default_ctx()).is_none());
    assert!(Pipe::open("wkssvc", default_ctx()).is_some());
    assert!(is_known_pipe("\\PIPE\\LsaRpc"));
}

#[test]
fn byte_at_a_time_and_batched_writes() {
    let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
    let mut all = srvsvc_bind(1, 4280);
    all.extend(request(2, 0, 15, &share_enum_stub(1, u32::MAX, Some(0))));
    all.extend(request(3, 0, 21, &server_get_info_stub(101)));
    for b in &all[..all.len() - 1] {
        p.write(std::slice::from_ref(b)).unwrap();
    }
    assert_eq!(
        read_all(&mut p).len(),
        2,
        "bind_ack and first response only"
    );
    p.write(&all[all.len() - 1..]).unwrap();
    let r = read_all(&mut p);
    assert_eq!(r.len(), 1);
    assert_eq!(u32_at(&r[0], 12), 3);

    // both calls in one write
    let mut p = bound_srvsvc(default_ctx());
    let mut two = request(4, 0, 15, &share_enum_stub(0, u32::MAX, None));
    two.extend(request(5, 0, 21, &server_get_info_stub(100)));
    p.write(&two).unwrap();
    let r = read_all(&mut p);
    assert_eq!(r.iter().map(|x| u32_at(x, 12)).collect::<Vec<_>>(), [4, 5]);
}

#[test]
fn read_is_message_oriented() {
    let mut p = bound_srvsvc(default_ctx());
    let mut two = request(4, 0, 21, &server_get_info_stub(100));
    two.extend(request(5, 0, 21, &server_get_info_stub(100)));
    p.write(&two).unwrap();
    let total = p.pending();
    let (a, more) = p.read(10);
    assert_eq!((a.len(), more), (10, true));
    let (b, more) = p.read(100_000);
    assert!(!more, "the rest of the first message");
    assert_eq!(u16_at(&a, 8) as usize, a.len() + b.len());
    assert_eq!(p.pending(), total - a.len() - b.len());
    let (c, more) = p.read(100_000);
    assert!(!more);
    assert_eq!(u32_at(&c, 12), 5);
    assert_eq!(p.pending(), 0);
    assert_eq!(p.read(10), (vec![], false));
}

fn many_shares(n: usize) -> smbx_rpc::PipeContext {
    ctx_with(
        (0..n)
            .map(|i| {
                share(
                    &format!("share-{i:03}"),
                    0,
                    &format!("comment number {i}"),
                    "/srv",
                )
            })
            .collect(),
    )
}

#[test]
fn large_response_is_fragmented_and_reassembles() {
    let mut p = Pipe::open("srvsvc", many_shares(200)).unwrap();
    p.write(&srvsvc_bind(1, 1500)).unwrap();
    let ack = &read_all(&mut p)[0];
    assert_eq!(
        u16_at(ack, 16),
        1500,
        "max_xmit_frag follows client's max_recv_frag"
    );
    p.write(&request(2, 0, 15, &share_enum_stub(1, u32::MAX, Some(0))))
        .unwrap();
    let pdus = read_all(&mut p);
    assert!(pdus.len() > 5, "{} fragments", pdus.len());
    let mut stub = Vec::new();
    let mut total_hint = 0;
    for (i, f) in pdus.iter().enumerate() {
        assert!(f.len() <= 1500);
        assert_eq!(f[2], 2);
        assert_eq!(u16_at(f, 8) as usize, f.len());
        assert_eq!(u32_at(f, 12), 2);
        assert_eq!(f[3] & 1 != 0, i == 0);
        assert_eq!(f[3] & 2 != 0, i + 1 == pdus.len());
        let body = &f[24..];
        if i == 0 {
            total_hint = u32_at(f, 16) as usize;
        }
        if i + 1 < pdus.len() {
            assert_eq!(
                body.len() % 8,
                0,
                "non-last fragments keep 8-byte alignment"
            );
        }
        stub.extend_from_slice(body);
    }
    assert_eq!(total_hint, stub.len(), "alloc_hint of first fragment");
    let mut r = Rd::new(&stub);
    assert_eq!((r.u32(), r.u32()), (1, 1));
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 200);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 200);
    for _ in 0..200 {
        r.u32();
        r.u32();
        r.u32();
    }
    for i in 0..200 {
        assert_eq!(r.wstr(), format!("share-{i:03}"));
        assert_eq!(r.wstr(), format!("comment number {i}"));
    }
    assert_eq!(r.u32(), 200);
    assert_ne!(r.u32(), 0);
    assert_eq!(r.u32(), 0);
    assert_eq!(r.u32(), 0);
    r.done();
}

#[test]
fn fragmented_request_is_reassembled() {
    let mut p = bound_srvsvc(default_ctx());
    let stub = share_enum_stub(1, u32::MAX, Some(0));
    let (a, rest) = stub.split_at(8);
    let (b, c) = rest.split_at(13);
    for (i, part) in [a, b, c].iter().enumerate() {
        let flags = match i {
            0 => 1,
            2 => 2,
            _ => 0,
        };
        let mut v = hdr(0, flags, 9);
        v.extend_from_slice(&(stub.len() as u32).to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&15u16.to_le_bytes());
        v.extend_from_slice(part);
        p.write(&finish(v)).unwrap();
        assert_eq!(p.pending() > 0, i == 2);
    }
    let whole = call(&mut bound_srvsvc(default_ctx()), 9, 15, &stub).unwrap();
    let pdus = read_all(&mut p);
    assert_eq!(&pdus[0][24..], &whole[..]);

    // a middle fragment without a first one is a protocol error, not a panic
    let mut v = hdr(0, 0, 10);
    v.extend_from_slice(&[0; 8]);
    p.write(&finish(v)).unwrap();
    assert_eq!(u32_at(&read_all(&mut p)[0], 24), 0x1c01_000b);
}

#[test]
fn oversized_fragmented_request_faults_once() {
    let mut p = bound_srvsvc(default_ctx());
    let chunk = vec![0u8; 4000];
    let mut faults = 0;
    for i in 0..300 {
        let flags = if i == 0 {
            1
        } else if i == 299 {
            2
        } else {
            0
        };
        let mut v = hdr(0, flags, 11);
        v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 15, 0]);
        v.extend_from_slice(&chunk);
        p.write(&finish(v)).unwrap();
        faults += read_all(&mut p).len();
    }
    assert_eq!(faults, 1);
    assert!(call(&mut p, 12, 21, &server_get_info_stub(100)).is_ok());
}
