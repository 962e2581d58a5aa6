//! RDMA Writes whose payload is a file range (`QueuePair::post_write_file`) over
//! soft-iWARP on 127.0.0.1: byte-exact at every FPDU boundary, sent with sendfile
//! when CRC is off and read in (once) when it is on, zeros for what a file that
//! shrank no longer holds, in order when the socket takes a run of FPDUs in parts.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use smbx_rdma::iwarp::ddp::TAGGED_HDR;
use smbx_rdma::iwarp::engine::max_ulpdu_for_mss;
use smbx_rdma::iwarp::{IwarpOptions, SocketSetup, SoftIwarp, SoftMr, SoftQp};
use smbx_rdma::*;

#[path = "support/soft_pair.rs"]
mod soft_pair;
use soft_pair::{connected, next_ok, pattern};

const MSS: u32 = 4096;
const BIG: usize = 8 << 20;

/// A file as a [`FileRange`], counting how its bytes went out.
#[derive(Debug)]
struct FileSrc {
    file: std::fs::File,
    len: usize,
    sent: AtomicUsize,
    read: AtomicUsize,
}

impl FileSrc {
    fn new(file: std::fs::File, len: usize) -> Arc<FileSrc> {
        Arc::new(FileSrc {
            file,
            len,
            sent: AtomicUsize::new(0),
            read: AtomicUsize::new(0),
        })
    }
}

impl FileRange for FileSrc {
    fn len(&self) -> usize {
        self.len
    }

