//! The per-connection read loop: frames in, dispatch, timeouts, teardown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use smbx_transport::splice::SplicedPayload;
use smbx_transport::tcp::{FrameReader, RecvLowat};
use smbx_transport::DirectLink;
use tokio::io::{AsyncRead, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use super::{writer, Connection};
use crate::dispatch::{self, Flow};
use crate::state::ServerState;

/// Serves one accepted TCP connection until it closes.
pub async fn serve(server: Arc<ServerState>, stream: TcpStream) {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel(256);
    let id = server.next_connection_id();
    let span = conn_span(id, peer);
    let conn = Arc::new(Connection::new(id, server.clone(), peer, local, tx));
    let writer = tokio::spawn(writer::run(wr, rx, server.frames.clone()).instrument(span.clone()));
    let src = TcpFrames {
        frames: FrameReader::with_pool(conn.max_pdu(), server.frames.clone())
            .splice_writes(SPLICE_WRITE_MIN),
        rd: BufReader::with_capacity(READ_BUFFER, rd),
    };
    run(conn, src).instrument(span).await;
    // The writer ends once every sender (async completions hold the connection) is gone.
    let _ = writer.await;
}

/// Serves one negotiated SMB Direct connection until it closes: SMB2 messages
/// arrive whole (no Direct-TCP prefix), READ and WRITE may move their data by RDMA.
pub async fn serve_direct(
    server: Arc<ServerState>,
    link: Arc<dyn DirectLink>,
    pool: Arc<smbx_transport::BufPool>,
) {
    let (tx, rx) = mpsc::channel(256);
    let id = server.next_connection_id();
    let span = conn_span(id, link.peer_addr());
    let mut conn = Connection::new(id, server.clone(), link.peer_addr(), link.local_addr(), tx);
    conn.direct = Some(super::DirectIo {
        link: link.clone(),
        pool,
        rdma_budget: Semaphore::new(super::RDMA_BUDGET),
    });
    // Messages go straight to the link (Connection::send_holding): no writer task.
    drop(rx);
    let src = DirectFrames {
        link: link.clone(),
        held: None,
    };
    run(Arc::new(conn), src).instrument(span).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), link.close()).await;
}

/// The span every log line of a connection is in: its id and client address, and
/// the session id once a SESSION_SETUP succeeds (dispatch records `sid`). Created at
/// ERROR level so that it is there whatever `log level` lets through.
fn conn_span(id: u64, peer: std::net::SocketAddr) -> tracing::Span {
    tracing::error_span!("conn", id, client = %peer, sid = tracing::field::Empty)
}

/// Why a connection's read loop ends when the server shuts down.
const SHUTTING_DOWN: &str = "server shutting down";

/// Registers, runs and tears down a connection.
async fn run<S: FrameSource>(conn: Arc<Connection>, mut src: S) {
    let server = conn.server.clone();
    let id = conn.id;
    server.connections.insert(id, Arc::downgrade(&conn) as _);
    tracing::debug!(direct = conn.direct.is_some(), "connection accepted");
    let why = read_loop(&conn, &mut src).await;
    if why == SHUTTING_DOWN {
        // A frame read only in part gives its share of the budget back.
        drop(src);
        drain(&conn).await;
    }
    tracing::debug!(why, "connection closing");
    teardown(&conn);
    server.connections.remove(id);
    crate::memory::note_activity();
}

/// WRITEs of at least this many bytes have their data spliced from the socket into
/// a pipe and from there into the file (smbx_transport::splice), not read into memory.
pub const SPLICE_WRITE_MIN: usize = 64 * 1024;

/// The socket's read buffer: small requests arrive many to a read; larger frames
/// bypass it, and at most this much of a spliced WRITE's data goes through memory.
const READ_BUFFER: usize = 16 * 1024;

/// A received request: the message, a spliced WRITE's data, and the permits for
/// its length.
type Incoming = (Vec<u8>, Option<SplicedPayload>, OwnedSemaphorePermit);

/// Where a connection's requests come from: whole SMB2 messages, each holding
/// permits for its length from the connection's in-flight budget. `next` must be
/// cancel-safe (a timeout or a close drops it; nothing may be lost).
trait FrameSource {
    async fn next(&mut self, budget: &Arc<Semaphore>) -> Result<Incoming, &'static str>;
}

/// Direct TCP: length-prefixed frames from a socket.
struct TcpFrames<R> {
    frames: FrameReader,
    rd: R,
}

impl<R: AsyncRead + RecvLowat + Unpin> FrameSource for TcpFrames<R> {
    async fn next(&mut self, budget: &Arc<Semaphore>) -> Result<Incoming, &'static str> {
        let f = self.frames.next(&mut self.rd, Some(budget)).await?;
        Ok((f.msg, f.payload, f.permit.ok_or("closed")?))
    }
}

/// SMB Direct: messages reassembled by the link (bounded by its negotiated
/// fragmented size and receive credits).
struct DirectFrames {
    link: Arc<dyn DirectLink>,
    /// A message received but still waiting for budget.
    held: Option<Vec<u8>>,
}

