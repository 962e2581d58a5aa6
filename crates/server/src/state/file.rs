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

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use smbx_wire::NtStatus;
use smbx_wire::{AccessMask, ShareAccess};

use super::share::Share;

/// Identity of one file or named stream on the server. Ordered so that a file's base
/// entry (`stream: None`) is followed by its named streams in the table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    pub access: AccessMask,
    /// ShareAccess of the open.
    pub share_access: ShareAccess,
}

#[derive(Debug, Default)]
struct FileState {
    opens: Vec<OpenEntry>,
    delete_pending: bool,
}

// A BTreeMap so that the base file and all its named streams are one range
// ([`same_file`]): stream opens share DELETE access and delete-pending with the base.
type FileMap = Mutex<BTreeMap<FileKey, Arc<SharedFile>>>;

/// Every entry of the file `key` belongs to (base and named streams).
fn same_file<'a>(
    map: &'a BTreeMap<FileKey, Arc<SharedFile>>,
    key: &FileKey,
) -> impl Iterator<Item = (&'a FileKey, &'a Arc<SharedFile>)> + 'a {
    let base = FileKey {
        volume_id: key.volume_id,
        file_id: key.file_id,
        stream: None,
    };
    let (vol, id) = (key.volume_id, key.file_id);
    map.range(base..)
        .take_while(move |(k, _)| k.volume_id == vol && k.file_id == id)
}

/// True if a named stream of `key`'s file (other than `key`) has opens.
fn streams_open(map: &BTreeMap<FileKey, Arc<SharedFile>>, key: &FileKey) -> bool {
    same_file(map, key)
        .any(|(k, f)| k.stream.is_some() && k != key && !f.state.lock().opens.is_empty())
}

/// State shared by every open of one file.
#[derive(Debug)]
pub struct SharedFile {
    /// Which file.
    pub key: FileKey,
    /// Byte-range locks of this file (owned by the LOCK handler, state/locks.rs).
    pub locks: super::locks::ByteRangeLocks,
    /// Oplocks and leases granted on this file (state/oplock.rs).
    pub oplocks: super::oplock::FileOplocks,
    /// Windows last-write-time bookkeeping shared by every open ([`WriteTimes`]).
    pub times: WriteTimes,
    /// CHANGE_NOTIFY state of the directory opens of this file that asked for
    /// notifications (state/notify.rs), told when the directory becomes delete-pending.
    pub notify_sinks: super::notify::DirSinks,
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
        access: AccessMask,
        share_access: ShareAccess,
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
        let mut delete = last && st.delete_pending;
        // Streams ([MS-FSA] 2.1.5.4): a delete-pending base file with open named
        // streams stays (pending) until the last stream open closes; that close then
        // deletes the base file (`delete_base`).
        if delete && self.key.stream.is_none() {
            if let Some(m) = guard.as_ref() {
                if streams_open(m, &self.key) {
                    return CloseOutcome {
                        last,
                        delete: false,
                        delete_base: false,
                    };
                }
            }
        }
        let mut delete_base = false;
        if last && self.key.stream.is_some() {
            if let Some(m) = guard.as_mut() {
                let base = FileKey {
                    stream: None,
                    ..self.key.clone()
                };
                let deferred = m.get(&base).is_some_and(|b| {
                    let bs = b.state.lock();
                    bs.opens.is_empty() && bs.delete_pending
                });
                if deferred && !streams_open(m, &self.key) {
                    m.remove(&base);
                    delete_base = true;
                    delete = false;
                }
            }
        }
        if last {
            st.delete_pending = false;
            if let Some(m) = guard.as_mut() {
                if m.get(&self.key).is_some_and(|f| Arc::ptr_eq(f, self)) {
                    m.remove(&self.key);
                }
            }
        }
        CloseOutcome {
            last,
            delete,
            delete_base,
        }
    }
}

/// Delay between the first write through an open and the visible LastWriteTime update
/// (2 s as Windows and Samba), in FILETIME units.
pub const WRITE_TIME_DELAY: u64 = 2 * 10_000_000;

