//! Lease breaks over real sockets ([MS-SMB2] 3.3.4.7, 3.3.5.22.2): a break that is
//! still in progress when more conflicting opens arrive goes on step by step after
//! each acknowledgment, and a rename waits until the other leases on the file have
//! given up handle caching.

mod common;

use std::collections::HashMap;

use common::*;
use smbx_wire::create::{encode_contexts, CreateRequestBuilder};
use smbx_wire::oplock::{
    encode_lease_response, LeaseBreakAck, LeaseBreakFlags, LeaseBreakNotification, LeaseContext,
    LeaseState, OplockLevel, LEASE_CONTEXT_NAME,
};
use smbx_wire::set_info::{FileRenameInfo, SetInfoRequest};
use smbx_wire::{Command, NtStatus};

const ALL: u32 = smbx_wire::AccessMask::FILE_ALL_ACCESS.bits();
const GENERIC_READ: u32 = smbx_wire::AccessMask::GENERIC_READ.bits();
const RH: LeaseState = LeaseState::RH;
const RWH: LeaseState = LeaseState::RWH;
/// FILE_OPEN, FILE_OPEN_IF, FILE_OVERWRITE.
const OPEN: u32 = 1;
const OPEN_IF: u32 = 3;
const OVERWRITE: u32 = 4;

/// What arrived on the connection: final responses by MessageId, the MessageIds
/// that got an interim STATUS_PENDING, and lease break notifications in order.
#[derive(Default)]
struct Inbox {
    responses: HashMap<u64, Msg>,
    interim: Vec<u64>,
    breaks: Vec<LeaseBreakNotification>,
}

impl Inbox {
    /// Reads until the final response to `mid` has arrived and returns it.
    async fn response(&mut self, c: &mut Client, mid: u64) -> Msg {
        loop {
            if let Some(m) = self.responses.remove(&mid) {
                return m;
            }
            self.read_one(c).await;
        }
    }

    /// Reads until `n` break notifications are queued and returns them.
    async fn breaks(&mut self, c: &mut Client, n: usize) -> Vec<LeaseBreakNotification> {
        while self.breaks.len() < n {
            self.read_one(c).await;
        }
        std::mem::take(&mut self.breaks)
    }

    /// Reads one frame; a server that sends nothing for 10 s (a break or a response
    /// that never comes) fails the test instead of hanging it.
    async fn read_one(&mut self, c: &mut Client) {
        let msgs = tokio::time::timeout(std::time::Duration::from_secs(10), c.recv())
            .await
            .expect("nothing arrived")
            .expect("connection closed");
        for m in msgs {
            if m.header.message_id == u64::MAX {
                assert_eq!(m.header.command, Command::OplockBreak as u16);
                self.breaks
                    .push(LeaseBreakNotification::decode(&m.bytes).expect("lease break"));
            } else if m.header.status == NtStatus::PENDING && m.header.is_async() {
                self.interim.push(m.header.message_id);
            } else {
                self.responses.insert(m.header.message_id, m);
            }
        }
    }
}

/// Sends `body` as `cmd` without waiting; returns its MessageId.
/// A server, a client and the client's first open of `name` with lease `key`
/// asking for `state` (created if missing, full access).
async fn leased(
    name: &str,
    key: u8,
    state: LeaseState,
) -> (
    tempfile::TempDir,
    TestServer,
    Client,
    Inbox,
    smbx_wire::create::CreateResponse,
) {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = connect_share(&srv).await;
    let mut inbox = Inbox::default();
    let mid = send(
        &mut c,
        Command::Create,
        &lease_create(name, ALL, OPEN_IF, key, state),
    )
    .await;
    let r = created(&inbox.response(&mut c, mid).await);
    (dir, srv, c, inbox, r)
}

async fn send(c: &mut Client, cmd: Command, body: &[u8]) -> u64 {
    let h = c.header(cmd);
    let mid = h.message_id;
    c.send_raw(&Client::message(&h, body)).await;
    mid
}

fn lease_create(name: &str, access: u32, disposition: u32, key: u8, state: LeaseState) -> Vec<u8> {
    let lease = encode_lease_response(&LeaseContext {
        version: 1,
        lease_key: [key; 16],
        lease_state: state,
        ..Default::default()
    });
    CreateRequestBuilder {
        oplock_level: OplockLevel::LEASE,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(access),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: disposition,
        name: name.into(),
        contexts: encode_contexts(&[(&LEASE_CONTEXT_NAME[..], &lease)]),
        ..Default::default()
    }
    .encode()
}

fn lease_ack(key: u8, state: LeaseState) -> Vec<u8> {
    LeaseBreakAck {
        flags: 0,
        lease_key: [key; 16],
        lease_state: state,
        lease_duration: 0,
    }
    .encode()
}

