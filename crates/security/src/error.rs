//! The error type for the cryptographic primitives.

use thiserror::Error;

/// A failure in a cryptographic primitive or in parsing a protected message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CryptoError {
    /// The key has the wrong length for the algorithm.
    #[error("invalid key length")]
    BadKeyLength,
    /// The nonce has the wrong length for the cipher.
    #[error("invalid nonce length")]
    BadNonceLength,
    /// Authentication (tag or signature) did not verify.
    #[error("authentication failed")]
    AuthenticationFailed,
    /// A protected message was malformed (too short, wrong magic, size mismatch).
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    /// The nonce space of a session is exhausted.
    #[error("nonce space exhausted")]
    NonceExhausted,
    /// The operation needs a key the session does not have (no cipher, no signing key).
    #[error("no key for this operation")]
    NoKey,
    /// The underlying crypto library reported an unexpected failure.
    #[error("crypto library failure")]
    Internal,
}
