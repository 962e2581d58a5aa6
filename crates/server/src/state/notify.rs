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
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use smbx_vfs::watch::{self, DirChange, DirWatcher, WatchEvent, WatchId};
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
    wds: Vec<WatchId>,
    /// A duplicate of the watched directory's descriptor (to find new subdirectories).
    root: Option<OwnedFd>,
    /// The output buffer size of the first request: no later response is larger
    /// (as Windows and Samba: once the first returns NOTIFY_ENUM_DIR for want of
    /// room, all do).
    max_buffer: u32,
    /// The output buffer size of a request waiting for changes.
    waiter: Option<u32>,
    /// What the first change after the waiter registered completed it with.
    ready: Option<NotifyOutcome>,
}

impl State {
    /// Takes what is ready for a request whose buffer holds `max_len` bytes.
    fn take(&mut self, max_len: u32) -> Option<NotifyOutcome> {
        if self.closed {
            return Some(NotifyOutcome::Cleanup);
        }
        if self.delete_pending {
            return Some(NotifyOutcome::DeletePending);
        }
        if let Some(o) = self.ready.take() {
            match o {
                // Changes taken for a request that went away: the next one gets them.
                NotifyOutcome::Changes(mut e) => {
                    e.append(&mut self.entries);
                    self.bytes = 0;
                    self.entries = e;
                }
                other => return Some(other),
            }
        }
        if self.overflow {
            self.overflow = false;
            return Some(NotifyOutcome::EnumDir);
        }
        if self.entries.is_empty() {
            return None;
        }
        let entries = std::mem::take(&mut self.entries);
        self.bytes = 0;
        if notify_entries_len(&entries) > max_len as usize {
            return Some(NotifyOutcome::EnumDir);
        }
        Some(NotifyOutcome::Changes(entries))
    }

    /// A change arrived: a waiting request completes with what is there now;
    /// later changes wait for the next request, as on Windows and Samba
    /// (smb2.notify.valid-req).
    fn complete_waiter(&mut self) {
        if let Some(max_len) = self.waiter.take() {
            self.ready = self.take(max_len);
        }
    }

    /// Too many changes to keep: they are dropped and the next response is
    /// NOTIFY_ENUM_DIR.
    fn set_overflow(&mut self) {
        self.overflow = true;
        self.entries.clear();
        self.bytes = 0;
    }
}

/// Shared between the open and the inotify thread.
#[derive(Debug, Default)]
pub struct NotifySink {
    st: Mutex<State>,
    changed: Notify,
}

impl NotifySink {
    /// Buffers one change. For a modification, `visible` says (when asked) whether
    /// it is one the client made (data written, EAs set) rather than the server's
    /// own metadata written with a new file.
    fn push(&self, action: u32, bits: u32, name: String, visible: &dyn Fn() -> bool) {
        let mut st = self.st.lock();
        if st.closed || st.filter & bits == 0 {
            return;
        }
        if st.overflow {
            return;
        }
        // One create or write produces several kernel events (data, the server's own
        // metadata xattrs, times): a modification of the name just reported is
        // reported only once, and right after its creation only if the client
        // made it (a WRITE, EAs set by the CREATE: smb2.notify.valid-req).
        if action == ACTION_MODIFIED {
            if let Some(e) = st.entries.last().filter(|e| e.name == name) {
                if e.action == ACTION_MODIFIED || (e.action == ACTION_ADDED && !visible()) {
                    return;
                }
            }
        }
        let len = 12 + name.encode_utf16().count() * 2 + 3;
        if st.bytes + len > MAX_PENDING_BYTES {
            st.set_overflow();
        } else {
            st.bytes += len;
            st.entries.push(NotifyEntry { action, name });
        }
        // A rename's old name waits for its new name.
        if action != ACTION_RENAMED_OLD_NAME {
            st.complete_waiter();
        }
        drop(st);
        self.changed.notify_waiters();
    }

