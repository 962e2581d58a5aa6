//! Oplock and lease break messages ([MS-SMB2] 2.2.23, 2.2.24, 2.2.25) and the lease
//! create contexts `RqLs` ([MS-SMB2] 2.2.13.2.8, 2.2.13.2.10, 2.2.14.2.10, 2.2.14.2.11).

use crate::codec::{Reader, WireError, Writer};
use crate::flags::bit_flags;
use crate::header::HEADER_SIZE;
use crate::FileId;

/// An oplock level: RequestedOplockLevel of a CREATE, OplockLevel of its response
/// and of break notifications and acknowledgments ([MS-SMB2] 2.2.13, 2.2.14, 2.2.23.1,
/// 2.2.24.1).
///
/// A newtype rather than a Rust enum so that a request's undefined value survives
/// decoding and the server decides what it means (no oplock; an invalid
/// acknowledgment). Levels are ordered by their wire values, which is also the order
/// of caching they grant among NONE, II, EXCLUSIVE and BATCH.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct OplockLevel(pub u8);

impl OplockLevel {
    /// SMB2_OPLOCK_LEVEL_NONE: no oplock.
    pub const NONE: OplockLevel = OplockLevel(0x00);
    /// SMB2_OPLOCK_LEVEL_II: shared read caching.
    pub const II: OplockLevel = OplockLevel(0x01);
    /// SMB2_OPLOCK_LEVEL_EXCLUSIVE: read and write caching for the only open.
    pub const EXCLUSIVE: OplockLevel = OplockLevel(0x08);
    /// SMB2_OPLOCK_LEVEL_BATCH: exclusive plus handle caching.
    pub const BATCH: OplockLevel = OplockLevel(0x09);
    /// SMB2_OPLOCK_LEVEL_LEASE: the caching is described by a lease context instead.
    pub const LEASE: OplockLevel = OplockLevel(0xFF);

    /// The raw wire value.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The specification's name of a defined level.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self {
            OplockLevel::NONE => "NONE",
            OplockLevel::II => "II",
            OplockLevel::EXCLUSIVE => "EXCLUSIVE",
            OplockLevel::BATCH => "BATCH",
            OplockLevel::LEASE => "LEASE",
            _ => return None,
        })
    }

    /// EXCLUSIVE or BATCH: the levels only the single open of a file holds.
    pub const fn is_exclusive(self) -> bool {
        matches!(self, OplockLevel::EXCLUSIVE | OplockLevel::BATCH)
    }
}

impl core::fmt::Debug for OplockLevel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "OplockLevel::{n}"),
            None => write!(f, "OplockLevel({:#04x})", self.0),
        }
    }
}

impl From<u8> for OplockLevel {
    fn from(v: u8) -> OplockLevel {
        OplockLevel(v)
    }
}

impl From<OplockLevel> for u8 {
    fn from(v: OplockLevel) -> u8 {
        v.0
    }
}

bit_flags! {
    /// A lease state: the caching a lease grants ([MS-SMB2] 2.2.13.2.8 LeaseState,
    /// 2.2.23.2, 2.2.24.2). The empty set is SMB2_LEASE_NONE.
    pub struct LeaseState;
    /// SMB2_LEASE_NONE.
    const NONE = 0x00;
    /// SMB2_LEASE_READ_CACHING.
    const READ = 0x01;
    /// SMB2_LEASE_HANDLE_CACHING.
    const HANDLE = 0x02;
    /// SMB2_LEASE_WRITE_CACHING.
    const WRITE = 0x04;
}

impl LeaseState {
    /// R | H.
    pub const RH: LeaseState = LeaseState(0x03);
    /// R | W.
    pub const RW: LeaseState = LeaseState(0x05);
    /// R | W | H.
    pub const RWH: LeaseState = LeaseState(0x07);
    /// H | W: the caching whose break needs an acknowledgment.
    pub const HW: LeaseState = LeaseState(0x06);
}

bit_flags! {
    /// LeaseFlags of a lease create context ([MS-SMB2] 2.2.13.2.8, 2.2.13.2.10,
    /// 2.2.14.2.10, 2.2.14.2.11).
    pub struct LeaseFlags;
    /// SMB2_LEASE_FLAG_BREAK_IN_PROGRESS: the lease is being broken (responses).
    const BREAK_IN_PROGRESS = 0x02;
    /// SMB2_LEASE_FLAG_PARENT_LEASE_KEY_SET: ParentLeaseKey is meaningful (v2).
    const PARENT_LEASE_KEY_SET = 0x04;
}

bit_flags! {
    /// Flags of a lease break notification ([MS-SMB2] 2.2.23.2).
    pub struct LeaseBreakFlags;
    /// SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED: the client must acknowledge.
    const ACK_REQUIRED = 0x01;
}

/// The create context name of lease requests and responses.
pub const LEASE_CONTEXT_NAME: &[u8; 4] = b"RqLs";
/// Size of a version 1 lease context.
pub const LEASE_V1_SIZE: usize = 32;
/// Size of a version 2 lease context.
pub const LEASE_V2_SIZE: usize = 52;

