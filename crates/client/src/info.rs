//! What the client reports about files: metadata from stat and directory listings.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smbx_wire::time::EPOCH_DIFF_SECS;

use smbx_wire::close::CloseResponse;
use smbx_wire::create::CreateResponse;
use smbx_wire::fscc::dir::DecodedDirEntry;
use smbx_wire::fscc::file::All;

pub use smbx_wire::FileAttributes;

/// FILE_ATTRIBUTE_READONLY.
pub const ATTR_READONLY: FileAttributes = FileAttributes::READONLY;
/// FILE_ATTRIBUTE_HIDDEN.
pub const ATTR_HIDDEN: FileAttributes = FileAttributes::HIDDEN;
/// FILE_ATTRIBUTE_DIRECTORY.
pub const ATTR_DIRECTORY: FileAttributes = FileAttributes::DIRECTORY;
/// FILE_ATTRIBUTE_ARCHIVE.
pub const ATTR_ARCHIVE: FileAttributes = FileAttributes::ARCHIVE;
/// FILE_ATTRIBUTE_NORMAL.
pub const ATTR_NORMAL: FileAttributes = FileAttributes::NORMAL;

/// Converts a FILETIME to a `SystemTime` (`None` for 0, "not set").
pub fn filetime_to_system(ft: u64) -> Option<SystemTime> {
    if ft == 0 {
        return None;
    }
    let since_1601 = Duration::new(ft / 10_000_000, ((ft % 10_000_000) * 100) as u32);
    let epoch_diff = Duration::from_secs(EPOCH_DIFF_SECS);
    Some(match since_1601.checked_sub(epoch_diff) {
        Some(d) => UNIX_EPOCH + d,
        None => UNIX_EPOCH - (epoch_diff - since_1601),
    })
}

/// Metadata of a file or directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileInfo {
    /// EndOfFile: the size in bytes.
    pub size: u64,
    /// AllocationSize.
    pub allocation_size: u64,
    /// FileAttributes.
    pub attributes: FileAttributes,
    /// CreationTime (FILETIME).
    pub creation_time: u64,
    /// LastAccessTime (FILETIME).
    pub last_access_time: u64,
    /// LastWriteTime (FILETIME).
    pub last_write_time: u64,
    /// ChangeTime (FILETIME).
    pub change_time: u64,
    /// NumberOfLinks (0 when not known).
    pub number_of_links: u32,
    /// The server's file index number (0 when not known).
    pub index_number: u64,
    /// True if delete is pending.
    pub delete_pending: bool,
}

impl FileInfo {
    /// True for directories.
    pub fn is_dir(&self) -> bool {
        self.attributes.contains(FileAttributes::DIRECTORY)
    }
    /// LastWriteTime as a `SystemTime`.
    pub fn modified(&self) -> Option<SystemTime> {
        filetime_to_system(self.last_write_time)
    }
    /// CreationTime as a `SystemTime`.
    pub fn created(&self) -> Option<SystemTime> {
        filetime_to_system(self.creation_time)
    }
    /// LastAccessTime as a `SystemTime`.
    pub fn accessed(&self) -> Option<SystemTime> {
        filetime_to_system(self.last_access_time)
    }

    pub(crate) fn from_create(c: &CreateResponse) -> FileInfo {
        FileInfo {
            size: c.end_of_file,
            allocation_size: c.allocation_size,
            attributes: c.file_attributes,
            creation_time: c.creation_time,
            last_access_time: c.last_access_time,
            last_write_time: c.last_write_time,
            change_time: c.change_time,
            ..Default::default()
        }
    }

    pub(crate) fn from_close(c: &CloseResponse) -> FileInfo {
        FileInfo {
            size: c.end_of_file,
            allocation_size: c.allocation_size,
            attributes: c.file_attributes,
            creation_time: c.creation_time,
            last_access_time: c.last_access_time,
            last_write_time: c.last_write_time,
            change_time: c.change_time,
            ..Default::default()
        }
    }

    pub(crate) fn from_all(a: &All) -> FileInfo {
        FileInfo {
            size: a.standard.end_of_file,
            allocation_size: a.standard.allocation_size,
            attributes: a.attributes,
            creation_time: a.times.creation,
            last_access_time: a.times.last_access,
            last_write_time: a.times.last_write,
            change_time: a.times.change,
            number_of_links: a.standard.number_of_links,
            index_number: a.index_number,
            delete_pending: a.standard.delete_pending,
        }
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirEntry {
    /// The entry's name (no path).
    pub name: String,
    /// The 8.3 short name, if the server has one.
    pub short_name: String,
    /// Its metadata (links and delete-pending are not reported by listings).
    pub info: FileInfo,
}

impl DirEntry {
    /// True for directories.
    pub fn is_dir(&self) -> bool {
        self.info.is_dir()
    }

    pub(crate) fn from_wire(e: DecodedDirEntry) -> DirEntry {
        DirEntry {
            info: FileInfo {
                size: e.end_of_file,
                allocation_size: e.allocation_size,
                attributes: e.attributes,
                creation_time: e.times.creation,
                last_access_time: e.times.last_access,
                last_write_time: e.times.last_write,
                change_time: e.times.change,
                index_number: e.file_id,
                ..Default::default()
            },
            name: e.name,
            short_name: e.short_name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filetimes() {
        assert_eq!(filetime_to_system(0), None);
        let ft = smbx_wire::time::filetime_from_unix(1_700_000_000, 500);
        let t = filetime_to_system(ft).unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_700_000_000, 500)
        );
        assert!(filetime_to_system(1).unwrap() < UNIX_EPOCH);
    }
}
