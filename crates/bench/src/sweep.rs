//! `smbx bench sweep`: one run per point of a matrix of I/O sizes × threads × outstanding
//! I/Os × targets, written as `results.csv`, `results.json` and SVG charts.
//!
//! ```text
//! smbx bench sweep -b4K,64K,512K -o1,8,32 -t1,2 -r -d5 -W1 --out DIR TARGET...
//! ```
//!
//! `-b`, `-o` and `-t` take comma-separated lists; every other `smbx bench` flag applies to
//! every point unchanged. Each point drives one target (so targets are compared, not
//! summed); `-c` creates each target once, before its first point.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::args::{parse, ArgError};
use crate::error::BenchError;
use crate::profile::{Access, Profile};
use crate::report::Report;
use crate::svg::{self, Axis, Chart, Figure, Scale, Series};

/// The JSON schema identifier of `results.json`.
pub const SCHEMA: &str = "smbx-bench-sweep/1";

/// The usage text for `smbx bench sweep --help`.
pub const USAGE: &str = "\
usage: smbx bench sweep -b<size>[,<size>...] -o<n>[,<n>...] -t<n>[,<n>...] [bench flags]
                        --out DIR TARGET...
  Runs `smbx bench` once per point of the matrix I/O size × threads × outstanding × target
  (in that nesting order, targets innermost) and writes into DIR:
    results.csv    one row per point (figures of the measured phase, with the growth of
                   the TCP counters of the bench's network namespace)
    results.json   the same rows, each with the point's full smbx-bench/1 report
    latency-vs-size_t<T>_o<O>.svg      p50 and p99 against I/O size, a line per target
    vs-threads_b<B>_o<O>.svg           IOPS and p50/p99 against threads
    vs-outstanding_b<B>_t<T>.svg       IOPS and p50/p99 against outstanding I/Os
    index.html     the charts on one page
  -b, -o, -t     comma-separated lists (default: bench's single default)
  --out DIR      the output directory (created; existing results are overwritten)
  --labels A,B   names for the targets in charts and the label column, one per target
                 (default: the path; for smb:// URLs host:port/share/path)
  -c<size>       creates each target once, before its first point
  Every other `smbx bench` flag (-r, -s, -w, -d, -W, -S, -g, --engine, --server-pid ...)
  applies to every point; -R and -F are refused (the sweep chooses the outputs, and -t is
  the threads axis). Charts are drawn only along axes with two or more values.
";

/// A parsed sweep: the profiles to run, in order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The output directory.
    pub out: PathBuf,
    /// I/O sizes, in bytes, as listed.
    pub sizes: Vec<u64>,
    /// Outstanding I/Os per thread, as listed.
    pub outstanding: Vec<u32>,
    /// Threads, as listed.
    pub threads: Vec<u32>,
    /// Targets as given (passwords removed where shown).
    pub targets: Vec<String>,
    /// The targets' names in charts and the `label` column (`--labels`, or a short form).
    pub labels: Vec<String>,
    /// One validated profile per matrix point.
    pub points: Vec<Point>,
}

/// One matrix point.
#[derive(Debug, Clone)]
pub struct Point {
    /// The target's index in [`Plan::targets`].
    pub target: usize,
    /// The profile run at this point (one target).
    pub profile: Profile,
    /// Its command line, as `smbx bench` would take it (passwords removed).
    pub command_line: String,
}

/// Figures of one point: a row of `results.csv` and of `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Target as given (password removed).
    pub target: String,
    /// The target's label (`--labels`, or its short form).
    pub label: String,
    /// Bytes per I/O.
    pub block_size: u64,
    /// Threads on the target.
    pub threads: u32,
    /// Outstanding I/Os per thread.
    pub outstanding: u32,
    /// "random" or "sequential".
    pub access: &'static str,
    /// Percentage of writes.
    pub write_percent: u8,
    /// Measured seconds, actual.
    pub duration_s: f64,
    /// I/Os completed while measuring.
    pub io_count: u64,
    /// Reads completed.
    pub read_count: u64,
    /// Writes completed.
    pub write_count: u64,
    /// Bytes moved (= io_count × block_size).
    pub bytes: u64,
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bytes_per_sec: f64,
    /// MiB per second.
    pub mib_per_sec: f64,
    /// Mean latency, µs.
    pub latency_mean_us: Option<f64>,
    /// Median latency, µs.
    pub latency_p50_us: Option<f64>,
    /// 90th percentile, µs.
    pub latency_p90_us: Option<f64>,
    /// 99th percentile, µs.
    pub latency_p99_us: Option<f64>,
    /// 99.9th percentile, µs.
    pub latency_p99_9_us: Option<f64>,
    /// Largest latency, µs.
    pub latency_max_us: Option<f64>,
    /// Standard deviation of IOPS over the -D intervals.
    pub iops_stddev: f64,
    /// Coefficient of variation of IOPS, percent.
    pub iops_cv_percent: f64,
    /// This process's CPU, % of the machine.
    pub process_cpu_percent: f64,
    /// The machine's busy CPU, %.
    pub system_cpu_percent: f64,
    /// The `--server-pid` process's CPU, % of the machine.
    pub server_cpu_percent: Option<f64>,
    /// Machine-wide cycles per byte.
    pub cycles_per_byte: Option<f64>,
    /// This process's cycles per byte.
    pub process_cycles_per_byte: Option<f64>,
    /// The server's cycles per byte.
    pub server_cycles_per_byte: Option<f64>,
    /// TCP segments sent in the bench's network namespace while measuring.
    pub tcp_out_segs: Option<u64>,
    /// TCP segments retransmitted.
    pub tcp_retrans_segs: Option<u64>,
    /// TCP tail loss probes.
    pub tcp_loss_probes: Option<u64>,
    /// TCP retransmission timeouts.
    pub tcp_timeouts: Option<u64>,
    /// TCP segments queued out of order.
    pub tcp_ofo_queue: Option<u64>,
    /// Times a TCP receiver wanted to advertise a zero window.
    pub tcp_zero_window_adv: Option<u64>,
    /// TCP segments dropped for a full receive queue.
    pub tcp_rcvq_drop: Option<u64>,
    /// TCP receive queues pruned.
    pub tcp_prune_called: Option<u64>,
    /// TCP segments collapsed.
    pub tcp_rcv_collapsed: Option<u64>,
}

impl Row {
    /// The row of a point's report.
    pub fn of(target: &str, label: &str, p: &Profile, r: &Report) -> Row {
        let lat = r.io.latency_us.as_ref();
        Row {
            target: target.to_string(),
            label: label.to_string(),
            block_size: p.block_size,
            threads: p.threads_per_target,
            outstanding: p.outstanding,
            access: match p.access {
                Access::Random { .. } => "random",
                Access::Sequential { .. } => "sequential",
            },
            write_percent: p.write_percent,
            duration_s: r.duration_s,
            io_count: r.io.io_count,
            read_count: r.io.read_count,
            write_count: r.io.write_count,
            bytes: r.io.bytes,
            iops: r.io.iops,
            bytes_per_sec: r.io.bytes_per_sec,
            mib_per_sec: r.io.mib_per_sec,
            latency_mean_us: lat.map(|l| l.mean),
            latency_p50_us: lat.map(|l| l.p50),
            latency_p90_us: lat.map(|l| l.p90),
            latency_p99_us: lat.map(|l| l.p99),
            latency_p99_9_us: lat.map(|l| l.p99_9),
            latency_max_us: lat.map(|l| l.max),
            iops_stddev: r.io.iops_stddev,
            iops_cv_percent: r.io.iops_cv_percent,
            process_cpu_percent: r.cpu.process_percent,
            system_cpu_percent: r.cpu.system_percent,
            server_cpu_percent: r.cpu.server.as_ref().map(|s| s.percent),
            cycles_per_byte: r.cycles.machine,
            process_cycles_per_byte: r.cycles.process,
            server_cycles_per_byte: r.cycles.server,
            tcp_out_segs: r.tcp.map(|t| t.out_segs),
            tcp_retrans_segs: r.tcp.map(|t| t.retrans_segs),
            tcp_loss_probes: r.tcp.map(|t| t.loss_probes),
            tcp_timeouts: r.tcp.map(|t| t.timeouts),
            tcp_ofo_queue: r.tcp.map(|t| t.ofo_queue),
            tcp_zero_window_adv: r.tcp.map(|t| t.zero_window_adv),
            tcp_rcvq_drop: r.tcp.map(|t| t.rcvq_drop),
            tcp_prune_called: r.tcp.map(|t| t.prune_called),
            tcp_rcv_collapsed: r.tcp.map(|t| t.rcv_collapsed),
        }
    }
}

/// The CSV columns, in order (the [`Row`] fields).
pub const CSV_COLUMNS: [&str; 38] = [
    "target",
    "label",
    "block_size",
    "threads",
    "outstanding",
    "access",
    "write_percent",
    "duration_s",
    "io_count",
    "read_count",
    "write_count",
    "bytes",
    "iops",
    "bytes_per_sec",
    "mib_per_sec",
    "latency_mean_us",
    "latency_p50_us",
    "latency_p90_us",
    "latency_p99_us",
    "latency_p99_9_us",
    "latency_max_us",
    "iops_stddev",
    "iops_cv_percent",
    "process_cpu_percent",
    "system_cpu_percent",
    "server_cpu_percent",
    "cycles_per_byte",
    "process_cycles_per_byte",
    "server_cycles_per_byte",
    "tcp_out_segs",
    "tcp_retrans_segs",
    "tcp_loss_probes",
    "tcp_timeouts",
    "tcp_ofo_queue",
    "tcp_zero_window_adv",
    "tcp_rcvq_drop",
    "tcp_prune_called",
    "tcp_rcv_collapsed",
];

fn list<T>(
    v: &str,
    flag: &str,
    seen: &mut Option<Vec<String>>,
    check: impl Fn(&str) -> Result<T, ArgError>,
) -> Result<(), ArgError> {
    if seen.is_some() {
        return Err(ArgError(format!(
            "{flag} given twice (give one comma-separated list)"
        )));
    }
    let items: Vec<String> = v.split(',').map(str::to_string).collect();
    for (i, item) in items.iter().enumerate() {
        if item.is_empty() {
            return Err(ArgError(format!("{flag}: empty value in list {v:?}")));
        }
        check(item)?;
        if items[..i].contains(item) {
            return Err(ArgError(format!("{flag}: {item} is listed twice")));
        }
    }
    *seen = Some(items);
    Ok(())
}

/// Parses `smbx bench sweep` arguments and validates every point up front.
pub fn plan(args: &[String]) -> Result<Plan, ArgError> {
    let mut out: Option<PathBuf> = None;
    let mut labels: Option<Vec<String>> = None;
    let (mut bs, mut os, mut ts) = (None, None, None);
    let mut create: Option<String> = None;
    let mut common: Vec<String> = Vec::new();
    let mut targets: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--out" {
            let v = it
                .next()
                .ok_or_else(|| ArgError("--out needs a directory".into()))?;
            if out.replace(PathBuf::from(v)).is_some() {
                return Err(ArgError("--out given twice".into()));
            }
        } else if let Some(v) = a.strip_prefix("--out=") {
            if out.replace(PathBuf::from(v)).is_some() {
                return Err(ArgError("--out given twice".into()));
            }
        } else if a == "--labels" || a.starts_with("--labels=") {
            let v = match a.strip_prefix("--labels=") {
                Some(v) => v.to_string(),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| ArgError("--labels needs a comma-separated list".into()))?,
            };
            let v: Vec<String> = v.split(',').map(str::to_string).collect();
            if labels.replace(v).is_some() {
                return Err(ArgError("--labels given twice".into()));
            }
        } else if let Some(long) = a.strip_prefix("--") {
            common.push(a.clone());
            // Long bench options take a value, glued or next, but for a few.
            if !long.contains('=') && !crate::args::LONG_WITHOUT_VALUE.contains(&long) {
                if let Some(v) = it.next() {
                    common.push(v.clone());
                }
            }
        } else if let Some(v) = a.strip_prefix("-b") {
            list(v, "-b", &mut bs, |s| {
                parse(&["-b".to_string() + s, "x".into()]).map(|_| ())
            })?;
        } else if let Some(v) = a.strip_prefix("-o") {
            list(v, "-o", &mut os, |s| {
                parse(&["-o".to_string() + s, "x".into()]).map(|_| ())
            })?;
        } else if let Some(v) = a.strip_prefix("-t") {
            list(v, "-t", &mut ts, |s| {
                parse(&["-t".to_string() + s, "x".into()]).map(|_| ())
            })?;
        } else if a.starts_with("-R") {
            return Err(ArgError(
                "sweep: -R does not apply (the sweep writes results.csv, results.json and SVG \
                 charts into --out)"
                    .into(),
            ));
        } else if a.starts_with("-F") {
            return Err(ArgError(
                "sweep: -F does not apply (-t<list> is the threads axis; each point drives one \
                 target)"
                    .into(),
            ));
        } else if a.starts_with("-c") && a.len() > 2 {
            if create.replace(a.clone()).is_some() {
                return Err(ArgError("-c given twice".into()));
            }
        } else if a.starts_with('-') && a.len() > 1 {
            common.push(a.clone());
        } else {
            targets.push(a.clone());
        }
    }
    let out = out.ok_or_else(|| ArgError("sweep: --out DIR is required".into()))?;
    if targets.is_empty() {
        return Err(ArgError(
            "no target given: name a file path or an smb:// URL".into(),
        ));
    }
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].contains(t) {
            return Err(ArgError(format!(
                "target {} is given twice",
                shown_target(t)
            )));
        }
    }
    let labels = match labels {
        Some(l) if l.len() != targets.len() => {
            return Err(ArgError(format!(
                "--labels names {} target(s), but {} are given",
                l.len(),
                targets.len()
            )))
        }
        Some(l) => {
            for (i, x) in l.iter().enumerate() {
                if x.is_empty() || l[..i].contains(x) {
                    return Err(ArgError(format!("--labels: {x:?} is empty or given twice")));
                }
            }
            l
        }
        None => targets.iter().map(|t| short_label(t)).collect(),
    };
    let one = |v: Option<Vec<String>>| v.unwrap_or_else(|| vec![String::new()]);
    let (bs, os, ts) = (one(bs), one(os), one(ts));
    let shown: Vec<String> = targets.iter().map(|t| shown_target(t)).collect();
    let mut points = Vec::new();
    let mut created = vec![false; targets.len()];
    for b in &bs {
        for t in &ts {
            for o in &os {
                for (ti, target) in targets.iter().enumerate() {
                    let mut a = common.clone();
                    for (flag, v) in [("-b", b), ("-t", t), ("-o", o)] {
                        if !v.is_empty() {
                            a.push(format!("{flag}{v}"));
                        }
                    }
                    if let Some(c) = &create {
                        if !created[ti] {
                            a.push(c.clone());
                            created[ti] = true;
                        }
                    }
                    let profile = parse(&[a.clone(), vec![target.clone()]].concat())?;
                    a.push(shown[ti].clone());
                    points.push(Point {
                        target: ti,
                        profile,
                        command_line: redact_args(&format!("smbx bench {}", a.join(" "))),
                    });
                }
            }
        }
    }
    let distinct = |f: &dyn Fn(&Profile) -> u64| {
        let mut v: Vec<u64> = Vec::new();
        for p in &points {
            let x = f(&p.profile);
            if !v.contains(&x) {
                v.push(x);
            }
        }
        v
    };
    let sizes = distinct(&|p| p.block_size);
    let outstanding = distinct(&|p| u64::from(p.outstanding))
        .into_iter()
        .map(|x| x as u32)
        .collect();
    let threads = distinct(&|p| u64::from(p.threads_per_target))
        .into_iter()
        .map(|x| x as u32)
        .collect();
    if sizes.len() != bs.len() {
        return Err(ArgError(
            "-b: two sizes in the list are the same size".into(),
        ));
    }
    Ok(Plan {
        out,
        sizes,
        outstanding,
        threads,
        targets: shown,
        labels,
        points,
    })
}

