//! A message link: whole SMB2 messages out and in, whichever transport carries them,
//! so that a connection's request core never branches on Direct TCP or SMB Direct.
//!
//! A link is two halves: a [`MessageSender`] (shared) and a [`MessageReceiver`]
//! (owned by the one task that reads). [`tcp`] and [`tcp_with`] build the Direct TCP
//! pair (a 4-byte length prefix per message; a writer future that batches queued
//! messages into one buffered write, sends a READ's data from its file with sendfile,
//! and gives large buffers back to the pool), [`direct`] the SMB Direct pair over a
//! [`DirectLink`] (whole messages, no prefix).
//!
//! The client sends with [`MessageSender::send`], which never waits (a caller that is
//! cancelled after spending MessageIds leaves none unsent; its credits bound what is
//! queued), and receives with [`MessageReceiver::recv`]. The server sends an
//! [`Outgoing`] with [`send_bounded`] (it waits while the link's queue is full; the
//! message may carry a file [`Tail`], a budget permit held until it is written, and
//! an STag for Send with Invalidate) and receives with
//! [`MessageReceiver::recv_within`] (each message holds permits for its length from
//! the connection's budget; a Direct TCP link may splice a large WRITE's data into a
//! pipe). What differs between the transports is asked as capabilities
//! ([`MessageSender::sends_file_tails`], [`MessageSender::max_message`]), never by
//! which transport it is.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use smbx_wire::framing::{decode_frame_header, encode_frame_header};
use smbx_wire::InMessage;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader, BufWriter, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::direct::{BoxFuture, DirectLink};
use crate::pool::BufPool;
use crate::splice::SplicedPayload;
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

/// Data that follows a message in the same frame and still lies in a file: a READ
/// response's data, which a link that [sends file tails](MessageSender::sends_file_tails)
/// sends from the page cache (sendfile) and any other reads in behind the message.
pub trait Tail: Send + Sync {
    /// Bytes it adds to the message (what the response promised).
    fn len(&self) -> usize;
    /// Whether it adds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sends bytes from `at` on into the socket `sock` without waiting (sendfile);
    /// returns how many went.
    fn send_to(&self, sock: BorrowedFd<'_>, at: usize) -> io::Result<usize>;
    /// Appends bytes from `at` to the end to `buf`, zeros for whatever the file no
    /// longer holds (the message already promised them).
    fn read_rest(&self, buf: &mut Vec<u8>, at: usize);
    /// The bytes themselves when they lie in memory (a WRITE's data sent from the
    /// caller's buffer): a Direct TCP link writes them with the message in one
    /// gathered write.
    fn in_memory(&self) -> Option<&[u8]> {
        None
    }
}

/// Data in memory as a tail: a client's WRITE data sent from the caller's buffer
/// behind the request's header and fields, never copied into the request.
impl Tail for bytes::Bytes {
    fn len(&self) -> usize {
        bytes::Bytes::len(self)
    }

    fn send_to(&self, sock: BorrowedFd<'_>, at: usize) -> io::Result<usize> {
        crate::tcp::send_now(sock, self.get(at..).unwrap_or_default())
    }

    fn read_rest(&self, buf: &mut Vec<u8>, at: usize) {
        buf.extend_from_slice(self.get(at..).unwrap_or_default());
    }

    fn in_memory(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// One message to send, with what travels beside it.
pub struct Outgoing {
    /// The message is `buf[start..]`.
    pub buf: Vec<u8>,
    /// Where the message starts in `buf`.
    pub start: usize,
    /// Data that follows the message in the same frame, from a file.
    pub tail: Option<Box<dyn Tail>>,
    /// Sends the message as Send with Invalidate of this peer STag (SMB Direct; a
    /// Direct TCP link has no STags and ignores it).
    pub invalidate: Option<u32>,
    /// Held until the message is written to the socket (Direct TCP) or queued on the
    /// link (SMB Direct): its share of the sender's memory budget.
    pub hold: Option<OwnedSemaphorePermit>,
}

impl Outgoing {
    /// The whole of `buf` as a message, with nothing beside it.
    pub fn new(buf: Vec<u8>) -> Self {
        Outgoing {
            buf,
            start: 0,
            tail: None,
            invalidate: None,
            hold: None,
        }
    }

    /// Bytes the message puts on the link: its own and its tail's.
    pub fn len(&self) -> usize {
        self.buf.len().saturating_sub(self.start) + self.tail.as_ref().map_or(0, |t| t.len())
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message with its tail read in behind it (for a link that cannot send
    /// from a file).
    pub(crate) fn read_tail_in(&mut self) {
        if let Some(t) = self.tail.take() {
            t.read_rest(&mut self.buf, 0);
        }
    }
}

impl fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outgoing")
            .field("len", &self.len())
            .field("invalidate", &self.invalidate)
            .finish_non_exhaustive()
    }
}

/// Why [`MessageSender::try_send`] did not queue a message.
#[derive(Debug)]
pub enum TrySendError {
    /// The link's queue is full: the message, back (wait with
    /// [`MessageSender::send_waiting`]).
    Full(Outgoing),
    /// The link cannot send.
    Failed(LinkError),
}

/// Which transport carries a link: for labels (logs, metrics, status), never for
/// behaviour (that is asked as capabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Direct TCP (port 445).
    Tcp = 0,
    /// SMB Direct (RDMA).
    SmbDirect = 1,
}

impl Transport {
    /// Every transport, in the order of their numbers (for per-transport tables).
    pub const ALL: [Transport; 2] = [Transport::Tcp, Transport::SmbDirect];

    /// Its name in labels: `tcp` or `smbdirect`.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::SmbDirect => "smbdirect",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Sends whole messages.
pub trait MessageSender: Send + Sync {
    /// Queues `buf[start..]` as one message; `buf[..start]` is room the sender may
    /// use (at least [`PREFIX_ROOM`] bytes). Never waits, whatever the queue's length
    /// (the caller bounds it, as SMB2 credits do).
    fn send(&self, buf: Vec<u8>, start: usize) -> Result<(), LinkError>;

    /// Queues `out` if the link's queue has room now; gives it back when it is full.
    fn try_send(&self, out: Outgoing) -> Result<(), TrySendError>;

    /// Queues `out`, waiting while the link's queue is full. Boxed: try
    /// [`MessageSender::try_send`] first, as [`send_bounded`] does.
    fn send_waiting(&self, out: Outgoing) -> BoxFuture<'_, Result<(), LinkError>>;

