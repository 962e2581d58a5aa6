//! `smbx demo`: the papers' comparison of plain TCP against SMB Direct, on this
//! machine, with no configuration.
//!
//! It starts `smbx serve` on loopback (a fresh share with a random file, a fresh user,
//! Direct TCP and SMB Direct over soft-iWARP on free ports), then runs `smbx bench`
//! sweeps against the same file over both transports: latency at queue depth 1 from
//! 1 KiB to 256 KiB, IOPS at 4 KiB and 8 KiB, throughput from 64 KiB to 512 KiB, with
//! cycles per byte (machine-wide, server and client together). A multichannel row
//! reads 512 KiB blocks over one TCP channel and over three (a second, TCP-only server
//! advertises 127.0.0.1 as RSS-capable, so the session opens three connections to it,
//! as Windows does to one RSS interface). It prints
//! one table with RDMA/TCP and 3-channel/1-channel ratios and writes the sweeps' CSV,
//! JSON and SVG charts plus a throughput chart and an index page under the output
//! directory.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rand::RngCore;
use smbx_bench::svg::{self, Axis, Chart, Figure, Scale, Series};
use smbx_bench::sweep::{self, Row};

const USAGE: &str = "\
usage: smbx demo [--out DIR] [-d SECONDS] [-W SECONDS] [--file-size SIZE] [--quick]
  Starts smbx serve on 127.0.0.1 (Direct TCP and SMB Direct over soft-iWARP) with a
  temporary share, and compares the two transports as the SMB Direct papers do:
    latency    random reads at 1 outstanding I/O, 1 KiB to 256 KiB
    iops       random reads of 4 KiB and 8 KiB, 2 threads x 16 outstanding
    throughput sequential reads of 64 KiB to 512 KiB, 8 outstanding
    multichannel  sequential 512 KiB reads over 1 TCP channel and over 3
               (127.0.0.1 advertised RSS-capable: 3 connections), 8 outstanding
  Prints a table with RDMA/TCP and 3/1-channel ratios and writes results (CSV, JSON, SVG, index.html).
  --out DIR        where results go (default ./smbx-demo)
  -d SECONDS       measured time per point (default 3); -W warm-up (default 1)
  --file-size SIZE the test file (default 256M)
  --quick          -d1 -W1, a 64M file and fewer sizes (a smoke run)
";

/// The demo's settings.
#[derive(Debug, Clone)]
struct Settings {
    out: PathBuf,
    duration: u32,
    warmup: u32,
    file_size: u64,
    quick: bool,
}

fn parse(args: &[String]) -> Result<Option<Settings>, String> {
    let mut s = Settings {
        out: PathBuf::from("smbx-demo"),
        duration: 3,
        warmup: 1,
        file_size: 256 << 20,
        quick: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--out" => s.out = PathBuf::from(value("--out")?),
            "-d" => s.duration = seconds(&value("-d")?)?,
            "-W" => s.warmup = seconds(&value("-W")?)?,
            "--file-size" => s.file_size = size(&value("--file-size")?)?,
            "--quick" => {
                s.quick = true;
                s.duration = 1;
                s.warmup = 1;
                s.file_size = 64 << 20;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if s.file_size < (1 << 20) {
        return Err("--file-size must be at least 1M".into());
    }
    Ok(Some(s))
}

/// A byte count with an optional K, M or G suffix (powers of 1024), up to 64 GiB.
fn size(v: &str) -> Result<u64, String> {
    let (num, shift) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&v[..v.len() - 1], 10),
        Some('M') => (&v[..v.len() - 1], 20),
        Some('G') => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_shl(shift))
        .filter(|&n| n <= 64 << 30)
        .ok_or_else(|| format!("bad --file-size {v:?} (like 256M or 1G)"))
}

fn seconds(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|&n| (1..=3600).contains(&n))
        .ok_or_else(|| format!("bad number of seconds {v:?} (1..3600)"))
}

/// Runs `smbx demo ARGS...`.
pub fn main(args: &[String]) -> ExitCode {
    let settings = match parse(args) {
        Ok(Some(s)) => s,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("smbx demo: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smbx demo: {e}");
            ExitCode::from(1)
        }
    }
}

/// The server the demo runs, and its scratch directory; both go away on drop.
struct DemoServer {
    child: Child,
    dir: PathBuf,
    tcp_port: u16,
    rdma_port: u16,
    password: String,
}

impl Drop for DemoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

const USER: &str = "demo";

/// The multichannel server's `interfaces`: loopback, advertised at 10 Gbit/s with RSS,
/// so a session opens further connections to it (other loopback addresses are not
/// the host's own, so they are not advertised; that server has no SMB Direct, so every
/// channel is TCP).
const MC_INTERFACES: &str = "\"127.0.0.1;speed=10000000000,capability=RSS\"";

