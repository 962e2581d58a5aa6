//! The ceiling for protected I/O: how fast this machine seals, opens and signs one
//! 512 KiB message per core with the primitives smbx uses (aws-lc AES-GCM, GMAC over
//! the whole message, AES-CMAC, RustCrypto AES-CCM), through the same entry points the
//! server and client call. Prints GB/s (best and median of several rounds).
//!
//! `cargo run --release -p smbx-security --example crypto_speed [size] [rounds]`

use std::time::Instant;

use smbx_security::cipher::{CipherId, Sealer};
use smbx_security::signing::{Signer, SigningAlgorithm};

fn rate(name: &str, size: usize, rounds: usize, mut f: impl FnMut()) {
    // Enough iterations per round for ~50 ms at a few GB/s.
    let iters = (256 << 20) / size.max(1);
    f();
    let mut gbs: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            (size * iters) as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    gbs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name:<28} {size:>8} B  best {:>6.2} GB/s  median {:>6.2} GB/s",
        gbs[gbs.len() - 1],
        gbs[gbs.len() / 2]
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(512 << 10);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let mut data = vec![0x5au8; size];
    let nonce = [1u8; 12];
    let aad = [2u8; 32];

    for c in [CipherId::Aes128Gcm, CipherId::Aes128Ccm] {
        let s = Sealer::new(c, &[3u8; 16]).unwrap();
        let n = &nonce[..c.nonce_len()];
        rate(&format!("{} seal in place", c.name()), size, rounds, || {
            std::hint::black_box(s.encrypt_in_place(n, &aad, &mut data).unwrap());
        });
        let tag = s.encrypt_in_place(n, &aad, &mut data).unwrap();
        let sealed = data.clone();
        let mut out = vec![0u8; size];
        rate(&format!("{} open to", c.name()), size, rounds, || {
            s.decrypt_to(n, &aad, &sealed, &tag, &mut out).unwrap();
        });
    }
    // The client's receive: the frame copied in from the socket, then opened either
    // into a second buffer (what `unseal_with` does) or where it lies.
    let s = Sealer::new(CipherId::Aes128Gcm, &[3u8; 16]).unwrap();
    let mut wire = vec![0x5au8; size];
    let tag = s.encrypt_in_place(&nonce, &aad, &mut wire).unwrap();
    let mut frame = vec![0u8; size];
    let mut plain = vec![0u8; size];
    rate("recv copy + GCM open to", size, rounds, || {
        frame.copy_from_slice(std::hint::black_box(&wire));
        s.decrypt_to(&nonce, &aad, &frame, &tag, &mut plain)
            .unwrap();
    });
    rate("recv copy + GCM open in place", size, rounds, || {
        frame.copy_from_slice(std::hint::black_box(&wire));
        s.decrypt_in_place(&nonce, &aad, &mut frame, &tag).unwrap();
    });
    rate("recv copy alone", size, rounds, || {
        frame.copy_from_slice(std::hint::black_box(&wire));
    });
    let mut msg = vec![0x5au8; size.max(64)];
    msg[..4].copy_from_slice(&[0xfe, b'S', b'M', b'B']);
    for alg in [SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac] {
        let s = Signer::new(alg, &[4u8; 16]);
        rate(&format!("{} sign", alg.name()), size, rounds, || {
            s.sign(&mut msg);
        });
        rate(
            &format!("{} verify in place", alg.name()),
            size,
            rounds,
            || {
                assert!(s.verify_in_place(&mut msg));
            },
        );
    }
    let src = vec![0x5au8; size];
    let mut dst = vec![0u8; size];
    rate("memcpy (reference)", size, rounds, || {
        dst.copy_from_slice(std::hint::black_box(&src));
    });
}
