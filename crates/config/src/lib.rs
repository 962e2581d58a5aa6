//! smbx-config
