//! Thin, safe wrappers over the Linux syscalls the backend needs.
//!
//! All `unsafe` of the crate lives here. Every function takes file descriptors as
//! [`BorrowedFd`] and names as [`CStr`], and returns `io::Result`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `struct open_how` from `linux/openat2.h` (the libc crate marks its copy non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_retry<F: FnMut() -> libc::c_int>(mut f: F) -> io::Result<libc::c_int> {
    loop {
        match cvt(f()) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            other => return other,
        }
    }
}

/// `openat2(2)`: opens `path` relative to `dir` with the given `resolve` restrictions.
/// `O_CLOEXEC` is always added. EAGAIN (a concurrent rename or mount seen by
/// RESOLVE_BENEATH) and EINTR are retried a bounded number of times.
pub(crate) fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u32 as u64,
        mode: if flags & libc::O_CREAT != 0 {
            u64::from(mode)
        } else {
            0
        },
        resolve,
    };
    let mut tries = 0;
    loop {
        // SAFETY: `path` is a valid NUL-terminated string, `how` is a live, correctly laid
        // out `struct open_how` whose size we pass; `dir` is a valid open descriptor.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if r >= 0 {
            // SAFETY: the kernel returned a new descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) });
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) | Some(libc::EAGAIN) if tries < 32 => tries += 1,
            _ => return Err(e),
        }
    }
}

/// `openat(2)` of a single name (or ".") relative to `dir`; `O_CLOEXEC` is added.
pub(crate) fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt_retry(|| {
        // SAFETY: valid descriptor and NUL-terminated name; no mode needed (no O_CREAT).
        unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) }
    })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open(2)` of an absolute or cwd-relative path (used only for the configured share root).
pub(crate) fn open_path(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt_retry(|| {
        // SAFETY: NUL-terminated path; no O_CREAT so no mode argument.
        unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) }
    })?;
    // SAFETY: new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(2)`.
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid descriptor and NUL-terminated name.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) })?;
    Ok(())
}

/// `unlinkat(2)`; `dir_flag` selects AT_REMOVEDIR.
pub(crate) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, remove_dir: bool) -> io::Result<()> {
    let flags = if remove_dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: valid descriptor and NUL-terminated name.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })?;
    Ok(())
}

/// `renameat2(2)` with `flags` (0 or RENAME_NOREPLACE).
pub(crate) fn renameat2(
    old_dir: BorrowedFd<'_>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
    flags: libc::c_uint,
) -> io::Result<()> {
    // SAFETY: valid descriptors and NUL-terminated names.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            flags,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `linkat(2)` without following symlinks.
pub(crate) fn linkat(
    old_dir: BorrowedFd<'_>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
) -> io::Result<()> {
    // SAFETY: valid descriptors and NUL-terminated names.
    cvt(unsafe {
        libc::linkat(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            0,
        )
    })?;
    Ok(())
}

/// `fstatat(2)` with AT_SYMLINK_NOFOLLOW of one name in `dir`.
pub(crate) fn fstatat_nofollow(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `struct stat` is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, `st` is writable and correctly sized.
    cvt(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

/// `fstat(2)`.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `struct stat` is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, `st` is writable and correctly sized.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// Reads an extended attribute of an open file; `None` when it does not exist.
/// Values larger than `max` are reported as E2BIG.
pub(crate) fn fgetxattr(
    fd: BorrowedFd<'_>,
    name: &CStr,
    max: usize,
) -> io::Result<Option<Vec<u8>>> {
    for _ in 0..8 {
        // SAFETY: a null buffer with size 0 asks only for the value's size.
        let r = unsafe { libc::fgetxattr(fd.as_raw_fd(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENODATA) {
                Ok(None)
            } else {
                Err(e)
            };
        }
        let len = r as usize;
        if len > max {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        let mut buf = vec![0u8; len];
        // SAFETY: `buf` is writable for `buf.len()` bytes.
        let r = unsafe {
            libc::fgetxattr(
                fd.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ERANGE) => continue, // grew meanwhile
                Some(libc::ENODATA) => return Ok(None),
                _ => return Err(e),
            }
        }
        buf.truncate(r as usize);
        return Ok(Some(buf));
    }
    Err(io::Error::from_raw_os_error(libc::EBUSY))
}

/// Sets an extended attribute of an open file.
pub(crate) fn fsetxattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: `value` is readable for its length; name is NUL-terminated.
    cvt(unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })?;
    Ok(())
}

/// Removes an extended attribute of an open file.
pub(crate) fn fremovexattr(fd: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: valid descriptor and NUL-terminated name.
    cvt(unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) })?;
    Ok(())
}

/// Lists the extended attribute names of an open file.
pub(crate) fn flistxattr(fd: BorrowedFd<'_>) -> io::Result<Vec<CString>> {
    for _ in 0..8 {
        // SAFETY: a null buffer with size 0 asks only for the list's size.
        let r = unsafe { libc::flistxattr(fd.as_raw_fd(), std::ptr::null_mut(), 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; r as usize];
        if buf.is_empty() {
            return Ok(Vec::new());
        }
        // SAFETY: `buf` is writable for its length.
        let r = unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) {
                continue;
            }
            return Err(e);
        }
        buf.truncate(r as usize);
        return Ok(buf
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .filter_map(|s| CString::new(s).ok())
            .collect());
    }
    Err(io::Error::from_raw_os_error(libc::EBUSY))
}

/// `fallocate(2)`.
pub(crate) fn fallocate(
    fd: BorrowedFd<'_>,
    mode: libc::c_int,
    off: u64,
    len: u64,
) -> io::Result<()> {
    let off = i64::try_from(off).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    let len = i64::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    cvt_retry(|| {
        // SAFETY: plain integer arguments on a valid descriptor.
        unsafe { libc::fallocate(fd.as_raw_fd(), mode, off, len) }
    })?;
    Ok(())
}

