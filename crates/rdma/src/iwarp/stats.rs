//! Process-wide counts of the soft-iWARP provider's resources: queue pairs and
//! registered memory regions that exist now. Relaxed atomics, updated when a
//! queue pair or region is created and when it is dropped.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static QUEUE_PAIRS: AtomicU64 = AtomicU64::new(0);
static MEMORY_REGIONS: AtomicU64 = AtomicU64::new(0);
static REGISTERED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The provider's resources at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderStats {
    /// Queue pairs (connecting, connected or closed but not yet dropped).
    pub queue_pairs: u64,
    /// Registered memory regions.
    pub memory_regions: u64,
    /// Bytes of the registered memory regions.
    pub registered_bytes: u64,
}

/// The soft-iWARP resources of this process now.
pub fn stats() -> ProviderStats {
    ProviderStats {
        queue_pairs: QUEUE_PAIRS.load(Relaxed),
        memory_regions: MEMORY_REGIONS.load(Relaxed),
        registered_bytes: REGISTERED_BYTES.load(Relaxed),
    }
}

pub(crate) fn qp_created() {
    QUEUE_PAIRS.fetch_add(1, Relaxed);
}

pub(crate) fn qp_dropped() {
    QUEUE_PAIRS.fetch_sub(1, Relaxed);
}

pub(crate) fn mr_registered(len: usize) {
    MEMORY_REGIONS.fetch_add(1, Relaxed);
    REGISTERED_BYTES.fetch_add(len as u64, Relaxed);
}

pub(crate) fn mr_released(len: usize) {
    MEMORY_REGIONS.fetch_sub(1, Relaxed);
    REGISTERED_BYTES.fetch_sub(len as u64, Relaxed);
}