/// An oplock break notification, acknowledgment or response: all three share the
/// 24-byte layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OplockBreak {
    /// The oplock level (of a notification: the most the holder may keep).
    pub oplock_level: OplockLevel,
    /// The raw 16-byte FileId.
    pub file_id: FileId,
}

impl OplockBreak {
    /// Body size.
    pub const SIZE: usize = 24;

    /// Encodes the 24-byte body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::SIZE);
        w.u16(24)
            .u8(self.oplock_level.bits())
            .u8(0)
            .u32(0)
            .bytes(&self.file_id.to_bytes());
        w.into_vec()
    }

    /// Decodes an acknowledgment from a message starting at its SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<OplockBreak, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 24 {
            return Err(WireError::Invalid("oplock break StructureSize is not 24"));
        }
        let oplock_level = OplockLevel(r.u8()?);
        r.u8()?;
        r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        Ok(OplockBreak {
            oplock_level,
            file_id,
        })
    }
}

/// The StructureSize of a break acknowledgment body, which tells the oplock form (24)
/// from the lease form (36).
pub fn break_ack_structure_size(msg: &[u8]) -> Result<u16, WireError> {
    let mut r = Reader::new(msg);
    r.seek(HEADER_SIZE)?;
    r.u16()
}

/// A lease break notification (server to client, 44 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreakNotification {
    /// New epoch (v2 leases), else 0.
    pub new_epoch: u16,
    /// ACK_REQUIRED or nothing.
    pub flags: LeaseBreakFlags,
    /// The lease key.
    pub lease_key: [u8; 16],
    /// Lease state before the break.
    pub current_lease_state: LeaseState,
    /// Lease state to break to.
    pub new_lease_state: LeaseState,
}

impl LeaseBreakNotification {
    /// Encodes the 44-byte body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(44);
        w.u16(44)
            .u16(self.new_epoch)
            .u32(self.flags.bits())
            .bytes(&self.lease_key)
            .u32(self.current_lease_state.bits())
            .u32(self.new_lease_state.bits())
            .u32(0)
            .u32(0)
            .u32(0);
        w.into_vec()
    }

    /// Decodes a notification body from a message starting at its header (clients, tests).
    pub fn decode(msg: &[u8]) -> Result<LeaseBreakNotification, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 44 {
            return Err(WireError::Invalid("lease break StructureSize is not 44"));
        }
        let new_epoch = r.u16()?;
        let flags = LeaseBreakFlags(r.u32()?);
        let lease_key = r.array::<16>()?;
        let current_lease_state = LeaseState(r.u32()?);
        let new_lease_state = LeaseState(r.u32()?);
        r.skip(12)?;
        Ok(LeaseBreakNotification {
            new_epoch,
            flags,
            lease_key,
            current_lease_state,
            new_lease_state,
        })
    }
}

/// A lease break acknowledgment or response (36 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreakAck {
    /// Flags (0).
    pub flags: u32,
    /// The lease key.
    pub lease_key: [u8; 16],
    /// The lease state acknowledged / granted.
    pub lease_state: LeaseState,
    /// Duration (0).
    pub lease_duration: u64,
}

impl LeaseBreakAck {
    /// Body size.
    pub const SIZE: usize = 36;

    /// Encodes the 36-byte body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::SIZE);
        w.u16(36)
            .u16(0)
            .u32(self.flags)
            .bytes(&self.lease_key)
            .u32(self.lease_state.bits())
            .u64(self.lease_duration);
        w.into_vec()
    }

    /// Decodes from a message starting at its SMB2 header.
    pub fn decode(msg: &[u8]) -> Result<LeaseBreakAck, WireError> {
        let mut r = Reader::new(msg);
        r.seek(HEADER_SIZE)?;
        if r.u16()? != 36 {
            return Err(WireError::Invalid(
                "lease break ack StructureSize is not 36",
            ));
        }
        r.u16()?;
        let flags = r.u32()?;
        let lease_key = r.array::<16>()?;
        let lease_state = LeaseState(r.u32()?);
        let lease_duration = r.u64()?;
        Ok(LeaseBreakAck {
            flags,
            lease_key,
            lease_state,
            lease_duration,
        })
    }
}

/// A lease create context (request or response data), version 1 or 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseContext {
    /// 1 (32 bytes) or 2 (52 bytes).
    pub version: u8,
    /// The client's lease key.
    pub lease_key: [u8; 16],
    /// Requested / granted caching.
    pub lease_state: LeaseState,
    /// LeaseFlags.
    pub lease_flags: LeaseFlags,
    /// Parent directory lease key (v2, when [`LeaseFlags::PARENT_LEASE_KEY_SET`]).
    pub parent_lease_key: [u8; 16],
    /// Epoch (v2).
    pub epoch: u16,
}

