//! smbx-vfs
