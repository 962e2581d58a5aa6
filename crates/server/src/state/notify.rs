//! CHANGE_NOTIFY state ([MS-SMB2] 3.3.5.19, [MS-FSA] 2.1.5.10): per directory open, the
//! changes seen since the client last asked, fed by Linux inotify.
//!
//! One inotify instance serves the whole process; a dedicated thread reads it (so it
//! does not depend on any particular tokio runtime) and appends entries to the
//! [`OpenNotify`] of every directory open watching the directory the event happened
//! in. WATCH_TREE watches add a watch on every subdirectory (opened with `openat` and
//! `O_NOFOLLOW` one component at a time, so the walk never leaves the share), up to
//! [`MAX_TREE_WATCHES`]. Changes made through the server reach the kernel like any
//! other, so they are reported too. Buffered changes are bounded
//! ([`MAX_PENDING_BYTES`]); overflowing them makes the next response
//! STATUS_NOTIFY_ENUM_DIR.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use smbx_wire::change_notify::{
    notify_entries_len, NotifyEntry, ACTION_ADDED, ACTION_MODIFIED, ACTION_REMOVED,
    ACTION_RENAMED_NEW_NAME, ACTION_RENAMED_OLD_NAME, CHANGE_ATTRIBUTES, CHANGE_CREATION,
    CHANGE_DIR_NAME, CHANGE_EA, CHANGE_FILE_NAME, CHANGE_LAST_ACCESS, CHANGE_LAST_WRITE,
    CHANGE_SECURITY, CHANGE_SIZE,
};
use tokio::sync::Notify;

/// Most bytes of FILE_NOTIFY_INFORMATION buffered per open between requests.
pub const MAX_PENDING_BYTES: usize = 64 * 1024;
/// Most subdirectory watches one WATCH_TREE open adds.
pub const MAX_TREE_WATCHES: usize = 4096;

/// What a pending CHANGE_NOTIFY completes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyOutcome {
    /// Changes to report.
    Changes(Vec<NotifyEntry>),
    /// Too many changes (or they do not fit the client's buffer): NOTIFY_ENUM_DIR.
    EnumDir,
    /// The handle was closed: NOTIFY_CLEANUP.
    Cleanup,
    /// The directory is delete-pending: DELETE_PENDING.
    DeletePending,
}

#[derive(Debug, Default)]
struct State {
    armed: bool,
    filter: u32,
    tree: bool,
    entries: Vec<NotifyEntry>,
    bytes: usize,
    overflow: bool,
    closed: bool,
    /// The watched directory became delete-pending.
    delete_pending: bool,
    /// Watch descriptors this open registered.
    wds: Vec<i32>,
    /// A duplicate of the watched directory's descriptor (to find new subdirectories).
    root: Option<OwnedFd>,
}

/// Shared between the open and the inotify thread.
#[derive(Debug, Default)]
pub struct NotifySink {
    st: Mutex<State>,
    changed: Notify,
}

impl NotifySink {
    fn push(&self, action: u32, bits: u32, name: String) {
        let mut st = self.st.lock();
        if st.closed || st.filter & bits == 0 {
            return;
        }
        if st.overflow {
            return;
        }
        // One create or write produces several kernel events (data, DOS-attribute
        // xattr, times): report a modification of the name just reported only once.
        if action == ACTION_MODIFIED
            && st.entries.last().is_some_and(|e| {
                e.name == name && (e.action == ACTION_ADDED || e.action == ACTION_MODIFIED)
            })
        {
            return;
        }
        let len = 12 + name.encode_utf16().count() * 2 + 3;
        if st.bytes + len > MAX_PENDING_BYTES {
            st.overflow = true;
            st.entries.clear();
            st.bytes = 0;
        } else {
            st.bytes += len;
            st.entries.push(NotifyEntry { action, name });
        }
        drop(st);
        self.changed.notify_waiters();
    }

    fn overflow(&self) {
        let mut st = self.st.lock();
        st.overflow = true;
        st.entries.clear();
        st.bytes = 0;
        drop(st);
        self.changed.notify_waiters();
    }

    fn delete_pending(&self) {
        let mut st = self.st.lock();
        st.delete_pending = true;
        drop(st);
        self.changed.notify_waiters();
    }

