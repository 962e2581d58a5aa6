//! Direct TCP framing ([MS-SMB2] 2.1): the reader of length-prefixed messages that the
//! server and the client both use.
//!
//! A large message (a READ response, a WRITE request) lands in a pooled buffer of its
//! size class, read from the socket in one call where it can be: before its body is read
//! the socket's receive low-water mark (`SO_RCVLOWAT`) is raised to the bytes still to
//! come, so the reader is woken once the body has arrived instead of once per segment
//! train, and it is lowered again before the next length prefix.
//!
//! A reader made with [`FrameReader::splice_writes`] (the server's) reads only the head
//! of a large frame first; when it is a WRITE whose data may bypass memory
//! ([`crate::splice::spliceable_write`]) the rest is spliced from the socket into a pipe
//! and returned as the frame's [`Frame::payload`].

use std::os::fd::AsFd;
use std::sync::Arc;

use smbx_wire::framing::decode_frame_header;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::splice::{self, Pipe, Pipes, SplicedPayload, WRITE_HEAD};
use crate::BufPool;

/// Most bytes read in one step into a buffer that is not yet its frame's size (it grows
/// by at most this much beyond what has actually arrived).
pub const READ_CHUNK: usize = 64 * 1024;
/// Frames from this size up to [`MAX_POOLED_FRAME`] are read into pooled buffers.
pub const POOLED_FRAME: usize = 64 * 1024;
/// The largest frame read into a pooled buffer (a 1 MiB READ or WRITE's is; an 8 MiB
/// one's grows as it arrives).
pub const MAX_POOLED_FRAME: usize = 2 * 1024 * 1024;
/// Bodies with at least this much still to come from the socket raise its low-water mark.
const LOWAT_MIN: usize = 32 * 1024;
/// The highest low-water mark set (the kernel also caps it at half the receive buffer).
const LOWAT_MAX: usize = 4 * 1024 * 1024;
/// Most bytes read with a length prefix straight from the socket: the prefix and a
/// WRITE's head, so a large WRITE's prefix and head come in one receive (and its data
/// is then spliced whole).
const PREFIX_READ: usize = 4 + WRITE_HEAD;

/// A byte stream that can tell what it has buffered and set its socket's receive
/// low-water mark. Streams without a socket (in-memory pipes in tests) do neither.
pub trait RecvLowat {
    /// Bytes read from the socket but not yet returned to the caller.
    fn buffered(&self) -> usize {
        0
    }
    /// Wakes readers only once `bytes` are queued on the socket (best effort).
    fn set_recv_lowat(&self, _bytes: usize) {}
    /// The TCP socket underneath, for splicing from it once nothing is buffered.
    fn tcp_stream(&self) -> Option<&tokio::net::TcpStream> {
        None
    }
}

impl RecvLowat for OwnedReadHalf {
    fn set_recv_lowat(&self, bytes: usize) {
        let _ = set_socket_recv_lowat(self.as_ref(), bytes);
    }
    fn tcp_stream(&self) -> Option<&tokio::net::TcpStream> {
        Some(self.as_ref())
    }
}

impl<R: RecvLowat + AsyncRead> RecvLowat for BufReader<R> {
    fn buffered(&self) -> usize {
        self.buffer().len()
    }
    fn set_recv_lowat(&self, bytes: usize) {
        self.get_ref().set_recv_lowat(bytes)
    }
    fn tcp_stream(&self) -> Option<&tokio::net::TcpStream> {
        self.get_ref().tcp_stream()
    }
}

impl RecvLowat for tokio::io::DuplexStream {}

/// Sets `SO_RCVLOWAT` on a socket: poll and epoll report it readable (and a blocking
/// read returns) only once `bytes` are queued, or at end of stream.
pub fn set_socket_recv_lowat(sock: &impl AsFd, bytes: usize) -> std::io::Result<()> {
    smbx_rdma::sock::set_recv_lowat(sock.as_fd(), bytes)
}

