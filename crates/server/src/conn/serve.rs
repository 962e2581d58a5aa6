//! The per-connection read loop: messages in from the connection's link, dispatch,
//! timeouts, teardown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use smbx_transport::link::{self, LinkError, MessageReceiver, MessageSender, TcpOptions};
use tokio::net::TcpStream;
use tracing::Instrument;

use super::Connection;
use crate::dispatch::{self, Flow};
use crate::state::ServerState;

/// Serves one connection over its message link (Direct TCP, SMB Direct: the link
/// says what it can do) until it closes. A Direct TCP link's writer runs beside it
/// ([`tcp_link`]).
pub async fn serve<S, R>(server: Arc<ServerState>, tx: S, rx: R)
where
    S: MessageSender + 'static,
    R: MessageReceiver,
{
    let id = server.next_connection_id();
    let span = conn_span(id, tx.peer_addr());
    let conn = Connection::new(id, server, Box::new(tx));
    run(conn, rx).instrument(span).await;
}

/// The Direct TCP link of an accepted socket, with the server's options: a frame
/// may be as large as the largest PDU, large WRITEs' data is spliced, responses
/// wait when [`SEND_QUEUE`] are queued and go to the socket at once when nothing
/// is queued before them and no whole request waits in the read buffer. Run the
/// writer future beside [`serve`] (it ends once every sender, the connection's
/// async completions included, is gone).
pub fn tcp_link(
    server: &ServerState,
    stream: TcpStream,
) -> (
    link::TcpSender,
    link::TcpReceiver,
    impl std::future::Future<Output = std::io::Result<()>> + Send,
) {
    link::tcp_with(
        stream,
        TcpOptions {
            max_frame: super::max_pdu(&server.config().global),
            pool: server.frames.clone(),
            read_buffer: READ_BUFFER,
            splice_writes: Some(SPLICE_WRITE_MIN),
            queue: Some(SEND_QUEUE),
            // A response leaves as soon as it is made when nothing is ahead of it:
            // not batched behind the next requests of a busy read loop.
            send_at_once: true,
        },
    )
}

/// The span every log line of a connection is in: its id and client address, and
/// the session id once a SESSION_SETUP succeeds (dispatch records `sid`). Created at
/// ERROR level so that it is there whatever `log level` lets through.
fn conn_span(id: u64, peer: std::net::SocketAddr) -> tracing::Span {
    tracing::error_span!("conn", id, client = %peer, sid = tracing::field::Empty)
}

/// Why a connection's read loop ends when the server shuts down.
const SHUTTING_DOWN: &str = "server shutting down";

/// Registers, runs and tears down a connection; then releases its link.
async fn run<R: MessageReceiver>(conn: Connection, mut rx: R) {
    let conn = Arc::new(conn);
    let server = conn.server.clone();
    let id = conn.id;
    server.connections.insert(id, Arc::downgrade(&conn) as _);
    tracing::debug!(transport = %conn.transport(), "connection accepted");
    let why = read_loop(&conn, &mut rx).await;
    if why == SHUTTING_DOWN {
        // A frame read only in part gives its share of the budget back.
        rx.stop_reading();
        drain(&conn).await;
    }
    tracing::debug!(why, "connection closing");
    teardown(&conn);
    server.connections.remove(id);
    crate::memory::note_activity();
    drop(conn);
    let _ = tokio::time::timeout(Duration::from_secs(2), rx.close()).await;
}

/// WRITEs of at least this many bytes have their data spliced from the socket into
/// a pipe and from there into the file (smbx_transport::splice), not read into memory.
pub const SPLICE_WRITE_MIN: usize = 64 * 1024;

/// The socket's read buffer: small requests arrive many to a read; larger frames
/// bypass it, and at most this much of a spliced WRITE's data goes through memory.
const READ_BUFFER: usize = 16 * 1024;

/// Responses queued for the socket before a sender waits.
const SEND_QUEUE: usize = 256;

