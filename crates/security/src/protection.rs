//! One session's (or channel's) message protection, the same for both ends of a
//! connection: signing and verifying messages, sealing them into a TRANSFORM_HEADER
//! with a fresh nonce, and unsealing what the peer sealed ([MS-SMB2] 3.1.4.1, 3.1.4.3,
//! 3.2.5.1.1, 3.3.5.2.1).
//!
//! The server and the client differ only in which derived key seals and which unseals
//! ([`Role`]). A channel bound to a session signs with its own key and shares the
//! session's sealing keys and nonce source, so no nonce repeats under a key however
//! many channels seal with it ([`Protection::for_channel`]).
//!
//! Buffers stay the caller's: [`Protection::seal_in_place`] seals a message behind
//! room it left for the header, [`Protection::unseal_with`] decrypts into a buffer the
//! caller takes (from a pool) at the plaintext's exact size.

use std::sync::Arc;

use crate::cipher::{CipherId, Sealer};
use crate::keys::SessionKeys;
use crate::signing::{Signer, SigningAlgorithm};
use crate::transform::{self, NonceSource, TRANSFORM_HEADER_LEN};
use crate::CryptoError;

/// Which end of the connection protects: it decides which derived key seals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The server seals with the server-to-client key.
    Server,
    /// The client seals with the client-to-server key.
    Client,
}

/// Signing and sealing keys of one session on one channel.
#[derive(Debug, Default)]
pub struct Protection {
    signer: Option<Signer>,
    /// Seals what this end sends.
    sealer: Option<Arc<Sealer>>,
    /// Unseals what the peer sends.
    opener: Option<Arc<Sealer>>,
    /// Nonces for `sealer`, shared by every channel of the session.
    nonces: Option<Arc<NonceSource>>,
}

impl Protection {
    /// No keys: a guest or anonymous session, or one still authenticating.
    pub fn none() -> Protection {
        Protection::default()
    }

    /// Signing only, with `signer`.
    pub fn signing(signer: Signer) -> Protection {
        Protection {
            signer: Some(signer),
            ..Protection::default()
        }
    }

    /// Builds a session's protection from its derived keys: a signer for `alg`, and
    /// (with `cipher`, when the key schedule produced encryption keys) the sealing keys
    /// for `role` and a nonce source. `keys` holds both directions' keys as
    /// [`crate::keys::derive`] names them (the server encrypts with `encrypt_s2c`).
    pub fn new(
        keys: &SessionKeys,
        role: Role,
        alg: SigningAlgorithm,
        cipher: Option<CipherId>,
    ) -> Result<Protection, CryptoError> {
        let mut p = Protection::signing(Signer::new(alg, &keys.signing));
        if let Some(c) = cipher {
            let (seal, open) = match role {
                Role::Server => (&keys.encrypt_s2c, &keys.decrypt_c2s),
                Role::Client => (&keys.decrypt_c2s, &keys.encrypt_s2c),
            };
            if !seal.is_empty() && !open.is_empty() {
                p.sealer = Some(Arc::new(Sealer::new(c, seal)?));
                p.opener = Some(Arc::new(Sealer::new(c, open)?));
                p.nonces = Some(Arc::new(NonceSource::new(c)));
            }
        }
        Ok(p)
    }

    /// The protection of a channel bound to this session ([MS-SMB2] 3.2.5.3.1,
    /// 3.3.5.5.2): its own signer; the session's sealing keys and nonce source.
    pub fn for_channel(&self, signer: Signer) -> Protection {
        Protection {
            signer: Some(signer),
            sealer: self.sealer.clone(),
            opener: self.opener.clone(),
            nonces: self.nonces.clone(),
        }
    }

    /// The signer, once keys exist.
    pub fn signer(&self) -> Option<&Signer> {
        self.signer.as_ref()
    }

    /// True if messages can be signed.
    pub fn can_sign(&self) -> bool {
        self.signer.is_some()
    }

    /// True if messages can be sealed (3.x with a cipher).
    pub fn can_seal(&self) -> bool {
        self.sealer.is_some()
    }

    /// The cipher sealing uses, if any.
    pub fn cipher(&self) -> Option<CipherId> {
        self.sealer.as_ref().map(|s| s.cipher())
    }

    /// Signs one message (one compound member, header first). Returns false, leaving
    /// the message as it was, when there is no signing key.
    pub fn sign(&self, msg: &mut [u8]) -> bool {
        match &self.signer {
            Some(s) => {
                s.sign(msg);
                true
            }
            None => false,
        }
    }

    /// Checks one received message's signature; false without a signing key.
    pub fn verify(&self, msg: &[u8]) -> bool {
        self.signer.as_ref().is_some_and(|s| s.verify(msg))
    }

    /// Like [`Protection::verify`] without copying the message for GMAC (the
    /// Signature field is zeroed during the check and restored).
    pub fn verify_in_place(&self, msg: &mut [u8]) -> bool {
        self.signer.as_ref().is_some_and(|s| s.verify_in_place(msg))
    }

    /// Seals in place a message whose first [`TRANSFORM_HEADER_LEN`] bytes are room
    /// for the header, with the next nonce of the session.
    pub fn seal_in_place(&self, session_id: u64, buf: &mut [u8]) -> Result<(), CryptoError> {
        let (Some(sealer), Some(nonces)) = (&self.sealer, &self.nonces) else {
            return Err(CryptoError::NoKey);
        };
        let nonce = nonces.next()?;
        transform::seal_in_place(sealer, session_id, &nonce, buf)
    }

