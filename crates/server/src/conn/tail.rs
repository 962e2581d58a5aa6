//! READ data that follows a response on the wire and is still in the file: a link
//! that sends file tails (Direct TCP) sends it from the page cache with `sendfile`
//! (the zero-copy path; smbx_vfs::Handle::send_to), and so does an SMB Direct link
//! whose provider writes files (an RDMA Write from the file); anything else reads it in.

use std::os::fd::BorrowedFd;
use std::sync::Arc;

use smbx_transport::{BufPool, FileRange};

/// READ data that follows a message on the wire, still in the file.
#[derive(Debug, Clone)]
pub(crate) struct FileTail {
    /// The file.
    pub(crate) handle: Arc<smbx_vfs::Handle>,
    /// Where the data starts.
    pub(crate) offset: u64,
    /// How many bytes the response promised.
    pub(crate) len: usize,
}

impl FileTail {
    /// Appends the data to `msg` (zeros for whatever the file no longer holds:
    /// the response already promised `len` bytes).
    pub(crate) fn read_into(&self, msg: &mut Vec<u8>) {
        self.append(msg, 0);
    }

    /// Appends the data from `at` on to `msg`, zeros for what the file no longer holds.
    fn append(&self, msg: &mut Vec<u8>, at: usize) {
        self.append_part(msg, at, self.len.saturating_sub(at));
    }

    /// Appends `len` bytes of the data from `at` to `msg`, zeros for what the file no
    /// longer holds.
    fn append_part(&self, msg: &mut Vec<u8>, at: usize, len: usize) {
        let start = msg.len();
        if self
            .handle
            .read_append(msg, len, self.offset + at as u64)
            .is_err()
        {
            msg.truncate(start);
        }
        msg.resize(start + len, 0);
    }

    /// The whole message in one buffer from `pool`: `room` bytes left free in front (for
    /// a TRANSFORM_HEADER), then `head` (header and fields), then the data, read straight
    /// in (never zero-filled first, never moved after).
    pub(crate) fn materialize(&self, head: &[u8], room: usize, pool: &BufPool) -> Vec<u8> {
        let mut buf = pool.take_spare(room + head.len() + self.len);
        buf.resize(room, 0);
        buf.extend_from_slice(head);
        self.read_into(&mut buf);
        buf
    }
}

impl smbx_transport::link::Tail for FileTail {
    fn len(&self) -> usize {
        self.len
    }

    fn send_to(&self, sock: BorrowedFd<'_>, at: usize) -> std::io::Result<usize> {
        self.send_part(sock, at, self.len.saturating_sub(at))
    }

    fn read_rest(&self, buf: &mut Vec<u8>, at: usize) {
        self.append(buf, at);
    }
}

/// The data as the source of an RDMA Write (an SMB Direct READ): soft-iWARP sends it
/// from the page cache into its socket between the FPDUs' headers.
impl smbx_transport::FileRange for FileTail {
    fn len(&self) -> usize {
        self.len
    }

    fn send_part(&self, sock: BorrowedFd<'_>, at: usize, n: usize) -> std::io::Result<usize> {
        let n = n.min(self.len.saturating_sub(at));
        self.handle.send_to(sock, self.offset + at as u64, n)
    }

    fn read_part(&self, buf: &mut Vec<u8>, at: usize, n: usize) {
        self.append_part(buf, at, n.min(self.len.saturating_sub(at)));
    }
}
