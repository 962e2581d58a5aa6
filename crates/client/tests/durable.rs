//! Durable opens survive the session (smbx and Samba's smbd on 127.0.0.1): a
//! file opened with `ClientOptions::durable_handles` gets a durable v2 handle
//! and a lease; in the middle of a transfer, with writes in flight, the
//! session's only connection is closed under them, so the server drops the
//! session and keeps the open for its durable timeout. The client connects
//! again, logs on with PreviousSessionId, connects the share, reclaims the
//! open (DH2C) and sends the failed writes again with the new ids: the
//! transfer completes, the data read back and the server's copy have the
//! written SHA-256, and the tree and handle go on under a new session.
//!
//! And an open the server will not give back: after the cut the server drops it
//! (smbx: another client's conflicting open closes it) or refuses it (Samba: the
//! file's stat changed after the disconnect); the next request re-establishes
//! the session, the reclaim is refused, and every request on that handle fails
//! with `Error::DurableOpenLost` without being sent, while the tree's other
//! durable open is reclaimed and goes on.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{random_bytes, sha256, Server, PASSWORD, USER};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use smbx_client::{Client, ClientOptions, Error, NtStatus, OpenOptions, ShareAccess};

/// Samba grants durable handles only without kernel share modes, kernel
/// oplocks and POSIX locking. Log level 1 has its reasons for refusing a
/// durable reconnect ("denying durable reconnect").
const SAMBA_DURABLE: &str = "    durable handles = yes\n    kernel share modes = no\n    posix locking = no\n    smb2 leases = yes\n    log level = 1\n";

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
        .unwrap_or_else(|e| {
            panic!(
                "{}: write failed: {e}\nthe server on durable handles:\n{}",
                server.kind,
                server.log_lines("durable")
            )
        });
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
    // Writes done in smbd's main loop, not its thread pool: Samba records the
    // file's stat when it keeps the open at the disconnect and refuses the
    // reconnect if the stat differs then (source3/smbd/durable.c); a WRITE of
    // the cut connection still running in its pool would change the size and
    // times after that record, and the open would be lost (in ~5% of runs under
    // CPU load). `samba_refuses_reclaim_after_a_change` has that refusal.
    lost_session_is_reestablished(common::start_samba(&format!(
        "{SAMBA_DURABLE}    aio write size = 0\n"
    )))
    .await;
}

/// How the server is made to lose the open while its session is gone.
enum Lose {
    /// Another client opens the file for reading and writing, sharing
    /// nothing: the disconnected open's handle lease cannot be broken, so the
    /// server closes it (smbx, as Windows).
    ConflictingOpen,
    /// Once the connection's smbd has ended (the open kept as disconnected,
    /// its stat recorded), the file's modification time changes on the server:
    /// Samba then refuses the reconnect.
    ChangeStat,
}

/// A tree with two durable opens loses its session; `lose` makes the server
/// lose one of them: the other is reclaimed, the lost one's requests fail with
/// `Error::DurableOpenLost` (nothing sent), the data acknowledged before the
/// cut is in the file.
async fn lost_reclaim_fails_the_handle(server: Server, lose: Lose) {
    let kind = server.kind;
    let opts = ClientOptions {
        timeout: Some(Duration::from_secs(20)),
        ..ClientOptions::default()
    }
    .with_durable_handles(true);
    let before = server.children();
    let client = Client::connect(&server.addr(), opts).await.unwrap();
    // The processes that serve this connection (Samba: its smbd).
    let served_by: Vec<u32> = server
        .children()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    let session = client.login(USER, PASSWORD, "").await.unwrap();
    let old_session = session.id();
    let tree = session.tree("share").await.unwrap();
    drop(session);
    let data = random_bytes(256 << 10);
    let lost = tree
        .open("lost.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    let kept = tree
        .open("kept.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    assert!(
        lost.is_durable() && kept.is_durable(),
        "{kind}: not durable"
    );
    lost.write_at(0, &data).await.unwrap();
    kept.write_at(0, &data).await.unwrap();

    tree.session().client().connection().close();
    let path = server.share_dir("share").join("lost.bin");
    let stat_changed = matches!(lose, Lose::ChangeStat);
    match lose {
        Lose::ConflictingOpen => {
            let other = Client::connect(&server.addr(), ClientOptions::default())
                .await
                .unwrap();
            let other = other.login(USER, PASSWORD, "").await.unwrap();
            let other = other.tree("share").await.unwrap();
            let excl = OpenOptions::new()
                .read(true)
                .write(true)
                .share(ShareAccess::empty());
            let f = other.open("lost.bin", &excl).await.unwrap();
            f.close().await.unwrap();
        }
        Lose::ChangeStat => {
            assert!(
                !served_by.is_empty(),
                "{kind}: no process for the connection"
            );
            for pid in served_by {
                let ended = tokio::task::spawn_blocking(move || {
                    common::wait_for_exit(pid, Duration::from_secs(30))
                })
                .await
                .unwrap();
                assert!(ended, "{kind}: the connection's process {pid} did not end");
            }
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
        }
    }

    // The first request after the cut re-establishes the session.
    let lost_err = |r: Result<_, Error>, what: &str| match r {
        Err(Error::DurableOpenLost { name, status }) => {
            assert_eq!(name, "lost.bin", "{kind}: {what}");
            assert_eq!(status, NtStatus::OBJECT_NAME_NOT_FOUND, "{kind}: {what}");
        }
        Err(e) => panic!(
            "{kind}: {what}: {e}, not DurableOpenLost\nthe server on durable handles:\n{}",
            server.log_lines("durable")
        ),
        Ok(_) => panic!("{kind}: {what} succeeded on a lost open"),
    };
    lost_err(lost.write_at(0, b"after").await.map(|_| ()), "write");
    if stat_changed {
        // Refused for the reason given (its log, level 1), not another.
        let why = server.log_lines("denying durable reconnect");
        assert!(why.contains("st_ex_mtime"), "{kind}: Samba's reason: {why}");
    }
    assert_ne!(tree.session().id(), old_session, "{kind}: same session");
    // The other open was reclaimed: it reads back what it had.
    let back = kept.read_at(0, data.len()).await.unwrap();
    assert_eq!(sha256(&back), sha256(&data), "{kind}: the reclaimed open");
    kept.write_at(data.len() as u64, b"more").await.unwrap();
    // The lost one fails every request, without sending it.
    lost_err(lost.read_at(0, 10).await.map(|_| ()), "read");
    lost_err(lost.flush().await, "flush");
    lost_err(lost.close().await.map(|_| ()), "close");
    kept.close().await.unwrap();
    // What was acknowledged before the cut is in the file.
    assert_eq!(
        sha256(&std::fs::read(&path).unwrap()),
        sha256(&data),
        "{kind}: the lost open's data"
    );
    let kept_on_disk = std::fs::read(server.share_dir("share").join("kept.bin")).unwrap();
    assert_eq!(kept_on_disk.len(), data.len() + 4, "{kind}: kept.bin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smbx_fails_the_handle_of_an_open_closed_while_disconnected() {
    lost_reclaim_fails_the_handle(common::start_smbx(""), Lose::ConflictingOpen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samba_refuses_reclaim_after_a_change() {
    let server = common::start_samba(SAMBA_DURABLE);
    lost_reclaim_fails_the_handle(server, Lose::ChangeStat).await;
}