impl FrameSource for DirectFrames {
    async fn next(&mut self, budget: &Arc<Semaphore>) -> Result<Incoming, &'static str> {
        if self.held.is_none() {
            let m = self.link.recv().await.map_err(|e| {
                tracing::debug!(error = %e, "smb direct receive ended");
                "eof"
            })?;
            self.held = Some(m);
        }
        let len = self.held.as_ref().map_or(1, |m| m.len().max(1));
        let n = u32::try_from(len).map_err(|_| "bad frame length")?;
        let permit = budget
            .clone()
            .acquire_many_owned(n)
            .await
            .map_err(|_| "closed")?;
        let msg = self.held.take().ok_or("closed")?;
        Ok((msg, None, permit))
    }
}

async fn read_loop<S: FrameSource>(conn: &Arc<Connection>, src: &mut S) -> &'static str {
    let g = &conn.config.global;
    let unauth = Duration::from_secs(u64::from(g.unauthenticated_timeout_secs.max(1)));
    let dead = Duration::from_secs(u64::from(g.deadtime_secs));
    let budget = conn.budget.clone();
    // The unauthenticated timeout counts from the connection's start, whatever
    // the traffic, until a user (or guest) logon succeeds; then `deadtime`
    // counts idle time between requests.
    let unauth_deadline = tokio::time::Instant::now() + unauth;
    loop {
        if conn.server.shutdown.deadline().is_some() {
            return SHUTTING_DOWN;
        }
        let authenticated = conn.authenticated.load(Ordering::Relaxed);
        let deadline = if !authenticated {
            Some(unauth_deadline)
        } else if g.deadtime_secs > 0 {
            Some(tokio::time::Instant::now() + dead)
        } else {
            None
        };
        // `FrameSource::next` is cancel-safe: a timeout keeps a partial frame.
        let frame = tokio::select! {
            r = async {
                match deadline {
                    Some(d) => tokio::time::timeout_at(d, src.next(&budget))
                        .await
                        .map_err(|_| "timeout")?,
                    None => src.next(&budget).await,
                }
            } => r,
            _ = conn.closing() => Err("closed by server"),
            _ = conn.server.shutdown.begun() => Err(SHUTTING_DOWN),
        };
        let (frame, payload, permit) = match frame {
            Ok(f) => {
                crate::memory::note_activity();
                f
            }
            // Idle past deadtime only counts when nothing is open.
            Err("timeout") if authenticated && (has_opens(conn) || !conn.pending.is_empty()) => {
                continue
            }
            Err(why) => return why,
        };
        if let Flow::Disconnect(why) = dispatch::on_frame(conn, frame, payload, permit).await {
            return why;
        }
    }
}

/// During a shutdown: waits until every request the connection took has been
/// answered and its response written (the connection's budget is whole again), the
/// connection is closed, or the drain deadline passes. Pending asynchronous
/// operations hold no budget and are not waited for.
async fn drain(conn: &Connection) {
    // Checked every few milliseconds during a shutdown only; bounded by the deadline.
    const POLL: Duration = Duration::from_millis(10);
    let Some(deadline) = conn.server.shutdown.deadline() else {
        return;
    };
    let capacity = conn.budget_capacity();
    loop {
        if conn.budget.available_permits() >= capacity {
            return;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            tracing::warn!("requests still in flight at the shutdown deadline");
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until((now + POLL).min(deadline)) => {}
            () = conn.closing() => return,
        }
    }
}

fn has_opens(conn: &Connection) -> bool {
    !conn
        .server
        .opens
        .find_where(|o| o.conn_id == conn.id)
        .is_empty()
}

/// Drops everything the connection owns: pending operations, its sessions (with
/// their trees) and its opens.
///
/// A session that still has another channel (multichannel) lives on, with its
/// opens and operations in flight; one whose last channel this was ends, its durable opens kept for their
/// timeout (handlers/create).
fn teardown(conn: &Arc<Connection>) {
    let server = &conn.server;
    let sessions: Vec<u64> = std::mem::take(&mut *conn.sessions.lock());
    let mut surviving = Vec::new();
    let mut ending = Vec::new();
    for sid in sessions {
        let Some(s) = server.sessions.get(sid) else {
            continue;
        };
        // Held across the removal: whoever ends the session later (and cancels
        // what runs on detached channels) sees this one.
        let mut detached = s.detached.lock();
        match s.remove_channel(conn.id) {
            None => {}
            Some(0) => ending.push(sid),
            Some(_) => {
                detached.push(Arc::downgrade(conn) as _);
                surviving.push(sid);
            }
        }
    }
    // Operations of a surviving session run on (a pending CREATE completes, and
    // the client claims its open by replaying it on another channel).
    conn.pending.cancel_where(|sid| !surviving.contains(&sid));
    crate::state::open::preserve_durable_opens_where(server, |o| {
        o.conn_id == conn.id && !surviving.contains(&o.session_id)
    });
    for sid in ending {
        crate::state::open::preserve_durable_opens_of_session(server, sid);
        crate::handlers::logoff::destroy_session(server, sid);
    }
    server
        .opens
        .remove_where(|o| o.conn_id == conn.id && !surviving.contains(&o.session_id));
}
