//! The machine's ceiling for 512 KiB reads and writes, without SMB: the least work a
//! plain, sealed or signed READ and a plain WRITE can cost over loopback TCP, one thread
//! serving and one thread driving at queue depth 8, as `smbx bench -t1 -o8` does.
//!
//! Reads (from a 64 MiB file in the page cache; the client asks with an 8-byte offset):
//! plain sends the data by `sendfile`; sealed preads it behind room for the
//! TRANSFORM_HEADER, seals it with AES-128-GCM in place and writes it once, the reader
//! opening it into a second buffer as the client does; signed preads, signs with
//! AES-GMAC, writes once, and the reader verifies in place.
//!
//! Writes (into a FILE_MIB file created in DIR, sequential offsets wrapping at its end,
//! as the bench's `-s -w100`): the client sends each 512 KiB message (a length prefix, a
//! WRITE-sized head carrying the offset, the data) with one vectored write and gets an
//! 84-byte ack (a WRITE response's size); the server receives the head and moves the
//! data into the file either by splice (socket to pipe to file, no copy through user
//! memory: what smbx does) or by recv into a buffer and pwrite (what rocketsmbd does),
//! then acks. The file is synced after each run, outside the timing.
//!
//! Modes alternate for several rounds; each run prints its MB/s (10^6 bytes) and the
//! p50/p99 of one I/O (from its send to its response, at depth 8), and at the end each
//! mode's median, its share of plain (reads) and the better write mode ("Write ceiling").
//! On 2 cores this bounds what any SMB server and client pair can reach, whatever their
//! code: what is left is the passes over the data they cannot avoid.
//!
//! `--streams N` runs N such pairs of threads at once, each stream with its own connection
//! and its own part of the file, and sums them (`--depth D` keeps D I/Os in flight per
//! stream instead of 8): what the machine itself gives N connections, as `smbx bench -tN
//! -oD` drives them (bench/scaling.sh's question: do more connections, or deeper queues,
//! lose on this machine whatever the server does?). `--plain` runs only the plain read.
//! `--cc NAME` sets every connection's congestion control (TCP_CONGESTION, one of
//! net.ipv4.tcp_allowed_congestion_control), e.g. reno, which does not pace, against the
//! system's bbr. `--read-file PATH` reads an existing file (e.g. the one the servers share, so that the
//! ceiling reads as many distinct pages as they do) instead of a 64 MiB one of its own.
//!
//! `cargo run --release -p smbx-bench --example ceiling -- [--reads|--writes|--plain]
//! [--streams N] [--depth D] [--cc NAME] [--read-file PATH] [--dir DIR] [--file-mib N] [--pin[=S,C]] [SECS] [ROUNDS]`
//! (default: both, one stream at depth 8, DIR the temp dir, 256 MiB; `--pin` puts the
//! serving threads on CPU S (0) and the driving ones on CPU C (1), as `taskset -c 0` for a
//! server and `taskset -c 1` for its client).

use std::fs::{File, OpenOptions};
use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use smbx_security::cipher::CipherId;
use smbx_security::keys::derive;
use smbx_security::protection::{Protection, Role};
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_security::transform::TRANSFORM_HEADER_LEN;
use smbx_transport::sockopt::{CongestionControl, SocketOptions};
use smbx_wire::Dialect;

const IO: usize = 512 << 10;
const READ_FILE: u64 = 64 << 20;
/// I/Os each stream keeps in flight, unless `--depth` says otherwise.
const DEPTH: usize = 8;
/// A READ response's header room (the SMB2 header and READ response, rounded).
const HDR: usize = 80;
/// A WRITE request's head: the SMB2 header (64) and the WRITE request (48).
const WRITE_HEAD: usize = 112;
/// A WRITE response: its length prefix, the SMB2 header and the WRITE response.
const ACK: usize = 4 + 80;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Plain,
    Sealed,
    Signed,
    /// WRITE: socket to pipe to file by splice.
    Splice,
    /// WRITE: recv into a buffer, then pwrite.
    Pwrite,
}

impl Mode {
    fn is_write(self) -> bool {
        matches!(self, Mode::Splice | Mode::Pwrite)
    }
}

/// One run's figures.
struct Run {
    mbs: f64,
    p50_us: f64,
    p99_us: f64,
    /// CPU time (user and system) per I/O of the serving thread and of the driving one.
    server_us: f64,
    client_us: f64,
}

