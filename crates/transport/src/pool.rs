//! A small pool of I/O buffers, so steady-state READ and WRITE over RDMA
//! allocate (and zero) nothing per operation.

use std::sync::Mutex;

/// Smallest size class.
const MIN_CLASS: usize = 64 * 1024;
/// Size classes: 64 KiB, 128 KiB, … 16 MiB.
const CLASSES: usize = 9;

/// Buffers in power-of-two size classes, a bounded number kept per class.
#[derive(Debug)]
pub struct BufPool {
    classes: Mutex<Vec<Vec<Vec<u8>>>>,
    per_class: usize,
}

impl BufPool {
    /// A pool keeping at most `per_class` idle buffers of each size.
    pub fn new(per_class: usize) -> Self {
        BufPool {
            classes: Mutex::new(vec![Vec::new(); CLASSES]),
            per_class,
        }
    }

    fn class_of(len: usize) -> Option<(usize, usize)> {
        let size = len.max(MIN_CLASS).checked_next_power_of_two()?;
        let idx = (size / MIN_CLASS).trailing_zeros() as usize;
        (idx < CLASSES).then_some((idx, size))
    }

    /// A buffer of at least `len` bytes (its length is its size class; the
    /// bytes are whatever the last user left).
    pub fn take(&self, len: usize) -> Vec<u8> {
        match Self::class_of(len) {
            Some((idx, size)) => {
                let got = self.lock()[idx].pop();
                match got {
                    Some(mut v) => {
                        // A recycled buffer may hold less than its class.
                        v.resize(size, 0);
                        v
                    }
                    None => vec![0; size],
                }
            }
            None => vec![0; len],
        }
    }

    /// An empty buffer with room for at least `len` bytes (the capacity of its
    /// size class), to read into without zero-filling it first. Below the smallest
    /// class it is a plain buffer of `len` (not worth a class's memory; not kept).
    pub fn take_spare(&self, len: usize) -> Vec<u8> {
        if len < MIN_CLASS {
            return Vec::with_capacity(len);
        }
        match Self::class_of(len) {
            Some((idx, size)) => match self.lock()[idx].pop() {
                Some(mut v) => {
                    v.clear();
                    v
                }
                None => Vec::with_capacity(size),
            },
            None => Vec::with_capacity(len),
        }
    }

    /// A buffer of exactly `len` bytes, for a caller that overwrites all of them: a
    /// recycled buffer that already held as many is handed over without writing to it;
    /// only bytes it never held are zeroed.
    pub fn take_exact(&self, len: usize) -> Vec<u8> {
        if len < MIN_CLASS {
            return vec![0; len];
        }
        let mut v = match Self::class_of(len) {
            Some((idx, size)) => self.lock()[idx]
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(size)),
            None => Vec::with_capacity(len),
        };
        // Truncates a longer one; zeroes only what a shorter one never held.
        v.resize(len, 0);
        v
    }

    /// Returns a buffer from [`BufPool::take_spare`] (any length; its
    /// capacity decides its class).
    pub fn recycle(&self, buf: Vec<u8>) {
        if let Some((idx, size)) = Self::class_of(buf.capacity()) {
            if size == buf.capacity() {
                let mut g = self.lock();
                if g[idx].len() < self.per_class {
                    g[idx].push(buf);
                }
            }
        }
    }

    /// Returns a buffer taken from this pool.
    pub fn put(&self, buf: Vec<u8>) {
        if let Some((idx, size)) = Self::class_of(buf.len()) {
            if size == buf.len() {
                let mut g = self.lock();
                if g[idx].len() < self.per_class {
                    g[idx].push(buf);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<Vec<u8>>>> {
        self.classes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for BufPool {
    fn default() -> Self {
        BufPool::new(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_reuse() {
        let p = BufPool::new(1);
        let a = p.take(1);
        assert_eq!(a.len(), 64 * 1024);
        let b = p.take(64 * 1024 + 1);
        assert_eq!(b.len(), 128 * 1024);
        let ptr = b.as_ptr();
        p.put(b);
        let c = p.take(100 * 1024);
        assert_eq!(c.as_ptr(), ptr, "reused");
        // Beyond the largest class: exact size, not pooled.
        let big = p.take(20 << 20);
        assert_eq!(big.len(), 20 << 20);
        p.put(big);
        // Odd lengths are not pooled; the per-class bound holds.
        p.put(vec![0; 1000]);
        p.put(vec![0; 64 * 1024]);
        p.put(vec![0; 64 * 1024]);
        assert_eq!(p.lock()[0].len(), 1);
    }

    #[test]
    fn exact_buffers_have_the_length_asked() {
        let p = BufPool::new(2);
        let mut a = p.take_exact(100 * 1024);
        assert_eq!((a.len(), a.capacity()), (100 * 1024, 128 * 1024));
        a.fill(7);
        let ptr = a.as_ptr();
        p.recycle(a);
        // The same memory, cut to a shorter length...
        let b = p.take_exact(90 * 1024);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 90 * 1024));
        p.recycle(b);
        // ...or grown: bytes it never held are zeros, the rest whatever it held.
        let c = p.take_exact(120 * 1024);
        assert_eq!((c.as_ptr(), c.len()), (ptr, 120 * 1024));
        assert!(c[90 * 1024..].iter().all(|&x| x == 0));
        // Beyond the largest class, or below the smallest: exact, not pooled.
        assert_eq!(p.take_exact(20 << 20).len(), 20 << 20);
        let small = p.take_exact(100);
        assert_eq!((small.len(), small.capacity()), (100, 100));
        assert_eq!(p.take_spare(100).capacity(), 100);
    }

    #[test]
    fn spare_buffers_come_back_by_capacity() {
        let p = BufPool::new(2);
        let mut a = p.take_spare(100 * 1024);
        assert_eq!((a.len(), a.capacity()), (0, 128 * 1024));
        a.extend_from_slice(&[7; 1000]);
        let ptr = a.as_ptr();
        p.recycle(a);
        // Reused empty, whatever it held.
        let b = p.take_spare(70 * 1024);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 0));
        p.recycle(b);
        // `take` hands it out at its full class length.
        let c = p.take(128 * 1024);
        assert_eq!((c.as_ptr(), c.len()), (ptr, 128 * 1024));
        // A buffer whose capacity is no class is not kept.
        p.recycle(Vec::with_capacity(1000));
        assert!(p.lock().iter().all(|c| c.is_empty()));
    }
}
