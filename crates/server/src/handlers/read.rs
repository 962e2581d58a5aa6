//! SMB2 READ ([MS-SMB2] 3.3.5.12): file data read straight into the response body,
//! pipe reads from the in-process RPC endpoint.

use std::sync::Arc;

use smbx_security::transform::TRANSFORM_HEADER_LEN;
use smbx_wire::rw::{put_read_response_header, ReadRequest};
use smbx_wire::Dialect;
use smbx_wire::{AccessMask, NtStatus, HEADER_SIZE};

use super::{Ctx, HandlerResult, Request, Response};
use crate::conn::tail::FileTail;
use crate::metrics::Transport;
use crate::state::{Open, OpenKind};

/// STATUS_PIPE_EMPTY: a read found no data in the pipe.
pub const STATUS_PIPE_EMPTY: NtStatus = NtStatus(0xC000_00D9);
/// I/O at least this large leaves the async worker (spawn_blocking).
pub const BLOCKING_THRESHOLD: usize = 64 * 1024;
/// Reads at least this large whose data is in the page cache go from the file
/// to the socket (sendfile) over TCP; smaller ones are copied.
pub const ZERO_COPY_MIN: usize = 16 * 1024;
/// The largest READ by RDMA whose data, when in the page cache, is read on the
/// async worker itself (about 100 µs of copying); larger ones go to the blocking
/// pool, so a worker is never held for the milliseconds an 8 MiB copy takes.
pub const RDMA_IN_PLACE_MAX: usize = 1024 * 1024;

/// [MS-SMB2] 3.3.5.12: a READ that returned no data for a non-empty request, or
/// fewer bytes than its MinimumCount, fails with STATUS_END_OF_FILE.
fn enough_read(n: usize, len: usize, min: usize) -> Result<(), NtStatus> {
    if (n == 0 && len > 0) || n < min {
        return Err(NtStatus::END_OF_FILE);
    }
    Ok(())
}

/// The response to a READ whose `n` bytes went by RDMA Write (none inline), sent as
/// Send with Invalidate of `invalidate` when the client asked for it.
fn rdma_read_response(n: usize, invalidate: Option<u32>) -> Response {
    let mut h = [0u8; 16];
    put_read_response_header(&mut h, 0, n as u32);
    let mut resp = Response::ok(h.to_vec());
    resp.invalidate = invalidate;
    resp
}

/// Least READ over an RDMA channel sent from the file (sendfile between the
/// FPDUs' headers) rather than read into a registered buffer. On loopback
/// soft-iWARP, sequential reads QD8 with the server on one CPU and the client on
/// the other (stop 31, loaded machine, three rounds alternated): at 128 KiB the
/// file path took 0.60-0.61x the server's CPU per READ, 0.91-0.96x the client's and
/// 0.51-0.86x the wall time. Stop 30 measured 256 KiB 1.3-1.6x and 512 KiB ~1.4x
/// faster. At 64 KiB it lost while its last 4 KiB went by a sendfile of their own
/// (stop 34: MB/s lower in 12 of 12 pairs); with that tail read in with the
/// headers around it (smbx-rdma's soft-iWARP engine, `FILE_COPY_MAX`), one
/// sendfile of 60 KiB a READ, it won (stop 35, in the read loop: MB/s higher in 11
/// of 14 alternated pairs, server CPU per READ lower in 12 of 14).
pub(crate) const RDMA_FILE_MIN: usize = 64 * 1024;

/// Least READ over an RDMA channel spawned off the read loop rather than run in
/// its first poll (`dispatch::direct_read_in_place`): past [`RDMA_IN_PLACE_MAX`],
/// whose copy would hold the read loop's worker for milliseconds. Below it a READ
/// sent from the file runs in place: since one FPDU carries a 512 KiB RDMA Write
/// between smbx ends, a spawned one only added a wake of the other worker and back
/// per READ (s39, quiet machine, bbr, unpinned, 512 KiB QD8, 7 alternated pairs
/// against 128 KiB: MB/s higher in 6, 4,131-5,010 against 3,765-4,433; server CPU
/// per READ lower in 6, 77-104 against 97-121 us; per READ 0 eventfd writes and
/// futex calls against 0.15-0.34 and 0.19-0.24, context switches 0.12-0.14 against
/// 0.67-1.03).
pub(crate) const RDMA_SPAWN_MIN: usize = RDMA_IN_PLACE_MAX + 1;

/// The negotiated MaxReadSize.
pub fn max_read(ctx: &Ctx<'_>) -> u32 {
    if ctx.dialect() <= Dialect::SMB2_0_2 {
        65536
    } else {
        ctx.config().global.smb2_max_read
    }
}

