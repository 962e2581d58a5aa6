//! SMB2/3 message signing: HMAC-SHA256 (2.x), AES-128-CMAC (3.x) and AES-128-GMAC (3.1.1
//! with SIGNING_CAPABILITIES).

use aws_lc_rs::{cmac, hmac};

use crate::cipher::{CipherId, Sealer};
use crate::ntlm::ct_eq;

/// Offset of the Signature field in the SMB2 header.
pub const SIGNATURE_OFFSET: usize = 48;
/// SMB2_FLAGS_SERVER_TO_REDIR
const FLAG_RESPONSE: u32 = 0x1;
/// SMB2_FLAGS_SIGNED
pub const FLAG_SIGNED: u32 = 0x8;
/// SMB2 CANCEL command code.
const CMD_CANCEL: u16 = 0x0c;
const HEADER_LEN: usize = 64;

/// A signing algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SigningAlgorithm {
    /// HMAC-SHA256 truncated to 16 bytes (2.0.2 / 2.1), wire id 0.
    HmacSha256,
    /// AES-128-CMAC (3.x default), wire id 1.
    AesCmac,
    /// AES-128-GMAC (3.1.1 negotiated), wire id 2.
    AesGmac,
}

impl SigningAlgorithm {
    /// From the SMB2_SIGNING_CAPABILITIES id.
    pub fn from_wire(v: u16) -> Option<SigningAlgorithm> {
        Some(match v {
            0 => SigningAlgorithm::HmacSha256,
            1 => SigningAlgorithm::AesCmac,
            2 => SigningAlgorithm::AesGmac,
            _ => return None,
        })
    }

    /// The SMB2_SIGNING_CAPABILITIES id.
    pub fn to_wire(self) -> u16 {
        match self {
            SigningAlgorithm::HmacSha256 => 0,
            SigningAlgorithm::AesCmac => 1,
            SigningAlgorithm::AesGmac => 2,
        }
    }

    /// The algorithm a dialect signs with: HMAC-SHA256 for 2.x, AES-CMAC for 3.0 and
    /// 3.0.2, the negotiated one (AES-CMAC when none was) for 3.1.1 ([MS-SMB2]
    /// 3.1.4.1).
    pub fn for_dialect(
        dialect: smbx_wire::Dialect,
        negotiated: Option<SigningAlgorithm>,
    ) -> SigningAlgorithm {
        if !dialect.is_smb3() {
            SigningAlgorithm::HmacSha256
        } else if dialect.is_311() {
            negotiated.unwrap_or(SigningAlgorithm::AesCmac)
        } else {
            SigningAlgorithm::AesCmac
        }
    }

    /// The name operators know it by (as Samba's smbstatus prints it).
    pub fn name(self) -> &'static str {
        match self {
            SigningAlgorithm::HmacSha256 => "HMAC-SHA256",
            SigningAlgorithm::AesCmac => "AES-128-CMAC",
            SigningAlgorithm::AesGmac => "AES-128-GMAC",
        }
    }
}

enum Inner {
    Hmac(Box<hmac::Key>),
    Cmac(cmac::Key),
    Gmac(Sealer),
}

