//! Opens ([MS-SMB2] 3.3.1.10): files, directories and named pipes, in one
//! server-wide table keyed by the volatile FileId so share modes, oplocks and leases
//! can see the opens of every connection.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use smbx_wire::id_hash::IdMap;
use smbx_wire::NtStatus;
use smbx_wire::{AccessMask, CreateOptions, ShareAccess};

use super::file::SharedFile;

pub use smbx_wire::FileId;

/// A file or directory open ([MS-SMB2] 3.3.1.10, [MS-FSA] 2.1.1.8). Shared through
/// `Arc<Open>`, so everything that changes after CREATE is interior-mutable.
pub struct FileOpen {
    /// Path relative to the share root, with `\` separators as the client sent it.
    pub path: String,
    /// The vfs handle (data and metadata operations).
    pub handle: Arc<smbx_vfs::Handle>,
    /// The vfs share the handle belongs to (rename, delete, hard links).
    pub vfs: smbx_vfs::Share,
    /// Granted access mask (generic rights mapped, MAXIMUM_ALLOWED resolved).
    pub access: AccessMask,
    /// ShareAccess of the open.
    pub share_access: ShareAccess,
    /// CreateOptions as requested (FILE_WRITE_THROUGH, FILE_SEQUENTIAL_ONLY, ...).
    pub create_options: CreateOptions,
    /// The open is a directory.
    pub is_dir: bool,
    /// Per-file state shared with every other open of the file (share modes,
    /// delete-pending).
    pub file: Arc<SharedFile>,
    /// This open's entry in `file`.
    pub entry_id: u64,
    /// FILE_DELETE_ON_CLOSE (set at CREATE): delete becomes pending when this open
    /// closes.
    pub delete_on_close: AtomicBool,
    /// FilePositionInformation.CurrentByteOffset.
    pub position: AtomicU64,
    /// Open.Mode: FileModeInformation's bits ([`FileOpen::mode`]).
    mode: AtomicU32,
    /// CHANGE_NOTIFY state of a directory open (state/notify.rs).
    pub notify: super::notify::OpenNotify,
    /// QUERY_DIRECTORY enumeration cursor and FileFullEaInformation index
    /// (handlers/query_directory.rs, handlers/query_info.rs).
    pub query: Mutex<QueryState>,
    /// The LastWriteTime the file had when this open closed, if the server's write-time
    /// bookkeeping ([`crate::state::file::WriteTimes`]) decided it (0: the on-disk one).
    pub final_write_time: AtomicU64,
    /// Durable handle granted at CREATE ([MS-SMB2] 3.3.5.9.6 / 3.3.5.9.10), if any.
    pub durable: Mutex<Option<Box<Durable>>>,
    /// LockSequenceArray of LOCK replay detection (handlers/lock.rs).
    pub lock_sequences: Arc<super::locks::LockSequences>,
    /// Open.ChannelSequence and its outstanding-request counts ([MS-SMB2]
    /// 3.3.5.2.10): see [`FileOpen::check_channel_sequence`].
    channel_sequence: super::channel_seq::Shared,
    /// A request other than its CREATE named this open's FileId: the client has the
    /// CREATE response, so a replay of that CREATE is a new one (handlers/create/replay.rs).
    used: AtomicBool,
    closed: AtomicBool,
}

/// A granted durable handle: the open survives the loss of its connection for
/// `timeout_ms` and can be reclaimed with DHnC / DH2C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durable {
    /// Granted through DH2Q (version 2) rather than DHnQ.
    pub v2: bool,
    /// How long a disconnected open is kept (ms).
    pub timeout_ms: u32,
    /// CreateGuid of a DH2Q request.
    pub create_guid: [u8; 16],
    /// The user (domain\\name) who opened it: only they may reclaim it.
    pub owner: String,
}

impl std::fmt::Debug for FileOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileOpen")
            .field("path", &self.path)
            .field("access", &self.access)
            .field("share_access", &self.share_access)
            .field("is_dir", &self.is_dir)
            .finish()
    }
}