/// The calling thread's CPU time so far (user and system).
fn thread_cpu() -> Duration {
    // SAFETY: a zeroed rusage is a valid out-parameter; RUSAGE_THREAD reads the calling
    // thread's own counters.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn keys() -> (Protection, Protection) {
    let c = Some(CipherId::Aes128Gcm);
    let k = derive(Dialect::SMB3_1_1, &[7u8; 16], Some(&[1u8; 64]), c);
    let alg = SigningAlgorithm::AesGmac;
    (
        Protection::new(&k, Role::Server, alg, c).unwrap(),
        Protection::new(&k, Role::Client, alg, c).unwrap(),
    )
}

/// Serves READs until the client closes; returns how many.
fn serve_reads(mode: Mode, mut s: TcpStream, file: File, keys: Protection) -> u64 {
    let signer: Signer = Signer::new(SigningAlgorithm::AesGmac, &[1u8; 16]);
    let mut buf = vec![0u8; 4 + TRANSFORM_HEADER_LEN + HDR + IO];
    let mut req = [0u8; 8];
    let mut served = 0;
    while s.read_exact(&mut req).is_ok() {
        served += 1;
        let off = u64::from_le_bytes(req);
        match mode {
            Mode::Plain => {
                let mut hdr = [0u8; 4 + HDR];
                hdr[..4].copy_from_slice(&((HDR + IO) as u32).to_be_bytes());
                if s.write_all(&hdr).is_err() || sendfile(&s, &file, off, IO).is_err() {
                    break;
                }
            }
            Mode::Sealed => {
                let body = 4 + TRANSFORM_HEADER_LEN;
                file.read_exact_at(&mut buf[body + HDR..], off).unwrap();
                buf[body..body + 4].copy_from_slice(&[0xfe, b'S', b'M', b'B']);
                keys.seal_in_place(1, &mut buf[4..]).unwrap();
                let n = (buf.len() - 4) as u32;
                buf[..4].copy_from_slice(&n.to_be_bytes());
                if s.write_all(&buf).is_err() {
                    break;
                }
            }
            Mode::Signed => {
                let m = &mut buf[TRANSFORM_HEADER_LEN..];
                file.read_exact_at(&mut m[4 + HDR..], off).unwrap();
                m[4..8].copy_from_slice(&[0xfe, b'S', b'M', b'B']);
                signer.sign(&mut m[4..]);
                let n = (m.len() - 4) as u32;
                m[..4].copy_from_slice(&n.to_be_bytes());
                if s.write_all(m).is_err() {
                    break;
                }
            }
            Mode::Splice | Mode::Pwrite => unreachable!("a write mode serving reads"),
        }
    }
    served
}

/// Receives WRITEs (prefix, head with the offset, 512 KiB of data) into `file` and acks
/// each one, until the client closes; returns how many.
fn serve_writes(mode: Mode, mut s: TcpStream, file: File) -> u64 {
    let pipe = if mode == Mode::Splice {
        Some(Pipe::new(2 * IO).unwrap())
    } else {
        None
    };
    let mut data = vec![0u8; IO];
    let mut head = [0u8; 4 + WRITE_HEAD];
    let ack = [0u8; ACK];
    let mut served = 0;
    while s.read_exact(&mut head).is_ok() {
        served += 1;
        let off = u64::from_le_bytes(head[4..12].try_into().unwrap());
        let moved = match &pipe {
            Some(p) => p.socket_to_file(&s, &file, off, IO),
            None => s
                .read_exact(&mut data)
                .and_then(|()| file.write_all_at(&data, off)),
        };
        if moved.is_err() || s.write_all(&ack).is_err() {
            break;
        }
    }
    served
}

/// A pipe for moving socket data into a file by splice(2).
struct Pipe {
    rd: std::os::fd::OwnedFd,
    wr: std::os::fd::OwnedFd,
}

