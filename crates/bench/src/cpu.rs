//! CPU accounting: the machine (/proc/stat), this process (getrusage), another process and
//! its descendants (/proc/PID/stat), and the nominal clock for cycles per byte.

use std::fs;
use std::io;
use std::time::Instant;

use serde::Serialize;

/// One CPU's counters from /proc/stat, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq + steal.
    pub kernel: u64,
    /// idle + iowait.
    pub idle: u64,
}

impl CpuTicks {
    fn total(&self) -> u64 {
        self.user + self.kernel + self.idle
    }
}

/// Parses the per-CPU lines (`cpuN ...`) of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Vec<CpuTicks> {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            let f = |i: usize| v.get(i).copied().unwrap_or(0);
            CpuTicks {
                user: f(0) + f(1),
                kernel: f(2) + f(5) + f(6) + f(7),
                idle: f(3) + f(4),
            }
        })
        .collect()
}

/// utime and stime (fields 14 and 15) and the parent pid (field 4) from a
/// /proc/PID/stat line; the command name may contain spaces and parentheses.
pub fn parse_pid_stat(text: &str) -> Option<(u32, u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) ... utime(14) stime(15) → indices 0,1,...,11,12.
    Some((
        f.get(1)?.parse().ok()?,
        f.get(11)?.parse().ok()?,
        f.get(12)?.parse().ok()?,
    ))
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf reads a constant configuration value; no pointers are involved.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// This process's (user, kernel) CPU seconds, all threads.
pub fn self_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    let s = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

/// (user, kernel) CPU seconds of `pid` (all its threads) plus its live descendants.
pub fn pid_cpu(pid: u32) -> io::Result<(f64, f64)> {
    let own = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, mut ut, mut st) = parse_pid_stat(&own)
        .ok_or_else(|| io::Error::other(format!("cannot parse /proc/{pid}/stat")))?;
    // Descendants: collect (pid, ppid, ticks) of every process, then walk down from pid.
    let mut procs = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((pp, u, s)) = fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|t| parse_pid_stat(&t))
            {
                procs.push((p, pp, u, s));
            }
        }
    }
    let mut frontier = vec![pid];
    let mut seen = 0usize;
    while let Some(parent) = frontier.pop() {
        for &(p, pp, u, s) in &procs {
            if pp == parent && p != pid && seen < 100_000 {
                seen += 1;
                ut += u;
                st += s;
                frontier.push(p);
            }
        }
    }
    let hz = clock_ticks_per_sec();
    Ok((ut as f64 / hz, st as f64 / hz))
}

/// The nominal clock in MHz: cpufreq's base_frequency, else /proc/cpuinfo's "cpu MHz".
pub fn nominal_mhz() -> Option<f64> {
    if let Ok(khz) = fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency") {
        if let Ok(k) = khz.trim().parse::<f64>() {
            return Some(k / 1000.0);
        }
    }
    let info = fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// Counters at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    at: Instant,
    cpus: Vec<CpuTicks>,
    me: (f64, f64),
    server: Option<(f64, f64)>,
}

impl Snapshot {
    /// Reads all counters now; `server` is the `--server-pid` process.
    pub fn take(server: Option<u32>) -> io::Result<Snapshot> {
        let cpus = parse_proc_stat(&fs::read_to_string("/proc/stat")?);
        let server = match server {
            Some(pid) => Some(pid_cpu(pid).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("--server-pid {pid}: /proc/{pid}/stat: {e}"),
                )
            })?),
            None => None,
        };
        Ok(Snapshot {
            at: Instant::now(),
            cpus,
            me: self_cpu(),
            server,
        })
    }
}

/// One CPU's use over the measured interval, in percent of that CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuLine {
    /// CPU number.
    pub id: usize,
    /// user + kernel.
    pub usage_percent: f64,
    /// User time.
    pub user_percent: f64,
    /// Kernel time (including interrupts).
    pub kernel_percent: f64,
    /// Idle (including I/O wait).
    pub idle_percent: f64,
}

/// A process's CPU use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessCpu {
    /// Process id (absent for the bench process itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// CPU seconds (user + kernel).
    pub cpu_seconds: f64,
    /// Percent of the whole machine (0..100).
    pub percent: f64,
    /// User time, percent of the whole machine.
    pub user_percent: f64,
    /// Kernel time, percent of the whole machine.
    pub kernel_percent: f64,
    /// Percent of one core, as top shows it (0..100 × CPUs).
    pub core_percent: f64,
}

