//! SET_INFO with SMB2_0_INFO_SECURITY ([MS-SMB2] 3.3.5.21.3, [MS-FSA] 2.1.5.16).
//!
//! The selected parts replace those of the file's current descriptor and the result is
//! stored as its NT security descriptor (state/acl.rs), which QUERY_INFO returns and
//! CREATE checks access against from then on. DACL_SECURITY_INFORMATION without
//! SE_DACL_PRESENT, or with a DACL offset of 0, sets a NULL DACL (no restriction).
//!
//! The POSIX metadata follows, best effort, as before stored descriptors existed:
//! - Owner / group: only the Unix SIDs S-1-22-1-<uid> / S-1-22-2-<gid> map (to
//!   fchown). Another owner SID is valid only if it is in the session's token
//!   (take ownership for a group the caller belongs to, e.g. Everyone, as Windows
//!   and Samba allow): it is stored without a POSIX change; any other is
//!   INVALID_OWNER ([MS-FSA] 2.1.5.16). Any other group SID is stored without a
//!   POSIX change. Setting the current owner or group always succeeds; other ids
//!   need the kernel's permission (ACCESS_DENIED otherwise).
//! - DACL control bits are canonicalized as Windows does (`acl::canonical_dacl_control`:
//!   SE_DACL_AUTO_INHERITED survives only with SE_DACL_AUTO_INHERIT_REQ, which is
//!   itself never stored).
//! - DACL: ACCESS_ALLOWED ACEs for the owner (its Unix SID or CREATOR OWNER), the
//!   group (its Unix SID or CREATOR GROUP) and Everyone grant r/w/x: read from
//!   FILE_READ_DATA / GENERIC_READ / GENERIC_ALL, write from FILE_WRITE_DATA /
//!   FILE_APPEND_DATA / GENERIC_WRITE / GENERIC_ALL, execute from FILE_EXECUTE /
//!   GENERIC_EXECUTE / GENERIC_ALL. Everyone's rights apply to owner, group and
//!   other. Inherit-only ACEs, deny ACEs and other trustees are ignored. A NULL DACL
//!   means full access for all. The owner always keeps read and write so the server
//!   can still reach the file. setuid/setgid/sticky bits are kept.
//! - SACL / label: need ACCESS_SYSTEM_SECURITY, which the server never grants
//!   (PRIVILEGE_NOT_HELD).

use smbx_wire::security_descriptor::{
    well_known, Ace, SecurityDescriptor, Sid, ACCESS_ALLOWED_ACE_TYPE, DACL_SECURITY_INFORMATION,
    GROUP_SECURITY_INFORMATION, INHERIT_ONLY_ACE, LABEL_SECURITY_INFORMATION,
    OWNER_SECURITY_INFORMATION, SACL_SECURITY_INFORMATION, SE_DACL_AUTO_INHERITED,
    SE_DACL_DEFAULTED, SE_DACL_PRESENT, SE_DACL_PROTECTED,
};
use smbx_wire::AccessMask;
use smbx_wire::NtStatus;

use crate::state::{acl, FileOpen};

const READ_BITS: AccessMask = AccessMask::FILE_READ_DATA
    .union(AccessMask::GENERIC_READ)
    .union(AccessMask::GENERIC_ALL);
const WRITE_BITS: AccessMask = AccessMask::FILE_WRITE_DATA
    .union(AccessMask::FILE_APPEND_DATA)
    .union(AccessMask::GENERIC_WRITE)
    .union(AccessMask::GENERIC_ALL);
const EXEC_BITS: AccessMask = AccessMask::FILE_EXECUTE
    .union(AccessMask::GENERIC_EXECUTE)
    .union(AccessMask::GENERIC_ALL);