    /// Takes what is ready for a request whose buffer holds `max_len` bytes.
    fn take(&self, max_len: u32) -> Option<NotifyOutcome> {
        let mut st = self.st.lock();
        if st.closed {
            return Some(NotifyOutcome::Cleanup);
        }
        if st.delete_pending {
            return Some(NotifyOutcome::DeletePending);
        }
        if st.overflow {
            st.overflow = false;
            return Some(NotifyOutcome::EnumDir);
        }
        if st.entries.is_empty() {
            return None;
        }
        let entries = std::mem::take(&mut st.entries);
        st.bytes = 0;
        if notify_entries_len(&entries) > max_len as usize {
            return Some(NotifyOutcome::EnumDir);
        }
        Some(NotifyOutcome::Changes(entries))
    }
}

/// The CHANGE_NOTIFY states of the directory opens of one file (a field of
/// `SharedFile`): when the directory becomes delete-pending, their pending and later
/// requests complete with DELETE_PENDING ([MS-FSA] 2.1.5.10; smb2.notify.rmdir1-4).
#[derive(Debug, Default)]
pub struct DirSinks {
    sinks: Mutex<Vec<Weak<NotifySink>>>,
}

impl DirSinks {
    fn add(&self, sink: &Arc<NotifySink>) {
        let mut v = self.sinks.lock();
        v.retain(|w| w.strong_count() > 0);
        if !v
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(sink)))
        {
            v.push(Arc::downgrade(sink));
        }
    }

    /// The directory is delete-pending now (a handle that set it closed).
    pub fn delete_pending(&self) {
        let sinks: Vec<Arc<NotifySink>> =
            self.sinks.lock().iter().filter_map(Weak::upgrade).collect();
        for s in sinks {
            s.delete_pending();
        }
    }
}

/// CHANGE_NOTIFY state of one open (a field of `FileOpen`).
#[derive(Debug, Default)]
pub struct OpenNotify {
    sink: Arc<NotifySink>,
}

impl OpenNotify {
    /// Starts watching (first request) or updates filter / recursion (later ones).
    /// `dir` is the open's directory descriptor.
    pub fn arm(&self, dir: RawFd, filter: u32, tree: bool, sinks: &DirSinks) {
        let first = {
            let mut st = self.sink.st.lock();
            if st.closed {
                return;
            }
            st.filter = filter;
            let first = !st.armed;
            st.armed = true;
            if first {
                // SAFETY: F_DUPFD_CLOEXEC on a descriptor the caller keeps open.
                let d = unsafe { libc::fcntl(dir, libc::F_DUPFD_CLOEXEC, 0) };
                if d >= 0 {
                    // SAFETY: fresh descriptor we own.
                    st.root = Some(unsafe { OwnedFd::from_raw_fd(d) });
                }
            }
            st.tree = tree;
            first
        };
        if first {
            sinks.add(&self.sink);
            if let Some(w) = watcher() {
                w.watch_tree(&self.sink, dir, tree);
            }
        }
    }

    /// Waits for changes (or close) and returns what the request completes with.
    pub async fn wait(&self, max_len: u32) -> NotifyOutcome {
        wait_sink(self.sink.clone(), max_len).await
    }

    /// A future owning what it needs to wait (for `Response::pending`).
    pub fn waiter(
        &self,
        max_len: u32,
    ) -> impl std::future::Future<Output = NotifyOutcome> + Send + 'static {
        wait_sink(self.sink.clone(), max_len)
    }

    /// Returns buffered changes at once, if any.
    pub fn ready(&self, max_len: u32) -> Option<NotifyOutcome> {
        self.sink.take(max_len)
    }

    /// The handle closed: pending requests complete with NOTIFY_CLEANUP, watches go.
    pub fn cleanup(&self) {
        let wds = {
            let mut st = self.sink.st.lock();
            if st.closed {
                return;
            }
            st.closed = true;
            st.entries.clear();
            st.root = None;
            std::mem::take(&mut st.wds)
        };
        self.sink.changed.notify_waiters();
        if let Some(w) = WATCHER.get().and_then(|w| w.as_ref()) {
            w.unwatch(&self.sink, &wds);
        }
    }

    /// Records a change directly (tests, or server operations inotify cannot see).
    pub fn record(&self, action: u32, filter_bits: u32, name: &str) {
        self.sink.push(action, filter_bits, name.to_string());
    }
}

async fn wait_sink(sink: Arc<NotifySink>, max_len: u32) -> NotifyOutcome {
    loop {
        let n = sink.changed.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        if let Some(o) = sink.take(max_len) {
            return o;
        }
        n.await;
    }
}

struct Target {
    sink: Weak<NotifySink>,
    /// Path of the watched directory relative to the watching open (`\` separated).
    prefix: String,
    /// The open watches its subtree (add watches for new subdirectories).
    tree: bool,
}

