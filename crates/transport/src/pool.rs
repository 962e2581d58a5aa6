//! A small pool of I/O buffers, so steady-state READ and WRITE over RDMA
//! allocate (and zero) nothing per operation.

use std::sync::Mutex;

/// Smallest size class's payload.
const MIN_CLASS: usize = 64 * 1024;
/// Size classes: 64 KiB, 128 KiB, … 16 MiB of payload, each [`BufPool::HEADROOM`] more.
const CLASSES: usize = 9;

/// Buffers in size classes (a power of two from 64 KiB to 16 MiB, plus
/// [`BufPool::HEADROOM`]), a bounded number kept per class.
#[derive(Debug)]
pub struct BufPool {
    classes: Mutex<Vec<Vec<Vec<u8>>>>,
    per_class: usize,
}

impl BufPool {
    /// Bytes each class holds beyond its power of two, so that an I/O of a power-of-two
    /// size plus what travels with it fits the class of its size, not the next one (twice
    /// the memory, and with a verbs NIC twice the pinned registered memory). The largest
    /// such extra a caller asks for: a client WRITE's request, 4 (frame header) + 52
    /// (TRANSFORM_HEADER) + 64 (SMB2 header) + 48 (WRITE request) = 168 bytes, before its
    /// data; a READ response read or built whole (the server's `FileTail::materialize`
    /// and `seal`, the TCP frame reader) has 4 + 52 + 64 + 16 = 136 at most; a client
    /// READ over RDMA moves its data by up to 63 bytes (its place in a cache line). 256
    /// holds any of them with room to spare.
    pub const HEADROOM: usize = 256;

    /// A pool keeping at most `per_class` idle buffers of each size.
    pub fn new(per_class: usize) -> Self {
        BufPool {
            classes: Mutex::new(vec![Vec::new(); CLASSES]),
            per_class,
        }
    }

    /// The bytes a buffer of class `idx` holds.
    fn class_size(idx: usize) -> usize {
        (MIN_CLASS << idx) + Self::HEADROOM
    }

    /// The smallest class holding `len` bytes, and its size (`None` beyond the largest).
    fn class_of(len: usize) -> Option<(usize, usize)> {
        let payload = len.saturating_sub(Self::HEADROOM).max(MIN_CLASS);
        let idx = (payload.checked_next_power_of_two()? / MIN_CLASS).trailing_zeros() as usize;
        (idx < CLASSES).then(|| (idx, Self::class_size(idx)))
    }

