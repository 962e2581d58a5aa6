//! The responses of one connection arrive whole and each once, whichever way they
//! leave the server: written at once when nothing is queued before them
//! (smbx_transport::link, `send_at_once`), or queued behind a READ whose data the
//! writer sends from the file, with a client that reads nothing until it has sent
//! everything (the socket fills; what is not taken at once waits in the queue).

mod common;

use std::collections::{HashMap, HashSet};

use common::*;
use smbx_wire::header::FLAGS_SIGNED;
use smbx_wire::oplock::OplockLevel;
use smbx_wire::rw::{ReadRequest, ReadResponse};
use smbx_wire::{Command, FileId, NtStatus};

fn read_body(fid: FileId, offset: u64, length: u32) -> Vec<u8> {
    ReadRequest {
        padding: 0x50,
        flags: 0,
        length,
        offset,
        file_id: fid,
        minimum_count: 0,
        channel: 0,
        remaining_bytes: 0,
        channel_info: &[],
    }
    .encode()
}

const ECHO: [u8; 4] = [4, 0, 0, 0];

/// Large READs (data sent from the file), small signed READs (read in and signed),
/// ECHOs and compounds of two ECHOs, sent back to back before any answer is read:
/// every answer comes once, and every READ's data is the file's.
#[tokio::test]
async fn mixed_responses_arrive_whole_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let content: Vec<u8> = (0..4usize << 20)
        .map(|j| (j * 7 + j / 4096) as u8)
        .collect();
    std::fs::write(dir.path().join("f"), &content).unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let b = smbx_wire::create::CreateRequestBuilder {
        oplock_level: OplockLevel::NONE,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(0x0012_0089),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 1,
        name: "f".into(),
        ..Default::default()
    };
    let fid = file_id_of(&created(&c.request(Command::Create, &b.encode()).await));
    assert!(c.signer.is_some(), "the session signs");

    // MessageId -> the READ's (offset, length), or None for an ECHO.
    let mut asked: HashMap<u64, Option<(u64, u32)>> = HashMap::new();
    for i in 0..6u64 {
        let (off, len) = (i * 600_000, 1 << 20);
        let mut h = c.header(Command::Read);
        h.credit_charge = 16;
        c.next_message_id += 15;
        c.send_raw(&Client::message(&h, &read_body(fid, off, len)))
            .await;
        asked.insert(h.message_id, Some((off, len)));

        let (off, len) = (i * 600_000 + 5, 1000);
        let mut h = c.header(Command::Read);
        h.flags |= FLAGS_SIGNED;
        let mut m = Client::message(&h, &read_body(fid, off, len));
        c.signer.as_ref().unwrap().sign(&mut m);
        c.send_raw(&m).await;
        asked.insert(h.message_id, Some((off, len)));

        let h = c.header(Command::Echo);
        c.send_raw(&Client::message(&h, &ECHO)).await;
        asked.insert(h.message_id, None);

        let ids = c
            .send_compound(&[
                (Command::Echo, ECHO.to_vec(), false),
                (Command::Echo, ECHO.to_vec(), false),
            ])
            .await;
        for id in ids {
            asked.insert(id, None);
        }
    }

    let mut seen = HashSet::new();
    while seen.len() < asked.len() {
        for r in c.recv().await.expect("connection closed") {
            let id = r.header.message_id;
            assert!(seen.insert(id), "MessageId {id} answered twice");
            assert_eq!(r.status(), NtStatus::SUCCESS, "MessageId {id}");
            match asked.get(&id).expect("an answer to a request sent") {
                Some((off, len)) => {
                    let rr = ReadResponse::decode(&r.bytes).unwrap();
                    let want = &content[*off as usize..*off as usize + *len as usize];
                    assert!(rr.data == want, "READ {id}: data differs");
                    if *len == 1000 {
                        assert!(r.header.is_signed(), "a signed READ's answer is signed");
                    }
                }
                None => assert_eq!(r.header.cmd(), Some(Command::Echo)),
            }
        }
    }
}