/// Applies the parts of `buf` (a self-relative security descriptor) that
/// `info` (SecurityInformation) selects, for a session with `token`; `admin`
/// (the user is in `admin users`) may give the file to any owner and group.
pub fn set_security(
    f: &FileOpen,
    token: &acl::Token,
    admin: bool,
    read_only_tree: bool,
    info: u32,
    buf: &[u8],
) -> Result<(), NtStatus> {
    // Access first ([MS-SMB2] 3.3.5.21.3 / [MS-FSA] 2.1.5.16).
    if info & (OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | LABEL_SECURITY_INFORMATION)
        != 0
        && !f.access.intersects(AccessMask::WRITE_OWNER)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if info & DACL_SECURITY_INFORMATION != 0 && !f.access.intersects(AccessMask::WRITE_DAC) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if info & SACL_SECURITY_INFORMATION != 0
        && !f.access.intersects(AccessMask::ACCESS_SYSTEM_SECURITY)
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if read_only_tree {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut sd = SecurityDescriptor::decode(buf)
        .map_err(NtStatus::malformed(NtStatus::INVALID_SECURITY_DESCR))?;
    sd.control = acl::canonical_dacl_control(sd.control);
    let st = f.handle.stat()?;
    let mut uid = None;
    let mut gid = None;
    if info & OWNER_SECURITY_INFORMATION != 0 {
        if let Some(owner) = &sd.owner {
            uid = owner_uid(owner, token, admin, st.uid)?;
        }
    }
    if info & GROUP_SECURITY_INFORMATION != 0 {
        if let Some(group) = &sd.group {
            // Only Unix SIDs map to a gid; another SID is stored as it is.
            gid = unix_id(group, 2);
            // A Unix group the caller does not act as is refused (giving files
            // to other groups is a privilege the server's own uid must not lend).
            if gid.is_some_and(|g| g != st.gid && !admin && !token.contains(group)) {
                return Err(NtStatus::INVALID_PRIMARY_GROUP);
            }
        }
    }
    if uid.is_some() || gid.is_some() {
        f.handle.set_owner(uid, gid)?;
    }
    if info & DACL_SECURITY_INFORMATION != 0 {
        let owner = uid.unwrap_or(st.uid);
        let group = gid.unwrap_or(st.gid);
        let perm = if sd.control & SE_DACL_PRESENT == 0 || sd.dacl.is_none() {
            0o777
        } else {
            let aces = sd.dacl.as_ref().map(|a| a.aces.as_slice()).unwrap_or(&[]);
            dacl_to_mode(aces, owner, group)
        };
        let mode = (st.mode & 0o7000) | perm | 0o600;
        // Best effort: the stored descriptor is what counts.
        if let Err(e) = f.handle.set_mode(mode) {
            tracing::debug!(path = %f.path, "cannot map the DACL to mode bits: {e:?}");
        }
    }
    if info & (OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION)
        != 0
    {
        let st = f.handle.stat()?;
        let mut cur = acl::effective(acl::stored(&f.handle)?, &st);
        merge(&mut cur, &sd, info);
        f.handle.set_nt_acl(Some(&cur.encode()))?;
    }
    Ok(())
}

/// Replaces the parts of `cur` that `info` selects with those of `new`.
pub fn merge(cur: &mut SecurityDescriptor, new: &SecurityDescriptor, info: u32) {
    const DACL_CONTROL: u16 =
        SE_DACL_PRESENT | SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED | SE_DACL_DEFAULTED;
    if info & OWNER_SECURITY_INFORMATION != 0 && new.owner.is_some() {
        cur.owner = new.owner.clone();
    }
    if info & GROUP_SECURITY_INFORMATION != 0 && new.group.is_some() {
        cur.group = new.group.clone();
    }
    if info & DACL_SECURITY_INFORMATION != 0 {
        // Without SE_DACL_PRESENT the DACL is NULL (no restriction) as well.
        cur.control =
            (cur.control & !DACL_CONTROL) | (new.control & DACL_CONTROL) | SE_DACL_PRESENT;
        // Generic rights of effective ACEs are stored mapped to file rights (as
        // Windows; smb2.acls.GENERIC, CREATOR).
        cur.dacl = if new.control & SE_DACL_PRESENT != 0 {
            new.dacl.as_ref().map(acl::map_generic_acl)
        } else {
            None
        };
    }
}

/// Whether `owner` may become a file's owner for a session with `token`, and the
/// Unix uid to chown to. As on Windows, the owner must be a SID of the caller's
/// token (a non-Unix one is stored without a POSIX change); the current owner may
/// be set again; an administrator (`admin users`) may set any Unix user. Anything
/// else is INVALID_OWNER, so no user can give a file to another uid.
fn owner_uid(
    owner: &Sid,
    token: &acl::Token,
    admin: bool,
    current_uid: u32,
) -> Result<Option<u32>, NtStatus> {
    match unix_id(owner, 1) {
        Some(uid) if uid == current_uid || admin || token.contains(owner) => Ok(Some(uid)),
        None if token.contains(owner) => Ok(None),
        _ => Err(NtStatus::INVALID_OWNER),
    }
}

/// The id of a Unix SID S-1-22-`kind`-<id>.
fn unix_id(sid: &Sid, kind: u32) -> Option<u32> {
    if sid.authority_value() != 22 {
        return None;
    }
    match sid.sub_authorities.as_slice() {
        [k, id] if *k == kind => Some(*id),
        _ => None,
    }
}

fn rwx(mask: AccessMask) -> u32 {
    let mut m = 0;
    if mask.intersects(READ_BITS) {
        m |= 4;
    }
    if mask.intersects(WRITE_BITS) {
        m |= 2;
    }
    if mask.intersects(EXEC_BITS) {
        m |= 1;
    }
    m
}

/// POSIX permission bits (0o777 range) granted by the ALLOW ACEs of a DACL.
pub fn dacl_to_mode(aces: &[Ace], uid: u32, gid: u32) -> u32 {
    let owner_sid = well_known::unix_user(uid);
    let group_sid = well_known::unix_group(gid);
    let everyone = well_known::everyone();
    let creator_owner = well_known::creator_owner();
    let creator_group = well_known::creator_group();
    let (mut u, mut g, mut o) = (0u32, 0u32, 0u32);
    for ace in aces {
        let Ace::Simple {
            ace_type,
            flags,
            mask,
            sid,
        } = ace
        else {
            continue;
        };
        if *ace_type != ACCESS_ALLOWED_ACE_TYPE || flags & INHERIT_ONLY_ACE != 0 {
            continue;
        }
        let bits = rwx(*mask);
        if *sid == owner_sid || *sid == creator_owner {
            u |= bits;
        } else if *sid == group_sid || *sid == creator_group {
            g |= bits;
        } else if *sid == everyone {
            u |= bits;
            g |= bits;
            o |= bits;
        }
    }
    (u << 6) | (g << 3) | o
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::security_descriptor::well_known::*;

    #[test]
    fn maps_dacl_to_mode() {
        let aces = vec![
            Ace::allow(unix_user(1000), AccessMask::FILE_ALL_ACCESS, 0),
            Ace::allow(unix_group(100), AccessMask(0x0012_0089), 0),
            Ace::allow(everyone(), AccessMask::GENERIC_READ, 0),
            // Ignored: inherit-only, deny, unknown trustee.
            Ace::allow(everyone(), AccessMask::GENERIC_ALL, INHERIT_ONLY_ACE),
            Ace::deny(unix_user(1000), AccessMask::FILE_WRITE_DATA, 0),
            Ace::allow(
                "S-1-5-21-1-2-3-1001".parse().unwrap(),
                AccessMask::GENERIC_ALL,
                0,
            ),
        ];
        assert_eq!(dacl_to_mode(&aces, 1000, 100), 0o744);
        assert_eq!(dacl_to_mode(&[], 1000, 100), 0);
        let exec_only = [Ace::allow(unix_group(100), AccessMask::FILE_EXECUTE, 0)];
        assert_eq!(dacl_to_mode(&exec_only, 1, 100), 0o010);
    }

    #[test]
    fn merge_replaces_the_selected_parts() {
        let mut cur = SecurityDescriptor {
            owner: Some(unix_user(1)),
            group: Some(unix_group(2)),
            dacl: Some(smbx_wire::security_descriptor::Acl::new(vec![])),
            ..Default::default()
        };
        let new = SecurityDescriptor {
            control: SE_DACL_PRESENT | SE_DACL_PROTECTED,
            owner: Some(unix_user(9)),
            dacl: Some(smbx_wire::security_descriptor::Acl::new(vec![
                Ace::allow(everyone(), AccessMask::GENERIC_READ, 0),
                Ace::allow(everyone(), AccessMask::GENERIC_ALL, INHERIT_ONLY_ACE),
            ])),
            ..Default::default()
        };
        merge(&mut cur, &new, DACL_SECURITY_INFORMATION);
        // Owner not selected: kept. Effective generic bits mapped, inherit-only kept.
        assert_eq!(cur.owner, Some(unix_user(1)));
        assert_eq!(cur.control, SE_DACL_PRESENT | SE_DACL_PROTECTED);
        assert_eq!(
            cur.dacl.as_ref().unwrap().aces,
            vec![
                Ace::allow(everyone(), AccessMask(0x0012_0089), 0),
                Ace::allow(everyone(), AccessMask::GENERIC_ALL, INHERIT_ONLY_ACE),
            ]
        );
        // DACL_SECURITY_INFORMATION without SE_DACL_PRESENT: a NULL DACL.
        merge(
            &mut cur,
            &SecurityDescriptor::default(),
            DACL_SECURITY_INFORMATION,
        );
        assert_eq!(cur.dacl, None);
        assert_ne!(cur.control & SE_DACL_PRESENT, 0);
        merge(&mut cur, &new, OWNER_SECURITY_INFORMATION);
        assert_eq!(cur.owner, Some(unix_user(9)));
    }

    #[test]
    fn owner_rules() {
        let token = acl::Token::with_sids(vec![unix_user(5), everyone()]);
        // A Unix user of the token, the current owner, or anyone for an admin.
        assert_eq!(owner_uid(&unix_user(5), &token, false, 7), Ok(Some(5)));
        assert_eq!(owner_uid(&unix_user(7), &token, false, 7), Ok(Some(7)));
        assert_eq!(owner_uid(&unix_user(42), &token, true, 7), Ok(Some(42)));
        // Another Unix user is refused: no one gives a file away.
        assert_eq!(
            owner_uid(&unix_user(42), &token, false, 7),
            Err(NtStatus::INVALID_OWNER)
        );
        // A group of the caller's token: take ownership without a chown.
        assert_eq!(owner_uid(&everyone(), &token, false, 7), Ok(None));
        let foreign: Sid = "S-1-5-21-1-2-3-1001".parse().unwrap();
        assert_eq!(
            owner_uid(&foreign, &token, true, 7),
            Err(NtStatus::INVALID_OWNER)
        );
        // Changing the owner keeps the DACL and its control bits.
        let mut cur = SecurityDescriptor {
            control: SE_DACL_PRESENT | SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED,
            owner: Some(unix_user(5)),
            dacl: Some(smbx_wire::security_descriptor::Acl::new(vec![])),
            ..Default::default()
        };
        let before = cur.clone();
        let new = SecurityDescriptor {
            owner: Some(everyone()),
            ..Default::default()
        };
        merge(&mut cur, &new, OWNER_SECURITY_INFORMATION);
        assert_eq!(cur.owner, Some(everyone()));
        assert_eq!((cur.control, &cur.dacl), (before.control, &before.dacl));
    }

    #[test]
    fn unix_sids() {
        assert_eq!(unix_id(&unix_user(42), 1), Some(42));
        assert_eq!(unix_id(&unix_group(7), 2), Some(7));
        assert_eq!(unix_id(&unix_group(7), 1), None);
        assert_eq!(unix_id(&everyone(), 1), None);
    }
}