    /// Whether an [`Outgoing::tail`] goes from its file to the wire without passing
    /// through memory (Direct TCP, sendfile); otherwise the link reads it in behind
    /// the message.
    fn sends_file_tails(&self) -> bool {
        false
    }

    /// The largest message the link carries when that is less than a Direct TCP
    /// frame (SMB Direct: the negotiated largest reassembled message).
    fn max_message(&self) -> Option<usize> {
        None
    }

    /// The link's RDMA side (registration, RDMA Read and Write of READ and WRITE
    /// payloads) when it has one (SMB Direct).
    fn rdma(&self) -> Option<&Arc<dyn DirectLink>> {
        None
    }

    /// Which transport carries the link (for labels only).
    fn transport(&self) -> Transport;

    /// The peer's transport address.
    fn peer_addr(&self) -> SocketAddr;

    /// The local transport address.
    fn local_addr(&self) -> SocketAddr;
}

/// Sends `out` on `sender`, waiting while its queue is full (the boxed wait only then).
pub async fn send_bounded(sender: &dyn MessageSender, out: Outgoing) -> Result<(), LinkError> {
    match sender.try_send(out) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(out)) => sender.send_waiting(out).await,
        Err(TrySendError::Failed(e)) => Err(e),
    }
}

/// A received message and what it holds.
#[derive(Debug)]
pub struct Received {
    /// The message, in the buffer it arrived in (for a spliced WRITE: its head and
    /// whatever of its data had been buffered).
    pub msg: InMessage,
    /// The rest of a large WRITE, spliced from the socket into a pipe (Direct TCP with
    /// [`TcpOptions::splice_writes`]).
    pub payload: Option<SplicedPayload>,
    /// Permits for the message's length (at least 1) from the budget it was received
    /// within.
    pub permit: OwnedSemaphorePermit,
}

/// Receives whole messages.
pub trait MessageReceiver: Send {
    /// The next message, in the buffer it arrived in; `Ok(None)` when the peer closed
    /// the link. Not boxed (a reader knows its receiver's type): nothing is allocated
    /// per message to wait.
    fn recv(&mut self) -> impl Future<Output = Result<Option<InMessage>, LinkError>> + Send
    where
        Self: Sized;

    /// Releases the link once the reader is done with it.
    fn close(&mut self) -> BoxFuture<'_, ()>;

    /// Gives back what a message received only in part holds (its permits from
    /// [`MessageReceiver::recv_within`]'s budget) when the reader stops reading
    /// before the link closes; nothing more is received after it.
    fn stop_reading(&mut self) {}

    /// The next message, holding permits for its length from `budget`: a Direct TCP
    /// frame's are taken before its body is read, so a peer cannot make the reader
    /// buffer more than the budget across messages still held. `Ok(None)` when the
    /// peer closed the link. Cancel-safe: a dropped call loses nothing. Not boxed
    /// (a reader that uses it knows its receiver's type).
    fn recv_within(
        &mut self,
        budget: &Arc<Semaphore>,
    ) -> impl Future<Output = Result<Option<Received>, LinkError>> + Send
    where
        Self: Sized;
}

/// A queued Direct TCP message.
struct Queued {
    out: Outgoing,
    /// `out.buf[out.start..]` begins with its length prefix.
    framed: bool,
    /// It holds one of the queue's slots.
    slot: bool,
    /// Bytes of its frame (length prefix and message) already on the wire: it was
    /// sent at once in part ([`TcpOptions::send_at_once`]), the writer sends the rest.
    sent: usize,
}

/// What a Direct TCP link's senders and its writer share: the socket's write side and
/// who may write to it now.
///
/// Every message is on the wire in the order it was queued. A sender that finds nothing
/// queued and nothing being written ([`WriteSide::unsent`] is 0) may write a message to
/// the socket itself, without waiting ([`TcpOptions::send_at_once`]); what the socket
/// does not take then is queued for the writer, as any message behind it is. The lock
/// on `unsent` is held across that write and the queueing of its rest, so nothing can
/// go to the wire in between.
#[derive(Debug)]
struct WriteSide {
    /// The writer holds the socket's write half; senders borrow it while the writer
    /// lives. Its end (every sender gone, a write failed, or its task aborted, as the
    /// client closes a connection) drops it, which shuts the socket's sending side at
    /// once, as before senders could write: a sender kept alive elsewhere must not keep
    /// the peer from seeing the connection end.
    sock: std::sync::Weak<OwnedWriteHalf>,
    /// Messages queued, or taken by the writer and not yet all handed to the socket.
    unsent: Mutex<usize>,
    /// The receiver holds a whole next frame in its buffer (its reader goes on without
    /// reading from the socket): a response is then left to the writer, to go out with
    /// the ones that frame and its followers produce (one write for a burst of small
    /// requests), not in a write of its own.
    input_ahead: AtomicBool,
    /// Senders write a message themselves when they may ([`TcpOptions::send_at_once`]).
    at_once: bool,
}

impl WriteSide {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.unsent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer handed `n` more messages to the socket.
    fn written(&self, n: usize) {
        let mut u = self.lock();
        *u = u.saturating_sub(n);
    }
}

/// The Direct TCP sender: messages go to the writer future through a queue, or straight
/// to the socket when nothing is ahead of them ([`TcpOptions::send_at_once`]).
pub struct TcpSender {
    queue: mpsc::UnboundedSender<Queued>,
    /// Room in the queue for [`MessageSender::try_send`] and
    /// [`MessageSender::send_waiting`] (the writer frees a slot as it takes a message).
    slots: Option<Arc<Semaphore>>,
    side: Arc<WriteSide>,
    /// Where a message's buffer goes once it was sent at once.
    pool: Arc<BufPool>,
    peer: SocketAddr,
    local: SocketAddr,
}

impl fmt::Debug for TcpSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpSender").finish_non_exhaustive()
    }
}

impl TcpSender {
    /// Queues `q` for the writer (counted as unsent while `unsent` is held, so that no
    /// sender writes at once ahead of it).
    fn push(&self, unsent: &mut usize, q: Queued) -> Result<(), LinkError> {
        self.queue.send(q).map_err(|_| LinkError::Closed)?;
        *unsent += 1;
        Ok(())
    }

    fn queue(&self, out: Outgoing, slot: bool) -> Result<(), LinkError> {
        let mut unsent = self.side.lock();
        self.push(
            &mut unsent,
            Queued {
                out,
                framed: false,
                slot,
                sent: 0,
            },
        )
    }