/// The negotiated MaxWriteSize.
pub fn max_write(ctx: &Ctx<'_>) -> u32 {
    if ctx.dialect() <= Dialect::SMB2_0_2 {
        65536
    } else {
        ctx.config().global.smb2_max_write
    }
}

/// Runs blocking file work: on the blocking pool when `big`, inline otherwise.
pub async fn run_blocking<T: Send + 'static>(
    big: bool,
    f: impl FnOnce() -> Result<T, NtStatus> + Send + 'static,
) -> Result<T, NtStatus> {
    if big {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|_| NtStatus::INTERNAL_ERROR)?
    } else {
        f()
    }
}

/// Hook for byte-range lock conflicts ([MS-SMB2] 3.3.5.12: FILE_LOCK_CONFLICT when the
/// range is locked by another open): see `state::locks`.
pub fn check_lock_conflict(
    open: &Open,
    offset: u64,
    len: u64,
    write: bool,
) -> Result<(), NtStatus> {
    match open.as_file() {
        Some(f) => crate::state::locks::check_io(&f.file, f.entry_id, offset, len, write),
        None => Ok(()),
    }
}

/// Handles READ.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let r = ReadRequest::decode(req.msg)?;
    if r.length > max_read(ctx) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.check_credit_charge(r.length as usize)?;
    let channel = super::rdma::decode(ctx, r.channel, r.channel_info, r.length)?;
    let invalidate = channel.as_ref().and_then(|c| c.invalidate);
    super::rdma::answer_invalidating(read(ctx, &r, channel).await, invalidate)
}

