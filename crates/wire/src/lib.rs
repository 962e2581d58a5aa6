//! SMB2/3 wire formats: PDUs, FSCC information classes, NTSTATUS codes, negotiate and
//! create contexts. Bytes in, typed values out, and back; no I/O.
//!
//! Boundaries: owns the SMB2/3 vocabulary (dialects, FileIds, access masks, statuses)
//! and the PDUs; imports no other smbx crate and does no I/O: everything else builds on
//! it.
//!
//! Every decoder checks every length and offset against its buffer and returns
//! [`WireError`] instead of panicking.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
pub mod change_notify;
pub mod close;
pub mod codec;
pub mod compound;
pub mod create;
pub mod create_options;
pub mod dialect;
pub mod durable;
pub mod error;
pub mod file_id;
mod flags;
pub mod framing;
pub mod fscc;
pub mod header;
pub mod id_hash;
pub mod ioctl;
pub mod lock;
pub mod negotiate;
pub mod oplock;
pub mod query_directory;
pub mod query_info;
pub mod received;
pub mod reply_size;
pub mod rw;
pub mod security_descriptor;
pub mod session;
pub mod set_info;
pub mod simple;
pub mod smb1;
pub mod status;
pub mod time;
pub mod tree;

pub use access::{AccessMask, ShareAccess};
pub use codec::{Reader, WireError, Writer};
pub use create_options::{CreateDisposition, CreateOptions};
pub use dialect::Dialect;
pub use file_id::FileId;
pub use fscc::attributes::FileAttributes;
pub use header::{Command, Header, HEADER_SIZE};
pub use received::InMessage;
pub use status::NtStatus;
