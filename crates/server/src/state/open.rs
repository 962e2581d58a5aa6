//! Opens ([MS-SMB2] 3.3.1.10): files, directories and named pipes, in one
//! server-wide table keyed by the volatile FileId so share modes, oplocks and leases
//! can see the opens of every connection.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use smbx_wire::codec::{Reader, WireError, Writer};

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

/// A file or directory open. The CREATE engineer extends this with the vfs handle,
/// access mask, share access, oplock/lease state, etc.
#[derive(Debug, Default)]
pub struct FileOpen {
    /// Path relative to the share root, with `\` separators as the client sent it.
    pub path: String,
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
