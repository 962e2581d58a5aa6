//! The NT password hash.

use md4::{Digest, Md4};

/// NT hash of `password`: MD4 over its UTF-16LE encoding ([MS-NLMP] NTOWFv1).
pub fn nt_hash(password: &str) -> [u8; 16] {
    let mut md4 = Md4::new();
    for unit in password.encode_utf16() {
        md4.update(unit.to_le_bytes());
    }
    md4.finalize().into()
}
