//! The text report, laid out like diskspd's.

use std::fmt::Write;

use super::{IoSummary, Report};
use crate::profile::{Access, Throttle, WriteBuffer};
use crate::stats::PERCENTILES;

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the Unix epoch.
pub fn utc(secs: f64) -> String {
    let s = secs.max(0.0) as i64;
    let (days, rem) = (s.div_euclid(86_400), s.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn size_label(bytes: u64) -> String {
    const U: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, unit) in U {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

const RULE: &str = "-------------------------------------------------------------------------------------------------------------------------";

fn io_row(out: &mut String, label: &str, io: &IoSummary, pick: Pick, file: &str) {
    let (bytes, count, iops, lat, sd) = match pick {
        Pick::Total => (
            io.bytes,
            io.io_count,
            io.iops,
            &io.latency_us,
            io.iops_stddev,
        ),
        Pick::Read => (
            io.read_bytes,
            io.read_count,
            io.read_iops,
            &io.read_latency_us,
            io.read_iops_stddev,
        ),
        Pick::Write => (
            io.write_bytes,
            io.write_count,
            io.write_iops,
            &io.write_latency_us,
            io.write_iops_stddev,
        ),
    };
    let secs = if io.iops > 0.0 {
        io.io_count as f64 / io.iops
    } else {
        0.0
    };
    let mibs = if secs > 0.0 {
        bytes as f64 / secs / 1048576.0
    } else {
        0.0
    };
    let (avg, lsd) = lat
        .as_ref()
        .map(|l| {
            (
                format!("{:.4}", l.mean / 1000.0),
                format!("{:.4}", l.stddev / 1000.0),
            )
        })
        .unwrap_or(("N/A".into(), "N/A".into()));
    let _ = writeln!(
        out,
        "{label:>6} | {bytes:>15} | {count:>12} | {mibs:>10.2} | {iops:>10.2} | {avg:>8} | {sd:>10.2} | {lsd:>9} | {file}"
    );
}

#[derive(Clone, Copy)]
enum Pick {
    Total,
    Read,
    Write,
}

/// Renders the report.
pub fn render(r: &Report) -> String {
    let p = &r.profile;
    let mut o = String::new();
    let _ = writeln!(o, "\nCommand Line: {}\n", r.command_line);
    o.push_str("Input parameters:\n\n\ttimespan:   1\n\t-------------\n");
    let _ = writeln!(o, "\tduration: {}s", p.duration_s);
    let _ = writeln!(o, "\twarm up time: {}s", p.warmup_s);
    let _ = writeln!(o, "\tcool down time: {}s", p.cooldown_s);
    o.push_str("\tmeasuring latency\n");
    let _ = writeln!(
        o,
        "\tgathering IOPS at intervals of {}ms",
        p.iops_interval_ms
    );
    let _ = writeln!(o, "\trandom seed: {}", p.seed);
    if let Some(cpus) = &p.affinity {
        let _ = writeln!(
            o,
            "\taffinity: OS threads pinned round-robin over CPUs {}",
            crate::affinity::cpu_list_label(cpus)
        );
    }
    if let Some(list) = &p.socket_options {
        let _ = writeln!(o, "\tsocket options: {list}");
    }
    if let Some(us) = p.spin_us {
        let _ = writeln!(o, "\tlone requests spin up to {us}us for their responses");
    }
    for t in &r.targets {
        let _ = writeln!(o, "\tpath: '{}'", t.path);
        let _ = writeln!(o, "\t\tengine: {}", t.engine);
        if let Some(c) = p.create_size {
            let _ = writeln!(o, "\t\tcreated with {} of random data", size_label(c));
        }
        o.push_str(if p.no_cache {
            "\t\tsoftware cache disabled\n"
        } else {
            "\t\tusing software cache\n"
        });
        o.push_str(if p.write_through {
            "\t\thardware write cache disabled, writethrough on\n"
        } else {
            "\t\tusing hardware write cache, writethrough off\n"
        });
        match p.write_buffer {
            WriteBuffer::Pattern => {}
            WriteBuffer::Zero => o.push_str("\t\tzeroing write buffers\n"),
            WriteBuffer::RandomPerIo => o.push_str("\t\tfresh random data for every write\n"),
            WriteBuffer::RandomBuffer(s) => {
                let _ = writeln!(o, "\t\twrite buffer size: {s}, filled with random data");
            }
        }
        match p.write_percent {
            0 => o.push_str("\t\tperforming read test\n"),
            100 => o.push_str("\t\tperforming write test\n"),
            w => {
                let _ = writeln!(
                    o,
                    "\t\tperforming mix test (read/write ratio: {}/{w})",
                    100 - w
                );
            }
        }
        let _ = writeln!(o, "\t\tblock size: {}", p.block_size);
        match p.access {
            Access::Random { align } => {
                let _ = writeln!(o, "\t\tusing random I/O (alignment: {align})");
            }
            Access::Sequential {
                stride,
                interlocked,
            } => {
                let kind = if interlocked {
                    "interlocked sequential"
                } else {
                    "sequential"
                };
                let _ = writeln!(o, "\t\tusing {kind} I/O (stride: {stride})");
            }
        }
        let _ = writeln!(
            o,
            "\t\tnumber of outstanding I/O operations: {}",
            p.outstanding
        );
        if t.region_base > 0 || t.region_len < t.file_size {
            let _ = writeln!(o, "\t\tbase file offset: {}", t.region_base);
            let _ = writeln!(o, "\t\tmax file size: {}", t.region_base + t.region_len);
        }
        let _ = writeln!(o, "\t\tthread stride size: {}", p.thread_stride);
        if let Some(th) = p.throttle {
            let _ = match th {
                Throttle::BytesPerMs(b) => writeln!(o, "\t\tthroughput rate-limited to {b} B/ms"),
                Throttle::Iops(n) => writeln!(o, "\t\tthroughput rate-limited to {n} IOPS"),
            };
        }
        let _ = writeln!(o, "\t\tthreads per file: {}", p.threads_on_target());
        for (i, c) in t.channels.iter().enumerate() {
            let _ = writeln!(
                o,
                "\t\tchannel {i}: {} ({} Mbit/s){}: {} I/Os, {} bytes, {} replayed, {} reconnects",
                c.address.as_deref().unwrap_or("?"),
                c.link_speed / 1_000_000,
                if c.live { "" } else { ", failed" },
                c.ios,
                c.bytes,
                c.replayed,
                c.reconnects
            );
        }
    }
    o.push_str("\nSystem information:\n\n");
    let _ = writeln!(o, "\tcomputer name: {}", r.system.hostname);
    let _ = writeln!(o, "\tkernel: {}", r.system.kernel);
    let _ = writeln!(o, "\tstart time: {}", utc(r.system.start_time_unix));
    o.push_str("\nResults for timespan 1:\n");
    o.push_str(
        "*******************************************************************************\n\n",
    );
    let _ = writeln!(o, "actual test time:\t{:.2}s", r.duration_s);
    let _ = writeln!(o, "thread count:\t\t{}", r.threads.len());
    let _ = writeln!(o, "proc count:\t\t{}\n", r.cpu.cpus);
    o.push_str(
        "CPU |  Usage |  User  |  Kernel |  Idle\n-------------------------------------------\n",
    );
    for c in &r.cpu.per_cpu {
        let _ = writeln!(
            o,
            "{:>4}| {:>6.2}%| {:>6.2}%|  {:>6.2}%| {:>6.2}%",
            c.id, c.usage_percent, c.user_percent, c.kernel_percent, c.idle_percent
        );
    }
    o.push_str("-------------------------------------------\n");
    let n = r.cpu.per_cpu.len().max(1) as f64;
    let avg = |f: fn(&crate::cpu::CpuLine) -> f64| r.cpu.per_cpu.iter().map(f).sum::<f64>() / n;
    let _ = writeln!(
        o,
        "avg.| {:>6.2}%| {:>6.2}%|  {:>6.2}%| {:>6.2}%\n",
        avg(|c| c.usage_percent),
        avg(|c| c.user_percent),
        avg(|c| c.kernel_percent),
        avg(|c| c.idle_percent)
    );
    for (title, pick) in [
        ("Total IO", Pick::Total),
        ("Read IO", Pick::Read),
        ("Write IO", Pick::Write),
    ] {
        let _ = writeln!(o, "{title}");
        o.push_str("thread |       bytes     |     I/Os     |    MiB/s   |  I/O per s | AvgLat ms| IopsStdDev | LatStdDev |  file\n");
        let _ = writeln!(o, "{RULE}");
        for t in &r.threads {
            for x in &t.targets {
                let file = r
                    .targets
                    .get(x.target)
                    .map(|i| format!("{} ({})", i.path, size_label(i.file_size)))
                    .unwrap_or_default();
                io_row(&mut o, &t.id.to_string(), &x.io, pick, &file);
            }
        }
        let _ = writeln!(o, "{RULE}");
        io_row(&mut o, "total:", &r.io, pick, "");
        o.push('\n');
    }

    o.push_str("\ntotal:\n  %-ile |  Read (ms) | Write (ms) | Total (ms)\n----------------------------------------------\n");
    let ms = |v: Option<f64>| v.map_or("N/A".to_string(), |us| format!("{:.4}", us / 1000.0));
    for row in &r.percentile_table {
        let label = if row.percentile == 0.0 {
            "min"
        } else if row.percentile == 100.0 {
            "max"
        } else if let Some(&(_, _, l)) = PERCENTILES.iter().find(|x| x.0 == row.percentile) {
            l
        } else {
            continue;
        };
        let _ = writeln!(
            o,
            "{label:>7} | {:>10} | {:>10} | {:>10}",
            ms(row.read),
            ms(row.write),
            ms(row.total)
        );
    }

    o.push_str("\nIOPS variation:\n");
    let _ = writeln!(
        o,
        "\tintervals of {}ms: stddev {:.2} IOPS, coefficient of variation {:.2}%",
        p.iops_interval_ms, r.io.iops_stddev, r.io.iops_cv_percent
    );
    o.push_str("\nCPU and efficiency:\n");
    let c = &r.cpu;
    let _ = writeln!(
        o,
        "\tmachine: {:.2}% busy ({:.2} CPU-s)",
        c.system_percent, c.system_busy_seconds
    );
    let _ = writeln!(
        o,
        "\tsmbx bench: {:.2}% of machine (user {:.2}%, kernel {:.2}%; {:.1}% of a core)",
        c.process.percent, c.process.user_percent, c.process.kernel_percent, c.process.core_percent
    );
    if let Some(s) = &c.server {
        let _ = writeln!(
            o,
            "\tserver pid {}: {:.2}% of machine (user {:.2}%, kernel {:.2}%; {:.1}% of a core)",
            s.pid.unwrap_or(0),
            s.percent,
            s.user_percent,
            s.kernel_percent,
            s.core_percent
        );
    }
    let cpb = |v: Option<f64>| v.map_or("N/A".to_string(), |x| format!("{x:.3}"));
    let _ = writeln!(
        o,
        "\tcycles per byte at {} MHz: machine {}, smbx bench {}{}",
        c.mhz.map_or("?".into(), |m| format!("{m:.0}")),
        cpb(r.cycles.machine),
        cpb(r.cycles.process),
        if c.server.is_some() {
            format!(", server {}", cpb(r.cycles.server))
        } else {
            String::new()
        }
    );
    if let Some(t) = &r.tcp {
        let _ = writeln!(
            o,
            "\tTCP in this network namespace: {} segments sent, {} retransmitted, {} loss \
             probes, {} timeouts, {} out of order, {} zero-window, {} receive-queue drops, {} \
             prunes, {} collapsed",
            t.out_segs,
            t.retrans_segs,
            t.loss_probes,
            t.timeouts,
            t.ofo_queue,
            t.zero_window_adv,
            t.rcvq_drop,
            t.prune_called,
            t.rcv_collapsed
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000.0), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn sizes() {
        assert_eq!(size_label(1 << 30), "1GiB");
        assert_eq!(size_label(3 << 20), "3MiB");
        assert_eq!(size_label(1000), "1000B");
    }
}
