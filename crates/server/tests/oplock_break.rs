//! Oplock breaks over real sockets: the break notification names the holder's FileId,
//! acknowledgments, self-breaks of LEVEL_II on WRITE / SET_INFO / LOCK, and
//! acknowledging a break that needs none (INVALID_OPLOCK_PROTOCOL).

mod common;

use common::*;
use smbx_wire::create::{CreateRequestBuilder, CreateResponse};
use smbx_wire::lock::{LockElement, LockRequest, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY};
use smbx_wire::oplock::{OplockBreak, OplockLevel};
use smbx_wire::rw::WriteRequest;
use smbx_wire::{Command, NtStatus};

/// Everything one request produced: its final response and the break
/// notifications (MessageId all ones) that arrived meanwhile.
struct Exchange {
    resp: Msg,
    breaks: Vec<OplockBreak>,
}

/// Sends a request and reads until its final response.
async fn exchange(c: &mut Client, cmd: Command, body: &[u8]) -> Exchange {
    let h = c.header(cmd);
    let mid = h.message_id;
    c.send_raw(&Client::message(&h, body)).await;
    let mut breaks = Vec::new();
    loop {
        for m in c.recv().await.expect("connection closed") {
            if m.header.message_id == u64::MAX {
                assert_eq!(m.header.command, Command::OplockBreak as u16);
                breaks.push(OplockBreak::decode(&m.bytes).expect("break notification"));
                continue;
            }
            assert_eq!(m.header.message_id, mid);
            if m.header.status == NtStatus::PENDING && m.header.is_async() {
                continue;
            }
            return Exchange { resp: m, breaks };
        }
    }
}

/// Reads one unsolicited break notification.
async fn next_break(c: &mut Client) -> OplockBreak {
    loop {
        for m in c.recv().await.expect("connection closed") {
            if m.header.message_id == u64::MAX {
                return OplockBreak::decode(&m.bytes).expect("break notification");
            }
        }
    }
}

fn ack_body(fid: smbx_wire::FileId, level: OplockLevel) -> Vec<u8> {
    OplockBreak {
        oplock_level: level,
        file_id: fid,
    }
    .encode()
}

fn write_body(r: &CreateResponse, data: &[u8]) -> Vec<u8> {
    WriteRequest {
        offset: 0,
        file_id: r.file_id,
        length: data.len() as u32,
        data,
        ..Default::default()
    }
    .encode()
}

/// A second open breaks a BATCH holder to LEVEL_II: the notification carries the
/// holder's FileId, the acknowledgment is answered, the second open gets LEVEL_II.
#[tokio::test]
async fn batch_break_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c1 = connect_share(&srv).await;
    let mut c2 = connect_share(&srv).await;
    // Another open first, so the holder's FileId is not the first one handed out.
    let other = exchange(
        &mut c1,
        Command::Create,
        &create_body("other", OplockLevel::NONE),
    )
    .await;
    created(&other.resp);
    let h1 = created(
        &exchange(
            &mut c1,
            Command::Create,
            &create_body("f", OplockLevel::BATCH),
        )
        .await
        .resp,
    );
    assert_eq!(h1.oplock_level, OplockLevel::BATCH);
    assert_ne!(h1.file_id.volatile, 0);

    // c2's CREATE waits for c1's acknowledgment: send it, then serve c1.
    let h = c2.header(Command::Create);
    let mid = h.message_id;
    c2.send_raw(&Client::message(&h, &create_body("f", OplockLevel::BATCH)))
        .await;
    let b = next_break(&mut c1).await;
    assert_eq!(b.file_id, file_id_of(&h1));
    assert_eq!(b.oplock_level, OplockLevel::II);
    let ack = exchange(
        &mut c1,
        Command::OplockBreak,
        &ack_body(b.file_id, OplockLevel::II),
    )
    .await;
    assert_eq!(ack.resp.status(), NtStatus::SUCCESS);
    let a = OplockBreak::decode(&ack.resp.bytes).unwrap();
    assert_eq!(a.oplock_level, OplockLevel::II);
    assert_eq!(a.file_id, file_id_of(&h1));
    // c2's CREATE completes (maybe after an interim STATUS_PENDING) with LEVEL_II.
    let r2 = loop {
        let m = c2.recv().await.unwrap().remove(0);
        assert_eq!(m.header.message_id, mid);
        if m.status() != NtStatus::PENDING {
            break m;
        }
    };
    let h2 = created(&r2);
    assert_eq!(h2.oplock_level, OplockLevel::II);

    // Acknowledging again (no break in progress) is a protocol error.
    let again = exchange(
        &mut c1,
        Command::OplockBreak,
        &ack_body(b.file_id, OplockLevel::II),
    )
    .await;
    assert_eq!(again.resp.status(), NtStatus::INVALID_OPLOCK_PROTOCOL);

    // A write through c2 breaks both LEVEL_II holders to NONE, its own included.
    let w = exchange(&mut c2, Command::Write, &write_body(&h2, b"x")).await;
    assert_eq!(w.resp.status(), NtStatus::SUCCESS);
    assert_eq!(w.breaks.len(), 1);
    assert_eq!(w.breaks[0].file_id, file_id_of(&h2));
    assert_eq!(w.breaks[0].oplock_level, OplockLevel::NONE);
    let b1 = next_break(&mut c1).await;
    assert_eq!(b1.file_id, file_id_of(&h1));
    assert_eq!(b1.oplock_level, OplockLevel::NONE);
}

