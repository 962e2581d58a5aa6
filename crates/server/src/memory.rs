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
//! once per quiet spell, never while requests are arriving.

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

/// Returns the allocator's free memory to the system, where the allocator
/// supports it (glibc); a no-op elsewhere.
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
    fn activity_is_counted() {
        let before = ACTIVITY.load(Ordering::Relaxed);
        note_activity();
        note_activity();
        assert!(ACTIVITY.load(Ordering::Relaxed) >= before + 2);
    }
}
