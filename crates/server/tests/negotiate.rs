//! NEGOTIATE, SMB1 upgrade, framing and compound basics over a real socket.

mod common;

use common::*;
use smbx_wire::negotiate::*;
use smbx_wire::Dialect;
use smbx_wire::{Command, NtStatus};

fn tmp() -> std::path::PathBuf {
    std::env::temp_dir()
}

#[tokio::test]
async fn negotiate_311_with_contexts() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    let (m, r) = c
        .negotiate(&[
            Dialect::SMB2_0_2,
            Dialect::SMB2_1,
            Dialect::SMB3_0,
            Dialect::SMB3_0_2,
            Dialect::SMB3_1_1,
        ])
        .await;
    assert_eq!(m.status(), NtStatus::SUCCESS);
    assert!(m.header.credits >= 1);
    let r = r.unwrap();
    assert_eq!(r.dialect, Dialect::SMB3_1_1);
    assert_eq!(r.server_guid, srv.state.guid);
    assert!(r.capabilities & CAP_LARGE_MTU != 0);
    assert_eq!(r.capabilities & CAP_ENCRYPTION, 0);
    assert_eq!(r.max_read_size, 8 << 20);
    assert!(r.contexts.iter().any(|c| matches!(c,
        NegotiateContext::PreauthIntegrity { hash_algorithms, salt } if hash_algorithms == &vec![HASH_SHA512] && salt.len() == 32)));
    assert!(r.contexts.contains(&NegotiateContext::Encryption {
        ciphers: vec![CIPHER_AES128_GCM]
    }));
    assert!(r.contexts.contains(&NegotiateContext::Signing {
        algorithms: vec![SIGNING_AES_GMAC]
    }));
    // A second NEGOTIATE drops the connection.
    let h = c.header(Command::Negotiate);
    c.send_raw(&Client::message(&h, &[0; 36])).await;
    assert!(c.recv_frame().await.is_none());
}

#[tokio::test]
async fn negotiate_respects_max_protocol_and_300_encryption_cap() {
    let mut cfg = test_config(&tmp());
    cfg.global.server_max_protocol = Dialect::SMB3_0;
    let srv = start(cfg).await;
    let mut c = Client::connect(srv.addr).await;
    let (_, r) = c
        .negotiate(&[
            Dialect::SMB2_0_2,
            Dialect::SMB2_1,
            Dialect::SMB3_0,
            Dialect::SMB3_0_2,
            Dialect::SMB3_1_1,
        ])
        .await;
    let r = r.unwrap();
    assert_eq!(r.dialect, Dialect::SMB3_0);
    assert!(r.capabilities & CAP_ENCRYPTION != 0);
    assert!(r.contexts.is_empty());
}

#[tokio::test]
async fn negotiate_without_common_dialect_fails() {
    let mut cfg = test_config(&tmp());
    cfg.global.server_min_protocol = Dialect::SMB3_0;
    let srv = start(cfg).await;
    let mut c = Client::connect(srv.addr).await;
    let (m, _) = c.negotiate(&[Dialect::SMB2_0_2, Dialect::SMB2_1]).await;
    assert_eq!(m.status(), NtStatus::NOT_SUPPORTED);
}

#[tokio::test]
async fn negotiate_311_without_preauth_is_invalid() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    let req = NegotiateRequest {
        dialects: vec![Dialect::SMB3_1_1],
        contexts: vec![NegotiateContext::Encryption { ciphers: vec![2] }],
        ..Default::default()
    };
    let m = c.request(Command::Negotiate, &req.encode()).await;
    assert_eq!(m.status(), NtStatus::INVALID_PARAMETER);
}

fn smb1_negotiate(dialects: &[&str]) -> Vec<u8> {
    let mut m = vec![0xFF, b'S', b'M', b'B', 0x72];
    m.resize(32, 0);
    m.push(0);
    let mut b = Vec::new();
    for d in dialects {
        b.push(2);
        b.extend_from_slice(d.as_bytes());
        b.push(0);
    }
    m.extend_from_slice(&(b.len() as u16).to_le_bytes());
    m.extend_from_slice(&b);
    m
}

