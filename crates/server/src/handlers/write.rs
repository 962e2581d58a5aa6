//! SMB2 WRITE ([MS-SMB2] 3.3.5.13): file writes (write-through honoured), pipe writes
//! into the in-process RPC endpoint. A large WRITE over TCP may arrive with its data
//! spliced into a pipe ([`Request::payload`]): it goes from there into the file
//! ([`write_spliced`]) without passing through memory.

use smbx_wire::rw::{encode_write_response, WriteRequest, CHANNEL_NONE, WRITEFLAG_WRITE_THROUGH};
use smbx_wire::{AccessMask, CreateOptions, FileAttributes, NtStatus};

use super::read::{check_lock_conflict, max_write, BLOCKING_THRESHOLD};
use super::{Ctx, HandlerResult, Request, Response};
use crate::state::{FileOpen, OpenKind};
use smbx_transport::splice::{Pipe, SplicedPayload};

/// Largest file size a write may reach (Windows MAXFILESIZE: 16 TiB - 64 KiB); writes
/// ending beyond it are INVALID_PARAMETER.
pub const MAX_FILE_SIZE: u64 = 0xfff_ffff_0000;

/// Writes starting at or beyond this offset check that a non-sparse file can grow
/// that far ([`check_space`]); ordinary writes skip the extra system calls.
pub const SPACE_CHECK_OFFSET: u64 = 1 << 30;

/// Windows allocates the range a write skips over in a non-sparse file, so growing
/// one beyond the free space of the volume is DISK_FULL (smb2.rw.invalid at
/// MAXFILESIZE - 1). Sparse files and streams grow freely.
fn check_space(f: &crate::state::FileOpen, end: u64) -> Result<(), NtStatus> {
    if f.handle.stream_name().is_some() {
        return Ok(());
    }
    let info = f.handle.stat()?;
    if info.attributes.contains(FileAttributes::SPARSE_FILE) || end <= info.size {
        return Ok(());
    }
    let free = f.vfs.fs_info()?.available_bytes;
    if end - info.size > free {
        return Err(NtStatus::DISK_FULL);
    }
    Ok(())
}

/// Least WRITE over SMB Direct whose data an RDMA Read brings straight into the file
/// ([`super::rdma::Channel::pull_file`]) rather than into a registered buffer
/// written out after. Measured (server CPU per request, old and new alternated seven
/// times, sequential writes at QD8 on loopback): 0.69x at 1 MiB, 1.00x at 512 KiB,
/// worse below (1.06x at 128 KiB, 1.24x at 64 KiB): the copy saved does not pay for
/// the splices and the reads of each FPDU's header on their own. From 512 KiB since
/// such a WRITE is also finished by the read loop once its data is in (no task of its
/// own to wake: `dispatch::PARK_MAX`): 512 KiB sequential WRITEs -o8 through
/// bench/direct-vs-tcp.sh, two alternated pairs: server cycles per byte 0.8 and 0.8
/// against 1.1 and 1.3 (TCP 0.7-0.9), SMB Direct/TCP MB/s 0.89 and 0.97 against 0.89
/// and 0.83; under SCHED_RR, 3 pairs: server futex per WRITE 0.01 against 0.13-0.24.
/// From 128 KiB since stop 37: parked, the sink pays there too (sequential WRITEs
/// -o8, one binary with an env toggle, fresh server per run, no SCHED_RR, loaded
/// machine, alternated): 256 KiB MB/s 995-1,509 against 850-1,032 (4 of 4 pairs),
/// server CPU per WRITE 74-92 against 104-121 us, futex 0.01 against 0.31-0.44;
/// 128 KiB 895-1,460 against 796-934 MB/s (3 of 3), 42-57 against 58-68 us.
/// 64 KiB stays with its buffer (spawned since stop 45, `dispatch::PARK_MAX`): the
/// sink there was mixed (two splices per WRITE for one copy saved).
pub const RDMA_SINK_MIN: usize = 128 * 1024;

/// Whether a WRITE of `len` bytes by RDMA Read to `handle` has its data brought
/// straight into the file ([`RDMA_SINK_MIN`]): over a link that `reads_files`, into a
/// file's data (a stream takes no splice). The sink may still find no pipe free
/// ([`super::rdma::Channel::file_sink`]).
pub(crate) fn sinks(
    len: usize,
    handle: &smbx_vfs::Handle,
    reads_files: impl FnOnce() -> bool,
) -> bool {
    len >= RDMA_SINK_MIN && handle.stream_name().is_none() && reads_files()
}

/// Whether a WRITE with `flags` to the open `f` waits for the disk once its data is
/// in: its own WRITE_THROUGH flag, or FILE_WRITE_THROUGH in the open's mode
/// ([`FileOpen::mode`], [MS-FSA] Open.Mode: as created, or as SET_INFO's
/// FileModeInformation set it since).
pub(crate) fn writes_through(flags: u32, f: &FileOpen) -> bool {
    flags & WRITEFLAG_WRITE_THROUGH != 0 || f.mode().contains(CreateOptions::FILE_WRITE_THROUGH)
}

