//! smbx-rpc