/// Parameters of [`FileOpen::new`].
pub struct FileOpenParams {
    /// See [`FileOpen::path`].
    pub path: String,
    /// See [`FileOpen::handle`].
    pub handle: Arc<smbx_vfs::Handle>,
    /// See [`FileOpen::vfs`].
    pub vfs: smbx_vfs::Share,
    /// See [`FileOpen::access`].
    pub access: AccessMask,
    /// See [`FileOpen::share_access`].
    pub share_access: ShareAccess,
    /// See [`FileOpen::create_options`].
    pub create_options: CreateOptions,
    /// See [`FileOpen::file`].
    pub file: Arc<SharedFile>,
    /// See [`FileOpen::entry_id`].
    pub entry_id: u64,
}

impl FileOpen {
    /// A new open (already registered in the file table as `entry_id`).
    pub fn new(p: FileOpenParams) -> FileOpen {
        // [MS-FSA] 2.1.5.1: the CreateOptions that Open.Mode keeps.
        const MODE_BITS: CreateOptions = FileOpen::SETTABLE_MODE
            .union(CreateOptions::FILE_NO_INTERMEDIATE_BUFFERING)
            .union(CreateOptions::FILE_SYNCHRONOUS_IO_ALERT)
            .union(CreateOptions::FILE_SYNCHRONOUS_IO_NONALERT)
            .union(CreateOptions::FILE_DELETE_ON_CLOSE);
        FileOpen {
            is_dir: p.handle.is_dir(),
            path: p.path,
            handle: p.handle,
            vfs: p.vfs,
            access: p.access,
            share_access: p.share_access,
            create_options: p.create_options,
            file: p.file,
            entry_id: p.entry_id,
            delete_on_close: AtomicBool::new(
                p.create_options
                    .contains(CreateOptions::FILE_DELETE_ON_CLOSE),
            ),
            position: AtomicU64::new(0),
            mode: AtomicU32::new((p.create_options & MODE_BITS).bits()),
            notify: Default::default(),
            query: Mutex::new(Default::default()),
            final_write_time: AtomicU64::new(0),
            durable: Mutex::new(None),
            lock_sequences: Default::default(),
            channel_sequence: Default::default(),
            used: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// The bits of Open.Mode that SET_INFO's FileModeInformation sets and clears
    /// ([`FileOpen::set_mode`]); the synchronous-I/O ones stay as created.
    pub const SETTABLE_MODE: CreateOptions =
        CreateOptions::FILE_WRITE_THROUGH.union(CreateOptions::FILE_SEQUENTIAL_ONLY);

    /// Open.Mode ([MS-FSA]): FileModeInformation's bits, which are CreateOptions'
    /// (FILE_WRITE_THROUGH, FILE_SEQUENTIAL_ONLY, FILE_NO_INTERMEDIATE_BUFFERING,
    /// FILE_SYNCHRONOUS_IO_*, FILE_DELETE_ON_CLOSE), as the open was created with
    /// them and as SET_INFO changed them since.
    pub fn mode(&self) -> CreateOptions {
        CreateOptions::from(self.mode.load(Ordering::Relaxed))
    }

    /// Sets the [settable](FileOpen::SETTABLE_MODE) bits of Open.Mode to those of
    /// `mode` (SET_INFO FileModeInformation), the others kept.
    pub fn set_mode(&self, mode: CreateOptions) {
        let keep = self.mode() & !FileOpen::SETTABLE_MODE;
        let new = keep | (mode & FileOpen::SETTABLE_MODE);
        self.mode.store(new.bits(), Ordering::Relaxed);
    }

    /// Records that a request named this open's FileId (see [`FileOpen::was_used`]).
    pub fn note_used(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a request other than its CREATE named this open's FileId.
    pub fn was_used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    /// The file's metadata as clients see it: the on-disk record with the visible
    /// LastWriteTime of the server's write-time bookkeeping.
    pub fn stat(&self) -> Result<smbx_vfs::FileInfo, NtStatus> {
        let mut info = self.handle.stat()?;
        self.file
            .times
            .adjust(&mut info, smbx_wire::time::now_filetime());
        Ok(info)
    }

    /// True once [`FileOpen::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sets Open.ChannelSequence (from the CREATE that made the open).
    pub fn set_channel_sequence(&self, csn: u16) {
        self.channel_sequence.lock().set(csn);
    }

    /// Verifies the ChannelSequence `csn` of a request on this open ([MS-SMB2]
    /// 3.3.5.2.10, 3.x dialects; `replay`: SMB2_FLAGS_REPLAY_OPERATION,
    /// `modifying`: WRITE, IOCTL, SET_INFO) and counts it as outstanding (see
    /// [`super::channel_seq::ChannelSequence::admit`]) until the returned guard
    /// drops (None: it runs uncounted). A stale modifying request fails with
    /// FILE_NOT_AVAILABLE.
    pub fn check_channel_sequence(
        &self,
        csn: u16,
        replay: bool,
        modifying: bool,
    ) -> Result<Option<super::channel_seq::Outstanding>, NtStatus> {
        super::channel_seq::Outstanding::admit(&self.channel_sequence, csn, replay, modifying)
    }

    /// Closes the open ([MS-FSA] 2.1.5.4 cleanup): a DELETE_ON_CLOSE open makes delete
    /// pending; the last open of a delete-pending file deletes it. Runs once (later
    /// calls and `Drop` do nothing). Returns the outcome of the delete, if one ran.
    pub fn close(&self) -> Option<Result<(), NtStatus>> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return None;
        }
        if self.delete_on_close.load(Ordering::Acquire) {
            self.file.set_delete_pending(true);
        }
        // Byte-range locks, oplocks/leases and pending CHANGE_NOTIFYs of this open end
        // with it (state/locks.rs, state/oplock.rs, state/notify.rs).
        self.file.locks.release_owner(self.entry_id);
        self.file.oplocks.release(self.entry_id);
        self.notify.cleanup();
        // Write-time bookkeeping: an open that wrote since the last update stamps the
        // close time; the last close stores the visible time on disk.
        let now = smbx_wire::time::now_filetime();
        let shown = self.file.times.on_close(self.entry_id, now);
        if let Some(t) = shown {
            self.final_write_time.store(t, Ordering::Release);
        }
        let pending_before = self.is_dir && self.file.delete_pending();
        let outcome = self.file.remove(self.entry_id);
        if pending_before && !outcome.last {
            // A directory left delete-pending by this close: CHANGE_NOTIFYs on its
            // other opens complete with DELETE_PENDING.
            self.file.notify_sinks.delete_pending();
        }
        if let (true, false, Some(t)) = (outcome.last, outcome.delete, shown) {
            if let Err(e) = self.handle.store_write_time(t) {
                tracing::debug!(path = %self.path, "cannot store the write time: {e:?}");
            }
        }
        if outcome.delete_base {
            // Streams: the base file was delete-pending and waited for its last
            // stream open (state/file.rs, SharedFile::remove).
            if let Err(e) = self.vfs.delete_base(&self.handle) {
                tracing::debug!(path = %self.path, "deferred delete of the base file failed: {e:?}");
            }
        }
        if outcome.delete {
            let r = self.vfs.delete(&self.handle);
            if let Err(e) = &r {
                tracing::debug!(path = %self.path, "delete on close failed: {e:?}");
            }
            return Some(r);
        }
        None
    }
}

impl Drop for FileOpen {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A named pipe open on `IPC$`, backed by an in-process DCE/RPC endpoint.
pub struct PipeOpen {
    /// Pipe name as opened (e.g. `srvsvc`).
    pub name: String,
    /// The RPC endpoint; lock only for the duration of one write/read call.
    pub pipe: Mutex<smbx_rpc::Pipe>,
}

/// What an open refers to.
pub enum OpenKind {
    /// A file or directory on a disk share.
    File(FileOpen),
    /// A named pipe on `IPC$`.
    Pipe(Box<PipeOpen>),
}

/// One open.
pub struct Open {
    /// Its FileId.
    pub file_id: FileId,
    /// Owning session.
    pub session_id: u64,
    /// Owning tree connect.
    pub tree_id: u32,
    /// Connection it was opened on.
    pub conn_id: u64,
    /// File or pipe.
    pub kind: OpenKind,
}

impl Open {
    /// The pipe, if this is a pipe open.
    pub fn as_pipe(&self) -> Option<&PipeOpen> {
        match &self.kind {
            OpenKind::Pipe(p) => Some(p),
            OpenKind::File(_) => None,
        }
    }
    /// The file, if this is a file open.
    pub fn as_file(&self) -> Option<&FileOpen> {
        match &self.kind {
            OpenKind::File(f) => Some(f),
            OpenKind::Pipe(_) => None,
        }
    }
}

/// Every open of the server, keyed by the volatile FileId.
#[derive(Default)]
pub struct OpenTable {
    inner: Mutex<OpenTableInner>,
}

#[derive(Default)]
struct OpenTableInner {
    /// By the volatile ids this server assigns (hashed with one multiplication).
    opens: IdMap<u64, Arc<Open>>,
    /// Durable opens whose connection went away, by volatile id, with the generation
    /// of their disconnection (expiry timers check it).
    disconnected: IdMap<u64, (Arc<Open>, u64)>,
    next_persistent: u64,
    disconnect_gen: u64,
    /// Opens in `opens` per session and per connection, for `max open files`.
    counts: OpenCounts,
}

/// How many opens each session and each connection holds (entries at zero are
/// removed, so the maps only hold live owners).
#[derive(Default)]
struct OpenCounts {
    sessions: IdMap<u64, u32>,
    conns: IdMap<u64, u32>,
}

impl OpenCounts {
    fn get(&self, o: (u64, u64)) -> (u32, u32) {
        (
            self.sessions.get(&o.0).copied().unwrap_or(0),
            self.conns.get(&o.1).copied().unwrap_or(0),
        )
    }