fn acked_state(m: &Msg) -> LeaseState {
    assert_eq!(m.status(), NtStatus::SUCCESS);
    LeaseBreakAck::decode(&m.bytes).unwrap().lease_state
}

fn check_break(n: &LeaseBreakNotification, key: u8, from: LeaseState, to: LeaseState, ack: bool) {
    assert_eq!(n.lease_key, [key; 16]);
    assert_eq!((n.current_lease_state, n.new_lease_state), (from, to));
    let flags = if ack {
        LeaseBreakFlags::ACK_REQUIRED
    } else {
        LeaseBreakFlags::empty()
    };
    assert_eq!(n.flags, flags);
}

/// RWH is broken to RH for a plain open; an overwrite arriving meanwhile sends no
/// new notification, but the acknowledgment to RH is answered by a further break to
/// R, and the acknowledgment to R by R -> NONE. Only then do both opens complete.
#[tokio::test]
async fn break_in_progress_continues_step_by_step() {
    let (_dir, _srv, mut c, mut inbox, r) = leased("f", 1, RWH).await;
    assert_eq!(r.oplock_level, OplockLevel::LEASE);

    let open2 = send(
        &mut c,
        Command::Create,
        &create_with("f", OplockLevel::NONE, OPEN),
    )
    .await;
    let b = inbox.breaks(&mut c, 1).await;
    check_break(&b[0], 1, RWH, RH, true);
    let open3 = send(
        &mut c,
        Command::Create,
        &create_with("f", OplockLevel::NONE, OVERWRITE),
    )
    .await;

    let ack = send(&mut c, Command::OplockBreak, &lease_ack(1, RH)).await;
    assert_eq!(acked_state(&inbox.response(&mut c, ack).await), RH);
    let b = inbox.breaks(&mut c, 1).await;
    check_break(&b[0], 1, RH, LeaseState::READ, true);
    assert!(!inbox.responses.contains_key(&open2));
    assert!(!inbox.responses.contains_key(&open3));

    let ack = send(
        &mut c,
        Command::OplockBreak,
        &lease_ack(1, LeaseState::READ),
    )
    .await;
    assert_eq!(
        acked_state(&inbox.response(&mut c, ack).await),
        LeaseState::READ
    );
    let b = inbox.breaks(&mut c, 1).await;
    check_break(&b[0], 1, LeaseState::READ, LeaseState::NONE, false);

    created(&inbox.response(&mut c, open2).await);
    let r3 = created(&inbox.response(&mut c, open3).await);
    assert_eq!(r3.create_action, 3, "overwritten");
}

/// A rename through one lease's open breaks the other lease's handle caching and
/// completes only after that break is acknowledged (answered STATUS_PENDING
/// meanwhile); the target name does not exist until then.
#[tokio::test]
async fn rename_waits_for_handle_caching_to_go() {
    let (dir, _srv, mut c, mut inbox, h1) = leased("src", 1, RH).await;
    let mid = send(
        &mut c,
        Command::Create,
        &lease_create("src", GENERIC_READ, OPEN, 2, RH),
    )
    .await;
    assert_eq!(
        created(&inbox.response(&mut c, mid).await).oplock_level,
        OplockLevel::LEASE
    );

    let fid = file_id_of(&h1);
    let rename = FileRenameInfo {
        replace_if_exists: true,
        root_directory: 0,
        file_name: "dst".into(),
    }
    .encode();
    let body = SetInfoRequest {
        info_type: 1,
        info_class: 10,
        additional_information: 0,
        file_id: fid,
        buffer: &rename,
    }
    .encode();
    let rename_mid = send(&mut c, Command::SetInfo, &body).await;
    let b = inbox.breaks(&mut c, 1).await;
    check_break(&b[0], 2, RH, LeaseState::READ, true);

    // Not renamed yet; the rename went async.
    let mid = send(
        &mut c,
        Command::Create,
        &create_with("dst", OplockLevel::NONE, OPEN),
    )
    .await;
    assert_eq!(
        inbox.response(&mut c, mid).await.status(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert!(!inbox.responses.contains_key(&rename_mid));
    assert!(inbox.interim.contains(&rename_mid));

    let ack = send(
        &mut c,
        Command::OplockBreak,
        &lease_ack(2, LeaseState::READ),
    )
    .await;
    assert_eq!(
        acked_state(&inbox.response(&mut c, ack).await),
        LeaseState::READ
    );
    assert_eq!(
        inbox.response(&mut c, rename_mid).await.status(),
        NtStatus::SUCCESS
    );
    assert!(dir.path().join("dst").exists());
}
