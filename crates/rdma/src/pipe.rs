//! A pipe for `splice(2)`: the one wrapper of `pipe2`, `F_SETPIPE_SZ` and the moves
//! between a pipe and a socket that the stack needs (soft-iWARP's output, where the
//! FPDUs' headers and their payloads from a file meet in a pipe and go to the socket
//! in one splice; the TCP WRITE path's socket-to-file splice in smbx-transport).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A pipe's two ends (both non-blocking, close-on-exec) and the size the kernel gave it.
#[derive(Debug)]
pub struct PipeEnds {
    rd: OwnedFd,
    wr: OwnedFd,
    size: usize,
}

fn ret(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl PipeEnds {
    /// A new pipe of the kernel's default size.
    pub fn new() -> io::Result<PipeEnds> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_GETPIPE_SZ on a pipe we own reads nothing from us.
        let size = unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_GETPIPE_SZ) };
        Ok(PipeEnds {
            rd,
            wr,
            size: usize::try_from(size).unwrap_or(0),
        })
    }

    /// Grows the pipe to hold `bytes` (best effort: what was asked, else the most an
    /// unprivileged process may ask for, 1 MiB by default; a refusal leaves it as it was).
    pub fn grow(&mut self, bytes: usize) {
        if self.size >= bytes {
            return;
        }
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

    /// The pipe's size in bytes (as the kernel counts it: a buffer of up to one page
    /// per write or spliced page, so small writes fill it sooner than their bytes say).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes the kernel holds in the pipe (`None` if it cannot tell).
    pub fn queued(&self) -> Option<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int into `n`, a live stack variable.
        let r = unsafe { libc::ioctl(self.rd.as_raw_fd(), libc::FIONREAD, &mut n) };
        (r == 0).then_some(n as usize)
    }

    /// The read end.
    pub fn reader(&self) -> BorrowedFd<'_> {
        self.rd.as_fd()
    }

    /// The write end.
    pub fn writer(&self) -> BorrowedFd<'_> {
        self.wr.as_fd()
    }

    /// Copies what fits of `iov` into the pipe without waiting (`writev`); `WouldBlock`
    /// when it is full.
    pub fn write_in(&self, iov: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let cnt = libc::c_int::try_from(iov.len().min(1024)).unwrap_or(1024);
        // SAFETY: IoSlice is ABI-compatible with iovec; writev only reads the `cnt`
        // slices, all live for the call; the descriptor is open.
        ret(unsafe { libc::writev(self.wr.as_raw_fd(), iov.as_ptr().cast(), cnt) })
    }

    /// Moves up to `n` bytes from the pipe into the socket `sock` without waiting
    /// (`splice`: the pipe's pages go by reference); `WouldBlock` when the socket
    /// takes nothing now.
    pub fn splice_out(&self, sock: BorrowedFd<'_>, n: usize) -> io::Result<usize> {
        // SAFETY: both descriptors are open for the call; null offsets (neither end is
        // seekable).
        ret(unsafe {
            libc::splice(
                self.rd.as_raw_fd(),
                std::ptr::null_mut(),
                sock.as_raw_fd(),
                std::ptr::null_mut(),
                n,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        })
    }

    /// Moves up to `max` bytes from the socket `sock` into the pipe without waiting;
    /// `WouldBlock` when the socket has nothing queued or the pipe is full.
    pub fn splice_in(&self, sock: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        // SAFETY: both descriptors are open for the call; null offsets (neither end is
        // seekable).
        ret(unsafe {
            libc::splice(
                sock.as_raw_fd(),
                std::ptr::null_mut(),
                self.wr.as_raw_fd(),
                std::ptr::null_mut(),
                max,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        })
    }

    /// Reads up to `dst.len()` bytes out of the pipe; `WouldBlock` when it is empty.
    pub fn read_out(&self, dst: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
        // SAFETY: read writes at most `dst.len()` bytes into `dst`, live for the call.
        ret(unsafe { libc::read(self.rd.as_raw_fd(), dst.as_mut_ptr().cast(), dst.len()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// Bytes written in come out in order through a socket, a full pipe says
    /// WouldBlock rather than waiting, and an empty one the same on the way out.
    #[test]
    fn bytes_go_through_in_order_and_nothing_waits() {
        let mut p = PipeEnds::new().unwrap();
        p.grow(1 << 20);
        assert!(p.size() >= 65536);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
        let mut put = 0;
        loop {
            match p.write_in(&[io::IoSlice::new(&data[put..])]) {
                Ok(k) => put += k,
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                    break;
                }
            }
            if put == data.len() {
                break;
            }
        }
        assert!(put > 0);
        assert_eq!(p.queued(), Some(put));
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        let mut out = 0;
        while out < put {
            match p.splice_out(a.as_fd(), put - out) {
                Ok(k) => out += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(p.queued(), Some(0));
        let mut buf = [std::mem::MaybeUninit::new(0u8); 8];
        assert_eq!(
            p.read_out(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(a);
        assert_eq!(reader.join().unwrap(), &data[..put]);
    }
}
