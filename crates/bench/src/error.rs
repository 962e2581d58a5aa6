//! Errors of a benchmark run.

use crate::args::ArgError;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A bad command line.
    #[error(transparent)]
    Args(#[from] ArgError),
    /// An I/O error on a named target or file.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// An SMB failure (connect, logon, open or I/O).
    #[error("{what}: {msg}")]
    Smb {
        /// What was being done, naming the URL.
        what: String,
        /// The client's error (NTSTATUS name where there is one).
        msg: String,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl BenchError {
    /// An [`BenchError::Io`] with context.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            what: what.into(),
            source,
        }
    }
}