    /// Writes `out` (a message with no tail) to the socket now when nothing is queued
    /// or being written and the receiver has no whole frame waiting; what the socket
    /// does not take (it is full, or failed) goes to the writer with the count of bytes
    /// already sent. `Err(out)` back when it may not be sent at once: queue it.
    fn send_at_once(&self, out: Outgoing) -> Result<Result<(), LinkError>, Outgoing> {
        if !self.side.at_once || out.tail.is_some() || self.side.input_ahead.load(Ordering::Relaxed)
        {
            return Err(out);
        }
        let mut unsent = self.side.lock();
        if *unsent > 0 {
            return Err(out);
        }
        let msg = out.buf.get(out.start..).unwrap_or_default();
        let Ok(prefix) = encode_frame_header(msg.len()) else {
            return Ok(Err(LinkError::TooLarge));
        };
        let total = prefix.len() + msg.len();
        let Some(sock) = self.side.sock.upgrade() else {
            // The writer has ended: queueing fails.
            return Err(out);
        };
        let stream: &TcpStream = (*sock).as_ref();
        let mut sent = 0;
        while sent < total {
            let mut parts = [io::IoSlice::new(&prefix), io::IoSlice::new(msg)];
            let mut parts = &mut parts[..];
            io::IoSlice::advance_slices(&mut parts, sent);
            match stream.try_write_vectored(parts) {
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Full (or failed: the writer meets the error and ends the link).
                Err(_) => break,
            }
        }
        if sent == total {
            drop(unsent);
            self.pool.recycle(out.buf);
            return Ok(Ok(()));
        }
        // The rest goes first in the queue (nothing else is in it), in one of its
        // slots if one is free (it holds one while nothing is queued).
        let slot = self
            .slots
            .as_ref()
            .is_some_and(|s| s.try_acquire().map(|p| p.forget()).is_ok());
        Ok(self.push(
            &mut unsent,
            Queued {
                out,
                framed: false,
                slot,
                sent,
            },
        ))
    }
}

/// The writer's end of the socket, shared with the senders that write at once.
struct SharedWrite(Arc<OwnedWriteHalf>);

impl SharedWrite {
    fn stream(&self) -> &TcpStream {
        (*self.0).as_ref()
    }
}

impl AsyncWrite for SharedWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let s = self.stream();
        loop {
            ready!(s.poll_write_ready(cx))?;
            match s.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// The write side is shut once its last holder drops it (`OwnedWriteHalf`'s drop).
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl MessageSender for TcpSender {
    fn send(&self, buf: Vec<u8>, start: usize) -> Result<(), LinkError> {
        let from = start.checked_sub(PREFIX_ROOM).ok_or(LinkError::TooLarge)?;
        let len = buf.len().checked_sub(start).ok_or(LinkError::TooLarge)?;
        let prefix = encode_frame_header(len).map_err(|_| LinkError::TooLarge)?;
        let mut out = Outgoing::new(buf);
        out.start = start;
        // To the socket now when nothing is ahead of it ([`TcpOptions::send_at_once`]).
        let mut out = match self.send_at_once(out) {
            Ok(r) => return r,
            Err(out) => out,
        };
        out.buf[from..start].copy_from_slice(&prefix);
        out.start = from;
        let mut unsent = self.side.lock();
        self.push(
            &mut unsent,
            Queued {
                out,
                framed: true,
                slot: false,
                sent: 0,
            },
        )
    }

    fn try_send(&self, out: Outgoing) -> Result<(), TrySendError> {
        let out = match self.send_at_once(out) {
            Ok(r) => return r.map_err(TrySendError::Failed),
            Err(out) => out,
        };
        let slot = match &self.slots {
            None => false,
            Some(s) => match s.try_acquire() {
                Ok(p) => {
                    p.forget();
                    true
                }
                Err(TryAcquireError::NoPermits) => return Err(TrySendError::Full(out)),
                Err(TryAcquireError::Closed) => {
                    return Err(TrySendError::Failed(LinkError::Closed))
                }
            },
        };
        self.queue(out, slot).map_err(TrySendError::Failed)
    }

    fn send_waiting(&self, out: Outgoing) -> BoxFuture<'_, Result<(), LinkError>> {
        Box::pin(async move {
            if let Some(s) = &self.slots {
                s.acquire().await.map_err(|_| LinkError::Closed)?.forget();
            }
            self.queue(out, self.slots.is_some())
        })
    }

    fn sends_file_tails(&self) -> bool {
        true
    }

    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// The Direct TCP receiver: frames read through a buffered reader into pooled buffers.
#[derive(Debug)]
pub struct TcpReceiver {
    rd: BufReader<OwnedReadHalf>,
    frames: FrameReader,
    /// Told whether a whole next frame is buffered, when senders may write at once.
    side: Option<Arc<WriteSide>>,
    /// Since when every frame returned had a whole next one buffered (its responses
    /// held for the writer), if the last one did.
    ahead_since: Option<std::time::Instant>,
}

/// Whether the reader and the writer share one thread on one CPU: this task's runtime
/// has one worker thread, and this thread may run on one CPU only (`sched_getaffinity`;
/// std's `available_parallelism` reads cgroup files on every call, too slow for once a
/// burst). A runtime sized before the process was pinned (`taskset -p` after start)
/// has more workers than CPUs: a yield there wakes another worker thread on the same
/// CPU, which halved 4 KiB QD32 reads (1,000 -> 480-570 MB/s).
#[allow(unsafe_code)]
fn one_worker_on_one_cpu() -> bool {
    let one_worker =
        tokio::runtime::Handle::try_current().is_ok_and(|h| h.metrics().num_workers() == 1);
    one_worker
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at
        // most the size it is given into it, and CPU_COUNT only reads it.
        && unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
                && libc::CPU_COUNT(&set) == 1
        }
}

/// How long a run of frames with input ahead holds its responses before the reader
/// lets the writer have its CPU, when they share one ([`TcpReceiver::pace`]).
const AHEAD_HOLD: std::time::Duration = std::time::Duration::from_micros(15);

/// Whether a reader whose run of frames with input ahead began at `since` lets the
/// writer run before it reads on: the run has held its responses for [`AHEAD_HOLD`]
/// and the reader shares one thread and one CPU with the writer
/// (`one_worker_on_one_cpu`, asked only then).
fn yields_to_writer(
    since: Option<std::time::Instant>,
    now: std::time::Instant,
    shares_cpu: impl FnOnce() -> bool,
) -> bool {
    since.is_some_and(|t| now.saturating_duration_since(t) >= AHEAD_HOLD) && shares_cpu()
}

