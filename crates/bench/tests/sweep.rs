//! `smbx bench sweep` against a local temporary file: the CSV and JSON parse with one row
//! per matrix point and numbers that add up, and the SVG charts are well-formed XML with
//! the expected series. Short runs; no timing assertions.

use std::collections::HashSet;
use std::path::Path;

use quick_xml::events::Event;
use quick_xml::Reader;
use serde_json::Value;
use smbx_bench::sweep;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// Parses an SVG with quick-xml (every start tag closed, attributes well-formed) and
/// returns the `data-series` names of its series groups and the count of panels.
fn svg_series(path: &Path) -> (Vec<String>, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut r = Reader::from_str(&text);
    let mut depth = 0i32;
    let (mut series, mut charts, mut root) = (Vec::new(), 0, None);
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                depth += 1;
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                root.get_or_insert(name);
                let mut class = None;
                let mut data = None;
                for a in e.attributes() {
                    let a = a.expect("well-formed attribute");
                    let v = a.unescape_value().unwrap().to_string();
                    match a.key.as_ref() {
                        b"class" => class = Some(v),
                        b"data-series" => data = Some(v),
                        _ => {}
                    }
                }
                match class.as_deref() {
                    Some("series") => series.push(data.expect("series has a name")),
                    Some("chart") => charts += 1,
                    _ => {}
                }
            }
            Ok(Event::End(_)) => depth -= 1,
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("{}: not well-formed: {e}", path.display()),
        }
        assert!(depth >= 0);
    }
    assert_eq!(depth, 0, "{}: unclosed elements", path.display());
    assert_eq!(root.as_deref(), Some("svg"));
    (series, charts)
}

#[test]
fn sweep_writes_consistent_csv_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("target.bin");
    let out = dir.path().join("out");
    let line = format!(
        "-b4K,16K -o1,4 -t1,2 -r -d1 -W0 -c2M --engine psync --out {} {}",
        out.display(),
        file.display()
    );
    let plan = sweep::plan(&args(&line)).unwrap();
    assert_eq!(plan.points.len(), 8);
    let report = sweep::run_cli(&args(&line)).unwrap();
    assert!(report.contains("results.csv"), "{report}");

    // CSV: header + one row per point, every row complete, bytes = I/Os × size.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header, sweep::CSV_COLUMNS);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 8);
    let mut points = HashSet::new();
    for r in &rows {
        assert_eq!(r.len(), header.len());
        let n = |c: &str| {
            r[col(c)]
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("{c}: {r:?}"))
        };
        let size = n("block_size");
        assert!(n("io_count") > 0.0);
        assert_eq!(n("bytes"), n("io_count") * size);
        assert_eq!(n("io_count"), n("read_count") + n("write_count"));
        assert!(n("latency_p50_us") <= n("latency_p99_us"));
        assert!(n("latency_p99_us") <= n("latency_max_us"));
        assert!((0.0..=100.0).contains(&n("process_cpu_percent")));
        assert!((0.0..=100.0).contains(&n("system_cpu_percent")));
        assert_eq!(r[col("access")], "random");
        points.insert((size as u64, n("threads") as u32, n("outstanding") as u32));
    }
    let want: HashSet<(u64, u32, u32)> = [4096u64, 16384]
        .iter()
        .flat_map(|&b| {
            [1u32, 2]
                .iter()
                .flat_map(move |&t| [1u32, 4].map(|o| (b, t, o)))
        })
        .collect();
    assert_eq!(points, want);

    // JSON: the same points, each row matching its embedded full report.
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], sweep::SCHEMA);
    assert_eq!(
        json["axes"]["block_sizes"],
        serde_json::json!([4096, 16384])
    );
    let pts = json["points"].as_array().unwrap();
    assert_eq!(pts.len(), 8);
    for (p, r) in pts.iter().zip(&rows) {
        let rep = &p["report"];
        assert_eq!(rep["schema"], "smbx-bench/1");
        let io = p["io_count"].as_u64().unwrap();
        assert_eq!(rep["io_count"].as_u64(), Some(io));
        assert_eq!(
            p["bytes"].as_u64(),
            Some(io * p["block_size"].as_u64().unwrap())
        );
        assert_eq!(
            rep["profile"]["block_size"].as_u64(),
            p["block_size"].as_u64()
        );
        assert_eq!(
            rep["profile"]["outstanding"].as_u64(),
            p["outstanding"].as_u64()
        );
        assert_eq!(r[col("io_count")], io.to_string());
        // Per-thread counts add up to the point's total.
        let per_thread: u64 = rep["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["io_count"].as_u64().unwrap())
            .sum();
        assert_eq!(per_thread, io);
        assert_eq!(
            rep["threads"].as_array().unwrap().len() as u64,
            p["threads"].as_u64().unwrap()
        );
    }
    // Only the first point created the file.
    let created = pts
        .iter()
        .filter(|p| !p["report"]["profile"]["create_size"].is_null())
        .count();
    assert_eq!(created, 1);

    // SVG: latency-vs-size per (threads, outstanding): p50 + p99 for the one target;
    // vs-threads and vs-outstanding: an IOPS panel (1 series) and a latency panel (2).
    let mut svgs: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    svgs.sort();
    assert_eq!(svgs.len(), 4 + 4 + 4, "{svgs:?}");
    for name in &svgs {
        let (series, charts) = svg_series(&out.join(name));
        if name.starts_with("latency-vs-size") {
            assert_eq!(charts, 1, "{name}");
            assert_eq!(series.len(), 2, "{name}: {series:?}");
            assert!(series[0].ends_with(" p50") && series[1].ends_with(" p99"));
        } else {
            assert_eq!(charts, 2, "{name}");
            assert_eq!(series.len(), 3, "{name}: {series:?}");
        }
    }
    assert!(out.join("index.html").exists());
}
