//! The seam between the load generator and what it loads: a [`Target`] opens one
//! [`IoQueue`] per worker thread; a queue takes submissions and hands back completions,
//! keeping up to its depth in flight.
//!
//! * [`local::LocalTarget`]: a local file through io_uring (true queue depth) or
//!   pread/pwrite (one at a time, like fio's psync).
//! * [`smb::SmbTarget`]: a file on an SMB share through smbx-client; each worker thread
//!   has its own connection (or, with `--shared-connection`, its own open on the
//!   connection of its OS thread's first worker) on a single-threaded tokio runtime (one
//!   per OS thread, shared by the worker threads that OS thread runs), and each I/O is a
//!   future that thread polls, so a thread keeps as many READ/WRITE requests in flight as
//!   it has slots (the client queues what exceeds its credit window).

pub mod local;
mod ready_group;
pub mod smb;

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;

use crate::error::BenchError;
use crate::profile::Profile;
use crate::stats::IoKind;

/// A buffer whose bytes start on a 4096-byte boundary (for O_DIRECT), built safely by
/// over-allocating and offsetting.
#[derive(Debug)]
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

/// Alignment of [`AlignedBuf`].
pub const ALIGN: usize = 4096;

impl AlignedBuf {
    /// `len` zero bytes, aligned.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf { raw, start, len }
    }
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The data a write sends.
#[derive(Debug, Clone, Copy)]
pub enum WriteData<'a> {
    /// A block of the queue's shared write source, starting at this byte.
    Source(usize),
    /// These bytes (copied by the queue before it returns).
    Bytes(&'a [u8]),
}

/// A finished I/O.
#[derive(Debug)]
pub struct Completion {
    /// The slot it was submitted on.
    pub slot: usize,
    /// Bytes moved, or the failure.
    pub result: io::Result<usize>,
}

/// What a queue is opened with.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// Slots: the most I/Os in flight.
    pub depth: usize,
    /// Bytes per I/O.
    pub block: usize,
    /// Where [`WriteData::Source`] writes take their bytes (immutable for the run).
    pub write_source: Arc<AlignedBuf>,
    /// Set when the OS thread opening the queue runs several worker threads
    /// ([`Target::shares_threads`]): what the queues opened on it share.
    pub share: Option<Rc<ThreadShare>>,
}

/// What the queues of the worker threads that one OS thread runs share: for smb:// targets,
/// the single-threaded runtime that drives all their connections.
#[derive(Default)]
pub struct ThreadShare {
    pub(crate) smb: RefCell<Option<smb::SmbShare>>,
}

impl std::fmt::Debug for ThreadShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadShare").finish_non_exhaustive()
    }
}

/// One thread's view of one target.
pub trait IoQueue {
    /// Starts an I/O of one block at `offset` on a free `slot` (< depth).
    fn submit(
        &mut self,
        slot: usize,
        kind: IoKind,
        offset: u64,
        data: WriteData<'_>,
    ) -> io::Result<()>;
    /// Waits until at least `min` I/Os have finished (0: do not wait) and appends every
    /// finished one to `out`.
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()>;
    /// The most I/Os this queue keeps in flight (it may be less than asked for).
    fn depth(&self) -> usize;
}

/// Something to load: a file, local or remote.
pub trait Target: Send + Sync {
    /// The name as given on the command line (passwords removed).
    fn name(&self) -> &str;
    /// Bytes in the file.
    fn size(&self) -> u64;
    /// How I/O is issued: "io_uring", "psync" or "smb".
    fn engine(&self) -> &'static str;
    /// Opens a queue for one worker thread.
    fn queue(&self, cfg: &QueueConfig) -> Result<Box<dyn IoQueue>, BenchError>;
    /// Whether one OS thread may run the queues of several worker threads: their I/O is
    /// asynchronous, and with a [`QueueConfig::share`] a queue's [`IoQueue::reap`] with
    /// `min > 0` returns early (maybe with nothing) once another queue opened with the same
    /// share has finished I/Os to reap. Local files: no (a thread blocks in its own queue).
    fn shares_threads(&self) -> bool {
        false
    }
    /// What each channel of an SMB session carried so far (multichannel); none
    /// for local files.
    fn channels(&self) -> Vec<smbx_client::ChannelStats> {
        Vec::new()
    }
}

/// Opens a target by name: an smb:// URL or a local path. Creates it first with `-c`.
pub fn open(name: &str, profile: &Profile) -> Result<Arc<dyn Target>, BenchError> {
    if name.starts_with("smb://") || name.starts_with("SMB://") {
        Ok(Arc::new(smb::SmbTarget::open(name, profile)?))
    } else {
        Ok(Arc::new(local::LocalTarget::open(name, profile)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned() {
        for len in [0, 1, 4096, 10_000] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_slice().len(), len);
            assert_eq!(b.as_mut_slice().as_ptr() as usize % ALIGN, 0);
        }
    }
}