/// Windows LastWriteTime semantics across the opens of one file (what smb2.timestamps
/// checks against Windows 2016):
///
/// * the first write through an open does not change the visible LastWriteTime; it
///   schedules an update [`WRITE_TIME_DELAY`] later (modelled lazily: the update "fires"
///   at that instant the next time anybody looks). Later writes through the same open
///   schedule nothing;
/// * FLUSH, SET_INFO end-of-file and SET_INFO basic (even with all times 0) make a
///   pending update happen now;
/// * an open that wrote after the last update stamps the close time when it closes;
/// * an explicitly set LastWriteTime sticks: writes and closes no longer move it;
/// * the visible time is `shown` when set, else the on-disk mtime; the last close of
///   the file writes `shown` to disk (the table entry goes away then).
///
/// Every method takes `now` (FILETIME) so the behaviour is testable without sleeping.
#[derive(Debug, Default)]
pub struct WriteTimes {
    inner: Mutex<WriteTimeState>,
}

#[derive(Debug, Default)]
struct WriteTimeState {
    /// LastWriteTime reported instead of the on-disk mtime, while set.
    shown: Option<u64>,
    /// A delayed update is pending and fires at this instant.
    pending_until: Option<u64>,
    /// An explicit LastWriteTime was set.
    sticky: bool,
    /// Opens (entry ids) whose first write already scheduled an update.
    triggered: Vec<u64>,
    /// Opens that wrote since the last update: they stamp the time on close.
    dirty: Vec<u64>,
}

impl WriteTimeState {
    fn poll(&mut self, now: u64) {
        if let Some(t) = self.pending_until {
            if now >= t {
                self.pending_until = None;
                self.shown = Some(t);
                self.dirty.clear();
            }
        }
    }
}

impl WriteTimes {
    /// A write through open `entry` is about to happen. `disk_mtime` gives the current
    /// on-disk LastWriteTime (called at most once, before the data changes).
    pub fn on_write(&self, entry: u64, now: u64, disk_mtime: impl FnOnce() -> Option<u64>) {
        let mut st = self.inner.lock();
        st.poll(now);
        if st.sticky {
            if st.shown.is_none() {
                st.shown = disk_mtime();
            }
            return;
        }
        if st.shown.is_none() {
            st.shown = disk_mtime();
        }
        if !st.dirty.contains(&entry) {
            st.dirty.push(entry);
        }
        if st.triggered.contains(&entry) {
            return;
        }
        st.triggered.push(entry);
        if st.pending_until.is_none() {
            st.pending_until = Some(now.saturating_add(WRITE_TIME_DELAY));
        }
    }

    /// FLUSH, SET_INFO end of file / basic: a pending update happens now.
    pub fn flush_pending(&self, now: u64) {
        let mut st = self.inner.lock();
        st.poll(now);
        if st.sticky {
            return;
        }
        if st.pending_until.take().is_some() {
            st.shown = Some(now);
            st.dirty.clear();
        }
    }

    /// An explicit LastWriteTime `t` was stored (SET_INFO basic): it sticks.
    pub fn set_explicit(&self, t: u64) {
        let mut st = self.inner.lock();
        st.sticky = true;
        st.shown = Some(t);
        st.pending_until = None;
        st.dirty.clear();
    }

    /// Open `entry` closes: stamps `now` if it wrote since the last update. Returns
    /// the LastWriteTime to report (None: the on-disk one).
    pub fn on_close(&self, entry: u64, now: u64) -> Option<u64> {
        let mut st = self.inner.lock();
        st.poll(now);
        if let Some(pos) = st.dirty.iter().position(|&e| e == entry) {
            st.dirty.swap_remove(pos);
            if !st.sticky {
                st.shown = Some(now);
                st.pending_until = None;
            }
        }
        st.triggered.retain(|&e| e != entry);
        st.shown
    }

