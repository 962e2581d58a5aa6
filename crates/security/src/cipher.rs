//! SMB 3.x authenticated encryption: AES-128/256-GCM (aws-lc) and AES-128/256-CCM
//! (RustCrypto `ccm`), with 16-byte tags and the SMB nonce sizes (12 for GCM, 11 for CCM).

use aes::{Aes128, Aes256};
use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use ccm::aead::generic_array::GenericArray;
use ccm::aead::AeadInPlace;
use ccm::consts::{U11, U16};
use ccm::{Ccm, KeyInit};

use crate::CryptoError;

/// An SMB 3.x cipher, by its wire id (SMB2_ENCRYPTION_CAPABILITIES).
#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CipherId {
    /// AES-128-CCM (the only cipher of SMB 3.0 / 3.0.2).
    Aes128Ccm = 1,
    /// AES-128-GCM.
    Aes128Gcm = 2,
    /// AES-256-CCM.
    Aes256Ccm = 3,
    /// AES-256-GCM.
    Aes256Gcm = 4,
}

impl CipherId {
    /// The cipher for a wire id, or `None` if unknown.
    pub fn from_wire(v: u16) -> Option<CipherId> {
        Some(match v {
            1 => CipherId::Aes128Ccm,
            2 => CipherId::Aes128Gcm,
            3 => CipherId::Aes256Ccm,
            4 => CipherId::Aes256Gcm,
            _ => return None,
        })
    }

    /// The wire id.
    pub fn to_wire(self) -> u16 {
        self as u16
    }

    /// The name operators know it by (as Samba's smbstatus prints it).
    pub fn name(self) -> &'static str {
        match self {
            CipherId::Aes128Ccm => "AES-128-CCM",
            CipherId::Aes128Gcm => "AES-128-GCM",
            CipherId::Aes256Ccm => "AES-256-CCM",
            CipherId::Aes256Gcm => "AES-256-GCM",
        }
    }

    /// Key length in bytes (16 or 32).
    pub fn key_len(self) -> usize {
        match self {
            CipherId::Aes128Ccm | CipherId::Aes128Gcm => 16,
            CipherId::Aes256Ccm | CipherId::Aes256Gcm => 32,
        }
    }

    /// Nonce length in bytes: 11 for CCM, 12 for GCM.
    pub fn nonce_len(self) -> usize {
        match self {
            CipherId::Aes128Ccm | CipherId::Aes256Ccm => 11,
            CipherId::Aes128Gcm | CipherId::Aes256Gcm => 12,
        }
    }

    /// True for the GCM ciphers.
    pub fn is_gcm(self) -> bool {
        matches!(self, CipherId::Aes128Gcm | CipherId::Aes256Gcm)
    }
}

type Aes128Ccm = Ccm<Aes128, U16, U11>;
type Aes256Ccm = Ccm<Aes256, U16, U11>;

/// A GCM nonce from the message's bytes (12 of them).
fn gcm_nonce(nonce: &[u8]) -> Result<Nonce, CryptoError> {
    Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::BadNonceLength)
}

enum Inner {
    Gcm(LessSafeKey),
    Ccm128(Box<Aes128Ccm>),
    Ccm256(Box<Aes256Ccm>),
}

/// An AEAD key for one direction of one session.
pub struct Sealer {
    cipher: CipherId,
    inner: Inner,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer for `cipher` with `key` (16 or 32 bytes, matching the cipher).
    pub fn new(cipher: CipherId, key: &[u8]) -> Result<Sealer, CryptoError> {
        if key.len() != cipher.key_len() {
            return Err(CryptoError::BadKeyLength);
        }
        let inner = match cipher {
            CipherId::Aes128Gcm | CipherId::Aes256Gcm => {
                let alg = if cipher == CipherId::Aes128Gcm {
                    &aead::AES_128_GCM
                } else {
                    &aead::AES_256_GCM
                };
                let k = UnboundKey::new(alg, key).map_err(|_| CryptoError::BadKeyLength)?;
                Inner::Gcm(LessSafeKey::new(k))
            }
            CipherId::Aes128Ccm => Inner::Ccm128(Box::new(
                Aes128Ccm::new_from_slice(key).map_err(|_| CryptoError::BadKeyLength)?,
            )),
            CipherId::Aes256Ccm => Inner::Ccm256(Box::new(
                Aes256Ccm::new_from_slice(key).map_err(|_| CryptoError::BadKeyLength)?,
            )),
        };
        Ok(Sealer { cipher, inner })
    }

