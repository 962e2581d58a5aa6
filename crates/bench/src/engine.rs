//! The load generator: worker threads, phases (warm-up, measurement, cool-down) and the
//! live progress line.
//!
//! Each worker thread drives its targets through one [`IoQueue`] each, keeping every free
//! slot busy: submit until the queue is full, reap at least one completion, record it,
//! resubmit. Only I/Os that complete during the measured phase are recorded.

use std::io::{IsTerminal, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::cpu::{CpuUsage, Snapshot};
use crate::error::BenchError;
use crate::pattern::{Offsets, Region};
use crate::profile::{Profile, Throttle, WriteBuffer};
use crate::rng::Rng;
use crate::stats::{percentile_ns, IoKind, IoStats};
use crate::target::{AlignedBuf, Completion, IoQueue, QueueConfig, Target, ThreadShare, WriteData};
use crate::tcp_stats::TcpCounters;

const INIT: u8 = 0;
const WARMUP: u8 = 1;
const MEASURE: u8 = 2;
const COOLDOWN: u8 = 3;
const DONE: u8 = 4;

/// What one thread measured on one target.
#[derive(Debug, Clone)]
pub struct ThreadTargetResult {
    /// Index into [`RunResult::targets`].
    pub target: usize,
    /// I/Os in flight the queue allowed (`-o`, or 1 for psync).
    pub depth: usize,
    /// The measurements.
    pub stats: IoStats,
}

/// What one worker thread measured.
#[derive(Debug, Clone)]
pub struct ThreadResult {
    /// Thread number, from 0.
    pub id: usize,
    /// One entry per target the thread drove.
    pub targets: Vec<ThreadTargetResult>,
}

/// A target as run.
#[derive(Debug, Clone)]
pub struct TargetInfo {
    /// Path or URL (no password).
    pub name: String,
    /// File size in bytes.
    pub size: u64,
    /// The region used.
    pub region: Region,
    /// "io_uring", "psync" or "smb".
    pub engine: &'static str,
    /// An SMB session's channels at the end of the run (what each carried since
    /// the target was opened, warm-up included); empty for local files.
    pub channels: Vec<smbx_client::ChannelStats>,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Per thread, per target.
    pub threads: Vec<ThreadResult>,
    /// The targets.
    pub targets: Vec<TargetInfo>,
    /// Measured seconds (actual).
    pub measured_s: f64,
    /// `-D` buckets kept (the last may be partial).
    pub intervals: usize,
    /// Complete `-D` buckets.
    pub complete_intervals: usize,
    /// CPU use over the measured phase.
    pub cpu: CpuUsage,
    /// Growth of the TCP counters of this network namespace over the measured phase
    /// (`None`: they could not be read).
    pub tcp: Option<TcpCounters>,
    /// Wall-clock start of the run, seconds since the Unix epoch.
    pub start_unix: f64,
}

#[repr(align(128))]
#[derive(Default)]
struct Counters {
    ios: AtomicU64,
    bytes: AtomicU64,
    p99_ns: AtomicU64,
}

struct Shared {
    phase: AtomicU8,
    epoch: Instant,
    measure_start_ns: AtomicU64,
    abort: AtomicBool,
    /// Threads that issued and completed their `--ios` count.
    finished: AtomicUsize,
    /// When the last of them did (ns since `epoch`; 0: not yet).
    done_ns: AtomicU64,
    /// The thread that runs the phases ([`timeline`]), woken when every thread is done
    /// or one failed.
    main: std::thread::Thread,
    error: Mutex<Option<String>>,
    counters: Vec<Counters>,
}

impl Shared {
    fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
        self.abort.store(true, Ordering::Release);
        self.main.unpark();
    }

    /// Counts one thread as done with its `--ios`; the last one notes the time and wakes
    /// the phases' thread, so that a fixed amount of work is measured to its end (not to
    /// the next poll of the progress loop, up to 50 ms later).
    fn thread_done(&self) {
        if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.counters.len() {
            let ns = self.epoch.elapsed().as_nanos() as u64;
            self.done_ns.store(ns.max(1), Ordering::Release);
            self.main.unpark();
        }
    }
}