/// `lseek(2)`; `Ok(None)` for ENXIO (no more data / holes past the offset).
pub(crate) fn lseek(fd: BorrowedFd<'_>, off: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    let off = i64::try_from(off).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: plain integer arguments on a valid descriptor.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), off, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(r as u64))
}

/// `futimens(2)`: `None` leaves a time unchanged (UTIME_OMIT).
pub(crate) fn futimens(
    fd: BorrowedFd<'_>,
    atime: Option<(i64, u32)>,
    mtime: Option<(i64, u32)>,
) -> io::Result<()> {
    let ts = |t: Option<(i64, u32)>| match t {
        Some((s, ns)) => libc::timespec {
            tv_sec: s as libc::time_t,
            tv_nsec: ns as libc::c_long,
        },
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
    };
    let times = [ts(atime), ts(mtime)];
    // SAFETY: `times` is an array of two valid timespecs.
    cvt(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })?;
    Ok(())
}

/// `fstatvfs(3)`.
pub(crate) fn fstatvfs(fd: BorrowedFd<'_>) -> io::Result<libc::statvfs> {
    // SAFETY: an all-zero `struct statvfs` is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor; `st` is writable and correctly sized.
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// Clears O_NONBLOCK on a descriptor.
pub(crate) fn clear_nonblock(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFL on a valid descriptor.
    let fl = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    if fl & libc::O_NONBLOCK != 0 {
        // SAFETY: F_SETFL with flags derived from F_GETFL.
        cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) })?;
    }
    Ok(())
}

/// One directory entry as returned by `readdir(3)`.
pub(crate) struct RawDirEntry {
    pub name: Vec<u8>,
}

/// Lists a directory through a fresh descriptor for "." relative to `dir`, so the
/// caller's descriptor and its offset are untouched. "." and ".." are skipped.
pub(crate) fn list_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<RawDirEntry>> {
    let fd = openat(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY)?;
    let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
    // SAFETY: `raw` is an open directory descriptor whose ownership passes to the DIR.
    let dp = unsafe { libc::fdopendir(raw) };
    if dp.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so we still own `raw`.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        return Err(e);
    }
    struct Dir(*mut libc::DIR);
    impl Drop for Dir {
        fn drop(&mut self) {
            // SAFETY: the DIR was returned by fdopendir and is closed exactly once.
            unsafe { libc::closedir(self.0) };
        }
    }
    let d = Dir(dp);
    let mut out = Vec::new();
    loop {
        // SAFETY: errno is thread-local; resetting it lets us tell end-of-directory from error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `d.0` is a valid open DIR.
        let ent = unsafe { libc::readdir64(d.0) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            if e.raw_os_error().unwrap_or(0) != 0 {
                return Err(e);
            }
            break;
        }
        // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated; we copy it
        // before the next readdir call.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        out.push(RawDirEntry {
            name: name.to_vec(),
        });
    }
    Ok(out)
}

/// `inotify_init1(IN_CLOEXEC | IN_NONBLOCK)`: a new inotify instance whose reads
/// return EAGAIN when nothing is queued ([`poll_readable`] waits for events).
pub(crate) fn inotify_init() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with a flag argument; the result is checked.
    let fd = cvt(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `inotify_add_watch(2)` of `path` with `mask`; returns the watch descriptor.
pub(crate) fn inotify_add_watch(ino: BorrowedFd<'_>, path: &CStr, mask: u32) -> io::Result<i32> {
    // SAFETY: valid inotify descriptor and NUL-terminated path; the result is checked.
    cvt(unsafe { libc::inotify_add_watch(ino.as_raw_fd(), path.as_ptr(), mask) })
}

/// `inotify_rm_watch(2)`; errors (the watch already went) are ignored.
pub(crate) fn inotify_rm_watch(ino: BorrowedFd<'_>, wd: i32) {
    // SAFETY: plain integer arguments on a valid inotify descriptor.
    unsafe { libc::inotify_rm_watch(ino.as_raw_fd(), wd) };
}

/// `poll(2)` until `fd` is readable (or reports an error or hangup), retrying EINTR.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd for the call's duration; the descriptor is valid.
        let n = unsafe { libc::poll(&mut p, 1, -1) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `read(2)` into `buf`, retrying EINTR; returns the bytes read.
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is writable for its length; the descriptor is valid.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `llistxattr(2)` of a path (a symlink is not followed): the raw NUL-separated
/// name list, at most 64 KiB.
pub(crate) fn llistxattr(path: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: NUL-terminated path; `buf` is writable for its length.
        let n = unsafe { libc::llistxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) || buf.len() >= 1 << 16 {
            return Err(e);
        }
        buf.resize(buf.len() * 4, 0);
    }
}

/// `posix_fadvise(2)` over the whole file; advice is a hint, so errors are ignored.
pub(crate) fn fadvise(fd: BorrowedFd<'_>, advice: libc::c_int) {
    // SAFETY: plain integer arguments on a valid descriptor.
    unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, advice) };
}

/// `copy_file_range(2)` of up to `len` bytes; the offsets advance by what was copied.
pub(crate) fn copy_file_range(
    src: BorrowedFd<'_>,
    src_off: &mut i64,
    dst: BorrowedFd<'_>,
    dst_off: &mut i64,
    len: usize,
) -> io::Result<usize> {
    loop {
        // SAFETY: both descriptors are valid; the offsets are live i64s the kernel
        // updates; no flags.
        let n = unsafe {
            libc::copy_file_range(src.as_raw_fd(), src_off, dst.as_raw_fd(), dst_off, len, 0)
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The effective user and group ids of this process.
pub(crate) fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid take no arguments and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}
