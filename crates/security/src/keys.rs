//! The SMB2/3 session key schedule ([MS-SMB2] 3.3.5.5.3), from the server's point of view.

use crate::cipher::CipherId;
use crate::kdf::smb3_kdf;
use smbx_wire::Dialect;

/// The keys of one session (or channel, for `signing`), server side.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    /// Signing key (HMAC-SHA256 key for 2.x, CMAC/GMAC key for 3.x).
    pub signing: Vec<u8>,
    /// Key the server encrypts with (server-to-client); empty before 3.0.
    pub encrypt_s2c: Vec<u8>,
    /// Key the server decrypts with (client-to-server); empty before 3.0.
    pub decrypt_c2s: Vec<u8>,
    /// Application key; empty before 3.0.
    pub application: Vec<u8>,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys { .. }")
    }
}

/// Session.SessionKey: the first 16 bytes of the authentication key, zero-padded.
fn key16(session_key: &[u8]) -> [u8; 16] {
    let mut k = [0u8; 16];
    let n = session_key.len().min(16);
    k[..n].copy_from_slice(&session_key[..n]);
    k
}

/// Derives the session's keys.
///
/// * 2.0.2 / 2.1: `signing` = Session.SessionKey; no encryption or application keys.
/// * 3.0 / 3.0.2: the fixed labels and contexts of [MS-SMB2] 3.1.4.2.
/// * 3.1.1: the 3.1.1 labels with `preauth_hash` as context (zeros if `None`). With a
///   256-bit cipher the encryption keys are 32 bytes, derived from the full session key.
pub fn derive(
    dialect: Dialect,
    session_key: &[u8],
    preauth_hash: Option<&[u8; 64]>,
    cipher: Option<CipherId>,
) -> SessionKeys {
    let sk = key16(session_key);
    match dialect {
        Dialect::SMB3_0 | Dialect::SMB3_0_2 => SessionKeys {
            signing: smb3_kdf(&sk, b"SMB2AESCMAC\0", b"SmbSign\0", 128),
            decrypt_c2s: smb3_kdf(&sk, b"SMB2AESCCM\0", b"ServerIn \0", 128),
            encrypt_s2c: smb3_kdf(&sk, b"SMB2AESCCM\0", b"ServerOut\0", 128),
            application: smb3_kdf(&sk, b"SMB2APP\0", b"SmbRpc\0", 128),
        },
        Dialect::SMB3_1_1 => {
            let zero = [0u8; 64];
            let ctx: &[u8] = preauth_hash.map_or(&zero[..], |h| &h[..]);
            let (ekey, bits): (&[u8], u32) = match cipher {
                Some(c) if c.key_len() == 32 => (session_key, 256),
                _ => (&sk, 128),
            };
            SessionKeys {
                signing: smb3_kdf(&sk, b"SMBSigningKey\0", ctx, 128),
                decrypt_c2s: smb3_kdf(ekey, b"SMBC2SCipherKey\0", ctx, bits),
                encrypt_s2c: smb3_kdf(ekey, b"SMBS2CCipherKey\0", ctx, bits),
                application: smb3_kdf(&sk, b"SMBAppKey\0", ctx, 128),
            }
        }
        _ => SessionKeys {
            signing: sk.to_vec(),
            encrypt_s2c: Vec::new(),
            decrypt_c2s: Vec::new(),
            application: Vec::new(),
        },
    }
}
