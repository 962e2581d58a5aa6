//! The per-connection read loop: frames in, dispatch, timeouts, teardown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use smbx_transport::DirectLink;
use smbx_wire::framing::decode_frame_header;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

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
    let writer = tokio::spawn(writer::run(wr, rx));
    let mut src = TcpFrames {
        frames: FrameReader::with_pool(conn.max_pdu(), server.frames.clone()),
        rd: BufReader::with_capacity(64 * 1024, rd),
    };
    run(conn, &mut src).await;
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
    let mut conn = Connection::new(id, server.clone(), link.peer_addr(), link.local_addr(), tx);
    conn.direct = Some(super::DirectIo {
        link: link.clone(),
        pool,
        rdma_budget: Semaphore::new(super::RDMA_BUDGET),
    });
    // Messages go straight to the link (Connection::send_holding): no writer task.
    drop(rx);
    let mut src = DirectFrames {
        link: link.clone(),
        held: None,
    };
    run(Arc::new(conn), &mut src).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), link.close()).await;
}

/// Registers, runs and tears down a connection.
async fn run<S: FrameSource>(conn: Arc<Connection>, src: &mut S) {
    let server = conn.server.clone();
    let (id, peer) = (conn.id, conn.peer);
    server.connections.lock().insert(id, Arc::downgrade(&conn));
    tracing::debug!(conn = id, %peer, direct = conn.direct.is_some(), "connection accepted");
    let why = read_loop(&conn, src).await;
    tracing::debug!(conn = id, %peer, why, "connection closing");
    teardown(&conn);
    server.connections.lock().remove(&id);
    crate::memory::note_activity();
}

/// Where a connection's requests come from: whole SMB2 messages, each holding
/// permits for its length from the connection's in-flight budget. `next` must be
/// cancel-safe (a timeout or a close drops it; nothing may be lost).
trait FrameSource {
    async fn next(
        &mut self,
        budget: &Arc<Semaphore>,
    ) -> Result<(Vec<u8>, OwnedSemaphorePermit), &'static str>;
}

/// Direct TCP: length-prefixed frames from a socket.
struct TcpFrames<R> {
    frames: FrameReader,
    rd: R,
}

impl<R: AsyncRead + Unpin> FrameSource for TcpFrames<R> {
    async fn next(
        &mut self,
        budget: &Arc<Semaphore>,
    ) -> Result<(Vec<u8>, OwnedSemaphorePermit), &'static str> {
        self.frames.next(&mut self.rd, budget).await
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
    async fn next(
        &mut self,
        budget: &Arc<Semaphore>,
    ) -> Result<(Vec<u8>, OwnedSemaphorePermit), &'static str> {
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
        Ok((msg, permit))
    }
}

