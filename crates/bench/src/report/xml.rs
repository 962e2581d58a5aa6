//! The XML report, in the shape of diskspd's `-Rxml` output
//! (Results / System / Profile / TimeSpan / Thread / Target / Latency / Iops), so tools
//! that read diskspd's XML read ours. Latencies are milliseconds, as in diskspd. Figures
//! diskspd lacks (process CPU, cycles per byte, engine) are in an extra `<Smbx>` element.

use std::fmt::Write;

use super::{IoSummary, Report};
use crate::profile::{Access, Throttle, WriteBuffer};

/// Escapes text for element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => o.push(c),
        }
    }
    o
}

fn el(o: &mut String, name: &str, v: impl std::fmt::Display) {
    let _ = writeln!(o, "<{name}>{}</{name}>", escape(&v.to_string()));
}

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

fn latency_avgs(o: &mut String, io: &IoSummary, target: bool) {
    let (r, w, t) = if target {
        (
            "AverageReadLatencyMilliseconds",
            "AverageWriteLatencyMilliseconds",
            "AverageLatencyMilliseconds",
        )
    } else {
        (
            "AverageReadMilliseconds",
            "AverageWriteMilliseconds",
            "AverageTotalMilliseconds",
        )
    };
    if let Some(l) = &io.read_latency_us {
        el(o, r, ms(l.mean));
        el(o, "ReadLatencyStdev", ms(l.stddev));
    }
    if let Some(l) = &io.write_latency_us {
        el(o, w, ms(l.mean));
        el(o, "WriteLatencyStdev", ms(l.stddev));
    }
    if let Some(l) = &io.latency_us {
        el(o, t, ms(l.mean));
        el(o, "LatencyStdev", ms(l.stddev));
    }
}

fn iops(o: &mut String, io: &IoSummary, interval_ms: u64) {
    o.push_str("<Iops>\n");
    if io.read_count > 0 {
        el(o, "ReadIopsStdDev", format!("{:.3}", io.read_iops_stddev));
    }
    if io.write_count > 0 {
        el(o, "WriteIopsStdDev", format!("{:.3}", io.write_iops_stddev));
    }
    el(o, "IopsStdDev", format!("{:.3}", io.iops_stddev));
    for (i, total) in io.iops_intervals.iter().enumerate() {
        let r = io.read_iops_intervals.get(i).copied().unwrap_or(0.0);
        let w = io.write_iops_intervals.get(i).copied().unwrap_or(0.0);
        let _ = writeln!(
            o,
            "<Bucket SampleMillisecond=\"{}\" Read=\"{r:.0}\" Write=\"{w:.0}\" Total=\"{total:.0}\"/>",
            interval_ms * (i as u64 + 1)
        );
    }
    o.push_str("</Iops>\n");
}

