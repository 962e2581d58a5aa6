//! Offsets: which byte of the target each I/O addresses (`-r`, `-s`, `-si`, `-T`, `-B`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::profile::Access;
use crate::rng::Rng;

/// The region of a target that I/Os stay inside: `[base, base + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub base: u64,
    /// Bytes.
    pub len: u64,
}

/// Chooses offsets for one thread on one target.
#[derive(Debug)]
pub struct Offsets {
    region: Region,
    block: u64,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Random {
        align: u64,
        slots: u64,
    },
    Sequential {
        stride: u64,
        start: u64,
        next: u64,
    },
    Interlocked {
        stride: u64,
        slots: u64,
        shared: Arc<AtomicU64>,
    },
}

impl Offsets {
    /// Offsets for the thread of `rank` among those on the target. `shared` is the
    /// target's common counter for `-si`. The region must hold at least one block.
    pub fn new(
        access: Access,
        region: Region,
        block: u64,
        rank: u64,
        thread_stride: u64,
        shared: Arc<AtomicU64>,
    ) -> Offsets {
        let span = region.len.saturating_sub(block);
        let kind = match access {
            Access::Random { align } => Kind::Random {
                align,
                slots: span / align + 1,
            },
            Access::Sequential {
                stride,
                interlocked: true,
            } => Kind::Interlocked {
                stride,
                slots: span / stride + 1,
                shared,
            },
            Access::Sequential { stride, .. } => {
                // Start each thread `rank` thread strides in, wrapped into the region.
                let start = rank
                    .checked_mul(thread_stride)
                    .map(|s| s % (span + 1))
                    .unwrap_or(0);
                Kind::Sequential {
                    stride,
                    start,
                    next: start,
                }
            }
        };
        Offsets {
            region,
            block,
            kind,
        }
    }

    /// The next offset (absolute, in the target).
    #[inline]
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let rel = match &mut self.kind {
            Kind::Random { align, slots } => rng.below(*slots) * *align,
            Kind::Interlocked {
                stride,
                slots,
                shared,
            } => (shared.fetch_add(1, Ordering::Relaxed) % *slots) * *stride,
            Kind::Sequential {
                stride,
                start,
                next,
            } => {
                let mut off = *next;
                if off.saturating_add(self.block) > self.region.len {
                    // Past the end: wrap to the thread's starting point (or the base
                    // if that is past the end as well).
                    off = if start.saturating_add(self.block) <= self.region.len {
                        *start
                    } else {
                        0
                    };
                }
                *next = off.saturating_add(*stride);
                off
            }
        };
        self.region.base + rel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(len: u64) -> Region {
        Region { base: 1000, len }
    }

    #[test]
    fn random_offsets_are_aligned_and_inside() {
        let mut o = Offsets::new(
            Access::Random { align: 512 },
            region(64 * 1024),
            4096,
            0,
            0,
            Arc::default(),
        );
        let mut rng = Rng::new(1, 1);
        for _ in 0..10_000 {
            let off = o.next(&mut rng);
            assert!(off >= 1000 && off + 4096 <= 1000 + 64 * 1024);
            assert_eq!((off - 1000) % 512, 0);
        }
    }

    #[test]
    fn sequential_wraps_to_thread_start() {
        let seq = Access::Sequential {
            stride: 4096,
            interlocked: false,
        };
        let mut o = Offsets::new(seq, region(16384), 4096, 1, 8192, Arc::default());
        let mut rng = Rng::new(0, 0);
        let got: Vec<u64> = (0..4).map(|_| o.next(&mut rng) - 1000).collect();
        assert_eq!(got, vec![8192, 12288, 8192, 12288]);
    }

    #[test]
    fn interlocked_threads_share_one_sequence() {
        let seq = Access::Sequential {
            stride: 4096,
            interlocked: true,
        };
        let shared = Arc::new(AtomicU64::new(0));
        let mut a = Offsets::new(seq, region(12288), 4096, 0, 0, shared.clone());
        let mut b = Offsets::new(seq, region(12288), 4096, 1, 0, shared);
        let mut rng = Rng::new(0, 0);
        let got = [
            a.next(&mut rng),
            b.next(&mut rng),
            a.next(&mut rng),
            b.next(&mut rng),
        ];
        assert_eq!(got.map(|x| x - 1000), [0, 4096, 8192, 0]);
    }
}
