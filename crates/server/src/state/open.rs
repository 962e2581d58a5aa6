//! Opens ([MS-SMB2] 3.3.1.10): files, directories and named pipes, in one
//! server-wide table keyed by the volatile FileId so share modes, oplocks and leases
//! can see the opens of every connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use smbx_wire::codec::{Reader, WireError, Writer};
use smbx_wire::NtStatus;

use super::file::SharedFile;

/// An SMB2_FILEID: persistent and volatile halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    /// Persistent part (survives durable reconnects).
    pub persistent: u64,
    /// Volatile part (unique per open on this server instance).
    pub volatile: u64,
}

impl FileId {
    /// The all-ones FileId that related compound members use for "the previous one".
    pub const RELATED: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    /// Reads the 16-byte wire form.
    pub fn decode(r: &mut Reader<'_>) -> Result<FileId, WireError> {
        Ok(FileId {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }

    /// Writes the 16-byte wire form.
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.persistent).u64(self.volatile);
    }

    /// True for the all-ones "use the previous compound member's FileId" value.
    pub fn is_related(&self) -> bool {
        *self == FileId::RELATED
    }
}

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
    pub access: u32,
    /// ShareAccess of the open.
    pub share_access: u32,
    /// CreateOptions as requested (FILE_WRITE_THROUGH, FILE_SEQUENTIAL_ONLY, ...).
    pub create_options: u32,
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
    /// Granted oplock level (SMB2_OPLOCK_LEVEL_*), owned by the oplock module.
    pub oplock_level: AtomicU8,
    /// FileModeInformation bits changed through SET_INFO (initially from CreateOptions).
    pub mode: AtomicU32,
    /// CHANGE_NOTIFY state of a directory open (state/notify.rs).
    pub notify: super::notify::OpenNotify,
    /// QUERY_DIRECTORY enumeration cursor and FileFullEaInformation index
    /// (handlers/query_directory.rs, handlers/query_info.rs).
    pub query: Mutex<crate::handlers::query_directory::QueryState>,
    /// The LastWriteTime the file had when this open closed, if the server's write-time
    /// bookkeeping ([`crate::state::file::WriteTimes`]) decided it (0: the on-disk one).
    pub final_write_time: AtomicU64,
    /// Durable handle granted at CREATE ([MS-SMB2] 3.3.5.9.6 / 3.3.5.9.10), if any.
    pub durable: Mutex<Option<Durable>>,
    closed: AtomicBool,
}

/// A granted durable handle: the open survives the loss of its connection for
/// `timeout_ms` and can be reclaimed with DHnC / DH2C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    /// Granted through DH2Q (version 2) rather than DHnQ.
    pub v2: bool,
    /// How long a disconnected open is kept (ms).
    pub timeout_ms: u32,
    /// CreateGuid of a DH2Q request.
    pub create_guid: [u8; 16],
}

impl std::fmt::Debug for FileOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileOpen")
            .field("path", &self.path)
            .field("access", &format_args!("{:#x}", self.access))
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
    pub access: u32,
    /// See [`FileOpen::share_access`].
    pub share_access: u32,
    /// See [`FileOpen::create_options`].
    pub create_options: u32,
    /// See [`FileOpen::file`].
    pub file: Arc<SharedFile>,
    /// See [`FileOpen::entry_id`].
    pub entry_id: u64,
}

impl FileOpen {
    /// A new open (already registered in the file table as `entry_id`).
    pub fn new(p: FileOpenParams) -> FileOpen {
        const FILE_DELETE_ON_CLOSE: u32 = 0x1000;
        const MODE_BITS: u32 = 0x0000_0002 | 0x0000_0004 | 0x0000_0010 | 0x0000_0020;
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
            delete_on_close: AtomicBool::new(p.create_options & FILE_DELETE_ON_CLOSE != 0),
            position: AtomicU64::new(0),
            oplock_level: AtomicU8::new(0),
            mode: AtomicU32::new(p.create_options & MODE_BITS),
            notify: Default::default(),
            query: Mutex::new(Default::default()),
            final_write_time: AtomicU64::new(0),
            durable: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
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
        let outcome = self.file.remove(self.entry_id);
        if let (true, false, Some(t)) = (outcome.last, outcome.delete, shown) {
            if let Err(e) = self.handle.store_write_time(t) {
                tracing::debug!(path = %self.path, "cannot store the write time: {e:?}");
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
    opens: HashMap<u64, Arc<Open>>,
    next_volatile: u64,
    next_persistent: u64,
}

impl OpenTable {
    /// Inserts a new open, allocating its FileId.
    pub fn insert(&self, session_id: u64, tree_id: u32, conn_id: u64, kind: OpenKind) -> Arc<Open> {
        let mut t = self.inner.lock();
        let volatile = loop {
            t.next_volatile = t.next_volatile.wrapping_add(1);
            let v = t.next_volatile;
            if v != 0 && v != u64::MAX && !t.opens.contains_key(&v) {
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
        t.opens.insert(volatile, open.clone());
        open
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
            Some(o) if o.file_id.persistent == id.persistent => t.opens.remove(&id.volatile),
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
        ids.iter().filter_map(|k| t.opens.remove(k)).collect()
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
