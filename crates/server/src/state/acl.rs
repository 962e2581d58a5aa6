//! NT security descriptors of files and directories ([MS-DTYP] 2.4.6, 2.5.3).
//!
//! A descriptor set at CREATE (SecD context), through SET_INFO, or inherited from the
//! parent directory is stored verbatim with the file (`smbx_vfs::Handle::nt_acl`, an
//! xattr as Samba's `acl_xattr`). A file without one has the descriptor derived from
//! its POSIX owner, group and mode ([`super::posix_sd`]); such files are
//! not access-checked beyond the tree's maximal access, as before.
//!
//! Identity: every session acts on the file system as the server process, so the
//! [`Token`] holds the process's Unix SIDs (S-1-22-1-euid, S-1-22-2-egid), Everyone
//! and, for authenticated non-guest sessions, Authenticated Users. The owner of a
//! descriptor is implicitly granted READ_CONTROL and WRITE_DAC unless an OWNER RIGHTS
//! ACE says otherwise.
//!
//! Access check ([MS-DTYP] 2.5.3.2, as a maximum-allowed computation): no DACL or a
//! NULL DACL grants everything; otherwise the effective (non inherit-only) ACEs whose
//! trustee is in the token are walked in order, an allow ACE granting the bits not yet
//! denied and a deny ACE denying the bits not yet granted; generic bits are mapped to
//! file rights.
//!
//! Inheritance ([MS-DTYP] 2.5.3.4): a new file gets the parent's OBJECT_INHERIT ACEs, a
//! new directory its CONTAINER_INHERIT ACEs (kept inheritable unless
//! NO_PROPAGATE_INHERIT) and its OBJECT_INHERIT-only ACEs as inherit-only; CREATOR
//! OWNER / CREATOR GROUP become the new owner / group and generic bits are mapped in
//! the effective copy (an inheritable original is kept inherit-only beside it);
//! inherited ACEs carry INHERITED_ACE only when the parent's DACL is
//! SE_DACL_AUTO_INHERITED. A parent with a stored descriptor but no inheritable ACE
//! gives the Windows default (full control for owner and SYSTEM); a parent without a
//! stored descriptor passes nothing on.

use smbx_vfs::FileInfo;
use smbx_wire::security_descriptor::well_known::{
    creator_group, creator_owner, everyone, local_system, unix_group, unix_user,
};
use smbx_wire::security_descriptor::{
    Ace, Acl, SecurityDescriptor, Sid, ACCESS_ALLOWED_ACE_TYPE, ACCESS_DENIED_ACE_TYPE,
    CONTAINER_INHERIT_ACE, DACL_SECURITY_INFORMATION, GROUP_SECURITY_INFORMATION, INHERITED_ACE,
    INHERIT_ONLY_ACE, NO_PROPAGATE_INHERIT_ACE, OBJECT_INHERIT_ACE, OWNER_SECURITY_INFORMATION,
    SE_DACL_AUTO_INHERITED, SE_DACL_AUTO_INHERIT_REQ, SE_DACL_DEFAULTED, SE_DACL_PRESENT,
    SE_DACL_PROTECTED,
};
use smbx_wire::AccessMask;

use super::posix_sd::posix_sd;
use crate::state::session::SessionUser;

/// Every right a DACL can grant on a file (FILE_ALL_ACCESS).
pub const ALL_RIGHTS: AccessMask = AccessMask::FILE_ALL_ACCESS;

/// The DACL control bits a descriptor set by a client (SET_INFO, CREATE SecD) keeps
/// ([MS-DTYP] 2.4.6, as Windows canonicalizes them): SE_DACL_AUTO_INHERIT_REQ is a
/// request and is dropped; SE_DACL_AUTO_INHERITED is kept only when it comes with
/// that request (otherwise the DACL was not computed by auto-inheritance); the other
/// bits are kept.
pub fn canonical_dacl_control(control: u16) -> u16 {
    let both = SE_DACL_AUTO_INHERITED | SE_DACL_AUTO_INHERIT_REQ;
    let keep = if control & both == both {
        SE_DACL_AUTO_INHERITED
    } else {
        0
    };
    (control & !both) | keep
}

