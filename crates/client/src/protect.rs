//! Per-session message protection on the client side: signing requests, verifying
//! responses, sealing requests and unsealing responses.

use std::sync::Arc;

use smbx_security::cipher::{CipherId, Sealer};
use smbx_security::keys::SessionKeys;
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_security::transform::NonceSource;

use crate::error::Result;

/// The keys and policy of one authenticated session.
#[derive(Debug)]
pub(crate) struct SessionSecurity {
    /// Signs requests and verifies responses.
    pub signer: Option<Signer>,
    /// Sign requests and require signed responses (when not sealed).
    pub sign: bool,
    /// Seal every request of the session.
    pub encrypt: bool,
    /// Client-to-server sealing key (one per session, shared by its channels).
    pub encryptor: Option<Arc<Sealer>>,
    /// Server-to-client unsealing key.
    pub decryptor: Option<Arc<Sealer>>,
    /// Nonces for `encryptor`: shared by every channel, so none repeats under the key.
    pub nonces: Option<Arc<NonceSource>>,
}

impl SessionSecurity {
    /// Protection for a session without keys (guest or anonymous).
    pub fn none() -> SessionSecurity {
        SessionSecurity {
            signer: None,
            sign: false,
            encrypt: false,
            encryptor: None,
            decryptor: None,
            nonces: None,
        }
    }

    /// Builds the session's signer and sealers from derived keys. `keys` is the server's
    /// view: the client encrypts with `decrypt_c2s` and decrypts with `encrypt_s2c`.
    pub fn from_keys(
        keys: &SessionKeys,
        alg: SigningAlgorithm,
        cipher: Option<CipherId>,
    ) -> Result<SessionSecurity> {
        let mut s = SessionSecurity::none();
        s.signer = Some(Signer::new(alg, &keys.signing));
        if let Some(c) = cipher {
            if !keys.decrypt_c2s.is_empty() {
                s.encryptor = Some(Arc::new(Sealer::new(c, &keys.decrypt_c2s)?));
                s.decryptor = Some(Arc::new(Sealer::new(c, &keys.encrypt_s2c)?));
                s.nonces = Some(Arc::new(NonceSource::new(c)));
            }
        }
        Ok(s)
    }

    /// The protection of a channel bound to this session ([MS-SMB2] 3.2.5.3.1):
    /// its own signer, the session's policy, sealing keys and nonce source.
    pub fn for_channel(&self, signer: Signer) -> SessionSecurity {
        SessionSecurity {
            signer: Some(signer),
            sign: self.sign,
            encrypt: self.encrypt,
            encryptor: self.encryptor.clone(),
            decryptor: self.decryptor.clone(),
            nonces: self.nonces.clone(),
        }
    }

    /// True if the session can seal (3.x with a cipher).
    pub fn can_seal(&self) -> bool {
        self.encryptor.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_security::keys::derive;
    use smbx_security::transform::{seal, unseal};
    use smbx_wire::Dialect;

    #[test]
    fn client_keys_mirror_server_keys() {
        // The server seals with encrypt_s2c; a client built from the same keys unseals it.
        let keys = derive(
            Dialect::SMB3_1_1,
            &[7u8; 16],
            Some(&[1u8; 64]),
            Some(CipherId::Aes256Gcm),
        );
        let client =
            SessionSecurity::from_keys(&keys, SigningAlgorithm::AesGmac, Some(CipherId::Aes256Gcm))
                .unwrap();
        let server_enc = Sealer::new(CipherId::Aes256Gcm, &keys.encrypt_s2c).unwrap();
        let msg = vec![0xfe; 80];
        let sealed = seal(&server_enc, 9, &[3u8; 12], &msg).unwrap();
        assert_eq!(
            unseal(client.decryptor.as_ref().unwrap(), &sealed).unwrap(),
            msg
        );
        // And what the client seals, the server's decrypt key opens.
        let server_dec = Sealer::new(CipherId::Aes256Gcm, &keys.decrypt_c2s).unwrap();
        let nonce = client.nonces.as_ref().unwrap().next().unwrap();
        let sealed = seal(client.encryptor.as_ref().unwrap(), 9, &nonce, &msg).unwrap();
        assert_eq!(unseal(&server_dec, &sealed).unwrap(), msg);
        assert!(unseal(client.decryptor.as_ref().unwrap(), &sealed).is_err());
    }
}