#[tokio::test]
async fn smb1_negotiate_upgrades_to_wildcard_then_smb2() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    c.send_raw(&smb1_negotiate(&["NT LM 0.12", "SMB 2.002", "SMB 2.???"]))
        .await;
    let m = c.recv().await.unwrap().remove(0);
    let r = NegotiateResponse::decode(&m.bytes).unwrap();
    assert_eq!(r.dialect, Dialect::WILDCARD);
    assert_eq!(m.header.message_id, 0);
    c.next_message_id = 1;
    let (_, r) = c
        .negotiate(&[Dialect::SMB2_0_2, Dialect::SMB2_1, Dialect::SMB3_0])
        .await;
    assert_eq!(r.unwrap().dialect, Dialect::SMB3_0);
}

#[tokio::test]
async fn smb1_negotiate_202_only() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    c.send_raw(&smb1_negotiate(&["NT LM 0.12", "SMB 2.002"]))
        .await;
    let m = c.recv().await.unwrap().remove(0);
    let r = NegotiateResponse::decode(&m.bytes).unwrap();
    assert_eq!(r.dialect, Dialect::SMB2_0_2);
    assert_eq!(r.max_read_size, 65536);
}

#[tokio::test]
async fn smb1_only_client_is_dropped() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    c.send_raw(&smb1_negotiate(&["NT LM 0.12"])).await;
    assert!(c.recv_frame().await.is_none());
}

#[tokio::test]
async fn echo_and_credit_window() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    let m = c.request(Command::Echo, &[4, 0, 0, 0]).await;
    assert_eq!(m.status(), NtStatus::SUCCESS);
    assert_eq!(m.body(), &[4, 0, 0, 0]);
    // Reusing a MessageId drops the connection.
    c.next_message_id -= 1;
    let h = c.header(Command::Echo);
    c.send_raw(&Client::message(&h, &[4, 0, 0, 0])).await;
    assert!(c.recv_frame().await.is_none());
}

#[tokio::test]
async fn commands_need_a_session_and_garbage_is_survived() {
    let srv = start(test_config(&tmp())).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    let m = c
        .request(Command::TreeConnect, &[9, 0, 0, 0, 0, 0, 0, 0, 0])
        .await;
    assert_eq!(m.status(), NtStatus::USER_SESSION_DELETED);
    let m = c.request(Command::Echo, &[1]).await;
    assert_eq!(m.status(), NtStatus::INVALID_PARAMETER);
    // Compound: two echoes, the second related; both answered, 8-byte aligned.
    c.send_compound(&[
        (Command::Echo, vec![4, 0, 0, 0], false),
        (Command::Echo, vec![4, 0, 0, 0], true),
    ])
    .await;
    let ms = c.recv().await.unwrap();
    assert_eq!(ms.len(), 2);
    assert_eq!(ms[0].bytes.len() % 8, 0);
    assert!(ms.iter().all(|m| m.status() == NtStatus::SUCCESS));
    // A frame with a non-zero top byte kills the connection but not the server.
    use tokio::io::AsyncWriteExt;
    c.stream.write_all(&[1, 0, 0, 0]).await.unwrap();
    assert!(c.recv_frame().await.is_none());
    let mut c2 = Client::connect(srv.addr).await;
    let (m, _) = c2.negotiate(&[Dialect::SMB2_0_2]).await;
    assert_eq!(m.status(), NtStatus::SUCCESS);
}

/// `max connections`: a connection past the limit is closed at once; one that
/// ends frees its slot for the next.
#[tokio::test]
async fn max_connections_refuses_and_frees_slots() {
    let mut cfg = test_config(&tmp());
    cfg.global.max_connections = 1;
    let srv = start(cfg).await;
    let mut a = Client::connect(srv.addr).await;
    assert_eq!(
        a.negotiate(&[Dialect::SMB3_1_1]).await.0.status(),
        NtStatus::SUCCESS
    );
    let mut b = Client::connect(srv.addr).await;
    assert!(b.recv_frame().await.is_none(), "second connection refused");
    drop(a);
    for _ in 0..100 {
        let mut c = Client::connect(srv.addr).await;
        let h = c.header(Command::Negotiate);
        let req = NegotiateRequest {
            dialects: vec![Dialect::SMB3_0_2],
            ..Default::default()
        };
        c.send_raw(&Client::message(&h, &req.encode())).await;
        if let Some(f) = c.recv_frame().await {
            assert!(!f.is_empty());
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the slot of the closed connection was never freed");
}