/// Decodes the data of an `RqLs` create context: 32 bytes is v1, 52 or more is v2;
/// anything else is an error.
pub fn decode_lease_request(data: &[u8]) -> Result<LeaseContext, WireError> {
    let version = if data.len() >= LEASE_V2_SIZE {
        2
    } else if data.len() == LEASE_V1_SIZE {
        1
    } else {
        return Err(WireError::Invalid("lease context size"));
    };
    let mut r = Reader::new(data);
    let lease_key = r.array::<16>()?;
    let lease_state = LeaseState(r.u32()?);
    let lease_flags = LeaseFlags(r.u32()?);
    r.u64()?;
    let mut c = LeaseContext {
        version,
        lease_key,
        lease_state,
        lease_flags,
        ..Default::default()
    };
    if version == 2 {
        c.parent_lease_key = r.array::<16>()?;
        c.epoch = r.u16()?;
    }
    Ok(c)
}

/// Encodes the data of an `RqLs` response context in the request's version.
pub fn encode_lease_response(c: &LeaseContext) -> Vec<u8> {
    let mut w = Writer::with_capacity(LEASE_V2_SIZE);
    w.bytes(&c.lease_key)
        .u32(c.lease_state.bits())
        .u32(c.lease_flags.bits())
        .u64(0);
    if c.version >= 2 {
        w.bytes(&c.parent_lease_key).u16(c.epoch).u16(0);
    }
    w.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn oplock_levels_and_lease_states() {
        assert_eq!(OplockLevel::from(0x09), OplockLevel::BATCH);
        assert_eq!(u8::from(OplockLevel::LEASE), 0xFF);
        assert!(OplockLevel::NONE < OplockLevel::II && OplockLevel::II < OplockLevel::BATCH);
        assert!(OplockLevel::EXCLUSIVE.is_exclusive() && !OplockLevel::II.is_exclusive());
        assert_eq!(format!("{:?}", OplockLevel::II), "OplockLevel::II");
        assert_eq!(format!("{:?}", OplockLevel(3)), "OplockLevel(0x03)");
        assert_eq!(OplockLevel(3).name(), None);
        assert_eq!(LeaseState::READ | LeaseState::HANDLE, LeaseState::RH);
        assert_eq!(
            LeaseState::RWH.difference(LeaseState::WRITE),
            LeaseState::RH
        );
        assert_eq!(LeaseState::HW, LeaseState::HANDLE | LeaseState::WRITE);
        assert!(LeaseState::NONE.is_empty());
        assert_eq!(
            format!("{:?}", LeaseState::RW),
            "LeaseState(0x00000005: READ | WRITE)"
        );
    }

    #[test]
    fn oplock_break_round_trip() {
        let b = OplockBreak {
            oplock_level: OplockLevel::II,
            file_id: FileId::from_bytes([7; 16]),
        };
        let e = b.encode();
        assert_eq!(e.len(), 24);
        assert_eq!(OplockBreak::decode(&msg(&e)).unwrap(), b);
        assert_eq!(break_ack_structure_size(&msg(&e)).unwrap(), 24);
        assert!(OplockBreak::decode(&msg(&e[..20])).is_err());
    }

    #[test]
    fn lease_break_round_trip() {
        let n = LeaseBreakNotification {
            new_epoch: 3,
            flags: LeaseBreakFlags::ACK_REQUIRED,
            lease_key: [1; 16],
            current_lease_state: LeaseState::RW,
            new_lease_state: LeaseState::READ,
        };
        let e = n.encode();
        assert_eq!(e.len(), 44);
        assert_eq!(LeaseBreakNotification::decode(&msg(&e)).unwrap(), n);
        let a = LeaseBreakAck {
            flags: 0,
            lease_key: [2; 16],
            lease_state: LeaseState::READ,
            lease_duration: 0,
        };
        let e = a.encode();
        assert_eq!(e.len(), 36);
        assert_eq!(LeaseBreakAck::decode(&msg(&e)).unwrap(), a);
        assert!(LeaseBreakAck::decode(&msg(&e[..30])).is_err());
    }

    #[test]
    fn lease_contexts() {
        let v1 = LeaseContext {
            version: 1,
            lease_key: [5; 16],
            lease_state: LeaseState::RH,
            ..Default::default()
        };
        let e = encode_lease_response(&v1);
        assert_eq!(e.len(), 32);
        assert_eq!(decode_lease_request(&e).unwrap(), v1);
        let v2 = LeaseContext {
            version: 2,
            lease_key: [5; 16],
            lease_state: LeaseState::READ,
            lease_flags: LeaseFlags::PARENT_LEASE_KEY_SET,
            parent_lease_key: [6; 16],
            epoch: 9,
        };
        let e = encode_lease_response(&v2);
        assert_eq!(e.len(), 52);
        assert_eq!(decode_lease_request(&e).unwrap(), v2);
        assert!(decode_lease_request(&e[..40]).is_err());
        assert!(decode_lease_request(&[]).is_err());
    }
}
