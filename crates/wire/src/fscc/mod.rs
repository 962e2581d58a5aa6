//! FSCC information classes ([MS-FSCC] 2.4 file, 2.5 file system): encoders for the
//! structures QUERY_DIRECTORY and QUERY_INFO return, and the EA list formats.
//!
//! - [`attributes`]: the FileAttributes bits;
//! - [`dir`]: directory entries (FileDirectoryInformation …) with NextEntryOffset
//!   chaining, 8-byte alignment and an output-length budget;
//! - [`file`]: per-handle file information classes;
//! - [`fs`]: file system information classes;
//! - [`ea`]: FILE_FULL_EA_INFORMATION and FILE_GET_EA_INFORMATION lists.

pub mod attributes;
pub mod dir;
pub mod ea;
pub mod file;
pub mod fs;

/// Rounds `n` up to a multiple of `a` (a power of two), saturating.
pub(crate) fn align_up(n: usize, a: usize) -> usize {
    n.saturating_add(a - 1) & !(a - 1)
}

/// Times every information structure carries (FILETIME values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Times {
    /// CreationTime.
    pub creation: u64,
    /// LastAccessTime.
    pub last_access: u64,
    /// LastWriteTime.
    pub last_write: u64,
    /// ChangeTime.
    pub change: u64,
}

impl Times {
    pub(crate) fn encode(&self, w: &mut crate::codec::Writer) {
        w.u64(self.creation)
            .u64(self.last_access)
            .u64(self.last_write)
            .u64(self.change);
    }
}