/// A target's default label: a local path as given; an smb:// URL without scheme and user.
fn short_label(t: &str) -> String {
    match t
        .strip_prefix("smb://")
        .or_else(|| t.strip_prefix("SMB://"))
    {
        Some(rest) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => rest[at + 1..].to_string(),
                None => rest.to_string(),
            }
        }
        None => t.to_string(),
    }
}

fn shown_target(t: &str) -> String {
    if t.starts_with("smb://") || t.starts_with("SMB://") {
        crate::target::smb::redact(t)
    } else {
        t.to_string()
    }
}

fn redact_args(s: &str) -> String {
    s.split(' ').map(shown_target).collect::<Vec<_>>().join(" ")
}

/// `results.json`: the matrix and, per point, its row and full report.
#[derive(Serialize)]
struct Results<'a> {
    schema: &'static str,
    version: &'static str,
    command_line: &'a str,
    axes: Axes<'a>,
    points: Vec<JsonPoint<'a>>,
}

#[derive(Serialize)]
struct Axes<'a> {
    block_sizes: &'a [u64],
    threads: &'a [u32],
    outstanding: &'a [u32],
    targets: &'a [String],
    labels: &'a [String],
}

#[derive(Serialize)]
struct JsonPoint<'a> {
    #[serde(flatten)]
    row: &'a Row,
    command_line: &'a str,
    report: &'a Report,
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_default()
}

