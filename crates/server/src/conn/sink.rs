//! WRITE data that an RDMA Read brings in over SMB Direct, written into the file as
//! it arrives: a link whose provider reads into files (soft-iWARP with CRC off)
//! splices it from its socket into a pipe and from the pipe into the page cache
//! ([`smbx_vfs::Handle::write_from_pipe`]), one copy where reading it into a
//! registered buffer and writing that out made two. The payloads of consecutive
//! FPDUs gather in the pipe and go into the file together ([`GATHER`] bytes, and
//! whatever is held once the range's last byte is in), one splice into the file
//! for several FPDUs rather than one each.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use smbx_transport::splice::{Pipe, Pipes, MAX_PIPES};
use smbx_wire::NtStatus;

/// How big a sink's pipe is asked to be: a whole FPDU's payload (~64 KiB on
/// loopback) in one splice even when its pages come one to a pipe buffer, and
/// several FPDUs' payloads gathered before they go into the file together.
const SINK_PIPE: usize = 1024 * 1024;

/// The most bytes a sink gathers in its pipe before it splices them into the
/// file: a quarter of what it asks the pipe to hold, so a pipe the kernel gave
/// less room, or whose buffers hold partial pages, still takes the next FPDU
/// (a splice that finds the pipe full anyway writes out what it holds and
/// tries again). One splice into the file per 256 KiB instead of one per FPDU.
const GATHER: usize = SINK_PIPE / 4;

/// The `len` bytes of a file from `offset` that a WRITE's RDMA Read fills.
#[derive(Debug)]
pub(crate) struct WriteSink {
    handle: Arc<smbx_vfs::Handle>,
    offset: u64,
    len: usize,
    pipe: Pipe,
    state: Mutex<State>,
}

/// What a [`WriteSink`] has taken in so far.
#[derive(Debug, Default)]
struct State {
    /// Why the file refused a byte, once it has: the rest of the data is taken off
    /// the socket and dropped, and the WRITE fails with it.
    error: Option<NtStatus>,
    /// Where in the range the pipe's first byte goes (its bytes are contiguous).
    pipe_at: usize,
    /// Bytes taken in (spliced or written): all `len` of them are in the file once
    /// this reaches `len`.
    taken: usize,
}

impl WriteSink {
    /// A sink for `len` bytes of `handle` from `offset`, with a pipe of `pipes`
    /// (`None` when it already counts its most, or no pipe can be made: the WRITE
    /// then reads into a buffer).
    pub(crate) fn new(
        handle: Arc<smbx_vfs::Handle>,
        offset: u64,
        len: usize,
        pipes: &Arc<Pipes>,
    ) -> Option<WriteSink> {
        let pipe = Pipe::counted(SINK_PIPE, pipes, MAX_PIPES)?;
        Some(WriteSink {
            handle,
            offset,
            len,
            pipe,
            state: Mutex::new(State::default()),
        })
    }

    /// Why the file refused a byte, if it did.
    pub(crate) fn error(&self) -> Option<NtStatus> {
        self.state().error
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Splices what the pipe holds into the file (after a failure: drops it).
    fn flush(&self, st: &mut State) {
        let held = self.pipe.len();
        if held == 0 {
            return;
        }
        if st.error.is_none() {
            let off = self.offset + st.pipe_at as u64;
            match crate::handlers::write::write_pipe(&self.handle, &self.pipe, off, held) {
                Ok(_) => return,
                Err(e) => st.error = Some(e),
            }
        }
        self.drain();
    }

    /// Drops what the pipe holds (after a failure).
    fn drain(&self) {
        let mut scratch = Vec::new();
        if self.pipe.read_into(&mut scratch).is_err() {
            self.pipe.consumed(usize::MAX);
        }
    }

    /// Counts `n` more bytes taken in; once they are all, the pipe's go into the
    /// file.
    fn took(&self, st: &mut State, n: usize) {
        st.taken = st.taken.saturating_add(n);
        if st.taken >= self.len || self.pipe.len() >= GATHER {
            self.flush(st);
        }
    }
}

impl smbx_transport::FileSink for WriteSink {
    fn len(&self) -> usize {
        self.len
    }

    fn recv_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> io::Result<usize> {
        let n = n.min(self.len.saturating_sub(at));
        let mut st = self.state();
        // The pipe's bytes go to one place: what is not contiguous with them, or
        // would not fit beside them, waits until they are in the file.
        let held = self.pipe.len();
        if held > 0 && (st.pipe_at + held != at || held + n > GATHER) {
            self.flush(&mut st);
        }
        let k = match self.pipe.splice_from(sock, n) {
            // Full (fewer bytes per pipe buffer than counted on), not the socket
            // empty: out with what it holds, then again.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && !self.pipe.is_empty() => {
                self.flush(&mut st);
                self.pipe.splice_from(sock, n)?
            }
            r => r?,
        };
        if k == 0 {
            return Ok(0);
        }
        if self.pipe.len() == k {
            st.pipe_at = at;
        }
        self.took(&mut st, k);
        Ok(k)
    }

    fn write_part(&self, at: usize, data: &[u8]) {
        let mut st = self.state();
        if st.error.is_none() {
            if let Err(e) = self.handle.write_at(data, self.offset + at as u64) {
                st.error = Some(e);
            }
        }
        self.took(&mut st, data.len());
    }

