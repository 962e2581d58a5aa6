//! Per-thread, per-target statistics: HDR latency histograms (nanoseconds), byte counts and
//! I/Os per `-D` interval; merging; percentile and IOPS-variation summaries.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Longest latency a histogram holds exactly (one hour, in ns); longer ones saturate.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// The percentiles reported besides min and max: (percent, JSON key, text label).
pub const PERCENTILES: [(f64, &str, &str); 13] = [
    (25.0, "p25", "25th"),
    (50.0, "p50", "50th"),
    (75.0, "p75", "75th"),
    (90.0, "p90", "90th"),
    (95.0, "p95", "95th"),
    (99.0, "p99", "99th"),
    (99.9, "p99_9", "3-nines"),
    (99.99, "p99_99", "4-nines"),
    (99.999, "p99_999", "5-nines"),
    (99.9999, "p99_9999", "6-nines"),
    (99.99999, "p99_99999", "7-nines"),
    (99.999999, "p99_999999", "8-nines"),
    (99.9999999, "p99_9999999", "9-nines"),
];

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// A read.
    Read,
    /// A write.
    Write,
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("static histogram bounds are valid")
}

/// What one thread measured on one target (or a merge of several).
#[derive(Debug, Clone)]
pub struct IoStats {
    /// Read latencies, ns.
    pub read: Histogram<u64>,
    /// Write latencies, ns.
    pub write: Histogram<u64>,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Reads completed in each `-D` interval.
    pub read_intervals: Vec<u64>,
    /// Writes completed in each `-D` interval.
    pub write_intervals: Vec<u64>,
}

impl IoStats {
    /// Empty statistics with `intervals` IOPS buckets.
    pub fn new(intervals: usize) -> IoStats {
        IoStats {
            read: new_hist(),
            write: new_hist(),
            read_bytes: 0,
            write_bytes: 0,
            read_intervals: vec![0; intervals],
            write_intervals: vec![0; intervals],
        }
    }

    /// Records one I/O of `bytes` that took `ns` and completed in `interval` (clamped).
    #[inline]
    pub fn record(&mut self, kind: IoKind, ns: u64, bytes: u64, interval: usize) {
        let (h, b, iv) = match kind {
            IoKind::Read => (
                &mut self.read,
                &mut self.read_bytes,
                &mut self.read_intervals,
            ),
            IoKind::Write => (
                &mut self.write,
                &mut self.write_bytes,
                &mut self.write_intervals,
            ),
        };
        h.saturating_record(ns.max(1));
        *b += bytes;
        if let Some(last) = iv.len().checked_sub(1) {
            iv[interval.min(last)] += 1;
        }
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &IoStats) {
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.read.add(&other.read);
        let _ = self.write.add(&other.write);
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
        merge_counts(&mut self.read_intervals, &other.read_intervals);
        merge_counts(&mut self.write_intervals, &other.write_intervals);
    }

    /// Reads completed.
    pub fn read_count(&self) -> u64 {
        self.read.len()
    }
    /// Writes completed.
    pub fn write_count(&self) -> u64 {
        self.write.len()
    }
    /// Read and write latencies together.
    pub fn total(&self) -> Histogram<u64> {
        let mut t = self.read.clone();
        let _ = t.add(&self.write);
        t
    }
}

fn merge_counts(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// Latency figures in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// 99.99th percentile.
    pub p99_99: f64,
    /// 99.999th percentile.
    pub p99_999: f64,
    /// 99.9999th percentile.
    pub p99_9999: f64,
    /// 99.99999th percentile.
    pub p99_99999: f64,
    /// 99.999999th percentile.
    pub p99_999999: f64,
    /// 99.9999999th percentile.
    pub p99_9999999: f64,
    /// Largest.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
}

/// A percentile of `h` in ns, kept within [min, max] (HDR buckets round upward).
pub fn percentile_ns(h: &Histogram<u64>, pct: f64) -> u64 {
    if h.is_empty() {
        return 0;
    }
    h.value_at_quantile(pct / 100.0).clamp(h.min(), h.max())
}

