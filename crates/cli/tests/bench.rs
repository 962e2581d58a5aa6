//! `smbx bench` end to end: flag errors, a local file, and an smb:// target served by
//! `smbx serve` (zero configuration on a free loopback port). Short bounded runs; no
//! timing assertions.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const SMBX: &str = env!("CARGO_BIN_EXE_smbx");

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(SMBX)
        .arg("bench")
        .args(args)
        .env_remove("SMBX_PASSWORD")
        .output()
        .expect("run smbx bench")
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "smbx bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn check(j: &serde_json::Value, block: u64) {
    let n = j["io_count"].as_u64().unwrap();
    assert!(n > 0);
    assert_eq!(j["bytes"].as_u64().unwrap(), n * block);
    let l = &j["latency_us"];
    let keys = [
        "min", "p25", "p50", "p75", "p90", "p95", "p99", "p99_9", "max",
    ];
    let v: Vec<f64> = keys.iter().map(|k| l[k].as_f64().unwrap()).collect();
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "{v:?}");
}

#[test]
fn bad_flags_exit_2_with_a_message() {
    for (args, needle) in [
        (&["-r", "-s", "f"][..], "contradict"),
        (&["-b4Q", "f"][..], "suffix"),
        (&["-b4K"][..], "no target"),
    ] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = bench(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("-b<size>"));
}

#[test]
fn local_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    let f = f.to_str().unwrap();
    let out = bench(&[
        "-b4K", "-o4", "-r", "-w25", "-d1", "-W0", "-c1M", "-Rjson", f,
    ]);
    check(&json(&out), 4096);
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `smbx serve DIR -p 0` and returns it with the smb:// URL of its share (user,
/// password and the port the server bound included) from its banner.
fn serve(dir: &std::path::Path) -> (Server, String) {
    let mut child = Command::new(SMBX)
        .arg("serve")
        .arg(dir)
        .args(["-p", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start smbx serve");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(url) = line.trim().strip_prefix("smb://") {
            return (server, format!("smb://{url}"));
        }
    }
    panic!("smbx serve printed no smb:// URL");
}

#[test]
fn smb_target_served_by_smbx() {
    let dir = tempfile::tempdir().unwrap();
    let (server, url) = serve(dir.path());
    let target = format!("{url}/bench.bin");
    let pid = server.0.id().to_string();
    let out = bench(&[
        "-b64K",
        "-o8",
        "-t2",
        "-r",
        "-w30",
        "-d1",
        "-W0",
        "-c4M",
        "--server-pid",
        &pid,
        "-Rjson",
        &target,
    ]);
    let j = json(&out);
    check(&j, 65536);
    assert_eq!(j["targets"][0]["engine"], "smb");
    assert!(j["read_count"].as_u64().unwrap() > 0 && j["write_count"].as_u64().unwrap() > 0);
    assert!(j["cpu"]["server"]["cpu_seconds"].as_f64().unwrap() >= 0.0);
    // The password never reaches the report.
    let text = String::from_utf8_lossy(&out.stdout);
    let password = url.split(':').nth(2).unwrap().split('@').next().unwrap();
    assert!(!text.contains(password), "password leaked into the report");
    // -c wrote random data.
    let data = std::fs::read(dir.path().join("bench.bin")).unwrap();
    assert_eq!(data.len(), 4 << 20);
    assert!(data.iter().filter(|&&b| b == 0).count() < data.len() / 100);
}

#[test]
fn sweep_bad_flags_exit_2() {
    for (args, needle) in [
        (&["sweep", "-b4K", "f"][..], "--out"),
        (&["sweep", "-b4K,4K", "--out", "d", "f"][..], "listed twice"),
        (
            &["sweep", "-Rjson", "--out", "d", "f"][..],
            "-R does not apply",
        ),
    ] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(err.contains("sweep --help"), "{args:?}: {err}");
    }
    let out = bench(&["sweep", "--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("results.csv"));
}

#[test]
fn sweep_over_a_local_file_and_an_smb_target() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve(dir.path());
    let smb = format!("{url}/sweep.bin");
    let local = dir.path().join("local.bin");
    let out_dir = dir.path().join("out");
    let out = bench(&[
        "sweep",
        "-b4K,64K",
        "-o2",
        "-r",
        "-d1",
        "-W0",
        "-c1M",
        "--out",
        out_dir.to_str().unwrap(),
        local.to_str().unwrap(),
        &smb,
    ]);
    assert!(
        out.status.success(),
        "sweep failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(out_dir.join("results.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 4, "{csv}");
    for r in &rows {
        // block_size, io_count and bytes are columns 2, 8 and 11.
        let (b, n, bytes): (u64, u64, u64) = (
            r[2].parse().unwrap(),
            r[8].parse().unwrap(),
            r[11].parse().unwrap(),
        );
        assert!(n > 0);
        assert_eq!(bytes, n * b);
    }
    assert_eq!(
        rows.iter().filter(|r| r[0].starts_with("smb://")).count(),
        2
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["points"].as_array().unwrap().len(), 4);
    // The password stays out of every output.
    let password = url.split(':').nth(2).unwrap().split('@').next().unwrap();
    for name in ["results.csv", "results.json", "latency-vs-size_t1_o2.svg"] {
        let text = std::fs::read_to_string(out_dir.join(name)).unwrap();
        assert!(!text.contains(password), "password leaked into {name}");
    }
    // One chart: p50 and p99 for each of the two targets.
    let svg = std::fs::read_to_string(out_dir.join("latency-vs-size_t1_o2.svg")).unwrap();
    assert_eq!(svg.matches(r#"<g class="series""#).count(), 4);
}