/// OWNER RIGHTS (S-1-3-4).
pub fn owner_rights() -> Sid {
    Sid::new(3, &[4])
}

/// Authenticated Users (S-1-5-11).
pub fn authenticated_users() -> Sid {
    Sid::new(5, &[11])
}

/// The SIDs a session acts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    sids: Vec<Sid>,
}

impl Token {
    /// The token of a session user (`None`: not yet authenticated, treated as
    /// anonymous).
    pub fn for_user(user: Option<&SessionUser>) -> Token {
        let (uid, gid) = smbx_vfs::process_ids();
        let mut sids = vec![unix_user(uid), unix_group(gid), everyone()];
        if user.is_some_and(|u| !u.anonymous && !u.guest) {
            sids.push(authenticated_users());
        }
        Token { sids }
    }

    /// A token with exactly these SIDs (tests).
    pub fn with_sids(sids: Vec<Sid>) -> Token {
        Token { sids }
    }

    /// Whether `sid` is one of the token's.
    pub fn contains(&self, sid: &Sid) -> bool {
        self.sids.iter().any(|s| s == sid)
    }
}

/// The descriptor derived from POSIX metadata (owner, group, DACL).
pub fn default_sd(info: &FileInfo) -> SecurityDescriptor {
    posix_sd(
        info.uid,
        info.gid,
        info.mode,
        info.is_dir,
        OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
    )
}

/// The stored descriptor of a handle, if any (an undecodable one counts as none).
pub fn stored(h: &smbx_vfs::Handle) -> Result<Option<SecurityDescriptor>, smbx_wire::NtStatus> {
    Ok(h.nt_acl()?
        .and_then(|b| SecurityDescriptor::decode(&b).ok()))
}

/// The descriptor clients see: the stored one (owner / group it lacks taken from
/// POSIX), else the POSIX-derived one.
pub fn effective(stored: Option<SecurityDescriptor>, info: &FileInfo) -> SecurityDescriptor {
    let def = default_sd(info);
    match stored {
        Some(mut sd) => {
            if sd.owner.is_none() {
                sd.owner = def.owner;
            }
            if sd.group.is_none() {
                sd.group = def.group;
            }
            sd.sacl = None;
            sd
        }
        None => def,
    }
}

/// The parts of `sd` that SecurityInformation `secinfo` selects (never a SACL).
pub fn select(sd: &SecurityDescriptor, secinfo: u32) -> SecurityDescriptor {
    const DACL_CONTROL: u16 =
        SE_DACL_PRESENT | SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED | SE_DACL_DEFAULTED;
    let mut out = SecurityDescriptor::default();
    if secinfo & OWNER_SECURITY_INFORMATION != 0 {
        out.owner = sd.owner.clone();
    }
    if secinfo & GROUP_SECURITY_INFORMATION != 0 {
        out.group = sd.group.clone();
    }
    if secinfo & DACL_SECURITY_INFORMATION != 0 {
        out.control = sd.control & DACL_CONTROL;
        out.dacl = sd.dacl.clone();
    }
    out
}

/// The rights `sd` grants `token` (a maximum-allowed access check).
pub fn max_access(sd: &SecurityDescriptor, token: &Token) -> AccessMask {
    let Some(dacl) = &sd.dacl else {
        // No DACL / NULL DACL: no restriction.
        return ALL_RIGHTS;
    };
    let is_owner = sd.owner.as_ref().is_some_and(|o| token.contains(o));
    let owner_rights = owner_rights();
    let mut owner_rights_ace = false;
    let (mut granted, mut denied) = (AccessMask::empty(), AccessMask::empty());
    for ace in &dacl.aces {
        let Ace::Simple {
            ace_type,
            flags,
            mask,
            sid,
        } = ace
        else {
            continue;
        };
        if flags & INHERIT_ONLY_ACE != 0 {
            continue;
        }
        let applies = if *sid == owner_rights {
            owner_rights_ace = true;
            is_owner
        } else {
            token.contains(sid)
        };
        if !applies {
            continue;
        }
        let m = mask.map_generic() & ALL_RIGHTS;
        match *ace_type {
            ACCESS_ALLOWED_ACE_TYPE => granted |= m & !denied,
            ACCESS_DENIED_ACE_TYPE => denied |= m & !granted,
            _ => {}
        }
    }
    if is_owner && !owner_rights_ace {
        granted |= (AccessMask::READ_CONTROL | AccessMask::WRITE_DAC) & !denied;
    }
    granted
}