/// Why the read loop ends when the link's receive fails.
fn why(e: LinkError) -> &'static str {
    match e {
        LinkError::Frame(why) => why,
        LinkError::Closed => "closed",
        LinkError::TooLarge => "bad frame length",
        LinkError::Direct(e) => {
            tracing::debug!(error = %e, "smb direct receive ended");
            "eof"
        }
    }
}

/// Reads and dispatches frames until the connection ends; the requests it parked
/// ([`dispatch::Parked`], polled beside each receive) then go on as tasks of their own.
async fn read_loop<R: MessageReceiver>(conn: &Arc<Connection>, rx: &mut R) -> &'static str {
    let mut parked = dispatch::Parked::new();
    let why = read_frames(conn, rx, &mut parked).await;
    dispatch::spill(&mut parked);
    why
}

async fn read_frames<R: MessageReceiver>(
    conn: &Arc<Connection>,
    rx: &mut R,
    parked: &mut dispatch::Parked,
) -> &'static str {
    let g = &conn.config.global;
    let unauth = Duration::from_secs(u64::from(g.unauthenticated_timeout_secs.max(1)));
    let dead = Duration::from_secs(u64::from(g.deadtime_secs));
    let budget = conn.budget.clone();
    // The unauthenticated timeout counts from the connection's start, whatever
    // the traffic, until a user (or guest) logon succeeds; then `deadtime`
    // counts idle time between requests.
    let unauth_deadline = tokio::time::Instant::now() + unauth;
    // Subscribed once for the connection, not at every frame.
    let mut closing = std::pin::pin!(conn.closing());
    let mut shutdown = std::pin::pin!(conn.server.shutdown.begun());
    // One timer for the connection, not one per frame: it is moved only to an
    // earlier deadline; when it goes off before the deadline (frames came since it
    // was set) it is set again from the last one. At one frame per round trip, a
    // new timer per frame cost ~1,000 instructions per request (registering and
    // removing it, and the timer wheel's look at it at every park).
    let mut timer = std::pin::pin!(tokio::time::sleep_until(unauth_deadline));
    let mut armed = Some(unauth_deadline);
    let mut last = tokio::time::Instant::now();
    loop {
        if conn.server.shutdown.deadline().is_some() {
            return SHUTTING_DOWN;
        }
        let authenticated = conn.authenticated.load(Ordering::Relaxed);
        let deadline = if !authenticated {
            Some(unauth_deadline)
        } else if g.deadtime_secs > 0 {
            Some(last + dead)
        } else {
            None
        };
        match deadline {
            Some(d) if armed.is_none_or(|a| d < a) => {
                timer.as_mut().reset(d);
                armed = Some(d);
            }
            Some(_) => {}
            None => armed = None,
        }
        // `recv_within` is cancel-safe: a frame cut short by another branch is kept.
        let frame = tokio::select! {
            r = rx.recv_within(&budget) => match r {
                Ok(Some(m)) => Ok(m),
                Ok(None) => Err("eof"),
                Err(e) => Err(why(e)),
            },
            () = timer.as_mut(), if armed.is_some() => {
                armed = None;
                if deadline.is_some_and(|d| tokio::time::Instant::now() < d) {
                    // Set for an earlier deadline than today's: set again, wait on.
                    continue;
                }
                Err("timeout")
            }
            _ = closing.as_mut() => Err("closed by server"),
            _ = shutdown.as_mut() => Err(SHUTTING_DOWN),
            Some(()) = std::future::poll_fn(|cx| parked.poll_next(cx)), if !parked.is_empty() => continue,
        };
        let link::Received {
            msg: frame,
            payload,
            permit,
        } = match frame {
            Ok(f) => {
                crate::memory::note_activity();
                f
            }
            // Idle past deadtime only counts when nothing is open.
            Err("timeout") if authenticated && (has_opens(conn) || !conn.pending.is_empty()) => {
                last = tokio::time::Instant::now();
                continue;
            }
            Err(why) => return why,
        };
        let flow = dispatch::on_frame(conn, frame, payload, permit, parked).await;
        last = tokio::time::Instant::now();
        if let Flow::Disconnect(why) = flow {
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
