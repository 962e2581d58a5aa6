//! Byte-range LOCK over real sockets: a blocking lock pending when its session logs
//! off, and lock sequence replay detection ([MS-SMB2] 3.3.5.14).

mod common;

use common::*;
use smbx_wire::lock::{
    LockElement, LockRequest, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, LOCKFLAG_UNLOCK,
};
use smbx_wire::oplock::OplockLevel;
use smbx_wire::Dialect;
use smbx_wire::{Command, NtStatus};

/// The FileId of a successful CREATE.
fn fid(m: &Msg) -> smbx_wire::FileId {
    file_id_of(&created(m))
}

fn lock(file_id: smbx_wire::FileId, seq: u32, flags: u32) -> Vec<u8> {
    LockRequest {
        lock_sequence_number: (seq & 0xF) as u8,
        lock_sequence_index: seq >> 4,
        file_id,
        locks: vec![LockElement {
            offset: 100,
            length: 10,
            flags,
        }],
    }
    .encode()
}

const EXCL_NOW: u32 = LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY;

/// LOGOFF while a blocking lock waits on another open of the same session: the
/// opens close, so the lock completes as after a CLOSE (granted or RANGE_NOT_LOCKED),
/// never CANCELLED; the handle is gone afterwards.
#[tokio::test]
async fn logoff_completes_a_pending_lock() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    for _ in 0..4 {
        let mut c = connect_share_as(&srv, Dialect::SMB3_1_1).await;
        let h1 = fid(&c
            .request(Command::Create, &create_body("f", OplockLevel::NONE))
            .await);
        let h2 = fid(&c
            .request(Command::Create, &create_body("f", OplockLevel::NONE))
            .await);
        let r = c
            .request(Command::Lock, &lock(h1, 0, LOCKFLAG_EXCLUSIVE))
            .await;
        assert_eq!(r.status(), NtStatus::SUCCESS);
        // The blocking lock on h2 goes async.
        let h = c.header(Command::Lock);
        let lock_mid = h.message_id;
        c.send_raw(&Client::message(&h, &lock(h2, 0, LOCKFLAG_EXCLUSIVE)))
            .await;
        let interim = c.recv().await.unwrap().remove(0);
        assert_eq!(interim.status(), NtStatus::PENDING);
        assert_eq!(interim.header.message_id, lock_mid);

        let h = c.header(Command::Logoff);
        let logoff_mid = h.message_id;
        c.send_raw(&Client::message(&h, &smbx_wire::simple::encode_simple()))
            .await;
        let mut lock_status = None;
        let mut logoff_status = None;
        while lock_status.is_none() || logoff_status.is_none() {
            for m in c.recv().await.expect("connection closed") {
                if m.header.message_id == lock_mid {
                    lock_status = Some(m.status());
                } else if m.header.message_id == logoff_mid {
                    logoff_status = Some(m.status());
                }
            }
        }
        assert_eq!(logoff_status, Some(NtStatus::SUCCESS));
        let st = lock_status.unwrap();
        assert!(
            st == NtStatus::RANGE_NOT_LOCKED || st == NtStatus::SUCCESS,
            "pending lock ended with {st:?}"
        );
        let r = c
            .request(Command::Lock, &lock(h1, 0, LOCKFLAG_UNLOCK))
            .await;
        assert!(
            r.status() == NtStatus::USER_SESSION_DELETED || r.status() == NtStatus::FILE_CLOSED
        );
    }
}

/// Sends LOCK requests with the given LockSequence and flags; returns the statuses.
async fn locks(c: &mut Client, h: smbx_wire::FileId, steps: &[(u32, u32)]) -> Vec<NtStatus> {
    let mut out = Vec::new();
    for &(seq, flags) in steps {
        out.push(
            c.request(Command::Lock, &lock(h, seq, flags))
                .await
                .status(),
        );
    }
    out
}

/// Lock sequence verification on a 3.x connection with multichannel: a request
/// repeating the last successful LockSequence of its bucket (1..=64) is answered
/// SUCCESS without being applied; bucket 0 and buckets above 64 are not checked;
/// failed requests are not remembered.
#[tokio::test]
async fn lock_sequence_replays_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = connect_share_as(&srv, Dialect::SMB3_1_1).await;
    let h = fid(&c
        .request(Command::Create, &create_body("seq", OplockLevel::NONE))
        .await);
    use NtStatus as S;
    // Bucket 0: no replay detection.
    assert_eq!(
        locks(
            &mut c,
            h,
            &[
                (0x001, EXCL_NOW),
                (0x001, EXCL_NOW),
                (0x001, LOCKFLAG_UNLOCK),
                (0x001, LOCKFLAG_UNLOCK)
            ]
        )
        .await,
        [
            S::SUCCESS,
            S::LOCK_NOT_GRANTED,
            S::SUCCESS,
            S::RANGE_NOT_LOCKED
        ]
    );
    // Bucket 1: the repeats (lock or unlock) are replays.
    assert_eq!(
        locks(
            &mut c,
            h,
            &[
                (0x011, EXCL_NOW),
                (0x011, EXCL_NOW),
                (0x011, LOCKFLAG_UNLOCK),
                (0x012, EXCL_NOW),
                (0x012, EXCL_NOW),
                (0x021, EXCL_NOW),
            ]
        )
        .await,
        [
            S::SUCCESS,
            S::SUCCESS,
            S::SUCCESS,
            S::LOCK_NOT_GRANTED,
            S::LOCK_NOT_GRANTED,
            S::LOCK_NOT_GRANTED
        ]
    );
    // Bucket 65 is out of range: plain processing.
    assert_eq!(
        locks(
            &mut c,
            h,
            &[(0x411, LOCKFLAG_UNLOCK), (0x411, LOCKFLAG_UNLOCK)]
        )
        .await,
        [S::SUCCESS, S::RANGE_NOT_LOCKED]
    );
    // Bucket 64: an unlock replay leaves the range unlocked.
    assert_eq!(
        locks(
            &mut c,
            h,
            &[
                (0x401, EXCL_NOW),
                (0x402, LOCKFLAG_UNLOCK),
                (0x402, LOCKFLAG_UNLOCK),
                (0x402, EXCL_NOW),
                (0x403, LOCKFLAG_UNLOCK),
            ]
        )
        .await,
        [
            S::SUCCESS,
            S::SUCCESS,
            S::SUCCESS,
            S::SUCCESS,
            S::RANGE_NOT_LOCKED
        ]
    );
}

/// SMB 2.0.2 ignores the LockSequence field ([MS-SMB2] 3.3.5.14).
#[tokio::test]
async fn smb202_has_no_lock_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = connect_share_as(&srv, Dialect::SMB2_0_2).await;
    let h = fid(&c
        .request(Command::Create, &create_body("old", OplockLevel::NONE))
        .await);
    assert_eq!(
        locks(&mut c, h, &[(0x011, EXCL_NOW), (0x011, EXCL_NOW)]).await,
        [NtStatus::SUCCESS, NtStatus::LOCK_NOT_GRANTED]
    );
}
