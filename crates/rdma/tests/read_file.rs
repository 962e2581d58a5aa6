//! RDMA Reads whose sink is a file range (`QueuePair::post_read_file`) over
//! soft-iWARP on 127.0.0.1: byte-exact at every FPDU boundary at a file offset
//! other than 0, long payloads spliced from the socket into the file when CRC is
//! off, everything written from memory when it is on, and a file that refuses its
//! bytes failing the Read while the connection goes on.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use smbx_rdma::iwarp::ddp::TAGGED_HDR;
use smbx_rdma::iwarp::engine::max_ulpdu_for_mss;
use smbx_rdma::iwarp::{IwarpOptions, SoftMr, SoftQp};
use smbx_rdma::*;

#[path = "support/soft_pair.rs"]
mod soft_pair;
use soft_pair::{connected, pattern};

/// FPDUs of ~64 KiB (as on loopback), long enough to be placed as they arrive.
const MSS: u32 = 65536;
const BIG: usize = 8 << 20;

/// A file as a [`FileSink`]: splices socket → pipe → file, counting the bytes
/// spliced and those written from memory; a `broken` one refuses every byte (as
/// a full disk would) and drops what it takes off the socket.
#[derive(Debug)]
struct FileDst {
    file: std::fs::File,
    len: usize,
    rd: OwnedFd,
    wr: OwnedFd,
    broken: bool,
    spliced: AtomicUsize,
    written: AtomicUsize,
    failed: AtomicBool,
}

impl FileDst {
    fn new(file: &std::fs::File, len: usize, broken: bool) -> Arc<FileDst> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just opened and are owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Arc::new(FileDst {
            file: file.try_clone().unwrap(),
            len,
            rd,
            wr,
            broken,
            spliced: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        })
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.spliced.load(Ordering::Relaxed),
            self.written.load(Ordering::Relaxed),
        )
    }
}

impl FileSink for FileDst {
    fn len(&self) -> usize {
        self.len
    }

