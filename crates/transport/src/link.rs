//! A message link: whole SMB2 messages out and in, whichever transport carries them,
//! so that a connection's request core never branches on Direct TCP or SMB Direct.
//!
//! A link is two halves: a [`MessageSender`] (shared; never waits, so a caller that
//! is cancelled after spending MessageIds leaves none unsent) and a
//! [`MessageReceiver`] (owned by the one task that reads). [`tcp`] builds the Direct
//! TCP pair (a 4-byte length prefix per message; a writer future that batches queued
//! messages into one buffered write and gives large buffers back to the pool),
//! [`direct`] the SMB Direct pair over a [`DirectLink`] (whole messages, no prefix).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use smbx_wire::framing::encode_frame_header;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::direct::{BoxFuture, DirectLink};
use crate::pool::BufPool;
use crate::tcp::FrameReader;
use crate::DirectError;

/// Bytes a sender needs in front of a message (the Direct TCP length prefix); a
/// message is passed as `buf[start..]` with `start >= PREFIX_ROOM`.
pub const PREFIX_ROOM: usize = 4;

/// Why a link cannot send or receive.
#[derive(Debug)]
pub enum LinkError {
    /// The link is closed (its writer ended).
    Closed,
    /// The message does not fit the transport (too large for a Direct TCP frame, or no
    /// room for its prefix).
    TooLarge,
    /// Receiving a Direct TCP frame failed (the socket, or a frame over the limit).
    Frame(&'static str),
    /// The SMB Direct link failed.
    Direct(DirectError),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Closed => write!(f, "link closed"),
            LinkError::TooLarge => write!(f, "message too large for the transport"),
            LinkError::Frame(e) => write!(f, "receiving a frame: {e}"),
            LinkError::Direct(e) => write!(f, "smb direct: {e}"),
        }
    }
}

impl std::error::Error for LinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LinkError::Direct(e) => Some(e),
            _ => None,
        }
    }
}

/// Sends whole messages.
pub trait MessageSender: Send + Sync {
    /// Queues `buf[start..]` as one message; `buf[..start]` is room the sender may
    /// use (at least [`PREFIX_ROOM`] bytes). Never waits.
    fn send(&self, buf: Vec<u8>, start: usize) -> Result<(), LinkError>;
}

/// Receives whole messages.
pub trait MessageReceiver: Send {
    /// The next message; `Ok(None)` when the peer closed the link.
    fn recv(&mut self) -> BoxFuture<'_, Result<Option<Vec<u8>>, LinkError>>;

    /// Releases the link once the reader is done with it.
    fn close(&mut self) -> BoxFuture<'_, ()>;
}

/// The Direct TCP sender: messages go to the writer future through a queue.
#[derive(Debug)]
pub struct TcpSender {
    queue: mpsc::UnboundedSender<(Vec<u8>, usize)>,
}

impl MessageSender for TcpSender {
    fn send(&self, mut buf: Vec<u8>, start: usize) -> Result<(), LinkError> {
        let from = start.checked_sub(PREFIX_ROOM).ok_or(LinkError::TooLarge)?;
        let len = buf.len().checked_sub(start).ok_or(LinkError::TooLarge)?;
        let prefix = encode_frame_header(len).map_err(|_| LinkError::TooLarge)?;
        buf[from..start].copy_from_slice(&prefix);
        self.queue.send((buf, from)).map_err(|_| LinkError::Closed)
    }
}

/// The Direct TCP receiver: frames read through a buffered reader into pooled buffers.
#[derive(Debug)]
pub struct TcpReceiver {
    rd: BufReader<OwnedReadHalf>,
    frames: FrameReader,
}

