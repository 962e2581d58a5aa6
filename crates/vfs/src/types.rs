//! Plain data types of the VFS interface.

/// Options of one share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareOptions {
    /// Exact-case lookups only. When false (the default) each component is tried
    /// exactly first and then matched case-insensitively against the directory.
    pub case_sensitive: bool,
    /// Keep DOS attributes and creation time in an extended attribute.
    pub store_dos_attributes: bool,
    /// Refuse every modification with ACCESS_DENIED.
    pub read_only: bool,
    /// Follow symlinks whose target stays inside the share (see the crate docs).
    pub follow_symlinks_within_share: bool,
}

impl Default for ShareOptions {
    fn default() -> Self {
        ShareOptions {
            case_sensitive: false,
            store_dos_attributes: true,
            read_only: false,
            follow_symlinks_within_share: false,
        }
    }
}

/// CREATE disposition ([MS-SMB2] 2.2.13 CreateDisposition): the wire type.
pub use smbx_wire::CreateDisposition as Disposition;
use smbx_wire::{AccessMask, CreateOptions, FileAttributes};

/// What CREATE did ([MS-SMB2] 2.2.14 CreateAction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateAction {
    /// FILE_SUPERSEDED (0).
    Superseded = 0,
    /// FILE_OPENED (1).
    Opened = 1,
    /// FILE_CREATED (2).
    Created = 2,
    /// FILE_OVERWRITTEN (3).
    Overwritten = 3,
}

impl CreateAction {
    /// The wire value.
    pub fn as_u32(self) -> u32 {
        self as u32
    }
}

/// Parameters of [`crate::Share::create`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateRequest {
    /// What to do when the name exists or not.
    pub disposition: Disposition,
    /// Must be (or become) a directory (FILE_DIRECTORY_FILE).
    pub directory: bool,
    /// Must not be a directory (FILE_NON_DIRECTORY_FILE).
    pub non_directory: bool,
    /// Read access to data will be used.
    pub want_read: bool,
    /// Data write access (FILE_WRITE_DATA / FILE_APPEND_DATA / GENERIC_WRITE) was
    /// granted: the file is opened read-write. Refused with ACCESS_DENIED on a read-only
    /// share and on files with the READONLY attribute.
    pub want_write: bool,
    /// Metadata write access (FILE_WRITE_ATTRIBUTES / FILE_WRITE_EA / DELETE /
    /// WRITE_DAC / WRITE_OWNER) was granted: the handle may set times, attributes and
    /// EAs (also on READONLY files). Refused on a read-only share.
    pub want_write_attributes: bool,
    /// MAXIMUM_ALLOWED: grant whatever write access is possible instead of failing;
    /// query [`crate::Handle::is_writable`] / [`crate::Handle::can_write_attributes`].
    pub maximum_allowed: bool,
    /// FileAttributes for new (or overwritten) files.
    pub attributes: FileAttributes,
    /// AllocationSize hint for new files (0 = none).
    pub allocation_size: u64,
    /// FILE_DELETE_ON_CLOSE was requested: a new file with the READONLY attribute
    /// could never be deleted, so it is not created (CANNOT_DELETE, [MS-FSA]
    /// 2.1.5.1.1).
    pub delete_on_close: bool,
}

impl Default for CreateRequest {
    fn default() -> Self {
        CreateRequest {
            disposition: Disposition::Open,
            directory: false,
            non_directory: false,
            want_read: true,
            want_write: false,
            want_write_attributes: false,
            maximum_allowed: false,
            attributes: FileAttributes::empty(),
            allocation_size: 0,
            delete_on_close: false,
        }
    }
}

impl CreateRequest {
    /// Opens an existing name only to read its attributes and security descriptor
    /// (FILE_OPEN with FILE_READ_ATTRIBUTES).
    pub fn read_attributes() -> CreateRequest {
        CreateRequest {
            want_read: false,
            ..CreateRequest::default()
        }
    }

