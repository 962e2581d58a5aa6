//! The machine's ceiling for sealed and signed 512 KiB reads, without SMB: the least
//! work a sealed or signed READ can cost over loopback TCP, in the same run as a plain
//! one. One thread serves (plain: `sendfile` from the page cache; sealed: pread behind
//! room for the TRANSFORM_HEADER, AES-128-GCM in place, one write; signed: pread,
//! AES-GMAC over the message, one write), one thread reads with a queue depth (recv the
//! frame, then open it into a second buffer as the client does, or verify its GMAC).
//! Modes alternate for several rounds; each mode's median GB/s and its share of plain
//! are printed. On 2 cores this bounds what any SMB server and client pair can reach,
//! whatever their code: what is left is the passes over the data they cannot avoid.
//!
//! `cargo run --release -p smbx-security --example protected_ceiling [secs] [rounds]`

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use smbx_security::cipher::CipherId;
use smbx_security::keys::derive;
use smbx_security::protection::{Protection, Role};
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_security::transform::TRANSFORM_HEADER_LEN;
use smbx_wire::Dialect;

const IO: usize = 512 << 10;
const FILE: u64 = 64 << 20;
const DEPTH: usize = 8;
/// A message's header room (the SMB2 header and READ response, rounded).
const HDR: usize = 80;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Plain,
    Sealed,
    Signed,
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

fn serve(mode: Mode, mut s: TcpStream, file: File, keys: Protection) {
    let signer: Signer = Signer::new(SigningAlgorithm::AesGmac, &[1u8; 16]);
    let mut buf = vec![0u8; 4 + TRANSFORM_HEADER_LEN + HDR + IO];
    let mut req = [0u8; 8];
    while s.read_exact(&mut req).is_ok() {
        let off = u64::from_le_bytes(req);
        match mode {
            Mode::Plain => {
                let mut hdr = [0u8; 4 + HDR];
                hdr[..4].copy_from_slice(&((HDR + IO) as u32).to_be_bytes());
                if s.write_all(&hdr).is_err() {
                    return;
                }
                if sendfile(&s, &file, off, IO).is_err() {
                    return;
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
                    return;
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
                    return;
                }
            }
        }
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
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        left -= n as usize;
    }
    Ok(())
}

fn run(mode: Mode, secs: f64, path: &std::path::Path) -> f64 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (server_keys, client_keys) = keys();
    let file = File::open(path).unwrap();
    let srv = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        serve(mode, s, file, server_keys);
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut w = c.try_clone().unwrap();
    let signer = Signer::new(SigningAlgorithm::AesGmac, &[1u8; 16]);
    let mut off = 0u64;
    let mut next = |w: &mut TcpStream| {
        w.write_all(&off.to_le_bytes()).unwrap();
        off = (off + IO as u64) % FILE;
    };
    for _ in 0..DEPTH {
        next(&mut w);
    }
    let mut frame = Vec::new();
    let mut plain = Vec::new();
    let (mut bytes, t) = (0usize, Instant::now());
    let end = t + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        let mut h = [0u8; 4];
        c.read_exact(&mut h).unwrap();
        let n = u32::from_be_bytes(h) as usize;
        frame.resize(n, 0);
        c.read_exact(&mut frame).unwrap();
        next(&mut w);
        match mode {
            Mode::Plain => {}
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
    let gbs = bytes as f64 / t.elapsed().as_secs_f64() / 1e9;
    drop(w);
    let _ = c.shutdown(std::net::Shutdown::Both);
    drop(c);
    let _ = srv.join();
    gbs
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let path = std::env::temp_dir().join(format!("smbx-ceiling-{}", std::process::id()));
    {
        let mut f = File::create(&path).unwrap();
        let chunk: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 2654435761) as u8).collect();
        for _ in 0..FILE >> 20 {
            f.write_all(&chunk).unwrap();
        }
    }
    let modes = [Mode::Plain, Mode::Sealed, Mode::Signed];
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for r in 0..rounds {
        for (i, m) in modes.iter().enumerate() {
            let g = run(*m, secs, &path);
            println!("round {r} {m:?}: {g:.2} GB/s");
            got[i].push(g);
        }
    }
    let _ = std::fs::remove_file(&path);
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let plain = med(&mut got[0]);
    for (i, m) in modes.iter().enumerate() {
        let md = med(&mut got[i]);
        let (lo, hi) = (got[i][0], got[i][got[i].len() - 1]);
        println!(
            "{m:?}: median {md:.2} GB/s (min {lo:.2}, max {hi:.2}), {:.2}x plain",
            md / plain
        );
    }
}
