//! Delivery of oplock and lease breaks: turns the decisions of the oplock core
//! (`state::oplock::core`) into OPLOCK_BREAK notifications on the right connection,
//! and runs the waits of CREATE and rename on the holders' acknowledgments, bounded
//! by `oplock break timeout` ([MS-SMB2] 3.3.2.1, 3.3.2.2; default 35 s).
//!
//! The rules live in the core; this module only sends and waits. It is the one place
//! where the oplock state meets connections, so `state/` never names them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use smbx_wire::header::FLAGS_SERVER_TO_REDIR;
use smbx_wire::oplock::{LeaseBreakFlags, LeaseBreakNotification, LeaseState, OplockBreak};
use smbx_wire::{AccessMask, Command, Header, NtStatus, ShareAccess, Writer};

use crate::conn::Connection;
use crate::state::file::SharedFile;
use crate::state::oplock::{
    is_lease_stat_open, is_stat_open, Break, Conflict, Decision, Requester,
};
use crate::state::ServerState;

/// How long a CREATE or a rename waits for break acknowledgments: the configuration's
/// `oplock break timeout` in force now.
pub fn break_timeout(server: &ServerState) -> Duration {
    Duration::from_millis(u64::from(server.config().global.oplock_break_timeout_ms))
}

/// The signal an operation gives its handler when it starts to wait for break
/// acknowledgments: the handler then answers STATUS_PENDING and lets the operation
/// finish asynchronously, so the connection keeps reading (the acknowledgment may come
/// on that very connection). The explicit form of "go async when the break waits".
#[derive(Default)]
pub struct GoingAsync(Mutex<Option<oneshot::Sender<()>>>);

impl GoingAsync {
    /// A signal and the receiver the handler waits on with [`until_waiting`].
    pub fn channel() -> (GoingAsync, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (GoingAsync(Mutex::new(Some(tx))), rx)
    }

    /// No handler listens (the operation is awaited inline, e.g. inside a compound).
    pub fn none() -> GoingAsync {
        GoingAsync::default()
    }

    /// The operation waits now (only the first call tells).
    fn now(&self) {
        if let Some(tx) = self.0.lock().take() {
            let _ = tx.send(());
        }
    }
}

/// How an operation that may wait for break acknowledgments started.
pub enum Started<F: Future> {
    /// It completed without waiting.
    Done(F::Output),
    /// It waits for acknowledgments: the handler goes async with it.
    Waiting(Pin<Box<F>>),
}

