//! The share: a root directory descriptor and every path-taking operation.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use smbx_wire::time::filetime_from_unix;
use smbx_wire::NtStatus;

use crate::attr::*;
use crate::handle::{Access, Handle};
use crate::path::{join, SmbPath};
use crate::types::*;
use crate::{stream, sys};

/// State shared by a [`Share`] and all its handles.
pub(crate) struct Inner {
    pub root: OwnedFd,
    pub root_path: PathBuf,
    pub opts: ShareOptions,
    /// RESOLVE_* flags for every openat2 call.
    pub resolve: u64,
    /// Serializes read-modify-write of stream xattrs.
    pub stream_lock: Mutex<()>,
    /// Cleared when the file system refuses user xattrs for DOS metadata.
    pub dos_xattrs: AtomicBool,
    /// `hide dot files` / `hide files` ([`Share::set_hidden_names`]).
    pub hide: std::sync::OnceLock<HiddenNames>,
    /// EA names private to the server ([`Share::set_reserved_ea_names`]), lower-cased.
    pub reserved_eas: std::sync::OnceLock<Vec<String>>,
}

/// Names reported with FILE_ATTRIBUTE_HIDDEN whatever their stored attributes (Samba's
/// `hide dot files` and `hide files`).
#[derive(Debug, Default)]
pub(crate) struct HiddenNames {
    dot_files: bool,
    patterns: Vec<String>,
}

impl Inner {
    /// True if `name` (one component) is hidden by the share's hidden-name settings.
    pub(crate) fn hidden_by_name(&self, name: &str) -> bool {
        let Some(h) = self.hide.get() else {
            return false;
        };
        if name == "." || name == ".." {
            return false;
        }
        (h.dot_files && name.starts_with('.'))
            || h.patterns
                .iter()
                .any(|p| crate::wildcard_match(p, name, self.opts.case_sensitive))
    }

    /// True if the EA `name` is private to the server (case-insensitive).
    pub(crate) fn ea_reserved(&self, name: &str) -> bool {
        self.reserved_eas
            .get()
            .is_some_and(|r| r.iter().any(|n| n.eq_ignore_ascii_case(name)))
    }

    /// Adds FILE_ATTRIBUTE_HIDDEN to `info` if `name` is hidden by name.
    pub(crate) fn apply_hidden(&self, name: Option<&str>, info: &mut FileInfo) {
        if name.is_some_and(|n| self.hidden_by_name(n)) {
            info.attributes =
                info.attributes.difference(FileAttributes::NORMAL) | FileAttributes::HIDDEN;
        }
    }
}

/// A local directory served as an SMB share. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Share {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share")
            .field("root", &self.inner.root_path)
            .field("opts", &self.inner.opts)
            .finish()
    }
}

pub(crate) enum Lookup {
    Found {
        real: Vec<String>,
        file: File,
        opath: bool,
        st: libc::stat,
    },
    Missing {
        parent: Vec<String>,
        name: String,
    },
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

fn cname(s: &str) -> Result<CString, NtStatus> {
    CString::new(s).map_err(|_| NtStatus::OBJECT_NAME_INVALID)
}

pub(crate) fn is_dir_mode(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFDIR
}

fn is_reg_mode(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFREG
}

/// Maps an error from opening an already-resolved name.
fn open_err(e: io::Error) -> NtStatus {
    match errno(&e) {
        libc::ENOENT => NtStatus::OBJECT_NAME_NOT_FOUND,
        libc::ENOTDIR => NtStatus::OBJECT_PATH_NOT_FOUND,
        libc::ELOOP | libc::EXDEV => NtStatus::ACCESS_DENIED,
        _ => e.into(),
    }
}

impl Share {
    /// Opens `root` as a share. The root itself may be reached through symlinks (it is
    /// operator configuration); everything below it is confined. Fails with
    /// NOT_SUPPORTED when the kernel lacks openat2(2) (Linux < 5.6): the server refuses
    /// to serve rather than serve unconfined.
    pub fn open(root: &Path, opts: ShareOptions) -> Result<Share, NtStatus> {
        let c =
            CString::new(root.as_os_str().as_bytes()).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
        let fd =
            sys::open_path(&c, libc::O_PATH | libc::O_DIRECTORY).map_err(|e| match errno(&e) {
                libc::ENOENT | libc::ENOTDIR => NtStatus::BAD_NETWORK_NAME,
                _ => e.into(),
            })?;
        let mut resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        if !opts.follow_symlinks_within_share {
            resolve |= libc::RESOLVE_NO_SYMLINKS;
        }
        match sys::openat2(fd.as_fd(), c".", libc::O_PATH, 0, resolve) {
            Ok(_) => {}
            Err(e) if errno(&e) == libc::ENOSYS => return Err(NtStatus::NOT_SUPPORTED),
            Err(e) => return Err(e.into()),
        }
        Ok(Share {
            inner: Arc::new(Inner {
                root: fd,
                root_path: root.to_path_buf(),
                opts,
                hide: std::sync::OnceLock::new(),
                reserved_eas: std::sync::OnceLock::new(),
                resolve,
                stream_lock: Mutex::new(()),
                dos_xattrs: AtomicBool::new(opts.store_dos_attributes),
            }),
        })
    }