/// Handles WRITE.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let w = match req.payload {
        Some(p) => WriteRequest::decode_split(req.msg, p.len())?,
        None => WriteRequest::decode(req.msg)?,
    };
    // The data that came with the message: in it, or spliced.
    let inline_len = w.data.len() + req.payload.map_or(0, |p| p.len());
    // Over an RDMA channel the data stays in the client's buffers: Length is 0 and
    // RemainingBytes says how much to RDMA-Read ([MS-SMB2] 2.2.21).
    let rdma_len = if w.channel == CHANNEL_NONE || inline_len > 0 {
        0
    } else {
        w.remaining_bytes
    };
    let length = w.length.max(rdma_len);
    if length > max_write(ctx) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.check_credit_charge(length as usize)?;
    let channel = super::rdma::decode(ctx, w.channel, w.channel_info, rdma_len)?;
    let invalidate = channel.as_ref().and_then(|c| c.invalidate);
    let res = write(ctx, req, &w, inline_len, rdma_len, channel).await;
    super::rdma::answer_invalidating(res, invalidate)
}

/// WRITE once its channel is known.
async fn write(
    ctx: &mut Ctx<'_>,
    req: &Request<'_>,
    w: &WriteRequest<'_>,
    inline_len: usize,
    rdma_len: u32,
    channel: Option<super::rdma::Channel>,
) -> HandlerResult {
    if channel.is_some() && inline_len > 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let open = ctx.lookup_open(w.file_id)?;
    match &open.kind {
        OpenKind::Pipe(_) if channel.is_some() => Err(NtStatus::INVALID_PARAMETER),
        OpenKind::Pipe(p) => {
            let gathered;
            let data = match req.payload {
                Some(sp) => {
                    gathered = sp.gather(w.data).map_err(NtStatus::from)?;
                    &gathered[..]
                }
                None => w.data,
            };
            let n = p
                .pipe
                .lock()
                .write(data)
                .map_err(|_| NtStatus::INVALID_PARAMETER)?;
            Ok(Response::ok(encode_write_response(n as u32)))
        }
        OpenKind::File(f) => {
            if f.is_dir {
                return Err(NtStatus::INVALID_DEVICE_REQUEST);
            }
            if !f
                .access
                .intersects(AccessMask::FILE_WRITE_DATA | AccessMask::FILE_APPEND_DATA)
            {
                return Err(NtStatus::ACCESS_DENIED);
            }
            // SMB2 has no write-to-end-of-file offset: -1 is just out of range.
            let offset = w.offset;
            if offset > i64::MAX as u64 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let data_len = inline_len.max(rdma_len as usize);
            if data_len == 0 {
                return Ok(Response::ok(encode_write_response(0)));
            }
            match offset.checked_add(data_len as u64) {
                Some(end) if end <= MAX_FILE_SIZE => {}
                _ => return Err(NtStatus::INVALID_PARAMETER),
            }
            check_lock_conflict(&open, offset, data_len as u64, true)?;
            if offset >= SPACE_CHECK_OFFSET {
                check_space(f, offset + data_len as u64)?;
            }
            let budget = match &channel {
                Some(ch) => Some(ch.reserve(data_len).await?),
                None => None,
            };
            let through = writes_through(w.flags, f);
            let handle = &f.handle;
            // SMB Direct: the RDMA Read's data goes from the link's socket into the
            // file (splice), when the link can and the file takes a splice; `None`
            // when it does not, or no pipe was to be had.
            let into_file = channel.as_ref().and_then(|ch| {
                sinks(data_len, handle, || ch.reads_files())
                    .then(|| ch.file_sink(handle, offset, data_len))
                    .flatten()
            });
            if channel.is_some() {
                // Run in the read loop's first poll, the WRITE is parked there once it
                // waits for its data, if it may (dispatch::direct_write_parks).
                crate::dispatch::park_when_waiting(crate::dispatch::direct_write_parks(
                    w,
                    into_file.is_some(),
                    through,
                ));
            }
            // A write breaks LEVEL_II oplocks / read leases of other opens to NONE
            // ([MS-FSA] 2.1.5.3); no acknowledgment is awaited. Then Windows
            // write-time semantics (state/file.rs WriteTimes). Before the data lands
            // when it lands as it arrives.
            let announce = || async {
                crate::breaks::break_level2(ctx.server, &f.file, f.entry_id).await;
                f.file
                    .times
                    .on_write(f.entry_id, smbx_wire::time::now_filetime(), || {
                        handle.stat().ok().map(|i| i.last_write_time)
                    });
            };
            let mut sunk = None;
            let mut pulled = None;
            match (&channel, into_file) {
                (Some(ch), Some(sink)) => {
                    announce().await;
                    sunk = Some(ch.pull_file(sink).await);
                }
                // Otherwise RDMA: pull the data from the client's buffers into a pooled
                // buffer.
                (Some(ch), None) => {
                    pulled = Some(ch.pull(data_len, offset).await?);
                    announce().await;
                }
                (None, _) => announce().await,
            }
            let spliced = req.payload;
            let sync = || -> Result<(), NtStatus> {
                if through && handle.stream_name().is_none() {
                    handle.file().sync_data().map_err(NtStatus::from)?;
                }
                Ok(())
            };
            let work = |data: &[u8]| -> Result<usize, NtStatus> {
                let n = match spliced {
                    Some(p) => write_spliced(handle, data, p, offset)?,
                    None => handle.write_at(data, offset)?,
                };
                sync()?;
                Ok(n)
            };
            // The payload is borrowed from the request: large writes leave the async
            // worker with block_in_place instead of being copied to the blocking pool.
            // A spliced payload is not: moving it from the pipe into the page cache is
            // one copy, like the writer's sendfile of a READ, and handing the worker's
            // core to another thread and back cost more than the copy (512 KiB writes:
            // three times the context switches, ~0.35 server cycles per byte). A
            // write-through one still leaves the worker: it waits for the disk. Nor is data
            // an RDMA Read pulled into a registered buffer or into the file (SMB Direct):
            // in memory already, as a spliced payload is.
            let in_memory = spliced.is_some() || pulled.is_some() || sunk.is_some();
            let big = data_len >= BLOCKING_THRESHOLD && (!in_memory || through);
            if big || through {
                // Run in the read loop's first poll (dispatch.rs, `completes_at_once`), a
                // WRITE that waits for the disk or leaves the worker goes on as a task of
                // its own first: the read loop keeps reading meanwhile.
                tokio::task::yield_now().await;
            }
            let run = |op: &mut dyn FnMut() -> Result<usize, NtStatus>| {
                if big
                    && tokio::runtime::Handle::current().runtime_flavor()
                        == tokio::runtime::RuntimeFlavor::MultiThread
                {
                    tokio::task::block_in_place(op)
                } else {
                    op()
                }
            };
            let n = match (&sunk, &pulled) {
                // The data is in the file already (the sink says if it refused a byte).
                (Some(r), _) => {
                    (*r)?;
                    run(&mut || sync().map(|()| data_len))?
                }
                // The data is in the registered payload buffer the RDMA Read filled,
                // from `at` on.
                (None, Some((b, at))) => {
                    let mut r = Err(NtStatus::INTERNAL_ERROR);
                    b.with(&mut |d| {
                        if let Some(d) = d.get(*at..*at + data_len) {
                            r = run(&mut || work(d));
                        }
                    });
                    r?
                }
                (None, None) => run(&mut || work(w.data))?,
            };
            drop(budget);
            ctx.server.metrics.data(true, ctx.conn.transport(), n);
            let mut resp = Response::ok(encode_write_response(n as u32));
            drop(pulled);
            if let Some(ch) = channel {
                resp.invalidate = ch.invalidate;
            }
            Ok(resp)
        }
    }
}

