//! Tree connects ([MS-SMB2] 3.3.1.9).

use std::sync::Arc;

use smbx_wire::AccessMask;

use super::share::Share;

/// One tree connect of a session.
#[derive(Debug)]
pub struct Tree {
    /// TreeId.
    pub id: u32,
    /// The owning session.
    pub session_id: u64,
    /// The share it reaches.
    pub share: Arc<Share>,
    /// Access mask the user has on the share root (MaximalAccess).
    pub maximal_access: AccessMask,
    /// Writes refused (share `read only` or no write access).
    pub read_only: bool,
    /// Messages on this tree must be encrypted.
    pub encrypt_data: bool,
    /// Unencrypted messages on this tree must be signed (the share's effective
    /// `server signing` is mandatory).
    pub signing_required: bool,
}