struct Watcher {
    fd: OwnedFd,
    wds: Mutex<HashMap<i32, Vec<Target>>>,
}

static WATCHER: OnceLock<Option<Arc<Watcher>>> = OnceLock::new();

fn watcher() -> Option<Arc<Watcher>> {
    WATCHER
        .get_or_init(|| {
            // SAFETY: plain syscall; the result is checked.
            let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
            if fd < 0 {
                tracing::warn!("inotify_init1 failed: change notifications disabled");
                return None;
            }
            // SAFETY: `fd` is a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let w = Arc::new(Watcher {
                fd,
                wds: Mutex::new(HashMap::new()),
            });
            let w2 = w.clone();
            let spawned = std::thread::Builder::new()
                .name("smbx-inotify".into())
                .spawn(move || w2.run());
            if spawned.is_err() {
                return None;
            }
            Some(w)
        })
        .clone()
}

const WATCH_MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

impl Watcher {
    fn add_fd(&self, fd: RawFd) -> Option<i32> {
        let path = CString::new(format!("/proc/self/fd/{fd}")).ok()?;
        // SAFETY: valid C string and descriptor; result checked.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), WATCH_MASK) };
        (wd >= 0).then_some(wd)
    }

    fn register(&self, sink: &Arc<NotifySink>, wd: i32, prefix: String, tree: bool) {
        self.wds.lock().entry(wd).or_default().push(Target {
            sink: Arc::downgrade(sink),
            prefix,
            tree,
        });
        sink.st.lock().wds.push(wd);
    }

    /// Watches `dir` and (for `tree`) its subdirectories.
    fn watch_tree(&self, sink: &Arc<NotifySink>, dir: RawFd, tree: bool) {
        let Some(wd) = self.add_fd(dir) else {
            return;
        };
        self.register(sink, wd, String::new(), tree);
        if tree {
            let mut budget = MAX_TREE_WATCHES;
            self.walk(sink, dir, String::new(), &mut budget, 0);
        }
    }

    /// Adds watches under `dir` (whose relative path is `prefix`).
    fn walk(
        &self,
        sink: &Arc<NotifySink>,
        dir: RawFd,
        prefix: String,
        budget: &mut usize,
        depth: usize,
    ) {
        if depth > 64 {
            return;
        }
        let Ok(rd) = std::fs::read_dir(format!("/proc/self/fd/{dir}")) else {
            return;
        };
        for e in rd.flatten() {
            if *budget == 0 {
                return;
            }
            let Ok(ft) = e.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            self.watch_sub(sink, dir, name, &prefix, budget, depth);
        }
    }

