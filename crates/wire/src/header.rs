//! The 64-byte SMB2 packet header (sync and async forms), commands and flags.

use crate::codec::{Reader, WireError, Writer};
use crate::status::NtStatus;

/// Size of the SMB2 header.
pub const HEADER_SIZE: usize = 64;
/// The protocol id of an SMB2 header: `\xFESMB`.
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];
/// The protocol id of an SMB2 TRANSFORM_HEADER (encrypted message): `\xFDSMB`.
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];
/// The protocol id of an SMB2 COMPRESSION_TRANSFORM_HEADER: `\xFCSMB`.
pub const COMPRESSION_PROTOCOL_ID: [u8; 4] = [0xFC, b'S', b'M', b'B'];
/// The protocol id of an SMB1 header: `\xFFSMB`.
pub const SMB1_PROTOCOL_ID: [u8; 4] = [0xFF, b'S', b'M', b'B'];

/// Header flag: response.
pub const FLAGS_SERVER_TO_REDIR: u32 = 0x0000_0001;
/// Header flag: async header form.
pub const FLAGS_ASYNC_COMMAND: u32 = 0x0000_0002;
/// Header flag: related compound operation.
pub const FLAGS_RELATED_OPERATIONS: u32 = 0x0000_0004;
/// Header flag: message is signed.
pub const FLAGS_SIGNED: u32 = 0x0000_0008;
/// Header flag mask: request priority.
pub const FLAGS_PRIORITY_MASK: u32 = 0x0000_0070;
/// Header flag: DFS operation.
pub const FLAGS_DFS_OPERATIONS: u32 = 0x1000_0000;
/// Header flag: replay operation.
pub const FLAGS_REPLAY_OPERATION: u32 = 0x2000_0000;

/// SMB2 command codes ([MS-SMB2] 2.2.1.2; section numbers below are [MS-SMB2]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Command {
    /// NEGOTIATE (2.2.3).
    Negotiate = 0x00,
    /// SESSION_SETUP (2.2.5).
    SessionSetup = 0x01,
    /// LOGOFF (2.2.7).
    Logoff = 0x02,
    /// TREE_CONNECT (2.2.9).
    TreeConnect = 0x03,
    /// TREE_DISCONNECT (2.2.11).
    TreeDisconnect = 0x04,
    /// CREATE (2.2.13).
    Create = 0x05,
    /// CLOSE (2.2.15).
    Close = 0x06,
    /// FLUSH (2.2.17).
    Flush = 0x07,
    /// READ (2.2.19).
    Read = 0x08,
    /// WRITE (2.2.21).
    Write = 0x09,
    /// LOCK (2.2.26).
    Lock = 0x0A,
    /// IOCTL (2.2.31).
    Ioctl = 0x0B,
    /// CANCEL (2.2.30).
    Cancel = 0x0C,
    /// ECHO (2.2.28).
    Echo = 0x0D,
    /// QUERY_DIRECTORY (2.2.33).
    QueryDirectory = 0x0E,
    /// CHANGE_NOTIFY (2.2.35).
    ChangeNotify = 0x0F,
    /// QUERY_INFO (2.2.37).
    QueryInfo = 0x10,
    /// SET_INFO (2.2.39).
    SetInfo = 0x11,
    /// OPLOCK_BREAK: notification, acknowledgment and response (2.2.23-2.2.25).
    OplockBreak = 0x12,
}

impl Command {
    /// Maps a wire value to a command.
    pub fn from_u16(v: u16) -> Option<Command> {
        use Command::*;
        Some(match v {
            0x00 => Negotiate,
            0x01 => SessionSetup,
            0x02 => Logoff,
            0x03 => TreeConnect,
            0x04 => TreeDisconnect,
            0x05 => Create,
            0x06 => Close,
            0x07 => Flush,
            0x08 => Read,
            0x09 => Write,
            0x0A => Lock,
            0x0B => Ioctl,
            0x0C => Cancel,
            0x0D => Echo,
            0x0E => QueryDirectory,
            0x0F => ChangeNotify,
            0x10 => QueryInfo,
            0x11 => SetInfo,
            0x12 => OplockBreak,
            _ => return None,
        })
    }
}

/// A decoded SMB2 header. `async_id` is set for the async form, `tree_id` for the sync form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// CreditCharge (0 for SMB 2.0.2 clients).
    pub credit_charge: u16,
    /// Status in responses; ChannelSequence (low 16 bits) in 3.x requests.
    pub status: NtStatus,
    /// Raw command code (may be unknown; see [`Command::from_u16`]).
    pub command: u16,
    /// CreditRequest in requests, CreditResponse in responses.
    pub credits: u16,
    /// Header flags.
    pub flags: u32,
    /// Offset of the next compound member from this header, 0 if last.
    pub next_command: u32,
    /// MessageId.
    pub message_id: u64,
    /// AsyncId when `FLAGS_ASYNC_COMMAND` is set.
    pub async_id: u64,
    /// TreeId when the header is in sync form.
    pub tree_id: u32,
    /// SessionId.
    pub session_id: u64,
    /// Signature (zero if unsigned).
    pub signature: [u8; 16],
}