/// A write breaks the writer's own LEVEL_II oplock to NONE without asking for an
/// acknowledgment; acknowledging anyway is INVALID_OPLOCK_PROTOCOL (smb2.oplock.levelii500).
#[tokio::test]
async fn level2_ack_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = connect_share(&srv).await;
    let h = created(
        &exchange(&mut c, Command::Create, &create_body("g", OplockLevel::II))
            .await
            .resp,
    );
    assert_eq!(h.oplock_level, OplockLevel::II);
    let w = exchange(&mut c, Command::Write, &write_body(&h, b"abc")).await;
    assert_eq!(w.resp.status(), NtStatus::SUCCESS);
    assert_eq!(w.breaks.len(), 1);
    assert_eq!(w.breaks[0].file_id, file_id_of(&h));
    assert_eq!(w.breaks[0].oplock_level, OplockLevel::NONE);
    let ack = exchange(
        &mut c,
        Command::OplockBreak,
        &ack_body(file_id_of(&h), OplockLevel::NONE),
    )
    .await;
    assert_eq!(ack.resp.status(), NtStatus::INVALID_OPLOCK_PROTOCOL);
    // Nothing left to break: a second write sends no notification.
    let w = exchange(&mut c, Command::Write, &write_body(&h, b"d")).await;
    assert_eq!(w.resp.status(), NtStatus::SUCCESS);
    assert!(w.breaks.is_empty());
}

/// A byte-range lock breaks LEVEL_II (the locker's own too) to NONE.
#[tokio::test]
async fn lock_breaks_level2() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = connect_share(&srv).await;
    let h = created(
        &exchange(&mut c, Command::Create, &create_body("l", OplockLevel::II))
            .await
            .resp,
    );
    assert_eq!(h.oplock_level, OplockLevel::II);
    let body = LockRequest {
        lock_sequence_number: 0,
        lock_sequence_index: 0,
        file_id: file_id_of(&h),
        locks: vec![LockElement {
            offset: 0,
            length: 4,
            flags: LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY,
        }],
    }
    .encode();
    let l = exchange(&mut c, Command::Lock, &body).await;
    assert_eq!(l.resp.status(), NtStatus::SUCCESS);
    assert_eq!(l.breaks.len(), 1);
    assert_eq!(l.breaks[0].oplock_level, OplockLevel::NONE);
    assert_eq!(l.breaks[0].file_id, file_id_of(&h));
}

/// A stat open (attributes only) breaks no BATCH oplock and gets none.
#[tokio::test]
async fn stat_open_breaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = connect_share(&srv).await;
    let h = created(
        &exchange(
            &mut c,
            Command::Create,
            &create_body("s", OplockLevel::BATCH),
        )
        .await
        .resp,
    );
    assert_eq!(h.oplock_level, OplockLevel::BATCH);
    let stat = CreateRequestBuilder {
        oplock_level: OplockLevel::BATCH,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(0x0010_0180),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 1,
        name: "s".into(),
        ..Default::default()
    }
    .encode();
    let s = exchange(&mut c, Command::Create, &stat).await;
    assert!(s.breaks.is_empty());
    assert_eq!(created(&s.resp).oplock_level, OplockLevel::NONE);
}

