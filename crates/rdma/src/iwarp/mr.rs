//! Soft-iWARP protection domains and memory regions: an STag table shared by
//! the queue pairs of a domain.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::error::{RdmaError, Result};
use crate::provider::{MemoryRegion, ProtectionDomain};
use crate::types::{Access, STag};

/// A soft-iWARP protection domain. Cheap to clone (a handle).
///
/// STags are unpredictable: each domain starts its 24-bit indexes at a
/// random point and gives each registration an 8-bit key mixed from a
/// per-domain secret, so a peer cannot guess the STag of a region it was
/// not told about.
#[derive(Clone, Debug)]
pub struct SoftPd {
    shared: Arc<PdShared>,
}

#[derive(Debug)]
pub(crate) struct PdShared {
    table: Mutex<HashMap<u32, Weak<MrInner>>>,
    next_index: AtomicU32,
    /// Seeds the keys and the first index.
    secret: u64,
}

impl Default for SoftPd {
    fn default() -> Self {
        Self::new()
    }
}

/// The 24-bit index space of an STag.
const INDEX_MASK: u32 = 0x00FF_FFFF;

/// SplitMix64's finaliser: a cheap, well-spread mix of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A soft-iWARP memory region: owns its buffer; cloning makes another handle.
/// Deregistered when the last handle drops.
#[derive(Clone, Debug)]
pub struct SoftMr {
    inner: Arc<MrInner>,
}

#[derive(Debug)]
pub(crate) struct MrInner {
    buf: Mutex<Vec<u8>>,
    len: usize,
    stag: STag,
    base: u64,
    access: Access,
    valid: AtomicBool,
    pd: Weak<PdShared>,
}

impl Drop for MrInner {
    fn drop(&mut self) {
        super::stats::mr_released(self.len);
        if let Some(pd) = self.pd.upgrade() {
            let mut t = pd.lock();
            // Only remove our own entry (the slot may not be reused, but be safe).
            if let Some(w) = t.get(&self.stag.0) {
                if w.strong_count() == 0 {
                    t.remove(&self.stag.0);
                }
            }
        }
    }
}

impl PdShared {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Weak<MrInner>>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next STag (and its index) not naming a live region of `table`.
    fn free_stag(&self, table: &HashMap<u32, Weak<MrInner>>) -> Result<(STag, u32)> {
        let first = (self.secret >> 40) as u32;
        // Every index once at most: after that the domain is full.
        for _ in 0..=INDEX_MASK {
            let n = self.next_index.fetch_add(1, Ordering::Relaxed);
            let index = first.wrapping_add(n) & INDEX_MASK;
            if index == 0 {
                continue;
            }
            let key = mix(self.secret ^ u64::from(n)) as u8;
            let stag = (index << 8) | u32::from(key);
            if table.get(&stag).is_none_or(|w| w.strong_count() == 0) {
                return Ok((STag(stag), index));
            }
        }
        Err(RdmaError::InvalidRequest("protection domain full"))
    }
}

impl SoftPd {
    /// A new, empty protection domain with unpredictable STags.
    pub fn new() -> Self {
        Self::seeded(rand::random())
    }

    /// A domain whose STags follow from `seed`: the same registrations in
    /// the same order get the same STags every run (for fuzzing and
    /// reproducible tests; servers use [`SoftPd::new`]).
    pub fn seeded(seed: u64) -> Self {
        SoftPd {
            shared: Arc::new(PdShared {
                table: Mutex::new(HashMap::new()),
                next_index: AtomicU32::new(0),
                secret: seed,
            }),
        }
    }

    /// Look up a valid-or-not region by STag (the caller checks validity and rights).
    pub(crate) fn lookup(&self, stag: STag) -> Option<SoftMr> {
        let t = self.shared.lock();
        t.get(&stag.0)
            .and_then(Weak::upgrade)
            .map(|inner| SoftMr { inner })
    }

