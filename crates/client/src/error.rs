//! The client's error type. A server refusal carries its NTSTATUS, and its Display is the
//! status name (e.g. `STATUS_OBJECT_NAME_NOT_FOUND`), so command-line tools can print it.

use smbx_wire::{NtStatus, WireError};
use thiserror::Error;

/// Everything that can go wrong in the client.
#[derive(Debug, Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("{status}")]
    Status {
        /// The NTSTATUS the server returned.
        status: NtStatus,
        /// The SMB2 command that failed (wire code).
        command: u16,
    },
    /// The server sent bytes we could not decode.
    #[error("malformed response: {0}")]
    Wire(#[from] WireError),
    /// Signing, sealing or key handling failed (e.g. a bad signature or AEAD tag).
    #[error("security failure: {0}")]
    Crypto(String),
    /// Authentication could not proceed (bad token, unsupported mechanism).
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The server's behaviour violated the protocol or our options.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The connection is closed (by the peer, an error, or a previous failure).
    #[error("connection closed: {0}")]
    Disconnected(String),
    /// No response arrived within the configured timeout.
    #[error("timed out waiting for the server")]
    Timeout,
    /// The caller passed an unusable argument (bad URL, path, option combination).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// The NTSTATUS, if this is a server refusal.
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True if the server refused with `status`.
    pub fn is_status(&self, status: NtStatus) -> bool {
        self.status() == Some(status)
    }
}

impl From<smbx_security::CryptoError> for Error {
    fn from(e: smbx_security::CryptoError) -> Self {
        Error::Crypto(e.to_string())
    }
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_status_name() {
        let e = Error::Status {
            status: NtStatus::OBJECT_NAME_NOT_FOUND,
            command: 5,
        };
        assert_eq!(e.to_string(), "STATUS_OBJECT_NAME_NOT_FOUND");
        assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND));
        let odd = Error::Status {
            status: NtStatus(0xC0FF_EE00),
            command: 5,
        };
        assert_eq!(odd.to_string(), "NTSTATUS(0xc0ffee00)");
    }
}
