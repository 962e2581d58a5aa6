//! The registered payload pool: the buffers one connection's READ and WRITE
//! data passes through on its way to or from the peer by RDMA, registered once
//! and reused, so that steady-state I/O registers nothing (a verbs
//! registration pins pages and writes the device's translation tables; a
//! deregistration undoes it: both cost far more than the transfer of a few
//! KiB).
//!
//! Regions are registered with local write access only: the peer never names
//! them (the server RDMA-Writes from them and RDMA-Reads into them). Buffers a
//! peer must reach (a client's READ sink and WRITE source) are not pooled:
//! their remote access has to end with their I/O.
//!
//! Sizes come in classes, powers of two from [`MIN_CLASS`] up to the largest
//! transfer (the negotiated MaxReadWriteSize), each region [`SLACK`] bytes
//! longer, never above the device's largest region. A request takes the
//! smallest class whose region holds it; a freed
//! region goes back to its class's free list while the idle regions stay
//! within the pool's `keep` bytes, and is deregistered otherwise. A region
//! whose transfer did not finish (the request was cancelled, the transfer
//! failed) is deregistered rather than reused: the provider may still hold it
//! in a work request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use smbx_rdma::{Access, MemoryRegion, ProtectionDomain, RdmaError};

/// The smallest class: smaller transfers take a region of this size.
pub const MIN_CLASS: usize = 64 << 10;

/// Bytes each region holds beyond its class, so that a transfer of a class's
/// size can start up to `SLACK - 1` bytes into its buffer and still take that
/// class (not the next: twice the registered memory): the server places a
/// WRITE's data at the file offset's place in a 64-byte cache line, where the
/// kernel's copy into the page cache runs at full speed (see
/// smbx_transport::placement).
pub const SLACK: usize = 64;

/// Bytes of idle registered regions a pool keeps by default (the server's
/// RDMA budget per connection: what its transfers hold at most at once).
pub const DEFAULT_KEEP: usize = 64 << 20;

/// What a pool did, for tests and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PayloadStats {
    /// Regions registered (each a `register` call on the protection domain).
    pub registrations: u64,
    /// Buffers handed out.
    pub takes: u64,
    /// Regions deregistered: over the idle budget, or a transfer on them did
    /// not finish, or idle ones dropped to make room after a failed
    /// registration.
    pub released: u64,
    /// Regions handed out and not yet back.
    pub in_use: u64,
    /// Bytes of idle regions kept for reuse, counted by class (each region
    /// holds [`SLACK`] more).
    pub idle_bytes: u64,
}

/// A connection's pool of registered payload buffers. Cheap to clone.
pub struct PayloadPool<Pd: ProtectionDomain> {
    inner: Arc<Inner<Pd>>,
}

