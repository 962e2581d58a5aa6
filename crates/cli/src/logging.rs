//! tracing-subscriber setup: where log lines go and how they look.
//!
//! - Under journald (`$JOURNAL_STREAM` names our standard error): no colours, no
//!   timestamp (the journal keeps its own), and a `<N>` syslog priority prefix so
//!   `journalctl -p warning` selects by level.
//! - On a terminal: colours and timestamps.
//! - Anywhere else (a pipe, a file): timestamps, no colours.
//! - With a log file (`--log-file` or smb.conf's `log file`): appended, no colours,
//!   renamed to `<name>.old` when it would grow past `max log size` KiB, as Samba does.
//!
//! Lines inside a connection carry its span: `conn{id=7 client=10.0.0.5:50412
//! sid=0x4000000001}` (crates/server/src/conn/serve.rs).

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::error::{other, CliError};

/// The filter directive for a Samba `log level`.
pub fn level_for(log_level: u32) -> &'static str {
    match log_level {
        0 => "warn",
        1 => "info",
        2 | 3 => "debug",
        _ => "trace",
    }
}

/// Where log lines go.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// Samba `log level` (overridden by `RUST_LOG`).
    pub level: u32,
    /// Log file (appended) instead of standard error.
    pub file: Option<PathBuf>,
    /// `max log size` in KiB: the file is rotated past it (0: never).
    pub max_size_kib: u32,
}

/// Installs the global subscriber: `RUST_LOG` if set, else `log_level`;
/// to `log_file` if given (never rotated), else standard error.
pub fn init(log_level: u32, log_file: Option<&Path>) -> Result<(), CliError> {
    init_with(&LogOptions {
        level: log_level,
        file: log_file.map(Path::to_path_buf),
        max_size_kib: 0,
    })
}

/// Installs the global subscriber for `opts`.
pub fn init_with(opts: &LogOptions) -> Result<(), CliError> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level_for(opts.level)));
    let layer = match &opts.file {
        Some(path) => {
            let max = u64::from(opts.max_size_kib).saturating_mul(1024);
            let file = RotatingFile::open(path, max)
                .map_err(|e| other(format!("cannot open log file {}: {e}", path.display())))?;
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(Mutex::new(file))
                .boxed()
        }
        None if under_journald() => tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .without_time()
            .event_format(JournalPriority(
                tracing_subscriber::fmt::format()
                    .without_time()
                    .with_ansi(false),
            ))
            .with_writer(io::stderr)
            .boxed(),
        None => tracing_subscriber::fmt::layer()
            .with_ansi(io::stderr().is_terminal())
            .with_writer(io::stderr)
            .boxed(),
    };
    // The filter for the whole subscriber, not per layer (there is one layer): entering
    // and leaving a span (every poll of a connection's task) then skips the per-layer
    // filter's lookup of that span's filter state.
    tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .try_init()
        .map_err(|e| other(format!("cannot set up logging: {e}")))
}

/// True when standard error is the journal's stream: `$JOURNAL_STREAM` is
/// `DEVICE:INODE` of the socket systemd connected it to (systemd.exec(5)).
pub fn under_journald() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some_and(|v| names_stderr(&v))
}

/// True when a `$JOURNAL_STREAM` value names standard error.
fn names_stderr(v: &std::ffi::OsStr) -> bool {
    let Some((dev, ino)) = v.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    stderr_identity().is_some_and(|id| id == (dev, ino))
}

/// Device and inode of standard error.
fn stderr_identity() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let fd = io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The syslog priority journald reads from a `<N>` line prefix.
fn syslog_priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// An event format with the `<N>` syslog priority in front.
struct JournalPriority<F>(F);

impl<S, N, F> FormatEvent<S, N> for JournalPriority<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "<{}>", syslog_priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

/// A log file that is renamed to `<name>.old` (replacing an older one) and started
/// afresh when a write would take it past `max` bytes, as Samba does with
/// `max log size`. Each log line arrives in one write, so no line is split.
pub struct RotatingFile {
    path: PathBuf,
    max: u64,
    file: File,
    size: u64,
}

impl RotatingFile {
    /// Opens (appends to) `path`; `max` 0 never rotates.
    pub fn open(path: &Path, max: u64) -> io::Result<RotatingFile> {
        let file = Self::open_append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max,
            file,
            size,
        })
    }

    fn open_append(path: &Path) -> io::Result<File> {
        OpenOptions::new().create(true).append(true).open(path)
    }

    /// `<name>.old`.
    pub fn old_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".old");
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> io::Result<()> {
        std::fs::rename(&self.path, self.old_path())?;
        self.file = Self::open_append(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len() as u64;
        if self.max > 0 && self.size > 0 && self.size.saturating_add(len) > self.max {
            // On failure (the directory became read-only, say) keep writing to the
            // current file rather than lose the line.
            if let Err(e) = self.rotate() {
                let _ = writeln!(
                    self.file,
                    "smbx: cannot rotate log file {}: {e}",
                    self.path.display()
                );
            }
        }
        let n = self.file.write(buf)?;
        self.size = self.size.saturating_add(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_to_old_at_max_size_without_splitting_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("smbx.log");
        let mut f = RotatingFile::open(&path, 100).unwrap();
        let lines: Vec<String> = (0..30)
            .map(|i| format!("line {i:02} .........\n"))
            .collect();
        for l in &lines {
            f.write_all(l.as_bytes()).unwrap();
        }
        let cur = std::fs::read_to_string(&path).unwrap();
        let old = std::fs::read_to_string(dir.path().join("smbx.log.old")).unwrap();
        assert!(cur.len() <= 100 && old.len() <= 100, "{cur:?} {old:?}");
        assert!(!cur.is_empty() && !old.is_empty());
        // The newest lines, in order and whole: the old file's end meets the new file's start.
        let both = format!("{old}{cur}");
        let all: String = lines.concat();
        assert!(all.ends_with(&both), "{both:?}");
        assert!(both.lines().all(|l| l.starts_with("line ")));
    }

    #[test]
    fn appends_and_counts_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        std::fs::write(&path, "x".repeat(90)).unwrap();
        let mut f = RotatingFile::open(&path, 100).unwrap();
        f.write_all(b"0123456789\n").unwrap();
        // 90 + 11 > 100: the 90 bytes moved to a.log.old.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0123456789\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.log.old")).unwrap(),
            "x".repeat(90)
        );
    }

    #[test]
    fn zero_never_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.log");
        let mut f = RotatingFile::open(&path, 0).unwrap();
        for _ in 0..100 {
            f.write_all(b"0123456789\n").unwrap();
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1100);
        assert!(!dir.path().join("b.log.old").exists());
    }

    #[test]
    fn journal_stream_must_name_stderr() {
        use std::ffi::OsStr;
        // Whatever stderr is in the test harness, a made-up identity is not it.
        assert!(!names_stderr(OsStr::new("1:1")));
        assert!(!names_stderr(OsStr::new("garbage")));
        let (dev, ino) = stderr_identity().expect("stderr has an identity");
        assert!(names_stderr(OsStr::new(&format!("{dev}:{ino}"))));
        assert!(!names_stderr(OsStr::new(&format!("{dev}:{}", ino + 1))));
    }

    #[test]
    fn priorities() {
        assert_eq!(syslog_priority(&Level::ERROR), 3);
        assert_eq!(syslog_priority(&Level::WARN), 4);
        assert_eq!(syslog_priority(&Level::INFO), 6);
        assert_eq!(syslog_priority(&Level::TRACE), 7);
    }
}