/// READ once its channel is known.
async fn read(
    ctx: &mut Ctx<'_>,
    r: &ReadRequest<'_>,
    channel: Option<super::rdma::Channel>,
) -> HandlerResult {
    if channel.is_none() {
        if let Some(max) = ctx.conn.max_message() {
            // Inline over a link that limits messages (SMB Direct: one reassembled
            // message), the response must fit.
            if r.length as usize > super::rdma::inline_read_limit(max, ctx.encrypted) {
                return Err(NtStatus::INVALID_PARAMETER);
            }
        }
    }
    let open = ctx.lookup_open(r.file_id)?;
    let len = r.length as usize;
    match &open.kind {
        OpenKind::Pipe(_) if channel.is_some() => Err(NtStatus::INVALID_PARAMETER),
        OpenKind::Pipe(p) => {
            let (data, more) = p.pipe.lock().read(len);
            if data.is_empty() && len > 0 {
                return Err(STATUS_PIPE_EMPTY);
            }
            let mut body = vec![0u8; 16 + data.len()];
            let mut h = [0u8; 16];
            put_read_response_header(&mut h, data.len() as u32, 0);
            body[..16].copy_from_slice(&h);
            body[16..].copy_from_slice(&data);
            Ok(if more {
                Response::with_status(NtStatus::BUFFER_OVERFLOW, body)
            } else {
                Response::ok(body)
            })
        }
        OpenKind::File(f) => {
            if f.is_dir {
                return Err(NtStatus::INVALID_DEVICE_REQUEST);
            }
            if !f
                .access
                .intersects(AccessMask::FILE_READ_DATA | AccessMask::FILE_EXECUTE)
            {
                return Err(NtStatus::ACCESS_DENIED);
            }
            // [MS-FSA] 2.1.5.2: offsets beyond the signed 64-bit range are invalid.
            match r.offset.checked_add(r.length as u64) {
                Some(end) if end <= i64::MAX as u64 => {}
                _ => return Err(NtStatus::INVALID_PARAMETER),
            }
            check_lock_conflict(&open, r.offset, r.length as u64, false)?;
            let handle = f.handle.clone();
            let min = r.minimum_count as usize;
            let offset = r.offset;
            if let Some(ch) = channel {
                // Large data in the page cache goes from the file into the socket
                // (sendfile) on a link whose provider writes files (soft-iWARP): no
                // copy into a registered buffer, none from there into the socket.
                if len >= RDMA_FILE_MIN && ch.writes_files() {
                    if let Some(n) = handle.cached_len(offset, len as u64) {
                        let n = n as usize;
                        enough_read(n, len, min)?;
                        let src = FileTail {
                            handle,
                            offset,
                            len: n,
                        };
                        ch.push_file(Arc::new(src), n).await?;
                        ctx.server.metrics.data(false, Transport::SmbDirect, n);
                        f.position
                            .store(offset + n as u64, std::sync::atomic::Ordering::Relaxed);
                        return Ok(rdma_read_response(n, ch.invalidate));
                    }
                }
                // Read straight into a registered buffer of the connection's payload
                // pool, RDMA-Write it into the client's buffers.
                let budget = ch.reserve(len).await?;
                // The data goes `at` bytes in: at the file offset's place in a cache
                // line, so the read's copy from the page cache runs at full speed.
                let (buf, at) = ch.payload_for(len, offset)?;
                // Data in the page cache is read here at once (it cannot wait on the
                // disk): no hop to the blocking pool and back. The pool reads the rest,
                // and reads too large to copy on the worker.
                let mut cached = Ok(None);
                if len <= RDMA_IN_PLACE_MAX {
                    buf.with_mut(&mut |b| {
                        cached = handle.read_at_cached(&mut b[at..at + len], offset)
                    });
                }
                let (buf, n) = match cached? {
                    Some(n) => (buf, n),
                    None => {
                        // Run in the read loop's first poll (dispatch.rs,
                        // `completes_at_once`), a read that may wait for the disk goes on
                        // as a task of its own first.
                        if len < BLOCKING_THRESHOLD {
                            tokio::task::yield_now().await;
                        }
                        run_blocking(len >= BLOCKING_THRESHOLD, move || {
                            let mut read = Ok(0);
                            buf.with_mut(&mut |b| {
                                read = handle.read_at(&mut b[at..at + len], offset)
                            });
                            Ok((buf, read?))
                        })
                        .await?
                    }
                };
                enough_read(n, len, min)?;
                // The response goes out behind the Writes without waiting for them.
                ch.push_posted(buf, at, n, budget).await?;
                ctx.server.metrics.data(false, Transport::SmbDirect, n);
                f.position
                    .store(offset + n as u64, std::sync::atomic::Ordering::Relaxed);
                return Ok(rdma_read_response(n, ch.invalidate));
            }
            // The response is built in one buffer: header room, READ
            // response fields, then the data. Over TCP, data already in the
            // page cache is not read here at all: the link sends it from the
            // file after the response (conn::tail, sendfile).
            const DATA: usize = HEADER_SIZE + 16;
            if ctx.conn.sends_file_tails() && len >= ZERO_COPY_MIN {
                if let Some(n) = handle.cached_len(offset, len as u64) {
                    let n = n as usize;
                    enough_read(n, len, min)?;
                    f.position
                        .store(offset + n as u64, std::sync::atomic::Ordering::Relaxed);
                    let tail = FileTail {
                        handle,
                        offset,
                        len: n,
                    };
                    let mut h = [0u8; 16];
                    put_read_response_header(&mut h, n as u32, 0);
                    let mut msg = vec![0u8; DATA];
                    msg[HEADER_SIZE..].copy_from_slice(&h);
                    ctx.server.metrics.data(false, Transport::Tcp, n);
                    return Ok(Response::ok_with_tail(msg, tail));
                }
            }
            // A response to be sealed keeps room for its TRANSFORM_HEADER in
            // front, so it is encrypted where the data was read (no copy).
            let front = if ctx.encrypted {
                TRANSFORM_HEADER_LEN
            } else {
                0
            };
            let finish = move |mut msg: Vec<u8>, n: usize| {
                enough_read(n, len, min)?;
                let mut h = [0u8; 16];
                put_read_response_header(&mut h, n as u32, 0);
                msg[front + HEADER_SIZE..front + DATA].copy_from_slice(&h);
                Ok(msg)
            };
            let mut msg = Vec::with_capacity(front + DATA + len);
            msg.resize(front + DATA, 0);
            // A small read of data in the page cache is done here at once (it cannot wait
            // on the disk), so a READ run in the read loop's first poll (dispatch.rs,
            // `completes_at_once`) completes there. One that would wait yields first: run
            // in place, it goes on as a task of its own (the read loop keeps reading), and
            // reads there, where waiting is fine.
            let cached = if len < BLOCKING_THRESHOLD {
                handle.read_append_cached(&mut msg, len, offset)?
            } else {
                None
            };
            let msg = match cached {
                Some(n) => finish(msg, n)?,
                None => {
                    if len < BLOCKING_THRESHOLD {
                        tokio::task::yield_now().await;
                    }
                    run_blocking(len >= BLOCKING_THRESHOLD, move || {
                        let n = handle.read_append(&mut msg, len, offset)?;
                        finish(msg, n)
                    })
                    .await?
                }
            };
            // FilePositionInformation follows reads (as Samba does).
            let n = (msg.len() - front - DATA) as u64;
            ctx.server
                .metrics
                .data(false, ctx.conn.transport(), n as usize);
            f.position
                .store(offset + n, std::sync::atomic::Ordering::Relaxed);
            Ok(Response::ok_with_room(msg, front))
        }
    }
}
