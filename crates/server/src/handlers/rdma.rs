//! The RDMA channels of READ and WRITE over SMB Direct ([MS-SMB2] 3.3.5.12,
//! 3.3.5.13; [MS-SMBD] 3.1.4.5): the channel info is a list of Buffer Descriptor V1
//! naming the client's registered buffers; the server RDMA-Writes READ data into
//! them and RDMA-Reads WRITE data from them, and with RDMA_V1_INVALIDATE answers
//! with Send with Invalidate of the first descriptor's token.

use smbx_transport::placement::{line_pad, CACHE_LINE};
use smbx_transport::{BufferDescriptorV1, FileRange, FileSink, RegisteredBuf};
use smbx_wire::rw::{CHANNEL_NONE, CHANNEL_RDMA_V1, CHANNEL_RDMA_V1_INVALIDATE};
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use std::sync::Arc;

use super::{Ctx, HandlerResult, Response};
use crate::conn::sink::WriteSink;
use crate::conn::{Connection, DirectIo};
use crate::metrics::RdmaOp;

/// A decoded, checked RDMA channel of one request.
pub struct Channel {
    /// The connection (it runs over SMB Direct).
    conn: Arc<Connection>,
    /// The client's buffers, in order.
    pub descriptors: Vec<BufferDescriptorV1>,
    /// The client STag to invalidate with the response (RDMA_V1_INVALIDATE).
    pub invalidate: Option<u32>,
}

