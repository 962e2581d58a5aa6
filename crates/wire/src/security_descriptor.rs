//! Security descriptors ([MS-DTYP] 2.4.2 SID, 2.4.4 ACE, 2.4.5 ACL, 2.4.6
//! SECURITY_DESCRIPTOR in self-relative form), as QUERY_INFO / SET_INFO
//! (SMB2_0_INFO_SECURITY) and CREATE's SD context carry them.
//!
//! Decoding checks every offset and size against the buffer: SIDs have at most 15
//! sub-authorities, ACL sizes lie inside the buffer, each ACE's size lies inside its
//! ACL, and AceCount is bounded by the ACL size.

use std::fmt;
use std::str::FromStr;

use crate::access::AccessMask;
use crate::codec::{Reader, WireError, Writer};

/// OWNER_SECURITY_INFORMATION.
pub const OWNER_SECURITY_INFORMATION: u32 = 0x0000_0001;
/// GROUP_SECURITY_INFORMATION.
pub const GROUP_SECURITY_INFORMATION: u32 = 0x0000_0002;
/// DACL_SECURITY_INFORMATION.
pub const DACL_SECURITY_INFORMATION: u32 = 0x0000_0004;
/// SACL_SECURITY_INFORMATION.
pub const SACL_SECURITY_INFORMATION: u32 = 0x0000_0008;
/// LABEL_SECURITY_INFORMATION.
pub const LABEL_SECURITY_INFORMATION: u32 = 0x0000_0010;

/// SE_OWNER_DEFAULTED.
pub const SE_OWNER_DEFAULTED: u16 = 0x0001;
/// SE_GROUP_DEFAULTED.
pub const SE_GROUP_DEFAULTED: u16 = 0x0002;
/// SE_DACL_PRESENT.
pub const SE_DACL_PRESENT: u16 = 0x0004;
/// SE_DACL_DEFAULTED.
pub const SE_DACL_DEFAULTED: u16 = 0x0008;
/// SE_SACL_PRESENT.
pub const SE_SACL_PRESENT: u16 = 0x0010;
/// SE_DACL_AUTO_INHERIT_REQ ("DR"): a request to compute the DACL by
/// auto-inheritance, never stored.
pub const SE_DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
/// SE_DACL_AUTO_INHERITED.
pub const SE_DACL_AUTO_INHERITED: u16 = 0x0400;
/// SE_SACL_AUTO_INHERITED.
pub const SE_SACL_AUTO_INHERITED: u16 = 0x0800;
/// SE_DACL_PROTECTED.
pub const SE_DACL_PROTECTED: u16 = 0x1000;
/// SE_SACL_PROTECTED.
pub const SE_SACL_PROTECTED: u16 = 0x2000;
/// SE_SELF_RELATIVE.
pub const SE_SELF_RELATIVE: u16 = 0x8000;

/// ACCESS_ALLOWED_ACE_TYPE.
pub const ACCESS_ALLOWED_ACE_TYPE: u8 = 0x00;
/// ACCESS_DENIED_ACE_TYPE.
pub const ACCESS_DENIED_ACE_TYPE: u8 = 0x01;
/// SYSTEM_AUDIT_ACE_TYPE.
pub const SYSTEM_AUDIT_ACE_TYPE: u8 = 0x02;
/// SYSTEM_MANDATORY_LABEL_ACE_TYPE.
pub const SYSTEM_MANDATORY_LABEL_ACE_TYPE: u8 = 0x11;

/// OBJECT_INHERIT_ACE.
pub const OBJECT_INHERIT_ACE: u8 = 0x01;
/// CONTAINER_INHERIT_ACE.
pub const CONTAINER_INHERIT_ACE: u8 = 0x02;
/// NO_PROPAGATE_INHERIT_ACE.
pub const NO_PROPAGATE_INHERIT_ACE: u8 = 0x04;
/// INHERIT_ONLY_ACE.
pub const INHERIT_ONLY_ACE: u8 = 0x08;
/// INHERITED_ACE.
pub const INHERITED_ACE: u8 = 0x10;

/// ACL_REVISION.
pub const ACL_REVISION: u8 = 2;
/// ACL_REVISION_DS (object ACEs).
pub const ACL_REVISION_DS: u8 = 4;

/// Most sub-authorities a SID may have.
pub const SID_MAX_SUB_AUTHORITIES: usize = 15;

/// A security identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sid {
    /// Revision (1).
    pub revision: u8,
    /// IdentifierAuthority (big-endian 48-bit value).
    pub authority: [u8; 6],
    /// SubAuthority values (at most 15).
    pub sub_authorities: Vec<u32>,
}

