//! The security descriptor of a file that has none stored, derived from its POSIX
//! owner, group and mode bits (what QUERY_INFO returns and access checks use).
//!
//! SIDs follow Samba's Unix mapping: the owner is `S-1-22-1-<uid>` and the group
//! `S-1-22-2-<gid>`. The DACL has, in order, allow ACEs for the owner, the group and
//! Everyone (S-1-1-0) built from the rwx bits, then full control for SYSTEM (S-1-5-18)
//! and BUILTIN\Administrators (S-1-5-32-544). ACEs with an empty mask are left out.

use smbx_wire::security_descriptor::well_known::*;
use smbx_wire::security_descriptor::{
    Ace, Acl, SecurityDescriptor, DACL_SECURITY_INFORMATION, GROUP_SECURITY_INFORMATION,
    OWNER_SECURITY_INFORMATION,
};
use smbx_wire::AccessMask;

/// Rights every trustee with any access gets: READ_CONTROL | SYNCHRONIZE |
/// FILE_READ_ATTRIBUTES.
const BASE: AccessMask = AccessMask::READ_CONTROL
    .union(AccessMask::SYNCHRONIZE)
    .union(AccessMask::FILE_READ_ATTRIBUTES);
/// FILE_READ_DATA | FILE_READ_EA.
const READ: AccessMask = AccessMask::FILE_READ_DATA.union(AccessMask::FILE_READ_EA);
/// FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES.
const WRITE: AccessMask = AccessMask::FILE_WRITE_DATA
    .union(AccessMask::FILE_APPEND_DATA)
    .union(AccessMask::FILE_WRITE_EA)
    .union(AccessMask::FILE_WRITE_ATTRIBUTES);
/// FILE_EXECUTE (FILE_TRAVERSE on directories).
const EXECUTE: AccessMask = AccessMask::FILE_EXECUTE;
/// FILE_DELETE_CHILD.
const DELETE_CHILD: AccessMask = AccessMask::FILE_DELETE_CHILD;
/// Extra rights of the owner: DELETE | WRITE_DAC | WRITE_OWNER | FILE_WRITE_ATTRIBUTES.
const OWNER_EXTRA: AccessMask = AccessMask::DELETE
    .union(AccessMask::WRITE_DAC)
    .union(AccessMask::WRITE_OWNER)
    .union(AccessMask::FILE_WRITE_ATTRIBUTES);

/// The access mask an rwx triple maps to.
pub fn rwx_mask(bits: u32, is_dir: bool) -> AccessMask {
    let mut m = AccessMask::empty();
    if bits & 4 != 0 {
        m |= READ;
    }
    if bits & 2 != 0 {
        m |= WRITE;
        if is_dir {
            m |= DELETE_CHILD;
        }
    }
    if bits & 1 != 0 {
        m |= EXECUTE;
    }
    if !m.is_empty() {
        m |= BASE;
    }
    m
}

/// Builds the descriptor for a file with `uid`, `gid` and `mode`, keeping only the
/// parts `secinfo` (AdditionalInformation) asks for. No SACL is ever returned.
pub fn posix_sd(uid: u32, gid: u32, mode: u32, is_dir: bool, secinfo: u32) -> SecurityDescriptor {
    let mut sd = SecurityDescriptor::default();
    if secinfo & OWNER_SECURITY_INFORMATION != 0 {
        sd.owner = Some(unix_user(uid));
    }
    if secinfo & GROUP_SECURITY_INFORMATION != 0 {
        sd.group = Some(unix_group(gid));
    }
    if secinfo & DACL_SECURITY_INFORMATION != 0 {
        let owner_bits = (mode >> 6) & 7;
        let mut owner = rwx_mask(owner_bits, is_dir) | OWNER_EXTRA | BASE;
        if owner_bits == 7 {
            owner = AccessMask::FILE_ALL_ACCESS;
        }
        let mut aces = vec![Ace::allow(unix_user(uid), owner, 0)];
        let group = rwx_mask((mode >> 3) & 7, is_dir);
        if !group.is_empty() {
            aces.push(Ace::allow(unix_group(gid), group, 0));
        }
        let other = rwx_mask(mode & 7, is_dir);
        if !other.is_empty() {
            aces.push(Ace::allow(everyone(), other, 0));
        }
        aces.push(Ace::allow(local_system(), AccessMask::FILE_ALL_ACCESS, 0));
        aces.push(Ace::allow(
            builtin_administrators(),
            AccessMask::FILE_ALL_ACCESS,
            0,
        ));
        sd.dacl = Some(Acl::new(aces));
    }
    sd
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::security_descriptor::{SE_DACL_PRESENT, SE_SELF_RELATIVE};

    #[test]
    fn mapping() {
        let sd = posix_sd(1000, 100, 0o100644, false, 7);
        let b = sd.encode();
        let d = SecurityDescriptor::decode(&b).unwrap();
        assert_eq!(d.owner.unwrap().to_string(), "S-1-22-1-1000");
        assert_eq!(d.group.unwrap().to_string(), "S-1-22-2-100");
        assert_eq!(d.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
        let dacl = d.dacl.unwrap();
        assert_eq!(dacl.aces.len(), 5);
        match &dacl.aces[2] {
            Ace::Simple { mask, sid, .. } => {
                assert_eq!(sid.to_string(), "S-1-1-0");
                assert!(!mask.intersects(WRITE));
                assert!(mask.intersects(READ));
            }
            a => panic!("{a:?}"),
        }
        // 0o700: owner full control, no group/other ACEs
        let sd = posix_sd(1, 2, 0o40700, true, 7);
        let aces = sd.dacl.unwrap().aces;
        assert_eq!(aces.len(), 3);
        assert!(matches!(
            &aces[0],
            Ace::Simple { mask, .. } if *mask == AccessMask::FILE_ALL_ACCESS
        ));
        // secinfo filters
        let sd = posix_sd(1, 2, 0o644, false, OWNER_SECURITY_INFORMATION);
        assert!(sd.owner.is_some() && sd.group.is_none() && sd.dacl.is_none());
        assert_eq!(posix_sd(1, 2, 0o644, false, 0).encode().len(), 20);
        assert!(rwx_mask(0, false).is_empty());
        assert!(rwx_mask(2, true).contains(DELETE_CHILD));
    }
}
