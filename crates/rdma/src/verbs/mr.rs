//! Verbs protection domains and memory regions (`ibv_alloc_pd`, `ibv_reg_mr`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::ffi::{IbvContext, IbvDeviceAttr, IbvMr, Lib};
use super::IdHolder;
use crate::error::{RdmaError, Result};
use crate::provider::{MemoryRegion, ProtectionDomain};
use crate::types::{Access, STag};

/// The limits of a device that size queue pairs and registrations
/// (from `ibv_query_device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Most work requests per queue.
    pub max_qp_wr: u32,
    /// Most scatter entries per work request.
    pub max_sge: u32,
    /// Most completion queue entries.
    pub max_cqe: u32,
    /// Most RDMA Reads the device answers at once per queue pair (IRD).
    pub max_qp_rd_atom: u32,
    /// Most RDMA Reads the device issues at once per queue pair (ORD).
    pub max_qp_init_rd_atom: u32,
    /// Memory windows the device has (0: invalidation is by deregistration).
    pub max_mw: u32,
    /// `device_cap_flags`.
    pub cap_flags: u32,
}

impl DeviceLimits {
    /// The limits in `ibv_query_device`'s answer.
    pub(crate) fn of(attr: &IbvDeviceAttr) -> DeviceLimits {
        DeviceLimits {
            max_mr_size: attr.max_mr_size(),
            max_qp_wr: attr.max_qp_wr(),
            max_sge: attr.max_sge(),
            max_cqe: attr.max_cqe(),
            max_qp_rd_atom: attr.max_qp_rd_atom(),
            max_qp_init_rd_atom: attr.max_qp_init_rd_atom(),
            max_mw: attr.max_mw(),
            cap_flags: attr.device_cap_flags(),
        }
    }
}

/// A protection domain bound to a device (`struct ibv_pd`).
pub(crate) struct Bound {
    pub ctx: *mut IbvContext,
    pub pd: *mut c_void,
    pub limits: DeviceLimits,
    lib: &'static Lib,
    /// The CM id whose device context the domain lives on, kept until the
    /// domain is deallocated.
    _id: Arc<IdHolder>,
}

// SAFETY: the pointers name rdma-core objects that are thread-safe to use
// from any thread (libibverbs locks internally); they are freed once, in Drop.
unsafe impl Send for Bound {}
// SAFETY: as above; no interior state is mutated through `&Bound`.
unsafe impl Sync for Bound {}

impl Drop for Bound {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; every region and queue pair in it
        // holds the domain, so none is left when this runs.
        let rc = unsafe { (self.lib.ibv_dealloc_pd)(self.pd) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dealloc_pd failed");
        }
    }
}

/// What to check after a failed `ibv_reg_mr`: the locked-memory limit for
/// ENOMEM and EPERM (pinning refused); nothing for the rest (EIO: the device
/// was removed).
fn reg_mr_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::EPERM) => {
            " (is the locked-memory limit, ulimit -l or LimitMEMLOCK=, high enough?)"
        }
        _ => "",
    }
}

/// A verbs protection domain. Cheap to clone (a handle).
///
/// A domain belongs to one device, which RDMA CM only knows once an address
/// is resolved: one made by [`crate::Provider::alloc_pd`] is bound to a device
/// by the first [`crate::Provider::connect`] that uses it; regions can be
/// registered from then on. Accepted connections get theirs bound already.
#[derive(Clone)]
pub struct VerbsPd {
    pub(crate) inner: Arc<PdInner>,
}

impl std::fmt::Debug for VerbsPd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsPd")
            .field("bound", &self.inner.bound.get().is_some())
            .finish()
    }
}

pub(crate) struct PdInner {
    bound: OnceLock<Bound>,
    table: Mutex<HashMap<u32, Weak<MrInner>>>,
}