impl MessageReceiver for TcpReceiver {
    fn recv(&mut self) -> BoxFuture<'_, Result<Option<Vec<u8>>, LinkError>> {
        Box::pin(async move {
            match self.frames.next(&mut self.rd, None).await {
                Ok(f) => Ok(Some(f.msg)),
                Err("eof") => Ok(None),
                Err(e) => Err(LinkError::Frame(e)),
            }
        })
    }

    fn close(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A Direct TCP link over a connected socket: the two halves, and the writer future
/// to run (it ends with the error that stopped it, or `Ok` once every sender is
/// dropped). Frames up to `max_frame` bytes are received, into buffers from `pool`
/// for the usual I/O sizes; sent buffers go back to `pool`.
pub fn tcp(
    stream: TcpStream,
    max_frame: usize,
    pool: Arc<BufPool>,
) -> (
    TcpSender,
    TcpReceiver,
    impl Future<Output = std::io::Result<()>> + Send,
) {
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let receiver = TcpReceiver {
        // Small responses arrive many to a segment and each would otherwise cost two
        // reads; small enough that little of a large frame is copied out of it.
        rd: BufReader::with_capacity(64 * 1024, rd),
        frames: FrameReader::with_pool(max_frame, pool.clone()),
    };
    (TcpSender { queue: tx }, receiver, tcp_writer(wr, rx, pool))
}

async fn tcp_writer(
    wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<(Vec<u8>, usize)>,
    pool: Arc<BufPool>,
) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(256 * 1024, wr);
    while let Some((frame, start)) = rx.recv().await {
        // Large frames go back to the pool once written (a class-sized one is kept).
        let mut res = w.write_all(&frame[start..]).await;
        pool.recycle(frame);
        while res.is_ok() {
            match rx.try_recv() {
                Ok((f, start)) => {
                    res = w.write_all(&f[start..]).await;
                    pool.recycle(f);
                }
                Err(_) => break,
            }
        }
        res.and(w.flush().await)?;
    }
    let _ = w.shutdown().await;
    Ok(())
}

/// The SMB Direct sender: posts on the link right away (its queue is bounded by the
/// link's send credits).
pub struct DirectSender {
    link: Arc<dyn DirectLink>,
}

impl MessageSender for DirectSender {
    fn send(&self, buf: Vec<u8>, start: usize) -> Result<(), LinkError> {
        let msg = buf.get(start..).ok_or(LinkError::TooLarge)?;
        self.link.send_now(msg, None).map_err(LinkError::Direct)
    }
}

/// The SMB Direct receiver: messages reassembled by the link.
pub struct DirectReceiver {
    link: Arc<dyn DirectLink>,
}

impl MessageReceiver for DirectReceiver {
    fn recv(&mut self) -> BoxFuture<'_, Result<Option<Vec<u8>>, LinkError>> {
        Box::pin(async move { self.link.recv().await.map(Some).map_err(LinkError::Direct) })
    }

    fn close(&mut self) -> BoxFuture<'_, ()> {
        self.link.close()
    }
}

/// An SMB Direct link as a message link's two halves.
pub fn direct(link: Arc<dyn DirectLink>) -> (DirectSender, DirectReceiver) {
    (DirectSender { link: link.clone() }, DirectReceiver { link })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn tcp_link_frames_both_ways() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let pool = Arc::new(BufPool::new(2));
        let (tx, mut rx, writer) = tcp(c.unwrap(), 1 << 20, pool);
        let writer = tokio::spawn(writer);
        let mut peer = s.unwrap().0;

        // Out: the prefix goes into the room before `start`; nothing else is sent.
        let mut buf = vec![0xaa; 8];
        buf.extend_from_slice(b"hello");
        tx.send(buf, 8).unwrap();
        let mut got = [0u8; 9];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\0\0\0\x05hello");
        // No room for the prefix: refused, not sent.
        assert!(matches!(
            tx.send(b"abc".to_vec(), 2),
            Err(LinkError::TooLarge)
        ));

        // In: whole messages, then end of stream.
        peer.write_all(b"\0\0\0\x03abc\0\0\0\x01z").await.unwrap();
        assert_eq!(rx.recv().await.unwrap().unwrap(), b"abc");
        assert_eq!(rx.recv().await.unwrap().unwrap(), b"z");
        // A frame over the limit is an error.
        peer.write_all(&[0x7f, 0, 0, 0]).await.unwrap();
        assert!(matches!(rx.recv().await, Err(LinkError::Frame(_))));
        drop(peer);

        // The writer ends once the sender is gone.
        drop(tx);
        writer.await.unwrap().ok();
    }
}