impl Pipe {
    /// A pipe holding at least `bytes` (F_SETPIPE_SZ): twice a message's data, so it fits
    /// whole however the socket's pages split it.
    fn new(bytes: usize) -> std::io::Result<Pipe> {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both descriptors are open and now owned here alone.
        let (rd, wr) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        // SAFETY: F_SETPIPE_SZ on the pipe just created.
        if unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, bytes as libc::c_int) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Pipe { rd, wr })
    }

    /// `len` bytes from the socket into the pipe as they arrive, then from the pipe into
    /// `file` at `off`.
    fn socket_to_file(
        &self,
        s: &TcpStream,
        file: &File,
        off: u64,
        len: usize,
    ) -> std::io::Result<()> {
        let mut left = len;
        while left > 0 {
            // SAFETY: both descriptors are open for the call's duration; null offsets
            // (a socket and a pipe have none).
            let n = unsafe {
                libc::splice(
                    s.as_raw_fd(),
                    std::ptr::null_mut(),
                    self.wr.as_raw_fd(),
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            if n <= 0 {
                return Err(eof_or_last(n));
            }
            left -= n as usize;
        }
        let mut off = off as libc::loff_t;
        let mut left = len;
        while left > 0 {
            // SAFETY: both descriptors are open; `off` is a valid loff_t the kernel updates.
            let n = unsafe {
                libc::splice(
                    self.rd.as_raw_fd(),
                    std::ptr::null_mut(),
                    file.as_raw_fd(),
                    &mut off,
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            if n <= 0 {
                return Err(eof_or_last(n));
            }
            left -= n as usize;
        }
        Ok(())
    }
}

fn eof_or_last(n: isize) -> std::io::Error {
    if n == 0 {
        std::io::ErrorKind::UnexpectedEof.into()
    } else {
        std::io::Error::last_os_error()
    }
}

/// `len` bytes of `file` from `off` to the socket by sendfile(2): from the page cache,
/// no copy through user memory (what smbx's plain READ does).
fn sendfile(s: &TcpStream, file: &File, off: u64, len: usize) -> std::io::Result<()> {
    let mut off = off as libc::off_t;
    let mut left = len;
    while left > 0 {
        // SAFETY: both descriptors are open for the call's duration (borrowed) and
        // `off` is a valid off_t the kernel updates.
        let n = unsafe { libc::sendfile(s.as_raw_fd(), file.as_raw_fd(), &mut off, left) };
        if n <= 0 {
            return Err(eof_or_last(n));
        }
        left -= n as usize;
    }
    Ok(())
}

/// All of `bufs` to `w`, in as few vectored writes as the socket takes.
fn write_all_vectored(w: &mut TcpStream, mut bufs: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    while !bufs.is_empty() {
        let n = w.write_vectored(bufs)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

/// The client's side of one I/O at a time: asks (a READ's offset, or a whole WRITE).
struct Asker {
    w: TcpStream,
    off: u64,
    file_len: u64,
    write: bool,
    data: Vec<u8>,
}

impl Asker {
    fn ask(&mut self) {
        let off = self.off;
        self.off = (self.off + IO as u64) % self.file_len;
        if !self.write {
            self.w.write_all(&off.to_le_bytes()).unwrap();
            return;
        }
        let mut head = [0u8; 4 + WRITE_HEAD];
        head[..4].copy_from_slice(&((WRITE_HEAD + IO) as u32).to_be_bytes());
        head[4..12].copy_from_slice(&off.to_le_bytes());
        let mut bufs = [IoSlice::new(&head), IoSlice::new(&self.data)];
        write_all_vectored(&mut self.w, &mut bufs).unwrap();
    }
}

/// Keeps the calling thread on `cpu` (the bench's own pinning, as `--affinity` does).
fn pin(cpu: usize) {
    if let Err(e) = smbx_bench::affinity::pin_current_thread(cpu) {
        eprintln!("cannot pin to cpu {cpu}: {e}");
    }
}

/// One stream's figures: a connection, its serving thread and its driving thread.
struct Stream {
    bytes: usize,
    secs: f64,
    lat_ns: Vec<u64>,
    /// CPU time of the driving thread over the timed part, and of the serving thread.
    client_cpu: Duration,
    server_cpu: Duration,
    served: u64,
}

/// How a run is laid out: streams, each with its own connection, serving thread and
/// driving thread (as iperf3 3.16's `-P` and `smbx bench -t` with `--os-threads` equal
/// to `-t`), each keeping `depth` I/Os in flight; the CPUs of the serving threads and
/// of the driving ones.
#[derive(Clone, Copy)]
struct Layout {
    streams: usize,
    depth: usize,
    pinned: Option<(usize, usize)>,
    /// The congestion control of every connection (`--cc`), else the system's.
    cc: Option<CongestionControl>,
}

/// Sets the socket's congestion control (TCP_CONGESTION; one the system allows), as
/// smbx's `socket options` do.
fn set_cc(s: &TcpStream, cc: CongestionControl) {
    let opts = SocketOptions {
        congestion: Some(cc),
        ..SocketOptions::default()
    };
    opts.apply(s)
        .unwrap_or_else(|e| panic!("--cc {}: {e}", cc.as_str()));
}

/// One run of `mode` for `secs`: every stream's serving and driving threads started
/// together (this thread drives the first), the figures summed.
fn run(mode: Mode, secs: f64, path: &Path, file_len: u64, lay: Layout) -> Run {
    let go = std::sync::Arc::new(std::sync::Barrier::new(lay.streams));
    let others: Vec<_> = (1..lay.streams)
        .map(|i| {
            let (path, go) = (path.to_path_buf(), go.clone());
            std::thread::spawn(move || {
                if let Some((_, cpu)) = lay.pinned {
                    pin(cpu);
                }
                stream(mode, secs, &path, file_len, lay, i, &go)
            })
        })
        .collect();
    let mut all = vec![stream(mode, secs, path, file_len, lay, 0, &go)];
    all.extend(others.into_iter().map(|h| h.join().unwrap()));
    let mut lat_ns: Vec<u64> = all.iter().flat_map(|s| s.lat_ns.iter().copied()).collect();
    lat_ns.sort_unstable();
    let pct = |p: f64| {
        let i = ((lat_ns.len() as f64 * p) as usize).min(lat_ns.len().saturating_sub(1));
        lat_ns.get(i).map_or(0.0, |&n| n as f64 / 1e3)
    };
    let ios = all.iter().map(|s| s.bytes / IO).sum::<usize>().max(1) as f64;
    let served = all.iter().map(|s| s.served).sum::<u64>().max(1) as f64;
    Run {
        mbs: all.iter().map(|s| s.bytes as f64 / s.secs / 1e6).sum(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        server_us: all.iter().map(|s| s.server_cpu.as_secs_f64()).sum::<f64>() * 1e6 / served,
        client_us: all.iter().map(|s| s.client_cpu.as_secs_f64()).sum::<f64>() * 1e6 / ios,
    }
}

/// Where stream `index` of `streams` starts in a file of `file_len` bytes: evenly spaced
/// places, on whole I/Os, so that the streams do not read the same pages at once.
fn first_offset(file_len: u64, index: usize, streams: usize) -> u64 {
    let ios_in_file = (file_len / IO as u64).max(1);
    ios_in_file * index as u64 / streams.max(1) as u64 * IO as u64
}

/// Stream `index` of a run: its serving thread started, this thread driving it at the
/// layout's depth from its own part of the file, timed from when every stream is ready.
fn stream(
    mode: Mode,
    secs: f64,
    path: &Path,
    file_len: u64,
    lay: Layout,
    index: usize,
    go: &std::sync::Barrier,
) -> Stream {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (server_keys, client_keys) = keys();
    let file = OpenOptions::new()
        .read(true)
        .write(mode.is_write())
        .open(path)
        .unwrap();
    let synced = file.try_clone().unwrap();
    let srv = std::thread::spawn(move || {
        if let Some((cpu, _)) = lay.pinned {
            pin(cpu);
        }
        let (s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        if let Some(cc) = lay.cc {
            set_cc(&s, cc);
        }
        let cpu = thread_cpu();
        let served = if mode.is_write() {
            serve_writes(mode, s, file)
        } else {
            serve_reads(mode, s, file, server_keys)
        };
        (thread_cpu() - cpu, served)
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    if let Some(cc) = lay.cc {
        set_cc(&c, cc);
    }
    let mut asker = Asker {
        w: c.try_clone().unwrap(),
        off: first_offset(file_len, index, lay.streams),
        file_len,
        write: mode.is_write(),
        data: if mode.is_write() {
            (0..IO)
                .map(|i| (i as u32).wrapping_mul(2654435761) as u8)
                .collect()
        } else {
            Vec::new()
        },
    };
    let signer = Signer::new(SigningAlgorithm::AesGmac, &[1u8; 16]);
    go.wait();
    // Responses come back in order: the send times of the I/Os in flight, oldest first.
    let mut sent = std::collections::VecDeque::with_capacity(lay.depth);
    for _ in 0..lay.depth {
        sent.push_back(Instant::now());
        asker.ask();
    }
    let mut frame = Vec::new();
    let mut plain = Vec::new();
    let mut lat_ns: Vec<u64> = Vec::new();
    let (mut bytes, t, cpu) = (0usize, Instant::now(), thread_cpu());
    let end = t + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        if mode.is_write() {
            let mut ack = [0u8; ACK];
            c.read_exact(&mut ack).unwrap();
        } else {
            let mut h = [0u8; 4];
            c.read_exact(&mut h).unwrap();
            let n = u32::from_be_bytes(h) as usize;
            frame.resize(n, 0);
            c.read_exact(&mut frame).unwrap();
        }
        let now = Instant::now();
        lat_ns.push((now - sent.pop_front().unwrap()).as_nanos() as u64);
        sent.push_back(now);
        asker.ask();
        match mode {
            Mode::Plain | Mode::Splice | Mode::Pwrite => {}
            Mode::Sealed => {
                plain = client_keys
                    .unseal_with(&frame, |n| {
                        let mut v = std::mem::take(&mut plain);
                        v.resize(n, 0);
                        v
                    })
                    .unwrap();
            }
            Mode::Signed => assert!(signer.verify_in_place(&mut frame)),
        }
        bytes += IO;
    }
    let secs = t.elapsed().as_secs_f64();
    let client_cpu = thread_cpu() - cpu;
    drop(asker);
    let _ = c.shutdown(std::net::Shutdown::Both);
    drop(c);
    let (server_cpu, served) = srv.join().unwrap();
    if mode.is_write() {
        synced.sync_data().unwrap();
    }
    Stream {
        bytes,
        secs,
        lat_ns,
        client_cpu,
        server_cpu,
        served,
    }
}

/// A file of `mib` MiB of non-zero bytes at `path`, on disk (synced) before any run.
fn fill(path: &Path, mib: u64) {
    let mut f = File::create(path).unwrap();
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| i.wrapping_mul(2654435761) as u8)
        .collect();
    for _ in 0..mib {
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let (mut reads, mut writes, mut only_plain) = (true, true, false);
    let (mut streams, mut depth) = (1usize, DEPTH);
    // The CPUs of the serving thread and of the driving one.
    let mut pinned: Option<(usize, usize)> = None;
    let mut dir: PathBuf = std::env::temp_dir();
    let mut write_mib: u64 = 256;
    let mut read_file: Option<PathBuf> = None;
    let mut cc: Option<CongestionControl> = None;
    let mut nums = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reads" => writes = false,
            "--writes" => reads = false,
            "--plain" => (writes, only_plain) = (false, true),
            "--streams" => {
                streams = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--streams N (1 or more)")
            }
            "--depth" => {
                depth = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--depth D (1 or more)")
            }
            "--pin" => pinned = Some((0, 1)),
            p if p.starts_with("--pin=") => {
                let (srv, cli) = p["--pin=".len()..].split_once(',').expect("--pin=S,C");
                pinned = Some((
                    srv.parse().expect("--pin=S,C: CPU numbers"),
                    cli.parse().expect("--pin=S,C: CPU numbers"),
                ));
            }
            "--dir" => dir = args.next().expect("--dir DIR").into(),
            "--cc" => {
                let name = args.next().expect("--cc NAME");
                cc = Some(
                    CongestionControl::new(&name).expect("--cc NAME: a congestion control's name"),
                )
            }
            "--read-file" => read_file = Some(args.next().expect("--read-file PATH").into()),
            "--file-mib" => {
                write_mib = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--file-mib N")
            }
            n => nums.push(n.parse::<f64>().expect("SECS and ROUNDS are numbers")),
        }
    }
    let secs = nums.first().copied().unwrap_or(3.0);
    let rounds = nums.get(1).map_or(5, |&r| r as usize).max(1);
    let tag = std::process::id();
    let own_read_file = read_file.is_none();
    let read_path =
        read_file.unwrap_or_else(|| std::env::temp_dir().join(format!("smbx-ceiling-{tag}")));
    let write_path = dir.join(format!("smbx-ceiling-write-{tag}"));
    if let Some((_, cpu)) = pinned {
        pin(cpu);
    }
    let mut modes = Vec::new();
    let read_len = if own_read_file {
        READ_FILE
    } else {
        let len = std::fs::metadata(&read_path).expect("--read-file").len();
        assert!(
            len >= IO as u64,
            "--read-file: smaller than one 512 KiB read"
        );
        len / IO as u64 * IO as u64
    };
    if reads && own_read_file {
        fill(&read_path, READ_FILE >> 20);
    }
    if reads {
        modes.push(Mode::Plain);
        if !only_plain {
            modes.extend([Mode::Sealed, Mode::Signed]);
        }
    }
    if writes {
        fill(&write_path, write_mib);
        modes.extend([Mode::Splice, Mode::Pwrite]);
    }
    if streams > 1 || depth != DEPTH {
        println!("{streams} stream(s), {depth} I/Os in flight each");
    }
    let mut got: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for (i, &m) in modes.iter().enumerate() {
            let (path, len) = if m.is_write() {
                (&write_path, write_mib << 20)
            } else {
                (&read_path, read_len)
            };
            let lay = Layout {
                streams,
                depth,
                pinned,
                cc,
            };
            let g = run(m, secs, path, len, lay);
            println!(
                "round {r} {m:?}: {:.1} MB/s, p50 {:.0} µs, p99 {:.0} µs, \
                 cpu per I/O: server {:.0} µs, client {:.0} µs",
                g.mbs, g.p50_us, g.p99_us, g.server_us, g.client_us
            );
            got[i].push(g);
        }
    }
    if own_read_file {
        let _ = std::fs::remove_file(&read_path);
    }
    let _ = std::fs::remove_file(&write_path);
    let mut plain = None;
    let mut best_write: Option<(Mode, f64, f64, f64)> = None;
    for (m, runs) in modes.iter().zip(&got) {
        let mut mbs: Vec<f64> = runs.iter().map(|g| g.mbs).collect();
        let md = median(&mut mbs);
        let (lo, hi) = (mbs[0], mbs[mbs.len() - 1]);
        let p50 = median(&mut runs.iter().map(|g| g.p50_us).collect::<Vec<_>>());
        let p99 = median(&mut runs.iter().map(|g| g.p99_us).collect::<Vec<_>>());
        let srv = median(&mut runs.iter().map(|g| g.server_us).collect::<Vec<_>>());
        let cli = median(&mut runs.iter().map(|g| g.client_us).collect::<Vec<_>>());
        if *m == Mode::Plain {
            plain = Some(md);
        }
        let share = match plain {
            Some(p) if !m.is_write() => format!(", {:.2}x plain", md / p),
            _ => String::new(),
        };
        println!(
            "{m:?}: median {md:.1} MB/s (min {lo:.1}, max {hi:.1}), p50 {p50:.0} µs, \
             p99 {p99:.0} µs, cpu per I/O server {srv:.0} µs, client {cli:.0} µs{share}"
        );
        if m.is_write() && best_write.is_none_or(|b| md > b.1) {
            best_write = Some((*m, md, p50, p99));
        }
    }
    if let Some((m, md, p50, p99)) = best_write {
        println!("Write ceiling: {md:.1} MB/s, p50 {p50:.0} µs, p99 {p99:.0} µs ({m:?})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_start_apart_on_whole_ios() {
        let len = 64 << 20;
        let starts: Vec<u64> = (0..4).map(|i| first_offset(len, i, 4)).collect();
        assert_eq!(starts, [0, 16 << 20, 32 << 20, 48 << 20]);
        // A file length that is no multiple of the streams: still whole I/Os, inside it.
        for i in 0..3 {
            let at = first_offset(5 * IO as u64, i, 3);
            assert_eq!(at % IO as u64, 0);
            assert!(at < 5 * IO as u64);
        }
        assert_eq!(first_offset(len, 0, 1), 0);
    }

    /// Two streams of one run each serve and drive their own connection, and the run
    /// adds up what both moved.
    #[test]
    fn each_stream_of_a_run_moves_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fill(&path, 2);
        let lay = Layout {
            streams: 2,
            depth: 2,
            pinned: None,
            cc: None,
        };
        let go = std::sync::Arc::new(std::sync::Barrier::new(2));
        let (p, g) = (path.clone(), go.clone());
        let other = std::thread::spawn(move || stream(Mode::Plain, 0.1, &p, 2 << 20, lay, 1, &g));
        let first = stream(Mode::Plain, 0.1, &path, 2 << 20, lay, 0, &go);
        let second = other.join().unwrap();
        for s in [&first, &second] {
            assert!(
                s.bytes >= IO && s.served as usize >= s.bytes / IO,
                "{}",
                s.bytes
            );
        }
        let r = run(Mode::Plain, 0.1, &path, 2 << 20, lay);
        assert!(r.mbs > 0.0 && r.server_us > 0.0 && r.client_us > 0.0);
    }
}