    /// Whether one more open for session/connection `o` stays within `limit`.
    fn admits(&self, o: (u64, u64), limit: u32) -> bool {
        let (s, c) = self.get(o);
        s < limit && c < limit
    }

    fn add(&mut self, open: &Open) {
        for (map, key) in [
            (&mut self.sessions, open.session_id),
            (&mut self.conns, open.conn_id),
        ] {
            let n = map.entry(key).or_insert(0);
            *n = n.saturating_add(1);
        }
    }

    fn sub(&mut self, open: &Open) {
        for (map, key) in [
            (&mut self.sessions, open.session_id),
            (&mut self.conns, open.conn_id),
        ] {
            if let Some(n) = map.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&key);
                }
            }
        }
    }
}

impl OpenTableInner {
    /// Takes `v` out of the live opens, keeping the counts right.
    fn take(&mut self, v: u64) -> Option<Arc<Open>> {
        let o = self.opens.remove(&v)?;
        self.counts.sub(&o);
        Some(o)
    }

    /// Puts `open` into the live opens, keeping the counts right.
    fn put(&mut self, open: Arc<Open>) {
        self.counts.add(&open);
        if let Some(old) = self.opens.insert(open.file_id.volatile, open) {
            self.counts.sub(&old);
        }
    }
}

impl OpenTable {
    /// Whether session `session_id` and connection `conn_id` may hold one more open
    /// under `max open files` = `limit` (a cheap check before a CREATE does any work;
    /// [`OpenTable::insert`] decides).
    pub fn admits(&self, session_id: u64, conn_id: u64, limit: u32) -> bool {
        self.inner
            .lock()
            .counts
            .admits((session_id, conn_id), limit.max(1))
    }

