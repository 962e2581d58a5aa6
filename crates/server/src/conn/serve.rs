//! The per-connection read loop: frames in, dispatch, timeouts, teardown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use smbx_wire::framing::decode_frame_header;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

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
    let conn = Arc::new(Connection::new(id, server.clone(), peer, local, tx));
    server.connections.lock().insert(id, Arc::downgrade(&conn));
    tracing::debug!(conn = id, %peer, "connection accepted");
    let writer = tokio::spawn(writer::run(wr, rx));
    let mut rd = BufReader::with_capacity(64 * 1024, rd);
    let why = read_loop(&conn, &mut rd).await;
    tracing::debug!(conn = id, %peer, why, "connection closing");
    teardown(&conn);
    server.connections.lock().remove(&id);
    drop(conn);
    // The writer ends once every sender (async completions hold the connection) is gone.
    let _ = writer.await;
}

async fn read_loop<R: AsyncRead + Unpin>(conn: &Arc<Connection>, rd: &mut R) -> &'static str {
    let g = &conn.server.config.global;
    let unauth = Duration::from_secs(u64::from(g.unauthenticated_timeout_secs.max(1)));
    let dead = Duration::from_secs(u64::from(g.deadtime_secs));
    let max_pdu = conn.max_pdu();
    loop {
        let authenticated = conn.authenticated.load(Ordering::Relaxed);
        let limit = if !authenticated {
            Some(unauth)
        } else if g.deadtime_secs > 0 {
            Some(dead)
        } else {
            None
        };
        let read = read_frame(rd, max_pdu);
        let frame = tokio::select! {
            r = async {
                match limit {
                    Some(d) => tokio::time::timeout(d, read).await.map_err(|_| "timeout")?,
                    None => read.await,
                }
            } => r,
            _ = conn.closed.notified() => Err("closed by server"),
        };
        let frame = match frame {
            Ok(f) => f,
            // Idle past deadtime only counts when nothing is open (read_frame is
            // cancel-safe only at a frame boundary, so a partial frame still drops).
            Err("timeout") if authenticated && (has_opens(conn) || !conn.pending.is_empty()) => {
                continue
            }
            Err(why) => return why,
        };
        if let Flow::Disconnect(why) = dispatch::on_frame(conn, frame).await {
            return why;
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

async fn read_frame<R: AsyncRead + Unpin>(
    rd: &mut R,
    max_pdu: usize,
) -> Result<Vec<u8>, &'static str> {
    let mut hdr = [0u8; 4];
    rd.read_exact(&mut hdr).await.map_err(|_| "eof")?;
    let len = decode_frame_header(hdr, max_pdu).map_err(|_| "bad frame length")?;
    let mut buf = vec![0u8; len];
    rd.read_exact(&mut buf).await.map_err(|_| "eof in frame")?;
    Ok(buf)
}

/// Drops everything the connection owns: pending operations, its sessions (with
/// their trees) and its opens.
fn teardown(conn: &Arc<Connection>) {
    conn.pending.cancel_all(None);
    let sessions: Vec<u64> = std::mem::take(&mut *conn.sessions.lock());
    for sid in sessions {
        crate::handlers::logoff::destroy_session(&conn.server, sid);
    }
    conn.server.opens.remove_where(|o| o.conn_id == conn.id);
}