impl TcpReceiver {
    /// Tells the senders, after each frame returned, whether the reader holds a whole
    /// next frame (it goes on without reading the socket): responses are then left to
    /// the writer, to go out together once the reader waits.
    fn note_input(&mut self) {
        if let Some(side) = &self.side {
            // Bytes carried over from a length prefix's read come first; the read
            // buffer is empty while there are any.
            let b = match self.frames.carried() {
                [] => self.rd.buffer(),
                carried => carried,
            };
            let ahead = b
                .get(..4)
                .and_then(|h| <[u8; 4]>::try_from(h).ok())
                .and_then(|h| decode_frame_header(h, usize::MAX).ok())
                .is_some_and(|next| b.len() - 4 >= next);
            side.input_ahead.store(ahead, Ordering::Relaxed);
            if !ahead {
                self.ahead_since = None;
            } else if self.ahead_since.is_none() {
                self.ahead_since = Some(std::time::Instant::now());
            }
        }
    }

    /// Lets the writer run (the task yields) once a run of frames with input ahead has
    /// held its responses for [`AHEAD_HOLD`], where the reader and the writer share one
    /// worker thread on one CPU ([`one_worker_on_one_cpu`]) and the writer waits for
    /// the reader: it sends what is held while the client still has requests in
    /// flight, rather than after the whole burst. Server started on CPU 0, client on
    /// CPU 1, 5 s, alternated: 8 KiB 70/30 QD16 1,124-1,127 MB/s against 763-770
    /// (server cycles per byte 2.07 against 2.38), 4 KiB QD32 level (894-912 against
    /// 899-934). With two CPUs the writer runs beside the reader and a yield only
    /// splits the writes: 4 KiB QD32 fell to 540-555 MB/s against 894-964; so it did
    /// with two workers pinned to one CPU after start (480-570 against 1,000).
    async fn pace(&mut self) {
        // Most frames come with no run under way: no clock read for them.
        if self.ahead_since.is_none() {
            return;
        }
        let mut asked = false;
        let ask = || {
            asked = true;
            one_worker_on_one_cpu()
        };
        let yields = yields_to_writer(self.ahead_since, std::time::Instant::now(), ask);
        if asked {
            // Asked at most once per AHEAD_HOLD of a run, on any number of CPUs.
            self.ahead_since = None;
        }
        if yields {
            tokio::task::yield_now().await;
        }
    }
}

impl MessageReceiver for TcpReceiver {
    async fn recv(&mut self) -> Result<Option<InMessage>, LinkError> {
        self.pace().await;
        let r = self.frames.next(&mut self.rd, None).await;
        self.note_input();
        match r {
            Ok(f) => Ok(Some(f.msg.into())),
            Err("eof") => Ok(None),
            Err(e) => Err(LinkError::Frame(e)),
        }
    }

    fn close(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn stop_reading(&mut self) {
        self.frames = FrameReader::new(0);
    }

    async fn recv_within(
        &mut self,
        budget: &Arc<Semaphore>,
    ) -> Result<Option<Received>, LinkError> {
        self.pace().await;
        let r = self.frames.next(&mut self.rd, Some(budget)).await;
        self.note_input();
        match r {
            Ok(f) => Ok(Some(Received {
                msg: f.msg.into(),
                payload: f.payload,
                permit: f.permit.ok_or(LinkError::Closed)?,
            })),
            Err("eof") => Ok(None),
            Err("closed") => Err(LinkError::Closed),
            Err(e) => Err(LinkError::Frame(e)),
        }
    }
}

/// How a Direct TCP link reads and queues ([`tcp_with`]).
#[derive(Debug, Clone)]
pub struct TcpOptions {
    /// The largest frame received.
    pub max_frame: usize,
    /// Where received frames of the usual I/O sizes come from, and where sent
    /// buffers go back.
    pub pool: Arc<BufPool>,
    /// The socket's read buffer (small messages arrive many to a read; larger frames
    /// bypass it).
    pub read_buffer: usize,
    /// WRITEs of at least this many bytes have their data spliced from the socket into
    /// a pipe ([`Received::payload`]; see [`crate::splice`]).
    pub splice_writes: Option<usize>,
    /// Messages [`MessageSender::try_send`] and [`MessageSender::send_waiting`] may
    /// have queued before they wait (`None`: no bound).
    pub queue: Option<usize>,
    /// [`MessageSender::send`] and [`MessageSender::try_send`] write a message with no
    /// tail to the socket themselves, without waiting, when nothing is queued or being
    /// written and the receiver has no whole frame buffered; what the socket does not
    /// take then goes to the writer. A response (or a client's request) then leaves as
    /// soon as it is made, not once the writer task next runs, and that task is not
    /// woken for it.
    pub send_at_once: bool,
}

impl TcpOptions {
    /// Frames up to `max_frame` bytes into buffers from `pool`, a 64 KiB read buffer
    /// (small responses arrive many to a segment and each would otherwise cost two
    /// reads; small enough that little of a large frame is copied out of it), no
    /// splicing, no bound on the queue.
    pub fn new(max_frame: usize, pool: Arc<BufPool>) -> Self {
        TcpOptions {
            max_frame,
            pool,
            read_buffer: 64 * 1024,
            splice_writes: None,
            queue: None,
            send_at_once: false,
        }
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
    tcp_with(stream, TcpOptions::new(max_frame, pool))
}

/// [`tcp`] with its options spelled out.
pub fn tcp_with(
    stream: TcpStream,
    o: TcpOptions,
) -> (
    TcpSender,
    TcpReceiver,
    impl Future<Output = std::io::Result<()>> + Send,
) {
    let _ = stream.set_nodelay(true);
    // A socket that has no addresses any more is dead: its first read fails.
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    let peer = stream.peer_addr().unwrap_or(unknown);
    let local = stream.local_addr().unwrap_or(unknown);
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut frames = FrameReader::with_pool(o.max_frame, o.pool.clone());
    if let Some(min) = o.splice_writes {
        frames = frames.splice_writes(min);
    }
    let wr = Arc::new(wr);
    let side = Arc::new(WriteSide {
        sock: Arc::downgrade(&wr),
        unsent: Mutex::new(0),
        input_ahead: AtomicBool::new(false),
        at_once: o.send_at_once,
    });
    let receiver = TcpReceiver {
        rd: BufReader::with_capacity(o.read_buffer, rd),
        frames,
        side: o.send_at_once.then(|| side.clone()),
        ahead_since: None,
    };
    let slots = o.queue.map(|n| Arc::new(Semaphore::new(n)));
    let sender = TcpSender {
        queue: tx,
        slots: slots.clone(),
        side: side.clone(),
        pool: o.pool.clone(),
        peer,
        local,
    };
    (sender, receiver, tcp_writer(side, wr, rx, o.pool, slots))
}

/// Bytes the writer gathers before writing to the socket.
const WRITE_BUFFER: usize = 256 * 1024;

/// Closes the queue's slots when the writer ends, so that senders waiting for one
/// fail instead of waiting forever.
struct CloseSlots(Option<Arc<Semaphore>>);

impl Drop for CloseSlots {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            s.close();
        }
    }
}