/// Sends `hdr` then `msg` with MSG_MORE: more data follows at once (for example from
/// sendfile), so the kernel sends them in the same segment as what follows. The two
/// go out with one `sendmsg` each try ([`smbx_rdma::sock::send_more`]), straight from
/// where they lie (no buffer is allocated to join them: this runs once per READ
/// response sent from the file).
pub async fn send_more(
    sock: &tokio::net::TcpStream,
    hdr: &[u8],
    msg: &[u8],
) -> std::io::Result<()> {
    use std::io::IoSlice;
    use std::os::fd::AsFd;
    let total = hdr.len() + msg.len();
    let mut sent = 0;
    while sent < total {
        sock.writable().await?;
        let (a, b) = match hdr.get(sent..) {
            Some(rest) => (rest, msg),
            None => (&[][..], msg.get(sent - hdr.len()..).unwrap_or_default()),
        };
        let r = sock.try_io(tokio::io::Interest::WRITABLE, || {
            smbx_rdma::sock::send_more(sock.as_fd(), &[IoSlice::new(a), IoSlice::new(b)])
        });
        match r {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends as much of `data` into the socket `sock` as it takes now, without waiting
/// (`WouldBlock` when it takes nothing).
#[allow(unsafe_code)]
pub fn send_now(sock: std::os::fd::BorrowedFd<'_>, data: &[u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: send reads at most `data.len()` bytes from the live slice `data`; the
    // socket descriptor is open for the call.
    let n = unsafe {
        libc::send(
            sock.as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Receives up to `max` bytes from `sock` into the spare capacity of `buf` and, in the
/// same call, whatever follows them up to `then.len()` bytes into `then` (nothing
/// zero-filled first, without waiting; `then` may be empty); `WouldBlock` when nothing
/// is queued. Returns the bytes that went into `buf` and into `then`.
#[allow(unsafe_code)]
fn recv_spare(
    sock: std::os::fd::BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    max: usize,
    then: &mut [u8],
) -> std::io::Result<(usize, usize)> {
    use std::os::fd::AsRawFd;
    let spare = buf.spare_capacity_mut();
    let len = spare.len().min(max);
    let mut iov = [
        libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: len,
        },
        libc::iovec {
            iov_base: then.as_mut_ptr().cast(),
            iov_len: then.len(),
        },
    ];
    // SAFETY: an all-zero msghdr is a valid empty one; it is pointed at `iov` below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = if then.is_empty() { 1 } else { 2 };
    // SAFETY: recvmsg writes at most `len` bytes into the spare capacity and at most
    // `then.len()` into `then`, both valid for writes for the call; the socket
    // descriptor is open for the call; `msg` names no address or control buffer.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = n as usize;
    let first = n.min(len);
    // SAFETY: the kernel initialised the first `first` bytes just past the length.
    unsafe { buf.set_len(buf.len() + first) };
    Ok((first, n - first))
}

/// A received frame: the SMB2 message (or transform) and, when the reader has a budget,
/// the permits for its length.
#[derive(Debug)]
pub struct Frame {
    /// The message bytes, without the length prefix.
    pub msg: Vec<u8>,
    /// Permits for the frame's length (at least 1) from the budget passed to
    /// [`FrameReader::next`].
    pub permit: Option<OwnedSemaphorePermit>,
    /// The rest of the frame, when its data was spliced ([`FrameReader::splice_writes`]):
    /// `msg` then holds the WRITE's head and whatever of its data had been buffered.
    pub payload: Option<SplicedPayload>,
}

/// Reads Direct-TCP frames incrementally. Its state lives outside the read future, so
/// dropping [`FrameReader::next`] (a timeout, a close) never loses bytes; the frame
/// buffer only grows with bytes that arrived, whatever the length prefix claims; and with
/// a budget each frame holds permits for its length, taken before its body is read (so a
/// peer cannot make the reader buffer more than the budget across frames still held).
#[derive(Debug)]
pub struct FrameReader {
    max_pdu: usize,
    hdr: [u8; 4],
    hdr_got: usize,
    /// Frame length, once the prefix is complete.
    len: Option<usize>,
    permit: Option<OwnedSemaphorePermit>,
    buf: Vec<u8>,
    /// Bytes of `buf` that hold received data.
    filled: usize,
    /// The socket's receive low-water mark as last set (1 when not raised).
    lowat: usize,
    /// Where buffers for frames of the usual I/O sizes come from.
    pool: Option<Arc<BufPool>>,
    /// Frames from this size up are looked at for a WRITE whose data can be spliced.
    splice_min: Option<usize>,
    /// Whether this frame's head has been looked at.
    decided: bool,
    /// This frame's data being spliced.
    spliced: Option<SplicedPayload>,
    /// The pipe took no more: the rest of this frame goes to `spliced.tail`.
    pipe_full: bool,
    /// This frame's first splice was tried (it is tried before waiting for the
    /// socket, whose data has usually all arrived by then): later ones wait.
    splice_waits: bool,
    /// Pipes of returned frames still alive (at most [`splice::MAX_PIPES`]), and
    /// emptied ones kept for the next WRITEs.
    pipes: Arc<Pipes>,
    /// The last frame was a large one: the next length prefix is read straight from
    /// the socket when nothing is buffered (see [`FrameReader::read_prefix`]).
    after_large: bool,
    /// Bytes read with a length prefix beyond it ([`FrameReader::read_prefix`]):
    /// `ahead[ahead_at..ahead_end]` follow the prefix in the stream and come before
    /// anything else is read (the stream's own buffer is empty while they are here).
    ahead: [u8; PREFIX_READ],
    ahead_at: usize,
    ahead_end: usize,
}

impl FrameReader {
    /// A reader of frames up to `max_pdu` bytes.
    pub fn new(max_pdu: usize) -> Self {
        FrameReader {
            max_pdu,
            hdr: [0; 4],
            hdr_got: 0,
            len: None,
            permit: None,
            buf: Vec::new(),
            filled: 0,
            lowat: 1,
            pool: None,
            splice_min: None,
            decided: false,
            spliced: None,
            pipe_full: false,
            splice_waits: false,
            pipes: Arc::default(),
            after_large: false,
            ahead: [0; PREFIX_READ],
            ahead_at: 0,
            ahead_end: 0,
        }
    }

    /// Also splices the data of WRITE frames of `min` bytes or more from the socket into
    /// a pipe (see [`crate::splice`]) when the stream is a TCP socket.
    pub fn splice_writes(mut self, min: usize) -> Self {
        self.splice_min = Some(min.max(WRITE_HEAD + 1));
        self
    }

    /// A reader whose frames of the usual I/O sizes come from `pool` (give them back
    /// with [`BufPool::recycle`]).
    pub fn with_pool(max_pdu: usize, pool: Arc<BufPool>) -> Self {
        FrameReader {
            pool: Some(pool),
            ..Self::new(max_pdu)
        }
    }

    /// True while a frame has been partly received.
    pub fn partial(&self) -> bool {
        self.hdr_got > 0 || !self.carried().is_empty()
    }

    /// Bytes read from the stream beyond the frames returned so far (the start of the
    /// next frame, or next frames, read with a length prefix); they come before what
    /// the stream has buffered, which is empty while there are any.
    pub fn carried(&self) -> &[u8] {
        self.ahead
            .get(self.ahead_at..self.ahead_end)
            .unwrap_or_default()
    }

    /// Moves up to `max` carried bytes into the frame's buffer.
    fn take_carried(&mut self, max: usize) {
        let n = (self.ahead_end - self.ahead_at).min(max);
        if n == 0 {
            return;
        }
        self.buf.truncate(self.filled);
        let at = self.ahead_at;
        self.buf.extend_from_slice(&self.ahead[at..at + n]);
        self.ahead_at += n;
        self.filled += n;
    }

    /// Capacity of the buffer of the frame being received.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Raises the socket's low-water mark to the bytes of this frame still to come from
    /// it (`from_socket`), or lowers it when few remain. Only this frame's bytes are
    /// counted, and the mark follows them down as they arrive, so the reader never
    /// waits for more than the peer is bound to send.
    fn set_lowat<R: RecvLowat>(&mut self, rd: &R, from_socket: usize) {
        let mark = if from_socket >= LOWAT_MIN {
            from_socket.min(LOWAT_MAX)
        } else {
            1
        };
        if mark != self.lowat {
            rd.set_recv_lowat(mark);
            self.lowat = mark;
        }
    }

    /// The next complete frame (`Err("eof")` at a clean end of stream between frames).
    pub async fn next<R: AsyncRead + RecvLowat + Unpin>(
        &mut self,
        rd: &mut R,
        budget: Option<&Arc<Semaphore>>,
    ) -> Result<Frame, &'static str> {
        while self.hdr_got < 4 {
            let n = self.read_prefix(rd).await.map_err(|_| "read error")?;
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
        if let (None, Some(budget)) = (&self.permit, budget) {
            let n = u32::try_from(len.max(1)).map_err(|_| "bad frame length")?;
            let p = budget
                .clone()
                .acquire_many_owned(n)
                .await
                .map_err(|_| "closed")?;
            self.permit = Some(p);
        }
        // A frame of the usual I/O sizes lands in a pooled buffer of its size;
        // a larger one grows with what arrives.
        if self.filled == 0 && (POOLED_FRAME..=MAX_POOLED_FRAME).contains(&len) {
            if let Some(pool) = &self.pool {
                self.buf = pool.take_spare(len);
            }
        }
        // What came with the prefix (after the budget's permits were taken).
        self.take_carried(len - self.filled);
        let may_splice = self.splice_min.is_some_and(|m| len >= m) && rd.tcp_stream().is_some();
        while self.filled < len && self.spliced.is_none() {
            // A frame that may be spliced is read up to its head first.
            let limit = if may_splice && !self.decided {
                WRITE_HEAD
            } else {
                len
            };
            if self.filled >= limit {
                self.decided = true;
                if splice::spliceable_write(&self.buf[..self.filled], len) {
                    self.start_splice(rd, len).await?;
                }
                continue;
            }
            if may_splice && !self.decided && rd.buffered() == 0 {
                // The head alone, straight from the socket: a buffered read would take
                // the start of the data into memory too (and that part would then be
                // copied twice more and written apart from the rest).
                self.read_head(rd, len, limit).await?;
                continue;
            }
            self.set_lowat(rd, (len - self.filled).saturating_sub(rd.buffered()));
            // Read into spare capacity (nothing is zero-filled first): all the rest at
            // once into a buffer of the frame's size, else a chunk at a time.
            let want = if self.buf.capacity() >= limit {
                limit - self.filled
            } else {
                (limit - self.filled).min(READ_CHUNK)
            };
            self.fill(rd, want).await?;
        }
        if self.spliced.is_some() {
            self.splice_rest(rd, len).await?;
        }
        self.after_large = len >= POOLED_FRAME;
        if !self.after_large {
            self.set_lowat(rd, 0);
        }
        let mut msg = std::mem::take(&mut self.buf);
        msg.truncate(self.filled);
        let permit = self.permit.take();
        if budget.is_some() && permit.is_none() {
            return Err("closed");
        }
        self.hdr_got = 0;
        self.len = None;
        self.filled = 0;
        self.decided = false;
        self.pipe_full = false;
        self.splice_waits = false;
        Ok(Frame {
            msg,
            permit,
            payload: self.spliced.take(),
        })
    }

    /// Reads (more of) the length prefix. After a large frame, with nothing buffered, it
    /// comes straight from the socket, exactly the prefix's bytes: a buffered read would
    /// fill the reader's buffer with the start of the next (likely large) frame and copy
    /// it out again into the frame's buffer (a whole 64 KiB READ response went through
    /// the client's 64 KiB read buffer that way). Small messages keep arriving many to a
    /// buffered read.
    ///
    /// A large frame leaves the low-water mark where its body put it: the prefix is
    /// tried at once (a read returns what is queued whatever the mark), and the mark comes
    /// down only when nothing is queued, before waiting (so a small message still wakes
    /// the reader). Back-to-back large frames of one size (READ responses at a queue
    /// depth) then read with no `setsockopt` at all, where lowering the mark after each
    /// and raising it again for the next body cost two per frame.
    ///
    /// Read straight from the socket, the prefix comes with up to a WRITE's head of what
    /// follows ([`PREFIX_READ`] in all): one receive where the prefix and the head took
    /// two. What follows may be the next frames too (a frame shorter than that); it is
    /// carried over ([`FrameReader::carried`]) and taken before anything else is read.
    async fn read_prefix<R: AsyncRead + RecvLowat + Unpin>(
        &mut self,
        rd: &mut R,
    ) -> std::io::Result<usize> {
        let need = 4 - self.hdr_got;
        if self.ahead_at < self.ahead_end {
            let n = need.min(self.ahead_end - self.ahead_at);
            let at = self.ahead_at;
            self.hdr[self.hdr_got..self.hdr_got + n].copy_from_slice(&self.ahead[at..at + n]);
            self.ahead_at += n;
            return Ok(n);
        }
        match rd.tcp_stream() {
            Some(sock) if self.after_large && rd.buffered() == 0 => loop {
                let want = need + WRITE_HEAD;
                match sock.try_read(&mut self.ahead[..want]) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if self.lowat != 1 {
                            rd.set_recv_lowat(1);
                            self.lowat = 1;
                        }
                        sock.readable().await?;
                    }
                    Ok(got) => {
                        let n = got.min(need);
                        self.hdr[self.hdr_got..self.hdr_got + n].copy_from_slice(&self.ahead[..n]);
                        self.ahead_at = n;
                        self.ahead_end = got;
                        return Ok(n);
                    }
                    Err(e) => return Err(e),
                }
            },
            _ => {
                // Whatever waits here is woken by any byte.
                if self.lowat != 1 {
                    rd.set_recv_lowat(1);
                    self.lowat = 1;
                }
                rd.read(&mut self.hdr[self.hdr_got..]).await
            }
        }
    }

    /// Reads the frame up to `limit` (its head) straight from the socket, with nothing
    /// buffered: what has arrived is taken at once; only when nothing has does the
    /// socket's low-water mark rise to the frame's rest, so the reader wakes once the
    /// whole frame is there (and splices it in one go).
    async fn read_head<R: AsyncRead + RecvLowat + Unpin>(
        &mut self,
        rd: &mut R,
        len: usize,
        limit: usize,
    ) -> Result<(), &'static str> {
        let want = limit.saturating_sub(self.filled).min(WRITE_HEAD);
        self.buf.truncate(self.filled);
        self.buf.reserve(want);
        let rest = len - self.filled;
        let n = self.recv_direct(&*rd, want, Some(rest), false).await?;
        if n == 0 {
            return Err("eof in frame");
        }
        self.filled += n;
        Ok(())
    }

    /// Receives up to `want` bytes straight from `rd`'s socket into the spare capacity
    /// of the frame's buffer, waiting until some have arrived; before each wait the
    /// socket's low-water mark is set to `lowat` when given. With `then`, the same
    /// receive also takes up to [`PREFIX_READ`] bytes that follow (the next frame's
    /// length prefix and head, carried as [`FrameReader::read_prefix`] carries them):
    /// one receive per large frame where the body and the next prefix took two; only
    /// when nothing is carried. 0 at the end of the stream.
    async fn recv_direct<R: RecvLowat>(
        &mut self,
        rd: &R,
        want: usize,
        lowat: Option<usize>,
        then: bool,
    ) -> Result<usize, &'static str> {
        let sock = rd.tcp_stream().ok_or("closed")?;
        let ahead = if then { PREFIX_READ } else { 0 };
        loop {
            let r = sock.try_io(tokio::io::Interest::READABLE, || {
                recv_spare(sock.as_fd(), &mut self.buf, want, &mut self.ahead[..ahead])
            });
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Some(mark) = lowat {
                        self.set_lowat(rd, mark);
                    }
                    sock.readable().await.map_err(|_| "read error")?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err("read error"),
                Ok((n, got)) => {
                    if then {
                        self.ahead_at = 0;
                        self.ahead_end = got;
                    }
                    return Ok(n);
                }
            }
        }
    }

    /// Appends up to `want` bytes from `rd` to the frame, into spare capacity (nothing
    /// is zero-filled first); the end of the stream inside a frame is an error.
    ///
    /// A large frame's body, with nothing buffered, comes straight from the socket: a
    /// buffered read of a rest smaller than the read buffer (the end of a READ response
    /// that arrived in parts, all of a 64 KiB one but its last bytes) would also take
    /// the start of the next frame into the read buffer, to be copied out of it again.
    async fn fill<R: AsyncRead + RecvLowat + Unpin>(
        &mut self,
        rd: &mut R,
        want: usize,
    ) -> Result<(), &'static str> {
        self.buf.truncate(self.filled);
        self.buf.reserve(want);
        let large = self.len.is_some_and(|l| l >= POOLED_FRAME);
        // The whole rest of a large frame: the next frame's prefix (and a WRITE's
        // head) comes in the same receive when it is already queued, as
        // [`FrameReader::read_prefix`] would take it next.
        let whole_rest = self.len == Some(self.filled + want) && self.carried().is_empty();
        let n = match rd.tcp_stream() {
            Some(_) if large && rd.buffered() == 0 => {
                self.recv_direct(&*rd, want, None, whole_rest).await?
            }
            _ => (&mut *rd)
                .take(want as u64)
                .read_buf(&mut self.buf)
                .await
                .map_err(|_| "read error")?,
        };
        if n == 0 {
            return Err("eof in frame");
        }
        self.filled += n;
        Ok(())
    }

    /// Reads what the stream has already buffered of this frame into the message (it is
    /// in memory already), then sets up the pipe the rest is spliced into. Without a
    /// pipe (descriptors exhausted, or [`splice::MAX_PIPES`] still held by earlier
    /// frames) the frame is read as any other.
    async fn start_splice<R: AsyncRead + RecvLowat + Unpin>(
        &mut self,
        rd: &mut R,
        len: usize,
    ) -> Result<(), &'static str> {
        loop {
            let want = rd.buffered().min(len - self.filled);
            if want == 0 {
                break;
            }
            self.fill(rd, want).await?;
        }
        if self.filled < len {
            // Room for twice the bytes (a page of the pipe may hold less than a page),
            // within what a pipe may hold; what does not fit is read into memory.
            let room = (2 * (len - self.filled)).min(splice::PIPE_MAX);
            if let Some(pipe) = Pipe::counted(room, &self.pipes, splice::MAX_PIPES) {
                self.spliced = Some(SplicedPayload {
                    pipe,
                    tail: Vec::new(),
                });
            }
        }
        Ok(())
    }

    /// Splices the rest of this frame from the socket into the pipe; once the pipe is
    /// full (or the socket refuses to splice) the rest is read into the payload's tail.
    async fn splice_rest<R: AsyncRead + RecvLowat + Unpin>(
        &mut self,
        rd: &mut R,
        len: usize,
    ) -> Result<(), &'static str> {
        loop {
            let got = self.filled + self.spliced.as_ref().map_or(0, |s| s.len());
            if got >= len {
                return Ok(());
            }
            let rest = len - got;
            if self.pipe_full || self.splice_waits {
                // About to wait: wake once the rest is there.
                self.set_lowat(rd, rest.saturating_sub(rd.buffered()));
            }
            let Some(sp) = self.spliced.as_mut() else {
                return Err("closed");
            };
            if self.pipe_full {
                sp.tail.reserve(rest.min(READ_CHUNK));
                let n = (&mut *rd)
                    .take(rest as u64)
                    .read_buf(&mut sp.tail)
                    .await
                    .map_err(|_| "read error")?;
                if n == 0 {
                    return Err("eof in frame");
                }
                continue;
            }
            let sock = rd.tcp_stream().ok_or("closed")?;
            // What has arrived is spliced at once; only once the socket runs dry does
            // the reader wait (with the low-water mark raised first).
            let r = if self.splice_waits {
                sock.readable().await.map_err(|_| "read error")?;
                sock.try_io(tokio::io::Interest::READABLE, || {
                    sp.pipe.splice_from(sock.as_fd(), rest)
                })
            } else {
                sp.pipe.splice_from(sock.as_fd(), rest)
            };
            self.splice_waits = true;
            match r {
                Ok(0) => return Err("eof in frame"),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    // Bytes queued that the pipe would not take: it is full.
                    if splice::has_queued(sock.as_fd()) {
                        self.pipe_full = true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.pipe_full = true,
                Err(_) => return Err("read error"),
            }
        }
    }
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

    /// A WRITE request message (header and body) carrying `data`, its Length field set
    /// to `length` (a hostile length when it differs from the data's).
    fn write_msg(data: &[u8], flags: u32, length: u32) -> Vec<u8> {
        use smbx_wire::rw::WriteRequest;
        use smbx_wire::{Command, Header, Writer};
        let h = Header {
            command: Command::Write as u16,
            flags,
            ..Default::default()
        };
        let mut w = Writer::with_capacity(64);
        h.encode(&mut w);
        let mut m = w.into_vec();
        let mut body = WriteRequest {
            data,
            length: data.len() as u32,
            ..Default::default()
        }
        .encode();
        body[4..8].copy_from_slice(&length.to_le_bytes());
        m.extend_from_slice(&body);
        m
    }

    #[tokio::test]
    async fn timeout_keeps_a_partial_frame() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Semaphore::new(1 << 20));
        let mut fr = FrameReader::new(1 << 20);
        let body: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let bytes = frame(&body);
        client.write_all(&bytes[..3]).await.unwrap();
        let r = tokio::time::timeout(
            Duration::from_millis(20),
            fr.next(&mut server, Some(&budget)),
        )
        .await;
        assert!(r.is_err());
        assert!(fr.partial());
        client.write_all(&bytes[3..100_000]).await.unwrap();
        let r = tokio::time::timeout(
            Duration::from_millis(20),
            fr.next(&mut server, Some(&budget)),
        )
        .await;
        assert!(r.is_err());
        client.write_all(&bytes[100_000..]).await.unwrap();
        let f = fr.next(&mut server, Some(&budget)).await.unwrap();
        assert_eq!(f.msg, body);
        assert_eq!(f.permit.unwrap().num_permits(), body.len());
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
        let r = tokio::time::timeout(
            Duration::from_millis(20),
            fr.next(&mut server, Some(&budget)),
        )
        .await;
        assert!(r.is_err());
        assert!(
            fr.buffer_capacity() <= 2 * READ_CHUNK,
            "{}",
            fr.buffer_capacity()
        );
        drop(client);
        assert_eq!(
            fr.next(&mut server, Some(&budget)).await.err(),
            Some("eof in frame")
        );
    }

    #[tokio::test]
    async fn large_frames_reuse_pooled_buffers() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let pool = Arc::new(BufPool::new(2));
        let mut fr = FrameReader::with_pool(16 << 20, pool.clone());
        let a: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..400_000u32).map(|i| (i * 3) as u8).collect();
        client.write_all(&frame(&a)).await.unwrap();
        client.write_all(&frame(&b)).await.unwrap();
        client.write_all(&frame(&[9; 100])).await.unwrap();
        let f = fr.next(&mut server, None).await.unwrap();
        assert!(f.permit.is_none(), "no budget, no permit");
        assert_eq!(f.msg, a);
        assert_eq!(
            f.msg.capacity(),
            512 * 1024 + BufPool::HEADROOM,
            "a buffer of its size class"
        );
        let ptr = f.msg.as_ptr();
        pool.recycle(f.msg);
        // The next large frame lands in the same memory; its own bytes only.
        let f = fr.next(&mut server, None).await.unwrap();
        assert_eq!((f.msg.as_ptr(), f.msg.len()), (ptr, b.len()));
        assert_eq!(f.msg, b);
        // A small frame is not pooled.
        let f = fr.next(&mut server, None).await.unwrap();
        assert_eq!(f.msg, vec![9; 100]);
        assert!(f.msg.capacity() < 64 * 1024);
    }

    /// A 512 KiB READ's response (header and fields, then the data; sealed, a
    /// TRANSFORM_HEADER more) is read into a buffer of the 512 KiB class, not 1 MiB's;
    /// 64 KiB's into the 64 KiB class.
    #[tokio::test]
    async fn power_of_two_reads_land_in_their_own_class() {
        let (mut client, mut server) = tokio::io::duplex(4 << 20);
        let pool = Arc::new(BufPool::new(2));
        let mut fr = FrameReader::with_pool(16 << 20, pool.clone());
        for data in [64 << 10, 512 << 10] {
            for head in [64 + 16, 52 + 64 + 16] {
                let msg: Vec<u8> = (0..head + data).map(|i| i as u8).collect();
                client.write_all(&frame(&msg)).await.unwrap();
                let f = fr.next(&mut server, None).await.unwrap();
                assert_eq!(f.msg, msg);
                assert_eq!(
                    f.msg.capacity(),
                    data + BufPool::HEADROOM,
                    "{head} + {data}"
                );
                pool.recycle(f.msg);
            }
        }
    }

    #[tokio::test]
    async fn budget_holds_back_reading() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Semaphore::new(100));
        let mut fr = FrameReader::new(100);
        client.write_all(&frame(&[7; 80])).await.unwrap();
        client.write_all(&frame(&[8; 80])).await.unwrap();
        let f1 = fr.next(&mut server, Some(&budget)).await.unwrap();
        assert_eq!(f1.msg, vec![7; 80]);
        // The second frame waits until the first one's permit is released.
        let r = tokio::time::timeout(
            Duration::from_millis(20),
            fr.next(&mut server, Some(&budget)),
        )
        .await;
        assert!(r.is_err());
        drop(f1.permit);
        let f2 = fr.next(&mut server, Some(&budget)).await.unwrap();
        assert_eq!(f2.msg, vec![8; 80]);
    }

    /// Over a real socket with splicing on: a lone WRITE's data comes back as the
    /// payload (the message keeps its head and whatever was buffered), byte for byte,
    /// also when the pipe fills (the rest lands in the tail) and when the reader is
    /// dropped half-way; WRITEs that do not qualify (a Length that does not end with the
    /// frame, signed) and other large frames are read whole, and the frames after
    /// them are intact.
    #[tokio::test]
    async fn spliced_writes_arrive_whole() {
        use smbx_wire::header::FLAGS_SIGNED;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let data = |n: usize, k: usize| -> Vec<u8> { (0..n).map(|j| (j * 7 + k) as u8).collect() };
        let big = data(6 << 20, 1);
        let frames: Vec<(Vec<u8>, bool)> = vec![
            (write_msg(&data(300_000, 2), 0, 300_000), true),
            (write_msg(&data(200_000, 3), 0, 199_999), false),
            (write_msg(&data(200_000, 4), FLAGS_SIGNED, 200_000), false),
            (vec![0xfd; 100_000], false),
            (write_msg(&big, 0, big.len() as u32), true),
            (write_msg(&data(1000, 5), 0, 1000), false),
            (write_msg(&data(1 << 20, 6), 0, 1 << 20), true),
        ];
        let sent: Vec<Vec<u8>> = frames.iter().map(|(f, _)| f.clone()).collect();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            for (i, b) in sent.iter().enumerate() {
                let f = frame(b);
                if i == 0 {
                    // In pieces with pauses: the reader times out mid-splice.
                    for part in f.chunks(70_000) {
                        s.write_all(part).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                } else {
                    s.write_all(&f).await.unwrap();
                }
            }
        });
        let (sock, _) = l.accept().await.unwrap();
        let (rd, _wr) = sock.into_split();
        let mut rd = BufReader::with_capacity(16 * 1024, rd);
        let mut fr = FrameReader::new(16 << 20).splice_writes(64 * 1024);
        for (i, (want, spliced)) in frames.iter().enumerate() {
            let f = loop {
                match tokio::time::timeout(Duration::from_millis(10), fr.next(&mut rd, None)).await
                {
                    Ok(r) => break r.unwrap(),
                    Err(_) => continue,
                }
            };
            assert_eq!(f.payload.is_some(), *spliced, "frame {i}");
            let got = match &f.payload {
                Some(p) => {
                    assert!(f.msg.len() >= splice::WRITE_HEAD);
                    assert!(
                        f.msg.len() <= splice::WRITE_HEAD + 16 * 1024,
                        "{}",
                        f.msg.len()
                    );
                    p.gather(&f.msg).unwrap()
                }
                None => f.msg,
            };
            assert!(
                got == *want,
                "frame {i}: {} bytes, {} sent",
                got.len(),
                want.len()
            );
            if i == 4 {
                // 6 MiB of data: more than a pipe may hold, the rest went to memory.
                assert!(!f.payload.as_ref().unwrap().tail.is_empty());
            }
        }
        peer.await.unwrap();
    }

    /// A WRITE whose prefix comes straight from the socket (after a large frame, with
    /// nothing buffered) has its head read alone: all of its data is spliced, none of
    /// it goes through memory, also when it arrives in many pieces; and the pipe the
    /// first one emptied carries the next.
    #[tokio::test]
    async fn write_after_a_large_frame_is_spliced_whole() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 11) as u8).collect();
        let m = write_msg(&data, 0, data.len() as u32);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (ack_tx, mut ack_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let sent = m.clone();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(&frame(&[5; 100_000])).await.unwrap();
            for _ in 0..2 {
                ack_rx.recv().await.unwrap();
                // In pieces: the reader finds part of the data, then waits for the rest.
                for part in frame(&sent).chunks(40_000) {
                    s.write_all(part).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
        let (sock, _) = l.accept().await.unwrap();
        let (rd, _wr) = sock.into_split();
        let mut rd = BufReader::with_capacity(16 * 1024, rd);
        let mut fr = FrameReader::new(1 << 20).splice_writes(64 * 1024);
        let f = fr.next(&mut rd, None).await.unwrap();
        assert_eq!(f.msg, vec![5; 100_000]);
        let mut fd = None;
        for _ in 0..2 {
            ack_tx.send(()).unwrap();
            let f = tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(f.msg, m[..splice::WRITE_HEAD], "the head alone");
            let p = f.payload.expect("spliced");
            assert!(p.tail.is_empty());
            assert_eq!(p.len(), data.len());
            let pipe_fd = std::os::fd::AsRawFd::as_raw_fd(&p.pipe.reader());
            assert_eq!(*fd.get_or_insert(pipe_fd), pipe_fd, "the pipe is reused");
            assert!(p.gather(&[]).unwrap() == data);
        }
        peer.await.unwrap();
    }

    /// While [`splice::MAX_PIPES`] spliced payloads are held, the next WRITE is read
    /// into memory (whole); once they are dropped, WRITEs are spliced again.
    #[tokio::test]
    async fn held_pipes_are_bounded() {
        let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let m = write_msg(&body, 0, body.len() as u32);
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let n = splice::MAX_PIPES + 2;
        let sent = m.clone();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            for _ in 0..n {
                s.write_all(&frame(&sent)).await.unwrap();
            }
        });
        let (sock, _) = l.accept().await.unwrap();
        let (rd, _wr) = sock.into_split();
        let mut rd = BufReader::with_capacity(16 * 1024, rd);
        let mut fr = FrameReader::new(1 << 20).splice_writes(64 * 1024);
        let mut held = Vec::new();
        for i in 0..n {
            let f = tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
                .await
                .unwrap()
                .unwrap();
            let whole = match &f.payload {
                Some(p) => p.gather(&f.msg).unwrap(),
                None => f.msg.clone(),
            };
            assert!(whole == m, "frame {i}");
            match i {
                i if i < splice::MAX_PIPES => assert!(f.payload.is_some(), "frame {i}"),
                i if i == splice::MAX_PIPES => {
                    assert!(f.payload.is_none(), "frame {i}");
                    held.clear();
                }
                _ => assert!(f.payload.is_some(), "frame {i}"),
            }
            held.push(f);
        }
        peer.await.unwrap();
    }

    #[tokio::test]
    async fn oversized_prefix_is_refused() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let mut fr = FrameReader::new(1000);
        client.write_all(&frame(&[0; 1001])[..4]).await.unwrap();
        assert_eq!(
            fr.next(&mut server, None).await.err(),
            Some("bad frame length")
        );
    }

    /// Over a real socket, with the low-water mark raised for each large body: frames of
    /// every size around the thresholds arrive whole, in order, and a small frame sent
    /// after a large one (with nothing after it) is not held back by the mark.
    #[tokio::test]
    async fn prefixes_after_large_frames_come_straight_from_the_socket() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        // Large then small then large, back to back (so a buffered read would take the
        // next frame's start), and prefixes split across writes after a large frame.
        let sizes = [POOLED_FRAME, 100, 300_000, 4, POOLED_FRAME + 1, 70, 200_000];
        let bodies: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 13 + j * 5) as u8).collect())
            .collect();
        let sent = bodies.clone();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut all = Vec::new();
            for b in &sent[..4] {
                all.extend_from_slice(&frame(b));
            }
            s.write_all(&all).await.unwrap();
            for b in &sent[4..] {
                let f = frame(b);
                for part in [&f[..1], &f[1..3], &f[3..]] {
                    s.write_all(part).await.unwrap();
                    s.flush().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        let (sock, _) = l.accept().await.unwrap();
        let (rd, _wr) = sock.into_split();
        let mut rd = BufReader::with_capacity(64 * 1024, rd);
        let mut fr = FrameReader::with_pool(16 << 20, Arc::new(BufPool::new(2)));
        for b in &bodies {
            // Dropping the read future mid-prefix (a timeout) loses nothing.
            let f = loop {
                match tokio::time::timeout(Duration::from_millis(5), fr.next(&mut rd, None)).await {
                    Ok(f) => break f.unwrap(),
                    Err(_) => continue,
                }
            };
            assert_eq!(f.msg.len(), b.len());
            assert!(f.msg == *b);
        }
        peer.await.unwrap();
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), fr.next(&mut rd, None))
                .await
                .unwrap()
                .unwrap_err(),
            "eof"
        );
    }

    /// A large frame's rest is received together with what follows it when that is
    /// already queued: once the frame is returned, the next frame's prefix and head
    /// are carried (no receive of their own), and every frame still arrives whole.
    /// Fails when the body's receive stops at the frame's end.
    #[tokio::test]
    async fn a_large_body_takes_the_next_prefix_in_its_receive() {
        let ls = tokio::net::TcpSocket::new_v4().unwrap();
        ls.set_recv_buffer_size(4 << 20).unwrap();
        ls.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = ls.local_addr().unwrap();
        let l = ls.listen(1).unwrap();
        let sizes = [100_000, 150_000, 70, POOLED_FRAME];
        let bodies: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 7 + j * 3) as u8).collect())
            .collect();
        let wire: Vec<u8> = bodies.iter().flat_map(|b| frame(b)).collect();
        let sent = wire.clone();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(&sent).await.unwrap();
            s
        });
        let (sock, _) = l.accept().await.unwrap();
        let (mut rd, _wr) = sock.into_split();
        // Everything is queued before the first read.
        let mut peeked = vec![0u8; wire.len()];
        for _ in 0..500 {
            if rd.peek(&mut peeked).await.unwrap() == wire.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut fr = FrameReader::with_pool(16 << 20, Arc::new(BufPool::new(2)));
        let mut at = 0;
        for (i, b) in bodies.iter().enumerate() {
            let f = fr.next(&mut rd, None).await.unwrap();
            assert!(f.msg == *b, "frame {i}");
            at += 4 + b.len();
            if i < 2 {
                // After a large frame: the next frame's start, as far as it goes.
                let next = &wire[at..(at + PREFIX_READ).min(wire.len())];
                assert_eq!(fr.carried(), next, "after frame {i}");
            }
        }
        drop(peer.await.unwrap());
        assert_eq!(fr.next(&mut rd, None).await.unwrap_err(), "eof");
    }

    #[tokio::test]
    async fn low_water_mark_never_holds_back_a_frame() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let sizes: Vec<usize> = vec![
            100,
            LOWAT_MIN - 1,
            LOWAT_MIN,
            LOWAT_MIN + 1,
            POOLED_FRAME - 1,
            POOLED_FRAME,
            300_000,
            MAX_POOLED_FRAME,
            MAX_POOLED_FRAME + 1,
            4,
        ];
        let bodies: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7) as u8).collect())
            .collect();
        let sent = bodies.clone();
        let (ack_tx, mut ack_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            for b in &sent {
                // One frame at a time, each only after the last was read: a mark left
                // too high would stall here.
                s.write_all(&frame(b)).await.unwrap();
                ack_rx.recv().await.unwrap();
            }
        });
        let (sock, _) = l.accept().await.unwrap();
        let (rd, _wr) = sock.into_split();
        let mut rd = BufReader::with_capacity(64 * 1024, rd);
        let pool = Arc::new(BufPool::new(2));
        let mut fr = FrameReader::with_pool(16 << 20, pool);
        for b in &bodies {
            let f = tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
                .await
                .expect("a frame held back")
                .unwrap();
            assert_eq!(f.msg.len(), b.len());
            assert!(f.msg == *b);
            ack_tx.send(()).unwrap();
        }
        peer.await.unwrap();
    }

    /// A socket's reader that counts how often its low-water mark is set.
    struct CountingReader {
        rd: BufReader<OwnedReadHalf>,
        sets: std::sync::atomic::AtomicUsize,
    }

    impl RecvLowat for CountingReader {
        fn buffered(&self) -> usize {
            self.rd.buffered()
        }
        fn set_recv_lowat(&self, bytes: usize) {
            self.sets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.rd.set_recv_lowat(bytes);
        }
        fn tcp_stream(&self) -> Option<&tokio::net::TcpStream> {
            self.rd.tcp_stream()
        }
    }

    impl AsyncRead for CountingReader {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.rd).poll_read(cx, buf)
        }
    }

    /// Large frames of one size already queued back to back (READ responses at a queue
    /// depth) are read with the mark raised once, not lowered after each frame and
    /// raised again for the next body, and without the read buffer; the small frame
    /// sent alone after them, once the reader waits, still wakes it.
    #[tokio::test]
    async fn back_to_back_large_frames_keep_the_mark() {
        let ls = tokio::net::TcpSocket::new_v4().unwrap();
        // Room for every frame in the receive queue before the first is read.
        ls.set_recv_buffer_size(4 << 20).unwrap();
        ls.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let l = ls.listen(1).unwrap();
        let addr = l.local_addr().unwrap();
        const N: usize = 4;
        let body: Vec<u8> = (0..POOLED_FRAME + 80).map(|j| (j * 7) as u8).collect();
        let sent = body.clone();
        let (queued_tx, queued_rx) = tokio::sync::oneshot::channel::<()>();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut all = Vec::new();
            for _ in 0..N {
                all.extend_from_slice(&frame(&sent));
            }
            s.write_all(&all).await.unwrap();
            queued_tx.send(()).unwrap();
            go_rx.await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            s.write_all(&frame(b"small")).await.unwrap();
            s
        });
        let (sock, _) = l.accept().await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), queued_rx)
            .await
            .expect("the frames were not queued")
            .unwrap();
        // Every byte written has reached the receive queue (loopback, nothing lost).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (rd, _wr) = sock.into_split();
        let mut rd = CountingReader {
            rd: BufReader::with_capacity(64 * 1024, rd),
            sets: Default::default(),
        };
        let mut fr = FrameReader::with_pool(16 << 20, Arc::new(BufPool::new(2)));
        for _ in 0..N {
            let f = tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
                .await
                .expect("a frame held back")
                .unwrap();
            assert!(f.msg == body);
            // The end of each body came straight from the socket: nothing of the next
            // frame went into the read buffer (to be copied out of it again).
            assert_eq!(rd.buffered(), 0);
        }
        // The first frame's start came through the read buffer; the second raised the
        // mark; the others left it (lowering and raising it around each frame: 2 * 3).
        let sets = rd.sets.load(std::sync::atomic::Ordering::Relaxed);
        assert!(sets <= 1, "the mark was set {sets} times for {N} frames");
        go_tx.send(()).unwrap();
        let f = tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
            .await
            .expect("a small frame held back by the raised mark")
            .unwrap();
        assert_eq!(f.msg, b"small");
        drop(peer.await.unwrap());
    }

    /// The header and message arrive whole and in order, also when the socket takes
    /// them in several pieces (a message larger than the send buffer, read slowly),
    /// with the header alone, the message alone, or neither.
    #[tokio::test]
    async fn send_more_sends_header_then_message() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (vec![0, 0, 0, 9], (0..9u8).collect()),
            (Vec::new(), (0..70u8).collect()),
            (vec![1, 2, 3, 4], Vec::new()),
            (Vec::new(), Vec::new()),
            (
                vec![0, 0x80, 0, 0],
                (0..8 << 20).map(|i: u32| (i * 13 % 251) as u8).collect(),
            ),
        ];
        let want: Vec<u8> = cases
            .iter()
            .flat_map(|(h, m)| h.iter().chain(m.iter()).copied())
            .collect();
        let reader = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = Vec::new();
            let mut chunk = vec![0u8; 4096];
            loop {
                // Slowly, so the sender meets a full socket and sends in pieces.
                let n = s.read(&mut chunk).await.unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&chunk[..n]);
                if got.len() % (1 << 20) < 4096 {
                    tokio::task::yield_now().await;
                }
            }
        });
        let s = tokio::net::TcpStream::connect(addr).await.unwrap();
        for (h, m) in &cases {
            send_more(&s, h, m).await.unwrap();
        }
        drop(s);
        let got = reader.await.unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want);
    }

    /// After a large frame the next prefix is read with up to a WRITE's head of what
    /// follows: frames of every length up to beyond that, each after a large frame and
    /// followed by another small one, all sent back to back (so one read takes the end
    /// of one frame and the start of the next), arrive whole and in order, through a
    /// plain and a splicing reader; the bytes read past a frame are carried over.
    #[tokio::test]
    async fn small_frames_after_large_ones_arrive_whole() {
        for splicing in [false, true] {
            let mut bodies: Vec<Vec<u8>> = Vec::new();
            for k in 1..=PREFIX_READ + 8 {
                bodies.push((0..POOLED_FRAME).map(|j| (j * 3 + k) as u8).collect());
                bodies.push((0..k).map(|j| (j * 7 + k) as u8).collect());
                let n = (k * 37) % 150 + 1;
                bodies.push((0..n).map(|j| (j * 5 + k + 1) as u8).collect());
            }
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let sent = bodies.clone();
            let peer = tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                let all: Vec<u8> = sent.iter().flat_map(|b| frame(b)).collect();
                s.write_all(&all).await.unwrap();
            });
            let (sock, _) = l.accept().await.unwrap();
            let (rd, _wr) = sock.into_split();
            let mut rd = BufReader::with_capacity(16 * 1024, rd);
            let mut fr = FrameReader::with_pool(16 << 20, Arc::new(BufPool::new(2)));
            if splicing {
                fr = fr.splice_writes(64 * 1024);
            }
            let mut carried = 0;
            for (i, b) in bodies.iter().enumerate() {
                let f = tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
                    .await
                    .expect("a frame held back")
                    .unwrap();
                assert!(f.payload.is_none());
                assert_eq!(f.msg.len(), b.len(), "frame {i}");
                assert!(f.msg == *b, "frame {i}");
                if !fr.carried().is_empty() {
                    carried += 1;
                    assert!(fr.partial());
                }
            }
            assert!(carried > 0, "no frame came with the one before it");
            assert_eq!(
                tokio::time::timeout(Duration::from_secs(5), fr.next(&mut rd, None))
                    .await
                    .unwrap()
                    .unwrap_err(),
                "eof"
            );
            peer.await.unwrap();
        }
    }

    /// A large WRITE, a frame of an ECHO's size and another large WRITE in one
    /// segment, then a WRITE whose prefix and head arrive split across receives: the
    /// second WRITE's prefix and the start of its head come with the ECHO's read, and
    /// its data is still spliced whole; every frame and every byte of data arrives.
    #[tokio::test]
    async fn a_write_after_an_echo_in_one_segment_is_spliced_whole() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13) as u8).collect();
        let m = write_msg(&data, 0, data.len() as u32);
        let echo: Vec<u8> = (0..68u8).collect();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (ack_tx, mut ack_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (sent, sent_echo) = (m.clone(), echo.clone());
        let peer = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut all = frame(&sent);
            all.extend_from_slice(&frame(&sent_echo));
            all.extend_from_slice(&frame(&sent));
            s.write_all(&all).await.unwrap();
            ack_rx.recv().await.unwrap();
            // The prefix split, then the head split, then the data.
            let f = frame(&sent);
            for part in [&f[..2], &f[2..9], &f[9..60], &f[60..]] {
                s.write_all(part).await.unwrap();
                s.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            s.write_all(&frame(&sent_echo)).await.unwrap();
        });
        let (sock, _) = l.accept().await.unwrap();
        let (rd, _wr) = sock.into_split();
        let mut rd = BufReader::with_capacity(16 * 1024, rd);
        let mut fr = FrameReader::new(1 << 20).splice_writes(64 * 1024);
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(10), fr.next(&mut rd, None))
                .await
                .expect("a frame held back")
                .unwrap()
        };
        let whole = |f: &Frame| match &f.payload {
            Some(p) => p.gather(&f.msg).unwrap(),
            None => f.msg.clone(),
        };
        let f = next().await;
        assert!(whole(&f) == m);
        let f = next().await;
        assert_eq!(f.msg, echo);
        for round in 0..2 {
            let f = next().await;
            assert_eq!(
                f.msg,
                m[..splice::WRITE_HEAD],
                "round {round}: the head alone"
            );
            let p = f.payload.as_ref().expect("spliced");
            assert!(p.tail.is_empty());
            assert_eq!(p.len(), data.len());
            assert!(whole(&f) == m);
            if round == 0 {
                ack_tx.send(()).unwrap();
            }
        }
        let f = next().await;
        assert_eq!(f.msg, echo);
        peer.await.unwrap();
    }
}
