//! Access masks and share access ([MS-SMB2] 2.2.13.1, 2.2.13 ShareAccess; [MS-DTYP]
//! 2.4.3): the rights a CREATE asks for, a handle holds and an ACE grants, and the
//! sharing an open allows others.

use crate::flags::bit_flags;

bit_flags! {
    /// An ACCESS_MASK: file, directory, standard and generic rights.
    ///
    /// The directory names share values with the file names (FILE_LIST_DIRECTORY is
    /// FILE_READ_DATA, FILE_ADD_FILE is FILE_WRITE_DATA, and so on).
    pub struct AccessMask;
    /// FILE_READ_DATA.
    const FILE_READ_DATA = 0x0000_0001;
    /// FILE_LIST_DIRECTORY (directories; FILE_READ_DATA's bit).
    const FILE_LIST_DIRECTORY = 0x0000_0001;
    /// FILE_WRITE_DATA.
    const FILE_WRITE_DATA = 0x0000_0002;
    /// FILE_ADD_FILE (directories; FILE_WRITE_DATA's bit).
    const FILE_ADD_FILE = 0x0000_0002;
    /// FILE_APPEND_DATA.
    const FILE_APPEND_DATA = 0x0000_0004;
    /// FILE_ADD_SUBDIRECTORY (directories; FILE_APPEND_DATA's bit).
    const FILE_ADD_SUBDIRECTORY = 0x0000_0004;
    /// FILE_READ_EA.
    const FILE_READ_EA = 0x0000_0008;
    /// FILE_WRITE_EA.
    const FILE_WRITE_EA = 0x0000_0010;
    /// FILE_EXECUTE.
    const FILE_EXECUTE = 0x0000_0020;
    /// FILE_TRAVERSE (directories; FILE_EXECUTE's bit).
    const FILE_TRAVERSE = 0x0000_0020;
    /// FILE_DELETE_CHILD.
    const FILE_DELETE_CHILD = 0x0000_0040;
    /// FILE_READ_ATTRIBUTES.
    const FILE_READ_ATTRIBUTES = 0x0000_0080;
    /// FILE_WRITE_ATTRIBUTES.
    const FILE_WRITE_ATTRIBUTES = 0x0000_0100;
    /// DELETE.
    const DELETE = 0x0001_0000;
    /// READ_CONTROL.
    const READ_CONTROL = 0x0002_0000;
    /// WRITE_DAC.
    const WRITE_DAC = 0x0004_0000;
    /// WRITE_OWNER.
    const WRITE_OWNER = 0x0008_0000;
    /// SYNCHRONIZE.
    const SYNCHRONIZE = 0x0010_0000;
    /// ACCESS_SYSTEM_SECURITY.
    const ACCESS_SYSTEM_SECURITY = 0x0100_0000;
    /// MAXIMUM_ALLOWED.
    const MAXIMUM_ALLOWED = 0x0200_0000;
    /// GENERIC_ALL.
    const GENERIC_ALL = 0x1000_0000;
    /// GENERIC_EXECUTE.
    const GENERIC_EXECUTE = 0x2000_0000;
    /// GENERIC_WRITE.
    const GENERIC_WRITE = 0x4000_0000;
    /// GENERIC_READ.
    const GENERIC_READ = 0x8000_0000;
    /// FILE_ALL_ACCESS: every specific file right and the standard rights.
    const FILE_ALL_ACCESS = 0x001F_01FF;
    /// FILE_GENERIC_READ.
    const FILE_GENERIC_READ = 0x0012_0089;
    /// FILE_GENERIC_WRITE.
    const FILE_GENERIC_WRITE = 0x0012_0116;
    /// FILE_GENERIC_EXECUTE.
    const FILE_GENERIC_EXECUTE = 0x0012_00A0;
    /// Bits with no defined right (bits 9–15, 21–23, 26–27), never grantable.
    const RESERVED = 0x0CE0_FE00;
}

impl AccessMask {
    /// The four generic rights.
    pub const GENERIC_RIGHTS: AccessMask = AccessMask(
        AccessMask::GENERIC_ALL.0
            | AccessMask::GENERIC_EXECUTE.0
            | AccessMask::GENERIC_WRITE.0
            | AccessMask::GENERIC_READ.0,
    );

    /// Maps the generic rights to file rights ([MS-SMB2] 3.3.5.9, the file object's
    /// generic mapping) and clears them.
    pub const fn map_generic(self) -> AccessMask {
        let mut m = self.0 & !AccessMask::GENERIC_RIGHTS.0;
        if self.0 & AccessMask::GENERIC_ALL.0 != 0 {
            m |= AccessMask::FILE_ALL_ACCESS.0;
        }
        if self.0 & AccessMask::GENERIC_READ.0 != 0 {
            m |= AccessMask::FILE_GENERIC_READ.0;
        }
        if self.0 & AccessMask::GENERIC_WRITE.0 != 0 {
            m |= AccessMask::FILE_GENERIC_WRITE.0;
        }
        if self.0 & AccessMask::GENERIC_EXECUTE.0 != 0 {
            m |= AccessMask::FILE_GENERIC_EXECUTE.0;
        }
        AccessMask(m)
    }
}

bit_flags! {
    /// ShareAccess of a CREATE: what other opens of the same file may do.
    pub struct ShareAccess;
    /// FILE_SHARE_READ.
    const FILE_SHARE_READ = 0x0000_0001;
    /// FILE_SHARE_WRITE.
    const FILE_SHARE_WRITE = 0x0000_0002;
    /// FILE_SHARE_DELETE.
    const FILE_SHARE_DELETE = 0x0000_0004;
    /// All three.
    const ALL = 0x0000_0007;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_rights_map_to_the_file_rights() {
        assert_eq!(
            AccessMask::GENERIC_READ.map_generic(),
            AccessMask::FILE_GENERIC_READ
        );
        assert_eq!(
            (AccessMask::GENERIC_ALL | AccessMask::DELETE).map_generic(),
            AccessMask::FILE_ALL_ACCESS
        );
        assert_eq!(
            (AccessMask::GENERIC_WRITE | AccessMask::MAXIMUM_ALLOWED).map_generic(),
            AccessMask::FILE_GENERIC_WRITE | AccessMask::MAXIMUM_ALLOWED
        );
        assert_eq!(AccessMask::empty().map_generic(), AccessMask::empty());
    }

    #[test]
    fn set_operations() {
        let m = AccessMask::FILE_READ_DATA | AccessMask::SYNCHRONIZE;
        assert!(m.contains(AccessMask::FILE_READ_DATA));
        assert!(!m.contains(AccessMask::FILE_READ_DATA | AccessMask::FILE_WRITE_DATA));
        assert!(m.intersects(AccessMask::FILE_READ_DATA | AccessMask::FILE_WRITE_DATA));
        assert!(!m.intersects(AccessMask::FILE_WRITE_DATA));
        let mut n = m;
        n.remove(AccessMask::SYNCHRONIZE);
        assert_eq!(n, AccessMask(1));
        n.insert(AccessMask::DELETE);
        assert_eq!(n.bits(), 0x0001_0001);
        assert_eq!(ShareAccess::ALL, ShareAccess(7));
    }

    #[test]
    fn debug_lists_each_bit_once_and_the_unnamed_rest() {
        let s = format!("{:?}", AccessMask(0x0001_0001 | 0x0000_0200));
        assert_eq!(s, "AccessMask(0x00010201: FILE_READ_DATA | DELETE | 0x200)");
        assert_eq!(format!("{:?}", ShareAccess(0)), "ShareAccess(0x00000000)");
    }
}