impl Sid {
    /// A SID with revision 1 from a 48-bit authority and sub-authorities (truncated to 15).
    pub fn new(authority: u64, subs: &[u32]) -> Sid {
        let b = authority.to_be_bytes();
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[2..8]);
        Sid {
            revision: 1,
            authority: a,
            sub_authorities: subs.iter().copied().take(SID_MAX_SUB_AUTHORITIES).collect(),
        }
    }

    /// Encoded length: 8 + 4 × sub-authority count.
    pub fn encoded_len(&self) -> usize {
        8 + 4 * self.sub_authorities.len()
    }

    /// Appends the binary form.
    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.revision)
            .u8(self.sub_authorities.len() as u8)
            .bytes(&self.authority);
        for s in &self.sub_authorities {
            w.u32(*s);
        }
    }

    /// Reads the binary form.
    pub fn decode(r: &mut Reader<'_>) -> Result<Sid, WireError> {
        let revision = r.u8()?;
        if revision != 1 {
            return Err(WireError::Invalid("SID revision"));
        }
        let n = r.u8()? as usize;
        if n > SID_MAX_SUB_AUTHORITIES {
            return Err(WireError::Invalid("SID sub-authority count"));
        }
        let authority = r.array::<6>()?;
        let mut sub_authorities = Vec::with_capacity(n);
        for _ in 0..n {
            sub_authorities.push(r.u32()?);
        }
        Ok(Sid {
            revision,
            authority,
            sub_authorities,
        })
    }

    /// The 48-bit authority value.
    pub fn authority_value(&self) -> u64 {
        self.authority
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    }
}

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.authority_value();
        if a >> 32 != 0 {
            write!(f, "S-{}-0x{:012X}", self.revision, a)?;
        } else {
            write!(f, "S-{}-{}", self.revision, a)?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

impl FromStr for Sid {
    type Err = WireError;

    /// Parses "S-1-5-21-…" (decimal authority or 0x-prefixed hex).
    fn from_str(s: &str) -> Result<Sid, WireError> {
        let bad = WireError::Invalid("SID string");
        let mut it = s.split('-');
        if !it.next().is_some_and(|p| p.eq_ignore_ascii_case("S")) {
            return Err(bad);
        }
        let revision: u8 = it.next().and_then(|v| v.parse().ok()).ok_or(bad.clone())?;
        let auth_s = it.next().ok_or(bad.clone())?;
        let authority = match auth_s.strip_prefix("0x").or(auth_s.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).map_err(|_| bad.clone())?,
            None => auth_s.parse::<u64>().map_err(|_| bad.clone())?,
        };
        if authority >> 48 != 0 || revision != 1 {
            return Err(bad);
        }
        let subs = it
            .map(|p| p.parse::<u32>().map_err(|_| bad.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        if subs.len() > SID_MAX_SUB_AUTHORITIES {
            return Err(bad);
        }
        Ok(Sid::new(authority, &subs))
    }
}

/// Well-known SIDs.
pub mod well_known {
    use super::Sid;

    /// Everyone, S-1-1-0.
    pub fn everyone() -> Sid {
        Sid::new(1, &[0])
    }
    /// CREATOR OWNER, S-1-3-0.
    pub fn creator_owner() -> Sid {
        Sid::new(3, &[0])
    }
    /// CREATOR GROUP, S-1-3-1.
    pub fn creator_group() -> Sid {
        Sid::new(3, &[1])
    }
    /// NT AUTHORITY\SYSTEM, S-1-5-18.
    pub fn local_system() -> Sid {
        Sid::new(5, &[18])
    }
    /// BUILTIN\Administrators, S-1-5-32-544.
    pub fn builtin_administrators() -> Sid {
        Sid::new(5, &[32, 544])
    }
    /// Samba's Unix user SID, S-1-22-1-`uid`.
    pub fn unix_user(uid: u32) -> Sid {
        Sid::new(22, &[1, uid])
    }
    /// Samba's Unix group SID, S-1-22-2-`gid`.
    pub fn unix_group(gid: u32) -> Sid {
        Sid::new(22, &[2, gid])
    }
}

/// An access control entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ace {
    /// An ACE of the simple {mask, SID} shape: ACCESS_ALLOWED, ACCESS_DENIED,
    /// SYSTEM_AUDIT, SYSTEM_ALARM, SYSTEM_MANDATORY_LABEL and the like.
    Simple {
        /// AceType.
        ace_type: u8,
        /// AceFlags.
        flags: u8,
        /// Access mask.
        mask: AccessMask,
        /// Trustee.
        sid: Sid,
    },
    /// Any other ACE (object and callback ACEs), kept as its bytes after the header.
    Other {
        /// AceType.
        ace_type: u8,
        /// AceFlags.
        flags: u8,
        /// The ACE body after the 4-byte header (a multiple of 4 bytes).
        body: Vec<u8>,
    },
}

/// ACE types with the simple {mask, SID} body.
fn is_simple_type(t: u8) -> bool {
    matches!(t, 0x00..=0x03 | 0x11 | 0x12 | 0x13)
}

impl Ace {
    /// An ACCESS_ALLOWED ACE.
    pub fn allow(sid: Sid, mask: AccessMask, flags: u8) -> Ace {
        Ace::Simple {
            ace_type: ACCESS_ALLOWED_ACE_TYPE,
            flags,
            mask,
            sid,
        }
    }

    /// An ACCESS_DENIED ACE.
    pub fn deny(sid: Sid, mask: AccessMask, flags: u8) -> Ace {
        Ace::Simple {
            ace_type: ACCESS_DENIED_ACE_TYPE,
            flags,
            mask,
            sid,
        }
    }

    /// Encoded size.
    pub fn encoded_len(&self) -> usize {
        match self {
            Ace::Simple { sid, .. } => 8 + sid.encoded_len(),
            Ace::Other { body, .. } => 4 + body.len(),
        }
    }

    /// Appends the binary form.
    pub fn encode(&self, w: &mut Writer) {
        let size = self.encoded_len() as u16;
        match self {
            Ace::Simple {
                ace_type,
                flags,
                mask,
                sid,
            } => {
                w.u8(*ace_type).u8(*flags).u16(size).u32(mask.bits());
                sid.encode(w);
            }
            Ace::Other {
                ace_type,
                flags,
                body,
            } => {
                w.u8(*ace_type).u8(*flags).u16(size).bytes(body);
            }
        }
    }

    /// Reads one ACE; `r` must be positioned at its start. The reader ends after
    /// AceSize bytes.
    pub fn decode(r: &mut Reader<'_>) -> Result<Ace, WireError> {
        let ace_type = r.u8()?;
        let flags = r.u8()?;
        let size = r.u16()? as usize;
        if size < 4 {
            return Err(WireError::Invalid("AceSize"));
        }
        let body = r.bytes(size - 4)?;
        if is_simple_type(ace_type) {
            let mut br = Reader::new(body);
            let mask = AccessMask(br.u32()?);
            let sid = Sid::decode(&mut br)?;
            Ok(Ace::Simple {
                ace_type,
                flags,
                mask,
                sid,
            })
        } else {
            Ok(Ace::Other {
                ace_type,
                flags,
                body: body.to_vec(),
            })
        }
    }
}

/// An access control list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// AclRevision (2, or 4 with object ACEs).
    pub revision: u8,
    /// The ACEs in order.
    pub aces: Vec<Ace>,
}

