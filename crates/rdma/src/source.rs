//! A file range as the source of an RDMA Write: the data of an SMB2 READ that is in
//! the page cache, which a provider that [writes files](crate::QueuePair::writes_files)
//! sends from the file into its socket (sendfile) instead of copying it into a
//! registered buffer and from there into the socket.

use std::io;
use std::os::fd::BorrowedFd;

/// Bytes that lie in a file, promised to the peer: a provider sends them with
/// [`FileRange::send_part`], and reads them in with [`FileRange::read_part`] where
/// it must see them (CRC on); what the file no longer holds (a concurrent truncate)
/// goes out as zeros, since the FPDUs' lengths are already on the wire.
pub trait FileRange: Send + Sync + std::fmt::Debug {
    /// Its length in bytes.
    fn len(&self) -> usize;
    /// Whether it holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sends up to `n` bytes from `at` into the socket `sock` without waiting
    /// (sendfile); returns how many went, 0 when the file ends before `at`.
    fn send_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> io::Result<usize>;
    /// Appends `n` bytes from `at` to `buf`, zeros for whatever the file no longer
    /// holds.
    fn read_part(&self, buf: &mut Vec<u8>, at: usize, n: usize);
}
