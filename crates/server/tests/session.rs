//! SESSION_SETUP, signing, TREE_CONNECT, LOGOFF over a real socket.

mod common;

use common::*;
use smbx_wire::session::*;
use smbx_wire::tree::*;
use smbx_wire::Dialect;
use smbx_wire::{Command, NtStatus};

fn cfg() -> smbx_config::Config {
    test_config(&std::env::temp_dir())
}

#[tokio::test]
async fn ntlm_logon_signing_tree_connect_logoff_all_dialects() {
    let srv = start(cfg()).await;
    for d in Dialect::ALL {
        let mut c = Client::connect(srv.addr).await;
        c.negotiate(&[d]).await;
        let r = c.session_setup("user", "pass").await;
        assert_eq!(r.status(), NtStatus::SUCCESS, "dialect {d}");
        let flags = SessionSetupResponse::decode(&r.bytes)
            .unwrap()
            .session_flags;
        assert_eq!(flags, 0);
        if d.is_smb3() {
            // The final response is signed, with the key the client derived.
            assert!(r.header.is_signed(), "dialect {d}");
            assert!(c.signer.as_ref().unwrap().verify(&r.bytes), "dialect {d}");
        }
        let t = c.tree_connect("share").await;
        assert_eq!(t.status(), NtStatus::SUCCESS, "dialect {d}");
        assert!(t.header.is_signed());
        assert!(c.signer.as_ref().unwrap().verify(&t.bytes));
        let tr = TreeConnectResponse::decode(&t.bytes).unwrap();
        assert_eq!(tr.share_type, SHARE_TYPE_DISK);
        assert_eq!(tr.maximal_access, smbx_wire::AccessMask::FILE_ALL_ACCESS);
        // A bad signature is refused.
        let mut h = c.header(Command::Echo);
        h.flags |= smbx_wire::header::FLAGS_SIGNED;
        let mut m = Client::message(&h, &[4, 0, 0, 0]);
        c.signer.as_ref().unwrap().sign(&mut m);
        m[60] ^= 1;
        let mut h2 = c.header(Command::TreeDisconnect);
        h2.flags |= smbx_wire::header::FLAGS_SIGNED;
        let mut m2 = Client::message(&h2, &[4, 0, 0, 0]);
        m2[60] = 0xAA;
        c.send_raw(&m2).await;
        let r = c.recv().await.unwrap().remove(0);
        assert_eq!(r.status(), NtStatus::ACCESS_DENIED, "dialect {d}");
        let r = c
            .request_signed(
                Command::TreeConnect,
                &TreeConnectRequest {
                    flags: 0,
                    path: "\\\\x\\nope".into(),
                }
                .encode(),
            )
            .await;
        assert_eq!(r.status(), NtStatus::BAD_NETWORK_NAME);
        let r = c
            .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
            .await;
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let r = c
            .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
            .await;
        assert_eq!(r.status(), NtStatus::NETWORK_NAME_DELETED);
        let r = c.request_signed(Command::Logoff, &[4, 0, 0, 0]).await;
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let r = c.request(Command::Logoff, &[4, 0, 0, 0]).await;
        assert_eq!(r.status(), NtStatus::USER_SESSION_DELETED);
    }
    assert!(srv.state.sessions.is_empty());
}

#[tokio::test]
async fn wrong_password_and_guest_mapping() {
    let srv = start(cfg()).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    let r = c.session_setup("user", "wrong").await;
    assert_eq!(r.status(), NtStatus::LOGON_FAILURE);
    assert!(srv.state.sessions.is_empty());

    let mut g = cfg();
    g.global.map_to_guest = smbx_config::MapToGuest::BadUser;
    g.shares[0].guest_ok = true;
    let srv = start(g).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    let r = c.session_setup("nobody-here", "x").await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let flags = SessionSetupResponse::decode(&r.bytes)
        .unwrap()
        .session_flags;
    assert_eq!(flags, SESSION_FLAG_IS_GUEST);
    assert!(!r.header.is_signed());
    assert_eq!(c.tree_connect("share").await.status(), NtStatus::SUCCESS);
}

#[tokio::test]
async fn anonymous_reaches_ipc_only() {
    let srv = start(cfg()).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    let r = c.session_setup("", "").await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let flags = SessionSetupResponse::decode(&r.bytes)
        .unwrap()
        .session_flags;
    assert_eq!(flags, SESSION_FLAG_IS_NULL);
    assert_eq!(
        c.tree_connect("share").await.status(),
        NtStatus::ACCESS_DENIED
    );
    let t = c.tree_connect("ipc$").await;
    assert_eq!(t.status(), NtStatus::SUCCESS);
    assert_eq!(
        TreeConnectResponse::decode(&t.bytes).unwrap().share_type,
        SHARE_TYPE_PIPE
    );
}