/// Runs `fut` until it completes or signals through `waiting` ([`GoingAsync`]) that
/// it waits for break acknowledgments.
pub async fn until_waiting<F: Future>(
    mut fut: Pin<Box<F>>,
    waiting: oneshot::Receiver<()>,
) -> Started<F> {
    let mut waiting = Some(waiting);
    let done = std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        if let Some(rx) = waiting.as_mut() {
            match Pin::new(rx).poll(cx) {
                Poll::Ready(Ok(())) => return Poll::Ready(None),
                // Dropped unsent: the operation ends without waiting.
                Poll::Ready(Err(_)) => waiting = None,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await;
    match done {
        Some(out) => Started::Done(out),
        None => Started::Waiting(fut),
    }
}

/// The message body of a break notification.
pub fn encode(b: &Break) -> Vec<u8> {
    match *b {
        Break::Oplock { file_id, to, .. } => OplockBreak {
            oplock_level: to,
            file_id,
        }
        .encode(),
        Break::Lease {
            key,
            from,
            to,
            epoch,
            ack_required,
            ..
        } => LeaseBreakNotification {
            new_epoch: epoch,
            flags: if ack_required {
                LeaseBreakFlags::ACK_REQUIRED
            } else {
                LeaseBreakFlags::empty()
            },
            lease_key: key,
            current_lease_state: from,
            new_lease_state: to,
        }
        .encode(),
    }
}

/// Sends an unsolicited break notification (MessageId all ones, SessionId 0, sealed
/// when the holder's session requires encryption). A lease break goes to the client's
/// connection ([`client_connection`]); if the holder's connection is gone but its
/// session has another channel, the break goes there ([MS-SMB2] 3.3.4.6).
pub async fn send_break(server: &Arc<ServerState>, b: Break) {
    let (Break::Oplock { target, .. } | Break::Lease { target, .. }) = b;
    let conn = target
        .client_guid
        .and_then(|g| client_connection(server, g, target.session_id))
        .or_else(|| server.connection(target.conn_id))
        .or_else(|| {
            let s = server.sessions.get(target.session_id)?;
            s.channel_conns()
                .into_iter()
                .find_map(|id| server.connection(id))
        });
    let Some(conn) = conn else {
        return;
    };
    let body = encode(&b);
    let h = Header {
        command: Command::OplockBreak as u16,
        flags: FLAGS_SERVER_TO_REDIR,
        message_id: u64::MAX,
        ..Default::default()
    };
    let mut w = Writer::with_capacity(64 + body.len());
    h.encode(&mut w);
    w.bytes(&body);
    let mut msg = w.into_vec();
    if let Some(s) = server.sessions.get(target.session_id) {
        let encrypt = s.state.lock().encrypt_data;
        if encrypt && crate::security::can_encrypt(&s) {
            match crate::security::seal(&conn, target.session_id, Some(&s), msg) {
                Ok(b) => msg = b,
                Err(_) => return,
            }
        }
    }
    conn.send(msg).await;
}

/// Sends every break, in order.
async fn send_all(server: &Arc<ServerState>, breaks: Vec<Break>) {
    for b in breaks {
        send_break(server, b).await;
    }
}

/// The connection a lease break of client `guid` goes to: leases belong to the
/// client (its ClientGuid), not to one connection, so the break goes to the client's
/// oldest connection that has a session (where the lease's session is bound, when
/// that session requires encryption; smb2.lease.v2_complex1). None for an all-zero
/// ClientGuid (no client identity) or when no such connection is left.
fn client_connection(
    server: &ServerState,
    guid: [u8; 16],
    session_id: u64,
) -> Option<Arc<Connection>> {
    if guid == [0; 16] {
        return None;
    }
    let encrypt = server
        .sessions
        .get(session_id)
        .is_some_and(|s| s.state.lock().encrypt_data);
    server.live_connections().into_iter().find(|c| {
        if c.negotiate.lock().client_guid != guid {
            return false;
        }
        let sessions = c.sessions.lock();
        !sessions.is_empty() && (!encrypt || sessions.contains(&session_id))
    })
}

/// OPLOCK_BREAK lease acknowledgment ([MS-SMB2] 3.3.5.22.2) of lease (`guid`, `key`)
/// on `file`: returns the acknowledged state for the response. When the break has to
/// go on by another step, that notification is sent after the response.
pub fn acknowledge_lease_break(
    server: &Arc<ServerState>,
    file: &SharedFile,
    guid: [u8; 16],
    key: [u8; 16],
    state: LeaseState,
) -> Result<LeaseState, NtStatus> {
    let (acked, next) = file.oplocks.ack_lease(guid, key, state)?;
    if !next.is_empty() {
        let server = server.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            send_all(&server, next).await;
        });
    }
    Ok(acked)
}

/// The first step of CREATE: breaks the oplocks and leases of other opens of `file`
/// that conflict with a new open (`access`, `share_access`, overwriting or not, with
/// `lease_key` if it asks for a lease) and waits for the acknowledgments (or
/// [`break_timeout`], after which the holders are broken unilaterally). It tells
/// `going_async` before it first waits.
#[allow(clippy::too_many_arguments)]
pub async fn break_conflicting(
    server: &Arc<ServerState>,
    file: &Arc<SharedFile>,
    new: &Requester,
    lease_key: Option<[u8; 16]>,
    access: AccessMask,
    share_access: ShareAccess,
    overwrite: bool,
    going_async: &GoingAsync,
) {
    // A stat open breaks nothing; nor does an open that will fail on a delete-pending
    // file (smb2.oplock.statopen1, batch8, exclusive4, doc).
    if (is_stat_open(access) && !overwrite) || file.delete_pending() {
        return;
    }
    let lease_stat = is_lease_stat_open(access) && !overwrite;
    // An open with the lease key of a lease being broken joins it without waiting
    // (it is told BREAK_IN_PROGRESS; smb2.lease.breaking1). Every change of the
    // oplock state (an acknowledgment, a close) makes the open look again, as a
    // retried open would ([MS-SMB2] 3.3.5.9: the CREATE stays pending meanwhile).
    let decide = |first| {
        let conflict = Conflict {
            overwrite,
            sharing: file.check_share(access, share_access, None).is_err(),
            lease_stat,
        };
        file.oplocks
            .decide(|h| h.start_breaks(new, lease_key, conflict, first))
    };
    // A holder whose connection went away meanwhile cannot acknowledge: its durable
    // open is closed rather than waited for (see OpenTable::preserve_durable).
    let sent = || {
        server.opens.purge_disconnected_of(file);
    };
    break_until_settled(server, file, going_async, decide, sent).await;
}