/// A counter's CSV field (empty when it was not read).
fn count(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        String::new()
    }
}

/// `results.csv`: a header line ([`CSV_COLUMNS`]) and one line per row.
pub fn csv(rows: &[Row]) -> String {
    let mut out = CSV_COLUMNS.join(",");
    out.push('\n');
    for r in rows {
        let fields = [
            csv_field(&r.target),
            csv_field(&r.label),
            r.block_size.to_string(),
            r.threads.to_string(),
            r.outstanding.to_string(),
            r.access.to_string(),
            r.write_percent.to_string(),
            num(r.duration_s),
            r.io_count.to_string(),
            r.read_count.to_string(),
            r.write_count.to_string(),
            r.bytes.to_string(),
            num(r.iops),
            num(r.bytes_per_sec),
            num(r.mib_per_sec),
            opt(r.latency_mean_us),
            opt(r.latency_p50_us),
            opt(r.latency_p90_us),
            opt(r.latency_p99_us),
            opt(r.latency_p99_9_us),
            opt(r.latency_max_us),
            num(r.iops_stddev),
            num(r.iops_cv_percent),
            num(r.process_cpu_percent),
            num(r.system_cpu_percent),
            opt(r.server_cpu_percent),
            opt(r.cycles_per_byte),
            opt(r.process_cycles_per_byte),
            opt(r.server_cycles_per_byte),
            count(r.tcp_out_segs),
            count(r.tcp_retrans_segs),
            count(r.tcp_loss_probes),
            count(r.tcp_timeouts),
            count(r.tcp_ofo_queue),
            count(r.tcp_zero_window_adv),
            count(r.tcp_rcvq_drop),
            count(r.tcp_prune_called),
            count(r.tcp_rcv_collapsed),
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// An x axis whose ticks are the swept values: log when they span 8× or more.
fn value_axis(label: &str, values: &[u64], size: bool) -> Axis {
    let lo = values.iter().copied().min().unwrap_or(1).max(1);
    let hi = values.iter().copied().max().unwrap_or(1);
    Axis {
        label: label.to_string(),
        scale: if size || hi / lo >= 8 {
            Scale::Log
        } else {
            Scale::Linear
        },
        ticks: Some(
            values
                .iter()
                .map(|&v| {
                    let l = if size {
                        svg::short_size(v)
                    } else {
                        v.to_string()
                    };
                    (v as f64, l)
                })
                .collect(),
        ),
    }
}

fn latency_axis() -> Axis {
    Axis {
        label: "latency (µs)".into(),
        scale: Scale::Log,
        ticks: None,
    }
}

/// Picks a latency figure from a row.
type Stat = fn(&Row) -> Option<f64>;

/// p50 (solid) and p99 (dashed) series per target, x taken by `x` from the rows `keep`s.
fn latency_series(
    plan: &Plan,
    rows: &[Row],
    keep: &dyn Fn(&Row) -> bool,
    x: &dyn Fn(&Row) -> f64,
) -> Vec<Series> {
    let mut out = Vec::new();
    for (ti, t) in plan.targets.iter().enumerate() {
        let label = &plan.labels[ti];
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.target == t && keep(r)).collect();
        let stats: [(&str, bool, Stat); 2] = [
            ("p50", false, |r| r.latency_p50_us),
            ("p99", true, |r| r.latency_p99_us),
        ];
        for (name, dashed, get) in stats {
            out.push(Series {
                name: format!("{label} {name}"),
                points: mine
                    .iter()
                    .filter_map(|r| get(r).map(|y| (x(r), y)))
                    .collect(),
                color: ti,
                dashed,
            });
        }
    }
    out
}

fn iops_series(
    plan: &Plan,
    rows: &[Row],
    keep: &dyn Fn(&Row) -> bool,
    x: &dyn Fn(&Row) -> f64,
) -> Vec<Series> {
    plan.targets
        .iter()
        .enumerate()
        .map(|(ti, t)| Series {
            name: plan.labels[ti].clone(),
            points: rows
                .iter()
                .filter(|r| &r.target == t && keep(r))
                .map(|r| (x(r), r.iops))
                .collect(),
            color: ti,
            dashed: false,
        })
        .collect()
}

/// The charts of a sweep: (file name, figure).
pub fn charts(plan: &Plan, rows: &[Row]) -> Vec<(String, Figure)> {
    let mut out = Vec::new();
    let threads: Vec<u64> = plan.threads.iter().map(|&t| u64::from(t)).collect();
    let outs: Vec<u64> = plan.outstanding.iter().map(|&o| u64::from(o)).collect();
    let iops_axis = || Axis {
        label: "IOPS".into(),
        scale: Scale::Linear,
        ticks: None,
    };
    if plan.sizes.len() >= 2 {
        for &t in &plan.threads {
            for &o in &plan.outstanding {
                let keep = |r: &Row| r.threads == t && r.outstanding == o;
                out.push((
                    format!("latency-vs-size_t{t}_o{o}.svg"),
                    Figure {
                        title: format!("Latency against I/O size ({t} thread(s), {o} outstanding)"),
                        charts: vec![Chart {
                            title: "p50 (solid) and p99 (dashed)".into(),
                            x: value_axis("I/O size (bytes, log scale)", &plan.sizes, true),
                            y: latency_axis(),
                            series: latency_series(plan, rows, &keep, &|r| r.block_size as f64),
                        }],
                    },
                ));
            }
        }
    }
    for (axis_name, values, file) in [
        ("threads", &threads, "threads"),
        ("outstanding I/Os per thread", &outs, "outstanding"),
    ] {
        if values.len() < 2 {
            continue;
        }
        let by_threads = file == "threads";
        let others: Vec<u64> = if by_threads {
            outs.clone()
        } else {
            threads.clone()
        };
        for &b in &plan.sizes {
            for &other in &others {
                let keep = move |r: &Row| {
                    r.block_size == b
                        && if by_threads {
                            u64::from(r.outstanding) == other
                        } else {
                            u64::from(r.threads) == other
                        }
                };
                let x = move |r: &Row| {
                    if by_threads {
                        f64::from(r.threads)
                    } else {
                        f64::from(r.outstanding)
                    }
                };
                let (tag, what) = if by_threads {
                    (format!("o{other}"), format!("{other} outstanding"))
                } else {
                    (format!("t{other}"), format!("{other} thread(s)"))
                };
                let size = svg::short_size(b);
                out.push((
                    format!("vs-{file}_b{size}_{tag}.svg"),
                    Figure {
                        title: format!("IOPS and latency against {axis_name} ({size}, {what})"),
                        charts: vec![
                            Chart {
                                title: "IOPS".into(),
                                x: value_axis(axis_name, values, false),
                                y: iops_axis(),
                                series: iops_series(plan, rows, &keep, &x),
                            },
                            Chart {
                                title: "latency: p50 (solid) and p99 (dashed)".into(),
                                x: value_axis(axis_name, values, false),
                                y: latency_axis(),
                                series: latency_series(plan, rows, &keep, &x),
                            },
                        ],
                    },
                ));
            }
        }
    }
    out
}

fn write(dir: &Path, name: &str, body: &str) -> Result<(), BenchError> {
    let p = dir.join(name);
    std::fs::write(&p, body).map_err(|e| BenchError::io(format!("writing {}", p.display()), e))
}

/// A fixed-width table of the rows, for stdout.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<32} {:>6} {:>3} {:>4} {:>11} {:>9} {:>10} {:>10} {:>8}",
        "label", "size", "t", "o", "IOPS", "MiB/s", "p50 µs", "p99 µs", "cyc/B"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<32} {:>6} {:>3} {:>4} {:>11.1} {:>9.2} {:>10.1} {:>10.1} {:>8}",
            svg::ellipsize(&r.label, 32),
            svg::short_size(r.block_size),
            r.threads,
            r.outstanding,
            r.iops,
            r.mib_per_sec,
            r.latency_p50_us.unwrap_or(f64::NAN),
            r.latency_p99_us.unwrap_or(f64::NAN),
            r.cycles_per_byte
                .map(|c| format!("{c:.2}"))
                .unwrap_or_else(|| "-".into()),
        );
    }
    s
}