/// Channels of the multichannel row.
const MC_CHANNELS: usize = 3;
/// Labels of the multichannel row's two runs.
const MC_LABELS: [&str; 2] = ["1 channel", "3 channels"];

/// Starts the demo's server: TCP and SMB Direct on 127.0.0.1, or (`multichannel`) TCP
/// alone with [`MC_INTERFACES`] advertised for the multichannel row.
fn start_server(file_size: u64, multichannel: bool) -> Result<DemoServer, String> {
    let tag = if multichannel { "-mc" } else { "" };
    let dir = std::env::temp_dir().join(format!("smbx-demo-{}{tag}", std::process::id()));
    let share = dir.join("share");
    std::fs::create_dir_all(&share).map_err(|e| format!("creating {}: {e}", share.display()))?;
    let tcp_port = free_port()?;
    let rdma_port = if multichannel { 0 } else { free_port()? };
    let password = crate::zeroconf::random_password();
    let passdb = dir.join("smbpasswd");
    smbx_passdb::PassDb::open(&passdb)
        .and_then(|mut db| db.add_or_update(USER, &password))
        .map_err(|e| format!("writing {}: {e}", passdb.display()))?;
    let conf = dir.join("smb.conf");
    let transports = if multichannel {
        format!("\tinterfaces = {MC_INTERFACES}\n\tserver multi channel support = yes\n")
    } else {
        format!("\tinterfaces = 127.0.0.1\n\tsmb direct = yes\n\tsmb direct port = {rdma_port}\n")
    };
    let text = format!(
        "[global]\n\
         {transports}\
         \tbind interfaces only = yes\n\
         \tsmb ports = {tcp_port}\n\
         \tpassdb backend = smbpasswd:{}\n\
         [share]\n\
         \tpath = {}\n\
         \tread only = no\n",
        passdb.display(),
        share.display()
    );
    std::fs::write(&conf, text).map_err(|e| format!("writing {}: {e}", conf.display()))?;
    write_random_file(&share.join("data"), file_size)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find smbx itself: {e}"))?;
    let log = std::fs::File::create(dir.join("server.log"))
        .map_err(|e| format!("creating the server log: {e}"))?;
    let child = Command::new(exe)
        .args(["serve", "--config"])
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting smbx serve: {e}"))?;
    let mut server = DemoServer {
        child,
        dir,
        tcp_port,
        rdma_port,
        password,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let ports: &[u16] = if multichannel {
        &[tcp_port]
    } else {
        &[tcp_port, rdma_port]
    };
    for &port in ports {
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(st)) = server.child.try_wait() {
                return Err(format!("smbx serve exited ({st}) before listening"));
            }
            if Instant::now() > deadline {
                return Err(format!("smbx serve does not listen on port {port}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // The SMB Direct probe above was a bare TCP connect; let the server drop it.
    std::thread::sleep(Duration::from_millis(100));
    let _ = &mut server;
    Ok(server)
}

/// Random (incompressible, never zero) test data.
fn write_random_file(path: &Path, size: u64) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?,
    );
    let mut rng = rand::thread_rng();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        rng.fill_bytes(&mut buf);
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        left -= n as u64;
    }
    f.flush()
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// One sweep of the comparison.
struct Phase {
    name: &'static str,
    sizes: &'static str,
    flags: &'static [&'static str],
}

const PHASES: [Phase; 3] = [
    Phase {
        name: "latency",
        sizes: "1K,4K,8K,16K,64K,256K",
        flags: &["-o1", "-t1", "-r"],
    },
    Phase {
        name: "iops",
        sizes: "4K,8K",
        flags: &["-o16", "-t2", "-r"],
    },
    Phase {
        name: "throughput",
        sizes: "64K,256K,512K",
        flags: &["-o8", "-t1", "-s"],
    },
];

const QUICK_SIZES: [&str; 3] = ["1K,64K", "4K", "64K,512K"];

fn run(s: &Settings) -> Result<(), String> {
    std::fs::create_dir_all(&s.out).map_err(|e| format!("creating {}: {e}", s.out.display()))?;
    eprintln!(
        "smbx demo: starting smbx serve on 127.0.0.1 (TCP and SMB Direct over soft-iWARP) \
         with a {} MiB test file ...",
        s.file_size >> 20
    );
    let server = start_server(s.file_size, false)?;
    // The password goes through the environment, never into a URL that is printed.
    std::env::set_var("SMBX_PASSWORD", &server.password);
    let tcp = format!("smb://{USER}@127.0.0.1:{}/share/data", server.tcp_port);
    let rdma = format!(
        "smb://{USER}@127.0.0.1:{}/share/data?transport=rdma",
        server.rdma_port
    );
    let pid = server.child.id().to_string();
    let mut all: Vec<(&str, Vec<Row>)> = Vec::new();
    for (i, p) in PHASES.iter().enumerate() {
        let sizes = if s.quick { QUICK_SIZES[i] } else { p.sizes };
        let out = s.out.join(p.name);
        let mut args: Vec<String> = vec![format!("-b{sizes}")];
        args.extend(p.flags.iter().map(|f| f.to_string()));
        args.extend([
            format!("-d{}", s.duration),
            format!("-W{}", s.warmup),
            "--server-pid".into(),
            pid.clone(),
            "--out".into(),
            out.display().to_string(),
            "--labels".into(),
            "TCP,SMB Direct".into(),
            tcp.clone(),
            rdma.clone(),
        ]);
        eprintln!("smbx demo: {} sweep", p.name);
        let plan = sweep::plan(&args).map_err(|e| e.to_string())?;
        let cmd = format!("smbx bench sweep {}", args.join(" "));
        let rows = sweep::run(&plan, &cmd).map_err(|e| e.to_string())?;
        all.push((p.name, rows));
    }
    drop(server);
    // The multichannel row: a TCP-only server's file over one channel and over three.
    eprintln!("smbx demo: starting a TCP-only smbx serve for the multichannel row ...");
    let server = start_server(s.file_size, true)?;
    std::env::set_var("SMBX_PASSWORD", &server.password);
    let pid = server.child.id().to_string();
    let tcp = format!("smb://{USER}@127.0.0.1:{}/share/data", server.tcp_port);
    let mc = format!("{tcp}?multichannel={MC_CHANNELS}");
    let args: Vec<String> = vec![
        "-b512K".into(),
        "-o8".into(),
        "-t1".into(),
        "-s".into(),
        format!("-d{}", s.duration),
        format!("-W{}", s.warmup),
        "--server-pid".into(),
        pid.clone(),
        "--out".into(),
        s.out.join("multichannel").display().to_string(),
        "--labels".into(),
        MC_LABELS.join(","),
        tcp.clone(),
        mc,
    ];
    eprintln!("smbx demo: multichannel sweep");
    let plan = sweep::plan(&args).map_err(|e| e.to_string())?;
    let cmd = format!("smbx bench sweep {}", args.join(" "));
    let rows = sweep::run(&plan, &cmd).map_err(|e| e.to_string())?;
    all.push(("multichannel", rows));
    drop(server);
    if let Some((_, rows)) = all.iter().find(|(n, _)| *n == "throughput") {
        let f = throughput_figure(rows);
        std::fs::write(s.out.join("throughput-vs-size.svg"), svg::render(&f))
            .map_err(|e| format!("writing the throughput chart: {e}"))?;
    }
    std::fs::write(s.out.join("index.html"), index_html(&all))
        .map_err(|e| format!("writing index.html: {e}"))?;
    print!("{}", table(&all));
    println!(
        "\nresults: {}/index.html (charts), */results.csv and */results.json",
        s.out.display()
    );
    Ok(())
}

/// Rows labelled `a` matched with those labelled `b` of the same (size, threads,
/// outstanding): "TCP" and "SMB Direct", or the multichannel row's two.
fn pairs<'r>(rows: &'r [Row], a: &str, b: &str) -> Vec<(&'r Row, &'r Row)> {
    rows.iter()
        .filter(|r| r.label == a)
        .filter_map(|t| {
            rows.iter()
                .find(|r| {
                    r.label == b
                        && r.block_size == t.block_size
                        && r.threads == t.threads
                        && r.outstanding == t.outstanding
                })
                .map(|d| (t, d))
        })
        .collect()
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.2}", a / b)
    } else {
        "-".into()
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// The comparison table.
fn table(all: &[(&str, Vec<Row>)]) -> String {
    let mut s = String::new();
    let _ =
        writeln!(
        s,
        "\n{:<10} {:>5} {:>5} | {:>9} {:>9} {:>5} | {:>8} {:>8} {:>5} | {:>8} {:>8} | {:>6} {:>6}",
        "test", "size", "t x o", "TCP IOPS", "RDMA IOPS", "ratio", "TCP MB/s", "RDMA", "ratio",
        "TCP p50", "RDMA p50", "TCP", "RDMA"
    );
    let _ = writeln!(
        s,
        "{:<10} {:>5} {:>5} | {:>9} {:>9} {:>5} | {:>8} {:>8} {:>5} | {:>8} {:>8} | {:>6} {:>6}",
        "", "", "", "", "", "", "", "", "", "µs", "µs", "cyc/B", "cyc/B"
    );
    for (name, rows) in all {
        for (t, d) in pairs(rows, "TCP", "SMB Direct") {
            let _ = writeln!(
                s,
                "{:<10} {:>5} {:>5} | {:>9.0} {:>9.0} {:>5} | {:>8.1} {:>8.1} {:>5} | {:>8} {:>8} | {:>6} {:>6}",
                name,
                svg::short_size(t.block_size),
                format!("{}x{}", t.threads, t.outstanding),
                t.iops,
                d.iops,
                ratio(d.iops, t.iops),
                t.bytes_per_sec / 1e6,
                d.bytes_per_sec / 1e6,
                ratio(d.bytes_per_sec, t.bytes_per_sec),
                opt(t.latency_p50_us, 1),
                opt(d.latency_p50_us, 1),
                opt(t.cycles_per_byte, 2),
                opt(d.cycles_per_byte, 2),
            );
        }
    }
    s.push_str(
        "\nratio = SMB Direct / TCP; cyc/B = busy CPU cycles of the whole machine (server and \
         client) per byte moved.\n",
    );
    let mc: Vec<(&Row, &Row)> = all
        .iter()
        .filter(|(name, _)| *name == "multichannel")
        .flat_map(|(_, rows)| pairs(rows, MC_LABELS[0], MC_LABELS[1]))
        .collect();
    if !mc.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<12} {:>5} {:>5} | {:>11} {:>11} {:>5} | {:>6} {:>6}",
            "multichannel", "size", "t x o", "1 ch MB/s", "3 ch MB/s", "ratio", "1 ch", "3 ch"
        );
        let _ = writeln!(
            s,
            "{:<12} {:>5} {:>5} | {:>11} {:>11} {:>5} | {:>6} {:>6}",
            "", "", "", "", "", "", "cyc/B", "cyc/B"
        );
        for (one, three) in mc {
            let _ = writeln!(
                s,
                "{:<12} {:>5} {:>5} | {:>11.1} {:>11.1} {:>5} | {:>6} {:>6}",
                "TCP",
                svg::short_size(one.block_size),
                format!("{}x{}", one.threads, one.outstanding),
                one.bytes_per_sec / 1e6,
                three.bytes_per_sec / 1e6,
                ratio(three.bytes_per_sec, one.bytes_per_sec),
                opt(one.cycles_per_byte, 2),
                opt(three.cycles_per_byte, 2),
            );
        }
        s.push_str(
            "ratio = 3 channels / 1 channel, all on this host's loopback (one CPU budget for \
             every channel; bench/multichannel.sh measures separate links).\n",
        );
    }
    s
}

