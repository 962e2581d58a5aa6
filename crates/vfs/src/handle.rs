//! Open files and directories.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};

use smbx_wire::time::{filetime_from_unix, unix_from_filetime};
use smbx_wire::NtStatus;

use crate::attr::*;
use crate::path::{join, to_smb};
use crate::share::{is_dir_mode, Inner};
use crate::stream::{self, MAX_STREAM_SIZE};
use crate::sys;
use crate::types::*;

/// Largest offset + length accepted for data operations (off_t range).
const MAX_FILE_OFFSET: u64 = i64::MAX as u64;

/// An open file, directory or named stream of a [`crate::Share`]. `Send + Sync`:
/// data operations take `&self` and use positional I/O.
pub struct Handle {
    pub(crate) share: Arc<Inner>,
    pub(crate) file: File,
    /// The descriptor is O_PATH (no data, no xattrs): the mode forbade reading.
    pub(crate) opath: bool,
    pub(crate) is_dir: bool,
    pub(crate) writable: bool,
    pub(crate) meta_writable: bool,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) path: Mutex<Vec<String>>,
    pub(crate) stream: Option<String>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("path", &self.path())
            .field("stream", &self.stream)
            .field("is_dir", &self.is_dir)
            .field("writable", &self.writable)
            .finish()
    }
}

/// Write access granted to a handle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    pub data: bool,
    pub meta: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn end_of(off: u64, len: usize) -> Result<u64, NtStatus> {
    off.checked_add(len as u64)
        .filter(|&e| e <= MAX_FILE_OFFSET)
        .ok_or(NtStatus::INVALID_PARAMETER)
}

impl Handle {
    pub(crate) fn new(
        share: Arc<Inner>,
        file: File,
        opath: bool,
        st: &libc::stat,
        path: Vec<String>,
        access: Access,
    ) -> Handle {
        Handle {
            share,
            file,
            opath,
            is_dir: is_dir_mode(st.st_mode),
            writable: access.data,
            meta_writable: access.meta,
            dev: st.st_dev,
            ino: st.st_ino,
            path: Mutex::new(path),
            stream: None,
        }
    }

    pub(crate) fn with_stream(mut self, name: String) -> Handle {
        self.stream = Some(name);
        self
    }

    /// Current share-relative path with backslashes ("" for the root); follows renames
    /// made through [`crate::Share::rename`] on this handle.
    pub fn path(&self) -> String {
        to_smb(&lock(&self.path))
    }

    /// The last path component ("" for the root).
    pub fn name(&self) -> String {
        lock(&self.path).last().cloned().unwrap_or_default()
    }

    /// True for directories (a named stream of a directory reports false).
    pub fn is_dir(&self) -> bool {
        self.is_dir && self.stream.is_none()
    }

    /// The named stream this handle addresses, if any.
    pub fn stream_name(&self) -> Option<&str> {
        self.stream.as_deref()
    }

    /// The inode number (stable file id).
    pub fn file_id(&self) -> u64 {
        self.ino
    }

    /// The handle permits data writes (granted `want_write`, or MAXIMUM_ALLOWED where
    /// possible).
    pub fn is_writable(&self) -> bool {
        self.writable && !self.share.opts.read_only
    }

    /// The handle permits setting times, attributes and EAs.
    pub fn can_write_attributes(&self) -> bool {
        (self.meta_writable || self.writable) && !self.share.opts.read_only
    }

