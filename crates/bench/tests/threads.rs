//! The engine's thread and depth bookkeeping against a counting target (no files, no
//! network): `-t4 -o8` keeps 4 × 8 I/Os in flight, each thread opens its own queue and
//! issues its own `--ios` count, and the report's totals are the sum of its threads; run
//! on fewer OS threads (`--os-threads`, a target whose queues may share one), each thread
//! still has its own queue, depth and count. The waits are bounded; no timing assertions.

use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use smbx_bench::affinity;
use smbx_bench::stats::IoKind;
use smbx_bench::target::{Completion, IoQueue, QueueConfig, Target, WriteData};
use smbx_bench::{engine, parse, render, BenchError, Format, Report};

/// Counts what every queue of the target has in flight; holds back completions until the
/// whole run has `gate` I/Os in flight at once (or 10 s have passed), so a run that keeps
/// fewer outstanding shows a smaller peak.
#[derive(Default)]
struct Counting {
    gate: usize,
    inflight: AtomicUsize,
    peak: AtomicUsize,
    opened: AtomicUsize,
    open_threads: Mutex<Vec<std::thread::ThreadId>>,
    completed: Mutex<Vec<u64>>,
    released: AtomicBool,
    submitted: AtomicU64,
    /// The target says its queues may share an OS thread (`Target::shares_threads`); its
    /// queues then complete nothing before the gate opens, even when not asked to wait.
    shares: bool,
    /// Per queue opened: the address of the `QueueConfig::share` it was given.
    share_seen: Mutex<Vec<Option<usize>>>,
    /// Per queue opened: the CPUs its OS thread may run on, and the one it ran on.
    cpus_seen: Mutex<Vec<(Vec<usize>, usize)>>,
}

struct CountingTarget(Arc<Counting>);

struct CountingQueue {
    shared: Arc<Counting>,
    index: usize,
    depth: usize,
    block: usize,
    pending: VecDeque<usize>,
    slots: Vec<bool>,
}

impl Target for CountingTarget {
    fn name(&self) -> &str {
        "counting"
    }
    fn size(&self) -> u64 {
        1 << 30
    }
    fn engine(&self) -> &'static str {
        "psync"
    }
    fn queue(&self, cfg: &QueueConfig) -> Result<Box<dyn IoQueue>, BenchError> {
        let index = self.0.opened.fetch_add(1, Ordering::SeqCst);
        self.0
            .open_threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.0.completed.lock().unwrap().push(0);
        self.0
            .share_seen
            .lock()
            .unwrap()
            .push(cfg.share.as_ref().map(|s| Rc::as_ptr(s) as usize));
        self.0.cpus_seen.lock().unwrap().push((
            affinity::allowed().unwrap(),
            affinity::current_cpu().unwrap(),
        ));
        Ok(Box::new(CountingQueue {
            shared: self.0.clone(),
            index,
            depth: cfg.depth,
            block: cfg.block,
            pending: VecDeque::new(),
            slots: vec![false; cfg.depth],
        }))
    }
    fn shares_threads(&self) -> bool {
        self.0.shares
    }
}

impl IoQueue for CountingQueue {
    fn submit(&mut self, slot: usize, _: IoKind, _: u64, _: WriteData<'_>) -> io::Result<()> {
        assert!(slot < self.depth, "slot {slot} beyond depth {}", self.depth);
        assert!(!self.slots[slot], "slot {slot} submitted twice");
        self.slots[slot] = true;
        self.pending.push_back(slot);
        self.shared.submitted.fetch_add(1, Ordering::SeqCst);
        let now = self.shared.inflight.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.peak.fetch_max(now, Ordering::SeqCst);
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if min > 0 && !self.pending.is_empty() && !self.shared.released.load(Ordering::SeqCst) {
            let until = Instant::now() + Duration::from_secs(10);
            while self.shared.inflight.load(Ordering::SeqCst) < self.shared.gate
                && !self.shared.released.load(Ordering::SeqCst)
                && Instant::now() < until
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            self.shared.released.store(true, Ordering::SeqCst);
        }
        if self.shared.shares && !self.shared.released.load(Ordering::SeqCst) {
            return Ok(());
        }
        let n = self.pending.len();
        for slot in self.pending.drain(..) {
            self.slots[slot] = false;
            out.push(Completion {
                slot,
                result: Ok(self.block),
            });
        }
        self.shared.inflight.fetch_sub(n, Ordering::SeqCst);
        self.shared.completed.lock().unwrap()[self.index] += n as u64;
        Ok(())
    }

