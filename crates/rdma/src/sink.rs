//! A file range as the sink of an RDMA Read: the data of an SMB2 WRITE that a
//! provider which [reads into files](crate::QueuePair::reads_files) moves from its
//! socket into the file (splice: socket → pipe → page cache, one copy) instead of
//! reading it into a registered buffer that is then written to the file (two).

use std::io;
use std::os::fd::BorrowedFd;

/// Bytes of a file that an RDMA Read fills, taken in as they arrive: the bulk with
/// [`FileSink::recv_part`] straight from the socket, what the provider already read
/// into memory (the head of a payload that came with an earlier read) with
/// [`FileSink::write_part`]. A sink may gather what it takes and write it out
/// later, but every byte is in the file (or the sink has failed) once the last
/// byte of its range has been handed to it, as the Read completes. A byte the file
/// refuses (ENOSPC, EIO) is still taken off the socket, so the stream stays in
/// step; the sink has then [failed](FileSink::failed) and the Read completes in
/// error.
pub trait FileSink: Send + Sync + std::fmt::Debug {
    /// Its length in bytes.
    fn len(&self) -> usize;
    /// Whether it holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Moves up to `n` bytes from the socket `sock` into the range from byte `at`
    /// without waiting for the socket; returns how many it took off the socket (0:
    /// the peer closed), `WouldBlock` when none are queued. Bytes the file refuses
    /// are taken (and dropped) all the same.
    fn recv_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> io::Result<usize>;
    /// Writes `data`, received already, at byte `at` of the range.
    fn write_part(&self, at: usize, data: &[u8]);
    /// True once a byte did not land in the file.
    fn failed(&self) -> bool;
}