/// Maps generic bits of the effective ACEs of `acl` (inherit-only ACEs keep theirs).
pub fn map_generic_acl(acl: &Acl) -> Acl {
    let aces = acl
        .aces
        .iter()
        .map(|a| match a {
            Ace::Simple {
                ace_type,
                flags,
                mask,
                sid,
            } if flags & INHERIT_ONLY_ACE == 0 => Ace::Simple {
                ace_type: *ace_type,
                flags: *flags,
                mask: mask.map_generic(),
                sid: sid.clone(),
            },
            other => other.clone(),
        })
        .collect();
    Acl {
        revision: acl.revision,
        aces,
    }
}

/// The DACL a new file (`is_dir`: directory) inherits from its parent's descriptor;
/// `None` if nothing is inheritable.
pub fn inherit(parent: &SecurityDescriptor, is_dir: bool, owner: &Sid, group: &Sid) -> Option<Acl> {
    let dacl = parent.dacl.as_ref()?;
    let (co, cg) = (creator_owner(), creator_group());
    // Inherited ACEs are marked INHERITED_ACE only under auto-inheritance (the parent's
    // SE_DACL_AUTO_INHERITED), as Windows and Samba (smb2.acls.INHERITANCE).
    let inherited = if parent.control & SE_DACL_AUTO_INHERITED != 0 {
        INHERITED_ACE
    } else {
        0
    };
    let mut out = Vec::new();
    for ace in &dacl.aces {
        let Ace::Simple {
            ace_type,
            flags,
            mask,
            sid,
        } = ace
        else {
            continue;
        };
        let effective = |out: &mut Vec<Ace>| {
            let sid = if *sid == co {
                owner.clone()
            } else if *sid == cg {
                group.clone()
            } else {
                sid.clone()
            };
            out.push(Ace::Simple {
                ace_type: *ace_type,
                flags: inherited,
                mask: mask.map_generic(),
                sid,
            });
        };
        let oi = flags & OBJECT_INHERIT_ACE != 0;
        let ci = flags & CONTAINER_INHERIT_ACE != 0;
        let no_propagate = flags & NO_PROPAGATE_INHERIT_ACE != 0;
        if !is_dir {
            if oi {
                effective(&mut out);
            }
            continue;
        }
        if ci {
            let needs_split = *sid == co || *sid == cg || mask.map_generic() != *mask;
            if no_propagate {
                effective(&mut out);
            } else if needs_split {
                effective(&mut out);
                out.push(Ace::Simple {
                    ace_type: *ace_type,
                    flags: (flags & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE))
                        | INHERIT_ONLY_ACE
                        | inherited,
                    mask: *mask,
                    sid: sid.clone(),
                });
            } else {
                out.push(Ace::Simple {
                    ace_type: *ace_type,
                    flags: (flags & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE)) | inherited,
                    mask: *mask,
                    sid: sid.clone(),
                });
            }
        } else if oi && !no_propagate {
            out.push(Ace::Simple {
                ace_type: *ace_type,
                flags: OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | inherited,
                mask: *mask,
                sid: sid.clone(),
            });
        }
    }
    (!out.is_empty()).then(|| Acl::new(out))
}