/// Writes a WRITE's data whose rest was spliced into a pipe, in order: `head` (the part
/// in the message), the pipe's bytes straight into the file, then the payload's tail.
/// A stream, or a file that refuses a splice, takes the rest from memory. The data is
/// in the file (its page cache) when this returns, as with [`smbx_vfs::Handle::write_at`].
fn write_spliced(
    handle: &smbx_vfs::Handle,
    head: &[u8],
    p: &SplicedPayload,
    offset: u64,
) -> Result<usize, NtStatus> {
    let mut n = 0;
    if !head.is_empty() {
        n += handle.write_at(head, offset)?;
    }
    n += write_pipe(handle, &p.pipe, offset + n as u64, p.pipe.len())?;
    if !p.tail.is_empty() {
        n += handle.write_at(&p.tail, offset + n as u64)?;
    }
    Ok(n)
}

/// Writes the `len` bytes `pipe` holds into the file at `at`, spliced straight into
/// it; a stream, or a file that refuses a splice, takes them from memory. Returns the
/// bytes written (the pipe gives up those it spliced).
pub(crate) fn write_pipe(
    handle: &smbx_vfs::Handle,
    pipe: &Pipe,
    at: u64,
    len: usize,
) -> Result<usize, NtStatus> {
    match handle.write_from_pipe(pipe.reader(), at, len) {
        Ok(m) => {
            pipe.consumed(m);
            Ok(m)
        }
        Err(NtStatus::NOT_SUPPORTED) => {
            let mut buf = Vec::with_capacity(len);
            pipe.read_into(&mut buf).map_err(NtStatus::from)?;
            handle.write_at(&buf, at)
        }
        Err(e) => Err(e),
    }
}