    fn failed(&self) -> bool {
        self.error().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_transport::FileSink;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(7) % 253) as u8)
            .collect()
    }

    /// A file `f` in a new share, opened for writing (`write`) or reading only.
    fn open(tmp: &tempfile::TempDir, write: bool) -> Arc<smbx_vfs::Handle> {
        std::fs::write(tmp.path().join("f"), [0xeeu8; 16]).unwrap();
        let share = smbx_vfs::Share::open(tmp.path(), Default::default()).unwrap();
        let req = smbx_vfs::CreateRequest {
            want_read: true,
            want_write: write,
            ..Default::default()
        };
        Arc::new(share.create("f", &req).unwrap().0)
    }

    /// A connected pair: the sink's end non-blocking, `data` written into the other
    /// by a thread.
    fn feed(data: Vec<u8>) -> (UnixStream, std::thread::JoinHandle<UnixStream>) {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let t = std::thread::spawn(move || {
            b.write_all(&data).unwrap();
            b
        });
        (a, t)
    }

    /// Takes `n` bytes for byte `at` of the range off `sock` with `recv_part`,
    /// waiting while the socket is empty.
    fn recv(sink: &WriteSink, sock: &UnixStream, mut at: usize, mut n: usize) {
        while n > 0 {
            match sink.recv_part(sock.as_fd(), at, n) {
                Ok(0) => panic!("peer closed"),
                Ok(k) => {
                    at += k;
                    n -= k;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Reads exactly `n` bytes off `sock` (the part an engine read with a header).
    fn read_in(sock: &UnixStream, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        let mut got = 0;
        while got < n {
            match (&*sock).read(&mut v[got..]) {
                Ok(0) => panic!("peer closed"),
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
        v
    }

    /// FPDU-sized parts, each with its first bytes written from memory (as a
    /// payload's head read in with its header) and the rest spliced, gathered and
    /// written out in parts: every byte lands at its offset, none before the range
    /// nor after it, and the bytes behind the range stay on the socket.
    #[test]
    fn gathered_parts_land_at_their_offsets() {
        let tmp = tempfile::tempdir().unwrap();
        let h = open(&tmp, true);
        let len = 5 * GATHER / 2 + 12_345;
        let data = pattern(len);
        let mut sent = data.clone();
        sent.extend_from_slice(b"next");
        let (sock, t) = feed(sent);
        let pipes = Arc::new(Pipes::default());
        let sink = WriteSink::new(h.clone(), 3, len, &pipes).unwrap();
        let (fpdu, head) = (65_000, 100);
        let mut at = 0;
        while at < len {
            let part = fpdu.min(len - at);
            let h = head.min(part);
            sink.write_part(at, &read_in(&sock, h));
            recv(&sink, &sock, at + h, part - h);
            at += part;
        }
        assert!(!sink.failed());
        assert!(sink.pipe.is_empty(), "all of it is in the file");
        assert_eq!(read_in(&sock, 4), b"next");
        t.join().unwrap();
        let file = std::fs::read(tmp.path().join("f")).unwrap();
        assert_eq!(file.len(), 3 + len);
        assert_eq!(&file[..3], &[0xee; 3]);
        assert!(file[3..] == data[..], "the bytes landed at their offsets");
    }

    /// A part that finds the socket empty writes out what the pipe gathered before
    /// it says so: nothing waits in the pipe while the sink waits for the socket.
    #[test]
    fn an_empty_socket_writes_out_what_was_gathered() {
        let tmp = tempfile::tempdir().unwrap();
        let h = open(&tmp, true);
        let data = pattern(1000);
        let (sock, t) = feed(data[..600].to_vec());
        let mut peer = t.join().unwrap();
        let pipes = Arc::new(Pipes::default());
        let sink = WriteSink::new(h, 0, data.len(), &pipes).unwrap();
        recv(&sink, &sock, 0, 600);
        assert_eq!(sink.pipe.len(), 600, "gathered, the range is not complete");
        let e = sink.recv_part(sock.as_fd(), 600, 400).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(sink.pipe.is_empty());
        assert!(std::fs::read(tmp.path().join("f")).unwrap()[..600] == data[..600]);
        peer.write_all(&data[600..]).unwrap();
        recv(&sink, &sock, 600, 400);
        assert!(!sink.failed());
        assert!(std::fs::read(tmp.path().join("f")).unwrap() == data);
    }

    /// A file that refuses the bytes: every byte of the range is still taken off
    /// the socket (the stream stays in step), none lands, and the sink says why.
    #[test]
    fn a_refusing_file_takes_every_byte_and_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let h = open(&tmp, false);
        let len = GATHER + 70_000;
        let mut sent = pattern(len);
        sent.extend_from_slice(b"next");
        let (sock, t) = feed(sent);
        let pipes = Arc::new(Pipes::default());
        let sink = WriteSink::new(h, 0, len, &pipes).unwrap();
        sink.write_part(0, &read_in(&sock, 10));
        recv(&sink, &sock, 10, len - 10);
        assert!(sink.failed());
        assert_eq!(sink.error(), Some(NtStatus::ACCESS_DENIED));
        assert!(sink.pipe.is_empty());
        assert_eq!(read_in(&sock, 4), b"next");
        t.join().unwrap();
        assert_eq!(std::fs::read(tmp.path().join("f")).unwrap(), [0xee; 16]);
    }
}
