//! Errors returned by provider calls (not completion statuses).

use crate::types::TermInfo;

/// An error from a provider call.
#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    /// Socket or device I/O failed.
    #[error("rdma transport I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The queue pair is not connected (or already closed).
    #[error("queue pair is not connected")]
    NotConnected,
    /// A work queue is full (more than `QpCaps` allows).
    #[error("work queue full")]
    QueueFull,
    /// A work request was malformed (bad scatter list, wrong region, bad length).
    #[error("invalid work request: {0}")]
    InvalidRequest(&'static str),
    /// The peer rejected the connection; its private data is attached.
    #[error("connection rejected by peer")]
    Rejected(Vec<u8>),
    /// Connection setup failed (bad MPA frame, timeout, incompatible options).
    #[error("connection setup failed: {0}")]
    Setup(String),
    /// The stream was terminated with this Terminate triple.
    #[error("terminated: {0:?}")]
    Terminated(TermInfo),
}

/// Result alias for provider calls.
pub type Result<T> = std::result::Result<T, RdmaError>;