/// Runs every point of a plan and writes its outputs; returns the rows.
pub fn run(plan: &Plan, command_line: &str) -> Result<Vec<Row>, BenchError> {
    std::fs::create_dir_all(&plan.out)
        .map_err(|e| BenchError::io(format!("creating {}", plan.out.display()), e))?;
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    let n = plan.points.len();
    for (i, pt) in plan.points.iter().enumerate() {
        let target = &plan.targets[pt.target];
        let p = &pt.profile;
        eprintln!(
            "sweep [{}/{n}] {target} -b{} -t{} -o{} ...",
            i + 1,
            svg::short_size(p.block_size),
            p.threads_per_target,
            p.outstanding
        );
        let report = crate::run(p, pt.command_line.clone())?;
        let row = Row::of(target, &plan.labels[pt.target], p, &report);
        eprintln!(
            "sweep [{}/{n}]   {:.1} IOPS, {:.2} MiB/s, p50 {:.1} µs, p99 {:.1} µs",
            i + 1,
            row.iops,
            row.mib_per_sec,
            row.latency_p50_us.unwrap_or(f64::NAN),
            row.latency_p99_us.unwrap_or(f64::NAN)
        );
        rows.push(row);
        reports.push(report);
    }
    write(&plan.out, "results.csv", &csv(&rows))?;
    let results = Results {
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        command_line,
        axes: Axes {
            block_sizes: &plan.sizes,
            threads: &plan.threads,
            outstanding: &plan.outstanding,
            targets: &plan.targets,
            labels: &plan.labels,
        },
        points: rows
            .iter()
            .zip(&reports)
            .zip(&plan.points)
            .map(|((row, report), pt)| JsonPoint {
                row,
                command_line: &pt.command_line,
                report,
            })
            .collect(),
    };
    let json = serde_json::to_string_pretty(&results)
        .map_err(|e| BenchError::Other(format!("results.json: {e}")))?;
    write(&plan.out, "results.json", &(json + "\n"))?;
    let figures = charts(plan, &rows);
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>smbx bench sweep</title></head><body>\n",
    );
    let _ = writeln!(
        html,
        "<h1>smbx bench sweep</h1>\n<p><code>{}</code></p>\n<p><a href=\"results.csv\">results.csv</a> · <a href=\"results.json\">results.json</a></p>",
        svg::escape(command_line)
    );
    for (name, fig) in &figures {
        write(&plan.out, name, &svg::render(fig))?;
        let _ = writeln!(
            html,
            "<p><img src=\"{}\" alt=\"{}\"></p>",
            svg::escape(name),
            svg::escape(&fig.title)
        );
    }
    html.push_str("</body></html>\n");
    write(&plan.out, "index.html", &html)?;
    Ok(rows)
}