fn throughput_figure(rows: &[Row]) -> Figure {
    let mut sizes: Vec<u64> = rows.iter().map(|r| r.block_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let series = ["TCP", "SMB Direct"]
        .iter()
        .enumerate()
        .map(|(i, label)| Series {
            name: label.to_string(),
            points: rows
                .iter()
                .filter(|r| r.label == *label)
                .map(|r| (r.block_size as f64, r.bytes_per_sec / 1e6))
                .collect(),
            color: i,
            dashed: false,
        })
        .collect();
    Figure {
        title: "Throughput against I/O size (sequential reads)".into(),
        charts: vec![Chart {
            title: "MB/s".into(),
            x: Axis {
                label: "I/O size (bytes, log scale)".into(),
                scale: Scale::Log,
                ticks: Some(
                    sizes
                        .iter()
                        .map(|&b| (b as f64, svg::short_size(b)))
                        .collect(),
                ),
            },
            y: Axis {
                label: "MB/s".into(),
                scale: Scale::Linear,
                ticks: None,
            },
            series,
        }],
    }
}

fn index_html(all: &[(&str, Vec<Row>)]) -> String {
    let mut h = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>smbx demo: TCP against \
         SMB Direct</title></head><body><h1>smbx demo: TCP against SMB Direct</h1><pre>",
    );
    h.push_str(&svg::escape(&table(all)));
    h.push_str("</pre><h2>throughput</h2><img src=\"throughput-vs-size.svg\">");
    for (name, _) in all {
        let _ = write!(
            h,
            "<h2>{name}</h2><p><a href=\"{name}/index.html\">{name} sweep: every chart</a></p>"
        );
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn arguments() {
        let s = parse(&v("--out /tmp/x -d 5 --file-size 32M"))
            .unwrap()
            .unwrap();
        assert_eq!((s.duration, s.file_size), (5, 32 << 20));
        assert_eq!(s.out, PathBuf::from("/tmp/x"));
        assert!(parse(&v("--help")).unwrap().is_none());
        assert!(parse(&v("-d 0")).is_err());
        assert!(parse(&v("--file-size 1K")).is_err());
        assert!(parse(&v("--bogus")).is_err());
        let q = parse(&v("--quick")).unwrap().unwrap();
        assert!(q.quick && q.duration == 1);
    }
}
