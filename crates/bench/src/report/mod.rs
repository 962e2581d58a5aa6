//! The report: one structure built from a run, serialized as JSON (schema in the crate
//! README) and rendered as diskspd-style text or XML.

pub mod text;
pub mod xml;

use serde::Serialize;

use crate::cpu::CpuUsage;
use crate::engine::RunResult;
use crate::profile::Profile;
use crate::stats::{interval_stats, percentile_ns, IoStats, LatencySummary};
use crate::tcp_stats::TcpCounters;

/// The JSON schema identifier.
pub const SCHEMA: &str = "smbx-bench/1";

/// I/O figures for a thread, a target, a thread on a target, or the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct IoSummary {
    /// Reads + writes completed in the measured phase.
    pub io_count: u64,
    /// Reads completed.
    pub read_count: u64,
    /// Writes completed.
    pub write_count: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// I/Os per second.
    pub iops: f64,
    /// Reads per second.
    pub read_iops: f64,
    /// Writes per second.
    pub write_iops: f64,
    /// Bytes per second.
    pub bytes_per_sec: f64,
    /// Read bytes per second.
    pub read_bytes_per_sec: f64,
    /// Written bytes per second.
    pub write_bytes_per_sec: f64,
    /// MiB per second.
    pub mib_per_sec: f64,
    /// Latency of all I/Os, µs (null without I/Os).
    pub latency_us: Option<LatencySummary>,
    /// Latency of reads, µs.
    pub read_latency_us: Option<LatencySummary>,
    /// Latency of writes, µs.
    pub write_latency_us: Option<LatencySummary>,
    /// Standard deviation of IOPS across complete `-D` intervals.
    pub iops_stddev: f64,
    /// Same, reads only.
    pub read_iops_stddev: f64,
    /// Same, writes only.
    pub write_iops_stddev: f64,
    /// Coefficient of variation of IOPS, percent.
    pub iops_cv_percent: f64,
    /// IOPS in each `-D` interval (the last may be partial).
    pub iops_intervals: Vec<f64>,
    /// Read IOPS in each interval (for the XML report).
    #[serde(skip)]
    pub read_iops_intervals: Vec<f64>,
    /// Write IOPS in each interval (for the XML report).
    #[serde(skip)]
    pub write_iops_intervals: Vec<f64>,
}

impl IoSummary {
    /// Figures from merged statistics over `secs` seconds.
    pub fn of(s: &IoStats, secs: f64, interval_ms: u64, complete: usize) -> IoSummary {
        let secs = secs.max(1e-9);
        let (rc, wc) = (s.read_count(), s.write_count());
        let bytes = s.read_bytes + s.write_bytes;
        let total: Vec<u64> = s
            .read_intervals
            .iter()
            .zip(&s.write_intervals)
            .map(|(r, w)| r + w)
            .collect();
        let t = interval_stats(&total, interval_ms, complete);
        let r = interval_stats(&s.read_intervals, interval_ms, complete);
        let w = interval_stats(&s.write_intervals, interval_ms, complete);
        IoSummary {
            io_count: rc + wc,
            read_count: rc,
            write_count: wc,
            bytes,
            read_bytes: s.read_bytes,
            write_bytes: s.write_bytes,
            iops: (rc + wc) as f64 / secs,
            read_iops: rc as f64 / secs,
            write_iops: wc as f64 / secs,
            bytes_per_sec: bytes as f64 / secs,
            read_bytes_per_sec: s.read_bytes as f64 / secs,
            write_bytes_per_sec: s.write_bytes as f64 / secs,
            mib_per_sec: bytes as f64 / secs / 1048576.0,
            latency_us: LatencySummary::of(&s.total()),
            read_latency_us: LatencySummary::of(&s.read),
            write_latency_us: LatencySummary::of(&s.write),
            iops_stddev: t.stddev,
            read_iops_stddev: r.stddev,
            write_iops_stddev: w.stddev,
            iops_cv_percent: t.cv_percent,
            iops_intervals: t.iops,
            read_iops_intervals: r.iops,
            write_iops_intervals: w.iops,
        }
    }
}

