//! Requests counted by NTSTATUS for one command: a small table of relaxed
//! atomics that fills as statuses are first seen (no lock, no allocation).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Distinct statuses counted separately per command; later ones are counted
/// together as "other" (a client cannot grow the table).
pub const STATUS_SLOTS: usize = 16;

/// Counts of one command's responses by status.
pub struct StatusCounts {
    /// `status + 1` of each claimed slot, 0 while free. Slots are claimed in
    /// order and never freed, so a status is found before any free slot.
    keys: [AtomicU64; STATUS_SLOTS],
    counts: [AtomicU64; STATUS_SLOTS],
    other: AtomicU64,
}

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts {
            keys: [const { AtomicU64::new(0) }; STATUS_SLOTS],
            counts: [const { AtomicU64::new(0) }; STATUS_SLOTS],
            other: AtomicU64::new(0),
        }
    }
}

impl StatusCounts {
    /// Counts one response with `status`.
    pub fn add(&self, status: u32) {
        let key = u64::from(status) + 1;
        for (k, c) in self.keys.iter().zip(&self.counts) {
            let mut cur = k.load(Relaxed);
            if cur == 0 {
                // Claim the first free slot; whoever lost the race re-reads it:
                // the winner may have claimed it for this same status.
                cur = match k.compare_exchange(0, key, Relaxed, Relaxed) {
                    Ok(_) => key,
                    Err(actual) => actual,
                };
            }
            if cur == key {
                c.fetch_add(1, Relaxed);
                return;
            }
        }
        self.other.fetch_add(1, Relaxed);
    }

    /// `(status, count)` for every status seen, and the count of the others.
    pub fn snapshot(&self) -> (Vec<(u32, u64)>, u64) {
        let mut out: Vec<(u32, u64)> = Vec::new();
        for (k, c) in self.keys.iter().zip(&self.counts) {
            let key = k.load(Relaxed);
            let Some(status) = key.checked_sub(1).and_then(|s| u32::try_from(s).ok()) else {
                continue;
            };
            let n = c.load(Relaxed);
            match out.iter_mut().find(|(s, _)| *s == status) {
                Some(e) => e.1 += n,
                None => out.push((status, n)),
            }
        }
        (out, self.other.load(Relaxed))
    }

    /// Every response counted.
    pub fn total(&self) -> u64 {
        let (seen, other) = self.snapshot();
        seen.iter().map(|(_, n)| n).sum::<u64>() + other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_by_status_and_overflows_into_other() {
        let s = StatusCounts::default();
        s.add(0);
        s.add(0);
        s.add(0xC000_0022);
        for st in 1..=(STATUS_SLOTS as u32 + 3) {
            s.add(0x8000_0000 + st);
        }
        let (seen, other) = s.snapshot();
        assert_eq!(seen.len(), STATUS_SLOTS);
        assert_eq!(seen[0], (0, 2));
        assert_eq!(seen[1], (0xC000_0022, 1));
        // 2 slots taken above, 14 more statuses fit, 5 go to other.
        assert_eq!(other, STATUS_SLOTS as u64 + 3 - 14);
        assert_eq!(s.total(), 3 + STATUS_SLOTS as u64 + 3);
    }

    #[test]
    fn concurrent_adds_lose_nothing_and_never_duplicate() {
        let s = Arc::new(StatusCounts::default());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u32 {
                        s.add((i + t) % 5);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (seen, other) = s.snapshot();
        assert_eq!(other, 0);
        assert_eq!(seen.len(), 5, "{seen:?}");
        assert_eq!(seen.iter().map(|x| x.1).sum::<u64>(), 40_000);
        for (_, n) in seen {
            assert_eq!(n, 8_000);
        }
    }
}
