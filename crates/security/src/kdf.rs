//! The SMB 3.x key derivation function ([MS-SMB2] 3.1.4.2): SP800-108 in counter mode
//! with HMAC-SHA256 as the PRF, a 32-bit counter (r = 32) and a 32-bit output length L.

use aws_lc_rs::hmac;
use aws_lc_rs::kdf::{get_kbkdf_ctr_hmac_algorithm, kbkdf_ctr_hmac, KbkdfCtrHmacAlgorithmId};

/// Derives `out_bits / 8` bytes: K(i) = HMAC-SHA256(key, [i]_32 || label || 0x00 || context || [L]_32).
///
/// `label` and `context` are passed exactly as [MS-SMB2] lists them, *including* their
/// trailing NUL (e.g. `b"SMB2AESCMAC\0"`); the extra 0x00 separator is added here.
pub fn smb3_kdf(key: &[u8], label: &[u8], context: &[u8], out_bits: u32) -> Vec<u8> {
    let out_len = (out_bits as usize).div_ceil(8);
    let mut info = Vec::with_capacity(label.len() + context.len() + 5);
    info.extend_from_slice(label);
    info.push(0);
    info.extend_from_slice(context);
    info.extend_from_slice(&out_bits.to_be_bytes());
    let mut out = vec![0u8; out_len];
    if out_len == 0 {
        return out;
    }
    let alg = get_kbkdf_ctr_hmac_algorithm(KbkdfCtrHmacAlgorithmId::Sha256).expect("SHA-256 KBKDF");
    if key.is_empty() || kbkdf_ctr_hmac(alg, key, &info, &mut out).is_err() {
        // The library refuses an empty key; the construction is still well defined.
        manual(key, &info, &mut out);
    }
    out
}

fn manual(key: &[u8], info: &[u8], out: &mut [u8]) {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let mut ctx = hmac::Context::with_key(&k);
        ctx.update(&(i as u32 + 1).to_be_bytes());
        ctx.update(info);
        let t = ctx.sign();
        chunk.copy_from_slice(&t.as_ref()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_and_manual_agree() {
        for bits in [128u32, 256, 384] {
            let a = smb3_kdf(b"0123456789abcdef", b"L\0", b"C\0", bits);
            let mut info = b"L\0\0C\0".to_vec();
            info.extend_from_slice(&bits.to_be_bytes());
            let mut b = vec![0u8; bits as usize / 8];
            manual(b"0123456789abcdef", &info, &mut b);
            assert_eq!(a, b);
        }
    }
}