/// The descriptor to store for a new file: `given` (the CREATE's SecD, may be absent
/// or empty) completed with the defaults and the parent's (stored) descriptor: its
/// inheritable ACEs, or if it has none, full control for the owner and SYSTEM. `None`
/// when the parent has no stored descriptor and the SecD sets nothing: the
/// POSIX-derived default applies.
pub fn for_new_file(
    given: Option<&SecurityDescriptor>,
    parent: Option<&SecurityDescriptor>,
    info: &FileInfo,
) -> Option<SecurityDescriptor> {
    let def = default_sd(info);
    let owner = given.and_then(|g| g.owner.clone()).or(def.owner.clone())?;
    let group = given.and_then(|g| g.group.clone()).or(def.group.clone())?;
    let explicit_dacl = given.is_some_and(|g| g.control & SE_DACL_PRESENT != 0);
    let inherited = if explicit_dacl {
        None
    } else {
        parent.and_then(|p| inherit(p, info.is_dir, &owner, &group))
    };
    let given_parts =
        given.is_some_and(|g| g.owner.is_some() || g.group.is_some() || explicit_dacl);
    if !given_parts && inherited.is_none() && parent.is_none() {
        return None;
    }
    let mut sd = SecurityDescriptor {
        owner: Some(owner),
        group: Some(group),
        ..Default::default()
    };
    if explicit_dacl {
        let g = given?;
        sd.control = canonical_dacl_control(g.control)
            & (SE_DACL_PRESENT | SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED);
        sd.dacl = g.dacl.as_ref().map(map_generic_acl);
    } else if let Some(acl) = inherited {
        if parent.is_some_and(|p| p.control & SE_DACL_AUTO_INHERITED != 0) {
            sd.control |= SE_DACL_AUTO_INHERITED;
        }
        sd.dacl = Some(acl);
    } else if parent.is_some() {
        // A parent with a descriptor but nothing to pass on: the Windows default,
        // full control for the owner and SYSTEM.
        sd.dacl = Some(Acl::new(vec![
            Ace::allow(sd.owner.clone()?, ALL_RIGHTS, 0),
            Ace::allow(local_system(), ALL_RIGHTS, 0),
        ]));
    } else {
        sd.dacl = def.dacl;
    }
    Some(sd)
}

/// The share-relative path of the directory holding `name` (a stream's base file
/// counts); `None` for the share root.
fn parent_of(name: &str) -> Option<&str> {
    let base = name.split(':').next().unwrap_or("");
    if base.is_empty() {
        return None;
    }
    Some(base.rsplit_once('\\').map_or("", |(p, _)| p))
}

/// The stored descriptor (if any) and metadata of the directory holding `name`.
pub(crate) fn parent_sd(
    vfs: &smbx_vfs::Share,
    name: &str,
) -> Option<(Option<SecurityDescriptor>, FileInfo)> {
    let parent = parent_of(name)?;
    let (h, _) = vfs
        .create(parent, &smbx_vfs::CreateRequest::read_attributes())
        .ok()?;
    let info = h.stat().ok()?;
    Some((stored(&h).ok()?, info))
}