impl LatencySummary {
    /// The summary of `h`, or `None` when it holds no samples.
    pub fn of(h: &Histogram<u64>) -> Option<LatencySummary> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let p = |pct: f64| us(percentile_ns(h, pct));
        let v: Vec<f64> = PERCENTILES.iter().map(|&(pct, _, _)| p(pct)).collect();
        Some(LatencySummary {
            count: h.len(),
            min: us(h.min()),
            p25: v[0],
            p50: v[1],
            p75: v[2],
            p90: v[3],
            p95: v[4],
            p99: v[5],
            p99_9: v[6],
            p99_99: v[7],
            p99_999: v[8],
            p99_9999: v[9],
            p99_99999: v[10],
            p99_999999: v[11],
            p99_9999999: v[12],
            max: us(h.max()),
            mean: h.mean() / 1000.0,
            stddev: h.stdev() / 1000.0,
        })
    }

    /// min, the percentiles in order, then max.
    pub fn ordered(&self) -> [f64; 15] {
        [
            self.min,
            self.p25,
            self.p50,
            self.p75,
            self.p90,
            self.p95,
            self.p99,
            self.p99_9,
            self.p99_99,
            self.p99_999,
            self.p99_9999,
            self.p99_99999,
            self.p99_999999,
            self.p99_9999999,
            self.max,
        ]
    }
}

/// IOPS variation over the `-D` intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalStats {
    /// IOPS in each interval.
    pub iops: Vec<f64>,
    /// Population standard deviation of the complete intervals.
    pub stddev: f64,
    /// stddev ÷ mean × 100 (0 when the mean is 0).
    pub cv_percent: f64,
}

/// IOPS statistics from counts per interval; only the first `complete` intervals count
/// towards the deviation (a trailing partial interval would skew it).
pub fn interval_stats(counts: &[u64], interval_ms: u64, complete: usize) -> IntervalStats {
    let per_s = 1000.0 / interval_ms.max(1) as f64;
    let iops: Vec<f64> = counts.iter().map(|&c| c as f64 * per_s).collect();
    let used = &iops[..complete.clamp(1, iops.len().max(1)).min(iops.len())];
    let (stddev, mean) = if used.is_empty() {
        (0.0, 0.0)
    } else {
        let n = used.len() as f64;
        let mean = used.iter().sum::<f64>() / n;
        let var = used.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (var.sqrt(), mean)
    };
    IntervalStats {
        iops,
        stddev,
        cv_percent: if mean > 0.0 {
            stddev / mean * 100.0
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_and_merge() {
        let mut a = IoStats::new(3);
        let mut b = IoStats::new(3);
        for i in 0..1000u64 {
            a.record(IoKind::Read, 1000 + i, 4096, (i % 3) as usize);
            b.record(IoKind::Write, 50_000 + 10 * i, 8192, 9);
        }
        a.merge(&b);
        assert_eq!(a.read_count(), 1000);
        assert_eq!(a.write_count(), 1000);
        assert_eq!(a.read_bytes, 1000 * 4096);
        assert_eq!(a.write_bytes, 1000 * 8192);
        assert_eq!(a.read_intervals.iter().sum::<u64>(), 1000);
        assert_eq!(
            a.write_intervals,
            vec![0, 0, 1000],
            "late I/Os land in the last bucket"
        );
        let t = a.total();
        assert_eq!(t.len(), 2000);
        let s = LatencySummary::of(&t).unwrap();
        assert!(s.ordered().windows(2).all(|w| w[0] <= w[1]), "{s:?}");
        assert!((s.min - 1.0).abs() < 0.01, "{}", s.min);
        assert!((s.max - 59.99).abs() < 0.1, "{}", s.max);
        // Half the samples are reads near 1.5 µs, half writes near 55 µs.
        assert!(s.p25 < 2.1 && s.p75 > 50.0, "{s:?}");
        assert!(s.min <= s.mean && s.mean <= s.max);
    }

    #[test]
    fn sub_microsecond_resolution() {
        let mut s = IoStats::new(1);
        s.record(IoKind::Read, 250, 1, 0);
        s.record(IoKind::Read, 750, 1, 0);
        let l = LatencySummary::of(&s.read).unwrap();
        assert!(
            (l.min - 0.25).abs() < 0.001 && (l.max - 0.75).abs() < 0.001,
            "{l:?}"
        );
    }

    #[test]
    fn empty_has_no_summary() {
        assert!(LatencySummary::of(&IoStats::new(1).read).is_none());
    }

    #[test]
    fn interval_deviation() {
        let s = interval_stats(&[10, 20, 30, 1], 500, 3);
        assert_eq!(s.iops, vec![20.0, 40.0, 60.0, 2.0]);
        // mean 40, deviations ±20, 0: population stddev sqrt(800/3).
        assert!((s.stddev - (800.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert!((s.cv_percent - s.stddev / 40.0 * 100.0).abs() < 1e-9);
        let z = interval_stats(&[0, 0], 1000, 2);
        assert_eq!((z.stddev, z.cv_percent), (0.0, 0.0));
        let e = interval_stats(&[], 1000, 0);
        assert!(e.iops.is_empty());
    }
}
