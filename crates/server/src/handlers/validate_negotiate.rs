//! FSCTL_VALIDATE_NEGOTIATE_INFO ([MS-SMB2] 3.3.5.15.12), for the IOCTL handler.

use smbx_wire::codec::{Reader, Writer};
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use crate::conn::Connection;

/// Checks a VALIDATE_NEGOTIATE_INFO request against what NEGOTIATE recorded and
/// returns the VALIDATE_NEGOTIATE_INFO response bytes. On a mismatch the connection
/// is closed (as the protocol requires) and ACCESS_DENIED returned.
pub fn validate_negotiate_info(conn: &Connection, input: &[u8]) -> Result<Vec<u8>, NtStatus> {
    let n = conn.negotiate.lock().clone();
    // 3.1.1 protects its negotiate with the preauthentication hash instead.
    if !n.dialect.is_known() || n.dialect.is_311() {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let mut r = Reader::new(input);
    let parsed = (|| {
        let caps = r.u32()?;
        let guid = r.guid()?;
        let mode = r.u16()?;
        let count = r.u16()? as usize;
        let dialects: Vec<Dialect> = (0..count.min(64))
            .map(|_| r.u16().map(Dialect::from_u16))
            .collect::<Result<_, _>>()?;
        Ok::<_, smbx_wire::WireError>((caps, guid, mode, count, dialects))
    })();
    let Ok((caps, guid, mode, count, dialects)) = parsed else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    if caps != n.client_capabilities
        || guid != n.client_guid
        || mode != n.client_security_mode
        || count != n.client_dialects.len()
        || dialects != n.client_dialects
    {
        conn.close();
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut w = Writer::with_capacity(24);
    w.u32(n.server_capabilities)
        .bytes(&conn.server.guid)
        .u16(n.server_security_mode)
        .u16(n.dialect.as_u16());
    Ok(w.into_vec())
}