/// One row of the full percentile table (µs; `None` where there were no such I/Os).
#[derive(Debug, Clone, Serialize)]
pub struct PercentileRow {
    /// Percentile, 0 (min) to 100 (max).
    pub percentile: f64,
    /// Reads.
    pub read: Option<f64>,
    /// Writes.
    pub write: Option<f64>,
    /// All.
    pub total: Option<f64>,
}

/// A target's totals.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// Position on the command line, from 0.
    pub index: usize,
    /// Path or URL (no password).
    pub path: String,
    /// "io_uring", "psync" or "smb".
    pub engine: String,
    /// File size in bytes.
    pub file_size: u64,
    /// First byte used.
    pub region_base: u64,
    /// Bytes used.
    pub region_len: u64,
    /// Threads that drove it.
    pub threads: Vec<usize>,
    /// Figures.
    #[serde(flatten)]
    pub io: IoSummary,
    /// smb:// targets: what each channel of the session carried (multichannel;
    /// since the target was opened, warm-up included). Absent for local files.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<ChannelReport>,
}

/// One channel of an SMB session.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelReport {
    /// The server address (ip:port), if known.
    pub address: Option<String>,
    /// Advertised link speed of the server's interface (bit/s).
    pub link_speed: u64,
    /// Requests completed on the channel (I/Os and the rest).
    pub ios: u64,
    /// Bytes sent plus bytes received.
    pub bytes: u64,
    /// Requests the channel carried again after the channel they were first
    /// sent on failed (multichannel failover).
    pub replayed: u64,
    /// Times the channel was re-established after failing.
    pub reconnects: u64,
    /// False while the channel is down (failed, not yet re-established).
    pub live: bool,
}

/// One thread's figures on one target.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadTargetReport {
    /// Target index.
    pub target: usize,
    /// Target path.
    pub path: String,
    /// I/Os kept in flight.
    pub outstanding: usize,
    /// Figures.
    #[serde(flatten)]
    pub io: IoSummary,
}

/// One thread's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    /// Thread number.
    pub id: usize,
    /// Over all its targets.
    #[serde(flatten)]
    pub io: IoSummary,
    /// Per target.
    pub targets: Vec<ThreadTargetReport>,
}

/// The machine.
#[derive(Debug, Clone, Serialize)]
pub struct SystemInfo {
    /// Host name.
    pub hostname: String,
    /// Kernel release.
    pub kernel: String,
    /// CPUs.
    pub cpus: usize,
    /// Nominal MHz, if known.
    pub cpu_mhz: Option<f64>,
    /// Start of the run, seconds since the Unix epoch.
    pub start_time_unix: f64,
}