impl Acl {
    /// An ACL_REVISION list of `aces`.
    pub fn new(aces: Vec<Ace>) -> Acl {
        Acl {
            revision: ACL_REVISION,
            aces,
        }
    }

    /// Encoded size (8-byte header + ACEs).
    pub fn encoded_len(&self) -> usize {
        8 + self.aces.iter().map(Ace::encoded_len).sum::<usize>()
    }

    /// Appends the binary form.
    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.revision)
            .u8(0)
            .u16(self.encoded_len() as u16)
            .u16(self.aces.len() as u16)
            .u16(0);
        for a in &self.aces {
            a.encode(w);
        }
    }

    /// Reads an ACL from the start of `buf` (AclSize must fit in `buf`).
    pub fn decode(buf: &[u8]) -> Result<Acl, WireError> {
        let mut r = Reader::new(buf);
        let revision = r.u8()?;
        if !(1..=4).contains(&revision) {
            return Err(WireError::Invalid("AclRevision"));
        }
        r.u8()?;
        let size = r.u16()? as usize;
        let count = r.u16()? as usize;
        r.u16()?;
        if size < 8 {
            return Err(WireError::Invalid("AclSize"));
        }
        let body = buf
            .get(8..size)
            .ok_or(WireError::Invalid("AclSize past the end"))?;
        // Every ACE is at least 4 bytes.
        if count > body.len() / 4 {
            return Err(WireError::Invalid("AceCount"));
        }
        let mut br = Reader::new(body);
        let mut aces = Vec::with_capacity(count);
        for _ in 0..count {
            aces.push(Ace::decode(&mut br)?);
        }
        Ok(Acl { revision, aces })
    }
}