    /// Invalidate `stag` if it names a region of this domain; returns whether it did.
    pub(crate) fn invalidate(&self, stag: STag) -> bool {
        match self.lookup(stag) {
            Some(mr) => {
                mr.inner.valid.store(false, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// A peer's Send with Invalidate of `stag`: only a region of this domain
    /// registered for remote access (one the connection advertised) may be
    /// invalidated by the peer; its private send and receive buffers never.
    pub(crate) fn invalidate_remote(&self, stag: STag) -> bool {
        match self.lookup(stag) {
            Some(mr)
                if mr.inner.access.contains(Access::REMOTE_READ)
                    || mr.inner.access.contains(Access::REMOTE_WRITE) =>
            {
                mr.inner.valid.store(false, Ordering::Release);
                true
            }
            _ => false,
        }
    }

    /// Whether `mr` was registered in this domain.
    pub(crate) fn owns(&self, mr: &SoftMr) -> bool {
        mr.inner
            .pd
            .upgrade()
            .is_some_and(|p| Arc::ptr_eq(&p, &self.shared))
    }
}

impl ProtectionDomain for SoftPd {
    type Mr = SoftMr;

    fn register(&self, buf: Vec<u8>, access: Access) -> Result<SoftMr> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(RdmaError::InvalidRequest(
                "remote write requires local write",
            ));
        }
        if buf.len() > u32::MAX as usize {
            return Err(RdmaError::InvalidRequest("region larger than 4 GiB"));
        }
        let mut table = self.shared.lock();
        let (stag, index) = self.shared.free_stag(&table)?;
        // Each region gets its own Tagged Offset base, so a consumer that
        // sends offsets instead of addresses is caught at once.
        let base = (u64::from(index) << 32) | 0x1000;
        let len = buf.len();
        let inner = Arc::new(MrInner {
            buf: Mutex::new(buf),
            len,
            stag,
            base,
            access,
            valid: AtomicBool::new(true),
            pd: Arc::downgrade(&self.shared),
        });
        table.insert(stag.0, Arc::downgrade(&inner));
        super::stats::mr_registered(len);
        Ok(SoftMr { inner })
    }
}

impl SoftMr {
    /// Deregister and take the buffer back; fails (returning the handle) while
    /// other handles exist (e.g. an in-flight work request).
    pub fn into_buffer(self) -> std::result::Result<Vec<u8>, SoftMr> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => {
                let buf = std::mem::take(&mut *inner.buf.lock().unwrap_or_else(|e| e.into_inner()));
                drop(inner);
                Ok(buf)
            }
            Err(inner) => Err(SoftMr { inner }),
        }
    }

    /// Whether two handles name the same registration.
    pub fn same(&self, other: &SoftMr) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Lock the buffer (for the provider's bulk placement).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.inner.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Translate a tagged offset range to a buffer offset, checking bounds.
    pub(crate) fn offset_of(&self, to: u64, len: u64) -> Option<usize> {
        let off = to.checked_sub(self.inner.base)?;
        let end = off.checked_add(len)?;
        if end > self.inner.len as u64 {
            return None;
        }
        usize::try_from(off).ok()
    }
}

impl MemoryRegion for SoftMr {
    fn stag(&self) -> STag {
        self.inner.stag
    }
    fn addr(&self) -> u64 {
        self.inner.base
    }
    fn len(&self) -> usize {
        self.inner.len
    }
    fn access(&self) -> Access {
        self.inner.access
    }
    fn is_valid(&self) -> bool {
        self.inner.valid.load(Ordering::Acquire)
    }
    fn take_buffer(self) -> std::result::Result<Vec<u8>, Self> {
        self.into_buffer()
    }
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.lock())
    }
    fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stags_are_unpredictable_but_reproducible_from_a_seed() {
        let stags = |pd: &SoftPd| -> Vec<u32> {
            (0..8)
                .map(|_| pd.register(vec![0; 8], Access::LOCAL_WRITE).unwrap())
                .map(|mr| mr.stag().0)
                .collect()
        };
        // Two fresh domains: different STags (a peer cannot predict ours).
        let (a, b) = (stags(&SoftPd::new()), stags(&SoftPd::new()));
        assert_ne!(a, b);
        // Keys vary within a domain, not only the index.
        let keys: std::collections::HashSet<u8> = a.iter().map(|s| *s as u8).collect();
        assert!(keys.len() > 1, "{a:x?}");
        // The same seed: the same STags.
        assert_eq!(stags(&SoftPd::seeded(7)), stags(&SoftPd::seeded(7)));
        assert_ne!(stags(&SoftPd::seeded(7)), stags(&SoftPd::seeded(8)));
    }

    #[test]
    fn peers_invalidate_only_advertised_regions_of_their_own_domain() {
        let a = SoftPd::new();
        let b = SoftPd::new();
        let private = a.register(vec![0; 64], Access::LOCAL_WRITE).unwrap();
        let advertised = a
            .register(vec![0; 64], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        // Another connection's domain knows neither region.
        assert!(!b.invalidate_remote(advertised.stag()));
        assert!(!b.invalidate_remote(private.stag()));
        assert!(advertised.is_valid());
        // A private (receive/send) buffer is never remotely invalidatable.
        assert!(!a.invalidate_remote(private.stag()));
        assert!(private.is_valid());
        // An advertised region is.
        assert!(a.invalidate_remote(advertised.stag()));
        assert!(!advertised.is_valid());
        // Local invalidation still works on any region of the domain.
        assert!(a.invalidate(private.stag()));
    }
}
