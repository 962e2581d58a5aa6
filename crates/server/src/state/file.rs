//! Per-file shared state ([MS-FSA] 2.1.1.5 File / 2.1.1.6 Stream): every open of one
//! file (or named stream), across all connections, with its granted access and share
//! access, plus the delete-pending flag all those opens share.
//!
//! Keyed by the file's `(volume_id, file_id)` (device and inode) and the lower-cased
//! stream name, so two names of one file (hard links, case variants) meet here.
//!
//! Share-mode checks ([MS-FSA] 2.1.5.1.2, "check sharing access") and registration
//! happen atomically in [`FileTable::register`]. When the last open of a file goes
//! away and delete is pending the caller deletes it ([`CloseOutcome::delete`]);
//! [`crate::state::open::FileOpen`]'s `Drop` does the same for opens removed by tree
//! disconnect, logoff or connection teardown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use smbx_wire::NtStatus;

use super::share::Share;

/// FILE_READ_DATA.
pub const FILE_READ_DATA: u32 = 0x0000_0001;
/// FILE_WRITE_DATA.
pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
/// FILE_APPEND_DATA.
pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
/// FILE_EXECUTE.
pub const FILE_EXECUTE: u32 = 0x0000_0020;
/// DELETE.
pub const DELETE: u32 = 0x0001_0000;

/// FILE_SHARE_READ.
pub const FILE_SHARE_READ: u32 = 0x1;
/// FILE_SHARE_WRITE.
pub const FILE_SHARE_WRITE: u32 = 0x2;
/// FILE_SHARE_DELETE.
pub const FILE_SHARE_DELETE: u32 = 0x4;

/// Identity of one file or named stream on the server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileKey {
    /// Volume (device) id.
    pub volume_id: u64,
    /// File id (inode number).
    pub file_id: u64,
    /// Lower-cased named stream, `None` for the default stream (and directories).
    pub stream: Option<String>,
}

/// One open as the share-mode check sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenEntry {
    /// Identifier of the entry within the table (not the FileId).
    pub entry_id: u64,
    /// Granted access mask.
    pub access: u32,
    /// ShareAccess of the open.
    pub share_access: u32,
}

#[derive(Debug, Default)]
struct FileState {
    opens: Vec<OpenEntry>,
    delete_pending: bool,
}

type FileMap = Mutex<HashMap<FileKey, Arc<SharedFile>>>;

/// State shared by every open of one file.
#[derive(Debug)]
pub struct SharedFile {
    /// Which file.
    pub key: FileKey,
    /// Byte-range locks of this file (owned by the LOCK handler, state/locks.rs).
    pub locks: super::locks::ByteRangeLocks,
    /// Oplocks and leases granted on this file (state/oplock.rs).
    pub oplocks: super::oplock::FileOplocks,
    state: Mutex<FileState>,
    map: Weak<FileMap>,
}

impl SharedFile {
    /// Delete is pending: the file goes away when its last open closes, and new opens
    /// fail with DELETE_PENDING.
    pub fn delete_pending(&self) -> bool {
        self.state.lock().delete_pending
    }

    /// Sets or clears delete-pending (FileDispositionInformation, DELETE_ON_CLOSE).
    pub fn set_delete_pending(&self, pending: bool) {
        self.state.lock().delete_pending = pending;
    }

    /// A snapshot of the opens of this file.
    pub fn opens(&self) -> Vec<OpenEntry> {
        self.state.lock().opens.clone()
    }

    /// Number of opens of this file.
    pub fn open_count(&self) -> usize {
        self.state.lock().opens.len()
    }

    /// Would an open with `access` / `share_access` conflict with the current opens
    /// (ignoring `except`, e.g. the caller's own entry)? Returns SHARING_VIOLATION then.
    pub fn check_share(
        &self,
        access: u32,
        share_access: u32,
        except: Option<u64>,
    ) -> Result<(), NtStatus> {
        let st = self.state.lock();
        check_sharing(
            st.opens.iter().filter(|o| Some(o.entry_id) != except),
            access,
            share_access,
        )
    }

