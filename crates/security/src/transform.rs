//! The SMB2 TRANSFORM_HEADER ([MS-SMB2] 2.2.41) and sealing of whole messages.
//!
//! Layout (52 bytes): ProtocolId `FD 'S' 'M' 'B'`, Signature[16], Nonce[16],
//! OriginalMessageSize u32, Reserved u16, Flags/EncryptionAlgorithm u16 (= 1),
//! SessionId u64. The AAD is bytes 20..52; the ciphertext follows the header.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::cipher::{CipherId, Sealer};
use crate::CryptoError;

/// Size of the TRANSFORM_HEADER.
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// The TRANSFORM_HEADER protocol id.
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xfd, b'S', b'M', b'B'];
/// Flags = Encrypted (3.1.1) / EncryptionAlgorithm = AES-128-CCM (3.0): both 0x0001.
pub const FLAG_ENCRYPTED: u16 = 1;

/// A parsed TRANSFORM_HEADER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformHeader {
    /// The AEAD tag.
    pub signature: [u8; 16],
    /// The 16-byte nonce field (only the first 11 or 12 bytes are the nonce).
    pub nonce: [u8; 16],
    /// Size of the plaintext message.
    pub original_size: u32,
    /// Flags / EncryptionAlgorithm.
    pub flags: u16,
    /// The session whose keys sealed the message.
    pub session_id: u64,
}

/// Parses the 52-byte header at the start of `buf`.
pub fn parse_header(buf: &[u8]) -> Result<TransformHeader, CryptoError> {
    let h = buf
        .get(..TRANSFORM_HEADER_LEN)
        .ok_or(CryptoError::Malformed("shorter than TRANSFORM_HEADER"))?;
    if h[..4] != TRANSFORM_PROTOCOL_ID {
        return Err(CryptoError::Malformed("not a TRANSFORM_HEADER"));
    }
    let mut signature = [0u8; 16];
    signature.copy_from_slice(&h[4..20]);
    let mut nonce = [0u8; 16];
    nonce.copy_from_slice(&h[20..36]);
    Ok(TransformHeader {
        signature,
        nonce,
        original_size: u32::from_le_bytes([h[36], h[37], h[38], h[39]]),
        flags: u16::from_le_bytes([h[42], h[43]]),
        session_id: u64::from_le_bytes(h[44..52].try_into().expect("8 bytes")),
    })
}

/// The 16-byte header nonce field from `nonce`: either exactly the cipher's nonce length
/// (zero-padded) or a full 16-byte field (sent as is; only its prefix keys the AEAD).
fn nonce_field(cipher: CipherId, nonce: &[u8]) -> Result<[u8; 16], CryptoError> {
    let mut f = [0u8; 16];
    if nonce.len() == cipher.nonce_len() || nonce.len() == 16 {
        f[..nonce.len()].copy_from_slice(nonce);
        Ok(f)
    } else {
        Err(CryptoError::BadNonceLength)
    }
}

/// Seals a message whose first 52 bytes are reserved for the header, in place: writes the
/// header and encrypts `buf[52..]`. This is the zero-copy form of [`seal`].
pub fn seal_in_place(
    sealer: &Sealer,
    session_id: u64,
    nonce: &[u8],
    buf: &mut [u8],
) -> Result<(), CryptoError> {
    if buf.len() < TRANSFORM_HEADER_LEN {
        return Err(CryptoError::Malformed(
            "buffer shorter than TRANSFORM_HEADER",
        ));
    }
    let cipher = sealer.cipher();
    let field = nonce_field(cipher, nonce)?;
    let size = u32::try_from(buf.len() - TRANSFORM_HEADER_LEN)
        .map_err(|_| CryptoError::Malformed("message too large"))?;
    let (hdr, body) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
    hdr[..4].copy_from_slice(&TRANSFORM_PROTOCOL_ID);
    hdr[4..20].fill(0);
    hdr[20..36].copy_from_slice(&field);
    hdr[36..40].copy_from_slice(&size.to_le_bytes());
    hdr[40..42].fill(0);
    hdr[42..44].copy_from_slice(&FLAG_ENCRYPTED.to_le_bytes());
    hdr[44..52].copy_from_slice(&session_id.to_le_bytes());
    let tag = sealer.encrypt_in_place(&field[..cipher.nonce_len()], &hdr[20..52], body)?;
    hdr[4..20].copy_from_slice(&tag);
    Ok(())
}