/// Decodes a request's Channel and channel info: `None` for SMB2_CHANNEL_NONE;
/// INVALID_PARAMETER for any channel before 3.0, an RDMA channel off SMB Direct, RDMA_V1_INVALIDATE
/// before 3.0.2, the RDMA transform (not offered), an unknown channel, or
/// descriptors that cannot hold `len` bytes.
pub fn decode(
    ctx: &Ctx<'_>,
    channel: u32,
    info: &[u8],
    len: u32,
) -> Result<Option<Channel>, NtStatus> {
    match channel {
        CHANNEL_NONE => return Ok(None),
        // Channels exist from SMB 3.0 on (the field is reserved before).
        _ if ctx.dialect() < Dialect::SMB3_0 => return Err(NtStatus::INVALID_PARAMETER),
        CHANNEL_RDMA_V1 => {}
        CHANNEL_RDMA_V1_INVALIDATE if ctx.dialect() >= Dialect::SMB3_0_2 => {}
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    let io = ctx.conn.direct().ok_or(NtStatus::INVALID_PARAMETER)?;
    let descriptors = BufferDescriptorV1::decode_list(info)
        .map_err(NtStatus::malformed(NtStatus::INVALID_PARAMETER))?;
    if BufferDescriptorV1::total_length(&descriptors) < u64::from(len)
        || len > io.link.params().max_read_write_size
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let invalidate = (channel == CHANNEL_RDMA_V1_INVALIDATE).then(|| descriptors[0].token);
    Ok(Some(Channel {
        conn: ctx.conn.clone(),
        descriptors,
        invalidate,
    }))
}

impl Channel {
    /// The connection's SMB Direct side.
    pub fn io(&self) -> &DirectIo {
        self.conn
            .direct()
            .expect("decode checked the connection runs over SMB Direct")
    }

    /// Holds `len` bytes of the connection's RDMA buffer budget (bounds the memory
    /// that in-flight RDMA transfers of one connection can pin).
    pub async fn reserve(&self, len: usize) -> Result<tokio::sync::SemaphorePermit<'_>, NtStatus> {
        let n = u32::try_from(len.max(1)).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        self.io()
            .rdma_budget
            .acquire_many(n)
            .await
            .map_err(|_| NtStatus::CONNECTION_DISCONNECTED)
    }

    /// A buffer of `len` bytes from the connection's registered payload pool
    /// (registered once, local access only; back to the pool when dropped).
    pub fn payload(&self, len: usize) -> Result<Box<dyn RegisteredBuf>, NtStatus> {
        self.io().link.payload(len).map_err(fail)
    }

    /// A buffer of [`Channel::payload`] for `len` bytes of the file at `offset`, and
    /// where in it they go: at `offset`'s place in a cache line (placement::line_pad),
    /// so the kernel's copy between the buffer and the page cache (a WRITE's pwrite, a
    /// READ's pread) runs with source and destination aligned alike; the pool's regions
    /// have the room (payload::SLACK) without taking a larger class. A device whose
    /// largest region has no room beyond the data: at the start.
    pub fn payload_for(
        &self,
        len: usize,
        offset: u64,
    ) -> Result<(Box<dyn RegisteredBuf>, usize), NtStatus> {
        Ok(match self.payload(len + (CACHE_LINE - 1)) {
            Ok(buf) => {
                let mut start = 0;
                buf.with(&mut |b| start = b.as_ptr() as usize);
                (buf, line_pad(start, offset))
            }
            Err(_) => (self.payload(len)?, 0),
        })
    }

    /// RDMA-Writes `len` bytes of `buf` (a [`Channel::payload_for`]) from `at` on into the
    /// client's buffers; returns once the Writes are posted, without waiting for
    /// their completion (the READ response, sent after, reaches the client after the
    /// data: RDMAP orders a Send behind the RDMA Writes posted before it); `buf` and
    /// the `budget` of [`Channel::reserve`] are kept until the Writes complete. A
    /// Write that fails breaks the connection.
    pub async fn push_posted(
        &self,
        buf: Box<dyn RegisteredBuf>,
        at: usize,
        len: usize,
        budget: tokio::sync::SemaphorePermit<'_>,
    ) -> Result<(), NtStatus> {
        let keep = Budget {
            conn: Arc::downgrade(&self.conn),
            n: budget.num_permits(),
        };
        budget.forget();
        self.io()
            .link
            .rdma_write_posted(
                buf,
                at as u64,
                len as u64,
                &self.descriptors,
                Some(Box::new(keep)),
            )
            .await
            .map_err(fail)?;
        self.conn.server.metrics.rdma(RdmaOp::Write, len);
        Ok(())
    }

    /// Whether [`Channel::push_file`] works on this connection (soft-iWARP).
    pub fn writes_files(&self) -> bool {
        self.io().link.writes_files()
    }

    /// RDMA-Writes the first `len` bytes of the file range `src` into the client's
    /// buffers, from the file (sendfile) without copying them into a buffer; returns
    /// once they are posted (the READ response goes right behind them, as with
    /// [`Channel::push_posted`]), nothing to keep: the link holds `src` until sent.
    pub async fn push_file(&self, src: Arc<dyn FileRange>, len: usize) -> Result<(), NtStatus> {
        self.io()
            .link
            .rdma_write_file(src, len as u64, &self.descriptors)
            .await
            .map_err(fail)?;
        self.conn.server.metrics.rdma(RdmaOp::Write, len);
        Ok(())
    }

    /// Whether [`Channel::pull_file`] works on this connection (soft-iWARP with CRC
    /// off).
    pub fn reads_files(&self) -> bool {
        self.io().link.reads_files()
    }

    /// A sink that takes `len` bytes into `handle` at `offset` as they arrive, for
    /// [`Channel::pull_file`]; `None` when no pipe is to be had (too many WRITEs of the
    /// connection under way): the caller [pulls](Channel::pull) instead.
    pub(crate) fn file_sink(
        &self,
        handle: &Arc<smbx_vfs::Handle>,
        offset: u64,
        len: usize,
    ) -> Option<Arc<WriteSink>> {
        WriteSink::new(handle.clone(), offset, len, &self.io().pipes).map(Arc::new)
    }

    /// RDMA-Reads the client's buffers into the file of `sink` ([`Channel::file_sink`]):
    /// the data goes from the link's socket into the file (splice), not through a
    /// buffer. A file that refuses a byte fails with its status, the connection goes
    /// on.
    pub(crate) async fn pull_file(&self, sink: Arc<WriteSink>) -> Result<(), NtStatus> {
        let len = sink.len();
        let r = self
            .io()
            .link
            .rdma_read_file(sink.clone(), len as u64, &self.descriptors)
            .await;
        if let Some(st) = sink.error() {
            return Err(st);
        }
        r.map_err(fail)?;
        self.conn.server.metrics.rdma(RdmaOp::Read, len);
        Ok(())
    }

    /// RDMA-Reads `len` bytes of the client's buffers into a buffer of the
    /// connection's registered payload pool, for the file at `offset`: the data
    /// starts at the returned position in the buffer ([`Channel::payload_for`]).
    pub async fn pull(
        &self,
        len: usize,
        offset: u64,
    ) -> Result<(Box<dyn RegisteredBuf>, usize), NtStatus> {
        let (buf, at) = self.payload_for(len, offset)?;
        self.io()
            .link
            .rdma_read(&*buf, at as u64, len as u64, &self.descriptors)
            .await
            .map_err(fail)?;
        self.conn.server.metrics.rdma(RdmaOp::Read, len);
        Ok((buf, at))
    }
}

