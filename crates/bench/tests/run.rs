//! Short, bounded runs against local temporary files: the reports parse and their numbers
//! add up. No timing assertions.

use quick_xml::events::Event;
use quick_xml::Reader;
use serde_json::Value;
use smbx_bench::{parse, render, run, Format};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn bench(flags: &str) -> (smbx_bench::Report, Value) {
    let p = parse(&args(flags)).unwrap_or_else(|e| panic!("{flags}: {e}"));
    let r = run(&p, format!("smbx bench {flags}")).unwrap_or_else(|e| panic!("{flags}: {e}"));
    let json: Value = serde_json::from_str(&render(&r, Format::Json)).expect("JSON parses");
    (r, json)
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}
fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

const ORDER: [&str; 15] = [
    "min",
    "p25",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
    "p99_9",
    "p99_99",
    "p99_999",
    "p99_9999",
    "p99_99999",
    "p99_999999",
    "p99_9999999",
    "max",
];

/// Checks one IoSummary object: sizes, counts, percentile order, interval sums.
fn check_io(v: &Value, block: u64, interval_ms: u64) {
    let (rc, wc, n) = (u(v, "read_count"), u(v, "write_count"), u(v, "io_count"));
    assert_eq!(rc + wc, n);
    assert_eq!(u(v, "read_bytes"), rc * block);
    assert_eq!(u(v, "write_bytes"), wc * block);
    assert_eq!(u(v, "bytes"), n * block);
    for (key, count) in [
        ("latency_us", n),
        ("read_latency_us", rc),
        ("write_latency_us", wc),
    ] {
        let l = &v[key];
        if count == 0 {
            assert!(l.is_null(), "{key} should be null without I/Os");
            continue;
        }
        assert_eq!(u(l, "count"), count);
        let vals: Vec<f64> = ORDER.iter().map(|k| f(l, k)).collect();
        assert!(
            vals.windows(2).all(|w| w[0] <= w[1]),
            "{key} out of order: {vals:?}"
        );
        assert!(vals[0] > 0.0);
        assert!(f(l, "mean") >= vals[0] && f(l, "mean") <= vals[14]);
    }
    let per_interval: f64 = v["iops_intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .sum();
    let counted = per_interval * interval_ms as f64 / 1000.0;
    assert!((counted - n as f64).abs() < 0.5, "{counted} vs {n}");
    assert!(f(v, "iops_stddev") >= 0.0 && f(v, "iops_cv_percent") >= 0.0);
    if n > 0 {
        let secs = n as f64 / f(v, "iops");
        let bps = f(v, "bytes_per_sec");
        assert!((bps * secs - (n * block) as f64).abs() < 1.0 + 1e-6 * bps * secs);
    }
}

fn check_report(j: &Value, block: u64) {
    assert_eq!(j["schema"], "smbx-bench/1");
    let ims = u(&j["profile"], "iops_interval_ms");
    check_io(j, block, ims);
    assert!(u(j, "io_count") > 0, "the run did some I/O");
    // Threads and targets add up to the totals.
    let sum =
        |arr: &Value, k: &str| -> u64 { arr.as_array().unwrap().iter().map(|x| u(x, k)).sum() };
    for k in ["io_count", "read_count", "write_count", "bytes"] {
        assert_eq!(sum(&j["threads"], k), u(j, k), "threads {k}");
        assert_eq!(sum(&j["targets"], k), u(j, k), "targets {k}");
    }
    for t in j["threads"].as_array().unwrap() {
        check_io(t, block, ims);
        for x in t["targets"].as_array().unwrap() {
            check_io(x, block, ims);
        }
        assert_eq!(sum(&t["targets"], "io_count"), u(t, "io_count"));
    }
    for t in j["targets"].as_array().unwrap() {
        check_io(t, block, ims);
    }
    // CPU within bounds.
    let cpu = &j["cpu"];
    let cpus = u(cpu, "cpus") as f64;
    let eps = 5.0; // sampling granularity of clock ticks
    for k in ["process_percent", "system_percent"] {
        let x = f(cpu, k);
        assert!((0.0..=100.0 + eps).contains(&x), "{k} = {x}");
    }
    let core = f(&cpu["process"], "core_percent");
    assert!(
        (0.0..=100.0 * cpus + eps * cpus).contains(&core),
        "core_percent {core}"
    );
    for c in cpu["per_cpu"].as_array().unwrap() {
        let x = f(c, "usage_percent");
        assert!((0.0..=100.0).contains(&x));
    }
    if !cpu["mhz"].is_null() {
        assert!(f(j, "cycles_per_byte") >= 0.0);
        assert_eq!(j["cycles_per_byte"], j["cycles"]["machine"]);
    }
}

/// Parses the XML and checks its shape and sums against the JSON.
fn check_xml(xml: &str, j: &Value) {
    let mut reader = Reader::from_str(xml);
    let mut path: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut thread_io = 0u64;
    let mut percentiles = Vec::new();
    let mut totals_ms = Vec::new();
    loop {
        match reader.read_event().expect("XML parses") {
            Event::Start(e) => {
                path.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
                seen.insert(path.join("/"));
            }
            Event::Empty(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                seen.insert(format!("{}/{name}", path.join("/")));
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) => {
                let text = t.unescape().unwrap().to_string();
                match path.join("/").as_str() {
                    "Results/TimeSpan/Thread/Target/IOCount" => {
                        thread_io += text.parse::<u64>().unwrap()
                    }
                    "Results/TimeSpan/Latency/Bucket/Percentile" => {
                        percentiles.push(text.parse::<f64>().unwrap())
                    }
                    "Results/TimeSpan/Latency/Bucket/TotalMilliseconds" => {
                        totals_ms.push(text.parse::<f64>().unwrap())
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    for want in [
        "Results/System/ComputerName",
        "Results/Profile/TimeSpans/TimeSpan/Targets/Target/BlockSize",
        "Results/TimeSpan/TestTimeSeconds",
        "Results/TimeSpan/CpuUtilization/CPU/UsagePercent",
        "Results/TimeSpan/CpuUtilization/Average/UsagePercent",
        "Results/TimeSpan/Latency/Bucket/Percentile",
        "Results/TimeSpan/Iops/IopsStdDev",
        "Results/TimeSpan/Iops/Bucket",
        "Results/TimeSpan/Thread/Id",
        "Results/TimeSpan/Thread/Target/Path",
        "Results/TimeSpan/Thread/Target/BytesCount",
        "Results/TimeSpan/Thread/Target/Iops/Bucket",
    ] {
        assert!(seen.contains(want), "XML lacks {want}");
    }
    assert_eq!(thread_io, u(j, "io_count"));
    assert_eq!(percentiles.first(), Some(&0.0));
    assert_eq!(percentiles.last(), Some(&100.0));
    assert_eq!(percentiles.len(), 1 + 99 + 7 + 1);
    assert!(percentiles.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(totals_ms.len(), percentiles.len());
    assert!(totals_ms.windows(2).all(|w| w[0] <= w[1]), "{totals_ms:?}");
}

#[test]
fn random_mixed_two_targets_two_threads_each() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let flags = format!(
        "-b4K -o16 -t2 -r -w30 -d1 -W0 -D250 -Zr -c4M -z7 -L {} {}",
        a.display(),
        b.display()
    );
    let (r, j) = bench(&flags);
    check_report(&j, 4096);
    assert_eq!(j["targets"].as_array().unwrap().len(), 2);
    assert_eq!(j["threads"].as_array().unwrap().len(), 4);
    assert_eq!(j["targets"][0]["threads"], serde_json::json!([0, 1]));
    assert_eq!(j["targets"][1]["threads"], serde_json::json!([2, 3]));
    assert!(u(&j, "read_count") > 0 && u(&j, "write_count") > 0);
    check_xml(&render(&r, Format::Xml), &j);
    let text = render(&r, Format::Text);
    for want in [
        "Command Line:",
        "Total IO",
        "Read IO",
        "Write IO",
        "%-ile",
        "cycles per byte",
    ] {
        assert!(text.contains(want), "text lacks {want}");
    }
    // -c wrote random data, not zeros.
    let data = std::fs::read(&a).unwrap();
    assert_eq!(data.len(), 4 << 20);
    let zeros = data.iter().filter(|&&x| x == 0).count();
    assert!(zeros < data.len() / 100, "{zeros} zero bytes");
}

#[test]
fn sequential_psync_fixed_threads_over_targets() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let flags = format!(
        "-b64K -o4 -F2 -s -w100 -d1 -W0 -c2M --engine psync -Rxml {} {}",
        a.display(),
        b.display()
    );
    let (r, j) = bench(&flags);
    check_report(&j, 65536);
    assert_eq!(u(&j, "read_count"), 0);
    for t in j["threads"].as_array().unwrap() {
        assert_eq!(
            t["targets"].as_array().unwrap().len(),
            2,
            "-F: every thread drives every target"
        );
        assert_eq!(
            u(&t["targets"][0], "outstanding"),
            1,
            "psync keeps one I/O in flight"
        );
    }
    assert_eq!(j["targets"][0]["engine"], "psync");
    check_xml(&render(&r, Format::Xml), &j);
}

#[test]
fn interlocked_sequential_with_region_and_unbuffered() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    // O_DIRECT is refused by some file systems (tmpfs): then run buffered.
    let direct = format!(
        "-b8K -o8 -t2 -si -d1 -W0 -B64K:1M -c2M -Sh -w20 -Z128K {}",
        a.display()
    );
    let flags = match parse(&args(&direct)).map(|p| run(&p, String::new())) {
        Ok(Err(smbx_bench::BenchError::Io { source, .. }))
            if source.raw_os_error() == Some(libc::EINVAL) =>
        {
            direct.replace(" -Sh", "")
        }
        _ => direct,
    };
    let (_, j) = bench(&flags);
    check_report(&j, 8192);
    assert_eq!(u(&j["targets"][0], "region_base"), 65536);
    assert_eq!(u(&j["targets"][0], "region_len"), 1 << 20);
}

#[test]
fn missing_and_small_targets_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let p = parse(&args(&format!("-d1 -W0 {}", missing.display()))).unwrap();
    let e = run(&p, String::new()).unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("-c"), "{e}");

    let small = dir.path().join("small");
    std::fs::write(&small, [1u8; 100]).unwrap();
    let p = parse(&args(&format!("-b4K -d1 -W0 {}", small.display()))).unwrap();
    let e = run(&p, String::new()).unwrap_err().to_string();
    assert!(e.contains("too small"), "{e}");

    let p = parse(&args(&format!(
        "-b64 -d1 -W0 --server-pid 4000000000 {}",
        small.display()
    )))
    .unwrap();
    let e = run(&p, String::new()).unwrap_err().to_string();
    assert!(e.contains("--server-pid 4000000000"), "{e}");
}