/// `smbx bench sweep ARGS...`: plans, runs, writes the files, and returns the summary
/// table (with the list of files written) for stdout.
pub fn run_cli(args: &[String]) -> Result<String, BenchError> {
    if args.iter().any(|a| a == "--help" || a == "-?") {
        return Ok(USAGE.to_string());
    }
    let plan = plan(args)?;
    let command_line = redact_args(&format!("smbx bench sweep {}", args.join(" ")));
    let rows = run(&plan, &command_line)?;
    let mut s = table(&rows);
    let _ = writeln!(
        s,
        "\nwrote {}/results.csv, results.json, index.html and {} chart(s)",
        plan.out.display(),
        charts(&plan, &rows).len()
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_str(s: &str) -> Result<Plan, ArgError> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        plan(&v)
    }

    #[test]
    fn the_matrix_in_order() {
        let p = plan_str("-b4K,64K -o1,8,32 -t1,2 -r -d5 -W1 -c1M --out d a b").unwrap();
        assert_eq!(p.points.len(), 2 * 3 * 2 * 2);
        assert_eq!(p.sizes, vec![4096, 65536]);
        assert_eq!(p.outstanding, vec![1, 8, 32]);
        assert_eq!(p.threads, vec![1, 2]);
        let first = &p.points[0].profile;
        assert_eq!(first.targets, vec!["a".to_string()]);
        assert_eq!(
            (
                first.block_size,
                first.threads_per_target,
                first.outstanding
            ),
            (4096, 1, 1)
        );
        assert!(matches!(first.access, Access::Random { align: 4096 }));
        assert_eq!((first.duration_s, first.warmup_s), (5, 1));
        // Targets innermost, then outstanding, threads, sizes.
        assert_eq!(p.points[1].profile.targets, vec!["b".to_string()]);
        assert_eq!(p.points[2].profile.outstanding, 8);
        assert_eq!(p.points[6].profile.threads_per_target, 2);
        assert_eq!(p.points[12].profile.block_size, 65536);
        // -c only before each target's first point.
        let created: Vec<usize> = p
            .points
            .iter()
            .enumerate()
            .filter(|(_, pt)| pt.profile.create_size.is_some())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(created, vec![0, 1]);
        // Random alignment follows each point's size.
        assert!(matches!(
            p.points[12].profile.access,
            Access::Random { align: 65536 }
        ));
    }

    #[test]
    fn defaults_and_long_options() {
        let p = plan_str("--out=d --server-pid 7 --progress --engine psync f").unwrap();
        assert_eq!(p.points.len(), 1);
        let pr = &p.points[0].profile;
        assert_eq!(
            (pr.server_pid, pr.progress, pr.block_size),
            (Some(7), true, 65536)
        );
        assert_eq!(p.targets, vec!["f".to_string()]);
        // Options without a value leave the target after them alone.
        let p = plan_str("--out=d --kerberos --shared-connection --sign --os-threads 1 f").unwrap();
        let pr = &p.points[0].profile;
        assert!(pr.kerberos && pr.shared_connection);
        assert_eq!(pr.os_threads, Some(1));
        assert_eq!(p.targets, vec!["f".to_string()]);
    }

    #[test]
    fn refusals() {
        for (args, needle) in [
            ("-b4K f", "--out"),
            ("-b4K --out d", "no target"),
            ("-b4K,4K --out d f", "listed twice"),
            ("-b4K,4096 --out d f", "same size"),
            ("-b4K -b8K --out d f", "given twice"),
            ("-o1,,2 --out d f", "empty value"),
            ("-o0 --out d f", "outside"),
            ("-Rjson --out d f", "-R does not apply"),
            ("-F2 --out d f", "-F does not apply"),
            ("-r -s --out d f", "contradict"),
            ("-bX --out d f", "size"),
        ] {
            let e = plan_str(args).expect_err(args);
            assert!(e.0.contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn passwords_stay_out_of_command_lines() {
        let p = plan_str("--out d smb://u:secret@h/s/f").unwrap();
        assert!(!p.points[0].command_line.contains("secret"));
        assert!(!p.targets[0].contains("secret"));
        assert_eq!(p.labels, vec!["h/s/f".to_string()]);
    }

    #[test]
    fn labels() {
        let p = plan_str("--out d --labels x,y /tmp/a smb://h:1/s/b").unwrap();
        assert_eq!(p.labels, vec!["x".to_string(), "y".to_string()]);
        let p = plan_str("--out d /tmp/a smb://u@h:1/s/b").unwrap();
        assert_eq!(p.labels, vec!["/tmp/a".to_string(), "h:1/s/b".to_string()]);
        for (args, needle) in [
            ("--out d --labels x a b", "names 1 target"),
            ("--out d --labels x,x a b", "given twice"),
            ("--out d a a", "given twice"),
        ] {
            let e = plan_str(args).expect_err(args);
            assert!(e.0.contains(needle), "{args}: {e}");
        }
    }

    fn row(target: &str, b: u64, t: u32, o: u32) -> Row {
        Row {
            target: target.into(),
            label: format!("L{target}"),
            block_size: b,
            threads: t,
            outstanding: o,
            access: "random",
            write_percent: 0,
            duration_s: 1.0,
            io_count: 10,
            read_count: 10,
            write_count: 0,
            bytes: 10 * b,
            iops: 10.0 * f64::from(t * o),
            bytes_per_sec: 10.0 * b as f64,
            mib_per_sec: 0.0,
            latency_mean_us: Some(5.0),
            latency_p50_us: Some(4.0 + b as f64 / 1000.0),
            latency_p90_us: Some(8.0),
            latency_p99_us: Some(9.0 + b as f64 / 1000.0),
            latency_p99_9_us: Some(10.0),
            latency_max_us: Some(11.0),
            iops_stddev: 0.0,
            iops_cv_percent: 0.0,
            process_cpu_percent: 1.0,
            system_cpu_percent: 2.0,
            server_cpu_percent: None,
            cycles_per_byte: None,
            process_cycles_per_byte: None,
            server_cycles_per_byte: None,
            tcp_out_segs: Some(100),
            tcp_retrans_segs: Some(1),
            tcp_loss_probes: None,
            tcp_timeouts: None,
            tcp_ofo_queue: None,
            tcp_zero_window_adv: None,
            tcp_rcvq_drop: None,
            tcp_prune_called: None,
            tcp_rcv_collapsed: None,
        }
    }

    #[test]
    fn chart_set_and_series() {
        let p = plan_str("-b4K,64K,1M -o1,32 -t1,2,4 --out d a smb://h/s/b").unwrap();
        let mut rows = Vec::new();
        for pt in &p.points {
            let pr = &pt.profile;
            rows.push(row(
                &p.targets[pt.target],
                pr.block_size,
                pr.threads_per_target,
                pr.outstanding,
            ));
        }
        let figs = charts(&p, &rows);
        // latency-vs-size per (t, o); vs-threads per (b, o); vs-outstanding per (b, t).
        assert_eq!(figs.len(), 3 * 2 + 3 * 2 + 3 * 3);
        let (name, lat) = &figs[0];
        assert_eq!(name, "latency-vs-size_t1_o1.svg");
        assert_eq!(lat.charts[0].series.len(), 4); // 2 targets × (p50, p99)
        assert_eq!(lat.charts[0].series[0].points.len(), 3); // 3 sizes
        assert_eq!(lat.charts[0].x.scale, Scale::Log);
        let (name, thr) = &figs[6];
        assert_eq!(name, "vs-threads_b4K_o1.svg");
        assert_eq!(thr.charts[0].series.len(), 2);
        assert_eq!(
            thr.charts[0].series[1].points,
            vec![(1.0, 10.0), (2.0, 20.0), (4.0, 40.0)]
        );
        assert_eq!(thr.charts[1].series.len(), 4);
        let (name, _) = &figs[12];
        assert_eq!(name, "vs-outstanding_b4K_t1.svg");
        let csv = csv(&rows);
        assert_eq!(csv.lines().count(), 1 + rows.len());
        assert!(csv
            .lines()
            .all(|l| l.split(',').count() == CSV_COLUMNS.len()));
    }

    #[test]
    fn csv_quotes_awkward_targets() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