/// CPU use between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuUsage {
    /// Online CPUs counted in /proc/stat.
    pub cpus: usize,
    /// Nominal clock (MHz), if known.
    pub mhz: Option<f64>,
    /// The bench process, percent of the whole machine (0..100).
    pub process_percent: f64,
    /// The whole machine's busy time, percent (0..100).
    pub system_percent: f64,
    /// Busy CPU seconds of the whole machine.
    pub system_busy_seconds: f64,
    /// The bench process in detail.
    pub process: ProcessCpu,
    /// The `--server-pid` process (and descendants), when given.
    pub server: Option<ProcessCpu>,
    /// Each CPU.
    pub per_cpu: Vec<CpuLine>,
}

fn process(pid: Option<u32>, a: (f64, f64), b: (f64, f64), wall: f64, cpus: usize) -> ProcessCpu {
    let (u, k) = ((b.0 - a.0).max(0.0), (b.1 - a.1).max(0.0));
    let denom = (wall * cpus.max(1) as f64).max(f64::MIN_POSITIVE);
    ProcessCpu {
        pid,
        cpu_seconds: u + k,
        percent: (u + k) / denom * 100.0,
        user_percent: u / denom * 100.0,
        kernel_percent: k / denom * 100.0,
        core_percent: (u + k) / wall.max(f64::MIN_POSITIVE) * 100.0,
    }
}

impl CpuUsage {
    /// Use between `a` and `b`.
    pub fn between(a: &Snapshot, b: &Snapshot, server_pid: Option<u32>) -> CpuUsage {
        let wall = b.at.duration_since(a.at).as_secs_f64();
        let hz = clock_ticks_per_sec();
        let mut per_cpu = Vec::new();
        let (mut busy, mut total) = (0u64, 0u64);
        for (id, (x, y)) in a.cpus.iter().zip(&b.cpus).enumerate() {
            let du = y.user.saturating_sub(x.user);
            let dk = y.kernel.saturating_sub(x.kernel);
            let di = y.idle.saturating_sub(x.idle);
            let dt = y.total().saturating_sub(x.total()).max(1) as f64;
            busy += du + dk;
            total += du + dk + di;
            per_cpu.push(CpuLine {
                id,
                usage_percent: (du + dk) as f64 / dt * 100.0,
                user_percent: du as f64 / dt * 100.0,
                kernel_percent: dk as f64 / dt * 100.0,
                idle_percent: di as f64 / dt * 100.0,
            });
        }
        let cpus = per_cpu.len().max(1);
        let me = process(None, a.me, b.me, wall, cpus);
        let server = match (a.server, b.server) {
            (Some(x), Some(y)) => Some(process(server_pid, x, y, wall, cpus)),
            _ => None,
        };
        CpuUsage {
            cpus,
            mhz: nominal_mhz(),
            process_percent: me.percent,
            system_percent: if total > 0 {
                busy as f64 / total as f64 * 100.0
            } else {
                0.0
            },
            system_busy_seconds: busy as f64 / hz,
            process: me,
            server,
            per_cpu,
        }
    }

    /// Cycles per byte for `cpu_seconds` of work moving `bytes`.
    pub fn cycles_per_byte(&self, cpu_seconds: f64, bytes: u64) -> Option<f64> {
        let mhz = self.mhz?;
        (bytes > 0).then(|| cpu_seconds * mhz * 1e6 / bytes as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines() {
        let t = "cpu  10 1 5 100 2 0 0 0 0 0\ncpu0 4 1 2 50 1 1 1 1 0 0\ncpu1 6 0 3 50 1 0 0 0\nintr 5\n";
        let v = parse_proc_stat(t);
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0],
            CpuTicks {
                user: 5,
                kernel: 5,
                idle: 51
            }
        );
    }

    #[test]
    fn pid_stat_with_odd_name() {
        let t = "42 (smbd: a) b) S 7 42 42 0 -1 4194560 100 0 0 0 123 45 0 0 20 0 3 0";
        assert_eq!(parse_pid_stat(t), Some((7, 123, 45)));
        assert_eq!(parse_pid_stat("garbage"), None);
        assert_eq!(parse_pid_stat("1 (x) S"), None);
    }

    #[test]
    fn snapshots_give_sane_percentages() {
        let a = Snapshot::take(Some(std::process::id())).unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = Snapshot::take(Some(std::process::id())).unwrap();
        let u = CpuUsage::between(&a, &b, Some(std::process::id()));
        assert!(u.cpus >= 1);
        assert!((0.0..=100.0).contains(&u.system_percent));
        assert!(u.process.core_percent >= 0.0);
        assert!(u.server.is_some());
        for c in &u.per_cpu {
            let sum = c.user_percent + c.kernel_percent + c.idle_percent;
            assert!((sum - 100.0).abs() < 1e-6 || sum == 0.0, "{c:?}");
        }
        assert_eq!(u.cycles_per_byte(1.0, 0), None);
    }
}