    fn send_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> io::Result<usize> {
        let mut off = at as libc::off_t;
        // SAFETY: both descriptors are open for the call; `off` is a live off_t.
        let r = unsafe { libc::sendfile(sock.as_raw_fd(), self.file.as_raw_fd(), &mut off, n) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        self.sent.fetch_add(r as usize, Ordering::Relaxed);
        Ok(r as usize)
    }

    fn read_part(&self, buf: &mut Vec<u8>, at: usize, n: usize) {
        let s = buf.len();
        buf.resize(s + n, 0);
        let mut got = 0;
        while got < n {
            match self.file.read_at(&mut buf[s + got..], (at + got) as u64) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
        self.read.fetch_add(n, Ordering::Relaxed);
    }
}

struct Pair {
    /// The writer (the server of an SMB2 READ).
    sqp: SoftQp,
    /// The client and its receive buffer.
    cqp: SoftQp,
    cpd: <SoftIwarp as Provider>::Pd,
    rbuf: SoftMr,
}

async fn pair(crc: bool) -> Pair {
    pair_mss(crc, Some(MSS), true).await
}

/// A socket setup giving every connection's socket TCP_NOTSENT_LOWAT = `bytes`
/// (checked), counting the sockets in `set`.
fn notsent_lowat(bytes: i32, set: Arc<AtomicUsize>) -> SocketSetup {
    use smbx_rdma::sock::{get_option, set_option};
    SocketSetup::new(move |fd| {
        let (level, opt) = (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT);
        const INT: usize = std::mem::size_of::<libc::c_int>();
        let mut got = [0u8; INT];
        let set_rc = set_option(fd, level, opt, &bytes.to_ne_bytes()).map_err(|e| e.kind());
        let get_rc = get_option(fd, level, opt, &mut got).map_err(|e| e.kind());
        let got = libc::c_int::from_ne_bytes(got);
        assert_eq!((set_rc, get_rc, got), (Ok(()), Ok(INT), bytes));
        set.fetch_add(1, Ordering::Relaxed);
    })
}

/// A pair whose FPDUs are sized for `mss` (None: the socket's own, 65,483 bytes on
/// loopback).
async fn pair_mss(crc: bool, mss: Option<u32>, large_fpdus: bool) -> Pair {
    let opts = IwarpOptions {
        crc,
        mss,
        large_fpdus,
        ..IwarpOptions::default()
    };
    let (sqp, cqp, cpd) = connected(opts).await;
    let rbuf = cpd.alloc(64, Access::LOCAL_WRITE).unwrap();
    Pair {
        sqp,
        cqp,
        cpd,
        rbuf,
    }
}

/// Writes `n` bytes of `src` from byte `at` into a fresh sink of the client at
/// offset 3, then a Send; returns the sink's bytes once the Send arrived.
async fn write_file(p: &Pair, src: Arc<FileSrc>, at: usize, n: usize) -> Vec<u8> {
    let sink = p
        .cpd
        .alloc(n + 8, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    sink.with_mut(|b| b.fill(0xEE));
    p.cqp.post_recv(1, &[Sge::new(&p.rbuf, 0, 64)]).unwrap();
    let remote = sink.remote(3, n as u32).unwrap();
    assert!(p.sqp.writes_files());
    p.sqp.post_write_file(7, src, at, n, remote).unwrap();
    let c = next_ok(&p.sqp).await;
    assert_eq!(
        (c.wr_id, c.opcode, c.byte_len as usize),
        (7, WcOpcode::RdmaWrite, n)
    );
    let spd_buf = SendWr {
        wr_id: 8,
        op: SendOp::Send,
        sg: &[],
        solicited: false,
    };
    p.sqp.post_send(&spd_buf).unwrap();
    assert_eq!(next_ok(&p.sqp).await.wr_id, 8);
    let c = next_ok(&p.cqp).await;
    assert_eq!(c.opcode, WcOpcode::Recv);
    let b = sink.with(|b| b.to_vec());
    assert_eq!(&b[..3], &[0xEE; 3], "nothing before the remote buffer");
    assert_eq!(&b[3 + n..], &[0xEE; 5], "nothing after the remote buffer");
    b[3..3 + n].to_vec()
}

fn file_of(data: &[u8]) -> (tempfile::NamedTempFile, std::fs::File) {
    let t = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(t.path(), data).unwrap();
    let f = std::fs::File::open(t.path()).unwrap();
    (t, f)
}

async fn every_boundary(crc: bool) {
    let p = pair(crc).await;
    let fpdu = max_ulpdu_for_mss(MSS) - TAGGED_HDR;
    let at = 7;
    let data = pattern(BIG + at);
    let (_t, f) = file_of(&data);
    for n in [1, fpdu, fpdu + 1, BIG] {
        let src = FileSrc::new(f.try_clone().unwrap(), BIG + at);
        let got = write_file(&p, src.clone(), at, n).await;
        assert!(got == data[at..at + n], "{n} bytes differ (crc {crc})");
        let (sent, read) = (
            src.sent.load(Ordering::Relaxed),
            src.read.load(Ordering::Relaxed),
        );
        if crc {
            // The CRC covers the payload: read in once, never sent from the file.
            assert_eq!((sent, read), (0, n), "{n} bytes with CRC");
        } else {
            assert_eq!((sent, read), (n, 0), "{n} bytes without CRC");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_writes_are_byte_exact_at_every_fpdu_boundary() {
    every_boundary(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_writes_with_crc_read_the_file_once_and_are_byte_exact() {
    every_boundary(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_shorter_than_promised_sends_zeros_and_completes() {
    for crc in [false, true] {
        let p = pair(crc).await;
        let n = 300_000;
        let data = pattern(n);
        let (t, f) = file_of(&data);
        let src = FileSrc::new(f, n);
        // Truncated after the range was promised, before it is sent.
        let keep = 123_457;
        shrink(t.path(), keep);
        let got = write_file(&p, src.clone(), 0, n).await;
        assert!(got[..keep] == data[..keep], "kept bytes differ (crc {crc})");
        assert!(
            got[keep..].iter().all(|&b| b == 0),
            "zeros past the end (crc {crc})"
        );
        if !crc {
            assert_eq!(src.sent.load(Ordering::Relaxed), keep);
        }
        // The connection goes on.
        let again = write_file(&p, src, 0, 1000).await;
        assert!(again == data[..1000]);
    }
}

/// At loopback's segment size, where FPDUs from a file carry 15 pages each (a
/// header written to wait for its payload, the payload by sendfile), or 512 KiB
/// with large FPDUs: byte-exact from any offset in a page, at and around the
/// 15-page and 512 KiB boundaries, and a file that shrank mid-Write still sends the
/// promised length (zeros past its end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_writes_at_loopback_segment_size_are_byte_exact() {
    let pages15 = 15 * 4096;
    let data = pattern((3 << 20) + 8192);
    let (t, f) = file_of(&data);
    for large in [false, true] {
        let p = pair_mss(false, None, large).await;
        for at in [0, 100, 4095] {
            for n in [
                pages15 - 1,
                pages15,
                pages15 + 1,
                (512 << 10) - 1,
                512 << 10,
                (512 << 10) + 1,
                (1 << 20) + 3,
            ] {
                let src = FileSrc::new(f.try_clone().unwrap(), data.len());
                let got = write_file(&p, src.clone(), at, n).await;
                assert!(
                    got == data[at..at + n],
                    "{n} bytes from {at} differ ({large})"
                );
                // A last payload under 16 KiB is read in with the headers.
                let copied = copied_tail(n, large);
                assert_eq!(src.sent.load(Ordering::Relaxed), n - copied);
                assert_eq!(src.read.load(Ordering::Relaxed), copied);
            }
        }
    }
    let p = pair_mss(false, None, true).await;
    let n = 1 << 20;
    let src = FileSrc::new(f, n);
    let keep = 3 * pages15 + 17;
    shrink(t.path(), keep);
    let got = write_file(&p, src.clone(), 0, n).await;
    assert!(got[..keep] == data[..keep], "kept bytes differ");
    assert!(got[keep..].iter().all(|&b| b == 0), "zeros past the end");
    assert_eq!(src.sent.load(Ordering::Relaxed), keep);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_outside_the_file_range_is_refused() {
    let p = pair(false).await;
    let (_t, f) = file_of(&pattern(100));
    let src = FileSrc::new(f, 100);
    let sink = p
        .cpd
        .alloc(200, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let remote = sink.remote(0, 200).unwrap();
    assert!(p
        .sqp
        .post_write_file(1, src.clone(), 50, 51, remote)
        .is_err());
    let short = sink.remote(0, 10).unwrap();
    assert!(p.sqp.post_write_file(1, src, 0, 11, short).is_err());
}

/// Many file Writes queued at once (16 MiB, more than the socket's buffer holds, so
/// it takes the runs of FPDUs in parts): every byte lands where it belongs, the
/// Writes complete in order, and a Send behind them arrives after their data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_file_writes_land_in_order_when_the_socket_takes_them_in_parts() {
    let p = pair(false).await;
    let (each, count) = (1 << 20, 16usize);
    let data = pattern(each * count + 5);
    let (_t, f) = file_of(&data);
    let src = FileSrc::new(f, data.len());
    let sink = p
        .cpd
        .alloc(each * count, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    sink.with_mut(|b| b.fill(0xEE));
    p.cqp.post_recv(1, &[Sge::new(&p.rbuf, 0, 64)]).unwrap();
    // Backwards through the file, forwards through the sink.
    for i in 0..count {
        let remote = sink.remote((i * each) as u64, each as u32).unwrap();
        let at = 5 + (count - 1 - i) * each;
        p.sqp
            .post_write_file(i as u64, src.clone(), at, each, remote)
            .unwrap();
    }
    let send = SendWr {
        wr_id: 99,
        op: SendOp::Send,
        sg: &[],
        solicited: false,
    };
    p.sqp.post_send(&send).unwrap();
    for i in 0..count {
        let c = next_ok(&p.sqp).await;
        assert_eq!((c.wr_id, c.byte_len as usize), (i as u64, each));
    }
    assert_eq!(next_ok(&p.sqp).await.wr_id, 99);
    assert_eq!(next_ok(&p.cqp).await.opcode, WcOpcode::Recv);
    let got = sink.with(|b| b.to_vec());
    for i in 0..count {
        let at = 5 + (count - 1 - i) * each;
        assert!(
            got[i * each..(i + 1) * each] == data[at..at + each],
            "write {i} differs"
        );
    }
    assert_eq!(src.sent.load(Ordering::Relaxed), each * count);
    assert_eq!(src.read.load(Ordering::Relaxed), 0);
}

/// With a socket that holds little unsent (TCP_NOTSENT_LOWAT of 16 KiB, so it
/// refuses writes again and again: a header taken with its payload refused, a
/// payload taken in part) and FPDUs sized for loopback's segments (15-page file
/// payloads sent by sendfile, or 512 KiB ones with large FPDUs; with CRC on, whole
/// FPDUs read in): queued file Writes
/// still land byte-exact and in order, one from a file that shrank after it was
/// posted sends zeros past the end, and a Send behind them arrives after their data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_writes_through_a_socket_that_holds_little_unsent_are_byte_exact() {
    for (crc, large) in [(false, false), (true, false), (false, true)] {
        let set = Arc::new(AtomicUsize::new(0));
        let opts = IwarpOptions {
            crc,
            socket_setup: Some(notsent_lowat(16 << 10, set.clone())),
            large_fpdus: large,
            ..IwarpOptions::default()
        };
        let (sqp, cqp, cpd) = connected(opts).await;
        // Both ends' sockets went through the setup: the server's, which sends the
        // Writes, holds at most 16 KiB unsent.
        assert_eq!(set.load(Ordering::Relaxed), 2);
        let rbuf = cpd.alloc(64, Access::LOCAL_WRITE).unwrap();
        let p = Pair {
            sqp,
            cqp,
            cpd,
            rbuf,
        };
        let data = pattern((4 << 20) + 8192);
        let (t, f) = file_of(&data);
        let src = FileSrc::new(f.try_clone().unwrap(), data.len());
        let sizes = [(512 << 10) + 7, 15 * 4096 + 1, 1 << 20, 100, (2 << 20) + 3];
        let total: usize = sizes.iter().sum();
        let sink = p
            .cpd
            .alloc(total, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        sink.with_mut(|b| b.fill(0xEE));
        p.cqp.post_recv(1, &[Sge::new(&p.rbuf, 0, 64)]).unwrap();
        let mut at = 0;
        for (i, &n) in sizes.iter().enumerate() {
            let remote = sink.remote(at as u64, n as u32).unwrap();
            p.sqp
                .post_write_file(i as u64, src.clone(), 4095 + at, n, remote)
                .unwrap();
            at += n;
        }
        let send = SendWr {
            wr_id: 99,
            op: SendOp::Send,
            sg: &[],
            solicited: false,
        };
        p.sqp.post_send(&send).unwrap();
        for (i, &n) in sizes.iter().enumerate() {
            let c = next_ok(&p.sqp).await;
            assert_eq!((c.wr_id, c.byte_len as usize), (i as u64, n));
        }
        assert_eq!(next_ok(&p.sqp).await.wr_id, 99);
        assert_eq!(next_ok(&p.cqp).await.opcode, WcOpcode::Recv);
        let got = sink.with(|b| b.to_vec());
        assert!(got == data[4095..4095 + total], "bytes differ (crc {crc})");
        let (sent, read) = (
            src.sent.load(Ordering::Relaxed),
            src.read.load(Ordering::Relaxed),
        );
        let copied: usize = sizes.iter().map(|&n| copied_tail(n, large)).sum();
        let want = if crc {
            (0, total)
        } else {
            (total - copied, copied)
        };
        assert_eq!(want, (sent, read));

        // A file cut short after its Write was posted: the kept bytes, then zeros.
        let n = 1 << 20;
        let src = FileSrc::new(f, n);
        let keep = 5 * 15 * 4096 + 17;
        shrink(t.path(), keep);
        let got = write_file(&p, src.clone(), 0, n).await;
        assert!(got[..keep] == data[..keep], "kept bytes differ (crc {crc})");
        assert!(got[keep..].iter().all(|&b| b == 0), "zeros past the end");
    }
}

/// Bytes of a file Write of `n` at loopback's MSS that the engine reads in rather
/// than sends from the file: a last FPDU's payload (after FPDUs of 15 pages, or of
/// 512 KiB with `large` FPDUs) under 16 KiB.
fn copied_tail(n: usize, large: bool) -> usize {
    let tail = n % if large { 512 << 10 } else { 15 * 4096 };
    if tail < 16 * 1024 {
        tail
    } else {
        0
    }
}

/// Cuts the file at `path` to `len` bytes (a truncate racing a promised range).
fn shrink(path: &std::path::Path, len: usize) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len as u64)
        .unwrap();
}