#[tokio::test]
async fn mandatory_signing_refuses_unsigned_requests() {
    let mut g = cfg();
    g.global.server_signing = smbx_config::SigningSetting::Mandatory;
    let srv = start(g).await;
    let mut c = Client::connect(srv.addr).await;
    let (_, n) = c.negotiate(&[Dialect::SMB3_1_1]).await;
    assert_eq!(n.unwrap().security_mode & 2, 2);
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    let signer = c.signer.take();
    let r = c.tree_connect("share").await;
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    c.signer = signer;
    assert_eq!(c.tree_connect("share").await.status(), NtStatus::SUCCESS);
}

#[tokio::test]
async fn encryption_required_share_refuses_plain_clients() {
    let mut g = cfg();
    g.shares[0].smb_encrypt = Some(smbx_config::EncryptSetting::Required);
    let srv = start(g).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB2_1]).await;
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        c.tree_connect("share").await.status(),
        NtStatus::ACCESS_DENIED
    );
    // A 3.1.1 client that can encrypt gets the share flagged ENCRYPT_DATA.
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    let t = c.tree_connect("share").await;
    assert_eq!(t.status(), NtStatus::SUCCESS);
    let tr = TreeConnectResponse::decode(&t.bytes).unwrap();
    assert!(tr.share_flags & SHAREFLAG_ENCRYPT_DATA != 0);
    // Unencrypted requests on that tree are refused.
    let r = c.request_signed(Command::Flush, &[0; 24]).await;
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
}

/// A copy of the client's current signer (built again from its key).
fn signer_of(c: &Client) -> smbx_security::signing::Signer {
    smbx_security::signing::Signer::new(
        c.signer.as_ref().expect("signer").algorithm(),
        &c.keys.as_ref().expect("keys").signing,
    )
}