    /// Removes entry `entry_id` (an open going away). Returns what the caller must do.
    /// Idempotent: removing an absent entry reports nothing to do.
    pub fn remove(self: &Arc<Self>, entry_id: u64) -> CloseOutcome {
        let map = self.map.upgrade();
        // Lock order: map, then file (as in register).
        let mut guard = map.as_ref().map(|m| m.lock());
        let mut st = self.state.lock();
        let Some(pos) = st.opens.iter().position(|o| o.entry_id == entry_id) else {
            return CloseOutcome::default();
        };
        st.opens.swap_remove(pos);
        let last = st.opens.is_empty();
        let delete = last && st.delete_pending;
        if last {
            st.delete_pending = false;
            if let Some(m) = guard.as_mut() {
                if m.get(&self.key).is_some_and(|f| Arc::ptr_eq(f, self)) {
                    m.remove(&self.key);
                }
            }
        }
        CloseOutcome { last, delete }
    }
}

/// What closing one open means for the file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CloseOutcome {
    /// It was the last open of the file.
    pub last: bool,
    /// Delete was pending: the caller deletes the file now.
    pub delete: bool,
}

/// [MS-FSA] 2.1.5.1.2 share-access check of a new open against `existing`.
pub fn check_sharing<'a>(
    existing: impl IntoIterator<Item = &'a OpenEntry>,
    access: u32,
    share_access: u32,
) -> Result<(), NtStatus> {
    const R: u32 = FILE_READ_DATA | FILE_EXECUTE;
    const W: u32 = FILE_WRITE_DATA | FILE_APPEND_DATA;
    const D: u32 = DELETE;
    if access & (R | W | D) == 0 {
        // Attribute-only opens never conflict.
        return Ok(());
    }
    for o in existing {
        if o.access & (R | W | D) == 0 {
            continue;
        }
        let conflict = (access & R != 0 && o.share_access & FILE_SHARE_READ == 0)
            || (access & W != 0 && o.share_access & FILE_SHARE_WRITE == 0)
            || (access & D != 0 && o.share_access & FILE_SHARE_DELETE == 0)
            || (o.access & R != 0 && share_access & FILE_SHARE_READ == 0)
            || (o.access & W != 0 && share_access & FILE_SHARE_WRITE == 0)
            || (o.access & D != 0 && share_access & FILE_SHARE_DELETE == 0);
        if conflict {
            return Err(NtStatus::SHARING_VIOLATION);
        }
    }
    Ok(())
}

/// The server-wide table of open files, and the vfs share of each disk share.
pub struct FileTable {
    files: Arc<FileMap>,
    next_entry: AtomicU64,
    vfs: Mutex<HashMap<String, smbx_vfs::Share>>,
}

impl Default for FileTable {
    fn default() -> Self {
        FileTable {
            files: Arc::new(Mutex::new(HashMap::new())),
            next_entry: AtomicU64::new(1),
            vfs: Mutex::new(HashMap::new()),
        }
    }
}