    /// The cipher of this key.
    pub fn cipher(&self) -> CipherId {
        self.cipher
    }

    /// Encrypts `data` in place and returns the 16-byte tag. `nonce` must be exactly
    /// `cipher.nonce_len()` bytes.
    pub fn encrypt_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        data: &mut [u8],
    ) -> Result<[u8; 16], CryptoError> {
        if nonce.len() != self.cipher.nonce_len() {
            return Err(CryptoError::BadNonceLength);
        }
        let mut out = [0u8; 16];
        match &self.inner {
            Inner::Gcm(k) => {
                let n = gcm_nonce(nonce)?;
                let tag = k
                    .seal_in_place_separate_tag(n, Aad::from(aad), data)
                    .map_err(|_| CryptoError::Internal)?;
                out.copy_from_slice(tag.as_ref());
            }
            Inner::Ccm128(c) => {
                let tag = c
                    .encrypt_in_place_detached(GenericArray::from_slice(nonce), aad, data)
                    .map_err(|_| CryptoError::Internal)?;
                out.copy_from_slice(&tag);
            }
            Inner::Ccm256(c) => {
                let tag = c
                    .encrypt_in_place_detached(GenericArray::from_slice(nonce), aad, data)
                    .map_err(|_| CryptoError::Internal)?;
                out.copy_from_slice(&tag);
            }
        }
        Ok(out)
    }

    /// Verifies `tag` and decrypts `data` in place. On failure `data` holds unspecified
    /// bytes and must be discarded.
    pub fn decrypt_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        data: &mut [u8],
        tag: &[u8; 16],
    ) -> Result<(), CryptoError> {
        if nonce.len() != self.cipher.nonce_len() {
            return Err(CryptoError::BadNonceLength);
        }
        match &self.inner {
            Inner::Gcm(k) => {
                let n = gcm_nonce(nonce)?;
                k.open_in_place_separate_tag(n, Aad::from(aad), tag, data)
                    .map_err(|_| CryptoError::AuthenticationFailed)?;
            }
            Inner::Ccm128(c) => c
                .decrypt_in_place_detached(
                    GenericArray::from_slice(nonce),
                    aad,
                    data,
                    GenericArray::from_slice(tag),
                )
                .map_err(|_| CryptoError::AuthenticationFailed)?,
            Inner::Ccm256(c) => c
                .decrypt_in_place_detached(
                    GenericArray::from_slice(nonce),
                    aad,
                    data,
                    GenericArray::from_slice(tag),
                )
                .map_err(|_| CryptoError::AuthenticationFailed)?,
        }
        Ok(())
    }

    /// Authenticates and decrypts `input` into `out` (of the same length): the
    /// plaintext lands where it is wanted, with no pass to move it afterwards.
    pub fn decrypt_to(
        &self,
        nonce: &[u8],
        aad: &[u8],
        input: &[u8],
        tag: &[u8; 16],
        out: &mut [u8],
    ) -> Result<(), CryptoError> {
        if out.len() != input.len() {
            return Err(CryptoError::Malformed("output length differs from input"));
        }
        if nonce.len() != self.cipher.nonce_len() {
            return Err(CryptoError::BadNonceLength);
        }
        match &self.inner {
            Inner::Gcm(k) => {
                let n = gcm_nonce(nonce)?;
                k.open_separate_gather(n, Aad::from(aad), input, tag, out)
                    .map_err(|_| CryptoError::AuthenticationFailed)
            }
            Inner::Ccm128(_) | Inner::Ccm256(_) => {
                out.copy_from_slice(input);
                self.decrypt_in_place(nonce, aad, out, tag)
            }
        }
    }

    /// AES-GCM with an empty plaintext: the GMAC of `aad` (used by AES-GMAC signing).
    pub(crate) fn gmac(&self, nonce: &[u8], aad: &[u8]) -> Result<[u8; 16], CryptoError> {
        self.encrypt_in_place(nonce, aad, &mut [])
    }
}