    /// Opens held by session `session_id` and by connection `conn_id`.
    pub fn counts(&self, session_id: u64, conn_id: u64) -> (u32, u32) {
        self.inner.lock().counts.get((session_id, conn_id))
    }

    /// Inserts a new open, allocating its FileId, unless its session or its connection
    /// already holds `limit` opens (`max open files`; at least 1): then
    /// STATUS_TOO_MANY_OPENED_FILES, and `kind` is dropped (a file open closes).
    pub fn insert(
        &self,
        session_id: u64,
        tree_id: u32,
        conn_id: u64,
        kind: OpenKind,
        limit: u32,
    ) -> Result<Arc<Open>, NtStatus> {
        let mut t = self.inner.lock();
        if !t.counts.admits((session_id, conn_id), limit.max(1)) {
            drop(t);
            drop(kind);
            return Err(NtStatus::TOO_MANY_OPENED_FILES);
        }
        // Volatile ids are random, so a client cannot guess another's open (a
        // disconnected durable one, say) from its own.
        let volatile = loop {
            let v: u64 = rand::random();
            if v != 0
                && v != u64::MAX
                && !t.opens.contains_key(&v)
                && !t.disconnected.contains_key(&v)
            {
                break v;
            }
        };
        t.next_persistent = t.next_persistent.wrapping_add(1);
        let open = Arc::new(Open {
            file_id: FileId {
                persistent: t.next_persistent,
                volatile,
            },
            session_id,
            tree_id,
            conn_id,
            kind,
        });
        t.put(open.clone());
        Ok(open)
    }