async fn read_loop<S: FrameSource>(conn: &Arc<Connection>, src: &mut S) -> &'static str {
    let g = &conn.server.config.global;
    let unauth = Duration::from_secs(u64::from(g.unauthenticated_timeout_secs.max(1)));
    let dead = Duration::from_secs(u64::from(g.deadtime_secs));
    let budget = conn.budget.clone();
    // The unauthenticated timeout counts from the connection's start, whatever
    // the traffic, until a user (or guest) logon succeeds; then `deadtime`
    // counts idle time between requests.
    let unauth_deadline = tokio::time::Instant::now() + unauth;
    loop {
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
        };
        let (frame, permit) = match frame {
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
        if let Flow::Disconnect(why) = dispatch::on_frame(conn, frame, permit).await {
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

/// Most bytes read from the socket in one step (the buffer grows by at most this
/// much beyond what has actually arrived).
const READ_CHUNK: usize = 64 * 1024;
/// Frames from this size up to [`MAX_POOLED_FRAME`] are read into buffers from
/// the server's frame pool.
const POOLED_FRAME: usize = 64 * 1024;
/// The largest frame read into a pooled buffer (a 1 MiB WRITE's is; an 8 MiB
/// WRITE's grows as it arrives).
const MAX_POOLED_FRAME: usize = 2 * 1024 * 1024;

/// Reads Direct-TCP frames incrementally. Its state lives outside the read future, so
/// dropping [`FrameReader::next`] (a timeout, a close) never loses bytes; the frame
/// buffer only grows with bytes that arrived, whatever the length prefix claims; and
/// each frame holds permits for its length from the connection's in-flight budget,
/// taken before its body is read (so a client cannot make the server buffer more
/// than the budget across requests still being processed).
struct FrameReader {
    max_pdu: usize,
    hdr: [u8; 4],
    hdr_got: usize,
    /// Frame length, once the prefix is complete.
    len: Option<usize>,
    permit: Option<OwnedSemaphorePermit>,
    buf: Vec<u8>,
    /// Bytes of `buf` that hold received data.
    filled: usize,
    /// Where buffers for frames of the usual I/O sizes come from.
    pool: Option<Arc<smbx_transport::BufPool>>,
}

impl FrameReader {
    fn new(max_pdu: usize) -> Self {
        FrameReader {
            max_pdu,
            hdr: [0; 4],
            hdr_got: 0,
            len: None,
            permit: None,
            buf: Vec::new(),
            filled: 0,
            pool: None,
        }
    }

    /// A reader whose frames of the usual I/O sizes come from `pool`.
    fn with_pool(max_pdu: usize, pool: Arc<smbx_transport::BufPool>) -> Self {
        FrameReader {
            pool: Some(pool),
            ..Self::new(max_pdu)
        }
    }

    /// True while a frame has been partly received.
    #[cfg(test)]
    fn partial(&self) -> bool {
        self.hdr_got > 0
    }

    /// The next complete frame and the budget permit it holds.
    async fn next<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
        budget: &Arc<Semaphore>,
    ) -> Result<(Vec<u8>, OwnedSemaphorePermit), &'static str> {
        while self.hdr_got < 4 {
            let n = rd
                .read(&mut self.hdr[self.hdr_got..])
                .await
                .map_err(|_| "read error")?;
            if n == 0 {
                return Err(if self.hdr_got == 0 {
                    "eof"
                } else {
                    "eof in frame"
                });
            }
            self.hdr_got += n;
        }
        let len = match self.len {
            Some(l) => l,
            None => {
                let l =
                    decode_frame_header(self.hdr, self.max_pdu).map_err(|_| "bad frame length")?;
                self.len = Some(l);
                l
            }
        };
        if self.permit.is_none() {
            let n = u32::try_from(len.max(1)).map_err(|_| "bad frame length")?;
            let p = budget
                .clone()
                .acquire_many_owned(n)
                .await
                .map_err(|_| "closed")?;
            self.permit = Some(p);
        }
        // A frame of the usual I/O sizes lands in a pooled buffer of its size
        // (its budget permit is held); a larger one grows with what arrives.
        if self.filled == 0 && (POOLED_FRAME..=MAX_POOLED_FRAME).contains(&len) {
            if let Some(pool) = &self.pool {
                self.buf = pool.take_spare(len);
            }
        }
        while self.filled < len {
            let want = (len - self.filled).min(READ_CHUNK);
            // Read into spare capacity: nothing is zero-filled first.
            self.buf.truncate(self.filled);
            self.buf.reserve(want);
            let n = (&mut *rd)
                .take(want as u64)
                .read_buf(&mut self.buf)
                .await
                .map_err(|_| "read error")?;
            if n == 0 {
                return Err("eof in frame");
            }
            self.filled += n;
        }
        let mut frame = std::mem::take(&mut self.buf);
        frame.truncate(len);
        let permit = self.permit.take().ok_or("closed")?;
        self.hdr_got = 0;
        self.len = None;
        self.filled = 0;
        Ok((frame, permit))
    }
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
                detached.push(Arc::downgrade(conn));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = smbx_wire::framing::encode_frame_header(body.len())
            .unwrap()
            .to_vec();
        v.extend_from_slice(body);
        v
    }

    #[tokio::test]
    async fn timeout_keeps_a_partial_frame() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Semaphore::new(1 << 20));
        let mut fr = FrameReader::new(1 << 20);
        let body: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let bytes = frame(&body);
        client.write_all(&bytes[..3]).await.unwrap();
        let r =
            tokio::time::timeout(Duration::from_millis(20), fr.next(&mut server, &budget)).await;
        assert!(r.is_err());
        assert!(fr.partial());
        client.write_all(&bytes[3..100_000]).await.unwrap();
        let r =
            tokio::time::timeout(Duration::from_millis(20), fr.next(&mut server, &budget)).await;
        assert!(r.is_err());
        client.write_all(&bytes[100_000..]).await.unwrap();
        let (f, permit) = fr.next(&mut server, &budget).await.unwrap();
        assert_eq!(f, body);
        assert_eq!(permit.num_permits(), body.len());
        assert!(!fr.partial());
    }

    #[tokio::test]
    async fn buffer_grows_with_arrivals_not_the_prefix() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Semaphore::new(16 << 20));
        let mut fr = FrameReader::new(16 << 20);
        // Claims 16 MiB - 1, sends 10 bytes.
        client.write_all(&[0, 0xff, 0xff, 0xff]).await.unwrap();
        client.write_all(&[1; 10]).await.unwrap();
        let r =
            tokio::time::timeout(Duration::from_millis(20), fr.next(&mut server, &budget)).await;
        assert!(r.is_err());
        assert!(fr.buf.capacity() <= 2 * READ_CHUNK, "{}", fr.buf.capacity());
        drop(client);
        assert_eq!(
            fr.next(&mut server, &budget).await.err(),
            Some("eof in frame")
        );
    }

    #[tokio::test]
    async fn large_frames_reuse_pooled_buffers() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Semaphore::new(16 << 20));
        let pool = Arc::new(smbx_transport::BufPool::new(2));
        let mut fr = FrameReader::with_pool(16 << 20, pool.clone());
        let a: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..400_000u32).map(|i| (i * 3) as u8).collect();
        client.write_all(&frame(&a)).await.unwrap();
        client.write_all(&frame(&b)).await.unwrap();
        client.write_all(&frame(&[9; 100])).await.unwrap();
        let (f, p) = fr.next(&mut server, &budget).await.unwrap();
        assert_eq!(f, a);
        assert_eq!(f.capacity(), 512 * 1024, "a buffer of its size class");
        let ptr = f.as_ptr();
        drop(p);
        pool.recycle(f);
        // The next large frame lands in the same memory; its own bytes only.
        let (f, p) = fr.next(&mut server, &budget).await.unwrap();
        assert_eq!((f.as_ptr(), f.len()), (ptr, b.len()));
        assert_eq!(f, b);
        drop(p);
        // A small frame is not pooled.
        let (f, _p) = fr.next(&mut server, &budget).await.unwrap();
        assert_eq!(f, vec![9; 100]);
        assert!(f.capacity() < 64 * 1024);
    }

    #[tokio::test]
    async fn budget_holds_back_reading() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Semaphore::new(100));
        let mut fr = FrameReader::new(100);
        client.write_all(&frame(&[7; 80])).await.unwrap();
        client.write_all(&frame(&[8; 80])).await.unwrap();
        let (f1, p1) = fr.next(&mut server, &budget).await.unwrap();
        assert_eq!(f1, vec![7; 80]);
        // The second frame waits until the first one's permit is released.
        let r =
            tokio::time::timeout(Duration::from_millis(20), fr.next(&mut server, &budget)).await;
        assert!(r.is_err());
        drop(p1);
        let (f2, _p2) = fr.next(&mut server, &budget).await.unwrap();
        assert_eq!(f2, vec![8; 80]);
    }

    #[tokio::test]
    async fn oversized_prefix_is_refused() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let budget = Arc::new(Semaphore::new(1 << 20));
        let mut fr = FrameReader::new(1000);
        client.write_all(&frame(&[0; 1001])[..4]).await.unwrap();
        assert_eq!(
            fr.next(&mut server, &budget).await.err(),
            Some("bad frame length")
        );
    }
}