    /// The underlying descriptor of the file or directory (for zero-copy data paths on
    /// the default stream; do not use it for named streams).
    pub fn file(&self) -> &File {
        &self.file
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Passes the client's access pattern to the kernel's read-ahead (a hint: errors
    /// are ignored). Directories and named streams are left alone.
    pub fn advise(&self, pattern: AccessPattern) {
        if self.is_dir || self.stream.is_some() || self.opath {
            return;
        }
        let advice = match pattern {
            AccessPattern::Sequential => libc::POSIX_FADV_SEQUENTIAL,
            AccessPattern::Random => libc::POSIX_FADV_RANDOM,
        };
        sys::fadvise(self.fd(), advice);
    }

    /// Copies up to `len` bytes at `src_off` of this file's default stream to
    /// `dst_off` of `dst`'s inside the kernel (`copy_file_range`, reflinked where the
    /// file system can). Returns how many bytes were copied before the kernel stopped
    /// or refused (0: unsupported here, e.g. across file systems); the caller copies
    /// the rest another way. Named streams, directories and a read-only destination
    /// copy nothing.
    pub fn copy_range_in_kernel(&self, dst: &Handle, src_off: u64, dst_off: u64, len: u64) -> u64 {
        if self.stream.is_some() || dst.stream.is_some() || self.is_dir || dst.is_dir {
            return 0;
        }
        if self.opath || dst.opath || !dst.is_writable() {
            return 0;
        }
        let (Ok(mut so), Ok(mut doff)) = (i64::try_from(src_off), i64::try_from(dst_off)) else {
            return 0;
        };
        let mut done = 0u64;
        while done < len {
            let chunk = usize::try_from(len - done).unwrap_or(usize::MAX);
            match sys::copy_file_range(self.fd(), &mut so, dst.fd(), &mut doff, chunk) {
                Ok(n) if n > 0 => done += n as u64,
                _ => break,
            }
        }
        done
    }

    fn check_write(&self) -> Result<(), NtStatus> {
        if !self.is_writable() {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(())
    }

    fn check_write_meta(&self) -> Result<(), NtStatus> {
        if !self.can_write_attributes() {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(())
    }

    pub(crate) fn check_data(&self) -> Result<(), NtStatus> {
        if self.is_dir && self.stream.is_none() {
            return Err(NtStatus::INVALID_DEVICE_REQUEST);
        }
        if self.opath {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(())
    }

    fn base_info(&self) -> Result<FileInfo, NtStatus> {
        let st = sys::fstat(self.fd())?;
        let mut info = self
            .share
            .info(&st, self.share.read_dos(self.fd(), self.opath));
        self.share
            .apply_hidden(lock(&self.path).last().map(String::as_str), &mut info);
        Ok(info)
    }

    /// Metadata (for a named stream: the file's, with the stream's size).
    pub fn stat(&self) -> Result<FileInfo, NtStatus> {
        let mut info = self.base_info()?;
        if let Some(s) = &self.stream {
            let len = stream::read_stream(self.fd(), s)?.len() as u64;
            info.size = len;
            info.allocation_size = len;
            info.is_dir = false;
        }
        Ok(info)
    }

    /// Reads at `off`; returns the bytes read (0 at or past end of file).
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize, NtStatus> {
        self.check_data()?;
        if let Some(s) = &self.stream {
            let v = stream::read_stream(self.fd(), s)?;
            let Ok(start) = usize::try_from(off) else {
                return Ok(0);
            };
            let Some(src) = v.get(start..) else {
                return Ok(0);
            };
            let n = src.len().min(buf.len());
            buf[..n].copy_from_slice(&src[..n]);
            return Ok(n);
        }
        let mut done = 0;
        while done < buf.len() {
            let pos = end_of(off, done)?;
            match self.file.read_at(&mut buf[done..], pos) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done)
    }

    /// Writes all of `data` at `off`; returns `data.len()`.
    pub fn write_at(&self, data: &[u8], off: u64) -> Result<usize, NtStatus> {
        self.check_data()?;
        self.check_write()?;
        let end = end_of(off, data.len())?;
        if let Some(s) = &self.stream {
            if end > MAX_STREAM_SIZE as u64 {
                return Err(NtStatus::DISK_FULL);
            }
            let _g = lock(&self.share.stream_lock);
            let mut v = stream::read_stream(self.fd(), s)?;
            let (off, end) = (off as usize, end as usize);
            if v.len() < end {
                v.resize(end, 0);
            }
            v[off..end].copy_from_slice(data);
            stream::write_stream(self.fd(), s, &v)?;
            return Ok(data.len());
        }
        self.file
            .write_all_at(data, off)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EBADF) => NtStatus::ACCESS_DENIED,
                Some(libc::EFBIG) => NtStatus::DISK_FULL,
                _ => e.into(),
            })?;
        Ok(data.len())
    }

    /// Flushes data and metadata to stable storage (fsync).
    pub fn flush(&self) -> Result<(), NtStatus> {
        if self.opath {
            return Ok(());
        }
        self.file.sync_all().map_err(NtStatus::from)
    }

    /// Sets the end of file (FileEndOfFileInformation).
    pub fn set_end_of_file(&self, size: u64) -> Result<(), NtStatus> {
        self.check_data()?;
        self.check_write()?;
        if size > MAX_FILE_OFFSET {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if let Some(s) = &self.stream {
            if size > MAX_STREAM_SIZE as u64 {
                return Err(NtStatus::DISK_FULL);
            }
            let _g = lock(&self.share.stream_lock);
            let mut v = stream::read_stream(self.fd(), s)?;
            v.resize(size as usize, 0);
            return stream::write_stream(self.fd(), s, &v);
        }
        self.file.set_len(size).map_err(|e| match e.raw_os_error() {
            Some(libc::EBADF) | Some(libc::EINVAL) => NtStatus::ACCESS_DENIED,
            Some(libc::EFBIG) => NtStatus::DISK_FULL,
            _ => e.into(),
        })
    }

    /// Sets the allocation size (FileAllocationInformation) with Windows semantics:
    /// below the end of file truncates; above reserves space (fallocate KEEP_SIZE,
    /// best effort); between releases preallocation past the end of file.
    pub fn set_allocation(&self, size: u64) -> Result<(), NtStatus> {
        self.check_data()?;
        self.check_write()?;
        if size > MAX_FILE_OFFSET {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if self.stream.is_some() {
            let cur = self.stat()?.size;
            return if size < cur {
                self.set_end_of_file(size)
            } else {
                Ok(())
            };
        }
        let st = sys::fstat(self.fd())?;
        let eof = st.st_size as u64;
        let alloc = (st.st_blocks as u64).saturating_mul(512);
        if size < eof {
            self.file.set_len(size)?;
        } else if size > alloc {
            match sys::fallocate(self.fd(), libc::FALLOC_FL_KEEP_SIZE, 0, size) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
                Err(e) => {
                    return Err(match e.raw_os_error() {
                        Some(libc::ENOSPC) | Some(libc::EFBIG) => NtStatus::DISK_FULL,
                        _ => e.into(),
                    })
                }
            }
        } else if size < alloc {
            self.file.set_len(eof)?;
        }
        Ok(())
    }

    /// Applies FileBasicInformation. Times set via futimens (creation time and
    /// change time in the DOS record: see [`crate::attr::StoredChange`]). Attributes replace the
    /// settable bits (SPARSE_FILE is kept; DIRECTORY on a file or TEMPORARY on a
    /// directory is INVALID_PARAMETER).
    pub fn set_basic(&self, b: &BasicInfo) -> Result<(), NtStatus> {
        self.check_write_meta()?;
        if let Some(a) = b.attributes {
            if !self.is_dir && a.contains(FileAttributes::DIRECTORY) {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            if self.is_dir && a.contains(FileAttributes::TEMPORARY) {
                return Err(NtStatus::INVALID_PARAMETER);
            }
        }
        // Times first: a stored ChangeTime belongs to the last write time set here.
        if b.last_access.is_some() || b.last_write.is_some() {
            let conv = |t: Option<u64>| t.map(unix_from_filetime);
            sys::futimens(self.fd(), conv(b.last_access), conv(b.last_write)).map_err(
                |e| match e.raw_os_error() {
                    Some(libc::EBADF) => NtStatus::ACCESS_DENIED,
                    _ => e.into(),
                },
            )?;
        }
        if b.creation.is_some() || b.attributes.is_some() || b.change.is_some() {
            let st = sys::fstat(self.fd())?;
            let cur = self.share.read_dos(self.fd(), self.opath);
            let cur_attrs = self.share.attributes(&st, cur);
            let creation = b
                .creation
                .unwrap_or_else(|| self.share.creation_time(&st, cur));
            let attributes = match b.attributes {
                Some(a) => (a & SETTABLE_ATTRIBUTES) | (cur_attrs & FileAttributes::SPARSE_FILE),
                None => cur_attrs & STORED_ATTRIBUTES,
            };
            self.share.write_dos(
                &self.file,
                DosMeta {
                    attributes,
                    creation: Some(creation),
                    change: match b.change {
                        Some(c) => Some(crate::attr::StoredChange {
                            change_time: c,
                            write_time: filetime_from_unix(st.st_mtime, st.st_mtime_nsec as u32),
                        }),
                        None => cur.and_then(|d| d.change),
                    },
                },
            )?;
        }
        Ok(())
    }

    /// Lists a directory: "." and ".." first, then the entries sorted by name. Names
    /// that are not valid UTF-8, special files (devices, FIFOs, sockets) and — unless the
    /// share follows in-share symlinks — symlinks are omitted. At the share root ".."
    /// describes the root itself.
    pub fn read_dir(&self) -> Result<Vec<DirEntry>, NtStatus> {
        self.read_dir_matching("*")
    }

    /// Like [`Handle::read_dir`], keeping only names that match the SMB search `pattern`
    /// ([`crate::wildcard_match`], case-insensitive unless the share is case-sensitive).
    /// Non-matching entries are never stat'ed, so a pattern without wildcards is cheap
    /// even in a large directory.
    pub fn read_dir_matching(&self, pattern: &str) -> Result<Vec<DirEntry>, NtStatus> {
        if !self.is_dir || self.stream.is_some() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let cs = self.share.opts.case_sensitive;
        let matches = |n: &str| crate::wildcard_match(pattern, n, cs);
        let path = lock(&self.path).clone();
        let mut out = Vec::new();
        let dot = self.base_info()?;
        if matches(".") {
            out.push(DirEntry {
                name: ".".into(),
                info: dot,
            });
        }
        if matches("..") {
            // A stale path (the parent was renamed meanwhile) falls back to ".".
            let dotdot = match path.split_last() {
                None => dot,
                Some((_, parent)) => match self.share.open_obj(&join(parent), false) {
                    Ok((f, opath, st)) => {
                        self.share.info(&st, self.share.read_dos(f.as_fd(), opath))
                    }
                    Err(_) => dot,
                },
            };
            out.push(DirEntry {
                name: "..".into(),
                info: dotdot,
            });
        }
        let mut rest = Vec::new();
        for ent in sys::list_dir(self.fd())? {
            let Ok(name) = String::from_utf8(ent.name) else {
                continue;
            };
            if !matches(&name) {
                continue;
            }
            if let Some(mut info) = self.entry_info(&path, &name) {
                self.share.apply_hidden(Some(&name), &mut info);
                rest.push(DirEntry { name, info });
            }
        }
        rest.sort_by(|a, b| a.name.cmp(&b.name));
        out.extend(rest);
        Ok(out)
    }

    fn entry_info(&self, path: &[String], name: &str) -> Option<FileInfo> {
        let share = &self.share;
        let c = CString::new(name).ok()?;
        let st = sys::fstatat_nofollow(self.fd(), &c).ok()?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => {
                if !share.opts.follow_symlinks_within_share
                    || crate::path::validate_component(name).is_err()
                {
                    return None;
                }
                let mut full = path.to_vec();
                full.push(name.to_string());
                let (f, opath, st) = share.open_obj(&join(&full), false).ok()?;
                Some(share.info(&st, share.read_dos(f.as_fd(), opath)))
            }
            libc::S_IFREG | libc::S_IFDIR => {
                let dos = if share.opts.store_dos_attributes {
                    // A single name with O_NOFOLLOW relative to this directory: no traversal.
                    sys::openat(
                        self.fd(),
                        &c,
                        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
                    )
                    .ok()
                    .and_then(|fd| share.read_dos(fd.as_fd(), false))
                } else {
                    None
                };
                Some(share.info(&st, dos))
            }
            _ => None,
        }
    }

    /// Zeroes `[off, off+len)` (FSCTL_SET_ZERO_DATA), never extending the file. Sparse
    /// files get a hole punched; others get the range zeroed in place. Falls back to
    /// writing zeros when the file system cannot.
    pub fn punch_hole(&self, off: u64, len: u64) -> Result<(), NtStatus> {
        self.check_data()?;
        self.check_write()?;
        let size = self.stat()?.size;
        let end = off.saturating_add(len).min(size);
        if off >= end {
            return Ok(());
        }
        if let Some(s) = &self.stream {
            let _g = lock(&self.share.stream_lock);
            let mut v = stream::read_stream(self.fd(), s)?;
            let end = (end as usize).min(v.len());
            if let Some(r) = v.get_mut(off as usize..end) {
                r.fill(0);
            }
            return stream::write_stream(self.fd(), s, &v);
        }
        let sparse = self
            .base_info()?
            .attributes
            .contains(FileAttributes::SPARSE_FILE);
        let modes = if sparse {
            [libc::FALLOC_FL_PUNCH_HOLE, libc::FALLOC_FL_ZERO_RANGE]
        } else {
            [libc::FALLOC_FL_ZERO_RANGE, libc::FALLOC_FL_PUNCH_HOLE]
        };
        for m in modes {
            if sys::fallocate(self.fd(), m | libc::FALLOC_FL_KEEP_SIZE, off, end - off).is_ok() {
                return Ok(());
            }
        }
        let zeros = vec![0u8; 64 * 1024];
        let mut pos = off;
        while pos < end {
            let n = ((end - pos) as usize).min(zeros.len());
            self.file.write_all_at(&zeros[..n], pos)?;
            pos += n as u64;
        }
        Ok(())
    }

    /// Allocated (data) ranges within `[off, off+len)` as (offset, length) pairs, found
    /// with SEEK_DATA/SEEK_HOLE (FSCTL_QUERY_ALLOCATED_RANGES). File systems without
    /// hole reporting yield the whole range up to the end of file.
    pub fn allocated_ranges(&self, off: u64, len: u64) -> Result<Vec<(u64, u64)>, NtStatus> {
        self.check_data()?;
        let size = self.stat()?.size;
        let end = off.saturating_add(len).min(size);
        if off >= end {
            return Ok(Vec::new());
        }
        if self.stream.is_some() {
            return Ok(vec![(off, end - off)]);
        }
        let mut out = Vec::new();
        let mut pos = off;
        while pos < end {
            let data = match sys::lseek(self.fd(), pos, libc::SEEK_DATA) {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    return Ok(vec![(off, end - off)]);
                }
                Err(e) => return Err(e.into()),
            };
            if data >= end {
                break;
            }
            let hole = sys::lseek(self.fd(), data, libc::SEEK_HOLE)?.unwrap_or(size);
            let stop = hole.min(end);
            out.push((data, stop - data));
            pos = hole.max(data + 1);
        }
        Ok(out)
    }

    /// Sets or clears the SPARSE_FILE attribute (FSCTL_SET_SPARSE). Clearing fills holes
    /// (best effort).
    pub fn set_sparse(&self, sparse: bool) -> Result<(), NtStatus> {
        self.check_write_meta()?;
        if self.is_dir {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let st = sys::fstat(self.fd())?;
        let cur = self.share.read_dos(self.fd(), self.opath);
        let mut attributes = self.share.attributes(&st, cur) & STORED_ATTRIBUTES;
        if sparse {
            attributes |= FileAttributes::SPARSE_FILE;
        } else {
            attributes.remove(FileAttributes::SPARSE_FILE);
            let size = st.st_size as u64;
            if size > 0 {
                let _ = sys::fallocate(self.fd(), libc::FALLOC_FL_KEEP_SIZE, 0, size);
            }
        }
        self.share.write_dos(
            &self.file,
            DosMeta {
                attributes,
                creation: Some(self.share.creation_time(&st, cur)),
                change: cur.and_then(|d| d.change),
            },
        )
    }

    /// The data streams of the file (FileStreamInformation): "::$DATA" first for files,
    /// then named streams.
    pub fn streams(&self) -> Result<Vec<StreamInfo>, NtStatus> {
        if self.opath {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let mut out = Vec::new();
        if !self.is_dir {
            let info = self.base_info()?;
            out.push(StreamInfo {
                name: "::$DATA".into(),
                size: info.size,
                allocation_size: info.allocation_size,
            });
        }
        for n in stream::list_stream_names(self.fd())? {
            let Ok(v) = stream::read_stream(self.fd(), &n) else {
                continue;
            };
            out.push(StreamInfo {
                name: format!(":{n}:$DATA"),
                size: v.len() as u64,
                allocation_size: v.len() as u64,
            });
        }
        Ok(out)
    }

    /// All extended attributes (FileFullEaInformation).
    pub fn eas(&self) -> Result<Vec<Ea>, NtStatus> {
        if self.opath {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let mut eas = stream::get_eas(self.fd())?;
        eas.retain(|e| !self.share.ea_reserved(&e.name));
        Ok(eas)
    }

    /// Sets one EA; an empty value deletes it.
    pub fn set_ea(&self, name: &str, value: &[u8]) -> Result<(), NtStatus> {
        self.check_write_meta()?;
        if self.share.ea_reserved(name) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        stream::set_ea(self.fd(), name, value)
    }
}

/// Name-first directory enumeration (QUERY_DIRECTORY cursors): list names once, read
/// each entry's metadata only when it is returned, so entries removed meanwhile are
/// skipped and metadata is current.
impl Handle {
    /// The names in this directory that match the SMB search `pattern`: "." and ".."
    /// first (when they match), then the rest sorted. Reads no metadata; names that are
    /// not valid UTF-8 are omitted. [`Handle::dir_entry`] later yields `None` for names
    /// a listing would hide (special files, symlinks under the default policy).
    pub fn list_names_matching(&self, pattern: &str) -> Result<Vec<String>, NtStatus> {
        if !self.is_dir || self.stream.is_some() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let cs = self.share.opts.case_sensitive;
        let matches = |n: &str| crate::wildcard_match(pattern, n, cs);
        let mut out: Vec<String> = [".", ".."]
            .into_iter()
            .filter(|n| matches(n))
            .map(String::from)
            .collect();
        let mut rest: Vec<String> = sys::list_dir(self.fd())?
            .into_iter()
            .filter_map(|e| String::from_utf8(e.name).ok())
            .filter(|n| n != "." && n != ".." && matches(n))
            .collect();
        rest.sort();
        out.extend(rest);
        Ok(out)
    }

    /// Metadata of the entry `name` of this directory as [`Handle::read_dir`] reports
    /// it ("." and ".." included); `None` if it no longer exists or a listing hides it.
    pub fn dir_entry(&self, name: &str) -> Option<DirEntry> {
        if !self.is_dir || self.stream.is_some() {
            return None;
        }
        if name == "." || name == ".." {
            return self
                .read_dir_matching(name)
                .ok()?
                .into_iter()
                .find(|e| e.name == name);
        }
        if crate::path::validate_component(name).is_err() {
            return None;
        }
        let path = lock(&self.path).clone();
        let mut info = self.entry_info(&path, name)?;
        self.share.apply_hidden(Some(name), &mut info);
        Some(DirEntry {
            name: name.to_string(),
            info,
        })
    }
}

#[cfg(test)]
mod dirlist_tests {
    use crate::{CreateRequest, Share, ShareOptions};

    #[test]
    fn names_then_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("s");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("b.txt"), b"xy").unwrap();
        std::fs::write(root.join("a.txt"), b"x").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let s = Share::open(&root, ShareOptions::default()).unwrap();
        let (h, _) = s.create("", &CreateRequest::default()).unwrap();
        let names = h.list_names_matching("*").unwrap();
        assert_eq!(names, vec![".", "..", "a.txt", "b.txt", "d"]);
        assert_eq!(
            h.list_names_matching("*.TXT").unwrap(),
            vec!["a.txt", "b.txt"]
        );
        assert_eq!(h.dir_entry("b.txt").unwrap().info.size, 2);
        assert!(h.dir_entry("d").unwrap().info.is_dir);
        assert!(h.dir_entry(".").unwrap().info.is_dir);
        assert!(h.dir_entry("..").unwrap().info.is_dir);
        std::fs::remove_file(root.join("a.txt")).unwrap();
        assert!(h.dir_entry("a.txt").is_none());
        assert!(h.dir_entry("../x").is_none());
        assert!(h.dir_entry("").is_none());
    }
}

impl Handle {
    /// Sets the on-disk last write time to `t` (FILETIME) without access checks: the
    /// server's own bookkeeping of delayed write-time updates, applied when the last
    /// open of a file closes. Fails for handles without a data descriptor (O_PATH).
    pub fn store_write_time(&self, t: u64) -> Result<(), NtStatus> {
        if self.opath {
            return Err(NtStatus::ACCESS_DENIED);
        }
        sys::futimens(self.fd(), None, Some(unix_from_filetime(t))).map_err(NtStatus::from)
    }
}

#[cfg(test)]
mod write_time_tests {
    use crate::{BasicInfo, CreateRequest, Disposition, Share, ShareOptions};

    #[test]
    fn stored_change_time_round_trips_until_the_file_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Share::open(
            tmp.path(),
            ShareOptions {
                store_dos_attributes: true,
                ..Default::default()
            },
        )
        .unwrap();
        let req = CreateRequest {
            disposition: Disposition::Create,
            want_read: true,
            want_write: true,
            want_write_attributes: true,
            ..Default::default()
        };
        let Ok((h, _)) = s.create("f", &req) else {
            panic!("create");
        };
        let lw = 0x01d0_0000_0000_0000u64;
        let ch = 0x01d1_0000_0000_0000u64;
        h.set_basic(&BasicInfo {
            last_write: Some(lw),
            change: Some(ch),
            ..Default::default()
        })
        .unwrap();
        let i = h.stat().unwrap();
        if i.change_time != ch {
            // No user xattrs on this file system: nothing to check.
            assert_eq!(i.change_time, i.last_write_time);
            return;
        }
        assert_eq!(i.last_write_time, lw);
        // Change time alone.
        h.set_basic(&BasicInfo {
            change: Some(ch + 1),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(h.stat().unwrap().change_time, ch + 1);
        // Server-side write-time bookkeeping.
        h.store_write_time(lw + 10_000_000).unwrap();
        let i = h.stat().unwrap();
        assert_eq!(i.last_write_time, lw + 10_000_000);
        // The file changed: ChangeTime follows the last write time again.
        assert_eq!(i.change_time, i.last_write_time);
        h.write_at(b"x", 0).unwrap();
        let i = h.stat().unwrap();
        assert_eq!(i.change_time, i.last_write_time);
    }
}