/// A rename of `file` through open `entry_id` ([MS-FSA] 2.1.5.14.11 with the
/// oplock break of 2.1.4.12; [MS-SMB2] 3.3.4.7): the other leases on the file give
/// up handle caching (their holders may keep closed handles open; the name is about
/// to change under them), and the rename waits for the acknowledgments, or
/// [`break_timeout`] after which the holders are broken unilaterally
/// (smb2.lease.rename_wait, v2_rename). The lease of `entry_id` itself is not broken.
/// It tells `going_async` before it first waits.
pub async fn break_handle_caching(
    server: &Arc<ServerState>,
    file: &Arc<SharedFile>,
    entry_id: u64,
    going_async: &GoingAsync,
) {
    let decide = |_| file.oplocks.decide(|h| h.break_handles_except(entry_id));
    break_until_settled(server, file, going_async, decide, || {}).await;
}

/// Drives one operation's breaks: `decide` (told whether it is the first time) says
/// what to send, `sent` runs when any break went out, and while the decision says to
/// wait, the operation waits for the next change of the file's oplock state and asks
/// again — until [`break_timeout`], when the holders are broken unilaterally. Tells
/// `going_async` before it first waits.
async fn break_until_settled(
    server: &Arc<ServerState>,
    file: &Arc<SharedFile>,
    going_async: &GoingAsync,
    mut decide: impl FnMut(bool) -> Decision,
    mut sent: impl FnMut(),
) {
    let deadline = tokio::time::Instant::now() + break_timeout(server);
    let mut first = true;
    loop {
        let n = file.oplocks.changed();
        tokio::pin!(n);
        n.as_mut().enable();
        let d = decide(first);
        first = false;
        let any = !d.breaks.is_empty();
        send_all(server, d.breaks).await;
        if any {
            sent();
        }
        if !d.wait {
            return;
        }
        going_async.now();
        if tokio::time::timeout_at(deadline, n).await.is_err() {
            let _ = file.oplocks.decide(|h| h.force_breaks());
            return;
        }
    }
}

/// Breaks LEVEL_II oplocks and read leases of other opens to NONE (a write, a set
/// of the end of file, an overwrite through open `writer_entry`).
pub async fn break_level2(server: &Arc<ServerState>, file: &Arc<SharedFile>, writer_entry: u64) {
    let d = file.oplocks.decide(|h| h.break_level2(writer_entry));
    send_all(server, d.breaks).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_operation_goes_async_exactly_when_it_says_it_waits() {
        // Completes without waiting: done, the signal never sent.
        let (g, rx) = GoingAsync::channel();
        let fut = Box::pin(async move {
            let _keep = g;
            tokio::task::yield_now().await;
            7
        });
        assert!(matches!(until_waiting(fut, rx).await, Started::Done(7)));
        // Says it waits, then waits for something that comes later: handed back
        // unfinished, and it still completes when awaited.
        let (g, rx) = GoingAsync::channel();
        let (ack_tx, ack_rx) = oneshot::channel::<u32>();
        let fut = Box::pin(async move {
            g.now();
            g.now(); // a second wait tells nothing more
            ack_rx.await.unwrap()
        });
        let Started::Waiting(fut) = until_waiting(fut, rx).await else {
            panic!("an operation that waits is handed back");
        };
        ack_tx.send(9).unwrap();
        assert_eq!(fut.await, 9);
        // Nobody listening: awaited inline.
        let g = GoingAsync::none();
        g.now();
    }
}
