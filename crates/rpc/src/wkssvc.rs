//! [MS-WKST] workstation service: NetrWkstaGetInfo (0) level 100.

use crate::ndr::{Field, NdrError, NdrReader, NdrWriter};
use crate::pdu::{NCA_OP_RNG_ERROR, NCA_S_FAULT_NDR};
use crate::srvsvc::{PLATFORM_ID_NT, WERR_INVALID_LEVEL, WERR_OK};
use crate::PipeContext;

const OP_NETR_WKSTA_GET_INFO: u16 = 0;

/// Runs wkssvc operation `opnum` on `stub`; `Err` is a fault status.
pub(crate) fn dispatch(ctx: &PipeContext, opnum: u16, stub: &[u8]) -> Result<Vec<u8>, u32> {
    match opnum {
        OP_NETR_WKSTA_GET_INFO => wksta_get_info(ctx, stub).map_err(|NdrError| NCA_S_FAULT_NDR),
        _ => Err(NCA_OP_RNG_ERROR),
    }
}

/// NetrWkstaGetInfo: `[in,string,unique] ServerName, [in] Level,
/// [out, switch_is(Level)] WKSTA_INFO*`.
fn wksta_get_info(ctx: &PipeContext, stub: &[u8]) -> Result<Vec<u8>, NdrError> {
    let mut r = NdrReader::new(stub);
    let _server = r.unique_string()?;
    let level = r.u32()?;
    let mut w = NdrWriter::new();
    w.u32(level);
    let status = if level == 100 {
        w.ptr(true);
        w.record(&[
            Field::U32(PLATFORM_ID_NT),
            Field::Str(&ctx.server_name),
            Field::Str(&ctx.domain),
            Field::U32(10),
            Field::U32(0),
        ]);
        WERR_OK
    } else {
        w.ptr(false);
        WERR_INVALID_LEVEL
    };
    w.u32(status);
    Ok(w.finish())
}