impl FileTable {
    /// Registers an open of `key` after checking delete-pending (DELETE_PENDING) and
    /// share access (SHARING_VIOLATION) against every existing open of the file.
    /// Returns the shared file and the new entry's id.
    pub fn register(
        &self,
        key: FileKey,
        access: u32,
        share_access: u32,
    ) -> Result<(Arc<SharedFile>, u64), NtStatus> {
        let mut map = self.files.lock();
        let file = map
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(SharedFile {
                    key,
                    locks: Default::default(),
                    oplocks: Default::default(),
                    state: Mutex::new(FileState::default()),
                    map: Arc::downgrade(&self.files),
                })
            })
            .clone();
        let mut st = file.state.lock();
        if st.delete_pending {
            return Err(NtStatus::DELETE_PENDING);
        }
        check_sharing(st.opens.iter(), access, share_access)?;
        let entry_id = self.next_entry.fetch_add(1, Ordering::Relaxed);
        st.opens.push(OpenEntry {
            entry_id,
            access,
            share_access,
        });
        drop(st);
        Ok((file, entry_id))
    }

    /// Drops the table entry of `key` if nobody registered on it (after a failed
    /// [`FileTable::register`]).
    pub fn forget_if_unused(&self, key: &FileKey) {
        let mut map = self.files.lock();
        if map
            .get(key)
            .is_some_and(|f| f.state.lock().opens.is_empty())
        {
            map.remove(key);
        }
    }

    /// The shared state of `key`, if it has opens.
    pub fn get(&self, key: &FileKey) -> Option<Arc<SharedFile>> {
        self.files.lock().get(key).cloned()
    }

    /// Number of files with opens.
    pub fn len(&self) -> usize {
        self.files.lock().len()
    }

    /// True if no file is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vfs share behind disk share `share`, opened on first use.
    pub fn vfs_share(&self, share: &Share) -> Result<smbx_vfs::Share, NtStatus> {
        if share.is_ipc() {
            return Err(NtStatus::INVALID_DEVICE_REQUEST);
        }
        let key = share.name.to_lowercase();
        let mut m = self.vfs.lock();
        if let Some(s) = m.get(&key) {
            return Ok(s.clone());
        }
        let opts = smbx_vfs::ShareOptions {
            case_sensitive: share.config.case_sensitive,
            store_dos_attributes: share.config.store_dos_attributes,
            read_only: share.config.read_only,
            follow_symlinks_within_share: false,
        };
        let s = smbx_vfs::Share::open(&share.config.path, opts).map_err(|e| {
            tracing::warn!(share = %share.name, path = %share.config.path.display(),
                "cannot open share directory: {e:?}");
            NtStatus::BAD_NETWORK_NAME
        })?;
        m.insert(key, s.clone());
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> FileKey {
        FileKey {
            volume_id: 1,
            file_id: ino,
            stream: None,
        }
    }

    #[test]
    fn read_sharers_coexist_writer_conflicts() {
        let t = FileTable::default();
        let (_f, _) = t.register(key(1), FILE_READ_DATA, FILE_SHARE_READ).unwrap();
        t.register(key(1), FILE_READ_DATA, FILE_SHARE_READ).unwrap();
        assert_eq!(
            t.register(key(1), FILE_WRITE_DATA, 7).unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        // Share mode of the new open excludes the existing reader.
        assert_eq!(
            t.register(key(1), FILE_READ_DATA, FILE_SHARE_WRITE)
                .unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        // Attribute-only opens never conflict.
        t.register(key(1), 0x80, 0).unwrap();
        // Other files are independent.
        t.register(key(2), FILE_WRITE_DATA, 0).unwrap();
    }

    #[test]
    fn delete_pending_blocks_new_opens_and_fires_on_last_close() {
        let t = FileTable::default();
        let (f, a) = t.register(key(1), DELETE, 7).unwrap();
        let (_, b) = t.register(key(1), FILE_READ_DATA, 7).unwrap();
        f.set_delete_pending(true);
        assert_eq!(
            t.register(key(1), FILE_READ_DATA, 7).unwrap_err(),
            NtStatus::DELETE_PENDING
        );
        assert_eq!(
            f.remove(a),
            CloseOutcome {
                last: false,
                delete: false
            }
        );
        assert_eq!(
            f.remove(b),
            CloseOutcome {
                last: true,
                delete: true
            }
        );
        assert!(t.is_empty());
        // Removing twice is harmless.
        assert_eq!(f.remove(b), CloseOutcome::default());
        // A new open starts fresh.
        t.register(key(1), FILE_READ_DATA, 0).unwrap();
    }

    #[test]
    fn delete_access_needs_share_delete() {
        let t = FileTable::default();
        t.register(key(1), FILE_READ_DATA, FILE_SHARE_READ).unwrap();
        assert_eq!(
            t.register(key(1), DELETE, 7).unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        let t = FileTable::default();
        let (f, a) = t
            .register(key(1), FILE_READ_DATA, FILE_SHARE_READ | FILE_SHARE_DELETE)
            .unwrap();
        t.register(key(1), DELETE, 7).unwrap();
        assert!(f.check_share(FILE_WRITE_DATA, 7, Some(a)).is_ok());
    }
}
