//! Watching directories for changes (Linux inotify), for CHANGE_NOTIFY.
//!
//! A [`DirWatcher`] is one inotify instance. Directories are added by descriptor (an
//! `O_PATH` descriptor is enough), so a watch never names a path the client chose;
//! subdirectories are reached with [`open_subdir`], one component at a time without
//! following symlinks. [`DirWatcher::read`] takes what the kernel has queued, without
//! blocking, and hands each event over as a typed [`WatchEvent`] ([`DirWatcher::wait`]
//! waits for some); the kernel's records are parsed with every length checked.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::sys;

/// What a watch reports: names created, deleted, moved in or out, contents written,
/// metadata changed. Watches apply to directories only and stop reporting a name
/// once it is unlinked.
const WATCH_MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

/// Size of the fixed part of `struct inotify_event`.
const EVENT_HEADER: usize = 16;

/// One watched directory of a [`DirWatcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WatchId(i32);

/// What happened to a name in a watched directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirChange {
    /// The name was created.
    Created,
    /// The name was deleted.
    Deleted,
    /// The name was renamed away (the old name).
    MovedFrom,
    /// A name was renamed to this one (the new name).
    MovedTo,
    /// The file's data was written.
    Modified,
    /// The file's metadata (times, mode, owner, xattrs) changed.
    AttributesChanged,
}

/// One event read from a [`DirWatcher`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The kernel's queue overflowed: events were lost.
    Overflow,
    /// The watch ended (its directory was removed or the watch was taken off).
    Ended(WatchId),
    /// A change to `name` in the directory of `watch`.
    Change {
        /// The watch that saw it.
        watch: WatchId,
        /// What happened.
        change: DirChange,
        /// The name is a directory.
        is_dir: bool,
        /// The name within the watched directory (lossy UTF-8).
        name: String,
    },
}

/// One inotify instance.
#[derive(Debug)]
pub struct DirWatcher {
    fd: OwnedFd,
}

impl DirWatcher {
    /// A new instance.
    pub fn new() -> io::Result<DirWatcher> {
        Ok(DirWatcher {
            fd: sys::inotify_init()?,
        })
    }

    /// Watches the directory open as `dir` (adding it again returns the same id).
    pub fn watch(&self, dir: BorrowedFd<'_>) -> io::Result<WatchId> {
        let path = proc_fd_path(dir, None)?;
        sys::inotify_add_watch(self.fd.as_fd(), &path, WATCH_MASK).map(WatchId)
    }

    /// Stops a watch (an [`WatchEvent::Ended`] follows).
    pub fn unwatch(&self, id: WatchId) {
        sys::inotify_rm_watch(self.fd.as_fd(), id.0);
    }

    /// Blocks until events are queued (or the instance fails).
    pub fn wait(&self) -> io::Result<()> {
        sys::poll_readable(self.fd.as_fd())
    }

    /// Reads what is queued now and fits `buf`, without blocking, and passes each
    /// event to `f`; false when nothing was queued. The kernel queues a change's
    /// event before the system call that made it returns, so a change made before
    /// this call is read by it or by an earlier one. `buf` should hold at least one
    /// record with a maximal name (4 KiB is plenty).
    pub fn read(&self, buf: &mut [u8], mut f: impl FnMut(WatchEvent)) -> io::Result<bool> {
        let n = match sys::read(self.fd.as_fd(), buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        };
        parse_events(buf.get(..n).unwrap_or_default(), &mut f);
        Ok(n > 0)
    }
}

/// Decodes the `struct inotify_event` records in `data`, skipping events a directory
/// watch does not report and stopping at a truncated record.
fn parse_events(data: &[u8], f: &mut impl FnMut(WatchEvent)) {
    let mut rest = data;
    while rest.len() >= EVENT_HEADER {
        let word = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&rest[at..at + 4]);
            b
        };
        let wd = i32::from_ne_bytes(word(0));
        let mask = u32::from_ne_bytes(word(4));
        let len = u32::from_ne_bytes(word(12)) as usize;
        let Some(raw) = rest.get(EVENT_HEADER..EVENT_HEADER.saturating_add(len)) else {
            return;
        };
        rest = &rest[EVENT_HEADER + len..];
        let name_end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let name = String::from_utf8_lossy(&raw[..name_end]).into_owned();
        if let Some(ev) = event(wd, mask, name) {
            f(ev);
        }
    }
}

fn event(wd: i32, mask: u32, name: String) -> Option<WatchEvent> {
    if mask & libc::IN_Q_OVERFLOW != 0 {
        return Some(WatchEvent::Overflow);
    }
    if mask & libc::IN_IGNORED != 0 {
        return Some(WatchEvent::Ended(WatchId(wd)));
    }
    if name.is_empty() {
        return None;
    }
    let change = if mask & libc::IN_CREATE != 0 {
        DirChange::Created
    } else if mask & libc::IN_DELETE != 0 {
        DirChange::Deleted
    } else if mask & libc::IN_MOVED_FROM != 0 {
        DirChange::MovedFrom
    } else if mask & libc::IN_MOVED_TO != 0 {
        DirChange::MovedTo
    } else if mask & libc::IN_MODIFY != 0 {
        DirChange::Modified
    } else if mask & libc::IN_ATTRIB != 0 {
        DirChange::AttributesChanged
    } else {
        return None;
    };
    Some(WatchEvent::Change {
        watch: WatchId(wd),
        change,
        is_dir: mask & libc::IN_ISDIR != 0,
        name,
    })
}