/// A CREATE waiting on an oplock break whose tree is disconnected meanwhile
/// completes with NETWORK_NAME_DELETED and leaves no open behind: once the
/// holder closes, an exclusive open of the file succeeds.
#[tokio::test]
async fn create_pending_across_tree_disconnect_leaves_no_open() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c1 = connect_share(&srv).await;
    let mut c2 = connect_share(&srv).await;
    let h1 = created(
        &exchange(
            &mut c1,
            Command::Create,
            &create_body("f", OplockLevel::BATCH),
        )
        .await
        .resp,
    );
    assert_eq!(h1.oplock_level, OplockLevel::BATCH);

    // c2's CREATE waits for c1's acknowledgment and goes async.
    let h = c2.header(Command::Create);
    let mid = h.message_id;
    c2.send_raw(&Client::message(&h, &create_body("f", OplockLevel::NONE)))
        .await;
    let interim = c2.recv().await.unwrap().remove(0);
    assert_eq!(interim.header.message_id, mid);
    assert_eq!(interim.status(), NtStatus::PENDING);
    // Its tree goes away while it waits.
    let td = exchange(
        &mut c2,
        Command::TreeDisconnect,
        &smbx_wire::simple::encode_simple(),
    )
    .await;
    assert_eq!(td.resp.status(), NtStatus::SUCCESS);
    // The holder acknowledges; the CREATE then finds its tree gone.
    let b = next_break(&mut c1).await;
    let ack = exchange(
        &mut c1,
        Command::OplockBreak,
        &ack_body(b.file_id, b.oplock_level),
    )
    .await;
    assert_eq!(ack.resp.status(), NtStatus::SUCCESS);
    let r2 = c2.recv().await.unwrap().remove(0);
    assert_eq!(r2.header.message_id, mid);
    assert_eq!(r2.status(), NtStatus::NETWORK_NAME_DELETED);

    // No open of c2's is left: with c1's closed, nothing shares the file.
    let close = smbx_wire::close::CloseRequest {
        flags: 0,
        file_id: h1.file_id,
    }
    .encode();
    let closed = exchange(&mut c1, Command::Close, &close).await;
    assert_eq!(closed.resp.status(), NtStatus::SUCCESS);
    let exclusive = smbx_wire::create::CreateRequestBuilder {
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(0x001F_01FF),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(0),
        create_disposition: 1,
        name: "f".into(),
        ..Default::default()
    }
    .encode();
    let again = exchange(&mut c1, Command::Create, &exclusive).await;
    assert_eq!(again.resp.status(), NtStatus::SUCCESS);
}

/// `oplock break timeout` bounds the wait for an acknowledgment: a holder that never
/// acknowledges loses its oplock when it runs out, the waiting CREATE completes, and
/// the late acknowledgment is refused (INVALID_OPLOCK_PROTOCOL: nothing is breaking).
#[tokio::test]
async fn configured_break_timeout_breaks_a_silent_holder() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.global.oplock_break_timeout_ms = 200;
    let srv = start(config).await;
    let mut c1 = connect_share(&srv).await;
    let mut c2 = connect_share(&srv).await;
    let h1 = created(
        &exchange(
            &mut c1,
            Command::Create,
            &create_body("f", OplockLevel::BATCH),
        )
        .await
        .resp,
    );
    assert_eq!(h1.oplock_level, OplockLevel::BATCH);
    // c1 never answers the break; c2's CREATE completes once the timeout ran out
    // (bounded here far above it: with the default 35 s this would fail).
    let r2 = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        exchange(
            &mut c2,
            Command::Create,
            &create_body("f", OplockLevel::BATCH),
        ),
    )
    .await
    .expect("the CREATE completes once the configured break timeout runs out");
    assert_eq!(r2.resp.status(), NtStatus::SUCCESS);
    assert_eq!(created(&r2.resp).oplock_level, OplockLevel::II);
    let b = next_break(&mut c1).await;
    assert_eq!(b.file_id, h1.file_id);
    assert_eq!(b.oplock_level, OplockLevel::II);
    let late = exchange(
        &mut c1,
        Command::OplockBreak,
        &ack_body(b.file_id, OplockLevel::II),
    )
    .await;
    assert_eq!(late.resp.status(), NtStatus::INVALID_OPLOCK_PROTOCOL);
}
