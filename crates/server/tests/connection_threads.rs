//! Connection threads (`Server::with_connection_threads`): each Direct TCP connection
//! runs on one of a few single-threaded runtimes, its request tasks (signed chains,
//! compounds) on the multi-threaded one. Several connections on the same thread are
//! served side by side, and one that stops in the middle of a frame stalls none of them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use smbx_server::conn::ConnectionThreads;
use smbx_server::Server;
use smbx_wire::rw::{ReadRequest, ReadResponse, WriteRequest};
use smbx_wire::{Command, NtStatus};
use tokio::io::AsyncWriteExt;

/// A server whose Direct TCP connections run on `n` connection threads.
async fn start_on_threads(dir: &std::path::Path, n: usize) -> TestServer {
    let store = Users(vec![("user".into(), smbx_passdb::nt_hash("pass"))]);
    let threads = ConnectionThreads::start(n, tokio::runtime::Handle::current()).unwrap();
    assert_eq!(threads.len(), n);
    let server = Server::bind_with_credentials(Arc::new(test_config(dir)), Arc::new(store))
        .await
        .unwrap()
        .with_connection_threads(threads);
    let addr = server.local_addrs()[0];
    let state = server.state();
    tokio::spawn(server.run());
    TestServer { addr, state }
}

fn echo() -> Vec<u8> {
    smbx_wire::simple::encode_simple()
}

/// Five logged-on clients over two connection threads (so at least two share one),
/// each with a half-sent frame from a sixth client stuck on the threads: every client
/// gets its ECHOs and compounds answered, and the server counts all six connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_share_threads_and_a_stalled_one_blocks_none() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start_on_threads(dir.path(), 2).await;

    // Stopped in the middle of a frame: its read loop waits for the rest.
    let mut stalled = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    stalled.write_all(&[0, 0, 0x10, 0]).await.unwrap();
    stalled.write_all(&[0xfe, b'S', b'M', b'B']).await.unwrap();

    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(connect_share(&srv).await);
    }
    let serve = clients.iter_mut().map(|c| async move {
        for _ in 0..20 {
            let r = c.request(Command::Echo, &echo()).await;
            assert_eq!(r.header.status, NtStatus::SUCCESS);
        }
        // A compound goes on as a task of its own (on the multi-threaded runtime).
        let ids = c
            .send_compound(&[
                (Command::Echo, echo(), false),
                (Command::Echo, echo(), false),
            ])
            .await;
        let mut answered = Vec::new();
        while answered.len() < ids.len() {
            for m in c.recv().await.expect("connection closed") {
                assert_eq!(m.header.status, NtStatus::SUCCESS);
                answered.push(m.header.message_id);
            }
        }
        answered.sort_unstable();
        assert_eq!(answered, ids);
    });
    tokio::time::timeout(
        Duration::from_secs(30),
        futures_util::future::join_all(serve),
    )
    .await
    .expect("every client answered while one connection is stalled");
    assert_eq!(srv.state.connections.len(), 6);
    drop(stalled);
}

/// Data written over one connection thread's connection (a WRITE large enough to be
/// spliced) is read back whole over another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_thread_is_read_on_another() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"").unwrap();
    let srv = start_on_threads(dir.path(), 2).await;
    let mut a = connect_share(&srv).await;
    let mut b = connect_share(&srv).await;
    let data: Vec<u8> = (0..64 * 1024usize)
        .map(|i| (i * 13 + i / 512) as u8)
        .collect();
    let fa = open(&mut a).await;
    let w = WriteRequest {
        file_id: fa,
        length: data.len() as u32,
        data: &data,
        ..Default::default()
    }
    .encode();
    assert_eq!(
        a.request(Command::Write, &w).await.status(),
        NtStatus::SUCCESS
    );
    let fb = open(&mut b).await;
    let r = ReadRequest {
        length: data.len() as u32,
        file_id: fb,
        ..Default::default()
    }
    .encode();
    let r = b.request(Command::Read, &r).await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let mut m = vec![0u8; smbx_wire::header::HEADER_SIZE];
    m.extend_from_slice(r.body());
    assert!(ReadResponse::decode(&m).unwrap().data == &data[..]);
}

async fn open(c: &mut Client) -> smbx_wire::FileId {
    let body = smbx_wire::create::CreateRequestBuilder {
        oplock_level: smbx_wire::oplock::OplockLevel::NONE,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(0x0012_019f),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 1,
        name: "f".into(),
        ..Default::default()
    }
    .encode();
    file_id_of(&created(&c.request(Command::Create, &body).await))
}