    /// Finds an open by FileId (both halves must match).
    pub fn get(&self, id: FileId) -> Option<Arc<Open>> {
        let t = self.inner.lock();
        t.opens
            .get(&id.volatile)
            .filter(|o| o.file_id.persistent == id.persistent)
            .cloned()
    }

    /// Removes an open by FileId.
    pub fn remove(&self, id: FileId) -> Option<Arc<Open>> {
        let mut t = self.inner.lock();
        match t.opens.get(&id.volatile) {
            Some(o) if o.file_id.persistent == id.persistent => t.take(id.volatile),
            _ => None,
        }
    }

    /// Removes and returns every open matching `pred` (tree disconnect, logoff, teardown).
    pub fn remove_where(&self, pred: impl Fn(&Open) -> bool) -> Vec<Arc<Open>> {
        let mut t = self.inner.lock();
        let ids: Vec<u64> = t
            .opens
            .iter()
            .filter(|(_, o)| pred(o))
            .map(|(k, _)| *k)
            .collect();
        ids.iter().filter_map(|k| t.take(*k)).collect()
    }

    /// A snapshot of every open matching `pred` (share-mode and oplock checks).
    pub fn find_where(&self, pred: impl Fn(&Open) -> bool) -> Vec<Arc<Open>> {
        self.inner
            .lock()
            .opens
            .values()
            .filter(|o| pred(o))
            .cloned()
            .collect()
    }

    /// Number of opens.
    pub fn len(&self) -> usize {
        self.inner.lock().opens.len()
    }

    /// True if there are no opens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Durable handles ([MS-SMB2] 3.3.5.9.7, 3.3.5.9.12, 3.3.7.1): opens that outlive
/// their connection for a while and can be reclaimed.
impl OpenTable {
    /// Moves the durable opens matching `pred` (their connection or session went
    /// away) out of the table into the disconnected set. Returns each one's FileId,
    /// timeout (ms) and disconnection generation (for
    /// [`OpenTable::expire_disconnected`]).
    pub fn preserve_durable_where(&self, pred: impl Fn(&Open) -> bool) -> Vec<(FileId, u32, u64)> {
        let mut t = self.inner.lock();
        let ids: Vec<(u64, u32)> = t
            .opens
            .iter()
            .filter(|(_, o)| pred(o))
            .filter_map(|(k, o)| {
                let f = o.as_file()?;
                let timeout = f.durable.lock().as_ref()?.timeout_ms;
                // An open whose oplock / lease break is outstanding is not kept: the
                // client cannot acknowledge any more, and the opener waiting for the
                // break proceeds once it is closed (as Windows; smb2.durable-open.oplock
                // when the new open overtakes the teardown).
                let breaking = f.file.oplocks.breaking(f.entry_id);
                (!f.is_closed() && !breaking).then_some((*k, timeout))
            })
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for (k, timeout) in ids {
            if let Some(o) = t.take(k) {
                t.disconnect_gen = t.disconnect_gen.wrapping_add(1);
                let g = t.disconnect_gen;
                out.push((o.file_id, timeout, g));
                t.disconnected.insert(k, (o, g));
            }
        }
        out
    }

