//! Latency histograms with fixed buckets: one relaxed atomic add per bucket hit
//! and one for the sum, no lock and no allocation.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets in nanoseconds, 10 µs to 10 s (an observation
/// above the last falls in the `+Inf` bucket).
pub const BOUNDS_NS: [u64; 19] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Buckets, the `+Inf` one included.
pub const BUCKETS: usize = BOUNDS_NS.len() + 1;

/// A histogram of durations.
pub struct Histogram {
    /// Observations per bucket (not cumulative): `counts[i]` holds those above
    /// `BOUNDS_NS[i - 1]` and at most `BOUNDS_NS[i]`.
    counts: [AtomicU64; BUCKETS],
    /// Sum of all observations in nanoseconds.
    sum_ns: AtomicU64,
}

/// A histogram read at one moment, in Prometheus' terms.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations at most that)` for every finite
    /// bound, cumulative.
    pub buckets: Vec<(f64, u64)>,
    /// Every observation (the `+Inf` bucket).
    pub count: u64,
    /// Sum of the observations in seconds.
    pub sum_seconds: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [const { AtomicU64::new(0) }; BUCKETS],
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // The first bucket whose bound is at least `ns` (`+Inf` when none is).
        let i = BOUNDS_NS.partition_point(|&b| b < ns);
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Relaxed);
        }
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    /// Observations so far (all buckets).
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// The cumulative view Prometheus expects. Buckets are read one by one while
    /// others may add, so the snapshot is of some moment during the read; the
    /// count is derived from the buckets read, so `+Inf` always equals it.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0u64;
        let mut buckets = Vec::with_capacity(BOUNDS_NS.len());
        for (bound, c) in BOUNDS_NS.iter().zip(&self.counts) {
            cumulative = cumulative.saturating_add(c.load(Relaxed));
            buckets.push((*bound as f64 / 1e9, cumulative));
        }
        let inf = self.counts.last().map_or(0, |c| c.load(Relaxed));
        HistogramSnapshot {
            buckets,
            count: cumulative.saturating_add(inf),
            sum_seconds: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_bounds_inclusive() {
        let h = Histogram::default();
        h.observe(Duration::from_nanos(10_000)); // exactly the first bound
        h.observe(Duration::from_nanos(10_001)); // the second bucket
        h.observe(Duration::from_millis(3)); // <= 5 ms
        h.observe(Duration::from_secs(60)); // +Inf only
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.buckets.len(), BOUNDS_NS.len());
        assert_eq!(s.buckets[0], (0.00001, 1));
        assert_eq!(s.buckets[1], (0.000025, 2));
        let at = |secs: f64| s.buckets.iter().find(|b| b.0 == secs).unwrap().1;
        assert_eq!(at(0.0025), 2);
        assert_eq!(at(0.005), 3);
        assert_eq!(at(10.0), 3);
        let want = 60.0 + 0.003 + 0.000020001;
        assert!((s.sum_seconds - want).abs() < 1e-9, "{}", s.sum_seconds);
        // A duration beyond u64 nanoseconds is clamped, not a panic.
        h.observe(Duration::MAX);
        assert_eq!(h.count(), 5);
    }
}