    fn depth(&self) -> usize {
        self.depth
    }
}

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn four_threads_eight_deep_keep_thirty_two_in_flight_and_add_up() {
    let flags = "-b4K -o8 -t4 -r -d20 -W0 -C0 --ios 3000 counting";
    let p = parse(&args(flags)).unwrap();
    let counting = Arc::new(Counting {
        gate: 32,
        ..Counting::default()
    });
    let target: Arc<dyn Target> = Arc::new(CountingTarget(counting.clone()));
    let result = engine::run(&p, &[target]).unwrap();

    // Each thread opened its own queue, on its own thread.
    assert_eq!(counting.opened.load(Ordering::SeqCst), 4);
    let mut ids = counting.open_threads.lock().unwrap().clone();
    ids.sort_by_key(|id| format!("{id:?}"));
    ids.dedup();
    assert_eq!(ids.len(), 4, "queues opened on {ids:?}");
    // All 4 × 8 were in flight at once, never more.
    assert_eq!(counting.peak.load(Ordering::SeqCst), 32);
    // Every thread issued exactly its --ios count, and all of it completed.
    assert_eq!(counting.submitted.load(Ordering::SeqCst), 4 * 3000);
    assert_eq!(*counting.completed.lock().unwrap(), vec![3000; 4]);
    assert_eq!(counting.inflight.load(Ordering::SeqCst), 0);

    assert_eq!(result.threads.len(), 4);
    let mut recorded = 0;
    for t in &result.threads {
        assert_eq!(t.targets.len(), 1);
        assert_eq!(t.targets[0].depth, 8);
        let n = t.targets[0].stats.read_count();
        assert!(n <= 3000, "thread {} recorded {n}", t.id);
        assert_eq!(t.targets[0].stats.read_bytes, n * 4096);
        recorded += n;
    }
    // No warm-up: every I/O ran in the measured phase and was recorded.
    assert_eq!(recorded, 4 * 3000);

    // The report merges the threads: its totals are their sums, per thread and per target.
    let report = Report::build(&p, format!("smbx bench {flags}"), &result);
    let j: Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    assert_eq!(u(&j, "io_count"), recorded);
    assert_eq!(u(&j, "bytes"), recorded * 4096);
    let threads = j["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 4);
    let sum: u64 = threads.iter().map(|t| u(t, "io_count")).sum();
    assert_eq!(sum, recorded);
    assert_eq!(u(&j["targets"][0], "io_count"), recorded);
    assert_eq!(j["targets"][0]["threads"], serde_json::json!([0, 1, 2, 3]));
    let latency = &j["latency_us"];
    assert_eq!(u(latency, "count"), recorded);
}

#[test]
fn one_thread_keeps_its_depth_and_no_more() {
    let flags = "-b64K -o5 -t1 -s -d20 -W0 -C0 --ios 500 counting";
    let p = parse(&args(flags)).unwrap();
    let counting = Arc::new(Counting {
        gate: 5,
        ..Counting::default()
    });
    let target: Arc<dyn Target> = Arc::new(CountingTarget(counting.clone()));
    let result = engine::run(&p, &[target]).unwrap();
    assert_eq!(counting.opened.load(Ordering::SeqCst), 1);
    assert_eq!(counting.peak.load(Ordering::SeqCst), 5);
    assert_eq!(*counting.completed.lock().unwrap(), vec![500]);
    assert_eq!(result.threads.len(), 1);
    assert_eq!(result.threads[0].targets[0].depth, 5);
}

#[test]
fn four_threads_on_two_os_threads_keep_their_own_queues_depth_and_counts() {
    let flags = "-b4K -o8 -t4 -r -d20 -W0 -C0 --ios 3000 --os-threads 2 counting";
    let p = parse(&args(flags)).unwrap();
    let counting = Arc::new(Counting {
        gate: 32,
        shares: true,
        ..Counting::default()
    });
    let target: Arc<dyn Target> = Arc::new(CountingTarget(counting.clone()));
    let result = engine::run(&p, &[target]).unwrap();

    // Four queues, two on each of two OS threads, each pair given one share.
    assert_eq!(counting.opened.load(Ordering::SeqCst), 4);
    let threads = counting.open_threads.lock().unwrap().clone();
    let shares = counting.share_seen.lock().unwrap().clone();
    let mut distinct = threads.clone();
    distinct.sort_by_key(|id| format!("{id:?}"));
    distinct.dedup();
    assert_eq!(distinct.len(), 2, "queues opened on {threads:?}");
    let mut per_thread = Vec::new();
    for t in &distinct {
        let on: Vec<_> = (0..4).filter(|&i| threads[i] == *t).collect();
        assert_eq!(on.len(), 2);
        assert!(shares[on[0]].is_some());
        assert_eq!(shares[on[0]], shares[on[1]]);
        per_thread.push(shares[on[0]]);
    }
    assert_ne!(per_thread[0], per_thread[1]);
    // Still 4 × 8 in flight at once, and each thread's own --ios count.
    assert_eq!(counting.peak.load(Ordering::SeqCst), 32);
    assert_eq!(counting.submitted.load(Ordering::SeqCst), 4 * 3000);
    assert_eq!(*counting.completed.lock().unwrap(), vec![3000; 4]);
    assert_eq!(counting.inflight.load(Ordering::SeqCst), 0);
    // Four threads' figures, in thread order.
    let ids: Vec<usize> = result.threads.iter().map(|t| t.id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    for t in &result.threads {
        assert_eq!(t.targets.len(), 1);
        assert_eq!(t.targets[0].depth, 8);
        assert!(t.targets[0].stats.read_count() <= 3000);
    }
}

#[test]
fn os_threads_are_for_targets_that_share_them() {
    let p = parse(&args("-b4K -o2 -t2 -d1 -W0 --os-threads 1 counting")).unwrap();
    let target: Arc<dyn Target> = Arc::new(CountingTarget(Arc::default()));
    assert!(engine::run(&p, &[target]).is_err());
}

#[test]
fn threads_are_dealt_over_os_threads() {
    assert_eq!(engine::os_thread_groups(4, 2), vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(engine::os_thread_groups(3, 2), vec![vec![0, 2], vec![1]]);
    assert_eq!(engine::os_thread_groups(2, 8), vec![vec![0], vec![1]]);
    assert_eq!(engine::os_thread_groups(5, 1), vec![vec![0, 1, 2, 3, 4]]);
    assert_eq!(engine::os_thread_groups(1, 0), vec![vec![0]]);
}

#[test]
fn by_default_threads_are_dealt_evenly() {
    // As many OS threads as fit the cores and divide the threads: every OS thread runs as
    // many worker threads as every other, so each worker gets the same share of the CPUs.
    for (threads, cores, os) in [
        (1, 2, 1),
        (2, 2, 2),
        (3, 2, 1),
        (4, 2, 2),
        (5, 2, 1),
        (6, 2, 2),
        (6, 4, 3),
        (12, 8, 6),
        (3, 1, 1),
        // No divisor keeps half the cores busy: one OS thread per worker thread.
        (5, 4, 5),
        (9, 8, 9),
    ] {
        assert_eq!(
            engine::even_os_threads(threads, cores),
            os,
            "-t{threads} on {cores} cores"
        );
        let groups = engine::os_thread_groups(threads, os);
        assert!(
            groups.iter().all(|g| g.len() == groups[0].len()),
            "-t{threads} on {cores} cores: {groups:?}"
        );
    }
}

/// Queues that share an OS thread and finish I/Os only while the engine waits on them
/// (reap with `min >= 1`), as a connection whose responses arrive while its runtime runs;
/// every completion is logged with its queue's index.
#[derive(Default)]
struct Waited {
    opened: AtomicUsize,
    log: Mutex<Vec<usize>>,
}

struct WaitedTarget(Arc<Waited>);

struct WaitedQueue {
    shared: Arc<Waited>,
    index: usize,
    depth: usize,
    block: usize,
    pending: Vec<usize>,
}

impl Target for WaitedTarget {
    fn name(&self) -> &str {
        "waited"
    }
    fn size(&self) -> u64 {
        1 << 30
    }
    fn engine(&self) -> &'static str {
        "smb"
    }
    fn shares_threads(&self) -> bool {
        true
    }
    fn queue(&self, cfg: &QueueConfig) -> Result<Box<dyn IoQueue>, BenchError> {
        Ok(Box::new(WaitedQueue {
            shared: self.0.clone(),
            index: self.0.opened.fetch_add(1, Ordering::SeqCst),
            depth: cfg.depth,
            block: cfg.block,
            pending: Vec::new(),
        }))
    }
}

impl IoQueue for WaitedQueue {
    fn submit(&mut self, slot: usize, _: IoKind, _: u64, _: WriteData<'_>) -> io::Result<()> {
        self.pending.push(slot);
        Ok(())
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        if min == 0 {
            return Ok(());
        }
        let mut log = self.shared.log.lock().unwrap();
        for slot in self.pending.drain(..) {
            log.push(self.index);
            out.push(Completion {
                slot,
                result: Ok(self.block),
            });
        }
        Ok(())
    }
    fn depth(&self) -> usize {
        self.depth
    }
}

#[test]
fn threads_on_one_os_thread_take_turns() {
    // Three threads on one OS thread, whose queues finish I/Os only while waited on: the
    // engine waits on each in turn, so all three progress together (waiting always on the
    // first busy one would finish that thread's --ios before the others start).
    let flags = "-b4K -o4 -t3 -r -d60 -W0 -C0 --ios 400 --os-threads 1 waited";
    let p = parse(&args(flags)).unwrap();
    let waited = Arc::new(Waited::default());
    let target: Arc<dyn Target> = Arc::new(WaitedTarget(waited.clone()));
    engine::run(&p, &[target]).unwrap();
    let log = waited.log.lock().unwrap().clone();
    assert_eq!(log.len(), 3 * 400);
    // When the first thread has its 400, each of the others has nearly as many.
    let mut done = [0usize; 3];
    for &q in &log {
        done[q] += 1;
        if done[q] == 400 {
            break;
        }
    }
    for (q, n) in done.iter().enumerate() {
        assert!(*n >= 400 - 2 * 4, "queue {q} had {n} of 400: {done:?}");
    }
}

#[test]
fn affinity_pins_each_os_thread_round_robin_on_the_cpu_asked() {
    let allowed = affinity::allowed().unwrap();
    // Two CPUs when there are two (last first, so the order given is the order used).
    let cpus: Vec<usize> = allowed.iter().rev().take(2).copied().collect();
    let list = affinity::cpu_list_label(&cpus);
    let flags = format!("-b4K -o2 -t3 -r -d20 -W0 -C0 --ios 200 --affinity {list} counting");
    let p = parse(&args(&flags)).unwrap();
    let counting = Arc::new(Counting::default());
    let target: Arc<dyn Target> = Arc::new(CountingTarget(counting.clone()));
    let result = engine::run(&p, &[target]).unwrap();
    assert_eq!(*counting.completed.lock().unwrap(), vec![200; 3]);

    // Three OS threads (local-style target: one per thread) on cpus[0], cpus[1], cpus[0]:
    // each queue was opened on a thread allowed exactly one of them, and running there.
    let mut seen = counting.cpus_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for (mask, on) in &seen {
        assert_eq!(mask.len(), 1, "{mask:?}");
        assert_eq!(*on, mask[0]);
    }
    seen.sort();
    let mut want: Vec<_> = [cpus[0], cpus[cpus.len() - 1], cpus[0]]
        .iter()
        .map(|&c| (vec![c], c))
        .collect();
    want.sort();
    assert_eq!(seen, want);

    // The report says so (text and JSON).
    let report = Report::build(&p, flags.clone(), &result);
    let text = render(&report, Format::Text);
    assert!(
        text.contains(&format!("pinned round-robin over CPUs {list}")),
        "{text}"
    );
    let json: Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    let got: Vec<u64> = json["profile"]["affinity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(got, cpus.iter().map(|&c| c as u64).collect::<Vec<_>>());
}

#[test]
fn affinity_outside_the_allowed_cpus_is_an_error_not_ignored() {
    let allowed = affinity::allowed().unwrap();
    let outside = (0..affinity::MAX_CPUS)
        .find(|c| !allowed.contains(c))
        .unwrap();
    let flags = format!("-b4K -o1 -t1 -r -d20 -W0 -C0 --ios 10 --affinity {outside} counting");
    let p = parse(&args(&flags)).unwrap();
    let counting = Arc::new(Counting::default());
    let target: Arc<dyn Target> = Arc::new(CountingTarget(counting.clone()));
    let e = engine::run(&p, &[target]).unwrap_err().to_string();
    assert!(e.contains(&format!("CPU {outside} ")), "{e}");
    assert_eq!(counting.opened.load(Ordering::SeqCst), 0);
}