    /// The disconnected durable open with FileId `id` (both halves must match).
    pub fn disconnected(&self, id: FileId) -> Option<Arc<Open>> {
        let t = self.inner.lock();
        t.disconnected
            .get(&id.volatile)
            .filter(|(o, _)| o.file_id.persistent == id.persistent)
            .map(|(o, _)| o.clone())
    }

    /// Takes the disconnected open `id` out (reconnect); `None` if it is gone.
    pub fn take_disconnected(&self, id: FileId) -> Option<Arc<Open>> {
        let mut t = self.inner.lock();
        match t.disconnected.get(&id.volatile) {
            Some((o, _)) if o.file_id.persistent == id.persistent => {
                t.disconnected.remove(&id.volatile).map(|(o, _)| o)
            }
            _ => None,
        }
    }

    /// Closes the disconnected open `id` if it is still the disconnection `generation`
    /// (its durable timeout ran out).
    pub fn expire_disconnected(&self, id: FileId, generation: u64) {
        let gone = {
            let mut t = self.inner.lock();
            match t.disconnected.get(&id.volatile) {
                Some((o, g)) if o.file_id == id && *g == generation => {
                    t.disconnected.remove(&id.volatile)
                }
                _ => None,
            }
        };
        // Dropped outside the lock: FileOpen's Drop closes the file.
        drop(gone);
    }

    /// Closes every disconnected durable open of `file`: a new open of the file would
    /// have to break their oplocks / leases, which a disconnected client cannot
    /// acknowledge (Windows closes them; smb2.durable-open.oplock / .lease).
    pub fn purge_disconnected_of(&self, file: &Arc<SharedFile>) -> usize {
        let gone: Vec<(Arc<Open>, u64)> = {
            let mut t = self.inner.lock();
            let keys: Vec<u64> = t
                .disconnected
                .iter()
                .filter(|(_, (o, _))| o.as_file().is_some_and(|f| Arc::ptr_eq(&f.file, file)))
                .map(|(k, _)| *k)
                .collect();
            keys.iter()
                .filter_map(|k| t.disconnected.remove(k))
                .collect()
        };
        gone.len()
    }

    /// Number of disconnected durable opens.
    pub fn disconnected_len(&self) -> usize {
        self.inner.lock().disconnected.len()
    }

    /// Inserts an existing open under its own FileId (durable reconnect). `None`
    /// (and the open is closed) if the id is in use. It counts against its session's
    /// and connection's `max open files` but is not refused by it: the client held
    /// it before.
    pub fn insert_open(&self, open: Open) -> Option<Arc<Open>> {
        let open = Arc::new(open);
        let mut t = self.inner.lock();
        let v = open.file_id.volatile;
        if t.opens.contains_key(&v) || t.disconnected.contains_key(&v) {
            drop(t);
            drop(open);
            return None;
        }
        t.put(open.clone());
        Some(open)
    }
}

/// The opens matching `pred` lost their connection: the durable ones are kept for
/// their timeout (then closed) instead of being closed now. Call before the
/// connection's sessions and opens are torn down.
pub fn preserve_durable_opens_where(
    server: &Arc<super::ServerState>,
    pred: impl Fn(&Open) -> bool,
) {
    let kept = server.opens.preserve_durable_where(pred);
    expire_later(server, kept);
}

/// LOGOFF of `session_id`: its durable opens are kept for their timeout like on a
/// lost connection (smb2.durable-open.reopen4 reclaims one from a new session).
pub fn preserve_durable_opens_of_session(server: &Arc<super::ServerState>, session_id: u64) {
    let kept = server
        .opens
        .preserve_durable_where(|o| o.session_id == session_id);
    expire_later(server, kept);
}

fn expire_later(server: &Arc<super::ServerState>, kept: Vec<(FileId, u32, u64)>) {
    if kept.is_empty() {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        // No runtime to time them out: close them now.
        for (id, _, g) in kept {
            server.opens.expire_disconnected(id, g);
        }
        return;
    };
    for (id, timeout_ms, g) in kept {
        let weak = Arc::downgrade(server);
        rt.spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(timeout_ms as u64)).await;
            if let Some(s) = weak.upgrade() {
                s.opens.expire_disconnected(id, g);
            }
        });
    }
}