/// Renders the report.
pub fn render(r: &Report) -> String {
    let p = &r.profile;
    let mut o = String::from("<Results>\n<System>\n");
    el(&mut o, "ComputerName", &r.system.hostname);
    o.push_str("<Tool>\n");
    el(&mut o, "Version", format!("smbx bench {}", r.version));
    o.push_str("</Tool>\n");
    el(
        &mut o,
        "RunTime",
        super::text::utc(r.system.start_time_unix),
    );
    o.push_str("</System>\n<Profile>\n");
    el(&mut o, "Progress", 0);
    el(&mut o, "ResultFormat", "xml");
    el(&mut o, "Verbose", false);
    o.push_str("<TimeSpans>\n<TimeSpan>\n");
    el(&mut o, "CompletionRoutines", false);
    el(&mut o, "MeasureLatency", true);
    el(&mut o, "CalculateIopsStdDev", true);
    el(&mut o, "DisableAffinity", false);
    el(&mut o, "Duration", p.duration_s);
    el(&mut o, "Warmup", p.warmup_s);
    el(&mut o, "Cooldown", p.cooldown_s);
    el(&mut o, "ThreadCount", p.total_threads.unwrap_or(0));
    el(&mut o, "RequestCount", 0);
    el(&mut o, "IoBucketDuration", p.iops_interval_ms);
    el(&mut o, "RandSeed", p.seed);
    o.push_str("<Targets>\n");
    for t in &r.targets {
        o.push_str("<Target>\n");
        el(&mut o, "Path", &t.path);
        el(&mut o, "BlockSize", p.block_size);
        el(&mut o, "BaseFileOffset", t.region_base);
        let (seq, random) = match p.access {
            Access::Random { align } => (false, Some(align)),
            Access::Sequential { .. } => (true, None),
        };
        el(&mut o, "SequentialScan", seq);
        el(&mut o, "RandomAccess", !seq);
        el(&mut o, "TemporaryFile", false);
        el(&mut o, "UseLargePages", false);
        el(&mut o, "DisableOSCache", p.no_cache);
        el(&mut o, "WriteThrough", p.write_through);
        o.push_str("<WriteBufferContent>\n");
        match p.write_buffer {
            WriteBuffer::Pattern => el(&mut o, "Pattern", "sequential"),
            WriteBuffer::Zero => el(&mut o, "Pattern", "zero"),
            WriteBuffer::RandomPerIo => el(&mut o, "Pattern", "random"),
            WriteBuffer::RandomBuffer(s) => {
                el(&mut o, "Pattern", "random");
                o.push_str("<RandomDataSource>\n");
                el(&mut o, "SizeInBytes", s);
                o.push_str("</RandomDataSource>\n");
            }
        }
        o.push_str("</WriteBufferContent>\n");
        el(&mut o, "ParallelAsyncIO", false);
        if let Some(c) = p.create_size {
            el(&mut o, "FileSize", c);
        }
        match (random, p.access) {
            (Some(a), _) => el(&mut o, "Random", a),
            (
                None,
                Access::Sequential {
                    stride,
                    interlocked,
                },
            ) => {
                el(&mut o, "StrideSize", stride);
                el(&mut o, "InterlockedSequential", interlocked);
            }
            _ => {}
        }
        el(&mut o, "ThreadStride", p.thread_stride);
        el(
            &mut o,
            "MaxFileSize",
            p.max_len.map_or(0, |l| t.region_base + l),
        );
        el(&mut o, "RequestCount", p.outstanding);
        el(&mut o, "WriteRatio", p.write_percent);
        let tput = match p.throttle {
            Some(Throttle::BytesPerMs(b)) => b,
            _ => 0,
        };
        el(&mut o, "Throughput", tput);
        if let Some(Throttle::Iops(n)) = p.throttle {
            el(&mut o, "ThroughputIOPS", n);
        }
        el(&mut o, "ThreadsPerFile", p.threads_on_target());
        el(&mut o, "IOPriority", 3);
        el(&mut o, "Weight", 1);
        o.push_str("</Target>\n");
    }
    o.push_str("</Targets>\n</TimeSpan>\n</TimeSpans>\n</Profile>\n<TimeSpan>\n");
    el(&mut o, "TestTimeSeconds", format!("{:.2}", r.duration_s));
    el(&mut o, "ThreadCount", r.threads.len());
    el(&mut o, "RequestCount", 0);
    el(&mut o, "ProcCount", r.cpu.cpus);
    o.push_str("<CpuUtilization>\n");
    for c in &r.cpu.per_cpu {
        o.push_str("<CPU>\n");
        el(&mut o, "Id", c.id);
        el(&mut o, "UsagePercent", format!("{:.2}", c.usage_percent));
        el(&mut o, "UserPercent", format!("{:.2}", c.user_percent));
        el(&mut o, "KernelPercent", format!("{:.2}", c.kernel_percent));
        el(&mut o, "IdlePercent", format!("{:.2}", c.idle_percent));
        o.push_str("</CPU>\n");
    }
    let n = r.cpu.per_cpu.len().max(1) as f64;
    let avg = |f: fn(&crate::cpu::CpuLine) -> f64| r.cpu.per_cpu.iter().map(f).sum::<f64>() / n;
    o.push_str("<Average>\n");
    el(
        &mut o,
        "UsagePercent",
        format!("{:.2}", avg(|c| c.usage_percent)),
    );
    el(
        &mut o,
        "UserPercent",
        format!("{:.2}", avg(|c| c.user_percent)),
    );
    el(
        &mut o,
        "KernelPercent",
        format!("{:.2}", avg(|c| c.kernel_percent)),
    );
    el(
        &mut o,
        "IdlePercent",
        format!("{:.2}", avg(|c| c.idle_percent)),
    );
    o.push_str("</Average>\n</CpuUtilization>\n<Latency>\n");
    latency_avgs(&mut o, &r.io, false);
    for row in &r.percentile_table {
        o.push_str("<Bucket>\n");
        let pct = format!("{}", row.percentile);
        el(&mut o, "Percentile", pct);
        if let Some(v) = row.read {
            el(&mut o, "ReadMilliseconds", ms(v));
        }
        if let Some(v) = row.write {
            el(&mut o, "WriteMilliseconds", ms(v));
        }
        if let Some(v) = row.total {
            el(&mut o, "TotalMilliseconds", ms(v));
        }
        o.push_str("</Bucket>\n");
    }
    o.push_str("</Latency>\n");
    iops(&mut o, &r.io, p.iops_interval_ms);
    for t in &r.threads {
        o.push_str("<Thread>\n");
        el(&mut o, "Id", t.id);
        for x in &t.targets {
            o.push_str("<Target>\n");
            el(&mut o, "Path", &x.path);
            el(&mut o, "BytesCount", x.io.bytes);
            let size = r.targets.get(x.target).map_or(0, |i| i.file_size);
            el(&mut o, "FileSize", size);
            el(&mut o, "IOCount", x.io.io_count);
            el(&mut o, "ReadBytes", x.io.read_bytes);
            el(&mut o, "ReadCount", x.io.read_count);
            el(&mut o, "WriteBytes", x.io.write_bytes);
            el(&mut o, "WriteCount", x.io.write_count);
            latency_avgs(&mut o, &x.io, true);
            iops(&mut o, &x.io, p.iops_interval_ms);
            o.push_str("</Target>\n");
        }
        o.push_str("</Thread>\n");
    }
    let c = &r.cpu;
    o.push_str("<Smbx>\n");
    for t in &r.targets {
        let _ = writeln!(
            o,
            "<Engine Path=\"{}\">{}</Engine>",
            escape(&t.path),
            escape(&t.engine)
        );
    }
    el(
        &mut o,
        "CpuMHz",
        c.mhz.map_or("".into(), |m| format!("{m:.0}")),
    );
    el(&mut o, "SystemPercent", format!("{:.2}", c.system_percent));
    el(
        &mut o,
        "ProcessPercent",
        format!("{:.2}", c.process.percent),
    );
    el(
        &mut o,
        "ProcessUserPercent",
        format!("{:.2}", c.process.user_percent),
    );
    el(
        &mut o,
        "ProcessKernelPercent",
        format!("{:.2}", c.process.kernel_percent),
    );
    if let Some(s) = &c.server {
        el(&mut o, "ServerPid", s.pid.unwrap_or(0));
        el(&mut o, "ServerPercent", format!("{:.2}", s.percent));
    }
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.4}"));
    el(&mut o, "CyclesPerByte", f(r.cycles.machine));
    el(&mut o, "ProcessCyclesPerByte", f(r.cycles.process));
    if c.server.is_some() {
        el(&mut o, "ServerCyclesPerByte", f(r.cycles.server));
    }
    el(
        &mut o,
        "IopsCoefficientOfVariationPercent",
        format!("{:.2}", r.io.iops_cv_percent),
    );
    o.push_str("</Smbx>\n</TimeSpan>\n</Results>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes() {
        assert_eq!(escape("a<&>\"'b\u{1}"), "a&lt;&amp;&gt;&quot;&apos;b");
    }
}
