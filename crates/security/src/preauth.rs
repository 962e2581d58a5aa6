//! The SMB 3.1.1 pre-authentication integrity hash ([MS-SMB2] 3.3.5.4 / 3.3.5.5).

use aws_lc_rs::digest;

/// A running SHA-512 preauth integrity hash value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PreauthHash([u8; 64]);

impl std::fmt::Debug for PreauthHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PreauthHash(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

impl Default for PreauthHash {
    fn default() -> Self {
        Self::new()
    }
}

impl PreauthHash {
    /// The initial value: 64 zero bytes.
    pub fn new() -> Self {
        PreauthHash([0; 64])
    }

    /// Starts from a known value (e.g. a connection's hash copied into a new session).
    pub fn from_value(v: [u8; 64]) -> Self {
        PreauthHash(v)
    }

    /// H = SHA-512(H || msg), where `msg` is one whole SMB2 message.
    pub fn update(&mut self, msg: &[u8]) {
        let mut ctx = digest::Context::new(&digest::SHA512);
        ctx.update(&self.0);
        ctx.update(msg);
        self.0.copy_from_slice(ctx.finish().as_ref());
    }

    /// The current value.
    pub fn value(&self) -> &[u8; 64] {
        &self.0
    }
}
