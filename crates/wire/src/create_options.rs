//! The CREATE request's CreateOptions bits and CreateDisposition values ([MS-SMB2]
//! 2.2.13).

use crate::flags::bit_flags;

bit_flags! {
    /// CreateOptions of a CREATE request.
    pub struct CreateOptions;
    /// FILE_DIRECTORY_FILE: the open must be a directory.
    const FILE_DIRECTORY_FILE = 0x0000_0001;
    /// FILE_WRITE_THROUGH.
    const FILE_WRITE_THROUGH = 0x0000_0002;
    /// FILE_SEQUENTIAL_ONLY.
    const FILE_SEQUENTIAL_ONLY = 0x0000_0004;
    /// FILE_NO_INTERMEDIATE_BUFFERING.
    const FILE_NO_INTERMEDIATE_BUFFERING = 0x0000_0008;
    /// FILE_SYNCHRONOUS_IO_ALERT.
    const FILE_SYNCHRONOUS_IO_ALERT = 0x0000_0010;
    /// FILE_SYNCHRONOUS_IO_NONALERT.
    const FILE_SYNCHRONOUS_IO_NONALERT = 0x0000_0020;
    /// FILE_NON_DIRECTORY_FILE: the open must not be a directory.
    const FILE_NON_DIRECTORY_FILE = 0x0000_0040;
    /// FILE_CREATE_TREE_CONNECTION.
    const FILE_CREATE_TREE_CONNECTION = 0x0000_0080;
    /// FILE_COMPLETE_IF_OPLOCKED.
    const FILE_COMPLETE_IF_OPLOCKED = 0x0000_0100;
    /// FILE_NO_EA_KNOWLEDGE.
    const FILE_NO_EA_KNOWLEDGE = 0x0000_0200;
    /// FILE_OPEN_REMOTE_INSTANCE.
    const FILE_OPEN_REMOTE_INSTANCE = 0x0000_0400;
    /// FILE_RANDOM_ACCESS.
    const FILE_RANDOM_ACCESS = 0x0000_0800;
    /// FILE_DELETE_ON_CLOSE.
    const FILE_DELETE_ON_CLOSE = 0x0000_1000;
    /// FILE_OPEN_BY_FILE_ID.
    const FILE_OPEN_BY_FILE_ID = 0x0000_2000;
    /// FILE_OPEN_FOR_BACKUP_INTENT.
    const FILE_OPEN_FOR_BACKUP_INTENT = 0x0000_4000;
    /// FILE_NO_COMPRESSION.
    const FILE_NO_COMPRESSION = 0x0000_8000;
    /// FILE_OPEN_REQUIRING_OPLOCK.
    const FILE_OPEN_REQUIRING_OPLOCK = 0x0001_0000;
    /// FILE_DISALLOW_EXCLUSIVE.
    const FILE_DISALLOW_EXCLUSIVE = 0x0002_0000;
    /// FILE_RESERVE_OPFILTER.
    const FILE_RESERVE_OPFILTER = 0x0010_0000;
    /// FILE_OPEN_REPARSE_POINT.
    const FILE_OPEN_REPARSE_POINT = 0x0020_0000;
    /// FILE_OPEN_NO_RECALL.
    const FILE_OPEN_NO_RECALL = 0x0040_0000;
    /// FILE_OPEN_FOR_FREE_SPACE_QUERY.
    const FILE_OPEN_FOR_FREE_SPACE_QUERY = 0x0080_0000;
    /// The bits a request must not set (the top byte).
    const INVALID = 0xFF00_0000;
}

/// CreateDisposition of a CREATE request: what to do when the name exists or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CreateDisposition {
    /// FILE_SUPERSEDE (0): replace if it exists, else create.
    Supersede = 0,
    /// FILE_OPEN (1): open only; fail if missing.
    Open = 1,
    /// FILE_CREATE (2): create only; fail if it exists.
    Create = 2,
    /// FILE_OPEN_IF (3): open, or create if missing.
    OpenIf = 3,
    /// FILE_OVERWRITE (4): open and truncate; fail if missing.
    Overwrite = 4,
    /// FILE_OVERWRITE_IF (5): open and truncate, or create.
    OverwriteIf = 5,
}

impl CreateDisposition {
    /// Decodes the wire value; `None` for values above 5.
    pub const fn from_u32(v: u32) -> Option<CreateDisposition> {
        Some(match v {
            0 => CreateDisposition::Supersede,
            1 => CreateDisposition::Open,
            2 => CreateDisposition::Create,
            3 => CreateDisposition::OpenIf,
            4 => CreateDisposition::Overwrite,
            5 => CreateDisposition::OverwriteIf,
            _ => return None,
        })
    }

    /// The wire value.
    pub const fn as_u32(self) -> u32 {
        self as u32
    }

    /// Whether a missing file is created.
    pub const fn may_create(self) -> bool {
        !matches!(self, CreateDisposition::Open | CreateDisposition::Overwrite)
    }

    /// Whether an existing file is truncated (or replaced).
    pub const fn truncates(self) -> bool {
        matches!(
            self,
            CreateDisposition::Supersede
                | CreateDisposition::Overwrite
                | CreateDisposition::OverwriteIf
        )
    }
}

impl TryFrom<u32> for CreateDisposition {
    type Error = crate::WireError;

    fn try_from(v: u32) -> Result<Self, Self::Error> {
        CreateDisposition::from_u32(v).ok_or(crate::WireError::Invalid("CreateDisposition"))
    }
}

impl From<CreateDisposition> for u32 {
    fn from(d: CreateDisposition) -> u32 {
        d as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposition_round_trips_and_refuses_values_above_five() {
        for v in 0..=5u32 {
            assert_eq!(CreateDisposition::from_u32(v).map(u32::from), Some(v));
        }
        assert_eq!(CreateDisposition::from_u32(6), None);
        assert_eq!(CreateDisposition::from_u32(u32::MAX), None);
        assert!(CreateDisposition::try_from(6u32).is_err());
        assert_eq!(
            CreateDisposition::try_from(5u32).ok(),
            Some(CreateDisposition::OverwriteIf)
        );
    }

    #[test]
    fn what_each_disposition_does() {
        use CreateDisposition::*;
        let creates: Vec<_> = [Supersede, Open, Create, OpenIf, Overwrite, OverwriteIf]
            .into_iter()
            .filter(|d| d.may_create())
            .collect();
        assert_eq!(creates, [Supersede, Create, OpenIf, OverwriteIf]);
        let truncates: Vec<_> = [Supersede, Open, Create, OpenIf, Overwrite, OverwriteIf]
            .into_iter()
            .filter(|d| d.truncates())
            .collect();
        assert_eq!(truncates, [Supersede, Overwrite, OverwriteIf]);
    }

    #[test]
    fn options_are_the_spec_bits() {
        assert_eq!(CreateOptions::FILE_DIRECTORY_FILE.bits(), 1);
        assert_eq!(CreateOptions::FILE_DELETE_ON_CLOSE.bits(), 0x1000);
        assert!(CreateOptions(0x0100_0000).intersects(CreateOptions::INVALID));
    }
}