impl VerbsPd {
    pub(crate) fn new() -> Self {
        VerbsPd {
            inner: Arc::new(PdInner {
                bound: OnceLock::new(),
                table: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The device's limits, once the domain is bound to one.
    pub fn limits(&self) -> Option<DeviceLimits> {
        self.inner.bound.get().map(|b| b.limits)
    }

    pub(crate) fn bound(&self) -> Option<&Bound> {
        self.inner.bound.get()
    }

    /// Binds the domain to the device of `id` (allocating the `ibv_pd`), or
    /// checks it is already bound to that device.
    pub(crate) fn bind(&self, lib: &'static Lib, id: &Arc<IdHolder>) -> Result<&Bound> {
        let ctx = id.context();
        if ctx.is_null() {
            return Err(RdmaError::Setup("the CM id has no device".into()));
        }
        if let Some(b) = self.inner.bound.get() {
            if b.ctx != ctx {
                return Err(RdmaError::InvalidRequest(
                    "protection domain belongs to another device",
                ));
            }
            return Ok(b);
        }
        let mut attr = IbvDeviceAttr([0; 232]);
        // SAFETY: `ctx` is the device context of a live CM id; `attr` is a
        // buffer of the structure's size.
        let rc = unsafe { (lib.ibv_query_device)(ctx, &mut attr) };
        if rc != 0 {
            return Err(RdmaError::Io(std::io::Error::from_raw_os_error(rc)));
        }
        // SAFETY: as above.
        let pd = unsafe { (lib.ibv_alloc_pd)(ctx) };
        if pd.is_null() {
            return Err(RdmaError::Io(std::io::Error::last_os_error()));
        }
        let limits = DeviceLimits::of(&attr);
        let b = Bound {
            ctx,
            pd,
            limits,
            lib,
            _id: id.clone(),
        };
        // A racing bind that won keeps its own; ours is deallocated on drop.
        let _ = self.inner.bound.set(b);
        let b = self.inner.bound.get().expect("set above");
        if b.ctx != ctx {
            return Err(RdmaError::InvalidRequest(
                "protection domain belongs to another device",
            ));
        }
        Ok(b)
    }

    pub(crate) fn same(&self, other: &Arc<PdInner>) -> bool {
        Arc::ptr_eq(&self.inner, other)
    }

    /// Marks our region with `rkey` invalid and deregisters it (the peer
    /// invalidated it, or we did locally). Returns whether one was found.
    pub(crate) fn invalidate(&self, rkey: u32) -> bool {
        let mr = self
            .inner
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&rkey)
            .and_then(Weak::upgrade);
        match mr {
            Some(m) => {
                m.deregister();
                true
            }
            None => false,
        }
    }
}

impl ProtectionDomain for VerbsPd {
    type Mr = VerbsMr;

    fn remote_invalidation(&self) -> bool {
        // ibv_reg_mr regions: a peer's Send with Invalidate of one is a
        // remote operation error on RoCE/IB devices.
        false
    }

    fn register(&self, buf: Vec<u8>, access: Access) -> Result<VerbsMr> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(RdmaError::InvalidRequest(
                "remote write access requires local write access",
            ));
        }
        let b = self.inner.bound.get().ok_or(RdmaError::InvalidRequest(
            "protection domain not bound to a device yet (register after connect)",
        ))?;
        let len = buf.len();
        if len == 0 {
            return Err(RdmaError::InvalidRequest("empty memory region"));
        }
        if len as u64 > b.limits.max_mr_size {
            return Err(RdmaError::InvalidRequest(
                "memory region larger than the device's max_mr_size",
            ));
        }
        let mut buf = buf;
        let ptr = buf.as_mut_ptr();
        // SAFETY: `ptr..ptr+len` is the heap buffer of `buf`, which the region
        // owns from here on and never reallocates; it is deregistered before
        // the buffer is freed (MrInner's Drop, take_buffer).
        let mr = unsafe { (b.lib.ibv_reg_mr)(b.pd, ptr.cast(), len, i32::from(access.bits())) };
        if mr.is_null() {
            let e = std::io::Error::last_os_error();
            return Err(RdmaError::Setup(format!(
                "ibv_reg_mr of {len} bytes failed: {e}{}",
                reg_mr_hint(&e)
            )));
        }
        // SAFETY: `mr` is the non-null region ibv_reg_mr returned.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        let inner = Arc::new(MrInner {
            buf: Mutex::new(buf),
            ptr: ptr as u64,
            len,
            mr: Mutex::new(MrPtr(mr)),
            lkey,
            rkey,
            access,
            valid: AtomicBool::new(true),
            lib: b.lib,
            pd: self.inner.clone(),
        });
        let mut t = self.inner.table.lock().unwrap_or_else(|e| e.into_inner());
        t.retain(|_, w| w.strong_count() > 0);
        t.insert(rkey, Arc::downgrade(&inner));
        Ok(VerbsMr { inner })
    }
}

