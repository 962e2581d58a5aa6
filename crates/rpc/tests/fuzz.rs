//! Hostile input: random bytes and mutated valid requests never panic, and every complete
//! request PDU gets exactly one answer (a response or a fault).
mod common;
use common::*;
use proptest::prelude::*;
use smbx_rpc::Pipe;

fn valid_requests() -> Vec<(u16, Vec<u8>)> {
    vec![
        (15, share_enum_stub(1, u32::MAX, Some(0))),
        (15, share_enum_stub(2, 300, None)),
        (15, share_enum_stub(501, u32::MAX, Some(1))),
        (16, get_info_stub("public", 2)),
        (16, get_info_stub("IPC$", 1005)),
        (21, server_get_info_stub(101)),
    ]
}

/// Feeds `data` in `chunk`-sized writes; stops at the first error (the pipe is then broken).
fn feed(p: &mut Pipe, data: &[u8], chunk: usize) {
    for c in data.chunks(chunk.max(1)) {
        if p.write(c).is_err() {
            assert!(p.write(&[5]).is_err(), "broken pipe stays broken");
            return;
        }
        let _ = p.read(usize::from(c[0]) * 17);
    }
    read_all(p);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600), chunk in 1usize..64) {
        let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
        feed(&mut p, &data, chunk);
        // and after a valid bind too
        let mut p = bound_srvsvc(default_ctx());
        feed(&mut p, &data, chunk);
    }

    #[test]
    fn random_pdus_with_valid_header_never_panic(
        ptype in prop_oneof![Just(0u8), Just(11), Just(14), Just(16), Just(18), Just(19), any::<u8>()],
        flags in any::<u8>(),
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut pdu = hdr(ptype, flags, 77);
        pdu.extend_from_slice(&body);
        let pdu = finish(pdu);
        let mut p = bound_srvsvc(default_ctx());
        let _ = p.write(&pdu);
        read_all(&mut p);
        let mut p = Pipe::open("wkssvc", default_ctx()).unwrap();
        let _ = p.write(&pdu);
        read_all(&mut p);
    }

    #[test]
    fn mutated_requests_get_one_answer(
        which in 0usize..6,
        muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let (opnum, mut stub) = valid_requests().swap_remove(which);
        for (i, v) in muts {
            let i = i.index(stub.len());
            stub[i] = v;
        }
        if let Some(t) = truncate {
            stub.truncate(t.index(stub.len() + 1));
        }
        let mut p = bound_srvsvc(default_ctx());
        p.write(&request(9, 0, opnum, &stub)).unwrap();
        let pdus = read_all(&mut p);
        prop_assert!(!pdus.is_empty());
        for (i, f) in pdus.iter().enumerate() {
            prop_assert_eq!(u32_at(f, 12), 9);
            prop_assert!(f[2] == 2 || (f[2] == 3 && pdus.len() == 1));
            prop_assert_eq!(f[3] & 2 != 0, i + 1 == pdus.len());
        }
        if pdus[0][2] == 3 {
            prop_assert_eq!(u32_at(&pdus[0], 24), 0x6f7);
        }
        // the pipe keeps working
        prop_assert!(call(&mut p, 10, 21, &server_get_info_stub(100)).is_ok());
    }

    #[test]
    fn mutated_binds_never_panic(
        muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut b = bind_pdu(11, 1, 4280, &[(0, SRVSVC, 3, vec![(NDR, 2), (NDR64, 1)]), (1, SRVSVC, 3, vec![(BTFN, 1)])]);
        for (i, v) in muts {
            let i = i.index(b.len());
            b[i] = v;
        }
        let mut p = Pipe::open("srvsvc", default_ctx()).unwrap();
        if p.write(&b).is_ok() {
            let _ = p.write(&request(2, 0, 15, &share_enum_stub(1, u32::MAX, None)));
            read_all(&mut p);
        }
    }
}
