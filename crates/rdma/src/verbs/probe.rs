//! What a device grants a connection, found without one: the device's limits
//! (`ibv_query_device`) and the queue pair it creates for SMB Direct's sizes
//! (an RC queue pair made and destroyed at once, as a connection's would be:
//! same clamping, same inline data request), so `smbx rdma` can show the
//! limits in use and the pools derived from them.

use std::ffi::{c_int, c_void, CStr};

use super::ffi::{IbvContext, IbvDeviceAttr, Lib};
use super::mr::DeviceLimits;
use super::qp::{create_rc, wanted_cap};
use super::{Verbs, VerbsOptions};
use crate::error::{RdmaError, Result};
use crate::types::{Granted, QpCaps};

/// A device's limits and what it granted a queue pair asked for `caps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The device's limits.
    pub limits: DeviceLimits,
    /// What its queue pair got (work requests, scatter entries, inline data,
    /// largest region).
    pub granted: Granted,
}

/// What rdma-core objects a probe made, destroyed in reverse order on drop.
struct Made {
    lib: &'static Lib,
    ctx: *mut IbvContext,
    pd: *mut c_void,
    cq: *mut c_void,
    qp: *mut c_void,
}

impl Drop for Made {
    fn drop(&mut self) {
        // SAFETY: each pointer is null or was created by the matching call on
        // `ctx` below and is destroyed once, objects before what they live in.
        unsafe {
            if !self.qp.is_null() {
                (self.lib.ibv_destroy_qp)(self.qp);
            }
            if !self.cq.is_null() {
                (self.lib.ibv_destroy_cq)(self.cq);
            }
            if !self.pd.is_null() {
                (self.lib.ibv_dealloc_pd)(self.pd);
            }
            if !self.ctx.is_null() {
                (self.lib.ibv_close_device)(self.ctx);
            }
        }
    }
}

/// Opens the device named `name` (`rxe0`, `mlx5_0`), reads its limits and
/// creates (then destroys) an RC queue pair asking for `caps` and `opts`'s
/// inline data, as a connection over it would.
pub fn probe(name: &str, caps: QpCaps, opts: &VerbsOptions) -> Result<Probe> {
    let lib = Verbs::lib()?;
    let ctx = open(lib, name)?;
    let mut made = Made {
        lib,
        ctx,
        pd: std::ptr::null_mut(),
        cq: std::ptr::null_mut(),
        qp: std::ptr::null_mut(),
    };
    let mut attr = IbvDeviceAttr([0; 232]);
    // SAFETY: `ctx` is an open device context; `attr` has the structure's size.
    let rc = unsafe { (lib.ibv_query_device)(ctx, &mut attr) };
    if rc != 0 {
        return Err(RdmaError::Io(std::io::Error::from_raw_os_error(rc)));
    }
    let limits = DeviceLimits::of(&attr);
    // SAFETY: open device context.
    made.pd = unsafe { (lib.ibv_alloc_pd)(ctx) };
    if made.pd.is_null() {
        return Err(RdmaError::Io(std::io::Error::last_os_error()));
    }
    let want = wanted_cap(&limits, caps, opts.max_inline);
    let cqe = (want.max_send_wr + want.max_recv_wr).min(limits.max_cqe.max(1));
    // SAFETY: open device context; no completion channel, no vector.
    made.cq = unsafe {
        (lib.ibv_create_cq)(
            ctx,
            cqe as c_int,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if made.cq.is_null() {
        return Err(RdmaError::Io(std::io::Error::last_os_error()));
    }
    let (pd, cq) = (made.pd, made.cq);
    let mut qp = std::ptr::null_mut();
    let granted = create_rc(cq, want, |attr| {
        // SAFETY: live domain and CQ of the same device; `attr` is filled in.
        qp = unsafe { (lib.ibv_create_qp)(pd, attr) };
        !qp.is_null()
    })
    .map_err(|e| RdmaError::Setup(format!("ibv_create_qp on {name}: {e}")))?;
    made.qp = qp;
    Ok(Probe {
        limits,
        granted: Granted {
            caps: QpCaps {
                max_send_wr: granted.max_send_wr,
                max_recv_wr: granted.max_recv_wr,
                max_send_sge: granted.max_send_sge,
                max_recv_sge: granted.max_recv_sge,
            },
            max_inline: granted.max_inline_data,
            max_mr_size: limits.max_mr_size,
        },
    })
}

/// Opens the device named `name`.
fn open(lib: &'static Lib, name: &str) -> Result<*mut IbvContext> {
    let mut n: c_int = 0;
    // SAFETY: `n` receives the count; the list is freed below.
    let list = unsafe { (lib.ibv_get_device_list)(&mut n) };
    if list.is_null() {
        return Err(RdmaError::Io(std::io::Error::last_os_error()));
    }
    let mut ctx = std::ptr::null_mut();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the list holds `n` device pointers.
        let dev = unsafe { *list.add(i) };
        // SAFETY: a device of the list; its name is a NUL-terminated string it owns.
        let dname = unsafe { CStr::from_ptr((lib.ibv_get_device_name)(dev)) };
        if dname.to_bytes() == name.as_bytes() {
            // SAFETY: a device of the list, opened before the list is freed.
            ctx = unsafe { (lib.ibv_open_device)(dev) };
            if ctx.is_null() {
                let e = std::io::Error::last_os_error();
                // SAFETY: the list from ibv_get_device_list, freed once.
                unsafe { (lib.ibv_free_device_list)(list) };
                return Err(RdmaError::Setup(format!("ibv_open_device({name}): {e}")));
            }
            break;
        }
    }
    // SAFETY: the list from ibv_get_device_list, freed once (an open device
    // stays usable).
    unsafe { (lib.ibv_free_device_list)(list) };
    if ctx.is_null() {
        return Err(RdmaError::Setup(format!(
            "rdma-core does not know the device {name}"
        )));
    }
    Ok(ctx)
}