    /// The class of a buffer that holds exactly `size` bytes (`None`: no class's size, so
    /// not kept: a buffer that grew or was made elsewhere).
    fn class_exactly(size: usize) -> Option<usize> {
        Self::class_of(size).and_then(|(idx, s)| (s == size).then_some(idx))
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
    /// capacity decides its class, and one that is no class's size is dropped).
    pub fn recycle(&self, buf: Vec<u8>) {
        if let Some(idx) = Self::class_exactly(buf.capacity()) {
            self.keep(idx, buf);
        }
    }

    /// Returns a buffer taken from this pool (its length decides its class, and one
    /// whose length or capacity is no class's size is dropped).
    pub fn put(&self, buf: Vec<u8>) {
        if let Some(idx) = Self::class_exactly(buf.len()) {
            if buf.capacity() == buf.len() {
                self.keep(idx, buf);
            }
        }
    }

    fn keep(&self, idx: usize, buf: Vec<u8>) {
        let mut g = self.lock();
        if g[idx].len() < self.per_class {
            g[idx].push(buf);
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

    const H: usize = BufPool::HEADROOM;
    const K64: usize = 64 * 1024;

    #[test]
    fn sizes_and_reuse() {
        let p = BufPool::new(1);
        let a = p.take(1);
        assert_eq!(a.len(), K64 + H);
        let b = p.take(K64 + H + 1);
        assert_eq!(b.len(), 2 * K64 + H);
        let ptr = b.as_ptr();
        p.put(b);
        let c = p.take(100 * 1024);
        assert_eq!(c.as_ptr(), ptr, "reused");
        // Beyond the largest class: exact size, not pooled.
        let big = p.take(20 << 20);
        assert_eq!(big.len(), 20 << 20);
        p.put(big);
        // Lengths of no class are not pooled (a bare power of two included); the
        // per-class bound holds.
        p.put(vec![0; 1000]);
        p.put(vec![0; K64]);
        p.put(vec![0; K64 + H]);
        p.put(vec![0; K64 + H]);
        assert_eq!(p.lock()[0].len(), 1);
        assert!(p.lock()[1..].iter().all(|c| c.is_empty()));
    }

    /// Every class holds its power of two and the headroom: 2^k and 2^k + HEADROOM
    /// take class k, one byte more the next.
    #[test]
    fn class_edges() {
        let p = BufPool::new(4);
        for k in 0..CLASSES {
            let pow = K64 << k;
            let size = pow + H;
            for len in [pow, pow + 1, pow + H] {
                assert_eq!(BufPool::class_of(len), Some((k, size)), "{len}");
                assert_eq!(p.take(len).len(), size, "take {len}");
                assert_eq!(p.take_spare(len).capacity(), size, "take_spare {len}");
                let e = p.take_exact(len);
                assert_eq!((e.len(), e.capacity()), (len, size), "take_exact {len}");
            }
            let over = pow + H + 1;
            if k + 1 < CLASSES {
                assert_eq!(BufPool::class_of(over), Some((k + 1, 2 * pow + H)));
                assert_eq!(p.take(over).len(), 2 * pow + H);
            } else {
                // Past the largest class: exactly what was asked, never kept.
                assert_eq!(BufPool::class_of(over), None);
                assert_eq!(p.take(over).len(), over);
                assert_eq!(p.take_spare(over).capacity(), over);
                p.recycle(p.take_spare(over));
                p.put(p.take(over));
                assert!(p.lock().iter().all(|c| c.is_empty()));
            }
            // Below a class's power of two but above the one before: still class k.
            if k > 0 {
                assert_eq!(BufPool::class_of(pow / 2 + H + 1), Some((k, size)));
            }
        }
    }

    /// A buffer comes back into the class it was taken from, by `put` or by `recycle`,
    /// and is handed out again for any length that class serves; one that grew (or
    /// was cut short) is not kept, since it is no class's size.
    #[test]
    fn buffers_come_back_to_their_own_class() {
        let p = BufPool::new(2);
        for k in 0..CLASSES {
            let pow = K64 << k;
            let size = pow + H;
            // Taken at each edge, returned both ways, reused at the other edge.
            for (take_len, reuse_len) in [(pow, pow + H), (pow + H, pow)] {
                let a = p.take(take_len);
                let ptr = a.as_ptr();
                p.put(a);
                let b = p.take_spare(reuse_len);
                assert_eq!((b.as_ptr(), b.capacity()), (ptr, size), "class {k}");
                p.recycle(b);
                let c = p.take_exact(reuse_len);
                assert_eq!((c.as_ptr(), c.len()), (ptr, reuse_len), "class {k}");
                p.recycle(c);
                let d = p.take(reuse_len);
                assert_eq!((d.as_ptr(), d.len()), (ptr, size), "class {k}");
                p.put(d);
            }
            assert_eq!(p.lock()[k].len(), 1);
            // A spare buffer filled past its class grows: not kept, anywhere.
            let mut g = p.take_spare(pow);
            let gp = g.as_ptr();
            g.resize(size + 1, 1);
            assert!(g.capacity() > size);
            p.recycle(g);
            assert_eq!(p.lock()[k].len(), 0, "its own buffer was taken");
            assert!(p.lock().iter().flatten().all(|b| b.as_ptr() != gp));
            // A buffer `put` back shorter than its class is not kept either.
            let mut s = p.take(pow);
            s.truncate(pow);
            p.put(s);
            assert!(p.lock().iter().all(|c| c.is_empty()), "class {k}");
        }
    }

    #[test]
    fn exact_buffers_have_the_length_asked() {
        let p = BufPool::new(2);
        let mut a = p.take_exact(100 * 1024);
        assert_eq!((a.len(), a.capacity()), (100 * 1024, 128 * 1024 + H));
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
        assert_eq!((a.len(), a.capacity()), (0, 128 * 1024 + H));
        a.extend_from_slice(&[7; 1000]);
        let ptr = a.as_ptr();
        p.recycle(a);
        // Reused empty, whatever it held.
        let b = p.take_spare(70 * 1024);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 0));
        p.recycle(b);
        // `take` hands it out at its full class length.
        let c = p.take(128 * 1024);
        assert_eq!((c.as_ptr(), c.len()), (ptr, 128 * 1024 + H));
        // A buffer whose capacity is no class is not kept.
        p.recycle(Vec::with_capacity(1000));
        p.recycle(Vec::with_capacity(128 * 1024));
        assert!(p.lock().iter().all(|c| c.is_empty()));
    }
}
