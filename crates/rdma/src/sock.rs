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

/// Sets the socket `fd`'s receive low-water mark (`SO_RCVLOWAT`) to `bytes` (at least
/// 1): epoll reports it readable, and a blocking read returns, only once that many
/// bytes are queued, or at end of stream (Linux caps the mark at half the largest
/// receive buffer).
pub fn set_recv_lowat(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes.max(1)).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is an open descriptor borrowed for the call; `v` is a live c_int
    // passed by address with its size, which setsockopt only reads.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