/// Permits of a connection's RDMA budget that a posted transfer holds until it
/// completes: given back when dropped (nothing to give back to a connection that
/// is gone).
struct Budget {
    conn: std::sync::Weak<Connection>,
    n: usize,
}

impl Drop for Budget {
    fn drop(&mut self) {
        if let Some(io) = self.conn.upgrade().as_deref().and_then(Connection::direct) {
            io.rdma_budget.add_permits(self.n);
        }
    }
}

/// The most data an inline READ response carries over a link whose messages
/// hold at most `max_message` bytes (SMB Direct: the peer's MaxFragmentedSize):
/// the SMB2 header, the READ response's 16 bytes and, when the response is
/// sealed, the TRANSFORM_HEADER come off. Linux cifs asks for exactly this much
/// when it signs over SMB Direct (rsize = MaxFragmentedSize − 112 − 52).
pub fn inline_read_limit(max_message: usize, sealed: bool) -> usize {
    let transform = if sealed {
        smbx_security::transform::TRANSFORM_HEADER_LEN
    } else {
        0
    };
    max_message.saturating_sub(smbx_wire::HEADER_SIZE + READ_RESPONSE_LEN + transform)
}

/// The READ response's fixed part (StructureSize 17 without its data byte).
const READ_RESPONSE_LEN: usize = 16;

/// A failed RDMA transfer: the provider terminates the connection on protocol
/// errors; the request itself fails.
fn fail(e: smbx_transport::DirectError) -> NtStatus {
    tracing::debug!(error = %e, "rdma transfer failed");
    NtStatus::INVALID_PARAMETER
}

/// The answer to a READ or WRITE whose channel asked for remote invalidation
/// (RDMA_V1_INVALIDATE): an error goes out with Send with Invalidate of the client's
/// STag too, as every response to such a request does, since the client counts on the
/// server invalidating its registration whatever the outcome (Linux cifs.ko).
pub fn answer_invalidating(res: HandlerResult, invalidate: Option<u32>) -> HandlerResult {
    match (res, invalidate) {
        (Err(status), Some(stag)) => {
            let mut r = Response::error(status);
            r.invalidate = Some(stag);
            Ok(r)
        }
        (res, _) => res,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 MiB message holds a READ of 1 MiB − 80 bytes, 52 fewer when sealed;
    /// what cifs asks for when signing (1 MiB − 164) fits either way.
    #[test]
    fn inline_reads_fill_the_message_exactly() {
        let max = 1 << 20;
        assert_eq!(inline_read_limit(max, false), max - 80);
        assert_eq!(inline_read_limit(max, true), max - 132);
        assert!(max - 164 <= inline_read_limit(max, true));
        assert_eq!(inline_read_limit(100, true), 0);
    }

    /// An error to a request with RDMA_V1_INVALIDATE still invalidates the client's
    /// STag; a success keeps what the handler set; without the channel, errors stay
    /// errors.
    #[test]
    fn errors_invalidate_when_the_channel_asks() {
        let r = answer_invalidating(Err(NtStatus::END_OF_FILE), Some(0x1234)).unwrap();
        assert_eq!(
            (r.status, r.invalidate),
            (NtStatus::END_OF_FILE, Some(0x1234))
        );
        assert_eq!(r.body, Response::error(NtStatus::END_OF_FILE).body);
        let ok = answer_invalidating(Ok(Response::ok(vec![1; 16])), Some(7)).unwrap();
        assert_eq!((ok.status, ok.invalidate), (NtStatus::SUCCESS, None));
        assert_eq!(
            answer_invalidating(Err(NtStatus::ACCESS_DENIED), None).err(),
            Some(NtStatus::ACCESS_DENIED)
        );
    }
}
