//! smbx-rpc: the DCE/RPC named pipes on `IPC$` (`srvsvc`, `wkssvc`, `lsarpc`).
//!
//! Boundaries: owns the DCE/RPC pipes; imports only smbx-wire, never the server's
//! state.
//!
//! Sans-IO: the server feeds the bytes a client writes to a pipe into [`Pipe::write`] and
//! hands back what [`Pipe::read`] returns. Connection-oriented DCE/RPC (C706 chapter 12,
//! [MS-RPCE]) with little-endian NDR 2.0 transfer syntax and no authentication.
//!
//! Implemented calls: srvsvc NetrShareEnum (levels 0, 1, 2, 501), NetrShareGetInfo
//! (levels 0, 1, 2, 501, 1005), NetrServerGetInfo (levels 100, 101); wkssvc
//! NetrWkstaGetInfo (level 100). lsarpc binds but every operation faults.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod interfaces;
mod ndr;
pub mod pdu;
mod pipe;
mod srvsvc;
mod wkssvc;

pub use interfaces::is_known_pipe;
pub use pipe::Pipe;

/// `STYPE_DISKTREE`: a disk share.
pub const STYPE_DISKTREE: u32 = 0;
/// `STYPE_IPC`: the interprocess communication share.
pub const STYPE_IPC: u32 = 3;
/// `STYPE_SPECIAL`: an administrative/special share (ORed into the type, e.g. for `IPC$`).
pub const STYPE_SPECIAL: u32 = 0x8000_0000;

/// One share as the server reports it through srvsvc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareInfo {
    /// Share name, e.g. `public` or `IPC$`.
    pub name: String,
    /// `STYPE_*` value, e.g. [`STYPE_DISKTREE`] or `STYPE_IPC | STYPE_SPECIAL`.
    pub share_type: u32,
    /// Free-text remark.
    pub comment: String,
    /// Local path reported at level 2 (e.g. `C:\share` style or the unix path); the
    /// server leaves it empty for callers who are not administrators.
    pub path: String,
}

/// What a pipe needs to know about the server and the session that opened it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PipeContext {
    /// NetBIOS-style server name.
    pub server_name: String,
    /// Workgroup or domain name.
    pub domain: String,
    /// Shares visible to this client (browseable ones plus `IPC$`).
    pub shares: Vec<ShareInfo>,
    /// The authenticated user name.
    pub user: String,
    /// Share enumeration (NetShareEnum, NetShareEnumAll, NetShareGetInfo) is refused
    /// with ERROR_ACCESS_DENIED: `restrict anonymous` and an anonymous or guest caller.
    pub shares_denied: bool,
}

/// A failure that leaves the pipe unusable (the server should close the handle).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// The byte stream is not DCE/RPC connection-oriented PDUs (bad version or length).
    #[error("malformed DCE/RPC PDU: {0}")]
    Malformed(&'static str),
    /// The client sent a PDU type a server never receives.
    #[error("unexpected DCE/RPC PDU type {0}")]
    UnexpectedPdu(u8),
    /// The client wrote far more than it read; the response queue is full.
    #[error("response queue full")]
    QueueFull,
    /// An earlier error broke the pipe.
    #[error("pipe is broken after an earlier protocol error")]
    Broken,
}
