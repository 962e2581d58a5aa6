//! The zero-copy paths: file data that is already in the page cache goes
//! from the cache to a socket with `sendfile` (no copy into user space), and
//! reads that must come through memory land in buffers that were never
//! zero-filled; WRITE data spliced from the socket into a pipe goes from the
//! pipe into the file with `splice` (one copy, into the page cache).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use smbx_wire::NtStatus;

use crate::handle::Handle;

/// `cachestat(2)` (Linux 6.5): how much of a range is in the page cache.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

impl Handle {
    /// The bytes a read of `len` at `off` returns, if every page of them is in
    /// the page cache (so sending them cannot wait on the disk); `None` when
    /// some are not, for a stream or a directory, or when the kernel cannot
    /// tell (before Linux 6.5).
    pub fn cached_len(&self, off: u64, len: u64) -> Option<u64> {
        if self.stream.is_some() || self.is_dir || self.opath {
            return None;
        }
        // The size as `lseek(SEEK_END)` reports it (the inode's size and nothing else),
        // where `statx` (what `metadata()` asks) fills and copies out every attribute:
        // ~160 against ~430 ns a call. Handles read and write at explicit offsets, so
        // the file position it moves is never used.
        let size = crate::sys::lseek(self.file.as_fd(), 0, libc::SEEK_END).ok()??;
        let n = len.min(size.saturating_sub(off));
        if n == 0 {
            return Some(0);
        }
        let page = page_size();
        let pages = (off + n).div_ceil(page) - off / page;
        let range = CachestatRange { off, len: n };
        let mut st = Cachestat::default();
        // SAFETY: cachestat reads `range` and writes one `Cachestat` (both
        // live, correctly laid out for the kernel ABI); flags must be 0.
        let rc = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                self.file.as_raw_fd(),
                &range as *const CachestatRange,
                &mut st as *mut Cachestat,
                0u32,
            )
        };
        (rc == 0 && st.nr_cache >= pages).then_some(n)
    }

    /// Sends up to `len` bytes of the file at `off` to the socket `sock` with
    /// `sendfile(2)`; returns the bytes sent (0 at end of file). A socket that
    /// cannot take more now is `WouldBlock`.
    pub fn send_to(&self, sock: BorrowedFd<'_>, off: u64, len: usize) -> io::Result<usize> {
        let mut pos =
            libc::off_t::try_from(off).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: both descriptors are open for the call; `pos` is a live
        // off_t the kernel updates (the file's own offset is not used).
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), self.file.as_raw_fd(), &mut pos, len) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Moves `len` bytes from the pipe `pipe` (whose read end may be non-blocking: the
    /// bytes must already be in it) into the file at `off` with `splice(2)`; returns the
    /// bytes written. NOT_SUPPORTED for a stream, and when the file refuses a splice
    /// before any byte moved (the caller then writes them from memory).
    pub fn write_from_pipe(
        &self,
        pipe: BorrowedFd<'_>,
        off: u64,
        len: usize,
    ) -> Result<usize, NtStatus> {
        if self.stream.is_some() {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        self.check_data()?;
        if !self.is_writable() {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let end = off
            .checked_add(len as u64)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or(NtStatus::INVALID_PARAMETER)?;
        let mut pos = libc::loff_t::try_from(off).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        while (pos as u64) < end {
            let want = (end - pos as u64) as usize;
            // SAFETY: both descriptors are open for the call; `pos` is a live loff_t
            // the kernel advances (the file's own offset is not used).
            let n = unsafe {
                libc::splice(
                    pipe.as_raw_fd(),
                    std::ptr::null_mut(),
                    self.file.as_raw_fd(),
                    &mut pos,
                    want,
                    libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EINVAL) if pos as u64 == off => NtStatus::NOT_SUPPORTED,
                    Some(libc::EBADF) => NtStatus::ACCESS_DENIED,
                    Some(libc::EFBIG) => NtStatus::DISK_FULL,
                    // The pipe ran dry: it held fewer bytes than promised.
                    Some(libc::EAGAIN) => NtStatus::INVALID_PARAMETER,
                    _ => e.into(),
                });
            }
            if n == 0 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
        }
        Ok(len)
    }

    /// Reads up to `len` bytes at `off`, appended to `buf` (whose spare
    /// capacity is never zero-filled first); returns the bytes read.
    pub fn read_append(&self, buf: &mut Vec<u8>, len: usize, off: u64) -> Result<usize, NtStatus> {
        if self.stream.is_some() {
            let start = buf.len();
            buf.resize(start + len, 0);
            let n = self.read_at(&mut buf[start..], off)?;
            buf.truncate(start + n);
            return Ok(n);
        }
        self.check_data()?;
        match self.pread_append(buf, len, off, 0)? {
            Some(n) => Ok(n),
            // Only a read that may not wait gives up.
            None => Err(NtStatus::INTERNAL_ERROR),
        }
    }

    /// [`Handle::read_append`] of data the page cache holds: `Some(bytes read)` when
    /// the whole read completed without waiting for the disk (`preadv2` with
    /// `RWF_NOWAIT`), `None` (and `buf` as it was) when some of it would wait, for a
    /// stream, or when the kernel or file system cannot say: then read it with
    /// [`Handle::read_append`] where waiting is fine.
    pub fn read_append_cached(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        off: u64,
    ) -> Result<Option<usize>, NtStatus> {
        if self.stream.is_some() {
            return Ok(None);
        }
        self.check_data()?;
        self.pread_append(buf, len, off, libc::RWF_NOWAIT)
    }

    /// [`Handle::read_at`] of data the page cache holds, into `buf`: `Some(bytes read)`
    /// (fewer than `buf.len()` only at the end of the file) when the whole read
    /// completed without waiting for the disk (`preadv2` with `RWF_NOWAIT`), `None`
    /// when some of it would wait, for a stream, or when the kernel or file system
    /// cannot say (`buf` then holds whatever was read): then read it with
    /// [`Handle::read_at`] where waiting is fine.
    pub fn read_at_cached(&self, buf: &mut [u8], off: u64) -> Result<Option<usize>, NtStatus> {
        if self.stream.is_some() {
            return Ok(None);
        }
        self.check_data()?;
        // SAFETY: the same memory seen as possibly uninitialised bytes; only bytes
        // (the kernel's) are ever written through it.
        let dst = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
        self.pread_into(dst, off, libc::RWF_NOWAIT)
    }

    /// Reads up to `len` bytes at `off` into the spare capacity of `buf` with
    /// `preadv2(flags)` until `len` bytes or the end of the file; `None` when a read
    /// with `RWF_NOWAIT` would wait (or the flag is refused). `buf`'s length changes
    /// only when it returns `Some`.
    fn pread_append(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        off: u64,
        flags: libc::c_int,
    ) -> Result<Option<usize>, NtStatus> {
        buf.reserve(len);
        let start = buf.len();
        let r = self.pread_into(&mut buf.spare_capacity_mut()[..len], off, flags)?;
        if let Some(n) = r {
            // SAFETY: the kernel initialised those `n` bytes just past the
            // current length.
            unsafe { buf.set_len(start + n) };
        }
        Ok(r)
    }

    /// Reads into `dst` at `off` with `preadv2(flags)` until it is full or the end of
    /// the file: `Some(bytes read)` (those bytes are initialised), `None` when a read
    /// with `RWF_NOWAIT` would wait (or the flag is refused).
    fn pread_into(
        &self,
        dst: &mut [MaybeUninit<u8>],
        off: u64,
        flags: libc::c_int,
    ) -> Result<Option<usize>, NtStatus> {
        let len = dst.len();
        let mut done = 0;
        while done < len {
            let pos = off
                .checked_add(done as u64)
                .and_then(|p| libc::off_t::try_from(p).ok())
                .ok_or(NtStatus::INVALID_PARAMETER)?;
            let spare = &mut dst[done..];
            let iov = libc::iovec {
                iov_base: spare.as_mut_ptr().cast(),
                iov_len: spare.len(),
            };
            // SAFETY: preadv2 writes at most `iov_len` bytes into the one iovec, which
            // points into `dst`; the descriptor is open for the call.
            let n = unsafe { libc::preadv2(self.file.as_raw_fd(), &iov, 1, pos, flags) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)
                        if flags & libc::RWF_NOWAIT != 0 =>
                    {
                        return Ok(None)
                    }
                    _ => return Err(e.into()),
                }
            }
            if n == 0 {
                break;
            }
            done += n as usize;
        }
        Ok(Some(done))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    use crate::{CreateRequest, Share, ShareOptions};

    fn share_with(data: &[u8]) -> (tempfile::TempDir, crate::Handle) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), data).unwrap();
        let s = Share::open(tmp.path(), ShareOptions::default()).unwrap();
        let req = CreateRequest {
            want_read: true,
            ..Default::default()
        };
        let (h, _) = s.create("f", &req).unwrap();
        (tmp, h)
    }

    /// The named stream `f:s1` of the file `f` in share `dir`, holding "stream".
    fn stream_of(dir: &std::path::Path) -> crate::Handle {
        let s = Share::open(dir, ShareOptions::default()).unwrap();
        let ads = CreateRequest {
            want_read: true,
            want_write: true,
            disposition: crate::Disposition::OpenIf,
            ..Default::default()
        };
        let (st, _) = s.create("f:s1:$DATA", &ads).expect("named streams");
        st.write_at(b"stream", 0).unwrap();
        st
    }

    #[test]
    fn a_file_just_written_is_cached_up_to_its_end() {
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let (_tmp, h) = share_with(&data);
        assert_eq!(h.cached_len(0, 65536), Some(65536));
        // Clipped at the end of the file; nothing past it.
        assert_eq!(h.cached_len(90_000, 65536), Some(10_000));
        assert_eq!(h.cached_len(100_000, 10), Some(0));
        assert_eq!(h.cached_len(200_000, 10), Some(0));
    }

    /// The size comes from the file as it is now, whoever changed it (another opener
    /// truncating or extending it), never from what the handle saw before; and asking
    /// moves nothing that a read at an offset depends on.
    #[test]
    fn the_end_of_file_is_the_one_another_opener_left() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 3) as u8).collect();
        let (tmp, h) = share_with(&data);
        assert_eq!(h.cached_len(40_000, 65536), Some(60_000));
        let other = std::fs::OpenOptions::new()
            .write(true)
            .open(tmp.path().join("f"))
            .unwrap();
        other.set_len(50_000).unwrap();
        assert_eq!(h.cached_len(40_000, 65536), Some(10_000));
        assert_eq!(h.cached_len(50_000, 65536), Some(0));
        assert_eq!(h.cached_len(60_000, 100), Some(0));
        // Extended (the new part is a hole of zeros, cached or not: never more than
        // the size, and never past it).
        other.set_len(300_000).unwrap();
        assert!(matches!(h.cached_len(40_000, 65536), Some(65536) | None));
        assert_eq!(h.cached_len(300_000, 10), Some(0));
        // Reads at an offset are where they were.
        let mut buf = Vec::new();
        assert_eq!(h.read_append(&mut buf, 100, 1_000).unwrap(), 100);
        assert_eq!(buf, &data[1_000..1_100]);
        // A stream never goes from the file.
        assert_eq!(stream_of(tmp.path()).cached_len(0, 6), None);
    }

    #[test]
    fn read_append_keeps_what_is_there_and_stops_at_the_end() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let (_tmp, h) = share_with(&data);
        let mut buf = b"head".to_vec();
        assert_eq!(h.read_append(&mut buf, 4096, 100).unwrap(), 4096);
        assert_eq!(&buf[..4], b"head");
        assert_eq!(&buf[4..], &data[100..4196]);
        // A short read past the end appends only what exists.
        let mut buf = Vec::new();
        assert_eq!(h.read_append(&mut buf, 4096, 9_000).unwrap(), 1_000);
        assert_eq!(buf, &data[9_000..]);
        assert_eq!(h.read_append(&mut buf, 10, 20_000).unwrap(), 0);
        assert_eq!(buf.len(), 1_000);
    }

    /// A read of cached data completes without waiting, short at the end of the file
    /// and empty past it; data the page cache dropped is either read all the same (a
    /// file system that keeps everything in memory) or refused with `buf` untouched,
    /// never read in part; a stream is always refused.
    #[test]
    fn read_append_cached_reads_only_what_needs_no_wait() {
        use std::os::fd::AsRawFd;
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 5) as u8).collect();
        let (tmp, h) = share_with(&data);
        let mut buf = b"head".to_vec();
        assert_eq!(
            h.read_append_cached(&mut buf, 8192, 100).unwrap(),
            Some(8192)
        );
        assert_eq!(&buf[..4], b"head");
        assert_eq!(&buf[4..], &data[100..8292]);
        let mut buf = Vec::new();
        assert_eq!(
            h.read_append_cached(&mut buf, 8192, 299_000).unwrap(),
            Some(1_000)
        );
        assert_eq!(buf, &data[299_000..]);
        assert_eq!(
            h.read_append_cached(&mut buf, 10, 400_000).unwrap(),
            Some(0)
        );
        assert_eq!(buf.len(), 1_000);
        // Out of the page cache (clean pages dropped).
        let f = std::fs::File::open(tmp.path().join("f")).unwrap();
        f.sync_all().unwrap();
        // SAFETY: posix_fadvise only reads its arguments; the descriptor is open.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut buf = b"x".to_vec();
        match h.read_append_cached(&mut buf, 65536, 131_072).unwrap() {
            None => assert_eq!(buf, b"x"),
            Some(n) => {
                assert_eq!(n, 65536);
                assert_eq!(&buf[1..], &data[131_072..196_608]);
            }
        }
        // Where waiting is fine the same read always works.
        let mut buf = Vec::new();
        assert_eq!(h.read_append(&mut buf, 65536, 131_072).unwrap(), 65536);
        assert_eq!(buf, &data[131_072..196_608]);
        // A named stream is read with read_append only.
        let st = stream_of(tmp.path());
        let mut buf = Vec::new();
        assert_eq!(st.read_append_cached(&mut buf, 6, 0).unwrap(), None);
        assert!(buf.is_empty());
        assert_eq!(st.read_append(&mut buf, 6, 0).unwrap(), 6);
        assert_eq!(buf, b"stream");
    }

    /// The slice form: cached data fills the buffer, short at the end of the file
    /// (the bytes past what was read are left as they were) and nothing past it; a
    /// named stream is refused.
    #[test]
    fn read_at_cached_fills_a_slice_from_the_page_cache() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 3) as u8).collect();
        let (tmp, h) = share_with(&data);
        let mut buf = vec![0xAAu8; 70_000];
        assert_eq!(h.read_at_cached(&mut buf, 1_001).unwrap(), Some(70_000));
        assert!(buf == data[1_001..71_001]);
        let mut buf = vec![0xAAu8; 4096];
        assert_eq!(h.read_at_cached(&mut buf, 299_000).unwrap(), Some(1_000));
        assert_eq!(&buf[..1_000], &data[299_000..]);
        assert!(buf[1_000..].iter().all(|&b| b == 0xAA));
        assert_eq!(h.read_at_cached(&mut buf, 300_000).unwrap(), Some(0));
        assert_eq!(h.read_at_cached(&mut buf, 400_000).unwrap(), Some(0));
        assert_eq!(h.read_at_cached(&mut [], 0).unwrap(), Some(0));
        let st = stream_of(tmp.path());
        assert_eq!(st.read_at_cached(&mut buf, 0).unwrap(), None);
    }

    /// Bytes put into a pipe land in the file at the offset asked for; a pipe holding
    /// fewer bytes than asked is an error, not a hang; a stream says NOT_SUPPORTED.
    #[test]
    fn write_from_pipe_lands_at_the_offset() {
        use std::io::Write;
        use std::os::fd::{FromRawFd, OwnedFd};
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), [1u8; 10]).unwrap();
        let s = Share::open(tmp.path(), ShareOptions::default()).unwrap();
        let rw = CreateRequest {
            want_read: true,
            want_write: true,
            ..Default::default()
        };
        let (h, _) = s.create("f", &rw).unwrap();
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        // SAFETY: both just opened and owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let data: Vec<u8> = (0..40_000u32).map(|i| (i * 11) as u8).collect();
        let mut w = std::fs::File::from(wr);
        w.write_all(&data).unwrap();
        assert_eq!(
            h.write_from_pipe(rd.as_fd(), 5, data.len()).unwrap(),
            data.len()
        );
        let got = std::fs::read(tmp.path().join("f")).unwrap();
        assert_eq!(&got[..5], &[1u8; 5]);
        assert_eq!(&got[5..], &data[..]);
        // Ten bytes promised, four there.
        w.write_all(b"abcd").unwrap();
        assert_eq!(
            h.write_from_pipe(rd.as_fd(), 0, 10),
            Err(smbx_wire::NtStatus::INVALID_PARAMETER)
        );
        // A stream takes its bytes from memory.
        assert_eq!(
            stream_of(tmp.path()).write_from_pipe(rd.as_fd(), 0, 4),
            Err(smbx_wire::NtStatus::NOT_SUPPORTED)
        );
        // Past the largest offset.
        assert_eq!(
            h.write_from_pipe(rd.as_fd(), i64::MAX as u64, 10),
            Err(smbx_wire::NtStatus::INVALID_PARAMETER)
        );
    }

    #[test]
    fn send_to_moves_the_range_to_a_socket() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i * 13) as u8).collect();
        let (_tmp, h) = share_with(&data);
        let (a, mut b) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            got
        });
        let mut sent = 0;
        while sent < 60_000 {
            let n = h
                .send_to(a.as_fd(), 5_000 + sent as u64, 60_000 - sent)
                .unwrap();
            assert!(n > 0);
            sent += n;
        }
        // At the end of the file: nothing more.
        assert_eq!(h.send_to(a.as_fd(), 70_000, 100).unwrap(), 0);
        drop(a);
        assert_eq!(reader.join().unwrap(), &data[5_000..65_000]);
    }
}