    fn overflow(&self) {
        let mut st = self.st.lock();
        st.set_overflow();
        st.complete_waiter();
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
        self.st.lock().take(max_len)
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
    /// `dir` is the open's directory descriptor; `max_len` the request's output
    /// buffer size. Returns the size its response may use.
    pub fn arm(
        &self,
        dir: BorrowedFd<'_>,
        filter: u32,
        tree: bool,
        max_len: u32,
        sinks: &DirSinks,
    ) -> u32 {
        let (first, max_len) = {
            let mut st = self.sink.st.lock();
            if st.closed {
                return max_len;
            }
            st.filter = filter;
            let first = !st.armed;
            st.armed = true;
            if first {
                st.max_buffer = max_len;
                st.root = dir.try_clone_to_owned().ok();
            }
            st.tree = tree;
            (first, max_len.min(st.max_buffer))
        };
        if first {
            sinks.add(&self.sink);
            if let Some(w) = watcher() {
                w.watch_tree(&self.sink, dir, tree);
            }
        }
        max_len
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

    /// Returns buffered changes at once, if any: every change made before the call
    /// is among them ([`settle`]), whatever the inotify thread has got to.
    pub fn ready(&self, max_len: u32) -> Option<NotifyOutcome> {
        settle();
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
        self.sink
            .push(action, filter_bits, name.to_string(), &|| false);
    }
}

/// Waits for the first change (or close, delete, overflow). The request is
/// completed under the sink's lock by whoever delivers that change
/// ([`State::complete_waiter`]), so changes that follow wait for the next request.
async fn wait_sink(sink: Arc<NotifySink>, max_len: u32) -> NotifyOutcome {
    let mut registered = false;
    loop {
        let n = sink.changed.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        {
            let mut st = sink.st.lock();
            // Once registered, `ready` is this request's own completion.
            let own = if registered { st.ready.take() } else { None };
            if let Some(o) = own.or_else(|| st.take(max_len)) {
                st.waiter = None;
                return o;
            }
            st.waiter = Some(max_len);
            registered = true;
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
    inotify: DirWatcher,
    /// The read buffer; held while events are read and dispatched, so they reach the
    /// sinks in the kernel's order whoever reads them ([`Watcher::drain`]).
    reading: Mutex<Vec<u8>>,
    wds: Mutex<HashMap<WatchId, Vec<Target>>>,
    /// The watched directory of each watch (O_PATH), to look at a changed file.
    dirs: Mutex<HashMap<WatchId, OwnedFd>>,
}

static WATCHER: OnceLock<Option<Arc<Watcher>>> = OnceLock::new();

/// Hands every change the kernel has queued so far to the opens watching for it,
/// on the calling thread. The inotify thread does the same when it wakes, but may
/// not have yet: a CHANGE_NOTIFY that follows the responses to the requests that
/// made changes must find them buffered (smb2.notify.valid-req: its second and
/// third requests complete at once with what the previous steps changed, which a
/// loaded machine's inotify thread had not read yet). No-op before the first watch.
pub fn settle() {
    if let Some(Some(w)) = WATCHER.get() {
        let _ = w.drain();
    }
}

fn watcher() -> Option<Arc<Watcher>> {
    WATCHER
        .get_or_init(|| {
            let inotify = match DirWatcher::new() {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!("inotify: {e}: change notifications disabled");
                    return None;
                }
            };
            let w = Arc::new(Watcher {
                inotify,
                reading: Mutex::new(vec![0u8; 64 * 1024]),
                wds: Mutex::new(HashMap::new()),
                dirs: Mutex::new(HashMap::new()),
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

impl Watcher {
    fn add_fd(&self, fd: BorrowedFd<'_>) -> Option<WatchId> {
        let wd = self.inotify.watch(fd).ok()?;
        let mut dirs = self.dirs.lock();
        if let std::collections::hash_map::Entry::Vacant(v) = dirs.entry(wd) {
            if let Ok(d) = fd.try_clone_to_owned() {
                v.insert(d);
            }
        }
        Some(wd)
    }

    /// Whether `name` in the directory of watch `wd` carries client EAs (xattrs
    /// under [`smbx_vfs::stream::EA_PREFIX`]); never follows a symlink.
    fn has_client_eas(&self, wd: WatchId, name: &str) -> bool {
        let dirs = self.dirs.lock();
        dirs.get(&wd)
            .is_some_and(|dir| watch::has_client_eas(dir.as_fd(), name))
    }

    fn register(&self, sink: &Arc<NotifySink>, wd: WatchId, prefix: String, tree: bool) {
        self.wds.lock().entry(wd).or_default().push(Target {
            sink: Arc::downgrade(sink),
            prefix,
            tree,
        });
        sink.st.lock().wds.push(wd);
    }

    /// Watches `dir` and (for `tree`) its subdirectories.
    fn watch_tree(&self, sink: &Arc<NotifySink>, dir: BorrowedFd<'_>, tree: bool) {
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
        dir: BorrowedFd<'_>,
        prefix: String,
        budget: &mut usize,
        depth: usize,
    ) {
        if depth > 64 {
            return;
        }
        for name in watch::subdir_names(dir) {
            if *budget == 0 {
                return;
            }
            self.watch_sub(sink, dir, &name, &prefix, budget, depth);
        }
    }

    fn watch_sub(
        &self,
        sink: &Arc<NotifySink>,
        parent: BorrowedFd<'_>,
        name: &str,
        prefix: &str,
        budget: &mut usize,
        depth: usize,
    ) {
        let Some(fd) = watch::open_subdir(parent, name) else {
            return;
        };
        let rel = join(prefix, name);
        if let Some(wd) = self.add_fd(fd.as_fd()) {
            *budget -= 1;
            self.register(sink, wd, rel.clone(), true);
            self.walk(sink, fd.as_fd(), rel, budget, depth + 1);
        }
    }

    fn unwatch(&self, sink: &Arc<NotifySink>, wds: &[WatchId]) {
        let mut m = self.wds.lock();
        for wd in wds {
            if let Some(v) = m.get_mut(wd) {
                v.retain(|t| {
                    !std::ptr::eq(t.sink.as_ptr(), Arc::as_ptr(sink)) && t.sink.strong_count() > 0
                });
                if v.is_empty() {
                    m.remove(wd);
                    self.inotify.unwatch(*wd);
                    self.dirs.lock().remove(wd);
                }
            }
        }
    }

    fn run(&self) {
        while self.inotify.wait().is_ok() && self.drain().is_ok() {}
    }

    /// Reads and dispatches what the kernel has queued, until nothing is.
    fn drain(&self) -> std::io::Result<()> {
        let mut buf = self.reading.lock();
        while self.inotify.read(&mut buf, |e| self.dispatch(e))? {}
        Ok(())
    }

    fn dispatch(&self, event: WatchEvent) {
        let (wd, change, is_dir, name) = match event {
            WatchEvent::Overflow => {
                let m = self.wds.lock();
                for t in m.values().flatten() {
                    if let Some(s) = t.sink.upgrade() {
                        s.overflow();
                    }
                }
                return;
            }
            WatchEvent::Ended(wd) => {
                self.wds.lock().remove(&wd);
                self.dirs.lock().remove(&wd);
                return;
            }
            WatchEvent::Change {
                watch,
                change,
                is_dir,
                name,
            } => (watch, change, is_dir, name),
        };
        let name_bits = if is_dir {
            CHANGE_DIR_NAME
        } else {
            CHANGE_FILE_NAME
        };
        let (action, bits) = match change {
            DirChange::Created => (ACTION_ADDED, name_bits),
            DirChange::Deleted => (ACTION_REMOVED, name_bits),
            DirChange::MovedFrom => (ACTION_RENAMED_OLD_NAME, name_bits),
            DirChange::MovedTo => (ACTION_RENAMED_NEW_NAME, name_bits),
            DirChange::Modified => (ACTION_MODIFIED, CHANGE_LAST_WRITE | CHANGE_SIZE),
            DirChange::AttributesChanged => (
                ACTION_MODIFIED,
                CHANGE_ATTRIBUTES
                    | CHANGE_LAST_WRITE
                    | CHANGE_LAST_ACCESS
                    | CHANGE_CREATION
                    | CHANGE_EA
                    | CHANGE_SECURITY,
            ),
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
        let new_dir = is_dir && matches!(change, DirChange::Created | DirChange::MovedTo);
        for (sink, prefix, tree) in targets {
            let rel = join(&prefix, &name);
            if new_dir && tree {
                self.watch_new_subdir(&sink, &rel);
            }
            sink.push(action, bits, rel, &|| {
                change == DirChange::Modified || self.has_client_eas(wd, &name)
            });
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
            let parent = cur.as_ref().map_or(root.as_fd(), |f| f.as_fd());
            if comps.peek().is_none() {
                let mut budget = MAX_TREE_WATCHES.saturating_sub(count);
                self.watch_sub(sink, parent, c, &prefix, &mut budget, 0);
                return;
            }
            let Some(next) = watch::open_subdir(parent, c) else {
                return;
            };
            cur = Some(next);
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

    fn open_on_tmp() -> (OpenNotify, tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::open(dir.path()).unwrap();
        (OpenNotify::default(), dir, f)
    }

    fn entry(action: u32, name: &str) -> NotifyEntry {
        NotifyEntry {
            action,
            name: name.into(),
        }
    }

    #[tokio::test]
    async fn a_waiting_request_completes_with_the_first_change_only() {
        let (n, _d, f) = open_on_tmp();
        let sinks = DirSinks::default();
        assert_eq!(
            n.arm(
                f.as_fd(),
                CHANGE_FILE_NAME | CHANGE_SIZE,
                false,
                1000,
                &sinks
            ),
            1000
        );
        let w = tokio::spawn(n.waiter(1000));
        while n.sink.st.lock().waiter.is_none() {
            tokio::task::yield_now().await;
        }
        n.record(ACTION_ADDED, CHANGE_FILE_NAME, "a");
        // What follows (a write, the next name) waits for the next request.
        n.record(ACTION_MODIFIED, CHANGE_SIZE, "a");
        n.record(ACTION_ADDED, CHANGE_FILE_NAME, "b");
        assert_eq!(
            w.await.unwrap(),
            NotifyOutcome::Changes(vec![entry(ACTION_ADDED, "a")])
        );
        assert_eq!(
            n.ready(1000),
            Some(NotifyOutcome::Changes(vec![
                entry(ACTION_MODIFIED, "a"),
                entry(ACTION_ADDED, "b")
            ]))
        );
        // A rename's old name waits for its new name.
        let w = tokio::spawn(n.waiter(1000));
        while n.sink.st.lock().waiter.is_none() {
            tokio::task::yield_now().await;
        }
        n.record(ACTION_RENAMED_OLD_NAME, CHANGE_FILE_NAME, "b");
        assert!(n.sink.st.lock().ready.is_none());
        n.record(ACTION_RENAMED_NEW_NAME, CHANGE_FILE_NAME, "c");
        assert_eq!(
            w.await.unwrap(),
            NotifyOutcome::Changes(vec![
                entry(ACTION_RENAMED_OLD_NAME, "b"),
                entry(ACTION_RENAMED_NEW_NAME, "c")
            ])
        );
    }

    /// A request that follows changes finds them all, in order, whatever the inotify
    /// thread has got to (it is woken by the same changes and races the request).
    #[test]
    fn a_request_after_changes_finds_every_one_of_them() {
        let (n, d, f) = open_on_tmp();
        let sinks = DirSinks::default();
        n.arm(
            f.as_fd(),
            CHANGE_FILE_NAME | CHANGE_SIZE,
            false,
            64 * 1024,
            &sinks,
        );
        for i in 0..200 {
            let name = format!("f{i}");
            let path = d.path().join(&name);
            std::fs::write(&path, b"x").unwrap();
            std::fs::remove_file(&path).unwrap();
            assert_eq!(
                n.ready(64 * 1024),
                Some(NotifyOutcome::Changes(vec![
                    entry(ACTION_ADDED, &name),
                    entry(ACTION_MODIFIED, &name),
                    entry(ACTION_REMOVED, &name),
                ])),
                "round {i}"
            );
        }
    }

    #[test]
    fn the_first_request_bounds_every_response() {
        let (n, _d, f) = open_on_tmp();
        let sinks = DirSinks::default();
        assert_eq!(n.arm(f.as_fd(), CHANGE_FILE_NAME, false, 1, &sinks), 1);
        n.record(ACTION_ADDED, CHANGE_FILE_NAME, "a");
        assert_eq!(n.ready(1), Some(NotifyOutcome::EnumDir));
        // A later, larger request still gets at most one byte.
        assert_eq!(n.arm(f.as_fd(), CHANGE_FILE_NAME, false, 4096, &sinks), 1);
        n.record(ACTION_ADDED, CHANGE_FILE_NAME, "b");
        assert_eq!(n.ready(1), Some(NotifyOutcome::EnumDir));
    }
}
