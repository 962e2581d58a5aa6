//! WRITE data that an RDMA Read brings in over SMB Direct, written into the file as
//! it arrives: a link whose provider reads into files (soft-iWARP with CRC off)
//! splices it from its socket into a pipe and from the pipe into the page cache
//! ([`smbx_vfs::Handle::write_from_pipe`]), one copy where reading it into a
//! registered buffer and writing that out made two.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use smbx_transport::splice::{Pipe, Pipes, MAX_PIPES};
use smbx_wire::NtStatus;

/// How big a sink's pipe is asked to be: a whole FPDU's payload (~64 KiB on
/// loopback) in one splice even when its pages come one to a pipe buffer.
const SINK_PIPE: usize = 256 * 1024;

/// The `len` bytes of a file from `offset` that a WRITE's RDMA Read fills.
#[derive(Debug)]
pub(crate) struct WriteSink {
    handle: Arc<smbx_vfs::Handle>,
    offset: u64,
    len: usize,
    pipe: Pipe,
    /// Why the file refused a byte, once it has: the rest of the data is taken off
    /// the socket and dropped, and the WRITE fails with it.
    error: Mutex<Option<NtStatus>>,
}

impl WriteSink {
    /// A sink for `len` bytes of `handle` from `offset`, with a pipe of `pipes`
    /// (`None` when it already counts its most, or no pipe can be made: the WRITE
    /// then reads into a buffer).
    pub(crate) fn new(
        handle: Arc<smbx_vfs::Handle>,
        offset: u64,
        len: usize,
        pipes: &Arc<Pipes>,
    ) -> Option<WriteSink> {
        let pipe = Pipe::counted(SINK_PIPE, pipes, MAX_PIPES)?;
        Some(WriteSink {
            handle,
            offset,
            len,
            pipe,
            error: Mutex::new(None),
        })
    }

    /// Why the file refused a byte, if it did.
    pub(crate) fn error(&self) -> Option<NtStatus> {
        *self.error.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, st: NtStatus) {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(st);
    }

    /// Drops what the pipe holds (after a failure).
    fn drain(&self) {
        let mut scratch = Vec::new();
        if self.pipe.read_into(&mut scratch).is_err() {
            self.pipe.consumed(usize::MAX);
        }
    }
}

impl smbx_transport::FileSink for WriteSink {
    fn len(&self) -> usize {
        self.len
    }

    fn recv_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> io::Result<usize> {
        let n = n.min(self.len.saturating_sub(at));
        let k = self.pipe.splice_from(sock, n)?;
        if k == 0 {
            return Ok(0);
        }
        if self.error().is_some() {
            self.drain();
            return Ok(k);
        }
        let off = self.offset + at as u64;
        if let Err(e) = crate::handlers::write::write_pipe(&self.handle, &self.pipe, off, k) {
            self.fail(e);
            self.drain();
        }
        Ok(k)
    }

    fn write_part(&self, at: usize, data: &[u8]) {
        if self.error().is_some() {
            return;
        }
        if let Err(e) = self.handle.write_at(data, self.offset + at as u64) {
            self.fail(e);
        }
    }

    fn failed(&self) -> bool {
        self.error().is_some()
    }
}