    /// Seals `msg` into a new TRANSFORM_HEADER || ciphertext.
    pub fn seal(&self, session_id: u64, msg: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut buf = Vec::with_capacity(TRANSFORM_HEADER_LEN + msg.len());
        buf.resize(TRANSFORM_HEADER_LEN, 0);
        buf.extend_from_slice(msg);
        self.seal_in_place(session_id, &mut buf)?;
        Ok(buf)
    }

    /// Checks and decrypts a sealed message (TRANSFORM_HEADER first) into a buffer
    /// that `take` returns for the plaintext's length (`take` must return exactly that
    /// many bytes: a pooled buffer, never zero-filled first, is fine).
    pub fn unseal_with(
        &self,
        frame: &[u8],
        take: impl FnOnce(usize) -> Vec<u8>,
    ) -> Result<Vec<u8>, CryptoError> {
        let opener = self.opener.as_ref().ok_or(CryptoError::NoKey)?;
        let len = frame
            .len()
            .checked_sub(TRANSFORM_HEADER_LEN)
            .ok_or(CryptoError::Malformed("shorter than TRANSFORM_HEADER"))?;
        let mut plain = take(len);
        if plain.len() != len {
            return Err(CryptoError::Internal);
        }
        transform::unseal_to(opener, frame, &mut plain)?;
        Ok(plain)
    }

    /// Checks and decrypts a sealed message into a new buffer.
    pub fn unseal(&self, frame: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.unseal_with(frame, |n| vec![0; n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::derive;
    use smbx_wire::Dialect;

    fn pair(cipher: Option<CipherId>) -> (Protection, Protection) {
        let keys = derive(Dialect::SMB3_1_1, &[7u8; 16], Some(&[1u8; 64]), cipher);
        let alg = SigningAlgorithm::AesGmac;
        (
            Protection::new(&keys, Role::Server, alg, cipher).unwrap(),
            Protection::new(&keys, Role::Client, alg, cipher).unwrap(),
        )
    }

    fn message(len: usize) -> Vec<u8> {
        let mut m = vec![0u8; len];
        m[..4].copy_from_slice(&[0xfe, b'S', b'M', b'B']);
        for (i, b) in m.iter_mut().enumerate().skip(64) {
            *b = i as u8;
        }
        m
    }

    #[test]
    fn each_end_opens_what_the_other_sealed_and_not_its_own() {
        for c in [
            CipherId::Aes128Ccm,
            CipherId::Aes128Gcm,
            CipherId::Aes256Ccm,
            CipherId::Aes256Gcm,
        ] {
            let (server, client) = pair(Some(c));
            let msg = message(200);
            let sealed = server.seal(9, &msg).unwrap();
            assert_eq!(client.unseal(&sealed).unwrap(), msg);
            assert!(server.unseal(&sealed).is_err(), "{c:?}: own key opened");
            let sealed = client.seal(9, &msg).unwrap();
            assert_eq!(server.unseal(&sealed).unwrap(), msg);
            assert!(client.unseal(&sealed).is_err());
        }
    }

    #[test]
    fn in_place_and_pooled_forms_agree_with_the_plain_ones() {
        let (server, client) = pair(Some(CipherId::Aes128Gcm));
        let msg = message(4096);
        let mut buf = vec![0u8; TRANSFORM_HEADER_LEN];
        buf.extend_from_slice(&msg);
        server.seal_in_place(3, &mut buf).unwrap();
        assert_eq!(transform::parse_header(&buf).unwrap().session_id, 3);
        let mut asked = 0;
        let plain = client
            .unseal_with(&buf, |n| {
                asked = n;
                vec![0xaa; n]
            })
            .unwrap();
        assert_eq!(asked, msg.len());
        assert_eq!(plain, msg);
        // A buffer of the wrong size is refused, not overrun.
        assert!(client.unseal_with(&buf, |n| vec![0; n + 1]).is_err());
        // Hostile input: truncated, tampered.
        assert!(client.unseal(&buf[..40]).is_err());
        let mut bad = buf.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(client.unseal(&bad).is_err());
    }

    #[test]
    fn nonces_never_repeat_across_channels() {
        let (server, _) = pair(Some(CipherId::Aes128Gcm));
        let ch = server.for_channel(Signer::new(SigningAlgorithm::AesCmac, &[2u8; 16]));
        let a = server.seal(1, &message(80)).unwrap();
        let b = ch.seal(1, &message(80)).unwrap();
        let na = transform::parse_header(&a).unwrap().nonce;
        let nb = transform::parse_header(&b).unwrap().nonce;
        assert_ne!(na, nb);
        // The channel signs with its own key, not the session's.
        let mut m = message(100);
        ch.sign(&mut m);
        assert!(ch.verify(&m));
        assert!(!server.verify(&m));
        assert!(ch.verify_in_place(&mut m.clone()));
    }

    #[test]
    fn without_keys_nothing_is_signed_or_sealed() {
        let p = Protection::none();
        let mut m = message(100);
        assert!(!p.sign(&mut m));
        assert_eq!(m, message(100));
        assert!(!p.verify(&m));
        assert!(p.seal(1, &m).is_err());
        let (signing_only, _) = pair(None);
        assert!(signing_only.can_sign() && !signing_only.can_seal());
        assert!(signing_only.seal(1, &m).is_err());
    }
}