    /// The LastWriteTime to report instead of the on-disk `disk` value, if any.
    pub fn shown(&self, now: u64) -> Option<u64> {
        let mut st = self.inner.lock();
        st.poll(now);
        st.shown
    }

    /// Applies the visible LastWriteTime to `info` (ChangeTime follows it unless a
    /// stored ChangeTime differs from the on-disk mtime).
    pub fn adjust(&self, info: &mut smbx_vfs::FileInfo, now: u64) {
        if let Some(t) = self.shown(now) {
            if info.change_time == info.last_write_time {
                info.change_time = t;
            }
            info.last_write_time = t;
        }
    }
}

/// What closing one open means for the file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CloseOutcome {
    /// It was the last open of the file.
    pub last: bool,
    /// Delete was pending: the caller deletes the file now.
    pub delete: bool,
    /// The last open of a named stream closed while its base file was delete-pending
    /// with no opens left: the caller deletes the base file now.
    pub delete_base: bool,
}

/// [MS-FSA] 2.1.5.1.2 share-access check of a new open against `existing`.
pub fn check_sharing<'a>(
    existing: impl IntoIterator<Item = &'a OpenEntry>,
    access: AccessMask,
    share_access: ShareAccess,
) -> Result<(), NtStatus> {
    // Each kind of access and the sharing that lets others have it.
    const KINDS: [(AccessMask, ShareAccess); 3] = [
        (
            AccessMask::FILE_READ_DATA.union(AccessMask::FILE_EXECUTE),
            ShareAccess::FILE_SHARE_READ,
        ),
        (
            AccessMask::FILE_WRITE_DATA.union(AccessMask::FILE_APPEND_DATA),
            ShareAccess::FILE_SHARE_WRITE,
        ),
        (AccessMask::DELETE, ShareAccess::FILE_SHARE_DELETE),
    ];
    const ANY: AccessMask = KINDS[0].0.union(KINDS[1].0).union(KINDS[2].0);
    if !access.intersects(ANY) {
        // Attribute-only opens never conflict.
        return Ok(());
    }
    for o in existing {
        if !o.access.intersects(ANY) {
            continue;
        }
        let conflict = KINDS.iter().any(|&(kind, sharing)| {
            (access.intersects(kind) && !o.share_access.contains(sharing))
                || (o.access.intersects(kind) && !share_access.contains(sharing))
        });
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
    /// Opened vfs shares by lower-case share name, each with the section it was
    /// opened from: after a reload changed a share, its old trees keep theirs.
    vfs: Mutex<HashMap<String, Vec<(smbx_config::ShareConfig, smbx_vfs::Share)>>>,
}

impl Default for FileTable {
    fn default() -> Self {
        FileTable {
            files: Arc::new(Mutex::new(BTreeMap::new())),
            next_entry: AtomicU64::new(1),
            vfs: Mutex::new(HashMap::new()),
        }
    }
}

/// A share-mode registration that a CREATE holds while it opens the file
/// ([`FileTable::register_guarded`]): dropped before [`Registration::commit`], it is
/// undone (the entry leaves the file's table), so no failure path unregisters by hand.
#[must_use = "dropping a registration undoes it"]
pub struct Registration {
    file: Arc<SharedFile>,
    entry_id: u64,
    armed: bool,
}

impl Registration {
    /// The file registered with.
    pub fn file(&self) -> &Arc<SharedFile> {
        &self.file
    }

    /// The entry's id in the file's table.
    pub fn entry_id(&self) -> u64 {
        self.entry_id
    }

    /// Keeps the registration: the caller (a `FileOpen`) owns the entry from now on
    /// and removes it when it closes.
    pub fn commit(mut self) -> (Arc<SharedFile>, u64) {
        self.armed = false;
        (self.file.clone(), self.entry_id)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.file.remove(self.entry_id);
        }
    }
}

