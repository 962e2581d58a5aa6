//! Giving freed heap memory back to the system once the server goes quiet.
//!
//! glibc's malloc keeps what a burst of I/O freed: every thread that allocates gets
//! an arena of its own (up to eight per core), and once a large buffer has been
//! freed the dynamic mmap threshold rises past it, so later 1 MiB READ and WRITE
//! buffers come from those arenas and stay there when freed. After a soak of a
//! few minutes the server held about 100 MiB more than at idle with less than
//! 10 MiB in use. [`trim_when_quiet`] watches a process-wide activity count (every
//! request and every closed connection adds to it) and, after a period with none
//! following one with some, has malloc return its free pages (`malloc_trim`):
//! once per quiet spell, never while requests are arriving. [`limit_arenas`]
//! keeps the arenas few, so that what stays fragmented after a trim is small.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Requests received and connections closed, process-wide (the allocator is).
static ACTIVITY: AtomicU64 = AtomicU64::new(0);

/// How long the server must see no activity before it trims.
pub const QUIET_PERIOD: Duration = Duration::from_secs(2);

/// Counts one request or closed connection.
pub fn note_activity() {
    ACTIVITY.fetch_add(1, Ordering::Relaxed);
}

/// Decides, one observation of the activity count per period, when to trim:
/// at the first period without activity after one with some.
#[derive(Debug)]
pub struct QuietTrim {
    last: u64,
    trimmed: bool,
}

impl QuietTrim {
    /// Starts from the current count `now`, as if just trimmed.
    pub fn new(now: u64) -> QuietTrim {
        QuietTrim {
            last: now,
            trimmed: true,
        }
    }

    /// Takes this period's count; true when the heap should be trimmed now.
    pub fn observe(&mut self, now: u64) -> bool {
        if now != self.last {
            self.last = now;
            self.trimmed = false;
            return false;
        }
        if self.trimmed {
            return false;
        }
        self.trimmed = true;
        true
    }
}

/// How many malloc arenas the server lets glibc create: two per core, at least
/// four (glibc's own default is eight per core). Each arena keeps what was freed
/// in it, fragmented around what is still live, even after a trim: with 16
/// arenas on two cores a soak left the server 36-59 MiB above idle after
/// trimming, with 4 about 24 MiB, at the same request rate.
pub fn arena_limit(cores: usize) -> usize {
    cores.saturating_mul(2).max(4)
}

/// Bounds the number of malloc arenas ([`arena_limit`] of the available cores)
/// unless `MALLOC_ARENA_MAX` is set in the environment (glibc reads that itself).
/// Threads that already have an arena keep it; call this early.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n = libc::c_int::try_from(arena_limit(cores)).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt takes two integers; M_ARENA_MAX only bounds how many
        // arenas threads may create from now on.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, n);
        }
    }
}

/// Returns the allocator's free memory to the system, where the allocator
/// supports it (glibc); a no-op elsewhere.
#[allow(unsafe_code)]
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and is thread-safe (it locks each
    // arena while it walks it); it only gives free pages back.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Runs forever: every [`QUIET_PERIOD`], trims the heap (on a blocking thread)
/// if the period was quiet and the one before it was not.
pub async fn trim_when_quiet() {
    let mut decide = QuietTrim::new(ACTIVITY.load(Ordering::Relaxed));
    let mut tick = tokio::time::interval(QUIET_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if decide.observe(ACTIVITY.load(Ordering::Relaxed)) {
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    }
}

/// The [`trim_when_quiet`] task of a running server; dropping it stops the task.
pub struct Trimmer(tokio::task::JoinHandle<()>);

impl Trimmer {
    /// Spawns [`trim_when_quiet`] on the current runtime.
    pub fn spawn() -> Trimmer {
        Trimmer(tokio::spawn(trim_when_quiet()))
    }
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_quiet_spell_after_activity() {
        let mut q = QuietTrim::new(5);
        assert!(
            !q.observe(5),
            "no activity since start: nothing to give back"
        );
        assert!(!q.observe(9), "busy period: no trim");
        assert!(!q.observe(12), "still busy");
        assert!(q.observe(12), "first quiet period after activity: trim");
        assert!(!q.observe(12), "still quiet: already trimmed");
        assert!(!q.observe(12));
        assert!(!q.observe(13), "busy again");
        assert!(q.observe(13), "quiet again: trim again");
    }

    #[test]
    fn two_arenas_per_core_at_least_four() {
        assert_eq!(arena_limit(1), 4);
        assert_eq!(arena_limit(2), 4);
        assert_eq!(arena_limit(3), 6);
        assert_eq!(arena_limit(32), 64);
        assert_eq!(arena_limit(usize::MAX), usize::MAX);
    }

    #[test]
    fn activity_is_counted() {
        let before = ACTIVITY.load(Ordering::Relaxed);
        note_activity();
        note_activity();
        assert!(ACTIVITY.load(Ordering::Relaxed) >= before + 2);
    }
}