/// `/proc/self/fd/N[/name]`: reaches what a descriptor is open on, including an
/// `O_PATH` one, without resolving its path again.
fn proc_fd_path(fd: BorrowedFd<'_>, name: Option<&str>) -> io::Result<CString> {
    let p = match name {
        Some(n) => format!("/proc/self/fd/{}/{n}", fd.as_raw_fd()),
        None => format!("/proc/self/fd/{}", fd.as_raw_fd()),
    };
    CString::new(p).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Opens the subdirectory `name` of `parent` as an `O_PATH` descriptor, refusing
/// symlinks and names with separators.
pub fn open_subdir(parent: BorrowedFd<'_>, name: &str) -> Option<OwnedFd> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let c = CString::new(name).ok()?;
    sys::openat(
        parent,
        &c,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
    .ok()
}

/// The names of the subdirectories of `dir` (not following symlinks; names that are
/// not UTF-8 are left out).
pub fn subdir_names(dir: BorrowedFd<'_>) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

/// Whether `name` in `dir` carries client EAs (xattrs under
/// [`crate::stream::EA_PREFIX`]); a symlink is not followed.
pub fn has_client_eas(dir: BorrowedFd<'_>, name: &str) -> bool {
    if name.contains('/') {
        return false;
    }
    let Ok(path) = proc_fd_path(dir, Some(name)) else {
        return false;
    };
    sys::llistxattr(&path).is_ok_and(|list| {
        list.split(|&b| b == 0)
            .any(|n| n.starts_with(crate::stream::EA_PREFIX.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(wd: i32, mask: u32, name: &[u8], pad: usize) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&wd.to_ne_bytes());
        v.extend_from_slice(&mask.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(&((name.len() + pad) as u32).to_ne_bytes());
        v.extend_from_slice(name);
        v.extend(std::iter::repeat_n(0u8, pad));
        v
    }

    fn parse(data: &[u8]) -> Vec<WatchEvent> {
        let mut out = Vec::new();
        parse_events(data, &mut |e| out.push(e));
        out
    }

    #[test]
    fn records_decode_and_a_truncated_one_stops_the_walk() {
        let mut data = record(3, libc::IN_CREATE | libc::IN_ISDIR, b"sub", 5);
        data.extend(record(3, libc::IN_Q_OVERFLOW, b"", 0));
        data.extend(record(4, libc::IN_IGNORED, b"", 0));
        data.extend(record(4, libc::IN_OPEN, b"x", 3));
        let mut cut = record(3, libc::IN_DELETE, b"gone", 4);
        cut.truncate(cut.len() - 2);
        data.extend(cut);
        assert_eq!(
            parse(&data),
            vec![
                WatchEvent::Change {
                    watch: WatchId(3),
                    change: DirChange::Created,
                    is_dir: true,
                    name: "sub".into()
                },
                WatchEvent::Overflow,
                WatchEvent::Ended(WatchId(4)),
            ]
        );
    }

    #[test]
    fn a_length_past_the_buffer_is_not_read() {
        let mut data = record(1, libc::IN_MODIFY, b"f", 0);
        data[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse(&data).is_empty());
    }

    #[test]
    fn a_real_watch_sees_a_created_file_and_a_subdirectory() {
        let dir = tempfile::tempdir().unwrap();
        let w = DirWatcher::new().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        let id = w.watch(d.as_fd()).unwrap();
        std::fs::write(dir.path().join("a.txt"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("sub", dir.path().join("link")).unwrap();
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 4096];
        // Bounded: each read returns at least one event, and at most a few are queued.
        for _ in 0..8 {
            w.read(&mut buf, |e| seen.push(e)).unwrap();
            if seen
                .iter()
                .any(|e| matches!(e, WatchEvent::Change { name, .. } if name == "link"))
            {
                break;
            }
        }
        assert!(seen.contains(&WatchEvent::Change {
            watch: id,
            change: DirChange::Created,
            is_dir: false,
            name: "a.txt".into()
        }));
        assert!(seen.contains(&WatchEvent::Change {
            watch: id,
            change: DirChange::Created,
            is_dir: true,
            name: "sub".into()
        }));
        assert_eq!(subdir_names(d.as_fd()), vec!["sub".to_string()]);
        assert!(open_subdir(d.as_fd(), "sub").is_some());
        assert!(open_subdir(d.as_fd(), "link").is_none());
        assert!(open_subdir(d.as_fd(), "..").is_none());
        assert!(!has_client_eas(d.as_fd(), "a.txt"));
    }
}