/// The region of a target the profile uses, or why it cannot.
pub fn region_of(p: &Profile, name: &str, size: u64) -> Result<Region, BenchError> {
    let avail = size.saturating_sub(p.base);
    let len = p.max_len.map_or(avail, |l| l.min(avail));
    if len < p.block_size {
        return Err(BenchError::Other(format!(
            "{name} is {size} bytes: too small for {} byte I/Os from offset {} \
             (create it with -c<size>)",
            p.block_size, p.base
        )));
    }
    Ok(Region { base: p.base, len })
}

/// Runs the profile against opened targets (in the profile's order).
pub fn run(p: &Profile, targets: &[Arc<dyn Target>]) -> Result<RunResult, BenchError> {
    let mut infos = targets
        .iter()
        .map(|t| {
            Ok(TargetInfo {
                name: t.name().to_string(),
                size: t.size(),
                region: region_of(p, t.name(), t.size())?,
                engine: t.engine(),
                channels: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    // Fail early on a bad --server-pid.
    Snapshot::take(p.server_pid).map_err(|e| BenchError::io("reading CPU counters", e))?;

    let layout = p.thread_layout();
    let shareable = targets.iter().all(|t| t.shares_threads());
    if p.os_threads.is_some() && !shareable {
        return Err(BenchError::Other(
            "--os-threads: only smb:// targets can share an OS thread between threads".into(),
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let groups = if shareable {
        let os = p
            .os_threads
            .map_or_else(|| even_os_threads(layout.len(), cores), |n| n as usize);
        os_thread_groups(layout.len(), os)
    } else {
        os_thread_groups(layout.len(), layout.len())
    };
    if let Some(cpus) = &p.affinity {
        crate::affinity::check_allowed(cpus)
            .map_err(|e| BenchError::Other(format!("--affinity: {e}")))?;
    }
    let duration_ms = p.duration_s * 1000;
    let intervals = duration_ms.div_ceil(p.iops_interval_ms).max(1) as usize;
    let complete = (duration_ms / p.iops_interval_ms) as usize;
    let shared = Shared {
        phase: AtomicU8::new(INIT),
        epoch: Instant::now(),
        measure_start_ns: AtomicU64::new(0),
        abort: AtomicBool::new(false),
        finished: AtomicUsize::new(0),
        done_ns: AtomicU64::new(0),
        main: std::thread::current(),
        error: Mutex::new(None),
        counters: (0..layout.len()).map(|_| Counters::default()).collect(),
    };
    let shared_offsets: Vec<Arc<AtomicU64>> = targets.iter().map(|_| Arc::default()).collect();
    let start_unix = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let show_progress = p.progress || std::io::stderr().is_terminal();

    let (threads, (cpu, tcp, measured_s)) = std::thread::scope(|s| {
        let (ready_tx, ready_rx) = mpsc::channel();
        let handles: Vec<_> = groups
            .iter()
            .enumerate()
            .map(|(n, ids)| {
                let ready = ready_tx.clone();
                let shared = &shared;
                let infos = &infos;
                let shared_offsets = &shared_offsets;
                let layout = &layout;
                s.spawn(move || {
                    // Round-robin over --affinity: OS thread n on the list's n-th CPU.
                    if let Some(cpus) = &p.affinity {
                        let cpu = cpus[n % cpus.len()];
                        if let Err(e) = crate::affinity::pin_current_thread(cpu) {
                            let what = format!("--affinity: pinning an OS thread to CPU {cpu}");
                            let _ = ready.send(Err(BenchError::io(what, e)));
                            return Vec::new();
                        }
                    }
                    worker(
                        ids,
                        p,
                        layout,
                        targets,
                        infos,
                        shared_offsets,
                        intervals,
                        shared,
                        ready,
                    )
                })
            })
            .collect();
        drop(ready_tx);
        let mut setup_error = None;
        for r in ready_rx.iter() {
            if let Err(e) = r {
                setup_error.get_or_insert(e);
            }
        }
        let outcome = match setup_error {
            Some(e) => {
                shared.phase.store(DONE, Ordering::Release);
                Err(e)
            }
            None => timeline(p, &shared, show_progress),
        };
        let mut threads: Vec<ThreadResult> = handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .flatten()
            .collect();
        threads.sort_by_key(|t| t.id);
        outcome.map(|measured| (threads, measured))
    })?;
    if let Some(msg) = shared.error.lock().ok().and_then(|mut e| e.take()) {
        return Err(BenchError::Other(msg));
    }
    for (info, t) in infos.iter_mut().zip(targets) {
        info.channels = t.channels();
    }
    Ok(RunResult {
        threads,
        targets: infos,
        measured_s,
        intervals,
        complete_intervals: complete,
        cpu,
        tcp,
        start_unix,
    })
}

/// Drives the phases from the main thread; returns CPU use, the growth of the TCP
/// counters and the measured seconds.
fn timeline(
    p: &Profile,
    shared: &Shared,
    show: bool,
) -> Result<(CpuUsage, Option<TcpCounters>, f64), BenchError> {
    let mut progress = Progress::new(show);
    // Without a warm-up the threads start in the measured phase: set to WARMUP first,
    // they ran (a fast target: every `--ios` of them) while the counters below were
    // read, and those I/Os went unrecorded.
    if p.warmup_s > 0 {
        shared.phase.store(WARMUP, Ordering::Release);
        progress.wait(shared, "warm-up", p.warmup_s);
    }
    let cpu_err = |e| BenchError::io("reading CPU counters", e);
    let a = Snapshot::take(p.server_pid).map_err(cpu_err)?;
    let tcp_a = TcpCounters::take();
    let start = Instant::now();
    shared.measure_start_ns.store(
        start.duration_since(shared.epoch).as_nanos() as u64,
        Ordering::Release,
    );
    shared.phase.store(MEASURE, Ordering::Release);
    progress.wait(shared, "measure", p.duration_s);
    shared.phase.store(COOLDOWN, Ordering::Release);
    let measured = measured_secs(
        shared.measure_start_ns.load(Ordering::Acquire),
        shared.done_ns.load(Ordering::Acquire),
        start.elapsed(),
    );
    let b = Snapshot::take(p.server_pid).map_err(cpu_err)?;
    let tcp = tcp_a.zip(TcpCounters::take()).map(|(a, b)| b.since(&a));
    progress.wait(shared, "cool-down", p.cooldown_s);
    shared.phase.store(DONE, Ordering::Release);
    progress.finish();
    Ok((CpuUsage::between(&a, &b, p.server_pid), tcp, measured))
}

/// The measured phase's length: up to when the last thread finished its `--ios` when that
/// was during the phase (`done_ns`, like `start_ns`, in ns since the run's epoch; 0: not
/// finished), else all of it (`elapsed`).
fn measured_secs(start_ns: u64, done_ns: u64, elapsed: Duration) -> f64 {
    if done_ns > start_ns {
        Duration::from_nanos(done_ns - start_ns)
            .min(elapsed)
            .as_secs_f64()
    } else {
        elapsed.as_secs_f64()
    }
}

struct Progress {
    show: bool,
    tty: bool,
    last_ios: u64,
    last_bytes: u64,
    last_at: Instant,
    printed: bool,
}

impl Progress {
    fn new(show: bool) -> Progress {
        Progress {
            show,
            tty: std::io::stderr().is_terminal(),
            last_ios: 0,
            last_bytes: 0,
            last_at: Instant::now(),
            printed: false,
        }
    }

    /// Sleeps `secs`, printing a line each second; returns early on abort or once every
    /// thread has done its `--ios` count.
    fn wait(&mut self, shared: &Shared, label: &str, secs: u64) {
        let start = Instant::now();
        let end = start + Duration::from_secs(secs);
        let mut tick = 1u64;
        loop {
            let now = Instant::now();
            if now >= end
                || shared.abort.load(Ordering::Acquire)
                || shared.finished.load(Ordering::Acquire) == shared.counters.len()
            {
                return;
            }
            let next = (start + Duration::from_secs(tick)).min(end);
            // Woken early by the last thread to finish its `--ios`, or by a failure.
            std::thread::park_timeout(
                next.saturating_duration_since(now)
                    .min(Duration::from_millis(50)),
            );
            if Instant::now() >= start + Duration::from_secs(tick) {
                self.line(shared, label, tick, secs);
                tick += 1;
            }
        }
    }

    fn line(&mut self, shared: &Shared, label: &str, t: u64, of: u64) {
        if !self.show {
            return;
        }
        let (mut ios, mut bytes, mut p99) = (0u64, 0u64, 0u64);
        for c in &shared.counters {
            ios += c.ios.load(Ordering::Relaxed);
            bytes += c.bytes.load(Ordering::Relaxed);
            p99 = p99.max(c.p99_ns.load(Ordering::Relaxed));
        }
        let dt = self.last_at.elapsed().as_secs_f64().max(1e-9);
        let iops = (ios - self.last_ios) as f64 / dt;
        let mibs = (bytes - self.last_bytes) as f64 / dt / 1048576.0;
        (self.last_ios, self.last_bytes, self.last_at) = (ios, bytes, Instant::now());
        let p99 = if p99 > 0 {
            format!("{:.1} us", p99 as f64 / 1000.0)
        } else {
            "-".into()
        };
        let msg =
            format!("{label:>9} {t:>4}/{of}s {iops:>11.0} IOPS {mibs:>10.2} MiB/s  p99 {p99}");
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r{msg:<72}")
        } else {
            writeln!(err, "{msg}")
        };
        let _ = err.flush();
        self.printed = true;
    }

    fn finish(&mut self) {
        if self.show && self.tty && self.printed {
            eprintln!();
        }
    }
}

/// One thread's state on one target.
struct Lane {
    /// Which of the OS thread's worker threads (index into its `ids`).
    worker: usize,
    target: usize,
    queue: Box<dyn IoQueue>,
    offsets: Offsets,
    free: Vec<usize>,
    depth: usize,
    started: Vec<Instant>,
    kinds: Vec<IoKind>,
    at: Vec<u64>,
    stats: IoStats,
    submitted: u64,
}

/// Worker thread ids per OS thread: `threads` ids dealt over at most `os` OS threads
/// (`os >= threads`: one each), so that OS thread `k` runs ids `k`, `k + n`, ...
pub fn os_thread_groups(threads: usize, os: usize) -> Vec<Vec<usize>> {
    let n = os.clamp(1, threads.max(1));
    let mut groups = vec![Vec::new(); n];
    for id in 0..threads {
        groups[id % n].push(id);
    }
    groups.retain(|g| !g.is_empty());
    groups
}

/// How many OS threads run `threads` worker threads by default on `cores` cores: one each
/// when they fit, else a count that deals them evenly (each OS thread gets a time share
/// of the CPUs from the kernel, and splits it among its workers: uneven groups would give
/// a worker alone on its OS thread twice the I/Os of two that share one). That is the
/// largest divisor of `threads` that is at most `cores`, unless it leaves more than half
/// the cores without a client thread; then one OS thread per worker thread, which the
/// kernel shares out evenly.
pub fn even_os_threads(threads: usize, cores: usize) -> usize {
    let (threads, cores) = (threads.max(1), cores.max(1));
    if threads <= cores {
        return threads;
    }
    let d = (1..=cores).rev().find(|d| threads % d == 0).unwrap_or(1);
    if 2 * d >= cores {
        d
    } else {
        threads
    }
}

/// One worker thread's own state, beside its lanes.
struct Worker {
    rng: Rng,
    /// Counted in [`Shared::finished`] (its `--ios` are done).
    finished: bool,
}

/// Runs the worker threads `ids` on this OS thread: each with its own lanes (its own
/// queue on each of its targets), random numbers, write source and figures.
#[allow(clippy::too_many_arguments)]
fn worker(
    ids: &[usize],
    p: &Profile,
    layout: &[Vec<usize>],
    targets: &[Arc<dyn Target>],
    infos: &[TargetInfo],
    shared_offsets: &[Arc<AtomicU64>],
    intervals: usize,
    shared: &Shared,
    ready: mpsc::Sender<Result<(), BenchError>>,
) -> Vec<ThreadResult> {
    let block = p.block_size as usize;
    // Several worker threads on this OS thread: their queues share what drives them.
    let share = (ids.len() > 1).then(|| Rc::new(ThreadShare::default()));
    let mut workers = Vec::with_capacity(ids.len());
    let mut lanes = Vec::new();
    for (w, &id) in ids.iter().enumerate() {
        let mut rng = Rng::new(p.seed, id as u64 + 1);
        let source = Arc::new(write_source(p, &mut rng));
        for &t in &layout[id] {
            let cfg = QueueConfig {
                depth: p.outstanding as usize,
                block,
                write_source: source.clone(),
                share: share.clone(),
            };
            match targets[t].queue(&cfg) {
                Ok(queue) => {
                    let depth = queue.depth().min(cfg.depth).max(1);
                    lanes.push(Lane {
                        worker: w,
                        target: t,
                        offsets: Offsets::new(
                            p.access,
                            infos[t].region,
                            p.block_size,
                            p.thread_rank_on_target(id),
                            p.thread_stride,
                            shared_offsets[t].clone(),
                        ),
                        queue,
                        free: (0..depth).rev().collect(),
                        depth,
                        started: vec![shared.epoch; depth],
                        kinds: vec![IoKind::Read; depth],
                        at: vec![0; depth],
                        stats: IoStats::new(intervals),
                        submitted: 0,
                    });
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return Vec::new();
                }
            }
        }
        workers.push(Worker {
            rng,
            finished: false,
        });
    }
    let _ = ready.send(Ok(()));
    drop(ready);
    while shared.phase.load(Ordering::Acquire) == INIT {
        std::thread::sleep(Duration::from_micros(200));
    }

    let rate = p.throttle.map(|t| match t {
        Throttle::Iops(n) => n as f64,
        Throttle::BytesPerMs(b) => b as f64 * 1000.0 / p.block_size as f64,
    });
    let mut scratch = match p.write_buffer {
        WriteBuffer::RandomPerIo => vec![0u8; block],
        _ => Vec::new(),
    };
    let interval_ns = p.iops_interval_ms.saturating_mul(1_000_000).max(1);
    let began = Instant::now();
    let mut last_publish = began;
    let mut loops = 0u32;
    let mut batch: Vec<Completion> = Vec::new();
    let single = lanes.len() == 1;
    // The lane each pass starts from, moved on by one every pass: lanes that share this
    // OS thread take turns at submitting first, at being reaped first and at being the
    // one waited on, so none leads the others by its place in the list.
    let mut turn = 0usize;
    loop {
        let n = lanes.len();
        turn = (turn + 1) % n.max(1);
        let stopping =
            shared.abort.load(Ordering::Relaxed) || shared.phase.load(Ordering::Acquire) >= DONE;
        let mut throttled = false;
        if !stopping {
            let allowed = rate.map(|r| began.elapsed().as_secs_f64() * r + 1.0);
            for k in 0..n {
                let lane = &mut lanes[(turn + k) % n];
                let wk = &mut workers[lane.worker];
                while let Some(slot) = lane.free.pop() {
                    if p.max_ios.is_some_and(|m| lane.submitted >= m) {
                        lane.free.push(slot);
                        break;
                    }
                    if allowed.is_some_and(|a| lane.submitted as f64 >= a) {
                        lane.free.push(slot);
                        throttled = true;
                        break;
                    }
                    let write = match p.write_percent {
                        0 => false,
                        100 => true,
                        w => wk.rng.below(100) < u64::from(w),
                    };
                    let offset = lane.offsets.next(&mut wk.rng);
                    let kind = if write { IoKind::Write } else { IoKind::Read };
                    let data = match p.write_buffer {
                        WriteBuffer::RandomPerIo if write => {
                            wk.rng.fill(&mut scratch);
                            WriteData::Bytes(&scratch)
                        }
                        WriteBuffer::RandomBuffer(size) if write => {
                            let max = size - p.block_size;
                            WriteData::Source((wk.rng.below(max / 512 + 1) * 512) as usize)
                        }
                        _ => WriteData::Source(0),
                    };
                    lane.kinds[slot] = kind;
                    lane.at[slot] = offset;
                    lane.started[slot] = Instant::now();
                    if let Err(e) = lane.queue.submit(slot, kind, offset, data) {
                        lane.free.push(slot);
                        shared.fail(format!("{}: submitting I/O: {e}", infos[lane.target].name));
                        break;
                    }
                    lane.submitted += 1;
                }
            }
        }
        // A worker thread whose lanes have issued and completed their `--ios` is done.
        if let Some(m) = p.max_ios {
            for (w, wk) in workers.iter_mut().enumerate() {
                let mut mine = lanes.iter().filter(|l| l.worker == w);
                if !wk.finished && mine.all(|l| l.submitted >= m && l.free.len() == l.depth) {
                    wk.finished = true;
                    shared.thread_done();
                }
            }
        }
        let inflight: usize = lanes.iter().map(|l| l.depth - l.free.len()).sum();
        if inflight == 0 {
            if stopping || shared.abort.load(Ordering::Relaxed) {
                break;
            }
            if workers.iter().all(|w| w.finished) {
                break;
            }
            if let (true, Some(r)) = (throttled, rate) {
                // Sleep until the lane furthest behind may submit again (at most 10 ms,
                // to notice the end of the run).
                let next = lanes.iter().map(|l| l.submitted).min().unwrap_or(0) as f64 / r;
                let wait = (next - began.elapsed().as_secs_f64()).clamp(0.0, 0.01);
                std::thread::sleep(Duration::from_secs_f64(wait.max(1e-5)));
            }
            continue;
        }
        // Reap: block on the only lane, or poll all and block on the first busy one from
        // this pass's turn (a queue sharing this OS thread with others stops waiting once
        // any has finished I/Os: Target::shares_threads).
        let mut reaped = 0;
        for k in 0..n {
            let lane = &mut lanes[(turn + k) % n];
            let before = batch.len();
            let min = usize::from(single);
            if let Err(e) = lane.queue.reap(min, &mut batch) {
                shared.fail(format!("{}: waiting for I/O: {e}", infos[lane.target].name));
                return finish(ids, lanes);
            }
            reaped += batch.len() - before;
            let now = Instant::now();
            let c = &shared.counters[ids[lane.worker]];
            reaped_into(lane, &mut batch, before, now, shared, infos, interval_ns, c);
        }
        if reaped == 0 && !single {
            let busy = (0..n)
                .map(|k| (turn + k) % n)
                .find(|&i| lanes[i].free.len() < lanes[i].depth);
            if let Some(lane) = busy.map(|i| &mut lanes[i]) {
                if let Err(e) = lane.queue.reap(1, &mut batch) {
                    shared.fail(format!("{}: waiting for I/O: {e}", infos[lane.target].name));
                    return finish(ids, lanes);
                }
                let now = Instant::now();
                let c = &shared.counters[ids[lane.worker]];
                reaped_into(lane, &mut batch, 0, now, shared, infos, interval_ns, c);
            }
        }
        loops = loops.wrapping_add(1);
        if loops.is_multiple_of(256) && last_publish.elapsed() >= Duration::from_millis(500) {
            last_publish = Instant::now();
            for (w, &id) in ids.iter().enumerate() {
                let p99 = lanes
                    .iter()
                    .filter(|l| l.worker == w)
                    .map(|l| percentile_ns(&l.stats.total(), 99.0))
                    .max()
                    .unwrap_or(0);
                shared.counters[id].p99_ns.store(p99, Ordering::Relaxed);
            }
        }
    }
    finish(ids, lanes)
}

#[allow(clippy::too_many_arguments)]
fn reaped_into(
    lane: &mut Lane,
    batch: &mut Vec<Completion>,
    from: usize,
    now: Instant,
    shared: &Shared,
    infos: &[TargetInfo],
    interval_ns: u64,
    counters: &Counters,
) {
    if batch.len() <= from {
        return;
    }
    let measuring = shared.phase.load(Ordering::Acquire) == MEASURE;
    let interval = if measuring {
        let start = shared.measure_start_ns.load(Ordering::Acquire);
        let t = now.duration_since(shared.epoch).as_nanos() as u64;
        (t.saturating_sub(start) / interval_ns) as usize
    } else {
        0
    };
    let (mut ios, mut bytes) = (0u64, 0u64);
    for c in batch.drain(from..) {
        let Some(&start) = lane.started.get(c.slot) else {
            shared.fail(format!(
                "{}: completion for unknown slot",
                infos[lane.target].name
            ));
            continue;
        };
        let kind = lane.kinds[c.slot];
        match c.result {
            Ok(n) => {
                if measuring {
                    let ns = now.duration_since(start).as_nanos() as u64;
                    lane.stats.record(kind, ns, n as u64, interval);
                }
                ios += 1;
                bytes += n as u64;
            }
            Err(e) => {
                let what = match kind {
                    IoKind::Read => "read",
                    IoKind::Write => "write",
                };
                shared.fail(format!(
                    "{}: {what} at offset {}: {e}",
                    infos[lane.target].name, lane.at[c.slot]
                ));
            }
        }
        lane.free.push(c.slot);
    }
    counters.ios.fetch_add(ios, Ordering::Relaxed);
    counters.bytes.fetch_add(bytes, Ordering::Relaxed);
}

/// Each worker thread's figures, its lanes' in their order.
fn finish(ids: &[usize], lanes: Vec<Lane>) -> Vec<ThreadResult> {
    let mut out: Vec<ThreadResult> = ids
        .iter()
        .map(|&id| ThreadResult {
            id,
            targets: Vec::new(),
        })
        .collect();
    for l in lanes {
        out[l.worker].targets.push(ThreadTargetResult {
            target: l.target,
            depth: l.depth,
            stats: l.stats,
        });
    }
    out
}

/// The buffer writes take their data from (`-Z`).
fn write_source(p: &Profile, rng: &mut Rng) -> AlignedBuf {
    let block = p.block_size as usize;
    match p.write_buffer {
        WriteBuffer::Zero | WriteBuffer::RandomPerIo => AlignedBuf::zeroed(block),
        WriteBuffer::Pattern => {
            let mut b = AlignedBuf::zeroed(block);
            for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
                *x = i as u8;
            }
            b
        }
        WriteBuffer::RandomBuffer(size) => {
            let mut b = AlignedBuf::zeroed(size as usize);
            rng.fill(b.as_mut_slice());
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::measured_secs;
    use std::time::Duration;

    #[test]
    fn a_fixed_amount_of_work_is_measured_to_its_last_completion() {
        // Every thread done 120 ms into a phase that started at 1 s: 120 ms, not the
        // 150 ms that had passed when the phases' thread looked.
        let got = measured_secs(1_000_000_000, 1_120_000_000, Duration::from_millis(150));
        assert!((got - 0.120).abs() < 1e-9, "{got}");
        // Not done, or done before the phase began (all in the warm-up): the whole phase.
        assert_eq!(
            measured_secs(1_000_000_000, 0, Duration::from_millis(150)),
            0.150
        );
        assert_eq!(
            measured_secs(1_000_000_000, 900_000_000, Duration::from_millis(150)),
            0.150
        );
        // Never longer than the phase itself.
        assert_eq!(
            measured_secs(1_000_000_000, 2_000_000_000, Duration::from_millis(150)),
            0.150
        );
    }
}