struct MrPtr(*mut IbvMr);
// SAFETY: an rdma-core region handle, deregistered once under the mutex.
unsafe impl Send for MrPtr {}

/// A registered verbs memory region: owns its buffer; cloning makes another
/// handle. Deregistered when the last handle drops, or when invalidated.
#[derive(Clone)]
pub struct VerbsMr {
    pub(crate) inner: Arc<MrInner>,
}

impl std::fmt::Debug for VerbsMr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsMr")
            .field("rkey", &STag(self.inner.rkey))
            .field("len", &self.inner.len)
            .finish()
    }
}

pub(crate) struct MrInner {
    buf: Mutex<Vec<u8>>,
    pub ptr: u64,
    pub len: usize,
    mr: Mutex<MrPtr>,
    pub lkey: u32,
    pub rkey: u32,
    pub access: Access,
    valid: AtomicBool,
    lib: &'static Lib,
    pub pd: Arc<PdInner>,
}

impl MrInner {
    /// Deregisters (once): the device no longer reaches the buffer.
    pub(crate) fn deregister(&self) {
        self.valid.store(false, Ordering::Release);
        let mut g = self.mr.lock().unwrap_or_else(|e| e.into_inner());
        if !g.0.is_null() {
            // SAFETY: registered by ibv_reg_mr and not yet deregistered (the
            // pointer is nulled under this lock).
            let rc = unsafe { (self.lib.ibv_dereg_mr)(g.0) };
            if rc != 0 {
                tracing::warn!(rc, "ibv_dereg_mr failed");
            }
            g.0 = std::ptr::null_mut();
        }
    }

    pub(crate) fn is_valid(&self) -> bool {
        self.valid.load(Ordering::Acquire)
    }
}

impl Drop for MrInner {
    fn drop(&mut self) {
        self.deregister();
        let mut t = self.pd.table.lock().unwrap_or_else(|e| e.into_inner());
        if t.get(&self.rkey).is_some_and(|w| w.strong_count() == 0) {
            t.remove(&self.rkey);
        }
    }
}

impl MemoryRegion for VerbsMr {
    fn stag(&self) -> STag {
        STag(self.inner.rkey)
    }
    fn addr(&self) -> u64 {
        self.inner.ptr
    }
    fn len(&self) -> usize {
        self.inner.len
    }
    fn access(&self) -> Access {
        self.inner.access
    }
    fn is_valid(&self) -> bool {
        self.inner.is_valid()
    }
    fn take_buffer(self) -> std::result::Result<Vec<u8>, Self> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => {
                inner.deregister();
                let v = std::mem::take(&mut *inner.buf.lock().unwrap_or_else(|e| e.into_inner()));
                Ok(v)
            }
            Err(inner) => Err(VerbsMr { inner }),
        }
    }
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.inner.buf.lock().unwrap_or_else(|e| e.into_inner()))
    }
    fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.inner.buf.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reg_mr_hints_at_the_memlock_limit_only_when_pinning_was_refused() {
        for errno in [libc::ENOMEM, libc::EPERM] {
            let e = std::io::Error::from_raw_os_error(errno);
            assert!(reg_mr_hint(&e).contains("ulimit -l"), "{errno}");
        }
        // A removed device (`rdma link delete`) fails with EIO: no hint.
        let e = std::io::Error::from_raw_os_error(libc::EIO);
        assert_eq!(reg_mr_hint(&e), "");
    }
}
