//! SMB2 dialect revisions ([MS-SMB2] 2.2.3): one ordered type, with the questions the
//! server and client ask of a dialect answered here instead of by comparing numbers.

use std::fmt;

/// A dialect revision as carried on the wire (`DialectRevision`). Ordered by revision,
/// so `d >= Dialect::SMB3_0` reads as "3.0 or later". Unknown revisions a client
/// offers are kept as they are (they never compare equal to a known one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dialect(u16);

impl Dialect {
    /// No dialect yet (before NEGOTIATE).
    pub const NONE: Dialect = Dialect(0);
    /// SMB 2.0.2.
    pub const SMB2_0_2: Dialect = Dialect(0x0202);
    /// SMB 2.1.
    pub const SMB2_1: Dialect = Dialect(0x0210);
    /// The SMB2 wildcard revision answered to an SMB1 negotiate offering "SMB 2.???";
    /// the real dialect follows in an SMB2 NEGOTIATE.
    pub const WILDCARD: Dialect = Dialect(0x02FF);
    /// SMB 3.0.
    pub const SMB3_0: Dialect = Dialect(0x0300);
    /// SMB 3.0.2.
    pub const SMB3_0_2: Dialect = Dialect(0x0302);
    /// SMB 3.1.1.
    pub const SMB3_1_1: Dialect = Dialect(0x0311);

    /// Every dialect smbx speaks, oldest first.
    pub const ALL: [Dialect; 5] = [
        Dialect::SMB2_0_2,
        Dialect::SMB2_1,
        Dialect::SMB3_0,
        Dialect::SMB3_0_2,
        Dialect::SMB3_1_1,
    ];

    /// The dialect with this wire revision.
    pub const fn from_u16(v: u16) -> Dialect {
        Dialect(v)
    }

    /// The wire revision.
    pub const fn as_u16(self) -> u16 {
        self.0
    }

    /// One of the five dialects (not NONE, the wildcard or an unknown revision).
    pub fn is_known(self) -> bool {
        Dialect::ALL.contains(&self)
    }

    /// SMB 3.x: session keys from the SP800-108 KDF, AES-CMAC (or GMAC) signing,
    /// encryption, multichannel, durable handles v2, directory leases, lease v2.
    pub fn is_smb3(self) -> bool {
        self >= Dialect::SMB3_0
    }

    /// Leases (2.1 and later; lease v2 contexts with parents and epochs from 3.0).
    pub fn has_leasing(self) -> bool {
        self >= Dialect::SMB2_1
    }

    /// Version 2 lease contexts (parent lease key, epoch) and directory leases.
    pub fn has_leasing_v2(self) -> bool {
        self.is_smb3()
    }

    /// SMB2 READ/WRITE channel with remote invalidation (3.0.2 and later).
    pub fn has_remote_invalidate(self) -> bool {
        self >= Dialect::SMB3_0_2
    }

    /// SMB 3.1.1: negotiate contexts, preauthentication integrity, cipher and
    /// signing algorithm negotiation.
    pub fn is_311(self) -> bool {
        self == Dialect::SMB3_1_1
    }

    /// The conventional name ("3.1.1"), or "unknown".
    pub fn name(self) -> &'static str {
        match self {
            Dialect::SMB2_0_2 => "2.0.2",
            Dialect::SMB2_1 => "2.1",
            Dialect::SMB3_0 => "3.0",
            Dialect::SMB3_0_2 => "3.0.2",
            Dialect::SMB3_1_1 => "3.1.1",
            _ => "unknown",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            "unknown" => write!(f, "0x{:04x}", self.0),
            n => f.write_str(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_by_revision_with_the_wildcard_between_2_1_and_3_0() {
        assert!(Dialect::SMB2_0_2 < Dialect::SMB2_1);
        assert!(Dialect::SMB2_1 < Dialect::WILDCARD);
        assert!(Dialect::WILDCARD < Dialect::SMB3_0);
        assert!(Dialect::SMB3_0 < Dialect::SMB3_0_2);
        assert!(Dialect::SMB3_0_2 < Dialect::SMB3_1_1);
        assert!(!Dialect::SMB2_1.is_smb3() && Dialect::SMB3_0.is_smb3());
        assert!(!Dialect::SMB2_0_2.has_leasing() && Dialect::SMB2_1.has_leasing());
        assert!(!Dialect::SMB3_0.has_remote_invalidate());
        assert!(Dialect::SMB3_0_2.has_remote_invalidate());
        assert!(Dialect::SMB3_1_1.is_311() && !Dialect::SMB3_0_2.is_311());
    }

    #[test]
    fn names_and_unknown_revisions() {
        assert_eq!(Dialect::SMB3_1_1.to_string(), "3.1.1");
        assert_eq!(Dialect::SMB2_1.name(), "2.1");
        assert_eq!(Dialect::from_u16(0x0222).to_string(), "0x0222");
        assert!(!Dialect::from_u16(0x0222).is_known());
        assert!(!Dialect::WILDCARD.is_known() && !Dialect::NONE.is_known());
        assert_eq!(Dialect::from_u16(0x0302), Dialect::SMB3_0_2);
        assert_eq!(Dialect::SMB3_0.as_u16(), 0x0300);
    }
}