/// Writes queued messages, batching whatever is queued into one buffered write,
/// until every sender is gone or the socket fails; large message buffers go back to
/// `pool` once written.
async fn tcp_writer(
    side: Arc<WriteSide>,
    wr: Arc<OwnedWriteHalf>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    pool: Arc<BufPool>,
    slots: Option<Arc<Semaphore>>,
) -> std::io::Result<()> {
    let slots = CloseSlots(slots);
    let mut w = BufWriter::with_capacity(WRITE_BUFFER, SharedWrite(wr));
    while let Some(q) = rx.recv().await {
        write_one(&mut w, q, &pool, &slots).await?;
        let mut n = 1;
        while let Ok(q) = rx.try_recv() {
            write_one(&mut w, q, &pool, &slots).await?;
            n += 1;
        }
        w.flush().await?;
        side.written(n);
    }
    let _ = w.shutdown().await;
    Ok(())
}

async fn write_one(
    w: &mut BufWriter<SharedWrite>,
    q: Queued,
    pool: &BufPool,
    slots: &CloseSlots,
) -> std::io::Result<()> {
    if let (true, Some(s)) = (q.slot, &slots.0) {
        s.add_permits(1);
    }
    // The hold (the message's share of a budget) is kept until written.
    let Outgoing {
        buf,
        start,
        tail,
        hold: _hold,
        ..
    } = q.out;
    let msg = buf.get(start..).unwrap_or_default();
    let tail_len = tail.as_ref().map_or(0, |t| t.len());
    let prefix;
    let hdr: &[u8] = if q.framed {
        &[]
    } else {
        prefix = encode_frame_header(msg.len() + tail_len)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        &prefix
    };
    // What was sent at once is not sent again (only a message with no tail is).
    let (hdr, msg) = match q.sent {
        0 => (hdr, msg),
        n if n < hdr.len() => (&hdr[n..], msg),
        n => (&[][..], msg.get(n - hdr.len()..).unwrap_or_default()),
    };
    if let Some(data) = tail.as_deref().and_then(|t| t.in_memory()) {
        // Data in memory: prefix, message and data in one gathered write (whatever
        // is buffered goes first).
        w.flush().await?;
        let mut parts = [
            io::IoSlice::new(hdr),
            io::IoSlice::new(msg),
            io::IoSlice::new(data),
        ];
        write_all_vectored(w.get_mut(), &mut parts).await?;
        pool.recycle(buf);
        return Ok(());
    }
    if let Some(t) = tail {
        // The frame header and fields go out with MSG_MORE, so the kernel sends
        // them with the data that follows rather than as a segment of their own.
        w.flush().await?;
        crate::tcp::send_more(w.get_ref().stream(), hdr, msg).await?;
        drop(buf);
        return send_tail(w, &*t).await;
    }
    if w.buffer().len() + hdr.len() + msg.len() > WRITE_BUFFER {
        w.flush().await?;
    }
    if msg.len() >= WRITE_BUFFER {
        // Header and message in one write, not a 4-byte segment of its own.
        let mut parts = [io::IoSlice::new(hdr), io::IoSlice::new(msg)];
        write_all_vectored(w.get_mut(), &mut parts).await?;
    } else {
        w.write_all(hdr).await?;
        w.write_all(msg).await?;
    }
    pool.recycle(buf);
    Ok(())
}

/// Writes every byte of `parts`.
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut parts: &mut [io::IoSlice<'_>],
) -> io::Result<()> {
    while !parts.is_empty() {
        let n = w.write_vectored(parts).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut parts, n);
    }
    Ok(())
}

/// Sends the tail from its file (sendfile); what that cannot send (the file shrank,
/// or sendfile is refused) is read and written, zeros past the end.
async fn send_tail(w: &mut BufWriter<SharedWrite>, t: &dyn Tail) -> io::Result<()> {
    let sock = w.get_ref().stream();
    let len = t.len();
    let mut sent = 0usize;
    while sent < len {
        sock.writable().await?;
        match sock.try_io(Interest::WRITABLE, || t.send_to(sock.as_fd(), sent)) {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if e.raw_os_error()
                    .is_some_and(|c| c == libc::EPIPE || c == libc::ECONNRESET) =>
            {
                return Err(e)
            }
            Err(_) => break,
        }
    }
    if sent < len {
        let mut buf = Vec::new();
        t.read_rest(&mut buf, sent);
        w.write_all(&buf).await?;
    }
    Ok(())
}

/// The SMB Direct sender: posts on the link right away (its queue is bounded by the
/// link's send credits).
pub struct DirectSender {
    link: Arc<dyn DirectLink>,
}

impl MessageSender for DirectSender {
    fn send(&self, buf: Vec<u8>, start: usize) -> Result<(), LinkError> {
        if start > buf.len() {
            return Err(LinkError::TooLarge);
        }
        self.link
            .send_now(buf, start, None)
            .map_err(LinkError::Direct)
    }

    fn try_send(&self, out: Outgoing) -> Result<(), TrySendError> {
        self.link.try_send(out)
    }

    fn send_waiting(&self, mut out: Outgoing) -> BoxFuture<'_, Result<(), LinkError>> {
        out.read_tail_in();
        let Outgoing {
            buf,
            start,
            invalidate,
            hold,
            ..
        } = out;
        self.link.send_owned(buf, start, invalidate, hold)
    }

    fn max_message(&self) -> Option<usize> {
        Some(self.link.params().max_fragmented_send_size as usize)
    }

    fn rdma(&self) -> Option<&Arc<dyn DirectLink>> {
        Some(&self.link)
    }

    fn transport(&self) -> Transport {
        Transport::SmbDirect
    }

    fn peer_addr(&self) -> SocketAddr {
        self.link.peer_addr()
    }

    fn local_addr(&self) -> SocketAddr {
        self.link.local_addr()
    }
}

/// The SMB Direct receiver: messages reassembled by the link.
pub struct DirectReceiver {
    link: Arc<dyn DirectLink>,
    /// A message received but still waiting for budget ([`MessageReceiver::recv_within`]).
    held: Option<InMessage>,
}

