//! The client acknowledges the lease breaks of its own durable opens (smbx and
//! Samba's smbd on 127.0.0.1): a client with durable handles holds a file open
//! under a read+handle lease and takes its event queue without reading it; a
//! second client opens the file with a conflicting share mode, so the server
//! breaks the handle caching and waits for the acknowledgment. The first
//! client acknowledges it itself (LEASE_BREAK_ACK, counted by
//! `Client::breaks_acknowledged`), the second client's open gets the sharing
//! violation, and the break notification still reaches the application's
//! queue.

mod common;

use std::time::Duration;

use common::{Server, PASSWORD, USER};
use smbx_client::{Client, ClientOptions, Event, NtStatus, OpenOptions, ShareAccess};
use smbx_wire::oplock::{LeaseBreakFlags, LeaseBreakNotification, LeaseState};

async fn own_lease_break_is_acknowledged(server: Server) {
    let kind = server.kind;
    let holder = Client::connect(
        &server.addr(),
        ClientOptions::default().with_durable_handles(true),
    )
    .await
    .unwrap();
    let mut events = holder.events().expect("events");
    let session = holder.login(USER, PASSWORD, "").await.unwrap();
    let tree = session.tree("share").await.unwrap();
    let file = tree
        .open("held.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    assert!(file.is_durable(), "{kind}: no durable handle granted");
    file.write_at(0, b"held").await.unwrap();
    assert_eq!(holder.breaks_acknowledged(), 0);

    // A second client, without durable handles, wants the file to itself.
    let other = Client::connect(&server.addr(), ClientOptions::default())
        .await
        .unwrap();
    let other_tree = other
        .login(USER, PASSWORD, "")
        .await
        .unwrap()
        .tree("share")
        .await
        .unwrap();
    let r = other_tree
        .open(
            "held.bin",
            &OpenOptions::read_only().share(ShareAccess::empty()),
        )
        .await;
    let status = r.as_ref().err().and_then(|e| e.status());
    assert_eq!(
        status,
        Some(NtStatus::SHARING_VIOLATION),
        "{kind}: the conflicting open: {r:?}"
    );
    // The acknowledgment's answer may trail the other client's (bounded wait).
    for _ in 0..100 {
        if holder.breaks_acknowledged() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        holder.breaks_acknowledged(),
        1,
        "{kind}: the holder did not acknowledge its lease break"
    );

    // The application still sees the break.
    let ev = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("a break event")
        .expect("events open");
    let Event::Other(resp) = ev else {
        panic!("{kind}: not a lease break: {ev:?}");
    };
    let n = LeaseBreakNotification::decode(&resp.msg).unwrap();
    assert!(n.flags.contains(LeaseBreakFlags::ACK_REQUIRED), "{n:?}");
    assert_eq!(n.current_lease_state, LeaseState::RH, "{kind}: {n:?}");
    assert!(
        !n.new_lease_state.contains(LeaseState::HANDLE),
        "{kind}: {n:?}"
    );

    // The holder's open goes on.
    file.write_at(4, b" on").await.unwrap();
    assert_eq!(file.read_at(0, 7).await.unwrap(), b"held on");
    file.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smbx_lease_break_of_a_durable_open_is_acknowledged() {
    own_lease_break_is_acknowledged(common::start_smbx("")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_lease_break_of_a_durable_open_is_acknowledged() {
    own_lease_break_is_acknowledged(common::start_samba(
        "    durable handles = yes\n    kernel share modes = no\n    posix locking = no\n    smb2 leases = yes",
    ))
    .await;
}
