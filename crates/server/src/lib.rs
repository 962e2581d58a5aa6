//! smbx-server
