//! smbx-vfs: the storage interface of the smbx server and its local POSIX backend.
//!
//! Boundaries: owns every storage system call (paths, data, xattrs, ACL blobs, change
//! watching, kernel copies); imports only smbx-wire, never the server, so the server
//! reaches storage only through it.
//!
//! A [`Share`] serves one local directory. Every path-taking operation resolves names
//! with `openat2(2)` relative to a directory descriptor of the share root opened once
//! at [`Share::open`], with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: no `..`, absolute
//! path, symlink (including one created or swapped in after the share was opened),
//! symlink loop or `/proc` magic link can reach outside the share, and this holds under
//! concurrent renames because the kernel enforces it during the walk. Mutations
//! (`mkdirat`, `unlinkat`, `renameat2`, `linkat`) act on parent directory descriptors
//! obtained the same way; no operation concatenates strings onto the root path.
//!
//! # Symlink policy
//!
//! - Default (`follow_symlinks_within_share: false`): `RESOLVE_NO_SYMLINKS` — the server
//!   never follows any symlink. Symlinks are omitted from directory listings; opening a
//!   name whose last component is a symlink fails with ACCESS_DENIED; a symlink as an
//!   intermediate component yields OBJECT_PATH_NOT_FOUND. Clients cannot create, read,
//!   follow or delete symlinks.
//! - `follow_symlinks_within_share: true`: symlinks are followed as long as the whole
//!   resolution stays beneath the share root (checked by the kernel against the root,
//!   so `a/link -> ../b` works); a link leading outside yields ACCESS_DENIED, a loop
//!   ACCESS_DENIED / OBJECT_PATH_NOT_FOUND. Listings show such links with their
//!   target's metadata and omit links that escape or dangle.
//!
//! # Paths
//!
//! SMB paths are `&str` with backslash separators relative to the share root ("" is the
//! root); see [`SmbPath::parse`] for validation and stream syntax. Lookups are
//! case-insensitive unless [`ShareOptions::case_sensitive`]: each component is tried
//! exactly, then matched case-insensitively (Unicode lower-casing) against its
//! directory. New names keep the client's case.
//!
//! # Metadata
//!
//! DOS attributes and creation time live in the xattr described in [`attr`] (without
//! xattr support READONLY maps to the owner write bit; creation time then defaults to
//! min(mtime, ctime)). Named streams and EAs live in xattrs, see [`stream`].
//!
//! The API is synchronous; call it from `tokio::task::spawn_blocking` where blocking
//! matters.

#![warn(missing_docs)]

pub mod attr;
mod handle;
mod ntacl;
pub mod path;
mod perms;
mod share;
mod shortname;
pub mod stream;
mod sys;
mod types;
pub mod watch;
mod wildcard;
mod zerocopy;

pub use attr::*;
pub use handle::Handle;
pub use ntacl::{MAX_NTACL, NTACL_XATTR};
pub use path::SmbPath;
pub use perms::process_ids;
pub use share::Share;
pub use shortname::short_name;
pub use types::*;
pub use wildcard::wildcard_match;

/// Re-export of the status type every operation returns.
pub use smbx_wire::NtStatus;
