//! The transfer progress bar: bytes, rate and ETA on stderr, only when stderr is a
//! terminal (so pipes and logs stay clean).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar that may be absent.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar for `total` bytes (`None`: unknown, a spinner), shown only on a terminal.
    pub fn new(total: Option<u64>) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template = if total.is_some() {
            "{bytes:>10}/{total_bytes} [{bar:30}] {binary_bytes_per_sec:>12}  ETA {eta}"
        } else {
            "{spinner} {bytes:>10} {binary_bytes_per_sec:>12}  {elapsed}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress(Some(bar))
    }

    /// No bar at all.
    pub fn none() -> Progress {
        Progress(None)
    }

    /// Counts `n` more bytes.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