impl FileTable {
    /// [`FileTable::register`], held by a guard that undoes it unless committed.
    pub fn register_guarded(
        &self,
        key: FileKey,
        access: AccessMask,
        share_access: ShareAccess,
    ) -> Result<Registration, NtStatus> {
        let (file, entry_id) = self.register(key, access, share_access)?;
        Ok(Registration {
            file,
            entry_id,
            armed: true,
        })
    }

    /// Registers an open of `key` after checking delete-pending (DELETE_PENDING) and
    /// share access (SHARING_VIOLATION) against every existing open of the file.
    /// Returns the shared file and the new entry's id.
    pub fn register(
        &self,
        key: FileKey,
        access: AccessMask,
        share_access: ShareAccess,
    ) -> Result<(Arc<SharedFile>, u64), NtStatus> {
        let mut map = self.files.lock();
        let file = map
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(SharedFile {
                    key,
                    locks: Default::default(),
                    oplocks: Default::default(),
                    times: Default::default(),
                    notify_sinks: Default::default(),
                    state: Mutex::new(FileState::default()),
                    map: Arc::downgrade(&self.files),
                })
            })
            .clone();
        // Streams share with their base file ([MS-FSA] 2.1.5.1.2): a named stream of a
        // delete-pending file cannot be opened, and opening the file with DELETE access
        // needs FILE_SHARE_DELETE from every open of its named streams.
        if file.key.stream.is_some() {
            let base = FileKey {
                stream: None,
                ..file.key.clone()
            };
            if map.get(&base).is_some_and(|b| b.delete_pending()) {
                return Err(NtStatus::DELETE_PENDING);
            }
        } else if access.contains(AccessMask::DELETE) {
            for (k, f) in same_file(&map, &file.key) {
                if k.stream.is_some()
                    && f.state
                        .lock()
                        .opens
                        .iter()
                        .any(|o| !o.share_access.contains(ShareAccess::FILE_SHARE_DELETE))
                {
                    return Err(NtStatus::SHARING_VIOLATION);
                }
            }
        }
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
        if map.get(key).is_some_and(|f| {
            let st = f.state.lock();
            // A delete-pending entry without opens is a base file waiting for its
            // stream opens to close (see `SharedFile::remove`): keep it.
            st.opens.is_empty() && !st.delete_pending
        }) {
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
        if let Some((_, s)) = m
            .get(&key)
            .and_then(|v| v.iter().find(|(c, _)| *c == share.config))
        {
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
        // `hide dot files` / `hide files` (smb2.dosmode).
        s.set_hidden_names(share.config.hide_dot_files, share.config.hide_files.clone());
        // The EA whose Samba xattr (`user.<name>`) holds NT ACLs is private
        // (acl_xattr:security_acl_name; smb2.ea.acl_xattr).
        if let Some(n) = share.config.acl_xattr_name.as_deref() {
            if let Some(ea) = n.strip_prefix("user.").filter(|e| !e.is_empty()) {
                s.set_reserved_ea_names(vec![ea.to_string()]);
            }
        }
        m.entry(key)
            .or_default()
            .push((share.config.clone(), s.clone()));
        Ok(s)
    }

    /// Forgets the vfs shares opened for sections not in `keep` (after a reload); a
    /// tree still on an old section opens its share again on its next use.
    pub fn retain_vfs_shares(&self, keep: &[Arc<Share>]) {
        let mut m = self.vfs.lock();
        for v in m.values_mut() {
            v.retain(|(c, _)| keep.iter().any(|s| s.config == *c));
        }
        m.retain(|_, v| !v.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 10_000_000;

    #[test]
    fn first_write_is_delayed_then_fires() {
        let w = WriteTimes::default();
        let c = 1000 * S;
        assert_eq!(w.shown(c), None);
        w.on_write(1, c + S, || Some(c));
        // Not visible yet.
        assert_eq!(w.shown(c + 2 * S), Some(c));
        // Fires WRITE_TIME_DELAY after the write.
        assert_eq!(w.shown(c + 4 * S), Some(c + 3 * S));
        // Closing after the update changes nothing (smb2.timestamps.delayed-1write).
        assert_eq!(w.on_close(1, c + 5 * S), Some(c + 3 * S));
    }

    #[test]
    fn second_write_only_stamps_at_close() {
        let w = WriteTimes::default();
        let c = 1000 * S;
        w.on_write(1, c + S, || Some(c));
        assert_eq!(w.shown(c + 4 * S), Some(c + 3 * S));
        w.on_write(1, c + 4 * S, || panic!("mtime read twice"));
        assert_eq!(w.shown(c + 7 * S), Some(c + 3 * S));
        assert_eq!(w.on_close(1, c + 9 * S), Some(c + 9 * S));
    }

    #[test]
    fn flush_and_explicit_times() {
        let w = WriteTimes::default();
        let c = 1000 * S;
        w.on_write(1, c + S, || Some(c));
        w.flush_pending(c + S + 1);
        assert_eq!(w.shown(c + S + 2), Some(c + S + 1));
        // Flushed: the close does not move it (delayed-write-vs-flush).
        assert_eq!(w.on_close(1, c + 5 * S), Some(c + S + 1));

        let w = WriteTimes::default();
        w.on_write(1, c + S, || Some(c));
        w.set_explicit(7);
        w.on_write(2, c + 2 * S, || Some(c));
        assert_eq!(w.on_close(2, c + 3 * S), Some(7));
        assert_eq!(w.on_close(1, c + 9 * S), Some(7));
        // Nothing written: nothing shown.
        assert_eq!(WriteTimes::default().on_close(1, c), None);
    }

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
        let (_f, _) = t
            .register(
                key(1),
                AccessMask::FILE_READ_DATA,
                ShareAccess::FILE_SHARE_READ,
            )
            .unwrap();
        t.register(
            key(1),
            AccessMask::FILE_READ_DATA,
            ShareAccess::FILE_SHARE_READ,
        )
        .unwrap();
        assert_eq!(
            t.register(key(1), AccessMask::FILE_WRITE_DATA, ShareAccess::ALL)
                .unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        // Share mode of the new open excludes the existing reader.
        assert_eq!(
            t.register(
                key(1),
                AccessMask::FILE_READ_DATA,
                ShareAccess::FILE_SHARE_WRITE
            )
            .unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        // Attribute-only opens never conflict.
        t.register(
            key(1),
            AccessMask::FILE_READ_ATTRIBUTES,
            ShareAccess::empty(),
        )
        .unwrap();
        // Other files are independent.
        t.register(key(2), AccessMask::FILE_WRITE_DATA, ShareAccess::empty())
            .unwrap();
    }

    #[test]
    fn a_registration_is_undone_unless_committed() {
        let t = FileTable::default();
        let w = AccessMask::FILE_WRITE_DATA;
        // Dropped: the entry leaves, so an exclusive open succeeds afterwards.
        let r = t.register_guarded(key(1), w, ShareAccess::empty()).unwrap();
        assert_eq!(r.file().open_count(), 1);
        let file = r.file().clone();
        drop(r);
        assert_eq!(file.open_count(), 0);
        // Committed: the entry stays and keeps others out until removed.
        let (f, id) = t
            .register_guarded(key(1), w, ShareAccess::empty())
            .unwrap()
            .commit();
        assert_eq!(
            t.register_guarded(key(1), w, ShareAccess::empty()).err(),
            Some(NtStatus::SHARING_VIOLATION)
        );
        assert_eq!(f.open_count(), 1);
        let _ = f.remove(id);
        assert!(t.register_guarded(key(1), w, ShareAccess::empty()).is_ok());
    }

    #[test]
    fn delete_pending_blocks_new_opens_and_fires_on_last_close() {
        let t = FileTable::default();
        let (f, a) = t
            .register(key(1), AccessMask::DELETE, ShareAccess::ALL)
            .unwrap();
        let (_, b) = t
            .register(key(1), AccessMask::FILE_READ_DATA, ShareAccess::ALL)
            .unwrap();
        f.set_delete_pending(true);
        assert_eq!(
            t.register(key(1), AccessMask::FILE_READ_DATA, ShareAccess::ALL)
                .unwrap_err(),
            NtStatus::DELETE_PENDING
        );
        assert_eq!(
            f.remove(a),
            CloseOutcome {
                last: false,
                delete: false,
                delete_base: false
            }
        );
        assert_eq!(
            f.remove(b),
            CloseOutcome {
                last: true,
                delete: true,
                delete_base: false
            }
        );
        assert!(t.is_empty());
        // Removing twice is harmless.
        assert_eq!(f.remove(b), CloseOutcome::default());
        // A new open starts fresh.
        t.register(key(1), AccessMask::FILE_READ_DATA, ShareAccess::empty())
            .unwrap();
    }

    fn skey(ino: u64, s: &str) -> FileKey {
        FileKey {
            stream: Some(s.into()),
            ..key(ino)
        }
    }

    #[test]
    fn streams_share_delete_with_their_base_file() {
        let t = FileTable::default();
        // A stream open without FILE_SHARE_DELETE blocks DELETE opens of the base file.
        let (s, a) = t
            .register(
                skey(1, "s"),
                AccessMask::FILE_WRITE_DATA,
                ShareAccess::FILE_SHARE_READ | ShareAccess::FILE_SHARE_WRITE,
            )
            .unwrap();
        assert_eq!(
            t.register(key(1), AccessMask::DELETE, ShareAccess::ALL)
                .unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        t.forget_if_unused(&key(1));
        // Other files' streams do not matter.
        t.register(key(2), AccessMask::DELETE, ShareAccess::ALL)
            .unwrap();
        s.remove(a);
        // With FILE_SHARE_DELETE the base file can be deleted; the delete waits for the
        // stream opens, and meanwhile both names are DELETE_PENDING.
        let (s, a) = t
            .register(skey(1, "s"), AccessMask::FILE_WRITE_DATA, ShareAccess::ALL)
            .unwrap();
        let (b, bid) = t
            .register(key(1), AccessMask::DELETE, ShareAccess::ALL)
            .unwrap();
        b.set_delete_pending(true);
        assert_eq!(
            b.remove(bid),
            CloseOutcome {
                last: true,
                delete: false,
                delete_base: false
            }
        );
        assert_eq!(
            t.register(key(1), AccessMask::FILE_READ_DATA, ShareAccess::ALL)
                .unwrap_err(),
            NtStatus::DELETE_PENDING
        );
        t.forget_if_unused(&key(1));
        assert_eq!(
            t.register(skey(1, "s"), AccessMask::FILE_READ_DATA, ShareAccess::ALL)
                .unwrap_err(),
            NtStatus::DELETE_PENDING
        );
        assert_eq!(
            s.remove(a),
            CloseOutcome {
                last: true,
                delete: false,
                delete_base: true
            }
        );
        t.register(key(1), AccessMask::FILE_READ_DATA, ShareAccess::ALL)
            .unwrap();
    }

    #[test]
    fn delete_access_needs_share_delete() {
        let t = FileTable::default();
        t.register(
            key(1),
            AccessMask::FILE_READ_DATA,
            ShareAccess::FILE_SHARE_READ,
        )
        .unwrap();
        assert_eq!(
            t.register(key(1), AccessMask::DELETE, ShareAccess::ALL)
                .unwrap_err(),
            NtStatus::SHARING_VIOLATION
        );
        let t = FileTable::default();
        let (f, a) = t
            .register(
                key(1),
                AccessMask::FILE_READ_DATA,
                ShareAccess::FILE_SHARE_READ | ShareAccess::FILE_SHARE_DELETE,
            )
            .unwrap();
        t.register(key(1), AccessMask::DELETE, ShareAccess::ALL)
            .unwrap();
        assert!(f
            .check_share(AccessMask::FILE_WRITE_DATA, ShareAccess::ALL, Some(a))
            .is_ok());
    }
}