/// Signs and verifies SMB2 messages with one key.
pub struct Signer {
    alg: SigningAlgorithm,
    inner: Inner,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

fn key16(key: &[u8]) -> [u8; 16] {
    let mut k = [0u8; 16];
    let n = key.len().min(16);
    k[..n].copy_from_slice(&key[..n]);
    k
}

impl Signer {
    /// A signer for `alg`. HMAC uses `key` as is; CMAC and GMAC use its first 16 bytes
    /// (zero-padded if shorter), as signing keys are 128-bit.
    pub fn new(alg: SigningAlgorithm, key: &[u8]) -> Signer {
        let inner = match alg {
            SigningAlgorithm::HmacSha256 => {
                Inner::Hmac(Box::new(hmac::Key::new(hmac::HMAC_SHA256, key)))
            }
            SigningAlgorithm::AesCmac => {
                Inner::Cmac(cmac::Key::new(cmac::AES_128, &key16(key)).expect("16-byte AES key"))
            }
            SigningAlgorithm::AesGmac => {
                Inner::Gmac(Sealer::new(CipherId::Aes128Gcm, &key16(key)).expect("16-byte AES key"))
            }
        };
        Signer { alg, inner }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> SigningAlgorithm {
        self.alg
    }

    /// The signature of one whole SMB2 message, computed as if its Signature field were
    /// zero. Messages shorter than the 64-byte header get an all-zero signature (which
    /// [`Signer::verify`] never accepts).
    pub fn signature(&self, msg: &[u8]) -> [u8; 16] {
        if msg.len() < HEADER_LEN {
            return [0; 16];
        }
        let zero = [0u8; 16];
        let parts: [&[u8]; 3] = [&msg[..SIGNATURE_OFFSET], &zero, &msg[HEADER_LEN..]];
        let mut out = [0u8; 16];
        match &self.inner {
            Inner::Hmac(k) => {
                let mut c = hmac::Context::with_key(k);
                for p in parts {
                    c.update(p);
                }
                out.copy_from_slice(&c.sign().as_ref()[..16]);
            }
            Inner::Cmac(k) => {
                let mut c = cmac::Context::with_key(k);
                for p in parts {
                    c.update(p).expect("CMAC update");
                }
                out.copy_from_slice(c.sign().expect("CMAC sign").as_ref());
            }
            Inner::Gmac(s) => {
                let nonce = gmac_nonce(msg);
                if msg[SIGNATURE_OFFSET..HEADER_LEN] == zero {
                    out = s.gmac(&nonce, msg).expect("GMAC");
                } else {
                    let mut copy = msg.to_vec();
                    copy[SIGNATURE_OFFSET..HEADER_LEN].fill(0);
                    out = s.gmac(&nonce, &copy).expect("GMAC");
                }
            }
        }
        out
    }

    /// Sets SMB2_FLAGS_SIGNED and writes the signature into the header. Does nothing to
    /// messages shorter than the header.
    pub fn sign(&self, msg: &mut [u8]) {
        if msg.len() < HEADER_LEN {
            return;
        }
        let flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]) | FLAG_SIGNED;
        msg[16..20].copy_from_slice(&flags.to_le_bytes());
        msg[SIGNATURE_OFFSET..HEADER_LEN].fill(0);
        let sig = self.signature(msg);
        msg[SIGNATURE_OFFSET..HEADER_LEN].copy_from_slice(&sig);
    }

    /// Checks the message's signature in constant time.
    pub fn verify(&self, msg: &[u8]) -> bool {
        if msg.len() < HEADER_LEN {
            return false;
        }
        let sig = self.signature(msg);
        ct_eq(&sig, &msg[SIGNATURE_OFFSET..HEADER_LEN])
    }

    /// Like [`Signer::verify`], but for GMAC avoids copying the message by zeroing the
    /// Signature field in place during the check (it is restored before returning).
    pub fn verify_in_place(&self, msg: &mut [u8]) -> bool {
        if msg.len() < HEADER_LEN {
            return false;
        }
        let mut got = [0u8; 16];
        got.copy_from_slice(&msg[SIGNATURE_OFFSET..HEADER_LEN]);
        msg[SIGNATURE_OFFSET..HEADER_LEN].fill(0);
        let sig = self.signature(msg);
        msg[SIGNATURE_OFFSET..HEADER_LEN].copy_from_slice(&got);
        ct_eq(&sig, &got)
    }
}

/// Raw AES-128-CMAC ([RFC 4493]) of `data` under a 16-byte `key`.
pub fn aes_cmac(key: &[u8; 16], data: &[u8]) -> [u8; 16] {
    let k = cmac::Key::new(cmac::AES_128, key).expect("16-byte AES key");
    let mut out = [0u8; 16];
    out.copy_from_slice(cmac::sign(&k, data).expect("CMAC sign").as_ref());
    out
}

/// The AES-GMAC nonce: MessageId (8 bytes LE) || 4 bytes LE whose bit 0 is the
/// server-to-redirector flag and bit 1 is set for CANCEL.
fn gmac_nonce(msg: &[u8]) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&msg[24..32]);
    let flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]);
    let cmd = u16::from_le_bytes([msg[12], msg[13]]);
    let mut tail = 0u32;
    if flags & FLAG_RESPONSE != 0 {
        tail |= 1;
    }
    if cmd == CMD_CANCEL {
        tail |= 2;
    }
    n[8..].copy_from_slice(&tail.to_le_bytes());
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::Dialect;

    #[test]
    fn algorithms_by_dialect() {
        let gmac = Some(SigningAlgorithm::AesGmac);
        assert_eq!(
            SigningAlgorithm::for_dialect(Dialect::SMB2_0_2, None),
            SigningAlgorithm::HmacSha256
        );
        assert_eq!(
            SigningAlgorithm::for_dialect(Dialect::SMB2_1, gmac),
            SigningAlgorithm::HmacSha256
        );
        assert_eq!(
            SigningAlgorithm::for_dialect(Dialect::SMB3_0_2, gmac),
            SigningAlgorithm::AesCmac
        );
        assert_eq!(
            SigningAlgorithm::for_dialect(Dialect::SMB3_1_1, gmac),
            SigningAlgorithm::AesGmac
        );
        assert_eq!(
            SigningAlgorithm::for_dialect(Dialect::SMB3_1_1, None),
            SigningAlgorithm::AesCmac
        );
    }
}