/// Access check of an existing file against its stored NT descriptor (state/acl.rs;
/// files without one are not checked here). DELETE is also granted by
/// FILE_DELETE_CHILD on the parent, FILE_READ_ATTRIBUTES by FILE_LIST_DIRECTORY
/// ([MS-FSA] 2.1.5.1.2.1); a parent without a stored descriptor grants both. Returns the rights the descriptor allows, or
/// ACCESS_DENIED if `desired` (mapped, without MAXIMUM_ALLOWED) asks for more.
pub(crate) fn check_stored_sd(
    vfs: &smbx_vfs::Share,
    name: &str,
    h: &smbx_vfs::Handle,
    token: &Token,
    desired: AccessMask,
) -> Result<Option<AccessMask>, smbx_wire::NtStatus> {
    let Some(stored) = stored(h)? else {
        return Ok(None);
    };
    let info = h.stat()?;
    let mut max = max_access(&effective(Some(stored), &info), token);
    let via_parent = AccessMask::DELETE | AccessMask::FILE_READ_ATTRIBUTES;
    if !max.contains(via_parent) {
        // A parent without a stored descriptor is not access-checked: it passes both.
        if let Some((p, pinfo)) = parent_sd(vfs, name) {
            let pmax = match p {
                Some(p) => max_access(&effective(Some(p), &pinfo), token),
                None => ALL_RIGHTS,
            };
            if pmax.contains(AccessMask::FILE_DELETE_CHILD) {
                max |= AccessMask::DELETE;
            }
            if pmax.contains(AccessMask::FILE_LIST_DIRECTORY) {
                max |= AccessMask::FILE_READ_ATTRIBUTES;
            }
        }
    }
    if !desired.difference(max).is_empty() {
        return Err(smbx_wire::NtStatus::ACCESS_DENIED);
    }
    Ok(Some(max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::security_descriptor::SE_SELF_RELATIVE;

    fn info(is_dir: bool) -> FileInfo {
        FileInfo {
            uid: 1000,
            gid: 100,
            mode: if is_dir { 0o40755 } else { 0o100644 },
            is_dir,
            ..Default::default()
        }
    }

    fn sd_with(owner: Sid, aces: Option<Vec<Ace>>) -> SecurityDescriptor {
        SecurityDescriptor {
            control: SE_DACL_PRESENT,
            owner: Some(owner),
            group: Some(unix_group(100)),
            sacl: None,
            dacl: aces.map(Acl::new),
        }
    }

    #[test]
    fn access_check() {
        let me = unix_user(1000);
        let token = Token::with_sids(vec![me.clone(), everyone()]);
        let other = unix_user(5);
        // NULL DACL: everything.
        assert_eq!(
            max_access(&sd_with(other.clone(), None), &token),
            ALL_RIGHTS
        );
        // Empty DACL: nothing, but the owner's implicit READ_CONTROL | WRITE_DAC.
        assert_eq!(
            max_access(&sd_with(other.clone(), Some(vec![])), &token),
            AccessMask::empty()
        );
        assert_eq!(
            max_access(&sd_with(me.clone(), Some(vec![])), &token),
            AccessMask::READ_CONTROL | AccessMask::WRITE_DAC
        );
        // Order matters: an earlier allow beats a later deny, an earlier deny wins.
        let aces = vec![
            Ace::allow(everyone(), AccessMask(0x1), 0),
            Ace::deny(everyone(), AccessMask(0x3), 0),
            Ace::allow(me.clone(), AccessMask(0x80000000), 0), // GENERIC_READ
            Ace::allow(everyone(), AccessMask(0x4), INHERIT_ONLY_ACE),
            Ace::allow(other.clone(), AccessMask(0x8), 0),
        ];
        let g = max_access(&sd_with(other.clone(), Some(aces)), &token);
        assert_eq!(g, AccessMask(0x0012_0089 & !0x2));
        // OWNER RIGHTS replaces the implicit owner rights.
        let aces = vec![Ace::allow(owner_rights(), AccessMask(0x1), 0)];
        assert_eq!(
            max_access(&sd_with(me, Some(aces)), &token),
            AccessMask(0x1)
        );
    }

    #[test]
    fn dacl_control_canonicalization() {
        let (ai, req, prot) = (
            SE_DACL_AUTO_INHERITED,
            SE_DACL_AUTO_INHERIT_REQ,
            SE_DACL_PROTECTED,
        );
        let p = SE_DACL_PRESENT;
        assert_eq!(canonical_dacl_control(p), p);
        assert_eq!(canonical_dacl_control(p | ai), p);
        assert_eq!(canonical_dacl_control(p | req), p);
        assert_eq!(canonical_dacl_control(p | ai | req), p | ai);
        assert_eq!(canonical_dacl_control(p | prot | ai), p | prot);
        assert_eq!(canonical_dacl_control(p | prot | ai | req), p | prot | ai);
    }

    #[test]
    fn inheritance() {
        let mut parent = sd_with(
            unix_user(1),
            Some(vec![
                Ace::allow(everyone(), AccessMask(0x1), OBJECT_INHERIT_ACE),
                Ace::allow(everyone(), AccessMask(0x2), CONTAINER_INHERIT_ACE),
                Ace::allow(
                    creator_owner(),
                    AccessMask(0x1000_0000),
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                ),
                Ace::allow(
                    everyone(),
                    AccessMask(0x4),
                    CONTAINER_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE,
                ),
                Ace::allow(everyone(), AccessMask(0x8), 0),
            ]),
        );
        let (o, g) = (unix_user(7), unix_group(8));
        // Without auto-inheritance no INHERITED_ACE flag.
        assert_eq!(
            inherit(&parent, false, &o, &g).unwrap().aces[0],
            Ace::allow(everyone(), AccessMask(0x1), 0)
        );
        parent.control |= SE_DACL_AUTO_INHERITED;
        let file = inherit(&parent, false, &o, &g).unwrap();
        assert_eq!(
            file.aces,
            vec![
                Ace::allow(everyone(), AccessMask(0x1), INHERITED_ACE),
                Ace::allow(o.clone(), ALL_RIGHTS, INHERITED_ACE),
            ]
        );
        let dir = inherit(&parent, true, &o, &g).unwrap();
        assert_eq!(
            dir.aces,
            vec![
                Ace::allow(
                    everyone(),
                    AccessMask(0x1),
                    OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE
                ),
                Ace::allow(
                    everyone(),
                    AccessMask(0x2),
                    CONTAINER_INHERIT_ACE | INHERITED_ACE
                ),
                Ace::allow(o.clone(), ALL_RIGHTS, INHERITED_ACE),
                Ace::allow(
                    creator_owner(),
                    AccessMask(0x1000_0000),
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE
                ),
                Ace::allow(everyone(), AccessMask(0x4), INHERITED_ACE),
            ]
        );
        // Nothing inheritable.
        let plain = sd_with(
            unix_user(1),
            Some(vec![Ace::allow(everyone(), AccessMask(1), 0)]),
        );
        assert_eq!(inherit(&plain, false, &o, &g), None);
    }

    #[test]
    fn new_file_descriptor() {
        let i = info(false);
        // Nothing given, nothing inherited: keep the POSIX default.
        assert_eq!(for_new_file(None, None, &i), None);
        let empty = SecurityDescriptor::default();
        assert_eq!(for_new_file(Some(&empty), None, &i), None);
        // An explicit DACL is kept as given (generic bits mapped), parent ignored.
        let given = SecurityDescriptor {
            control: SE_DACL_PRESENT,
            dacl: Some(Acl::new(vec![Ace::allow(
                everyone(),
                AccessMask(0x8000_0000),
                0,
            )])),
            ..Default::default()
        };
        let parent = sd_with(
            unix_user(1),
            Some(vec![Ace::allow(
                everyone(),
                AccessMask(0x1),
                OBJECT_INHERIT_ACE,
            )]),
        );
        let sd = for_new_file(Some(&given), Some(&parent), &i).unwrap();
        assert_eq!(sd.owner, Some(unix_user(1000)));
        assert_eq!(
            sd.dacl.unwrap().aces,
            vec![Ace::allow(everyone(), AccessMask(0x0012_0089), 0)]
        );
        // A NULL DACL stays NULL (DACL_PRESENT without a DACL) through encoding.
        let null = SecurityDescriptor {
            control: SE_DACL_PRESENT,
            ..Default::default()
        };
        let sd = for_new_file(Some(&null), None, &i).unwrap();
        let d = SecurityDescriptor::decode(&sd.encode()).unwrap();
        assert_eq!(
            d.control & (SE_DACL_PRESENT | SE_SELF_RELATIVE),
            SE_DACL_PRESENT | SE_SELF_RELATIVE
        );
        assert_eq!(d.dacl, None);
        // Inherited without a SecD.
        let sd = for_new_file(None, Some(&parent), &i).unwrap();
        assert_eq!(
            sd.dacl.unwrap().aces,
            vec![Ace::allow(everyone(), AccessMask(0x1), 0)]
        );
        // A parent descriptor with nothing inheritable: owner and SYSTEM full control.
        let plain = sd_with(
            unix_user(1),
            Some(vec![Ace::allow(everyone(), AccessMask(1), 0)]),
        );
        let sd = for_new_file(None, Some(&plain), &i).unwrap();
        assert_eq!(
            sd.dacl.unwrap().aces,
            vec![
                Ace::allow(unix_user(1000), ALL_RIGHTS, 0),
                Ace::allow(local_system(), ALL_RIGHTS, 0)
            ]
        );
        // select() keeps only what is asked.
        let e = effective(None, &i);
        let s = select(&e, OWNER_SECURITY_INFORMATION);
        assert!(s.owner.is_some() && s.group.is_none() && s.dacl.is_none());
    }
}