/// An enumeration in progress on one directory open.
#[derive(Debug)]
pub struct DirCursor {
    /// The search pattern the snapshot was taken with.
    pub pattern: String,
    /// Matching names ("." and ".." first when they match).
    pub names: Vec<String>,
    /// Index of the next entry to return.
    pub pos: usize,
}

/// Per-open query state (enumeration cursor, FileFullEaInformation index), kept in
/// `FileOpen::query`.
#[derive(Debug, Default)]
pub struct QueryState {
    /// The directory enumeration, once started.
    pub dir: Option<DirCursor>,
    /// Index (0-based) of the next EA FileFullEaInformation returns without
    /// RESTART_SCAN.
    pub ea_index: usize,
}

/// A file open of `f` in a share at `dir`, created with `created` (for tests of
/// what an open's state decides).
#[cfg(test)]
pub(crate) fn test_file_open(dir: &std::path::Path, created: CreateOptions) -> FileOpen {
    let vfs = smbx_vfs::Share::open(dir, Default::default()).unwrap();
    let req = smbx_vfs::CreateRequest {
        disposition: smbx_vfs::Disposition::OpenIf,
        want_write: true,
        ..Default::default()
    };
    let (handle, _) = vfs.create("f", &req).unwrap();
    let key = super::file::FileKey {
        volume_id: 0,
        file_id: 1,
        stream: None,
    };
    let all = ShareAccess::ALL;
    let (file, entry_id) = super::FileTable::default()
        .register(key, AccessMask::FILE_WRITE_DATA, all)
        .unwrap();
    FileOpen::new(FileOpenParams {
        path: "f".into(),
        handle: Arc::new(handle),
        vfs,
        access: AccessMask::FILE_WRITE_DATA,
        share_access: all,
        create_options: created,
        file,
        entry_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> OpenKind {
        let p = smbx_rpc::Pipe::open("srvsvc", smbx_rpc::PipeContext::default()).unwrap();
        OpenKind::Pipe(Box::new(PipeOpen {
            name: "srvsvc".into(),
            pipe: Mutex::new(p),
        }))
    }

    #[test]
    fn max_open_files_per_session_and_connection() {
        let t = OpenTable::default();
        let a = t.insert(1, 1, 10, pipe(), 2).ok().unwrap();
        assert!(t.insert(1, 1, 10, pipe(), 2).is_ok());
        assert_eq!(t.counts(1, 10), (2, 2));
        assert!(!t.admits(1, 10, 2));
        let e = t.insert(1, 1, 10, pipe(), 2).err().unwrap();
        assert_eq!(e, NtStatus::TOO_MANY_OPENED_FILES);
        // Another session on the same connection: the connection is full.
        assert_eq!(
            t.insert(2, 1, 10, pipe(), 2).err().unwrap(),
            NtStatus::TOO_MANY_OPENED_FILES
        );
        // The same session on another connection (a channel): the session is full.
        assert_eq!(
            t.insert(1, 1, 11, pipe(), 2).err().unwrap(),
            NtStatus::TOO_MANY_OPENED_FILES
        );
        assert!(t.insert(2, 1, 11, pipe(), 2).is_ok());
        assert!(t.remove(a.file_id).is_some());
        assert_eq!(t.counts(1, 10), (1, 1));
        assert!(t.insert(1, 1, 10, pipe(), 2).is_ok());
        assert_eq!(t.remove_where(|o| o.conn_id == 10).len(), 2);
        assert_eq!(t.counts(1, 10), (0, 0));
        assert_eq!(t.counts(2, 11), (1, 1));
        assert_eq!(t.len(), 1);
    }
}