impl Header {
    /// Decodes a header from the first 64 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Header, WireError> {
        let mut r = Reader::new(buf);
        if r.array::<4>()? != PROTOCOL_ID {
            return Err(WireError::Invalid("not an SMB2 header"));
        }
        if r.u16()? != 64 {
            return Err(WireError::Invalid("header StructureSize"));
        }
        let credit_charge = r.u16()?;
        let status = NtStatus(r.u32()?);
        let command = r.u16()?;
        let credits = r.u16()?;
        let flags = r.u32()?;
        let next_command = r.u32()?;
        let message_id = r.u64()?;
        let (async_id, tree_id) = if flags & FLAGS_ASYNC_COMMAND != 0 {
            (r.u64()?, 0)
        } else {
            r.u32()?; // reserved (process id)
            (0, r.u32()?)
        };
        let session_id = r.u64()?;
        let signature = r.array()?;
        Ok(Header {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            async_id,
            tree_id,
            session_id,
            signature,
        })
    }

    /// Appends the 64-byte encoding of this header.
    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.to_bytes());
    }

    /// The 64-byte encoding of this header, built in place (no allocation): what a
    /// sender writes into the room it left in front of a body.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(0, &PROTOCOL_ID);
        put(4, &64u16.to_le_bytes());
        put(6, &self.credit_charge.to_le_bytes());
        put(8, &self.status.0.to_le_bytes());
        put(12, &self.command.to_le_bytes());
        put(14, &self.credits.to_le_bytes());
        put(16, &self.flags.to_le_bytes());
        put(20, &self.next_command.to_le_bytes());
        put(24, &self.message_id.to_le_bytes());
        if self.flags & FLAGS_ASYNC_COMMAND != 0 {
            put(32, &self.async_id.to_le_bytes());
        } else {
            put(32, &0xFEFFu32.to_le_bytes());
            put(36, &self.tree_id.to_le_bytes());
        }
        put(40, &self.session_id.to_le_bytes());
        put(48, &self.signature);
        b
    }

    /// The command, if the code is known.
    pub fn cmd(&self) -> Option<Command> {
        Command::from_u16(self.command)
    }
    /// True if this is a response.
    pub fn is_response(&self) -> bool {
        self.flags & FLAGS_SERVER_TO_REDIR != 0
    }
    /// True if the async form is used.
    pub fn is_async(&self) -> bool {
        self.flags & FLAGS_ASYNC_COMMAND != 0
    }
    /// True if this is a related compound member.
    pub fn is_related(&self) -> bool {
        self.flags & FLAGS_RELATED_OPERATIONS != 0
    }
    /// True if the message claims to be signed.
    pub fn is_signed(&self) -> bool {
        self.flags & FLAGS_SIGNED != 0
    }
    /// ChannelSequence, carried in the low 16 bits of the status field of 3.x requests.
    pub fn channel_sequence(&self) -> u16 {
        self.status.0 as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_and_async_round_trip() {
        for flags in [FLAGS_SIGNED, FLAGS_ASYNC_COMMAND | FLAGS_SERVER_TO_REDIR] {
            let h = Header {
                credit_charge: 1,
                status: NtStatus::PENDING,
                command: Command::Read as u16,
                credits: 10,
                flags,
                next_command: 0,
                message_id: 7,
                async_id: if flags & FLAGS_ASYNC_COMMAND != 0 {
                    99
                } else {
                    0
                },
                tree_id: if flags & FLAGS_ASYNC_COMMAND != 0 {
                    0
                } else {
                    5
                },
                session_id: 0x1234,
                signature: [9; 16],
            };
            let mut w = Writer::new();
            h.encode(&mut w);
            assert_eq!(w.len(), HEADER_SIZE);
            assert_eq!(Header::decode(w.as_slice()).unwrap(), h);
        }
    }

    /// The fields sit where [MS-SMB2] 2.2.1.2 (sync) and 2.2.1.1 (async) put them.
    #[test]
    fn to_bytes_lays_out_the_fields() {
        let mut h = Header {
            credit_charge: 0x0102,
            status: NtStatus(0x0304_0506),
            command: Command::Write as u16,
            credits: 0x0708,
            flags: 0x0000_0008,
            next_command: 0x90,
            message_id: 0x1112_1314_1516_1718,
            async_id: 0x2122_2324_2526_2728,
            tree_id: 0x3132_3334,
            session_id: 0x4142_4344_4546_4748,
            signature: [0x55; 16],
        };
        let b = h.to_bytes();
        assert_eq!(&b[..8], &[0xFE, b'S', b'M', b'B', 64, 0, 0x02, 0x01]);
        assert_eq!(&b[8..12], &[0x06, 0x05, 0x04, 0x03]);
        assert_eq!(&b[12..16], &[9, 0, 0x08, 0x07]);
        assert_eq!(&b[16..24], &[8, 0, 0, 0, 0x90, 0, 0, 0]);
        assert_eq!(&b[24..32], &0x1112_1314_1516_1718u64.to_le_bytes());
        assert_eq!(&b[32..40], &[0xFF, 0xFE, 0, 0, 0x34, 0x33, 0x32, 0x31]);
        assert_eq!(&b[40..48], &0x4142_4344_4546_4748u64.to_le_bytes());
        assert_eq!(&b[48..], &[0x55; 16]);
        h.flags |= FLAGS_ASYNC_COMMAND;
        assert_eq!(
            &h.to_bytes()[32..40],
            &0x2122_2324_2526_2728u64.to_le_bytes()
        );
        let mut w = Writer::new();
        h.encode(&mut w);
        assert_eq!(w.as_slice(), &h.to_bytes());
    }

    #[test]
    fn rejects_short_and_foreign() {
        assert!(Header::decode(&[0xFE, b'S', b'M', b'B', 64, 0]).is_err());
        let mut b = [0u8; 64];
        b[..4].copy_from_slice(&SMB1_PROTOCOL_ID);
        assert!(Header::decode(&b).is_err());
    }
}
