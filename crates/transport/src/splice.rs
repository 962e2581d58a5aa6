//! WRITE payloads moved from the socket into a pipe with `splice(2)`: the kernel hands
//! the received pages to the pipe instead of copying them into user space, and the
//! file system takes them from there (`smbx_vfs::Handle::write_from_pipe`): one copy,
//! into the page cache, where reading the payload into memory and writing it out made
//! two.
//!
//! [`crate::tcp::FrameReader::splice_writes`] decides which frames qualify (a lone,
//! unsigned, unencrypted WRITE whose data ends with the frame, see [`spliceable_write`])
//! and returns their data as a [`SplicedPayload`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use smbx_wire::header::{FLAGS_SIGNED, PROTOCOL_ID};
use smbx_wire::rw::{WriteRequest, CHANNEL_NONE};
use smbx_wire::{Command, Header, HEADER_SIZE};

/// Bytes of a WRITE request before its data: the header and the fixed fields.
pub const WRITE_HEAD: usize = HEADER_SIZE + 48;

/// The most a pipe is asked to hold (the kernel's default `pipe-max-size` for an
/// unprivileged process is 1 MiB; root may ask for more).
pub const PIPE_MAX: usize = 4 << 20;

/// Most pipes one reader keeps alive at once (WRITEs received and not yet written):
/// beyond it, WRITE data is read into memory, so a client cannot make the server hold
/// two descriptors per request it sends.
pub const MAX_PIPES: usize = 16;

/// A pipe's two ends (both non-blocking) and the size the kernel gave it.
#[derive(Debug)]
struct Ends {
    rd: OwnedFd,
    wr: OwnedFd,
    size: usize,
}

impl Ends {
    /// A new pipe.
    #[allow(unsafe_code)]
    fn new() -> io::Result<Ends> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Ends { rd, wr, size: 0 })
    }

    /// Grows the pipe to hold `bytes` (best effort: the kernel caps what an
    /// unprivileged process may ask for; what does not fit is read into memory).
    #[allow(unsafe_code)]
    fn grow(&mut self, bytes: usize) {
        if self.size >= bytes {
            return;
        }
        // What was asked, else the most an unprivileged process may ask for.
        for size in [bytes, 1 << 20] {
            let want = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
            // SAFETY: F_SETPIPE_SZ on a pipe we own; a refusal leaves the size as it was.
            let got = unsafe { libc::fcntl(self.wr.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
            if got >= 0 {
                self.size = got as usize;
                return;
            }
        }
    }

    /// Bytes the kernel holds in the pipe (`None` if it cannot tell).
    #[allow(unsafe_code)]
    fn queued(&self) -> Option<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int into `n`, a live stack variable.
        let r = unsafe { libc::ioctl(self.rd.as_raw_fd(), libc::FIONREAD, &mut n) };
        (r == 0).then_some(n as usize)
    }
}

/// The pipes of one reader: how many are alive (handed out with frames and not yet
/// dropped), and the emptied ones kept for the next WRITEs, so a pipe is made, sized
/// and closed once rather than once per WRITE (four system calls and a ring of pipe
/// buffers each).
#[derive(Debug, Default)]
pub struct Pipes {
    live: AtomicUsize,
    idle: std::sync::Mutex<Vec<Ends>>,
}

impl Pipes {
    /// Pipes alive (handed out and not yet dropped).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Emptied pipes kept for reuse.
    pub fn idle(&self) -> usize {
        self.idle.lock().map_or(0, |v| v.len())
    }
}

/// A pipe holding (part of) a WRITE's data, both ends non-blocking.
#[derive(Debug)]
pub struct Pipe {
    ends: Option<Ends>,
    /// Bytes spliced in and not yet taken out.
    len: AtomicUsize,
    /// The pipes this one is counted in and goes back to (see [`Pipe::counted`]).
    home: Option<(Arc<Pipes>, usize)>,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let Some((home, max)) = &self.home else {
            return;
        };
        home.live.fetch_sub(1, Ordering::Relaxed);
        // Only a pipe the kernel says is empty is kept: stale bytes in a reused pipe
        // would land in the next WRITE's file.
        if let Some(ends) = self.ends.take() {
            if self.is_empty() && ends.queued() == Some(0) {
                if let Ok(mut idle) = home.idle.lock() {
                    if idle.len() < *max {
                        idle.push(ends);
                    }
                }
            }
        }
    }
}

impl Pipe {
    fn ends(&self) -> &Ends {
        // Present until the pipe is dropped.
        self.ends.as_ref().expect("a live pipe has its ends")
    }

    /// A pipe sized for `bytes` (best effort: the kernel caps what an unprivileged
    /// process may ask for; what does not fit is read into memory instead).
    pub fn with_capacity(bytes: usize) -> io::Result<Pipe> {
        let mut ends = Ends::new()?;
        ends.grow(bytes);
        Ok(Pipe {
            ends: Some(ends),
            len: AtomicUsize::new(0),
            home: None,
        })
    }

