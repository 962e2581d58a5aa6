//! The seam between the server and smbx-security: per-session keys, signing,
//! sealing and preauth hashing. Everything cryptographic goes through here.

use smbx_wire::NtStatus;

use crate::conn::Connection;
use crate::state::Session;

/// Per-session security material.
#[derive(Default)]
pub struct SessionSecurity {
    /// Signing key, once derived.
    pub signing_key: Option<Vec<u8>>,
}

/// Signs `msg` (one compound member, header first) with the session's key.
pub fn sign(_session: &Session, _msg: &mut [u8]) {}

/// True if the session can sign (has a signing key).
pub fn can_sign(session: &Session) -> bool {
    session.state.lock().security.signing_key.is_some()
}

/// Verifies the signature of one received member.
pub fn verify(_session: &Session, _msg: &[u8]) -> bool {
    false
}

/// Decrypts a TRANSFORM message; returns the plaintext and the SessionId.
pub fn unseal(_conn: &Connection, _frame: &[u8]) -> Result<(Vec<u8>, u64), NtStatus> {
    Err(NtStatus::ACCESS_DENIED)
}

/// Encrypts a response chain for `session_id`.
pub fn seal(_conn: &Connection, _session_id: u64, msg: Vec<u8>) -> Result<Vec<u8>, NtStatus> {
    Ok(msg)
}

/// Feeds a final response into the preauth hash it belongs to.
pub(crate) fn preauth_response(
    _conn: &Connection,
    _target: crate::handlers::PreauthTarget,
    _msg: &[u8],
) {
}

/// Starts the connection preauth hash with the NEGOTIATE request (3.1.1).
pub(crate) fn preauth_negotiate_request(_conn: &Connection, _msg: &[u8]) {}

/// The SPNEGO NegTokenInit2 hint for the NEGOTIATE response.
pub(crate) fn negotiate_token(_server: &crate::state::ServerState) -> Vec<u8> {
    Vec::new()
}