impl DirectReceiver {
    /// The message held back, else one the link has queued (taken in place), else
    /// the link's boxed wait: only when nothing has arrived yet.
    async fn next(&mut self) -> Result<InMessage, LinkError> {
        if let Some(m) = self.held.take().or_else(|| self.link.try_recv()) {
            return Ok(m);
        }
        self.link.recv().await.map_err(LinkError::Direct)
    }
}

impl MessageReceiver for DirectReceiver {
    async fn recv(&mut self) -> Result<Option<InMessage>, LinkError> {
        self.next().await.map(Some)
    }

    fn close(&mut self) -> BoxFuture<'_, ()> {
        self.link.close()
    }

    fn stop_reading(&mut self) {
        self.held = None;
    }

    async fn recv_within(
        &mut self,
        budget: &Arc<Semaphore>,
    ) -> Result<Option<Received>, LinkError> {
        if self.held.is_none() {
            self.held = Some(self.next().await?);
        }
        let len = self.held.as_ref().map_or(1, |m| m.len().max(1));
        let n = u32::try_from(len).map_err(|_| LinkError::TooLarge)?;
        let permit = budget
            .clone()
            .acquire_many_owned(n)
            .await
            .map_err(|_| LinkError::Closed)?;
        let msg = self.held.take().ok_or(LinkError::Closed)?;
        Ok(Some(Received {
            msg,
            payload: None,
            permit,
        }))
    }
}

/// An SMB Direct link as a message link's two halves.
pub fn direct(link: Arc<dyn DirectLink>) -> (DirectSender, DirectReceiver) {
    (
        DirectSender { link: link.clone() },
        DirectReceiver { link, held: None },
    )
}

#[cfg(test)]
mod tests {

    /// A reader yields to the writer only on one CPU and only once a run with input
    /// ahead has held its responses for AHEAD_HOLD; the CPU count is not asked before.
    #[test]
    fn a_reader_yields_to_the_writer_only_on_one_cpu_after_the_hold() {
        let t = std::time::Instant::now();
        let later = t + AHEAD_HOLD;
        assert!(yields_to_writer(Some(t), later, || true));
        assert!(!yields_to_writer(Some(t), later, || false));
        assert!(!yields_to_writer(None, later, || true));
        let soon = t + AHEAD_HOLD / 2;
        assert!(!yields_to_writer(Some(t), soon, || panic!(
            "asked too soon"
        )));
        // The check is cheap enough to run once a burst; it answers.
        let _ = one_worker_on_one_cpu();
    }

    /// The reader and the writer share a thread only in a runtime of one worker on
    /// one CPU: a runtime of two workers pinned to one CPU (sized before `taskset -p`)
    /// gets no yield, nor does a thread outside any runtime.
    #[test]
    #[allow(unsafe_code)]
    fn the_yield_needs_one_worker_and_one_cpu() {
        std::thread::spawn(|| {
            assert!(!one_worker_on_one_cpu(), "outside a runtime");
            // SAFETY: sched_getcpu touches no memory; a zeroed cpu_set_t is the empty
            // set, CPU_SET writes one bit of it (the CPU this thread runs on, below
            // CPU_SETSIZE), and sched_setaffinity reads it for this thread only.
            unsafe {
                let cpu = usize::try_from(libc::sched_getcpu()).unwrap();
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                let size = std::mem::size_of::<libc::cpu_set_t>();
                assert_eq!(libc::sched_setaffinity(0, size, &set), 0);
            }
            let one = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            assert!(
                one.block_on(async { one_worker_on_one_cpu() }),
                "one worker, one CPU"
            );
            let two = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
                .unwrap();
            assert!(
                !two.block_on(async { one_worker_on_one_cpu() }),
                "two workers, one CPU"
            );
        })
        .join()
        .unwrap();
    }
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
        assert_eq!(rx.recv().await.unwrap().unwrap().bytes(), b"abc");
        assert_eq!(rx.recv().await.unwrap().unwrap().bytes(), b"z");
        // A frame over the limit is an error.
        peer.write_all(&[0x7f, 0, 0, 0]).await.unwrap();
        assert!(matches!(rx.recv().await, Err(LinkError::Frame(_))));
        drop(peer);

