//! File attributes ([MS-FSCC] 2.6): the FileAttributes of CREATE, directory entries
//! and the basic information classes.

use crate::flags::bit_flags;

bit_flags! {
    /// FileAttributes.
    pub struct FileAttributes;
    /// FILE_ATTRIBUTE_READONLY.
    const READONLY = 0x0000_0001;
    /// FILE_ATTRIBUTE_HIDDEN.
    const HIDDEN = 0x0000_0002;
    /// FILE_ATTRIBUTE_SYSTEM.
    const SYSTEM = 0x0000_0004;
    /// FILE_ATTRIBUTE_DIRECTORY.
    const DIRECTORY = 0x0000_0010;
    /// FILE_ATTRIBUTE_ARCHIVE.
    const ARCHIVE = 0x0000_0020;
    /// FILE_ATTRIBUTE_NORMAL (only ever reported alone).
    const NORMAL = 0x0000_0080;
    /// FILE_ATTRIBUTE_TEMPORARY.
    const TEMPORARY = 0x0000_0100;
    /// FILE_ATTRIBUTE_SPARSE_FILE.
    const SPARSE_FILE = 0x0000_0200;
    /// FILE_ATTRIBUTE_REPARSE_POINT.
    const REPARSE_POINT = 0x0000_0400;
    /// FILE_ATTRIBUTE_COMPRESSED.
    const COMPRESSED = 0x0000_0800;
    /// FILE_ATTRIBUTE_OFFLINE.
    const OFFLINE = 0x0000_1000;
    /// FILE_ATTRIBUTE_NOT_CONTENT_INDEXED.
    const NOT_CONTENT_INDEXED = 0x0000_2000;
    /// FILE_ATTRIBUTE_ENCRYPTED.
    const ENCRYPTED = 0x0000_4000;
    /// FILE_ATTRIBUTE_INTEGRITY_STREAM.
    const INTEGRITY_STREAM = 0x0000_8000;
    /// FILE_ATTRIBUTE_NO_SCRUB_DATA.
    const NO_SCRUB_DATA = 0x0002_0000;
    /// Bits a CREATE must not set (refused with INVALID_PARAMETER as Windows does):
    /// the volume-label and device bits, INTEGRITY_STREAM and everything from 0x10000 up.
    const CREATE_INVALID = 0xFFFF_8048;
}