/// Cycles per byte: busy CPU seconds × nominal clock ÷ bytes moved.
#[derive(Debug, Clone, Serialize)]
pub struct CyclesPerByte {
    /// Whole machine.
    pub machine: Option<f64>,
    /// The bench process.
    pub process: Option<f64>,
    /// The `--server-pid` process.
    pub server: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// smbx version.
    pub version: &'static str,
    /// The arguments as given (passwords removed).
    pub command_line: String,
    /// The machine.
    pub system: SystemInfo,
    /// The parsed profile.
    pub profile: Profile,
    /// Measured seconds.
    pub duration_s: f64,
    /// Totals over all threads and targets.
    #[serde(flatten)]
    pub io: IoSummary,
    /// CPU use during the measured phase.
    pub cpu: CpuUsage,
    /// Machine-wide cycles per byte (same as `cycles.machine`).
    pub cycles_per_byte: Option<f64>,
    /// Cycles per byte, machine and per process.
    pub cycles: CyclesPerByte,
    /// Growth of the TCP counters of the bench's network namespace while measuring
    /// (every socket there, the server's too when it shares the namespace).
    pub tcp: Option<TcpCounters>,
    /// Per target.
    pub targets: Vec<TargetReport>,
    /// Per thread (each with per-target figures).
    pub threads: Vec<ThreadReport>,
    /// min, 1..99, 99.9 … 99.9999999, max (for text and XML; not in JSON).
    #[serde(skip)]
    pub percentile_table: Vec<PercentileRow>,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn table(s: &IoStats) -> Vec<PercentileRow> {
    let total = s.total();
    let mut pcts = vec![0.0];
    pcts.extend((1..=99).map(f64::from));
    pcts.extend([
        99.9, 99.99, 99.999, 99.9999, 99.99999, 99.999999, 99.9999999, 100.0,
    ]);
    let at = |h: &hdrhistogram::Histogram<u64>, pct: f64| {
        (!h.is_empty()).then(|| {
            let ns = match pct {
                0.0 => h.min(),
                100.0 => h.max(),
                _ => percentile_ns(h, pct),
            };
            ns as f64 / 1000.0
        })
    };
    pcts.into_iter()
        .map(|p| PercentileRow {
            percentile: p,
            read: at(&s.read, p),
            write: at(&s.write, p),
            total: at(&total, p),
        })
        .collect()
}

impl Report {
    /// Builds the report of a run.
    pub fn build(p: &Profile, command_line: String, r: &RunResult) -> Report {
        let secs = r.measured_s;
        let (ims, complete) = (p.iops_interval_ms, r.complete_intervals);
        let mut all = IoStats::new(r.intervals);
        let mut per_target: Vec<IoStats> = r
            .targets
            .iter()
            .map(|_| IoStats::new(r.intervals))
            .collect();
        let mut target_threads: Vec<Vec<usize>> = vec![Vec::new(); r.targets.len()];
        let mut threads = Vec::new();
        for t in &r.threads {
            let mut tt = IoStats::new(r.intervals);
            let mut targets = Vec::new();
            for x in &t.targets {
                tt.merge(&x.stats);
                if let Some(agg) = per_target.get_mut(x.target) {
                    agg.merge(&x.stats);
                    target_threads[x.target].push(t.id);
                }
                targets.push(ThreadTargetReport {
                    target: x.target,
                    path: r
                        .targets
                        .get(x.target)
                        .map(|i| i.name.clone())
                        .unwrap_or_default(),
                    outstanding: x.depth,
                    io: IoSummary::of(&x.stats, secs, ims, complete),
                });
            }
            all.merge(&tt);
            threads.push(ThreadReport {
                id: t.id,
                io: IoSummary::of(&tt, secs, ims, complete),
                targets,
            });
        }
        let io = IoSummary::of(&all, secs, ims, complete);
        let targets = r
            .targets
            .iter()
            .enumerate()
            .map(|(i, info)| TargetReport {
                index: i,
                path: info.name.clone(),
                engine: info.engine.to_string(),
                file_size: info.size,
                region_base: info.region.base,
                region_len: info.region.len,
                threads: target_threads[i].clone(),
                io: IoSummary::of(&per_target[i], secs, ims, complete),
                channels: info
                    .channels
                    .iter()
                    .map(|c| ChannelReport {
                        address: c.addr.map(|a| a.to_string()),
                        link_speed: c.link_speed,
                        ios: c.requests,
                        bytes: c
                            .bytes_sent
                            .saturating_add(c.bytes_received)
                            .saturating_add(c.rdma_sent)
                            .saturating_add(c.rdma_received),
                        replayed: c.replayed,
                        reconnects: c.reconnects,
                        live: c.live,
                    })
                    .collect(),
            })
            .collect();
        let cpu = &r.cpu;
        let cycles = CyclesPerByte {
            machine: cpu.cycles_per_byte(cpu.system_busy_seconds, io.bytes),
            process: cpu.cycles_per_byte(cpu.process.cpu_seconds, io.bytes),
            server: cpu
                .server
                .as_ref()
                .and_then(|s| cpu.cycles_per_byte(s.cpu_seconds, io.bytes)),
        };
        Report {
            schema: SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            command_line,
            system: SystemInfo {
                hostname: read_trim("/proc/sys/kernel/hostname"),
                kernel: read_trim("/proc/sys/kernel/osrelease"),
                cpus: cpu.cpus,
                cpu_mhz: cpu.mhz,
                start_time_unix: r.start_unix,
            },
            profile: Profile {
                targets: p
                    .targets
                    .iter()
                    .map(|t| crate::target::smb::redact(t))
                    .collect(),
                ..p.clone()
            },
            duration_s: secs,
            percentile_table: table(&all),
            io,
            cpu: cpu.clone(),
            cycles_per_byte: cycles.machine,
            cycles,
            tcp: r.tcp,
            targets,
            threads,
        }
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