        // The writer ends once the sender is gone.
        drop(tx);
        writer.await.unwrap().ok();
    }

    /// File data sent by the test tail: written from memory (a real one uses sendfile).
    struct MemTail(Vec<u8>);

    impl Tail for MemTail {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn send_to(&self, sock: BorrowedFd<'_>, at: usize) -> io::Result<usize> {
            use std::io::Write;
            std::fs::File::from(sock.try_clone_to_owned()?).write(&self.0[at..])
        }
        fn read_rest(&self, buf: &mut Vec<u8>, at: usize) {
            buf.extend_from_slice(&self.0[at..]);
        }
    }

    /// The server's side: a bounded queue (full, then waited for), a file tail in the
    /// same frame as its message, a permit held until written, and messages received
    /// holding their length from a budget.
    #[tokio::test]
    async fn tcp_link_bounded_with_tails_and_budget() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let mut o = TcpOptions::new(1 << 20, Arc::new(BufPool::new(2)));
        o.queue = Some(1);
        let (tx, mut rx, writer) = tcp_with(c.unwrap(), o);
        let mut peer = s.unwrap().0;
        assert!(tx.sends_file_tails());
        assert_eq!(tx.max_message(), None);

        // One slot: the second message waits until the writer takes the first.
        let budget = Arc::new(Semaphore::new(100));
        let mut first = Outgoing::new(b"head".to_vec());
        first.tail = Some(Box::new(MemTail(b"-tail".to_vec())));
        first.hold = Some(budget.clone().acquire_many_owned(60).await.unwrap());
        assert_eq!(first.len(), 9);
        tx.try_send(first).unwrap();
        let second = match tx.try_send(Outgoing::new(b"next".to_vec())) {
            Err(TrySendError::Full(o)) => o,
            r => panic!("queue not full: {r:?}"),
        };
        let writer = tokio::spawn(writer);
        send_bounded(&tx, second).await.unwrap();
        let mut got = [0u8; 21];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\0\0\0\x09head-tail\0\0\0\x04next");
        // Written: the first message's hold is back in the budget.
        assert_eq!(budget.available_permits(), 100);

        // In: each message holds its length from the budget until dropped.
        peer.write_all(b"\0\0\0\x05hello").await.unwrap();
        let m = rx.recv_within(&budget).await.unwrap().unwrap();
        assert_eq!((m.msg.bytes(), m.payload.is_none()), (&b"hello"[..], true));
        assert_eq!(budget.available_permits(), 95);
        drop(m);
        assert_eq!(budget.available_permits(), 100);
        drop(peer);
        assert!(rx.recv_within(&budget).await.unwrap().is_none());
        drop(tx);
        writer.await.unwrap().ok();
    }

    /// A link whose sender writes at once (the server's), and its peer.
    async fn at_once_link() -> (
        TcpSender,
        TcpReceiver,
        impl Future<Output = std::io::Result<()>> + Send,
        TcpStream,
    ) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let mut o = TcpOptions::new(1 << 20, Arc::new(BufPool::new(2)));
        o.queue = Some(4);
        o.send_at_once = true;
        let (tx, rx, writer) = tcp_with(c.unwrap(), o);
        (tx, rx, writer, s.unwrap().0)
    }

    /// A frame of `len` bytes, each `tag`.
    fn framed(tag: u8, len: usize) -> Vec<u8> {
        let mut f = (len as u32).to_be_bytes().to_vec();
        f.resize(4 + len, tag);
        f
    }

    /// Waits until the writer has handed every queued message to the socket (bounded: a
    /// writer that never does fails the test).
    async fn all_written(tx: &TcpSender) {
        tokio::time::timeout(std::time::Duration::from_secs(20), async {
            while *tx.side.lock() != 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the writer never finished");
    }

    /// Reads `want.len()` bytes from `peer` (bounded: a test that would hang fails).
    async fn expect(peer: &mut TcpStream, want: &[u8]) {
        let mut got = vec![0u8; want.len()];
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            peer.read_exact(&mut got),
        )
        .await
        .expect("the bytes never came")
        .unwrap();
        assert!(got == want, "bytes differ");
    }

    /// With nothing queued a message goes to the socket at once (its writer never
    /// runs); once a message with a file tail is queued, every message after it
    /// waits behind it, and all leave in the order they were sent.
    #[tokio::test]
    async fn at_once_sends_never_overtake_queued_messages() {
        let (tx, _rx, writer, mut peer) = at_once_link().await;
        tx.try_send(Outgoing::new(vec![b'a'; 10])).unwrap();
        expect(&mut peer, &framed(b'a', 10)).await;
        assert_eq!(*tx.side.lock(), 0);

        let mut tailed = Outgoing::new(b"head".to_vec());
        tailed.tail = Some(Box::new(MemTail(b"-tail".to_vec())));
        tx.try_send(tailed).unwrap();
        tx.try_send(Outgoing::new(vec![b'c'; 7])).unwrap();
        // In-memory data from the client's side is queued too.
        let mut client = Outgoing::new(b"w".to_vec());
        client.tail = Some(Box::new(bytes::Bytes::from_static(b"data")));
        tx.try_send(client).unwrap();
        tx.try_send(Outgoing::new(vec![b'd'; 3])).unwrap();
        assert_eq!(*tx.side.lock(), 4, "all four wait for the writer");
        let writer = tokio::spawn(writer);
        let mut want = b"\0\0\0\x09head-tail".to_vec();
        want.extend(framed(b'c', 7));
        want.extend_from_slice(b"\0\0\0\x05wdata");
        want.extend(framed(b'd', 3));
        expect(&mut peer, &want).await;
        // Written: the next message goes at once again.
        all_written(&tx).await;
        tx.try_send(Outgoing::new(vec![b'e'; 5])).unwrap();
        expect(&mut peer, &framed(b'e', 5)).await;
        drop(tx);
        writer.await.unwrap().unwrap();
    }

    /// A whole next request that came with the last one's read (carried over from a
    /// length prefix read after a large frame, the read buffer empty) counts as input
    /// ahead: the response waits for the writer, to leave with the next one's; after
    /// the last request responses go at once again.
    #[tokio::test]
    async fn a_carried_whole_frame_is_input_ahead() {
        let (tx, mut rx, writer, mut peer) = at_once_link().await;
        // Larger than the read buffer: its end comes straight from the socket, and
        // the next prefix is read with what follows it (both small frames).
        let mut all = framed(b'L', 200_000);
        all.extend(framed(b's', 10));
        all.extend(framed(b't', 10));
        peer.write_all(&all).await.unwrap();
        assert_eq!(rx.recv().await.unwrap().unwrap().len(), 200_000);
        assert_eq!(rx.recv().await.unwrap().unwrap().bytes(), [b's'; 10]);
        assert!(rx.rd.buffer().is_empty());
        assert_eq!(rx.frames.carried(), &framed(b't', 10)[..]);
        tx.try_send(Outgoing::new(vec![b'a'; 4])).unwrap();
        assert_eq!(*tx.side.lock(), 1, "held: a request is ahead");
        assert_eq!(rx.recv().await.unwrap().unwrap().bytes(), [b't'; 10]);
        let writer = tokio::spawn(writer);
        expect(&mut peer, &framed(b'a', 4)).await;
        all_written(&tx).await;
        tx.try_send(Outgoing::new(vec![b'b'; 4])).unwrap();
        assert_eq!(*tx.side.lock(), 0, "nothing ahead: sent at once");
        expect(&mut peer, &framed(b'b', 4)).await;
        drop(tx);
        writer.await.unwrap().unwrap();
    }

    /// The writer's end shuts the socket's sending side even while a sender lives (the
    /// client closes a connection by aborting its tasks): the peer sees the end of the
    /// stream, and the sender's messages fail.
    #[tokio::test]
    async fn a_dropped_writer_ends_the_stream_while_senders_live() {
        let (tx, _rx, writer, mut peer) = at_once_link().await;
        tx.try_send(Outgoing::new(vec![b'a'; 3])).unwrap();
        drop(writer);
        let mut got = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            peer.read_to_end(&mut got),
        )
        .await
        .expect("the stream never ended")
        .unwrap();
        assert_eq!(got, framed(b'a', 3));
        assert!(matches!(
            tx.try_send(Outgoing::new(vec![b'b'; 3])),
            Err(TrySendError::Failed(LinkError::Closed))
        ));
    }

    /// A peer that stops reading: sending never waits, what the socket does not take
    /// (the rest of a message it took in part, and every message after it) is queued,
    /// and once the peer reads again every byte arrives once, in order. A hold is kept
    /// until its message is written.
    #[tokio::test]
    async fn at_once_falls_back_to_the_queue_when_the_socket_is_full() {
        let (tx, _rx, writer, mut peer) = at_once_link().await;
        let budget = Arc::new(Semaphore::new(1000));
        let msg = |i: usize| vec![(i % 251) as u8; 100_000 + i];
        let mut want = Vec::new();
        let mut i = 0;
        // Enough to fill any loopback socket's buffers, sent without a reader.
        while want.len() < 64 << 20 {
            let mut out = Outgoing::new(msg(i));
            out.hold = Some(budget.clone().acquire_owned().await.unwrap());
            want.extend(framed((i % 251) as u8, 100_000 + i));
            // Never waits (at most the queue's 4 slots are taken: the loop ends then).
            tx.try_send(out).unwrap();
            i += 1;
            if *tx.side.lock() >= 4 {
                break;
            }
        }
        let queued = *tx.side.lock();
        assert!(queued > 0, "the socket never filled");
        assert!(budget.available_permits() < 1000, "queued holds are kept");
        let writer = tokio::spawn(writer);
        expect(&mut peer, &want).await;
        all_written(&tx).await;
        assert_eq!(budget.available_permits(), 1000);
        drop(tx);
        writer.await.unwrap().unwrap();
    }

    /// `send` (the client's: the message behind room for its prefix) writes at once
    /// too: with nothing queued the message is on the wire before the writer ever
    /// runs; behind a queued message it waits its turn; a socket that fills takes the
    /// rest through the writer, every byte once and in order; once the writer is gone
    /// sends fail.
    #[tokio::test]
    async fn sends_with_prefix_room_go_at_once_in_order() {
        let (tx, _rx, writer, mut peer) = at_once_link().await;
        let roomy = |tag: u8, len: usize| {
            let mut b = vec![0xee; PREFIX_ROOM + len];
            b[PREFIX_ROOM..].fill(tag);
            b
        };
        tx.send(roomy(b'a', 10), PREFIX_ROOM).unwrap();
        expect(&mut peer, &framed(b'a', 10)).await;
        assert_eq!(*tx.side.lock(), 0, "sent without the writer");

        // Enough to fill any loopback socket's buffers while the writer does not run:
        // the message the socket took in part goes to the queue with the rest.
        let mut want = Vec::new();
        let mut i = 0;
        while *tx.side.lock() == 0 {
            let len = 100_000 + i;
            tx.send(roomy((i % 251) as u8, len), PREFIX_ROOM).unwrap();
            want.extend(framed((i % 251) as u8, len));
            i += 1;
            assert!(want.len() < 256 << 20, "the socket never filled");
        }
        let mut tailed = Outgoing::new(b"head".to_vec());
        tailed.tail = Some(Box::new(MemTail(b"-tail".to_vec())));
        tx.try_send(tailed).unwrap();
        tx.send(roomy(b'b', 6), PREFIX_ROOM).unwrap();
        assert_eq!(*tx.side.lock(), 3, "later messages wait behind the rest");
        want.extend_from_slice(b"\0\0\0\x09head-tail");
        want.extend(framed(b'b', 6));
        let writer = tokio::spawn(writer);
        expect(&mut peer, &want).await;
        all_written(&tx).await;
        tx.send(roomy(b'c', 3), PREFIX_ROOM).unwrap();
        expect(&mut peer, &framed(b'c', 3)).await;
        assert_eq!(*tx.side.lock(), 0);
        writer.abort();
        let _ = writer.await;
        assert!(matches!(
            tx.send(roomy(b'd', 3), PREFIX_ROOM),
            Err(LinkError::Closed)
        ));
    }

    /// The peer goes away while messages are queued behind one sent in part: the
    /// writer ends with the error, nothing waits, and later sends fail.
    #[tokio::test]
    async fn at_once_then_disconnect_mid_send() {
        let (tx, _rx, writer, mut peer) = at_once_link().await;
        let mut first = vec![0u8; 16];
        while *tx.side.lock() == 0 {
            tx.try_send(Outgoing::new(vec![7; 1 << 20])).unwrap();
        }
        // Some of it arrived; then the peer closes with data unread (a reset).
        peer.read_exact(&mut first).await.unwrap();
        drop(peer);
        let r = tokio::time::timeout(std::time::Duration::from_secs(20), writer)
            .await
            .expect("the writer never ended");
        assert!(r.is_err(), "the writer ends with the socket's error");
        let mut failed = false;
        for _ in 0..4 {
            match tx.try_send(Outgoing::new(vec![1; 10])) {
                Err(TrySendError::Failed(LinkError::Closed)) => failed = true,
                Err(e) => panic!("{e:?}"),
                Ok(()) => {}
            }
        }
        assert!(failed, "sends on a dead link fail");
    }

    /// Data in memory as a tail (a client's WRITE data): sent in the same frame as its
    /// message, after small messages still buffered and before the next, byte for byte
    /// also when larger than the socket takes at once, and read in whole where a link
    /// cannot send tails.
    #[tokio::test]
    async fn memory_tails_go_in_the_frame_of_their_message() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (tx, _rx, writer) = tcp(c.unwrap(), 16 << 20, Arc::new(BufPool::new(2)));
        let mut peer = s.unwrap().0;
        let data = bytes::Bytes::from(
            (0..3_000_000u32)
                .map(|i| (i * 13) as u8)
                .collect::<Vec<u8>>(),
        );
        let mut small = vec![0; 4];
        small.extend_from_slice(b"before");
        tx.send(small, 4).unwrap();
        let mut out = Outgoing::new(b"....fields".to_vec());
        out.start = 4;
        out.tail = Some(Box::new(data.slice(1..)));
        assert_eq!(out.len(), 6 + data.len() - 1);
        tx.try_send(out).unwrap();
        let mut after = vec![0; 4];
        after.extend_from_slice(b"after");
        tx.send(after, 4).unwrap();
        let writer = tokio::spawn(writer);
        let mut want = b"\0\0\0\x06before".to_vec();
        want.extend_from_slice(&((6 + data.len() - 1) as u32).to_be_bytes());
        want.extend_from_slice(b"fields");
        want.extend_from_slice(&data[1..]);
        want.extend_from_slice(b"\0\0\0\x05after");
        let mut got = vec![0u8; want.len()];
        peer.read_exact(&mut got).await.unwrap();
        assert!(got == want);
        drop(tx);
        writer.await.unwrap().ok();

        // Read in where the tail cannot be sent beside the message.
        let mut o = Outgoing::new(b"m".to_vec());
        o.tail = Some(Box::new(bytes::Bytes::from_static(b"0123456789")));
        o.read_tail_in();
        assert_eq!(
            (o.buf.as_slice(), o.tail.is_none()),
            (&b"m0123456789"[..], true)
        );
        let t: &dyn Tail = &bytes::Bytes::from_static(b"abc");
        assert_eq!(t.in_memory(), Some(&b"abc"[..]));
    }
}
