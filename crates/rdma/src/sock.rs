//! Socket calls shared by the soft-iWARP driver and Direct TCP (smbx-transport, which
//! builds on this crate): written once, here, below both.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Writes `iov` to the socket `fd` without waiting, with `MSG_MORE`: the socket holds
/// the bytes for what follows them (a file's payload sent by `sendfile`, which pushes
/// at its end), so a header leaves in the same segment as the payload after it
/// instead of one of its own (a segment less through loopback's transmit and receive
/// paths, and a wake of the peer less). Returns the bytes taken; `WouldBlock` when
/// the socket takes none now; a peer gone is `EPIPE`, never a signal.
pub fn send_more(fd: BorrowedFd<'_>, iov: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec; sendmsg only reads through it.
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    let flags = libc::MSG_MORE | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    // SAFETY: `msg` points at `iov.len()` valid iovecs over live slices that outlive
    // the call, and `fd` is an open descriptor borrowed for it.
    let r = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, flags) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Sets socket option `opt` at `level` on `fd` to the bytes of `value`.
pub fn set_option(fd: BorrowedFd<'_>, level: i32, opt: i32, value: &[u8]) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor borrowed for the call; `value` is borrowed
    // for it and passed with its length, which setsockopt only reads.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads socket option `opt` at `level` of `fd` into `buf`: the number of bytes the
/// kernel wrote (the rest of `buf` is left as it was).
pub fn get_option(fd: BorrowedFd<'_>, level: i32, opt: i32, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = libc::socklen_t::try_from(buf.len()).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `fd` is an open descriptor borrowed for the call; `buf` is borrowed
    // mutably for it and `len` holds its size (the kernel writes at most that many
    // bytes and sets `len` to what it wrote).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok((len as usize).min(buf.len()))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the socket `fd`'s receive low-water mark (`SO_RCVLOWAT`) to `bytes` (at least
/// 1): epoll reports it readable, and a blocking read returns, only once that many
/// bytes are queued, or at end of stream (Linux caps the mark at half the largest
/// receive buffer).
pub fn set_recv_lowat(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes.max(1)).unwrap_or(libc::c_int::MAX);
    set_option(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &v.to_ne_bytes())
}
