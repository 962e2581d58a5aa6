//! smbx-security