/// A security descriptor (encoded self-relative).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityDescriptor {
    /// Control flags; SE_SELF_RELATIVE is always set when encoding, and
    /// SE_DACL_PRESENT / SE_SACL_PRESENT whenever the ACL is there (kept without it:
    /// a NULL DACL / SACL).
    pub control: u16,
    /// Owner SID.
    pub owner: Option<Sid>,
    /// Group SID.
    pub group: Option<Sid>,
    /// System ACL.
    pub sacl: Option<Acl>,
    /// Discretionary ACL (`None`: no DACL, or with SE_DACL_PRESENT a NULL DACL;
    /// either way everyone has full access).
    pub dacl: Option<Acl>,
}

impl SecurityDescriptor {
    /// Encoded size.
    pub fn encoded_len(&self) -> usize {
        20 + self.owner.as_ref().map_or(0, Sid::encoded_len)
            + self.group.as_ref().map_or(0, Sid::encoded_len)
            + self.sacl.as_ref().map_or(0, Acl::encoded_len)
            + self.dacl.as_ref().map_or(0, Acl::encoded_len)
    }

    /// The self-relative binary form: header, owner, group, SACL, DACL.
    pub fn encode(&self) -> Vec<u8> {
        // A present ACL sets its PRESENT bit; a PRESENT bit in `control` without the
        // ACL is kept: a NULL DACL (no access restriction) / NULL SACL.
        let mut control = self.control | SE_SELF_RELATIVE;
        if self.dacl.is_some() {
            control |= SE_DACL_PRESENT;
        }
        if self.sacl.is_some() {
            control |= SE_SACL_PRESENT;
        }
        let mut off = 20u32;
        let mut next = |len: Option<usize>| -> u32 {
            match len {
                Some(l) => {
                    let o = off;
                    off += l as u32;
                    o
                }
                None => 0,
            }
        };
        let o_owner = next(self.owner.as_ref().map(Sid::encoded_len));
        let o_group = next(self.group.as_ref().map(Sid::encoded_len));
        let o_sacl = next(self.sacl.as_ref().map(Acl::encoded_len));
        let o_dacl = next(self.dacl.as_ref().map(Acl::encoded_len));
        let mut w = Writer::with_capacity(self.encoded_len());
        w.u8(1)
            .u8(0)
            .u16(control)
            .u32(o_owner)
            .u32(o_group)
            .u32(o_sacl)
            .u32(o_dacl);
        if let Some(s) = &self.owner {
            s.encode(&mut w);
        }
        if let Some(s) = &self.group {
            s.encode(&mut w);
        }
        if let Some(a) = &self.sacl {
            a.encode(&mut w);
        }
        if let Some(a) = &self.dacl {
            a.encode(&mut w);
        }
        w.into_vec()
    }