    fn watch_sub(
        &self,
        sink: &Arc<NotifySink>,
        parent: RawFd,
        name: &str,
        prefix: &str,
        budget: &mut usize,
        depth: usize,
    ) {
        let Ok(c) = CString::new(name) else { return };
        // SAFETY: valid descriptor and C string; result checked.
        let fd = unsafe {
            libc::openat(
                parent,
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return;
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let rel = join(prefix, name);
        if let Some(wd) = self.add_fd(fd.as_raw_fd()) {
            *budget -= 1;
            self.register(sink, wd, rel.clone(), true);
            self.walk(sink, fd.as_raw_fd(), rel, budget, depth + 1);
        }
    }

    fn unwatch(&self, sink: &Arc<NotifySink>, wds: &[i32]) {
        let mut m = self.wds.lock();
        for wd in wds {
            if let Some(v) = m.get_mut(wd) {
                v.retain(|t| {
                    !std::ptr::eq(t.sink.as_ptr(), Arc::as_ptr(sink)) && t.sink.strong_count() > 0
                });
                if v.is_empty() {
                    m.remove(wd);
                    // SAFETY: plain syscall on our inotify descriptor.
                    unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), *wd) };
                }
            }
        }
    }

    fn run(&self) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: reading into a buffer we own, length passed.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            let n = n as usize;
            let mut pos = 0usize;
            while pos + 16 <= n {
                let wd = i32::from_ne_bytes(buf[pos..pos + 4].try_into().unwrap_or_default());
                let mask = u32::from_ne_bytes(buf[pos + 4..pos + 8].try_into().unwrap_or_default());
                let len = u32::from_ne_bytes(buf[pos + 12..pos + 16].try_into().unwrap_or_default())
                    as usize;
                let end = (pos + 16).saturating_add(len).min(n);
                let raw = &buf[pos + 16..end];
                let name_end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                let name = String::from_utf8_lossy(&raw[..name_end]).into_owned();
                self.dispatch(wd, mask, name);
                pos = end;
            }
        }
    }

    fn dispatch(&self, wd: i32, mask: u32, name: String) {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            let m = self.wds.lock();
            for t in m.values().flatten() {
                if let Some(s) = t.sink.upgrade() {
                    s.overflow();
                }
            }
            return;
        }
        if mask & libc::IN_IGNORED != 0 {
            self.wds.lock().remove(&wd);
            return;
        }
        if name.is_empty() {
            return;
        }
        let is_dir = mask & libc::IN_ISDIR != 0;
        let name_bits = if is_dir {
            CHANGE_DIR_NAME
        } else {
            CHANGE_FILE_NAME
        };
        let (action, bits) = if mask & libc::IN_CREATE != 0 {
            (ACTION_ADDED, name_bits)
        } else if mask & libc::IN_DELETE != 0 {
            (ACTION_REMOVED, name_bits)
        } else if mask & libc::IN_MOVED_FROM != 0 {
            (ACTION_RENAMED_OLD_NAME, name_bits)
        } else if mask & libc::IN_MOVED_TO != 0 {
            (ACTION_RENAMED_NEW_NAME, name_bits)
        } else if mask & libc::IN_MODIFY != 0 {
            (ACTION_MODIFIED, CHANGE_LAST_WRITE | CHANGE_SIZE)
        } else if mask & libc::IN_ATTRIB != 0 {
            (
                ACTION_MODIFIED,
                CHANGE_ATTRIBUTES
                    | CHANGE_LAST_WRITE
                    | CHANGE_LAST_ACCESS
                    | CHANGE_CREATION
                    | CHANGE_EA
                    | CHANGE_SECURITY,
            )
        } else {
            return;
        };
        let targets: Vec<(Arc<NotifySink>, String, bool)> = {
            let m = self.wds.lock();
            m.get(&wd)
                .map(|v| {
                    v.iter()
                        .filter_map(|t| t.sink.upgrade().map(|s| (s, t.prefix.clone(), t.tree)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let new_dir = is_dir && mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0;
        for (sink, prefix, tree) in targets {
            let rel = join(&prefix, &name);
            if new_dir && tree {
                self.watch_new_subdir(&sink, &rel);
            }
            sink.push(action, bits, rel);
        }
    }

    /// A directory appeared inside a WATCH_TREE watch: watch it too. It is found from
    /// the watch root by walking `rel` one component at a time with O_NOFOLLOW.
    fn watch_new_subdir(&self, sink: &Arc<NotifySink>, rel: &str) {
        let count = sink.st.lock().wds.len();
        if count > MAX_TREE_WATCHES {
            return;
        }
        let Some(root) = sink.root_fd() else { return };
        let mut cur: Option<OwnedFd> = None;
        let mut comps = rel.split('\\').peekable();
        let mut prefix = String::new();
        while let Some(c) = comps.next() {
            let parent = cur.as_ref().map_or(root.as_raw_fd(), |f| f.as_raw_fd());
            if comps.peek().is_none() {
                let mut budget = MAX_TREE_WATCHES.saturating_sub(count);
                self.watch_sub(sink, parent, c, &prefix, &mut budget, 0);
                return;
            }
            let Ok(cs) = CString::new(c) else { return };
            // SAFETY: valid descriptor and C string; result checked.
            let fd = unsafe {
                libc::openat(
                    parent,
                    cs.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                return;
            }
            // SAFETY: fresh descriptor we own.
            cur = Some(unsafe { OwnedFd::from_raw_fd(fd) });
            prefix = join(&prefix, c);
        }
    }
}

impl NotifySink {
    fn root_fd(&self) -> Option<OwnedFd> {
        self.st
            .lock()
            .root
            .as_ref()
            .and_then(|f| f.try_clone().ok())
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}\\{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_pending_completes_armed_opens_only() {
        let sinks = DirSinks::default();
        let armed = OpenNotify::default();
        let other = OpenNotify::default();
        sinks.add(&armed.sink);
        sinks.add(&armed.sink);
        assert_eq!(sinks.sinks.lock().len(), 1);
        assert_eq!(armed.ready(1000), None);
        sinks.delete_pending();
        assert_eq!(armed.ready(1000), Some(NotifyOutcome::DeletePending));
        // Later requests on the delete-pending directory complete the same way.
        assert_eq!(armed.ready(1000), Some(NotifyOutcome::DeletePending));
        assert_eq!(other.ready(1000), None);
        // Closing the handle still wins.
        armed.cleanup();
        assert_eq!(armed.ready(1000), Some(NotifyOutcome::Cleanup));
    }
}