    fn recv_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> io::Result<usize> {
        if self.broken {
            let mut buf = vec![0u8; n.min(1 << 16)];
            // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
            let r = unsafe {
                libc::recv(
                    sock.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            self.failed.store(true, Ordering::Relaxed);
            return Ok(r as usize);
        }
        // SAFETY: both descriptors are open; null offsets (neither is seekable).
        let r = unsafe {
            libc::splice(
                sock.as_raw_fd(),
                std::ptr::null_mut(),
                self.wr.as_raw_fd(),
                std::ptr::null_mut(),
                n,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut off = at as libc::loff_t;
        let mut left = r as usize;
        while left > 0 {
            // SAFETY: both descriptors are open; `off` is a live loff_t.
            let w = unsafe {
                libc::splice(
                    self.rd.as_raw_fd(),
                    std::ptr::null_mut(),
                    self.file.as_raw_fd(),
                    &mut off,
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            assert!(w > 0, "pipe to file: {}", io::Error::last_os_error());
            left -= w as usize;
        }
        self.spliced.fetch_add(r as usize, Ordering::Relaxed);
        Ok(r as usize)
    }

    fn write_part(&self, at: usize, data: &[u8]) {
        if self.broken {
            self.failed.store(true, Ordering::Relaxed);
            return;
        }
        self.file.write_all_at(data, at as u64).unwrap();
        self.written.fetch_add(data.len(), Ordering::Relaxed);
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
}

struct Pair {
    /// The reader (the server of an SMB2 WRITE).
    sqp: SoftQp,
    /// The client and the buffer it exposes.
    _cqp: SoftQp,
    src: SoftMr,
}

async fn pair(crc: bool, data: &[u8]) -> Pair {
    let opts = IwarpOptions {
        crc,
        mss: Some(MSS),
        ..IwarpOptions::default()
    };
    let (sqp, cqp, cpd) = connected(opts).await;
    let src = cpd
        .register(data.to_vec(), Access::LOCAL_WRITE | Access::REMOTE_READ)
        .unwrap();
    Pair {
        sqp,
        _cqp: cqp,
        src,
    }
}

fn file_of(len: usize) -> (tempfile::NamedTempFile, std::fs::File) {
    let t = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(t.path(), vec![0xEEu8; len]).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.path())
        .unwrap();
    (t, f)
}

/// Reads `n` bytes of the peer's buffer from `from` into `dst` from its byte `at`;
/// returns the completion.
async fn read_file(p: &Pair, dst: Arc<FileDst>, from: usize, at: usize, n: usize) -> Completion {
    let remote = p.src.remote(from as u64, n as u32).unwrap();
    p.sqp.post_read_file(9, dst, at, n, remote).unwrap();
    let c = p.sqp.cq().next().await.expect("completion");
    assert_eq!(
        (c.wr_id, c.opcode, c.byte_len as usize),
        (9, WcOpcode::RdmaRead, n)
    );
    c
}

async fn every_boundary(crc: bool) {
    let data = pattern(BIG + 11);
    let p = pair(crc, &data).await;
    assert_eq!(p.sqp.reads_files(), !crc);
    let fpdu = max_ulpdu_for_mss(MSS) - TAGGED_HDR;
    // A range that starts 4093 bytes into the file, which holds 13 bytes more.
    let at = 4093;
    for n in [1, fpdu, fpdu + 1, BIG] {
        let (_t, f) = file_of(at + n + 13);
        let dst = FileDst::new(&f, at + n + 13, false);
        let c = read_file(&p, dst.clone(), 11, at, n).await;
        assert_eq!(c.status, WcStatus::Success, "{n} bytes (crc {crc})");
        let got = std::fs::read(_t.path()).unwrap();
        assert_eq!(&got[..at], &vec![0xEE; at][..], "nothing before the range");
        assert!(got[at..at + n] == data[11..11 + n], "{n} bytes differ");
        assert_eq!(&got[at + n..], &[0xEE; 13], "nothing after the range");
        let (spliced, written) = dst.counts();
        assert_eq!(spliced + written, n, "{n} bytes (crc {crc})");
        if crc {
            // Checked before it lands: nothing goes from the socket into the file.
            assert_eq!(spliced, 0, "{n} bytes with CRC");
        } else if n == BIG {
            assert!(spliced > n / 2, "8 MiB: only {spliced} bytes spliced");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_reads_are_byte_exact_at_every_fpdu_boundary() {
    every_boundary(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_reads_with_crc_write_from_memory_and_are_byte_exact() {
    every_boundary(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_refuses_its_bytes_fails_the_read_and_the_connection_goes_on() {
    for crc in [false, true] {
        let data = pattern(BIG);
        let p = pair(crc, &data).await;
        let (_t, f) = file_of(BIG);
        let bad = FileDst::new(&f, BIG, true);
        let c = read_file(&p, bad.clone(), 0, 0, BIG).await;
        assert_eq!(c.status, WcStatus::LocalProtectionError, "crc {crc}");
        assert!(bad.failed());
        // The stream stayed in step: the next Read lands whole.
        let n = 300_001;
        let good = FileDst::new(&f, BIG, false);
        let c = read_file(&p, good, 5, 100, n).await;
        assert_eq!(c.status, WcStatus::Success, "crc {crc}");
        let got = std::fs::read(_t.path()).unwrap();
        assert!(got[100..100 + n] == data[5..5 + n], "crc {crc}");
        assert_eq!(p.sqp.state(), QpState::Rts);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_outside_the_file_range_is_refused() {
    let p = pair(false, &pattern(100)).await;
    let (_t, f) = file_of(100);
    let dst = FileDst::new(&f, 100, false);
    let remote = p.src.remote(0, 51).unwrap();
    assert!(p
        .sqp
        .post_read_file(1, dst.clone(), 50, 51, remote)
        .is_err());
    let short = p.src.remote(0, 10).unwrap();
    assert!(p.sqp.post_read_file(1, dst, 0, 11, short).is_err());
}