/// Waits (bounded) until the server holds `n` sessions.
async fn wait_sessions(srv: &TestServer, n: usize) {
    for _ in 0..200 {
        if srv.state.sessions.len() == n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("expected {n} sessions, have {}", srv.state.sessions.len());
}

#[tokio::test]
async fn multichannel_binding() {
    let srv = start(cfg()).await;
    let mut c1 = Client::connect(srv.addr).await;
    c1.negotiate(&[Dialect::SMB3_1_1]).await;
    assert_eq!(
        c1.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    assert_eq!(c1.tree_connect("share").await.status(), NtStatus::SUCCESS);
    let sid = c1.session_id;
    let session_signer = signer_of(&c1);

    // Refusals: no SessionId, an unsigned bind, a connection whose signing
    // algorithm is not the (GMAC) session's.
    let mut c2 = Client::connect(srv.addr).await;
    c2.negotiate(&[Dialect::SMB3_1_1]).await;
    let bind = SessionSetupRequest {
        flags: SESSION_FLAG_BINDING,
        security_buffer: vec![1],
        ..Default::default()
    };
    let r = c2.request(Command::SessionSetup, &bind.encode()).await;
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    c2.session_id = sid;
    let r = c2.request(Command::SessionSetup, &bind.encode()).await;
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    let mut old = Client::connect(srv.addr).await;
    old.negotiate(&[Dialect::SMB2_1]).await;
    old.session_id = sid;
    old.signer = Some(signer_of(&c1));
    let r = old
        .request_signed(Command::SessionSetup, &bind.encode())
        .await;
    assert_eq!(r.status(), NtStatus::REQUEST_OUT_OF_SEQUENCE);
    // A connection that is not a channel cannot use the session.
    let r = old.request_signed(Command::Echo, &[4, 0, 0, 0]).await;
    assert_eq!(r.status(), NtStatus::USER_SESSION_DELETED);

    // The bind: signed with the session's key, answered with the channel's own.
    let r = c2.bind_session(sid, &session_signer, "user", "pass").await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(r.header.session_id, sid);
    let channel_signer = signer_of(&c2);
    assert!(r.header.is_signed());
    assert!(channel_signer.verify(&r.bytes));
    assert!(
        !session_signer.verify(&r.bytes),
        "3.1.1 channel key differs"
    );
    assert_eq!(srv.state.sessions.len(), 1);

    // The session works on the new channel, signed with the channel key.
    c2.tree_id = c1.tree_id;
    let t = c2.tree_connect("share").await;
    assert_eq!(t.status(), NtStatus::SUCCESS);
    assert!(channel_signer.verify(&t.bytes));
    // The session's key is not the channel's.
    let channel = c2.signer.replace(signer_of(&c1));
    let r = c2
        .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
        .await;
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    c2.signer = channel;

    // Losing the first channel keeps the session; losing the last ends it.
    drop(c1);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(srv.state.sessions.len(), 1);
    let r = c2
        .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
        .await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    drop(c2);
    wait_sessions(&srv, 0).await;
}

#[tokio::test]
async fn binding_needs_the_same_user() {
    let srv = start_with_users(cfg(), &[("user", "pass"), ("other", "word")]).await;
    let mut c1 = Client::connect(srv.addr).await;
    c1.negotiate(&[Dialect::SMB3_0_2]).await;
    assert_eq!(
        c1.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    let sid = c1.session_id;
    let signer = signer_of(&c1);
    // SMB 2.x has no multichannel.
    let mut old = Client::connect(srv.addr).await;
    old.negotiate(&[Dialect::SMB2_1]).await;
    let r = old.bind_session(sid, &signer, "user", "pass").await;
    assert_eq!(r.status(), NtStatus::REQUEST_NOT_ACCEPTED);
    let mut c2 = Client::connect(srv.addr).await;
    c2.negotiate(&[Dialect::SMB3_0_2]).await;
    let r = c2.bind_session(sid, &signer, "other", "word").await;
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    let r = c2.bind_session(sid, &signer, "user", "wrong").await;
    assert_ne!(r.status(), NtStatus::SUCCESS);
    // A refused bind leaves the session alone; the right user binds.
    let r = c2.bind_session(sid, &signer, "user", "pass").await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    // A 3.0.2 channel has its own key too (a new NTLM session key).
    assert!(!signer.verify(&r.bytes));
    assert_eq!(c1.tree_connect("share").await.status(), NtStatus::SUCCESS);
    // LOGOFF on one channel ends the session on all.
    let r = c2.request_signed(Command::Logoff, &[4, 0, 0, 0]).await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    wait_sessions(&srv, 0).await;
    let r = c1.request_signed(Command::Echo, &[4, 0, 0, 0]).await;
    assert_eq!(r.header.status, NtStatus::SUCCESS, "ECHO needs no session");
    let r = c1
        .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
        .await;
    assert_eq!(r.status(), NtStatus::USER_SESSION_DELETED);
}

/// A session has at most 32 channels (the first included); one more bind is refused
/// with STATUS_INSUFFICIENT_RESOURCES and the session lives on (as Windows and Samba:
/// smb2.multichannel.generic.num_channels).
#[tokio::test]
async fn the_33rd_channel_is_refused_with_insufficient_resources() {
    let srv = start(cfg()).await;
    let mut c1 = Client::connect(srv.addr).await;
    c1.negotiate(&[Dialect::SMB3_0_2]).await;
    assert_eq!(
        c1.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    let sid = c1.session_id;
    let signer = signer_of(&c1);
    let mut channels = Vec::new();
    for i in 1..32 {
        let mut c = Client::connect(srv.addr).await;
        c.negotiate(&[Dialect::SMB3_0_2]).await;
        let r = c.bind_session(sid, &signer, "user", "pass").await;
        assert_eq!(r.status(), NtStatus::SUCCESS, "channel {i}");
        channels.push(c);
    }
    let mut extra = Client::connect(srv.addr).await;
    extra.negotiate(&[Dialect::SMB3_0_2]).await;
    let r = extra.bind_session(sid, &signer, "user", "pass").await;
    assert_eq!(r.status(), NtStatus::INSUFFICIENT_RESOURCES);
    // The session and its channels are untouched.
    assert_eq!(c1.tree_connect("share").await.status(), NtStatus::SUCCESS);
    let last = channels.last_mut().unwrap();
    last.tree_id = c1.tree_id;
    let r = last
        .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
        .await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
}

#[tokio::test]
async fn reauthentication_keeps_the_session() {
    let srv = start(cfg()).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_0_2]).await;
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    let sid = c.session_id;
    assert_eq!(c.tree_connect("share").await.status(), NtStatus::SUCCESS);
    // Re-authenticate on the same session (SessionId set, no BINDING flag).
    let signer = c.signer.take();
    let keys = c.keys.take();
    let r = c.session_setup("user", "pass").await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(c.session_id, sid);
    // Keys are unchanged by re-authentication.
    c.signer = signer;
    c.keys = keys;
    assert_eq!(srv.state.sessions.len(), 1);
    let r = c
        .request_signed(Command::TreeDisconnect, &[4, 0, 0, 0])
        .await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
}

#[tokio::test]
async fn unauthenticated_connections_time_out() {
    let mut g = cfg();
    g.global.unauthenticated_timeout_secs = 1;
    let srv = start(g).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    // No SESSION_SETUP: the server drops the connection.
    assert!(c.recv_frame().await.is_none());
}

#[tokio::test]
async fn deadtime_counts_from_the_last_request() {
    let mut g = cfg();
    g.global.deadtime_secs = 1;
    let srv = start(g).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    // A request every 250 ms keeps the connection past twice the deadtime: the
    // read loop's one timer, set at logon, goes off and is set again from the last
    // request each time.
    for _ in 0..8 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let r = c.request(Command::Echo, &[4, 0, 0, 0]).await;
        assert_eq!(r.status(), NtStatus::SUCCESS);
    }
    // Then idle with nothing open: dropped.
    let end = tokio::time::timeout(std::time::Duration::from_secs(30), c.recv_frame()).await;
    assert!(
        matches!(end, Ok(None)),
        "still open 30 s after the deadtime"
    );
}
