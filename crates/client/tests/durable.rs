//! Durable opens survive the session (smbx and Samba's smbd on 127.0.0.1): a
//! file opened with `ClientOptions::durable_handles` gets a durable v2 handle
//! and a lease; in the middle of a transfer, with writes in flight, the
//! session's only connection is closed under them, so the server drops the
//! session and keeps the open for its durable timeout. The client connects
//! again, logs on with PreviousSessionId, connects the share, reclaims the
//! open (DH2C) and sends the failed writes again with the new ids: the
//! transfer completes, the data read back and the server's copy have the
//! written SHA-256, and the tree and handle go on under a new session.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{random_bytes, sha256, Server, PASSWORD, USER};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use smbx_client::{Client, ClientOptions, OpenOptions};

/// Bytes written.
const TOTAL: usize = 16 << 20;
/// Bytes per WRITE.
const PIECE: usize = 256 << 10;
/// WRITEs in flight at once.
const DEPTH: usize = 8;

async fn lost_session_is_reestablished(server: Server) {
    let opts = ClientOptions {
        timeout: Some(Duration::from_secs(20)),
        ..ClientOptions::default()
    }
    .with_durable_handles(true);
    let client = Client::connect(&server.addr(), opts).await.unwrap();
    let session = client.login(USER, PASSWORD, "").await.unwrap();
    let tree = session.tree("share").await.unwrap();
    let file = tree
        .open("durable.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    assert!(
        file.is_durable(),
        "{}: no durable handle granted",
        server.kind
    );
    let (old_session, old_tree, old_file) = (session.id(), tree.id(), file.id());
    drop(session);

    let data = Arc::new(random_bytes(TOTAL));
    let done = Arc::new(AtomicUsize::new(0));
    let cut = TOTAL / PIECE / 4;
    let file = Arc::new(file);
    let killer = {
        let (tree, done) = (tree.clone(), done.clone());
        tokio::spawn(async move {
            // A quarter of the writes answered, the rest queued or in flight:
            // the connection goes, and the server drops the session with it.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while done.load(Ordering::Acquire) < cut && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tree.session().client().connection().close();
        })
    };
    stream::iter((0..TOTAL).step_by(PIECE))
        .map(|off| {
            let (file, data, done) = (file.clone(), data.clone(), done.clone());
            async move {
                let n = file.write_at(off as u64, &data[off..off + PIECE]).await?;
                done.fetch_add(1, Ordering::AcqRel);
                Ok::<_, smbx_client::Error>(n)
            }
        })
        .buffer_unordered(DEPTH)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("{}: write failed: {e}", server.kind));
    killer.await.unwrap();

    let session = tree.session();
    assert_ne!(session.id(), old_session, "{}: same session", server.kind);
    // The reclaimed open may keep its FileId (smbx) or get a new volatile
    // half (Samba); either way the handle names the open the server has now.
    eprintln!(
        "{}: session {old_session:#x} -> {:#x}, tree {old_tree} -> {}, file {old_file:?} -> {:?}",
        server.kind,
        session.id(),
        tree.id(),
        file.id()
    );
    // Read back through the reclaimed handle, then the server's own copy.
    let back = file.read_at(0, TOTAL).await.unwrap();
    assert_eq!(sha256(&back), sha256(&data), "{}: read back", server.kind);
    Arc::try_unwrap(file).unwrap().close().await.unwrap();
    let on_disk = std::fs::read(server.share_dir("share").join("durable.bin")).unwrap();
    assert_eq!(
        sha256(&on_disk),
        sha256(&data),
        "{}: the server's copy",
        server.kind
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smbx_reclaims_durable_open_on_new_session() {
    lost_session_is_reestablished(common::start_smbx("")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_reclaims_durable_open_on_new_session() {
    // Samba grants durable handles only without kernel share modes, kernel
    // oplocks and POSIX locking.
    lost_session_is_reestablished(common::start_samba(
        "    durable handles = yes\n    kernel share modes = no\n    posix locking = no\n    smb2 leases = yes",
    ))
    .await;
}
