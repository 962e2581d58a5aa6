//! The writer task: owns the socket's write half, frames messages (Direct TCP) and
//! batches whatever is queued before flushing. A READ response whose data is still
//! in the page cache goes out as its header and fields, then the data straight from
//! the file with `sendfile` (the zero-copy path; smbx_vfs::Handle::send_to). (Over
//! SMB Direct, messages go straight to the link: see `Connection::send_holding`.)

use std::sync::Arc;

use smbx_transport::BufPool;
use smbx_wire::framing::encode_frame_header;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// READ data that follows a message on the wire, still in the file.
#[derive(Debug, Clone)]
pub(crate) struct FileTail {
    /// The file.
    pub(crate) handle: Arc<smbx_vfs::Handle>,
    /// Where the data starts.
    pub(crate) offset: u64,
    /// How many bytes the response promised.
    pub(crate) len: usize,
}

impl FileTail {
    /// Appends the data to `msg` (zeros for whatever the file no longer holds:
    /// the response already promised `len` bytes).
    pub(crate) fn read_into(&self, msg: &mut Vec<u8>) {
        let start = msg.len();
        if self.handle.read_append(msg, self.len, self.offset).is_err() {
            msg.truncate(start);
        }
        msg.resize(start + self.len, 0);
    }

    /// The whole message in one buffer from `pool`: `room` bytes left free in front (for
    /// a TRANSFORM_HEADER), then `head` (header and fields), then the data, read straight
    /// in (never zero-filled first, never moved after).
    pub(crate) fn materialize(&self, head: &[u8], room: usize, pool: &BufPool) -> Vec<u8> {
        let mut buf = pool.take_spare(room + head.len() + self.len);
        buf.resize(room, 0);
        buf.extend_from_slice(head);
        self.read_into(&mut buf);
        buf
    }
}

/// A message to send.
pub(crate) struct Outgoing {
    /// The SMB2 message (without its frame header).
    pub(crate) msg: Vec<u8>,
    /// Data sent from the file after `msg`, in the same frame.
    pub(crate) tail: Option<FileTail>,
    /// The in-flight budget it holds until written.
    pub(crate) permit: Option<OwnedSemaphorePermit>,
}

/// Bytes the writer gathers before writing to the socket.
const BUF_CAPACITY: usize = 256 * 1024;

/// Writes queued messages until the channel closes or the socket fails; large message
/// buffers go back to `pool` once written.
pub(crate) async fn run(wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Outgoing>, pool: Arc<BufPool>) {
    let mut bw = BufWriter::with_capacity(BUF_CAPACITY, wr);
    while let Some(out) = rx.recv().await {
        if write_one(&mut bw, out, &pool).await.is_err() {
            return;
        }
        while let Ok(out) = rx.try_recv() {
            if write_one(&mut bw, out, &pool).await.is_err() {
                return;
            }
        }
        if bw.flush().await.is_err() {
            return;
        }
    }
    let _ = bw.shutdown().await;
}

async fn write_one(
    bw: &mut BufWriter<OwnedWriteHalf>,
    out: Outgoing,
    pool: &BufPool,
) -> std::io::Result<()> {
    // The permit (the request's share of the budget) is held until written.
    let Outgoing {
        msg,
        tail,
        permit: _permit,
    } = out;
    let tail_len = tail.as_ref().map_or(0, |t| t.len);
    let hdr = encode_frame_header(msg.len() + tail_len)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if let Some(t) = tail {
        // The frame header and fields go out with MSG_MORE, so the kernel sends
        // them with the data that follows rather than as a segment of their own.
        bw.flush().await?;
        smbx_transport::tcp::send_more(bw.get_ref().as_ref(), &hdr, &msg).await?;
        drop(msg);
        return send_tail(bw, &t).await;
    }
    if bw.buffer().len() + hdr.len() + msg.len() > BUF_CAPACITY {
        bw.flush().await?;
    }
    if msg.len() >= BUF_CAPACITY {
        // Header and message in one write, not a 4-byte segment of its own.
        let mut parts = [std::io::IoSlice::new(&hdr), std::io::IoSlice::new(&msg)];
        write_all_vectored(bw.get_mut(), &mut parts).await?;
    } else {
        bw.write_all(&hdr).await?;
        bw.write_all(&msg).await?;
    }
    pool.recycle(msg);
    Ok(())
}

/// Writes every byte of `parts`.
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut parts: &mut [std::io::IoSlice<'_>],
) -> std::io::Result<()> {
    while !parts.is_empty() {
        let n = w.write_vectored(parts).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut parts, n);
    }
    Ok(())
}

/// Sends `t.len` bytes of the file with sendfile; what it cannot (the file
/// shrank, or sendfile is refused) is read and written, zeros past the end.
async fn send_tail(bw: &mut BufWriter<OwnedWriteHalf>, t: &FileTail) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let sock = bw.get_ref().as_ref();
    let mut sent = 0usize;
    while sent < t.len {
        sock.writable().await?;
        let r = sock.try_io(Interest::WRITABLE, || {
            t.handle
                .send_to(sock.as_fd(), t.offset + sent as u64, t.len - sent)
        });
        match r {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if e.raw_os_error()
                    .is_some_and(|c| c == libc::EPIPE || c == libc::ECONNRESET) =>
            {
                return Err(e)
            }
            Err(_) => break,
        }
    }
    if sent < t.len {
        let rest = FileTail {
            handle: t.handle.clone(),
            offset: t.offset + sent as u64,
            len: t.len - sent,
        };
        let mut buf = Vec::new();
        rest.read_into(&mut buf);
        bw.write_all(&buf).await?;
    }
    Ok(())
}