    /// Decodes a self-relative descriptor. Offsets of 0 mean "absent"; non-zero
    /// offsets must lie at or after the 20-byte header and inside `buf`. A DACL or SACL
    /// is read only when its PRESENT bit is set.
    pub fn decode(buf: &[u8]) -> Result<SecurityDescriptor, WireError> {
        let mut r = Reader::new(buf);
        if r.u8()? != 1 {
            return Err(WireError::Invalid("SD revision"));
        }
        r.u8()?;
        let control = r.u16()?;
        if control & SE_SELF_RELATIVE == 0 {
            return Err(WireError::Invalid("SD not self-relative"));
        }
        let o_owner = r.u32()? as usize;
        let o_group = r.u32()? as usize;
        let o_sacl = r.u32()? as usize;
        let o_dacl = r.u32()? as usize;
        let at = |o: usize| -> Result<&[u8], WireError> {
            if o < 20 {
                return Err(WireError::Invalid("SD offset inside the header"));
            }
            buf.get(o..)
                .ok_or(WireError::Invalid("SD offset past the end"))
        };
        let sid_at = |o: usize| -> Result<Option<Sid>, WireError> {
            if o == 0 {
                return Ok(None);
            }
            Sid::decode(&mut Reader::new(at(o)?)).map(Some)
        };
        let acl_at = |o: usize, present: bool| -> Result<Option<Acl>, WireError> {
            if !present || o == 0 {
                return Ok(None);
            }
            Acl::decode(at(o)?).map(Some)
        };
        Ok(SecurityDescriptor {
            control,
            owner: sid_at(o_owner)?,
            group: sid_at(o_group)?,
            sacl: acl_at(o_sacl, control & SE_SACL_PRESENT != 0)?,
            dacl: acl_at(o_dacl, control & SE_DACL_PRESENT != 0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::well_known::*;
    use super::*;

    #[test]
    fn sid_strings() {
        let s: Sid = "S-1-5-21-1-2-3-500".parse().unwrap();
        assert_eq!(s.to_string(), "S-1-5-21-1-2-3-500");
        assert_eq!(s.encoded_len(), 8 + 5 * 4);
        assert_eq!(everyone().to_string(), "S-1-1-0");
        assert_eq!(unix_user(1000).to_string(), "S-1-22-1-1000");
        assert!("S-1".parse::<Sid>().is_err());
        assert!("X-1-5".parse::<Sid>().is_err());
        assert!("S-1-5-x".parse::<Sid>().is_err());
        assert!("S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15-16"
            .parse::<Sid>()
            .is_err());
        // [MS-DTYP] 2.4.2.2 example: S-1-5-32-544 binary form.
        let mut w = Writer::new();
        builtin_administrators().encode(&mut w);
        assert_eq!(
            w.into_vec(),
            vec![1, 2, 0, 0, 0, 0, 0, 5, 0x20, 0, 0, 0, 0x20, 2, 0, 0]
        );
    }

    fn sample() -> SecurityDescriptor {
        SecurityDescriptor {
            control: SE_DACL_PROTECTED,
            owner: Some(unix_user(1000)),
            group: Some(unix_group(100)),
            sacl: None,
            dacl: Some(Acl::new(vec![
                Ace::allow(unix_user(1000), AccessMask::FILE_ALL_ACCESS, 0),
                Ace::deny(everyone(), AccessMask::FILE_WRITE_DATA, OBJECT_INHERIT_ACE),
                Ace::Other {
                    ace_type: 0x05,
                    flags: 0,
                    body: vec![0; 8],
                },
            ])),
        }
    }

    #[test]
    fn sd_round_trip() {
        let sd = sample();
        let b = sd.encode();
        assert_eq!(b.len(), sd.encoded_len());
        let d = SecurityDescriptor::decode(&b).unwrap();
        assert_eq!(
            d.control,
            SE_DACL_PROTECTED | SE_SELF_RELATIVE | SE_DACL_PRESENT
        );
        assert_eq!(d.owner, sd.owner);
        assert_eq!(d.group, sd.group);
        assert_eq!(d.dacl, sd.dacl);
        assert_eq!(d.sacl, None);
        // A NULL DACL: DACL_PRESENT without a DACL survives a round trip.
        let null = SecurityDescriptor {
            control: SE_DACL_PRESENT,
            ..Default::default()
        };
        let b = null.encode();
        assert_eq!(b.len(), 20);
        assert_eq!(&b[16..20], &[0; 4]);
        let d = SecurityDescriptor::decode(&b).unwrap();
        assert_eq!(d.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
        assert_eq!(d.dacl, None);
        // Empty descriptor: 20 bytes.
        let e = SecurityDescriptor::default().encode();
        assert_eq!(e.len(), 20);
        assert_eq!(SecurityDescriptor::decode(&e).unwrap().owner, None);
    }

    #[test]
    fn sd_hostile() {
        let b = sample().encode();
        for n in 0..b.len() {
            let _ = SecurityDescriptor::decode(&b[..n]);
        }
        assert!(SecurityDescriptor::decode(&b[..19]).is_err());
        // owner offset inside the header
        let mut bad = b.clone();
        bad[4] = 4;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // dacl offset past the end
        let mut bad = b.clone();
        bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // AceCount huge
        let dacl_off = u32::from_le_bytes(b[16..20].try_into().unwrap()) as usize;
        let mut bad = b.clone();
        bad[dacl_off + 4] = 0xff;
        bad[dacl_off + 5] = 0xff;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // AclSize past the end
        let mut bad = b.clone();
        bad[dacl_off + 2] = 0xff;
        bad[dacl_off + 3] = 0xff;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // ACE size below its header
        let mut bad = b.clone();
        bad[dacl_off + 8 + 2] = 2;
        bad[dacl_off + 8 + 3] = 0;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // SID with 200 sub-authorities
        let mut bad = b.clone();
        bad[20 + 1] = 200;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // not self-relative
        let mut bad = b;
        bad[3] = 0;
        assert!(SecurityDescriptor::decode(&bad).is_err());
    }
}
