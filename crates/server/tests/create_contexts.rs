//! CREATE with malformed create contexts over a real socket: every refusal is the
//! status a Windows server gives (INVALID_PARAMETER for a bad chain, a known context
//! of the wrong length, excluded durable combinations, a malformed `ExtA` list), the
//! server keeps serving the connection, unknown contexts are ignored, and a valid
//! `ExtA` list is stored.

mod common;

use common::*;
use smbx_wire::create::{ctx, encode_contexts, CreateRequestBuilder};
use smbx_wire::durable::DurableV2Request;
use smbx_wire::fscc::ea;
use smbx_wire::{Command, NtStatus};

fn request(name: &str, contexts: Vec<u8>) -> CreateRequestBuilder {
    CreateRequestBuilder {
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(0x001F_01FF),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 5, // OVERWRITE_IF
        name: name.into(),
        contexts,
        ..Default::default()
    }
}

async fn status(c: &mut Client, b: CreateRequestBuilder) -> NtStatus {
    c.request(Command::Create, &b.encode()).await.status()
}

#[tokio::test]
async fn malformed_contexts_are_refused_and_unknown_ones_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let q = DurableV2Request {
        timeout_ms: 0,
        flags: 0,
        create_guid: [3; 16],
    }
    .encode();
    let refused: Vec<(&str, Vec<u8>)> = vec![
        (
            "DHnQ of 15 bytes",
            encode_contexts(&[(ctx::DHNQ, &[0; 15])]),
        ),
        (
            "DH2Q of 33 bytes",
            encode_contexts(&[(ctx::DH2Q, &[0; 33])]),
        ),
        ("AlSi of 4 bytes", encode_contexts(&[(ctx::ALSI, &[0; 4])])),
        (
            "TWrp of 16 bytes",
            encode_contexts(&[(ctx::TWRP, &[0; 16])]),
        ),
        ("DHnC of 8 bytes", encode_contexts(&[(ctx::DHNC, &[0; 8])])),
        (
            "DHnQ and DH2Q",
            encode_contexts(&[(ctx::DHNQ, &[0; 16]), (ctx::DH2Q, &q)]),
        ),
        (
            "DHnC and DH2Q",
            encode_contexts(&[(ctx::DHNC, &[0; 16]), (ctx::DH2Q, &q)]),
        ),
    ];
    for (what, chain) in refused {
        assert_eq!(
            status(&mut c, request("x.txt", chain)).await,
            NtStatus::INVALID_PARAMETER,
            "{what}"
        );
    }
    // A chain whose Next is not 8-byte aligned, and one whose data runs past the end.
    let good = encode_contexts(&[(ctx::MXAC, &[]), (ctx::QFID, &[])]);
    let mut unaligned = good.clone();
    unaligned[0] += 1;
    let mut past = good.clone();
    past[12..16].copy_from_slice(&0x1000u32.to_le_bytes());
    past[10..12].copy_from_slice(&24u16.to_le_bytes());
    for (what, chain) in [("unaligned Next", unaligned), ("data past the end", past)] {
        assert_eq!(
            status(&mut c, request("x.txt", chain)).await,
            NtStatus::INVALID_PARAMETER,
            "{what}"
        );
    }
    assert!(
        !dir.path().join("x.txt").exists(),
        "a refused CREATE creates nothing"
    );
    // Unknown contexts and AppInstanceId are ignored.
    let chain = encode_contexts(&[
        (b"Zzzz", &[1, 2, 3]),
        (ctx::APP_INSTANCE_ID, &[0; 20]),
        (ctx::MXAC, &[]),
    ]);
    assert_eq!(
        status(&mut c, request("ok.txt", chain)).await,
        NtStatus::SUCCESS
    );
}

#[tokio::test]
async fn ea_buffer_is_decoded_once_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let list = ea::chain(&[ea::encode_entry(0, "user.one", b"1")]);
    // The entry's name without its terminating NUL.
    let mut no_nul = list.clone();
    no_nul[8 + 8] = b'x';
    // A NextEntryOffset pointing inside the entry.
    let two = ea::chain(&[
        ea::encode_entry(0, "A", b"1"),
        ea::encode_entry(0, "B", b"2"),
    ]);
    let mut inside = two.clone();
    inside[0..4].copy_from_slice(&4u32.to_le_bytes());
    for (what, buf) in [("no NUL", no_nul), ("Next inside", inside)] {
        let chain = encode_contexts(&[(ctx::EXTA, &buf)]);
        assert_eq!(
            status(&mut c, request("e.txt", chain)).await,
            NtStatus::INVALID_PARAMETER,
            "{what}"
        );
    }
    let chain = encode_contexts(&[(ctx::EXTA, &two)]);
    assert_eq!(
        status(&mut c, request("e2.txt", chain)).await,
        NtStatus::SUCCESS
    );
}