impl<Pd: ProtectionDomain> Clone for PayloadPool<Pd> {
    fn clone(&self) -> Self {
        PayloadPool {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<Pd: ProtectionDomain> {
    pd: Pd,
    /// Class sizes, ascending.
    classes: Vec<usize>,
    /// Each class's region size: [`SLACK`] more, within the device's largest region.
    sizes: Vec<usize>,
    /// Most bytes of idle regions kept.
    keep: usize,
    state: Mutex<State<Pd::Mr>>,
}

struct State<M> {
    /// Idle regions per class.
    free: Vec<Vec<M>>,
    stats: PayloadStats,
}

impl<Pd: ProtectionDomain> Inner<Pd> {
    fn lock(&self) -> MutexGuard<'_, State<Pd::Mr>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The class sizes for transfers of up to `max_len` bytes on a device whose
/// largest region is `max_mr_size` bytes (`None`: no limit): powers of two
/// from [`MIN_CLASS`]; the last is `max_len` rounded up to a power of two,
/// or `max_mr_size` when that is smaller. Empty when not even the smallest
/// fits the device.
pub fn classes(max_len: usize, max_mr_size: Option<u64>) -> Vec<usize> {
    let cap = max_mr_size.map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
    let top = max_len
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX)
        .max(MIN_CLASS)
        .min(cap);
    let mut out = Vec::new();
    let mut c = MIN_CLASS;
    while c < top {
        out.push(c);
        c = match c.checked_mul(2) {
            Some(n) => n,
            None => break,
        };
    }
    if top >= MIN_CLASS.min(cap) && top > 0 {
        out.push(top);
    }
    out
}

impl<Pd: ProtectionDomain> PayloadPool<Pd> {
    /// A pool registering in `pd` for transfers of up to `max_len` bytes, on a
    /// device whose largest region is `max_mr_size` (`None`: no limit),
    /// keeping up to `keep` bytes of idle regions.
    pub fn new(pd: Pd, max_len: usize, max_mr_size: Option<u64>, keep: usize) -> Self {
        let classes = classes(max_len, max_mr_size);
        let cap = max_mr_size.map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
        let sizes = classes
            .iter()
            .map(|c| c.saturating_add(SLACK).min(cap))
            .collect();
        let free = classes.iter().map(|_| Vec::new()).collect();
        PayloadPool {
            inner: Arc::new(Inner {
                pd,
                classes,
                sizes,
                keep,
                state: Mutex::new(State {
                    free,
                    stats: PayloadStats::default(),
                }),
            }),
        }
    }

    /// The largest buffer [`PayloadPool::take`] hands out (the largest class
    /// and its [`SLACK`]).
    pub fn max_len(&self) -> usize {
        self.inner.sizes.last().copied().unwrap_or(0)
    }

    /// What the pool did so far.
    pub fn stats(&self) -> PayloadStats {
        self.inner.lock().stats
    }

    /// A registered buffer of at least `len` bytes (`len` of them visible),
    /// from the free list when one is there, else registered now. Fails when
    /// `len` exceeds [`PayloadPool::max_len`] or the registration fails (after
    /// one retry with every idle region deregistered first: a device or a
    /// locked-memory limit may be what ran out).
    pub fn take(&self, len: usize) -> Result<Payload<Pd>, RdmaError> {
        let class = self
            .inner
            .sizes
            .iter()
            .position(|&c| c >= len.max(1))
            .ok_or(RdmaError::InvalidRequest(
                "payload longer than the pool's largest buffer",
            ))?;
        let reused = {
            let mut g = self.inner.lock();
            let mr = g.free[class].pop();
            if mr.is_some() {
                g.stats.idle_bytes -= self.inner.classes[class] as u64;
            }
            mr
        };
        let mr = match reused {
            Some(mr) => mr,
            None => self.register(class)?,
        };
        let mut g = self.inner.lock();
        g.stats.takes += 1;
        g.stats.in_use += 1;
        Ok(Payload {
            mr: Some(mr),
            len,
            class,
            busy: AtomicBool::new(false),
            pool: self.inner.clone(),
        })
    }

    fn register(&self, class: usize) -> Result<Pd::Mr, RdmaError> {
        let size = self.inner.sizes[class];
        let mr = match self.inner.pd.alloc(size, Access::LOCAL_WRITE) {
            Ok(mr) => mr,
            Err(first) => {
                if self.drop_idle() == 0 {
                    return Err(first);
                }
                self.inner.pd.alloc(size, Access::LOCAL_WRITE)?
            }
        };
        self.inner.lock().stats.registrations += 1;
        Ok(mr)
    }

    /// Deregisters every idle region; returns how many.
    fn drop_idle(&self) -> usize {
        let idle: Vec<Pd::Mr> = {
            let mut g = self.inner.lock();
            let v: Vec<_> = g.free.iter_mut().flat_map(std::mem::take).collect();
            g.stats.released += v.len() as u64;
            g.stats.idle_bytes = 0;
            v
        };
        idle.len()
    }
}

/// A buffer taken from a [`PayloadPool`]: back to the pool when dropped.
pub struct Payload<Pd: ProtectionDomain> {
    mr: Option<Pd::Mr>,
    len: usize,
    class: usize,
    /// A transfer started on the region and has not finished.
    busy: AtomicBool,
    pool: Arc<Inner<Pd>>,
}

impl<Pd: ProtectionDomain> Payload<Pd> {
    /// The registered region (at least [`Payload::len`] bytes).
    pub fn mr(&self) -> &Pd::Mr {
        self.mr.as_ref().expect("present until dropped")
    }

    /// The bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Marks a transfer started on the region: unless
    /// [`Payload::transfer_done`] follows, the region is deregistered rather
    /// than reused when the buffer drops (a cancelled transfer may leave work
    /// requests holding it).
    pub fn transfer_started(&self) {
        self.busy.store(true, Ordering::Release);
    }

    /// Marks the transfer finished: every work request on the region completed.
    pub fn transfer_done(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// Runs `f` over the first [`Payload::len`] bytes.
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let n = self.len;
        self.mr().with(|b| f(&b[..n.min(b.len())]))
    }

    /// Runs `f` over the first [`Payload::len`] bytes, mutably (not while a
    /// transfer uses them).
    pub fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let n = self.len;
        self.mr().with_mut(|b| {
            let n = n.min(b.len());
            f(&mut b[..n])
        })
    }
}

impl<Pd: ProtectionDomain> Drop for Payload<Pd> {
    fn drop(&mut self) {
        let Some(mr) = self.mr.take() else { return };
        let size = self.pool.classes[self.class];
        let reusable = !self.busy.load(Ordering::Acquire) && mr.is_valid();
        let mut g = self.pool.lock();
        g.stats.in_use -= 1;
        if reusable && g.stats.idle_bytes + size as u64 <= self.pool.keep as u64 {
            g.stats.idle_bytes += size as u64;
            g.free[self.class].push(mr);
        } else {
            g.stats.released += 1;
            drop(g);
            drop(mr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_rdma::iwarp::SoftIwarp;
    use smbx_rdma::Provider;

    fn pool(max_len: usize, keep: usize) -> PayloadPool<<SoftIwarp as Provider>::Pd> {
        let pd = SoftIwarp::default().alloc_pd().unwrap();
        PayloadPool::new(pd, max_len, None, keep)
    }

    /// Classes double from 64 KiB to the largest transfer, which a device's
    /// largest region caps.
    #[test]
    fn classes_double_up_to_the_largest_transfer() {
        assert_eq!(
            classes(1 << 20, None),
            vec![64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20]
        );
        assert_eq!(classes(1000, None), vec![64 << 10]);
        assert_eq!(classes((1 << 20) + 1, None).last(), Some(&(2 << 20)));
        assert_eq!(
            classes(8 << 20, Some(256 << 10)),
            vec![64 << 10, 128 << 10, 256 << 10]
        );
        // A device whose regions hold less than the smallest class: one class of its size.
        assert_eq!(classes(8 << 20, Some(4096)), vec![4096]);
    }

    /// Steady state registers nothing: the same I/O sizes again and again take
    /// the regions registered for the first ones.
    #[test]
    fn steady_state_registers_nothing() {
        let p = pool(1 << 20, DEFAULT_KEEP);
        for _ in 0..3 {
            let a: Vec<_> = [4096, 512 << 10, 1 << 20, 100]
                .iter()
                .map(|&n| p.take(n).unwrap())
                .collect();
            assert_eq!(a[0].len(), 4096);
            assert!(a.iter().all(|b| b.mr().len() >= b.len()));
            assert!(a
                .iter()
                .all(|b| b.mr().access() == Access::LOCAL_WRITE && b.mr().is_valid()));
        }
        let s = p.stats();
        assert_eq!((s.registrations, s.takes, s.in_use), (4, 12, 0));
        for _ in 0..1000 {
            let b = p.take(4096).unwrap();
            b.with_mut(|d| d.fill(7));
            assert!(b.with(|d| d.len() == 4096 && d.iter().all(|&x| x == 7)));
        }
        assert_eq!(p.stats().registrations, 4);
    }

    /// Idle regions beyond the pool's budget are deregistered, not kept.
    #[test]
    fn idle_regions_stay_within_the_budget() {
        let p = pool(1 << 20, 1 << 20);
        let held: Vec<_> = (0..3).map(|_| p.take(1 << 20).unwrap()).collect();
        assert_eq!(p.stats().in_use, 3);
        drop(held);
        let s = p.stats();
        assert_eq!((s.idle_bytes, s.released, s.in_use), (1 << 20, 2, 0));
        // The one kept serves the next take.
        let _b = p.take(700 << 10).unwrap();
        assert_eq!(p.stats().registrations, 3);
        assert_eq!(p.stats().idle_bytes, 0);
    }

    /// A region whose transfer never finished is deregistered, not reused; a
    /// finished one is reused.
    #[test]
    fn unfinished_transfers_are_not_reused() {
        let p = pool(1 << 20, DEFAULT_KEEP);
        let b = p.take(8192).unwrap();
        b.transfer_started();
        drop(b);
        assert_eq!(p.stats().released, 1);
        assert_eq!(p.stats().idle_bytes, 0);
        let b = p.take(8192).unwrap();
        b.transfer_started();
        b.transfer_done();
        drop(b);
        assert_eq!(p.stats().idle_bytes, MIN_CLASS as u64);
        let _c = p.take(8192).unwrap();
        assert_eq!(p.stats().registrations, 2);
    }

    /// Longer than the largest class and its slack is refused.
    #[test]
    fn too_long_is_refused() {
        let p = pool(1 << 20, DEFAULT_KEEP);
        assert_eq!(p.max_len(), (1 << 20) + SLACK);
        assert!(p.take((1 << 20) + SLACK + 1).is_err());
        assert_eq!(p.stats(), PayloadStats::default());
    }

    /// Every class's region holds its power of two and [`SLACK`]: 2^k and
    /// 2^k + SLACK take class k's region (reused, one registration), one byte
    /// more the next class's; the buffer shows the length asked.
    #[test]
    fn class_edges_take_their_own_region() {
        let p = pool(1 << 20, DEFAULT_KEEP);
        for k in 0..5 {
            let pow = MIN_CLASS << k;
            for len in [pow, pow + 1, pow + SLACK - 1, pow + SLACK] {
                let b = p.take(len).unwrap();
                assert_eq!((b.len(), b.mr().len()), (len, pow + SLACK), "{len}");
                assert_eq!(b.with(|d| d.len()), len);
            }
            if k < 4 {
                let b = p.take(pow + SLACK + 1).unwrap();
                assert_eq!(b.mr().len(), 2 * pow + SLACK);
            }
        }
        // One region per class, reused at each of its edges.
        assert_eq!(p.stats().registrations, 5);
        // A device whose regions hold no more than a class: the slack is cut to fit.
        let pd = SoftIwarp::default().alloc_pd().unwrap();
        let capped = PayloadPool::new(pd, 1 << 20, Some(256 << 10), DEFAULT_KEEP);
        assert_eq!(capped.max_len(), 256 << 10);
        assert_eq!(
            capped.take(128 << 10).unwrap().mr().len(),
            (128 << 10) + SLACK
        );
        assert_eq!(capped.take(256 << 10).unwrap().mr().len(), 256 << 10);
        assert!(capped.take((256 << 10) + 1).is_err());
    }
    /// A protection domain that registers at most `limit` bytes at once (as a
    /// locked-memory limit would).
    #[derive(Clone)]
    struct Limited {
        pd: <SoftIwarp as Provider>::Pd,
        live: Arc<std::sync::atomic::AtomicUsize>,
        limit: usize,
    }

    struct Live(Arc<std::sync::atomic::AtomicUsize>, usize);
    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(self.1, Ordering::SeqCst);
        }
    }

    /// A region and its share of the live bytes (released with its last handle).
    #[derive(Clone)]
    struct LimitedMr(<SoftIwarp as Provider>::Mr, #[allow(dead_code)] Arc<Live>);

    impl MemoryRegion for LimitedMr {
        fn stag(&self) -> smbx_rdma::STag {
            self.0.stag()
        }
        fn addr(&self) -> u64 {
            self.0.addr()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn access(&self) -> Access {
            self.0.access()
        }
        fn is_valid(&self) -> bool {
            self.0.is_valid()
        }
        fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
            self.0.with(f)
        }
        fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
            self.0.with_mut(f)
        }
    }

    impl ProtectionDomain for Limited {
        type Mr = LimitedMr;
        fn register(&self, buf: Vec<u8>, access: Access) -> smbx_rdma::Result<LimitedMr> {
            let n = buf.len();
            if self.live.load(Ordering::SeqCst) + n > self.limit {
                return Err(RdmaError::Setup("locked-memory limit".into()));
            }
            self.live.fetch_add(n, Ordering::SeqCst);
            let live = Arc::new(Live(self.live.clone(), n));
            Ok(LimitedMr(self.pd.register(buf, access)?, live))
        }
    }

    /// A registration refused (a locked-memory limit reached by idle regions)
    /// is retried once after the idle regions are deregistered; one refused
    /// while every region is in use fails.
    #[test]
    fn a_refused_registration_drops_the_idle_regions_and_retries() {
        let pd = Limited {
            pd: SoftIwarp::default().alloc_pd().unwrap(),
            live: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            // Two 512 KiB regions, or one of 1 MiB, with their slack.
            limit: (1 << 20) + 2 * SLACK,
        };
        let p = PayloadPool::new(pd.clone(), 1 << 20, None, DEFAULT_KEEP);
        drop((p.take(512 << 10).unwrap(), p.take(512 << 10).unwrap()));
        assert_eq!(p.stats().idle_bytes, 1 << 20);
        // A 1 MiB buffer does not fit beside the two idle 512 KiB ones.
        let big = p.take(1 << 20).unwrap();
        let s = p.stats();
        assert_eq!((s.registrations, s.released, s.idle_bytes), (3, 2, 0));
        // Nothing idle to drop: refused.
        assert!(p.take(4096).is_err());
        drop(big);
        assert!(p.take(4096).is_ok());
    }
}