    /// The configured root directory.
    pub fn root_path(&self) -> &Path {
        &self.inner.root_path
    }

    /// The share's options.
    pub fn options(&self) -> ShareOptions {
        self.inner.opts
    }

    /// Opens or creates `smb_path` (backslash-separated, relative to the share root;
    /// "" is the root) according to `req`. Named streams (`file:name[:$DATA]`) yield a
    /// handle whose data operations act on the stream.
    pub fn create(
        &self,
        smb_path: &str,
        req: &CreateRequest,
    ) -> Result<(Handle, CreateAction), NtStatus> {
        let p = SmbPath::parse(smb_path)?;
        if req.directory && req.non_directory {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if req.directory && req.disposition.truncates() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if req.directory && p.stream.is_some() {
            return Err(NtStatus::NOT_A_DIRECTORY);
        }
        let ro = self.inner.opts.read_only;
        if ro
            && ((!req.maximum_allowed && (req.want_write || req.want_write_attributes))
                || matches!(
                    req.disposition,
                    Disposition::Create
                        | Disposition::Supersede
                        | Disposition::Overwrite
                        | Disposition::OverwriteIf
                ))
        {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let is_stream = p.stream.is_some();
        for _ in 0..8 {
            match self
                .inner
                .lookup(&p.components, self.wants_data(req) && !is_stream)?
            {
                Lookup::Found {
                    real,
                    file,
                    opath,
                    st,
                } => {
                    return self.open_existing(&p, real, file, opath, st, req);
                }
                Lookup::Missing { parent, name } => {
                    if !req.disposition.may_create() {
                        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
                    }
                    if ro {
                        return Err(NtStatus::ACCESS_DENIED);
                    }
                    if req.delete_on_close && req.attributes.contains(FileAttributes::READONLY) {
                        // [MS-FSA] 2.1.5.1.1: checked before anything is created.
                        return Err(NtStatus::CANNOT_DELETE);
                    }
                    let base_req = CreateRequest {
                        directory: req.directory && !is_stream,
                        ..*req
                    };
                    match self.create_new(&parent, &name, &base_req)? {
                        Some(h) => {
                            let Some(sname) = &p.stream else {
                                return Ok((h, CreateAction::Created));
                            };
                            stream::write_stream(h.file.as_fd(), sname, &[])?;
                            return Ok((h.with_stream(sname.clone()), CreateAction::Created));
                        }
                        None if req.disposition == Disposition::Create => {
                            return Err(NtStatus::OBJECT_NAME_COLLISION)
                        }
                        None => continue, // lost a race with another creator; look again
                    }
                }
            }
        }
        Err(NtStatus::ACCESS_DENIED)
    }

    fn wants_data(&self, req: &CreateRequest) -> bool {
        !self.inner.opts.read_only && (req.want_write || req.maximum_allowed)
    }

    /// The write access a handle gets; READONLY files refuse explicit data writes and
    /// silently drop MAXIMUM_ALLOWED's.
    fn access_for(&self, req: &CreateRequest, readonly_file: bool) -> Result<Access, NtStatus> {
        if self.inner.opts.read_only {
            return Ok(Access {
                data: false,
                meta: false,
            });
        }
        let mut data = req.want_write || req.maximum_allowed;
        if readonly_file && data {
            if req.want_write {
                return Err(NtStatus::ACCESS_DENIED);
            }
            data = false;
        }
        Ok(Access {
            data,
            meta: data || req.want_write_attributes || req.maximum_allowed,
        })
    }

    fn open_existing(
        &self,
        p: &SmbPath,
        real: Vec<String>,
        mut file: File,
        mut opath: bool,
        st: libc::stat,
        req: &CreateRequest,
    ) -> Result<(Handle, CreateAction), NtStatus> {
        let inner = &self.inner;
        let is_dir = is_dir_mode(st.st_mode);
        let attrs = inner.attributes(&st, inner.read_dos(file.as_fd(), opath));
        if let Some(sname) = &p.stream {
            if opath {
                return Err(NtStatus::ACCESS_DENIED);
            }
            let access =
                self.access_for(req, !is_dir && attrs.contains(FileAttributes::READONLY))?;
            let fd = file.as_fd();
            let found = stream::find_stream(fd, sname, inner.opts.case_sensitive)?;
            let (name, action) = match (found, req.disposition) {
                (Some(_), Disposition::Create) => return Err(NtStatus::OBJECT_NAME_COLLISION),
                (Some(n), Disposition::Open | Disposition::OpenIf) => (n, CreateAction::Opened),
                (Some(n), d) => {
                    stream::write_stream(fd, &n, &[])?;
                    let a = if d == Disposition::Supersede {
                        CreateAction::Superseded
                    } else {
                        CreateAction::Overwritten
                    };
                    (n, a)
                }
                (None, Disposition::Open | Disposition::Overwrite) => {
                    return Err(NtStatus::OBJECT_NAME_NOT_FOUND)
                }
                (None, _) => {
                    if inner.opts.read_only {
                        return Err(NtStatus::ACCESS_DENIED);
                    }
                    stream::write_stream(fd, sname, &[])?;
                    (sname.clone(), CreateAction::Created)
                }
            };
            let h = Handle::new(inner.clone(), file, opath, &st, real, access);
            return Ok((h.with_stream(name), action));
        }
        if req.disposition == Disposition::Create {
            return Err(NtStatus::OBJECT_NAME_COLLISION);
        }
        if is_dir {
            if req.directory && p.explicit_default_stream {
                // `dir::$DATA` with FILE_DIRECTORY_FILE: a data stream is not a
                // directory (smb2.streams.dir).
                return Err(NtStatus::NOT_A_DIRECTORY);
            }
            if req.non_directory || p.explicit_default_stream || req.disposition.truncates() {
                return Err(NtStatus::FILE_IS_A_DIRECTORY);
            }
        } else if req.directory {
            return Err(NtStatus::NOT_A_DIRECTORY);
        }
        let mut action = CreateAction::Opened;
        if req.disposition.truncates() {
            if attrs.contains(FileAttributes::READONLY) {
                return Err(NtStatus::ACCESS_DENIED);
            }
            for bit in [FileAttributes::HIDDEN, FileAttributes::SYSTEM] {
                if attrs.contains(bit) && !req.attributes.contains(bit) {
                    return Err(NtStatus::ACCESS_DENIED);
                }
            }
            if !self.wants_data(req) {
                let (f, o, _) = inner.open_obj(&join(&real), true).map_err(open_err)?;
                file = f;
                opath = o;
            }
            file.set_len(0)?;
            // Overwrite and supersede of the default stream drop the named streams too
            // (Windows; Samba's clear_ads).
            {
                let _g = inner.stream_lock.lock().unwrap_or_else(|e| e.into_inner());
                stream::remove_all_streams(file.as_fd())?;
            }
            let creation = inner.creation_time(&st, inner.read_dos(file.as_fd(), opath));
            inner.write_dos(
                &file,
                DosMeta {
                    attributes: (req.attributes & SETTABLE_ATTRIBUTES) | FileAttributes::ARCHIVE,
                    creation: Some(creation),
                    change: None,
                },
            )?;
            action = if req.disposition == Disposition::Supersede {
                CreateAction::Superseded
            } else {
                CreateAction::Overwritten
            };
        }
        let access = self.access_for(
            req,
            !is_dir && action == CreateAction::Opened && attrs.contains(FileAttributes::READONLY),
        )?;
        Ok((
            Handle::new(inner.clone(), file, opath, &st, real, access),
            action,
        ))
    }

    /// Creates `parent/name`; `Ok(None)` when it appeared meanwhile (EEXIST).
    fn create_new(
        &self,
        parent: &[String],
        name: &str,
        req: &CreateRequest,
    ) -> Result<Option<Handle>, NtStatus> {
        let inner = &self.inner;
        let mut full = parent.to_vec();
        full.push(name.to_string());
        let file = if req.directory {
            let pfd = inner.open_dir(parent)?;
            match sys::mkdirat(pfd.as_fd(), &cname(name)?, 0o777) {
                Ok(()) => {}
                Err(e) if errno(&e) == libc::EEXIST => return Ok(None),
                Err(e) => return Err(open_err(e)),
            }
            let (f, _, _) = inner.open_obj(&join(&full), false).map_err(open_err)?;
            f
        } else {
            let flags =
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_NONBLOCK | libc::O_NOCTTY;
            match inner.open_beneath(&join(&full), flags, 0o666) {
                Ok(fd) => File::from(fd),
                Err(e) if errno(&e) == libc::EEXIST => return Ok(None),
                Err(e) if errno(&e) == libc::ENOENT || errno(&e) == libc::ENOTDIR => {
                    return Err(NtStatus::OBJECT_PATH_NOT_FOUND)
                }
                Err(e) => return Err(open_err(e)),
            }
        };
        sys::clear_nonblock(file.as_fd())?;
        let st = sys::fstat(file.as_fd())?;
        let mut attributes = req.attributes & SETTABLE_ATTRIBUTES;
        if !req.directory {
            attributes |= FileAttributes::ARCHIVE;
        }
        let creation = filetime_from_unix(st.st_mtime, st.st_mtime_nsec as u32);
        inner.write_dos(
            &file,
            DosMeta {
                attributes,
                creation: Some(creation),
                change: None,
            },
        )?;
        if !req.directory && req.allocation_size > 0 {
            let _ = sys::fallocate(
                file.as_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                0,
                req.allocation_size,
            );
        }
        let st = sys::fstat(file.as_fd())?;
        Ok(Some(Handle::new(
            inner.clone(),
            file,
            false,
            &st,
            full,
            self.access_for(req, false)?,
        )))
    }

    /// Metadata of `smb_path` without keeping it open.
    pub fn stat(&self, smb_path: &str) -> Result<FileInfo, NtStatus> {
        let (h, _) = self.create(smb_path, &CreateRequest::default())?;
        h.stat()
    }

    /// Renames (moves) the file behind `h` to `new_smb_path` within the share.
    /// OBJECT_NAME_COLLISION when the target exists and `!replace_if_exists`;
    /// ACCESS_DENIED when replacing a directory. A case-only rename works on a
    /// case-insensitive share. Updates `h.path()`.
    pub fn rename(
        &self,
        h: &Handle,
        new_smb_path: &str,
        replace_if_exists: bool,
    ) -> Result<(), NtStatus> {
        let inner = &self.inner;
        if inner.opts.read_only {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if h.stream.is_some() {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        let p = SmbPath::parse(new_smb_path)?;
        if p.stream.is_some() {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        let Some(desired) = p.components.last().cloned() else {
            return Err(NtStatus::ACCESS_DENIED);
        };
        let (src_dir, old_name) = self.locate(h)?;
        let old_c = cname(&old_name)?;
        let (dst_parent, found_name) = match inner.walk(&p.components)? {
            (real, true) => {
                let mut parent = real;
                let n = parent.pop();
                (parent, n)
            }
            (mut real, false) => {
                real.pop();
                (real, None)
            }
        };
        let dst_dir = inner.open_dir(&dst_parent)?;
        let desired_c = cname(&desired)?;
        if let Some(existing) = found_name {
            let ex_c = cname(&existing)?;
            let tst = sys::fstatat_nofollow(dst_dir.as_fd(), &ex_c)?;
            if tst.st_ino == h.ino && tst.st_dev == h.dev {
                // The target is the file itself: a case-only change or a no-op.
                if existing != desired {
                    sys::renameat2(src_dir.as_fd(), &old_c, dst_dir.as_fd(), &desired_c, 0)
                        .map_err(rename_err)?;
                }
            } else {
                if !replace_if_exists {
                    return Err(NtStatus::OBJECT_NAME_COLLISION);
                }
                if is_dir_mode(tst.st_mode) {
                    return Err(NtStatus::ACCESS_DENIED);
                }
                sys::renameat2(src_dir.as_fd(), &old_c, dst_dir.as_fd(), &ex_c, 0)
                    .map_err(rename_err)?;
                if existing != desired {
                    rename_noreplace(dst_dir.as_fd(), &ex_c, dst_dir.as_fd(), &desired_c)?;
                }
            }
        } else {
            rename_noreplace(src_dir.as_fd(), &old_c, dst_dir.as_fd(), &desired_c)?;
        }
        let mut np = dst_parent;
        np.push(desired);
        *h.path.lock().unwrap_or_else(|e| e.into_inner()) = np;
        Ok(())
    }

    /// Checks whether `h` could be deleted now (for FILE_DISPOSITION_INFORMATION):
    /// CANNOT_DELETE for READONLY files and the share root, DIRECTORY_NOT_EMPTY for
    /// non-empty directories, ACCESS_DENIED on a read-only share.
    pub fn can_delete(&self, h: &Handle) -> Result<(), NtStatus> {
        if self.inner.opts.read_only {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if h.stream.is_some() {
            return Ok(());
        }
        if h.path.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return Err(NtStatus::CANNOT_DELETE);
        }
        let info = h.stat()?;
        if info.attributes.contains(FileAttributes::READONLY) {
            return Err(NtStatus::CANNOT_DELETE);
        }
        if info.is_dir && !sys::list_dir(h.file.as_fd())?.is_empty() {
            return Err(NtStatus::DIRECTORY_NOT_EMPTY);
        }
        Ok(())
    }

    /// Deletes the file, directory or named stream behind `h` (unlink, rmdir or
    /// xattr removal). DIRECTORY_NOT_EMPTY for non-empty directories; CANNOT_DELETE for
    /// READONLY files; OBJECT_NAME_NOT_FOUND if the name no longer refers to this file.
    pub fn delete(&self, h: &Handle) -> Result<(), NtStatus> {
        self.can_delete(h)?;
        if let Some(s) = &h.stream {
            let _g = self
                .inner
                .stream_lock
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            return stream::remove_stream(h.file.as_fd(), s);
        }
        let (dir, name) = self.locate(h)?;
        sys::unlinkat(dir.as_fd(), &cname(&name)?, h.is_dir).map_err(|e| match errno(&e) {
            libc::ENOTEMPTY | libc::EEXIST => NtStatus::DIRECTORY_NOT_EMPTY,
            _ => open_err(e),
        })
    }

    /// Reports names starting with '.' (`dot_files`) or matching one of `patterns`
    /// (wildcards `*` and `?`) with FILE_ATTRIBUTE_HIDDEN (Samba's `hide dot files` and
    /// `hide files`); nothing is stored. Only the first call has an effect.
    pub fn set_hidden_names(&self, dot_files: bool, patterns: Vec<String>) {
        if dot_files || !patterns.is_empty() {
            let _ = self.inner.hide.set(HiddenNames {
                dot_files,
                patterns,
            });
        }
    }

    /// Makes the EAs `names` private to the server (e.g. the one whose xattr holds NT
    /// ACLs under Samba's naming): they are never listed, and setting them is
    /// ACCESS_DENIED. Only the first call has an effect.
    pub fn set_reserved_ea_names(&self, names: Vec<String>) {
        if !names.is_empty() {
            let _ = self.inner.reserved_eas.set(names);
        }
    }

    /// Deletes the base file of the named stream `h` (or the file `h` itself): the
    /// deferred delete of a delete-pending file whose last stream open just closed
    /// ([MS-FSA] 2.1.5.4; smb2.streams.delete).
    pub fn delete_base(&self, h: &Handle) -> Result<(), NtStatus> {
        if self.inner.opts.read_only {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if h.path.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return Err(NtStatus::CANNOT_DELETE);
        }
        let (dir, name) = self.locate(h)?;
        sys::unlinkat(dir.as_fd(), &cname(&name)?, h.is_dir).map_err(|e| match errno(&e) {
            libc::ENOTEMPTY | libc::EEXIST => NtStatus::DIRECTORY_NOT_EMPTY,
            _ => open_err(e),
        })
    }

    /// Creates a hard link `new_smb_path` to the file behind `h` (FileLinkInformation).
    pub fn hardlink(
        &self,
        h: &Handle,
        new_smb_path: &str,
        replace_if_exists: bool,
    ) -> Result<(), NtStatus> {
        let inner = &self.inner;
        if inner.opts.read_only {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if h.is_dir {
            return Err(NtStatus::FILE_IS_A_DIRECTORY);
        }
        if h.stream.is_some() {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        let p = SmbPath::parse(new_smb_path)?;
        if p.stream.is_some() {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        let Some(desired) = p.components.last().cloned() else {
            return Err(NtStatus::ACCESS_DENIED);
        };
        let (src_dir, old_name) = self.locate(h)?;
        let (mut parent, found) = inner.walk(&p.components)?;
        let existing = parent.pop();
        let dst_dir = inner.open_dir(&parent)?;
        if found {
            let ex_c = cname(existing.as_deref().unwrap_or(&desired))?;
            let tst = sys::fstatat_nofollow(dst_dir.as_fd(), &ex_c)?;
            if tst.st_ino == h.ino && tst.st_dev == h.dev {
                return Ok(());
            }
            if !replace_if_exists {
                return Err(NtStatus::OBJECT_NAME_COLLISION);
            }
            if is_dir_mode(tst.st_mode) {
                return Err(NtStatus::ACCESS_DENIED);
            }
            sys::unlinkat(dst_dir.as_fd(), &ex_c, false).map_err(open_err)?;
        }
        sys::linkat(
            src_dir.as_fd(),
            &cname(&old_name)?,
            dst_dir.as_fd(),
            &cname(&desired)?,
        )
        .map_err(rename_err)
    }

    /// The parent directory descriptor and current name of `h`, checked to still
    /// refer to the same inode.
    fn locate(&self, h: &Handle) -> Result<(OwnedFd, String), NtStatus> {
        let path = h.path.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some((name, parent)) = path.split_last() else {
            return Err(NtStatus::ACCESS_DENIED);
        };
        let dir = self.inner.open_dir(parent)?;
        let st = sys::fstatat_nofollow(dir.as_fd(), &cname(name)?).map_err(open_err)?;
        if st.st_ino != h.ino || st.st_dev != h.dev {
            return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
        }
        Ok((dir, name.clone()))
    }

    /// Volume size, free space and identity (fstatvfs on the root).
    pub fn fs_info(&self) -> Result<FsInfo, NtStatus> {
        let inner = &self.inner;
        let v = sys::fstatvfs(inner.root.as_fd())?;
        let st = sys::fstat(inner.root.as_fd())?;
        let frsize = if v.f_frsize > 0 {
            v.f_frsize
        } else {
            v.f_bsize
        };
        // FILE_CASE_SENSITIVE_SEARCH says the file system *can* search case-sensitively
        // (NTFS and Samba always set it); smb2.streams.names3 requires it.
        let fs_attributes = FileSystemAttributes::FILE_CASE_SENSITIVE_SEARCH
            | FileSystemAttributes::FILE_CASE_PRESERVED_NAMES
            | FileSystemAttributes::FILE_UNICODE_ON_DISK
            | FileSystemAttributes::FILE_SUPPORTS_SPARSE_FILES
            | FileSystemAttributes::FILE_NAMED_STREAMS
            | FileSystemAttributes::FILE_SUPPORTS_HARD_LINKS
            | FileSystemAttributes::FILE_SUPPORTS_EXTENDED_ATTRIBUTES;
        let fs_attributes = if inner.opts.read_only {
            fs_attributes | FileSystemAttributes::FILE_READ_ONLY_VOLUME
        } else {
            fs_attributes
        };
        let dev = st.st_dev;
        let ino = st.st_ino;
        let serial = (dev ^ (dev >> 32) ^ ino.rotate_left(16)) as u32;
        Ok(FsInfo {
            total_bytes: (v.f_blocks as u64).saturating_mul(frsize as u64),
            free_bytes: (v.f_bfree as u64).saturating_mul(frsize as u64),
            available_bytes: (v.f_bavail as u64).saturating_mul(frsize as u64),
            block_size: u32::try_from(frsize).unwrap_or(4096),
            sector_size: 512,
            max_name_len: 255,
            fs_name: "NTFS".to_string(),
            fs_attributes,
            volume_serial: serial,
            volume_label: String::new(),
            volume_creation_time: filetime_from_unix(st.st_ctime, st.st_ctime_nsec as u32),
            read_only: inner.opts.read_only,
        })
    }
}

fn rename_err(e: io::Error) -> NtStatus {
    match errno(&e) {
        libc::EEXIST | libc::ENOTEMPTY => NtStatus::OBJECT_NAME_COLLISION,
        libc::EINVAL => NtStatus::INVALID_PARAMETER,
        libc::EISDIR | libc::ENOTDIR => NtStatus::ACCESS_DENIED,
        _ => open_err(e),
    }
}

/// renameat2(RENAME_NOREPLACE), falling back to a check-then-rename on file systems
/// without it.
fn rename_noreplace(
    od: BorrowedFd<'_>,
    on: &CStr,
    nd: BorrowedFd<'_>,
    nn: &CStr,
) -> Result<(), NtStatus> {
    match sys::renameat2(od, on, nd, nn, libc::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if errno(&e) == libc::EINVAL || errno(&e) == libc::ENOSYS => {
            if sys::fstatat_nofollow(nd, nn).is_ok() {
                return Err(NtStatus::OBJECT_NAME_COLLISION);
            }
            sys::renameat2(od, on, nd, nn, 0).map_err(rename_err)
        }
        Err(e) => Err(rename_err(e)),
    }
}

impl Inner {
    /// openat2 relative to the share root with the share's RESOLVE_* flags.
    pub(crate) fn open_beneath(
        &self,
        path: &CStr,
        flags: libc::c_int,
        mode: u32,
    ) -> io::Result<OwnedFd> {
        sys::openat2(self.root.as_fd(), path, flags, mode, self.resolve)
    }

    /// Opens a directory (O_PATH) by real components; PATH_NOT_FOUND when it is not one.
    pub(crate) fn open_dir(&self, comps: &[String]) -> Result<OwnedFd, NtStatus> {
        self.open_beneath(&join(comps), libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(|e| match errno(&e) {
                libc::ENOENT | libc::ENOTDIR | libc::ELOOP => NtStatus::OBJECT_PATH_NOT_FOUND,
                libc::EXDEV => NtStatus::ACCESS_DENIED,
                _ => e.into(),
            })
    }

    /// Opens an existing regular file or directory by real path. Writable requests
    /// open O_RDWR (directories fall back to read-only); read-only requests fall back
    /// to O_PATH when the mode forbids reading. Other file types are refused (EACCES).
    /// Returns (file, is O_PATH, stat).
    pub(crate) fn open_obj(
        &self,
        path: &CStr,
        want_write: bool,
    ) -> io::Result<(File, bool, libc::stat)> {
        let base = libc::O_NONBLOCK | libc::O_NOCTTY;
        let (fd, opath) = if want_write {
            match self.open_beneath(path, libc::O_RDWR | base, 0) {
                Ok(fd) => (fd, false),
                Err(e) if errno(&e) == libc::EISDIR => (
                    self.open_beneath(path, libc::O_RDONLY | libc::O_DIRECTORY | base, 0)?,
                    false,
                ),
                Err(e) => return Err(e),
            }
        } else {
            match self.open_beneath(path, libc::O_RDONLY | base, 0) {
                Ok(fd) => (fd, false),
                Err(e) if errno(&e) == libc::EACCES => {
                    (self.open_beneath(path, libc::O_PATH, 0)?, true)
                }
                Err(e) => return Err(e),
            }
        };
        let st = sys::fstat(fd.as_fd())?;
        if !is_reg_mode(st.st_mode) && !is_dir_mode(st.st_mode) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        if !opath {
            sys::clear_nonblock(fd.as_fd())?;
        }
        Ok((File::from(fd), opath, st))
    }

    /// Finds `comps`, opening it when it exists.
    pub(crate) fn lookup(&self, comps: &[String], want_write: bool) -> Result<Lookup, NtStatus> {
        match self.open_obj(&join(comps), want_write) {
            Ok((file, opath, st)) => {
                return Ok(Lookup::Found {
                    real: comps.to_vec(),
                    file,
                    opath,
                    st,
                })
            }
            Err(e)
                if matches!(
                    errno(&e),
                    libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV
                ) => {}
            Err(e) => return Err(open_err(e)),
        }
        let (mut real, found) = self.walk(comps)?;
        if !found {
            let name = real.pop().unwrap_or_default();
            return Ok(Lookup::Missing { parent: real, name });
        }
        let (file, opath, st) = self.open_obj(&join(&real), want_write).map_err(open_err)?;
        Ok(Lookup::Found {
            real,
            file,
            opath,
            st,
        })
    }

    /// Resolves `comps` one component at a time (case-insensitively unless the share is
    /// case-sensitive). Returns the real components and whether the final one exists;
    /// when it does not, the last component is the client's spelling.
    pub(crate) fn walk(&self, comps: &[String]) -> Result<(Vec<String>, bool), NtStatus> {
        let mut real: Vec<String> = Vec::with_capacity(comps.len());
        for (i, c) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            real.push(c.clone());
            let mut r = self.probe(&real, last);
            if !self.opts.case_sensitive && matches!(&r, Err(e) if errno(e) == libc::ENOENT) {
                real.pop();
                if let Some(m) = self.scan(&real, c)? {
                    real.push(m);
                    r = self.probe(&real, last);
                } else {
                    real.push(c.clone());
                }
            }
            match r {
                Ok(()) => {}
                Err(e) => {
                    return match errno(&e) {
                        libc::ENOENT if last => Ok((real, false)),
                        libc::ENOENT | libc::ENOTDIR => Err(NtStatus::OBJECT_PATH_NOT_FOUND),
                        libc::ELOOP if last => Err(NtStatus::ACCESS_DENIED),
                        libc::ELOOP => Err(NtStatus::OBJECT_PATH_NOT_FOUND),
                        libc::EXDEV => Err(NtStatus::ACCESS_DENIED),
                        _ => Err(e.into()),
                    }
                }
            }
        }
        Ok((real, true))
    }

    fn probe(&self, real: &[String], last: bool) -> io::Result<()> {
        let mut flags = libc::O_PATH;
        if !last {
            flags |= libc::O_DIRECTORY;
        }
        self.open_beneath(&join(real), flags, 0).map(drop)
    }

    /// Finds a case-insensitive match for `name` in directory `parent`.
    fn scan(&self, parent: &[String], name: &str) -> Result<Option<String>, NtStatus> {
        let dir = match self.open_beneath(&join(parent), libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            Ok(d) => d,
            Err(e) => {
                return match errno(&e) {
                    libc::ENOENT | libc::ENOTDIR | libc::ELOOP => {
                        Err(NtStatus::OBJECT_PATH_NOT_FOUND)
                    }
                    libc::EXDEV => Err(NtStatus::ACCESS_DENIED),
                    _ => Err(e.into()),
                }
            }
        };
        let want = name.to_lowercase();
        let mut best: Option<String> = None;
        for ent in sys::list_dir(dir.as_fd())? {
            let Ok(s) = String::from_utf8(ent.name) else {
                continue;
            };
            if s.to_lowercase() == want && best.as_ref().is_none_or(|b| s < *b) {
                best = Some(s);
            }
        }
        Ok(best)
    }

    /// Reads the DOS record of an open file, if stored.
    pub(crate) fn read_dos(&self, fd: BorrowedFd<'_>, opath: bool) -> Option<DosMeta> {
        if opath || !self.dos_xattrs.load(Ordering::Relaxed) {
            return None;
        }
        match sys::fgetxattr(fd, DOS_XATTR, 64) {
            Ok(Some(v)) => DosMeta::decode(&v),
            _ => None,
        }
    }

    /// Stores a DOS record (or, without xattrs, maps READONLY to the mode bits).
    pub(crate) fn write_dos(&self, file: &File, meta: DosMeta) -> Result<(), NtStatus> {
        if self.dos_xattrs.load(Ordering::Relaxed) {
            match sys::fsetxattr(file.as_fd(), DOS_XATTR, &meta.encode()) {
                Ok(()) => return Ok(()),
                Err(e) if errno(&e) == libc::ENOTSUP => {
                    self.dos_xattrs.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(stream::xattr_err(e)),
            }
        }
        let st = sys::fstat(file.as_fd())?;
        let mode = st.st_mode & 0o7777;
        let new_mode = if meta.attributes.contains(FileAttributes::READONLY) {
            mode & !0o222
        } else {
            mode | 0o200
        };
        if new_mode != mode {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(new_mode))?;
        }
        Ok(())
    }

    /// Creation time: stored, else min(mtime, ctime).
    pub(crate) fn creation_time(&self, st: &libc::stat, dos: Option<DosMeta>) -> u64 {
        if let Some(c) = dos.and_then(|d| d.creation) {
            return c;
        }
        let m = filetime_from_unix(st.st_mtime, st.st_mtime_nsec as u32);
        let c = filetime_from_unix(st.st_ctime, st.st_ctime_nsec as u32);
        m.min(c)
    }

    /// DOS attributes reported for a file (DIRECTORY derived; NORMAL when none).
    pub(crate) fn attributes(&self, st: &libc::stat, dos: Option<DosMeta>) -> FileAttributes {
        let is_dir = is_dir_mode(st.st_mode);
        let mut a = match dos {
            Some(d) => d.attributes,
            None => {
                let mut a = FileAttributes::empty();
                if !is_dir {
                    a |= FileAttributes::ARCHIVE;
                }
                if st.st_mode & 0o200 == 0 {
                    a |= FileAttributes::READONLY;
                }
                a
            }
        };
        if is_dir {
            a |= FileAttributes::DIRECTORY;
        }
        if a.is_empty() {
            FileAttributes::NORMAL
        } else {
            a
        }
    }

    /// Builds a [`FileInfo`] from a stat and the optional DOS record.
    pub(crate) fn info(&self, st: &libc::stat, dos: Option<DosMeta>) -> FileInfo {
        let is_dir = is_dir_mode(st.st_mode);
        let last_write = filetime_from_unix(st.st_mtime, st.st_mtime_nsec as u32);
        FileInfo {
            file_id: st.st_ino,
            volume_id: st.st_dev,
            size: if is_dir { 0 } else { st.st_size as u64 },
            allocation_size: (st.st_blocks as u64).saturating_mul(512),
            attributes: self.attributes(st, dos),
            creation_time: self.creation_time(st, dos),
            last_access_time: filetime_from_unix(st.st_atime, st.st_atime_nsec as u32),
            last_write_time: last_write,
            // POSIX ctime cannot be set: a client-set ChangeTime is stored in the DOS
            // record while current, otherwise the last write time is reported (as
            // Samba does).
            change_time: crate::attr::StoredChange::resolve(dos.and_then(|d| d.change), last_write),
            nlink: st.st_nlink as u32,
            is_dir,
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            delete_pending: false,
        }
    }
}