    /// Builds a request from the CREATE's fields: its disposition, options, the access
    /// mask to grant (generic rights may be unmapped), attributes and allocation size.
    pub fn from_wire(
        disposition: Disposition,
        options: CreateOptions,
        access: AccessMask,
        attributes: FileAttributes,
        allocation_size: u64,
    ) -> CreateRequest {
        const READ: AccessMask = AccessMask::FILE_READ_DATA
            .union(AccessMask::FILE_EXECUTE)
            .union(AccessMask::GENERIC_READ)
            .union(AccessMask::GENERIC_EXECUTE)
            .union(AccessMask::GENERIC_ALL);
        const WRITE_DATA: AccessMask = AccessMask::FILE_WRITE_DATA
            .union(AccessMask::FILE_APPEND_DATA)
            .union(AccessMask::GENERIC_WRITE)
            .union(AccessMask::GENERIC_ALL);
        const WRITE_META: AccessMask = AccessMask::FILE_WRITE_EA
            .union(AccessMask::FILE_WRITE_ATTRIBUTES)
            .union(AccessMask::DELETE)
            .union(AccessMask::WRITE_DAC)
            .union(AccessMask::WRITE_OWNER)
            .union(AccessMask::GENERIC_WRITE)
            .union(AccessMask::GENERIC_ALL);
        CreateRequest {
            disposition,
            directory: options.contains(CreateOptions::FILE_DIRECTORY_FILE),
            non_directory: options.contains(CreateOptions::FILE_NON_DIRECTORY_FILE),
            want_read: access.intersects(READ | AccessMask::MAXIMUM_ALLOWED),
            want_write: access.intersects(WRITE_DATA),
            want_write_attributes: access.intersects(WRITE_META),
            maximum_allowed: access.contains(AccessMask::MAXIMUM_ALLOWED),
            attributes,
            allocation_size,
            delete_on_close: options.contains(CreateOptions::FILE_DELETE_ON_CLOSE),
        }
    }
}

/// Metadata of a file or directory, in SMB terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileInfo {
    /// Stable file id: the inode number.
    pub file_id: u64,
    /// Volume id: the device number.
    pub volume_id: u64,
    /// End of file (stream size for stream handles; 0 for directories).
    pub size: u64,
    /// Bytes allocated (st_blocks × 512).
    pub allocation_size: u64,
    /// DOS attributes, including DIRECTORY; NORMAL when nothing else is set.
    pub attributes: FileAttributes,
    /// Creation time (FILETIME).
    pub creation_time: u64,
    /// Last access time (FILETIME).
    pub last_access_time: u64,
    /// Last write time (FILETIME).
    pub last_write_time: u64,
    /// Change time (FILETIME) = ctime.
    pub change_time: u64,
    /// Hard link count.
    pub nlink: u32,
    /// A directory.
    pub is_dir: bool,
    /// POSIX mode bits (including file type).
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Always false here; the server tracks delete-on-close.
    pub delete_pending: bool,
}

/// One directory entry for QUERY_DIRECTORY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The name as stored ("." and ".." included).
    pub name: String,
    /// Its metadata.
    pub info: FileInfo,
}

/// FileBasicInformation to apply; `None` leaves a field unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BasicInfo {
    /// New creation time.
    pub creation: Option<u64>,
    /// New last access time.
    pub last_access: Option<u64>,
    /// New last write time.
    pub last_write: Option<u64>,
    /// New change time (accepted but cannot be stored: ctime is kernel-managed).
    pub change: Option<u64>,
    /// New attributes (the caller maps the wire value 0 to `None`).
    pub attributes: Option<FileAttributes>,
}

/// One data stream of a file (FileStreamInformation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Full stream name: "::$DATA" or ":name:$DATA".
    pub name: String,
    /// Stream size.
    pub size: u64,
    /// Stream allocation size.
    pub allocation_size: u64,
}

/// One extended attribute (FILE_FULL_EA_INFORMATION entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ea {
    /// EA name (ASCII).
    pub name: String,
    /// EA value.
    pub value: Vec<u8>,
}

/// Volume information (FileFsSizeInformation, FileFsAttributeInformation, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsInfo {
    /// Total bytes.
    pub total_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Bytes available to unprivileged users.
    pub available_bytes: u64,
    /// Allocation unit (fragment size).
    pub block_size: u32,
    /// Sector size reported to clients.
    pub sector_size: u32,
    /// Longest name component.
    pub max_name_len: u32,
    /// File system name reported to clients ("NTFS" for compatibility).
    pub fs_name: String,
    /// FILE_* file system attribute flags.
    pub fs_attributes: FileSystemAttributes,
    /// Volume serial number.
    pub volume_serial: u32,
    /// Volume label (empty).
    pub volume_label: String,
    /// Volume creation time (FILETIME): the share root's change time.
    pub volume_creation_time: u64,
    /// The share is read-only.
    pub read_only: bool,
}

pub use smbx_wire::fscc::fs::FileSystemAttributes;

/// How a file will be read, from its CREATE options (FILE_SEQUENTIAL_ONLY,
/// FILE_RANDOM_ACCESS), passed on by [`crate::Handle::advise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessPattern {
    /// Front to back: read ahead more.
    Sequential,
    /// Anywhere: do not read ahead.
    Random,
}