    /// A pipe as [`Pipe::with_capacity`], an emptied one of `pipes` if it has one,
    /// counted there while it is alive and given back once dropped empty; `None` when
    /// `pipes` already counts `max` alive.
    pub fn counted(bytes: usize, pipes: &Arc<Pipes>, max: usize) -> Option<Pipe> {
        pipes
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        let reused = pipes.idle.lock().ok().and_then(|mut v| v.pop());
        let ends = match reused {
            Some(e) => Ok(e),
            None => Ends::new(),
        };
        match ends {
            Ok(mut ends) => {
                ends.grow(bytes);
                Some(Pipe {
                    ends: Some(ends),
                    len: AtomicUsize::new(0),
                    home: Some((pipes.clone(), max)),
                })
            }
            Err(_) => {
                pipes.live.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Bytes in the pipe.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// True when the pipe holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The read end, for a file system to splice from.
    pub fn reader(&self) -> BorrowedFd<'_> {
        self.ends().rd.as_fd()
    }

    /// Moves up to `max` bytes from `sock` into the pipe without waiting; `WouldBlock`
    /// when the socket has nothing queued or the pipe is full.
    #[allow(unsafe_code)]
    pub fn splice_from(&self, sock: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        // SAFETY: both descriptors are open for the call; null offsets (neither end
        // is seekable).
        let n = unsafe {
            libc::splice(
                sock.as_raw_fd(),
                std::ptr::null_mut(),
                self.ends().wr.as_raw_fd(),
                std::ptr::null_mut(),
                max,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.len.fetch_add(n as usize, Ordering::Relaxed);
        Ok(n as usize)
    }

    /// Appends everything in the pipe to `buf` (the path for files that cannot take a
    /// splice: streams).
    #[allow(unsafe_code)]
    pub fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<()> {
        buf.reserve(self.len());
        while !self.is_empty() {
            let spare = &mut buf.spare_capacity_mut()[..self.len()];
            // SAFETY: read writes at most `spare.len()` bytes into the spare capacity
            // it points to, which `reserve` made room for.
            let n = unsafe {
                libc::read(
                    self.ends().rd.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            // SAFETY: the kernel initialised those `n` bytes just past the length.
            unsafe { buf.set_len(buf.len() + n as usize) };
            self.consumed(n as usize);
        }
        Ok(())
    }

    /// Records that `n` bytes were taken out through [`Pipe::reader`].
    pub fn consumed(&self, n: usize) {
        let _ = self
            .len
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l.saturating_sub(n))
            });
    }
}

/// True when `sock` has bytes queued (so a splice that would block was held back by a
/// full pipe, not by an empty socket).
#[allow(unsafe_code)]
pub(crate) fn has_queued(sock: BorrowedFd<'_>) -> bool {
    let mut b = 0u8;
    // SAFETY: recv peeks at most one byte into `b`, a live stack byte.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            (&mut b as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}

/// The data of a WRITE that did not go through memory: after the part already in the
/// message (`WriteRequest::data` of [`WriteRequest::decode_split`]), the bytes in
/// `pipe`, then `tail` (what arrived after the pipe was full).
#[derive(Debug)]
pub struct SplicedPayload {
    /// Spliced from the socket.
    pub pipe: Pipe,
    /// Read into memory once the pipe could take no more.
    pub tail: Vec<u8>,
}

impl SplicedPayload {
    /// Bytes it holds (pipe and tail).
    pub fn len(&self) -> usize {
        self.pipe.len() + self.tail.len()
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole payload in memory: `head` (the part in the message), then the pipe's
    /// bytes, then the tail.
    pub fn gather(&self, head: &[u8]) -> io::Result<Vec<u8>> {
        let mut v = Vec::with_capacity(head.len() + self.len());
        v.extend_from_slice(head);
        self.pipe.read_into(&mut v)?;
        v.extend_from_slice(&self.tail);
        Ok(v)
    }
}

/// Whether a frame of `frame_len` bytes that starts with `head` (at least
/// [`WRITE_HEAD`] bytes) may have its data spliced: a plain SMB2 WRITE, not signed
/// (verifying needs the bytes), not part of a compound, no RDMA channel, its data
/// starting right after the fixed fields and ending with the frame.
pub fn spliceable_write(head: &[u8], frame_len: usize) -> bool {
    let Some(head) = head.get(..WRITE_HEAD) else {
        return false;
    };
    if head[..4] != PROTOCOL_ID[..] || frame_len <= WRITE_HEAD {
        return false;
    }
    let Ok(h) = Header::decode(head) else {
        return false;
    };
    if h.cmd() != Some(Command::Write)
        || h.is_response()
        || h.flags & FLAGS_SIGNED != 0
        || h.next_command != 0
    {
        return false;
    }
    match WriteRequest::decode_split(head, frame_len - WRITE_HEAD) {
        Ok(w) => w.channel == CHANNEL_NONE && w.data.is_empty(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::Writer;

    fn write_frame(data_len: usize, f: impl FnOnce(&mut Header, &mut Vec<u8>)) -> Vec<u8> {
        let mut h = Header {
            command: Command::Write as u16,
            ..Default::default()
        };
        let data = vec![7u8; data_len];
        let mut body = WriteRequest {
            data: &data,
            length: data_len as u32,
            ..Default::default()
        }
        .encode();
        f(&mut h, &mut body);
        let mut w = Writer::with_capacity(HEADER_SIZE);
        h.encode(&mut w);
        let mut m = w.into_vec();
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn only_lone_plain_writes_qualify() {
        let ok = write_frame(100_000, |_, _| {});
        assert!(spliceable_write(&ok[..WRITE_HEAD], ok.len()));
        // The head alone is not enough to tell for a frame that is only the head.
        assert!(!spliceable_write(&ok[..WRITE_HEAD - 1], ok.len()));
        // Signed, compounded, a READ, a Length that does not end with the frame.
        let signed = write_frame(100_000, |h, _| h.flags |= FLAGS_SIGNED);
        assert!(!spliceable_write(&signed, signed.len()));
        let chained = write_frame(100_000, |h, _| h.next_command = 128);
        assert!(!spliceable_write(&chained, chained.len()));
        let read = write_frame(100_000, |h, _| h.command = Command::Read as u16);
        assert!(!spliceable_write(&read, read.len()));
        assert!(!spliceable_write(&ok, ok.len() + 1));
        assert!(!spliceable_write(&ok, ok.len() - 1));
        let long = write_frame(100_000, |_, b| {
            b[4..8].copy_from_slice(&200_000u32.to_le_bytes())
        });
        assert!(!spliceable_write(&long, long.len()));
        // Data that does not start right after the fixed fields.
        let gap = write_frame(100_000, |_, b| {
            b[2..4].copy_from_slice(&0x78u16.to_le_bytes())
        });
        assert!(!spliceable_write(&gap, gap.len()));
        // A transform.
        let mut sealed = ok.clone();
        sealed[0] = 0xfd;
        assert!(!spliceable_write(&sealed, sealed.len()));
    }

    #[test]
    fn live_pipes_are_bounded() {
        let home = Arc::new(Pipes::default());
        let pipes: Vec<Pipe> = (0..3)
            .filter_map(|_| Pipe::counted(4096, &home, 3))
            .collect();
        assert_eq!((pipes.len(), home.live()), (3, 3));
        assert!(Pipe::counted(4096, &home, 3).is_none());
        drop(pipes);
        assert_eq!((home.live(), home.idle()), (0, 3));
        assert!(Pipe::counted(4096, &home, 3).is_some());
        assert_eq!(home.live(), 0, "dropped at once");
    }

    /// An emptied pipe is used again (the same descriptors, grown when a WRITE needs
    /// more); one dropped with bytes still in it is closed, never reused.
    #[test]
    fn emptied_pipes_are_reused_and_others_closed() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let home = Arc::new(Pipes::default());
        let (mut a, b) = UnixStream::pair().unwrap();
        let p = Pipe::counted(4096, &home, 4).unwrap();
        let fd = p.reader().as_raw_fd();
        a.write_all(b"abcdef").unwrap();
        assert_eq!(p.splice_from(b.as_fd(), 6).unwrap(), 6);
        let mut v = Vec::new();
        p.read_into(&mut v).unwrap();
        assert_eq!(v, b"abcdef");
        drop(p);
        assert_eq!(home.idle(), 1);
        let p = Pipe::counted(512 * 1024, &home, 4).unwrap();
        assert_eq!(p.reader().as_raw_fd(), fd, "the same pipe");
        assert!(p.ends().size >= 512 * 1024 || p.ends().size >= 1 << 20);
        assert_eq!(home.idle(), 0);
        // Left with bytes in it (its accounting says so, and the kernel too).
        a.write_all(b"xyz").unwrap();
        assert_eq!(p.splice_from(b.as_fd(), 3).unwrap(), 3);
        drop(p);
        assert_eq!((home.live(), home.idle()), (0, 0));
        // The kernel holds bytes the accounting lost: not reused either.
        let p = Pipe::counted(4096, &home, 4).unwrap();
        a.write_all(b"q").unwrap();
        assert_eq!(p.splice_from(b.as_fd(), 1).unwrap(), 1);
        p.consumed(1);
        drop(p);
        assert_eq!(home.idle(), 0);
    }

    #[test]
    fn pipe_round_trip_through_a_socket() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let (mut a, b) = UnixStream::pair().unwrap();
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
        a.write_all(&data).unwrap();
        let p = Pipe::with_capacity(256 * 1024).unwrap();
        let mut got = 0;
        while got < data.len() {
            got += p.splice_from(b.as_fd(), data.len() - got).unwrap();
        }
        assert_eq!(p.len(), data.len());
        let sp = SplicedPayload {
            pipe: p,
            tail: b"tail".to_vec(),
        };
        let all = sp.gather(b"head").unwrap();
        assert_eq!(&all[..4], b"head");
        assert_eq!(&all[4..4 + data.len()], &data[..]);
        assert_eq!(&all[4 + data.len()..], b"tail");
        assert!(sp.pipe.is_empty());
        // Nothing queued: would block.
        let e = sp.pipe.splice_from(b.as_fd(), 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(!has_queued(b.as_fd()));
    }
}