/// Seals `msg` and returns TRANSFORM_HEADER || ciphertext.
pub fn seal(
    sealer: &Sealer,
    session_id: u64,
    nonce: &[u8],
    msg: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    let mut buf = Vec::with_capacity(TRANSFORM_HEADER_LEN + msg.len());
    buf.resize(TRANSFORM_HEADER_LEN, 0);
    buf.extend_from_slice(msg);
    seal_in_place(sealer, session_id, nonce, &mut buf)?;
    Ok(buf)
}

/// The header of a sealed message whose OriginalMessageSize is the bytes after the
/// header and whose Flags say encrypted.
fn checked_header(buf: &[u8]) -> Result<TransformHeader, CryptoError> {
    let h = parse_header(buf)?;
    if h.original_size as usize != buf.len() - TRANSFORM_HEADER_LEN {
        return Err(CryptoError::Malformed("OriginalMessageSize mismatch"));
    }
    if h.flags != FLAG_ENCRYPTED {
        return Err(CryptoError::Malformed("unknown TRANSFORM_HEADER flags"));
    }
    Ok(h)
}

/// Checks and decrypts a sealed message in place, returning the plaintext slice
/// (`buf[52..]`). OriginalMessageSize must equal the bytes after the header.
pub fn unseal_in_place<'a>(
    sealer: &Sealer,
    buf: &'a mut [u8],
) -> Result<&'a mut [u8], CryptoError> {
    let h = checked_header(buf)?;
    let n = sealer.cipher().nonce_len();
    let (hdr, body) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
    sealer.decrypt_in_place(&h.nonce[..n], &hdr[20..52], body, &h.signature)?;
    Ok(body)
}

/// Checks a sealed message and decrypts its body into `out`, which must be exactly the
/// body's length (`buf.len() - 52`): no copy before and no move after.
pub fn unseal_to(sealer: &Sealer, buf: &[u8], out: &mut [u8]) -> Result<(), CryptoError> {
    let h = checked_header(buf)?;
    let n = sealer.cipher().nonce_len();
    let (hdr, body) = buf.split_at(TRANSFORM_HEADER_LEN);
    sealer.decrypt_to(&h.nonce[..n], &hdr[20..52], body, &h.signature, out)
}

/// Checks and decrypts a sealed message, returning the plaintext.
pub fn unseal(sealer: &Sealer, buf: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let mut out = vec![0; buf.len().saturating_sub(TRANSFORM_HEADER_LEN)];
    unseal_to(sealer, buf, &mut out)?;
    Ok(out)
}

/// A per-session unique nonce generator: a 64-bit counter followed by a random salt
/// fixed for the generator's lifetime, so nonces never repeat under one key. Safe to
/// share between the channels of a multichannel session.
#[derive(Debug)]
pub struct NonceSource {
    cipher: CipherId,
    counter: AtomicU64,
    salt: [u8; 4],
}

impl NonceSource {
    /// A generator for `cipher` (11-byte nonces for CCM, 12 for GCM).
    pub fn new(cipher: CipherId) -> NonceSource {
        let mut salt = [0u8; 4];
        let _ = aws_lc_rs::rand::fill(&mut salt);
        NonceSource {
            cipher,
            counter: AtomicU64::new(0),
            salt,
        }
    }

    /// The nonce length in use.
    pub fn nonce_len(&self) -> usize {
        self.cipher.nonce_len()
    }

    /// The next nonce as a 16-byte header field (bytes past `nonce_len()` are zero).
    /// Fails only after 2^64 - 1 nonces.
    pub fn next(&self) -> Result<[u8; 16], CryptoError> {
        let c = self
            .counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_add(1))
            .map_err(|_| CryptoError::NonceExhausted)?;
        let mut f = [0u8; 16];
        f[..8].copy_from_slice(&c.to_le_bytes());
        let n = self.cipher.nonce_len();
        f[8..n].copy_from_slice(&self.salt[..n - 8]);
        Ok(f)
    }
}
