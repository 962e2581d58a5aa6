//! Command routing and compounding ([MS-SMB2] 3.3.5.2).
//!
//! A received frame is unsealed if it is a TRANSFORM, split into compound members
//! (NextCommand validated), charged against the sequence window in arrival order,
//! then processed: NEGOTIATE and SESSION_SETUP inline (their order matters for the
//! preauth hash), everything else in a task of its own so I/O overlaps.
//!
//! Related members ([MS-SMB2] 3.3.5.2.7.2) take SessionId and TreeId from the previous
//! member — the ones it was found to use, or none if its session/tree check failed (a
//! related member without a valid session gets STATUS_INVALID_PARAMETER, as Windows
//! and Samba) — and FileId through [`Ctx::resolve_file_id`]. Only a failed CREATE
//! passes its status on to the related members that use its FileId; any other failed
//! member leaves the FileId in place, so e.g. CREATE + SET_INFO + CLOSE still closes.
//! An operation that would go async in the middle of a compound fails with
//! STATUS_INTERNAL_ERROR, except CREATE (waiting for an oplock break), which is awaited.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use smbx_transport::splice::SplicedPayload;
use smbx_wire::compound::{self, Member, Related};
use smbx_wire::header::{COMPRESSION_PROTOCOL_ID, PROTOCOL_ID, TRANSFORM_PROTOCOL_ID};
use smbx_wire::rw::{ReadRequest, WriteRequest, CHANNEL_NONE};
use smbx_wire::Dialect;
use smbx_wire::{smb1, Command, Header, InMessage, NtStatus};
use tokio::sync::OwnedSemaphorePermit;

use crate::conn::Connection;
use crate::handlers::{self, Ctx, HandlerResult, Request, Response};
use crate::respond::{self, OutMember};
use crate::security;
use crate::state::session::SessionPhase;
use crate::state::{FileId, ServerState, Session};

/// Most members accepted in one compound.
pub const MAX_COMPOUND: usize = 128;

/// What the read loop should do next.
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// Drop the connection.
    Disconnect(&'static str),
}

/// Requests the read loop polls itself once their first poll (in the read loop) waited
/// (their handler asked for it in that poll: [`park_when_waiting`]), instead of
/// spawning a task for each: `serve.rs` polls them beside its next receive, so a WRITE
/// waiting for its RDMA Read's data is finished (written, answered) by the read loop,
/// woken by the completion as by the next request from the same delivery, with no
/// task to spawn, schedule and wake on the other worker. Before
/// the read loop waits for anything else (budget, a NEGOTIATE or SESSION_SETUP run in
/// place) and when it ends, they are [spilled](spill) into tasks of their own. Each is
/// polled again only when it was woken, and pushing one does not wake the read loop
/// (see [`smbx_task::woken_set`]: `FuturesUnordered`'s wake of its own task was a yield
/// of the connection's task, which it shares with the SMB Direct driver).
pub(crate) type Parked = smbx_task::WokenSet<ParkedRequest>;

/// A parked request: its future, to run to its end.
pub(crate) type ParkedRequest = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Hands every parked request to a task of its own (before the read loop waits on
/// anything else, and when it ends: a transfer under way keeps its buffer).
pub(crate) fn spill(parked: &mut Parked) {
    for f in parked.drain() {
        tokio::spawn(f);
    }
}

/// A received (and unsealed) compound chain.
pub(crate) struct Chain {
    /// The buffer the chain arrived in (it may start past the buffer's first byte:
    /// SMB Direct's header is left in place); members' ranges are in it.
    pub buf: Vec<u8>,
    pub members: Vec<Member>,
    /// SessionId of the TRANSFORM header if the chain arrived encrypted.
    pub encrypted: Option<u64>,
    /// The chain's share of the connection's in-flight budget, released once its
    /// responses are written.
    pub permit: Option<OwnedSemaphorePermit>,
    /// A lone WRITE's data spliced from the socket (what `buf` lacks of it).
    pub payload: Option<SplicedPayload>,
}

/// Handles one frame from the read loop.
pub(crate) async fn on_frame(
    conn: &Arc<Connection>,
    frame: InMessage,
    payload: Option<SplicedPayload>,
    permit: OwnedSemaphorePermit,
    parked: &mut Parked,
) -> Flow {
    conn.server.metrics.network(
        crate::metrics::Direction::In,
        conn.transport(),
        frame.len() + payload.as_ref().map_or(0, |p| p.len()),
    );
    let proto = frame.get(..4);
    if smb1::is_smb1(&frame) {
        spill(parked);
        return handlers::negotiate::smb1(conn, &frame).await;
    }
    let (plain, encrypted) = if proto == Some(&TRANSFORM_PROTOCOL_ID[..]) {
        if conn.dialect() < Dialect::SMB3_0 {
            return Flow::Disconnect("TRANSFORM before a 3.x dialect");
        }
        let unsealed = security::unseal(conn, &frame);
        conn.server.frames.recycle(frame.into_parts().0);
        match unsealed {
            Ok((p, sid)) => (InMessage::from(p), Some(sid)),
            Err(_) => return Flow::Disconnect("undecryptable TRANSFORM"),
        }
    } else if proto == Some(&PROTOCOL_ID[..]) {
        (frame, None)
    } else if proto == Some(&COMPRESSION_PROTOCOL_ID[..]) {
        return Flow::Disconnect("compression was not negotiated");
    } else {
        return Flow::Disconnect("unknown protocol id");
    };
    let members = match split_chain(&plain) {
        Ok(m) => m,
        Err(why) => return Flow::Disconnect(why),
    };
    // The chain stays where it arrived: its members' ranges in the buffer.
    let (plain, start) = plain.into_parts();
    let members = at_start(members, start);
    if let Err(why) = charge_credits(conn, &members) {
        return Flow::Disconnect(why);
    }
    // The responses' share of the budget is taken before the chain runs; while
    // earlier responses wait to be written this waits too, and so does the read
    // loop (backpressure on a client that does not read its socket).
    let permit = match reply_bytes(conn, &plain, &members) {
        0 => permit,
        bytes if bytes + permit.num_permits() > conn.budget_capacity() => {
            return Flow::Disconnect("responses would exceed the connection's budget")
        }
        bytes => match match conn.reserve(bytes).now_or_never() {
            Some(p) => p,
            None => {
                spill(parked);
                conn.reserve(bytes).await
            }
        } {
            Some(more) => {
                let mut permit = permit;
                permit.merge(more);
                permit
            }
            None => return Flow::Disconnect("closed by server"),
        },
    };
    let first = members[0].header.cmd();
    // A WRITE whose data was spliced (lone, plain) completes on its first poll too: its
    // data goes from the pipe into the page cache in place, as a READ's goes out.
    let inline =
        payload.is_some() || completes_at_once(conn, &plain, &members, encrypted.is_some());
    let chain = Chain {
        buf: plain,
        members,
        encrypted,
        permit: Some(permit),
        payload,
    };
    let ticket = conn.start_order.ticket();
    if matches!(first, Some(Command::Negotiate | Command::SessionSetup)) {
        spill(parked);
        let c = conn.clone();
        let chain = std::pin::pin!(process_chain(c, chain));
        conn.start_order.run(ticket, chain).await;
    } else {
        let conn = conn.clone();
        let task = async move {
            let c = conn.clone();
            let chain = std::pin::pin!(process_chain(c, chain));
            conn.start_order.run(ticket, chain).await
        };
        // Not in the connection's span: entering it at every poll of every request task
        // cost ~15% of the server's cycles at 4 KiB QD32. A request's log lines name the
        // connection and client themselves (`conn`, `client`).
        if inline {
            // Polled once here; only if it waits does it go on: parked when it asked
            // to be in that poll, else as a task (polled again there with its own waker).
            let mut task = Box::pin(task);
            match first_poll(task.as_mut()) {
                None => {}
                Some(true) => parked.push(task),
                Some(false) => {
                    tokio::spawn(task);
                }
            }
        } else {
            tokio::spawn(task);
        }
    }
    Flow::Continue
}

/// Whether a chain is a lone plain READ or WRITE over a link that sends file tails
/// (Direct TCP): it usually completes on its first poll (`handlers::read`: data in the
/// page cache is sent from the file by the link, or, below ZERO_COPY_MIN, read at once
/// with a read that never waits for the disk; `handlers::write`: the data copied into
/// the page cache; the response queued for the writer), so the read loop runs it in
/// place, with no task of its own to spawn, schedule and wake on the other worker. A
/// READ whose data must come from the disk, and a WRITE that waits for it (write-through)
/// or leaves the worker (large, not spliced), yield first and go on as a task. Sealed
/// and signed chains (their CPU work runs on both workers at once as tasks) and
/// compounds are spawned as before. Over SMB Direct the same holds for a READ whose
/// data goes inline (no RDMA channel: `handlers::read` reads a small one in the page
/// cache at once) or is copied for its RDMA Write ([`direct_read_in_place`]), and for
/// every WRITE: one whose data moves by RDMA posts its RDMA
/// Read in this first poll and goes on as a task only then, to wait for the data.
/// Posting it from the read loop saves spawning the task, and a wake, before the
/// transfer starts (64 KiB sequential WRITEs at QD8: server CPU per WRITE ~0.85x).
fn completes_at_once(conn: &Connection, buf: &[u8], members: &[Member], sealed: bool) -> bool {
    let [m] = members else { return false };
    if sealed || m.header.is_signed() {
        return false;
    }
    let msg = buf.get(m.range.clone()).unwrap_or_default();
    match m.header.cmd() {
        Some(Command::Read | Command::Write) if conn.sends_file_tails() => true,
        Some(Command::Read) if conn.direct().is_some() => {
            ReadRequest::decode(msg).is_ok_and(|r| direct_read_in_place(&r))
        }
        Some(Command::Write) if conn.direct().is_some() => true,
        _ => false,
    }
}

thread_local! {
    /// While the read loop runs a request's first poll ([`first_poll`]): whether the
    /// request asked to be [parked](Parked) should that poll wait
    /// ([`park_when_waiting`]). `None` at any other time: a request polled by a task
    /// of its own asks no one.
    static PARKS: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Polls a request once in the read loop: `None` when it finished, else whether it
/// asked to be [parked](Parked) ([`park_when_waiting`]) before it waited (if not,
/// it goes on as a task of its own).
fn first_poll(task: Pin<&mut (impl Future<Output = ()> + ?Sized)>) -> Option<bool> {
    let outer = PARKS.replace(Some(false));
    let done = task.now_or_never().is_some();
    let parks = PARKS.replace(outer);
    (!done).then_some(parks == Some(true))
}

/// Called by a handler in its request's first poll (in the read loop, [`first_poll`])
/// before it waits: whether the read loop should [park](Parked) the request rather
/// than spawn it, which the handler decides as it learns what the request does (a
/// WRITE over SMB Direct: [`direct_write_parks`]). Outside a first poll in the read
/// loop it does nothing; a request that waits before it says is spawned.
pub(crate) fn park_when_waiting(parks: bool) {
    PARKS.with(|p| {
        if p.get().is_some() {
            p.set(Some(parks));
        }
    });
}

/// The largest WRITE by RDMA that the read loop finishes itself once its data is in
/// ([`Parked`]). Parked, a WRITE costs the server less CPU (no task to spawn and
/// wake: 64 KiB sequential WRITEs -o8, alternated on a loaded 2-core machine, server
/// CPU per WRITE 31.0-35.4 against 42.9-68.4 µs, MB/s 1.12-1.89x), but its copy into
/// the page cache holds the read loop, the connection's one task, while the other
/// core idles: on a quiet machine 64 KiB WRITEs went faster spawned
/// (bench/direct-vs-tcp.sh, ROUNDS=3, alternated, stop 45: SMB Direct/TCP 0.70 and
/// 0.79 against 0.61 and 0.71 parked, machine cycles per byte 2.1-2.3 against
/// 1.7-2.0), so only WRITEs of at most 32 KiB are parked (over soft-iWARP the client
/// moves none of them by RDMA: its WRITE threshold is 32 KiB, above which it uses
/// RDMA). 512 KiB ones whose data goes into a buffer lost parked even when loaded
/// (server CPU per WRITE 176-204 vs 162-190 µs). Those whose data the link's driver
/// brings into the file as it arrives (from [`handlers::write::RDMA_SINK_MIN`]) are
/// parked whatever their size ([`direct_write_parks`]): the driver, in the read
/// loop's task, does that copy anyway.
pub const PARK_MAX: usize = 32 * 1024;

/// Whether a WRITE over SMB Direct is parked once its first poll waited (the WRITE
/// handler says so, [`park_when_waiting`], once it knows): its data comes by RDMA Read
/// (a channel, nothing inline), at most [`PARK_MAX`] bytes or, when it goes
/// `into_file` (a sink took it: [`handlers::write::sinks`], from
/// [`handlers::write::RDMA_SINK_MIN`] on, to a file's data, with a pipe free), any
/// size (the link's driver, in the read loop's task, moves the data into the file as
/// it arrives: the handler only answers once it is in), and it does not wait for the
/// disk once the data is in (`through`: [`handlers::write::writes_through`], the
/// WRITE's flag or its open's mode): a parked WRITE's sync would stop the
/// connection's driver and read loop meanwhile. A stream, or a connection whose sink
/// pipes are all in use, takes the data into a buffer written out after (by the read
/// loop, were it parked).
pub(crate) fn direct_write_parks(w: &WriteRequest<'_>, into_file: bool, through: bool) -> bool {
    w.channel != CHANNEL_NONE
        && w.length == 0
        && (w.remaining_bytes as usize <= PARK_MAX
            || (into_file && w.remaining_bytes as usize >= handlers::write::RDMA_SINK_MIN))
        && !through
}

/// Whether a plain lone READ over SMB Direct runs in the read loop's first poll: one
/// whose data goes inline (no RDMA channel), and one by RDMA below
/// [`handlers::read::RDMA_SPAWN_MIN`] (its data from a registered buffer the handler
/// fills from the page cache, or from the file from
/// [`handlers::read::RDMA_FILE_MIN`], 64 KiB): it reads or queues its file, posts its
/// Writes and queues its response there, with no task to spawn and wake. 64 KiB
/// sequential READs at QD8, in place vs spawned (one binary, env toggle, alternated
/// on a loaded 2-core machine): 1.30-1.41x the MB/s in 5 of 5 pairs, server CPU per
/// READ 20.5-32.5 vs 26.1-37.3 µs (3 of 4 lower). Up to 1 MiB since a 512 KiB READ
/// is one FPDU between smbx ends (s39: in place won 6 of 7 pairs; it had lost when it
/// was 9); a larger one's copy would hold the read loop's worker, so it is spawned.
fn direct_read_in_place(r: &ReadRequest<'_>) -> bool {
    r.channel == CHANNEL_NONE || (r.length as usize) < handlers::read::RDMA_SPAWN_MIN
}

/// Splits a plaintext message into compound members (every NextCommand checked,
/// at most [`MAX_COMPOUND`]); a request must not carry the response flag.
pub(crate) fn split_chain(buf: &[u8]) -> Result<Vec<Member>, &'static str> {
    let mut out = Vec::new();
    for m in compound::members(buf).limit(MAX_COMPOUND) {
        let m = m.map_err(|e| e.reason())?;
        if m.header.is_response() {
            return Err("response flag set in a request");
        }
        out.push(m);
    }
    Ok(out)
}

/// `members` (ranges in a chain) with their ranges in the buffer the chain starts
/// `start` bytes into.
fn at_start(mut members: Vec<Member>, start: usize) -> Vec<Member> {
    if start > 0 {
        for m in &mut members {
            m.range = m.range.start + start..m.range.end + start;
        }
    }
    members
}

/// Room a response header, its fixed body and compound padding take.
const REPLY_OVERHEAD: usize = 128;

/// The most response bytes a chain's members may produce: what each asks for
/// (READ length, output buffer sizes), capped at what the server would send.
fn reply_bytes(conn: &Connection, buf: &[u8], members: &[Member]) -> usize {
    let g = &conn.config.global;
    members
        .iter()
        .map(|m| {
            let Some(cmd) = m.header.cmd() else {
                return REPLY_OVERHEAD;
            };
            let max = match cmd {
                Command::Read => g.smb2_max_read,
                _ => g.smb2_max_trans,
            };
            let asked = smbx_wire::reply_size::requested_reply_bytes(cmd, &buf[m.range.clone()]);
            asked.min(u64::from(max)) as usize + REPLY_OVERHEAD
        })
        .sum()
}

/// Consumes MessageIds for every member (CANCEL excepted) in arrival order.
fn charge_credits(conn: &Connection, members: &[Member]) -> Result<(), &'static str> {
    let dialect = conn.dialect();
    let mut w = conn.credits.lock();
    for m in members {
        let h = &m.header;
        if h.cmd() == Some(Command::Cancel) {
            continue;
        }
        if h.message_id == u64::MAX {
            return Err("MessageId 0xFFFFFFFFFFFFFFFF in a request");
        }
        let charge = if dialect <= Dialect::SMB2_0_2 || dialect == Dialect::WILDCARD {
            1
        } else {
            h.credit_charge
        };
        w.consume(h.message_id, charge)
            .map_err(|_| "MessageId outside the sequence window")?;
    }
    Ok(())
}

/// Processes every member of a chain and sends the responses.
pub(crate) async fn process_chain(conn: Arc<Connection>, mut chain: Chain) {
    let server = conn.server.clone();
    let n = chain.members.len();
    let mut out: Vec<OutMember> = Vec::with_capacity(n);
    // What the previous member leaves for related ones.
    let mut prev = Related::START;
    let encrypted = chain.encrypted;
    for (i, m) in chain.members.iter().enumerate() {
        // Mutable only so a signature is checked in place (see `check_session`).
        let raw = &mut chain.buf[m.range.clone()];
        let mut hdr = m.header.clone();
        if hdr.cmd() == Some(Command::Cancel) {
            cancel(&conn, &hdr);
            continue;
        }
        let mut early: Option<NtStatus> = None;
        if hdr.is_related() && i == 0 {
            early = Some(NtStatus::INVALID_PARAMETER);
        } else {
            prev.apply(&mut hdr);
        }
        if let (Some(sid), false) = (encrypted, hdr.session_id == 0) {
            if sid != hdr.session_id && early.is_none() {
                early = Some(NtStatus::ACCESS_DENIED);
            }
        }
        let last = i + 1 == n;
        let started = std::time::Instant::now();
        let (resp, mut info) = match early {
            Some(st) => (Err(st), MemberInfo::default()),
            None => {
                let from = FromChain {
                    encrypted: encrypted.is_some(),
                    payload: chain.payload.as_ref(),
                };
                run_member(&conn, &server, from, raw, &hdr, &prev, last).await
            }
        };
        info.started = Some(started);
        if info.disconnect {
            conn.close();
            return;
        }
        let resp = match resp {
            Ok(r) => r,
            Err(st) => Response::error(st),
        };
        prev.session_id = match (info.response_session_id, info.session.as_ref()) {
            (Some(sid), _) => sid,
            (None, Some(s)) => s.id,
            (None, None) => 0,
        };
        if hdr.cmd() == Some(Command::SessionSetup) && resp.status == NtStatus::SUCCESS {
            // Log lines of the connection carry the session id from now on (SESSION_SETUP
            // runs in the read loop, inside the connection's span).
            tracing::Span::current().record(
                "sid",
                tracing::field::display(format_args!("{:#x}", prev.session_id)),
            );
        }
        if let Some(t) = info.response_tree_id {
            prev.tree_id = t;
        } else if let Some(t) = info.tree_checked {
            prev.tree_id = t.unwrap_or(0);
        }
        if hdr.cmd() == Some(Command::Create) && resp.status.is_error() {
            prev.file_id = Err(resp.status);
        } else if let Some(f) = info.file_id {
            prev.file_id = Ok(Some(f));
        }
        let om = respond::build(&conn, &hdr, resp, &info, chain.encrypted.is_some());
        out.push(om);
    }
    if !out.is_empty() {
        respond::send_chain(&conn, out, chain.encrypted, chain.permit.take()).await;
    }
    // The frame's buffer goes back for the next one.
    server.frames.recycle(std::mem::take(&mut chain.buf));
}

/// Side results of running one member.
#[derive(Default)]
pub(crate) struct MemberInfo {
    pub file_id: Option<FileId>,
    pub response_session_id: Option<u64>,
    pub response_tree_id: Option<u32>,
    pub preauth_response: Option<handlers::PreauthTarget>,
    pub sign_response: bool,
    pub session: Option<Arc<Session>>,
    pub disconnect: bool,
    pub request_signed: bool,
    /// Set when the member's tree was looked up: the TreeId found, or None.
    pub tree_checked: Option<Option<u32>>,
    /// When the member started (its latency is counted once its final response is built).
    pub started: Option<std::time::Instant>,
}

fn needs_session(cmd: Command) -> bool {
    !matches!(
        cmd,
        Command::Negotiate | Command::SessionSetup | Command::Echo | Command::Cancel
    )
}

fn needs_tree(cmd: Command) -> bool {
    needs_session(cmd) && !matches!(cmd, Command::Logoff | Command::TreeConnect)
}

/// What a member takes from its chain besides its bytes.
struct FromChain<'a> {
    /// The chain arrived sealed.
    encrypted: bool,
    /// A lone WRITE's spliced data.
    payload: Option<&'a SplicedPayload>,
}

/// Resolves and checks session and tree, then runs the handler. `raw` is mutable
/// only for the signature check, which zeroes the Signature field while it runs
/// and restores it.
async fn run_member(
    conn: &Arc<Connection>,
    server: &Arc<ServerState>,
    chain: FromChain<'_>,
    raw: &mut [u8],
    hdr: &Header,
    prev: &Related,
    last: bool,
) -> (HandlerResult, MemberInfo) {
    let mut info = MemberInfo {
        request_signed: hdr.is_signed(),
        ..Default::default()
    };
    let Some(cmd) = hdr.cmd() else {
        return (Err(NtStatus::INVALID_PARAMETER), info);
    };
    let dialect = conn.dialect();
    if cmd == Command::Negotiate {
        if dialect != Dialect::NONE && dialect != Dialect::WILDCARD {
            info.disconnect = true;
            return (Err(NtStatus::INVALID_PARAMETER), info);
        }
    } else if dialect == Dialect::NONE || dialect == Dialect::WILDCARD {
        info.disconnect = true;
        return (Err(NtStatus::INVALID_PARAMETER), info);
    }
    let encrypted = chain.encrypted;

    // Session ([MS-SMB2] 3.3.5.2.9) and signing (3.3.5.2.4).
    let mut session = None;
    let mut signature_ok = false;
    if needs_session(cmd) || (hdr.session_id != 0 && cmd != Command::Negotiate) {
        match check_session(conn, server, cmd, hdr, raw, encrypted) {
            Ok((s, ok)) => {
                session = s;
                signature_ok = ok;
            }
            // A related member whose (inherited) session is unusable.
            Err(NtStatus::USER_SESSION_DELETED) if hdr.is_related() => {
                return (Err(NtStatus::INVALID_PARAMETER), info)
            }
            Err(st) => {
                // Found but refused (signature, encryption): still the session in use.
                info.session = server
                    .sessions
                    .get(hdr.session_id)
                    .filter(|s| cmd == Command::SessionSetup || s.is_bound(conn.id));
                return (Err(st), info);
            }
        }
    }
    info.session = session.clone();
    if let (true, Some(s)) = (encrypted, session.as_ref()) {
        s.note_sealed();
    }
    let mut tree = None;
    if needs_tree(cmd) {
        let Some(s) = session.as_ref() else {
            return (Err(NtStatus::USER_SESSION_DELETED), info);
        };
        let t = s.tree(hdr.tree_id);
        info.tree_checked = Some(t.as_ref().map(|t| t.id));
        match t {
            Some(t) => {
                if t.encrypt_data && !encrypted && dialect >= Dialect::SMB3_0 {
                    return (Err(NtStatus::ACCESS_DENIED), info);
                }
                // Per-share mandatory signing (the signature itself was verified
                // with the session).
                if t.signing_required && !encrypted && !hdr.is_signed() {
                    return (Err(NtStatus::ACCESS_DENIED), info);
                }
                tree = Some(t);
            }
            None => return (Err(NtStatus::NETWORK_NAME_DELETED), info),
        }
    }

    let mut ctx = Ctx {
        conn,
        server,
        header: hdr.clone(),
        session,
        tree,
        encrypted,
        last_in_compound: last,
        related: *prev,
        file_id: None,
        response_session_id: None,
        response_tree_id: None,
        preauth_response: None,
        sign_response: false,
        signature_ok,
        channel_seq: None,
    };
    let req = Request {
        msg: raw,
        payload: chain.payload,
    };
    let result = AssertUnwindSafe(handlers::route(cmd, &mut ctx, &req))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            tracing::error!(conn = conn.id, client = %conn.peer, ?cmd, "handler panicked");
            Err(NtStatus::INTERNAL_ERROR)
        });
    info.file_id = ctx.file_id;
    info.response_session_id = ctx.response_session_id;
    info.response_tree_id = ctx.response_tree_id;
    info.preauth_response = ctx.preauth_response;
    info.sign_response = ctx.sign_response;
    if ctx.session.is_some() && info.session.is_none() {
        info.session = ctx.session.clone();
    }
    // Async in the middle of a compound: only CREATE (an oplock break) may wait;
    // anything else fails as on Windows and Samba (smb2.compound.interim2).
    let result = match result {
        Ok(mut r) if r.pending.is_some() && !last => {
            let fut = r.pending.take().expect("checked");
            if cmd == Command::Create {
                AssertUnwindSafe(fut)
                    .catch_unwind()
                    .await
                    .unwrap_or(Err(NtStatus::INTERNAL_ERROR))
            } else {
                drop(fut);
                Err(NtStatus::INTERNAL_ERROR)
            }
        }
        other => other,
    };
    (result, info)
}

/// Finds the session a request names and enforces its signing/encryption rules.
/// Also says whether the request carries a valid signature.
fn check_session(
    conn: &Connection,
    server: &ServerState,
    cmd: Command,
    hdr: &Header,
    raw: &mut [u8],
    encrypted: bool,
) -> Result<(Option<Arc<Session>>, bool), NtStatus> {
    let Some(s) = server.sessions.get(hdr.session_id) else {
        return if needs_session(cmd) || cmd == Command::SessionSetup {
            Err(NtStatus::USER_SESSION_DELETED)
        } else {
            Ok((None, false))
        };
    };
    // Only a channel of the session may use it. SESSION_SETUP may arrive on any
    // connection (binding a new channel): its signature is checked with the
    // session's key but not enforced here; the handler refuses what it must.
    let (bound, phase, signing_required, encrypt_data, authenticated) = {
        let st = s.state.lock();
        (
            st.security.is_bound(conn.id),
            st.phase,
            st.signing_required,
            st.encrypt_data,
            st.user.is_some(),
        )
    };
    if !bound {
        if cmd != Command::SessionSetup {
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        let ok = hdr.is_signed() && security::verify(&s, conn.id, raw);
        return Ok((Some(s), ok));
    }
    match phase {
        SessionPhase::Expired => return Err(NtStatus::NETWORK_SESSION_EXPIRED),
        SessionPhase::InProgress if !authenticated && cmd != Command::SessionSetup => {
            return Err(NtStatus::USER_SESSION_DELETED)
        }
        _ => {}
    }
    if encrypt_data
        && !encrypted
        && cmd != Command::SessionSetup
        && conn.dialect() >= Dialect::SMB3_0
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !encrypted {
        if hdr.is_signed() {
            if security::can_sign(&s) && !security::verify(&s, conn.id, raw) {
                tracing::debug!(conn = conn.id, client = %conn.peer, session = s.id, "bad signature");
                return Err(NtStatus::ACCESS_DENIED);
            }
        } else if signing_required && (cmd != Command::SessionSetup || phase == SessionPhase::Valid)
        {
            // Once the session is valid, re-authentication must be signed too.
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    Ok((Some(s), hdr.is_signed() && !encrypted))
}

/// CANCEL ([MS-SMB2] 3.3.5.16): no response; signals the named async operation.
fn cancel(conn: &Connection, hdr: &Header) {
    let found = if hdr.is_async() {
        conn.pending.cancel_async(hdr.async_id, hdr.session_id)
    } else {
        conn.pending.cancel_message(hdr.message_id, hdr.session_id)
    };
    tracing::debug!(conn = conn.id, client = %conn.peer, found, "cancel");
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_wire::Writer;

    fn member(cmd: Command, next: u32, body_len: usize) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            command: cmd as u16,
            next_command: next,
            ..Default::default()
        }
        .encode(&mut w);
        w.zeros(body_len);
        w.into_vec()
    }

    /// A lone READ over SMB Direct runs in the read loop's first poll when its data
    /// goes inline, or by RDMA up to 1 MiB (copied or sent from the file); a larger
    /// one by RDMA is spawned.
    #[test]
    fn direct_reads_in_place_up_to_a_mebibyte() {
        use smbx_wire::rw::{CHANNEL_RDMA_V1, CHANNEL_RDMA_V1_INVALIDATE};
        let read = |channel: u32, length: u32| {
            let mut msg = member(Command::Read, 0, 0);
            msg.extend(
                ReadRequest {
                    padding: 0,
                    flags: 0,
                    length,
                    offset: 0,
                    file_id: smbx_wire::FileId::default(),
                    minimum_count: 0,
                    channel,
                    remaining_bytes: 0,
                    channel_info: if channel == CHANNEL_NONE {
                        &[]
                    } else {
                        &[0; 16]
                    },
                }
                .encode(),
            );
            direct_read_in_place(&ReadRequest::decode(&msg).unwrap())
        };
        let spawn_min = handlers::read::RDMA_SPAWN_MIN as u32;
        assert!(read(CHANNEL_NONE, 4096));
        assert!(read(CHANNEL_NONE, 1 << 20));
        assert!(read(CHANNEL_RDMA_V1, 65536));
        assert!(read(CHANNEL_RDMA_V1_INVALIDATE, 65536));
        assert!(read(CHANNEL_RDMA_V1, spawn_min - 1));
        assert!(!read(CHANNEL_RDMA_V1, spawn_min));
        assert!(read(CHANNEL_RDMA_V1_INVALIDATE, 512 * 1024));
        assert!(!read(CHANNEL_RDMA_V1, 2 << 20));
    }

    /// A WRITE over SMB Direct is parked when its data comes by RDMA Read, is at most
    /// PARK_MAX bytes, or at least RDMA_SINK_MIN going into the file, and is not
    /// write-through (its flag, or its open's FILE_WRITE_THROUGH); one with its data
    /// inline is not.
    #[test]
    fn direct_writes_park_when_small_by_rdma_and_not_write_through() {
        use smbx_wire::rw::CHANNEL_RDMA_V1;
        use smbx_wire::CreateOptions;
        let dir = tempfile::tempdir().unwrap();
        let write_to =
            |options: CreateOptions, channel: u32, remaining: u32, flags: u32, data: &[u8]| {
                let mut msg = member(Command::Write, 0, 0);
                msg.extend(
                    WriteRequest {
                        channel,
                        remaining_bytes: remaining,
                        flags,
                        length: data.len() as u32,
                        data,
                        channel_info: if channel == CHANNEL_NONE {
                            &[]
                        } else {
                            &[0; 16]
                        },
                        ..Default::default()
                    }
                    .encode(),
                );
                let w = WriteRequest::decode(&msg).unwrap();
                let open = crate::state::open::test_file_open(dir.path(), options);
                let through = handlers::write::writes_through(w.flags, &open);
                let plain = direct_write_parks(&w, false, through);
                let sink = direct_write_parks(&w, true, through);
                // A WRITE into the file parks whenever one into a buffer does.
                assert!(!plain || sink);
                (plain, sink)
            };
        let write = |channel: u32, remaining: u32, flags: u32, data: &[u8]| {
            write_to(CreateOptions::empty(), channel, remaining, flags, data)
        };
        let max = PARK_MAX as u32;
        let sink = handlers::write::RDMA_SINK_MIN as u32;
        assert_eq!(write(CHANNEL_RDMA_V1, 4096, 0, &[]), (true, true));
        assert_eq!(write(CHANNEL_RDMA_V1, max, 0, &[]), (true, true));
        assert_eq!(write(CHANNEL_RDMA_V1, max + 1, 0, &[]), (false, false));
        assert_eq!(write(CHANNEL_RDMA_V1, sink - 1, 0, &[]), (false, false));
        // Its data goes into the file as it arrives, when the link can.
        assert_eq!(write(CHANNEL_RDMA_V1, sink, 0, &[]), (false, true));
        assert_eq!(write(CHANNEL_RDMA_V1, 1 << 20, 0, &[]), (false, true));
        let through = smbx_wire::rw::WRITEFLAG_WRITE_THROUGH;
        assert_eq!(write(CHANNEL_RDMA_V1, max, through, &[]), (false, false));
        assert_eq!(write(CHANNEL_RDMA_V1, sink, through, &[]), (false, false));
        // An open created write-through waits for the disk at every WRITE, flag or
        // not: parked, its sync would stop the connection's driver and read loop.
        let opened_through = CreateOptions::FILE_WRITE_THROUGH;
        for len in [4096, max, sink, 1 << 20] {
            assert_eq!(
                write_to(opened_through, CHANNEL_RDMA_V1, len, 0, &[]),
                (false, false),
                "{len}"
            );
        }
        assert_eq!(write(CHANNEL_NONE, 0, 0, &[1; 100]), (false, false));
    }

    /// The read loop parks a request that waited in its first poll only when its
    /// handler asked for it in that poll before it waited; what it says in a later
    /// poll, or outside the read loop, counts for nothing.
    #[test]
    fn a_request_is_parked_when_it_asked_in_its_first_poll() {
        /// Says `parks` (if any) at poll `at` (counting from 1), pends `polls` times.
        fn request(says: Option<(bool, usize)>, polls: usize) -> ParkedRequest {
            let mut n = 0;
            Box::pin(std::future::poll_fn(move |_| {
                n += 1;
                if let Some((parks, _)) = says.filter(|&(_, at)| at == n) {
                    park_when_waiting(parks);
                }
                if n > polls {
                    std::task::Poll::Ready(())
                } else {
                    std::task::Poll::Pending
                }
            }))
        }
        let first = |mut r: ParkedRequest| first_poll(r.as_mut());
        assert_eq!(first(request(Some((true, 1)), 1)), Some(true));
        assert_eq!(first(request(Some((false, 1)), 1)), Some(false));
        assert_eq!(first(request(None, 1)), Some(false));
        // Finished at once: nothing to park.
        assert_eq!(first(request(Some((true, 1)), 0)), None);
        // Asked only after it waited: spawned; the ask goes nowhere, not to the
        // next request's first poll.
        let mut late = request(Some((true, 2)), 2);
        assert_eq!(first_poll(late.as_mut()), Some(false));
        assert!(late.as_mut().now_or_never().is_none());
        assert_eq!(first(request(None, 1)), Some(false));
        park_when_waiting(true);
        assert_eq!(first(request(None, 1)), Some(false));
    }

    /// Parked requests spilled into tasks run on to their end (a transfer under way
    /// is not dropped with its buffer when the read loop stops polling them).
    #[tokio::test]
    async fn spilled_requests_run_on_as_tasks() {
        let mut parked = Parked::new();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        parked.push(Box::pin(async move {
            let _ = wait.await;
            let _ = done.send(());
        }));
        assert!(
            std::future::poll_fn(|cx| parked.poll_next(cx))
                .now_or_never()
                .is_none(),
            "waits"
        );
        spill(&mut parked);
        assert!(parked.is_empty());
        go.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), finished)
            .await
            .expect("the spilled request ran on")
            .expect("not dropped");
    }

    #[test]
    fn members_of_a_chain_past_the_start_of_its_buffer_are_found_in_it() {
        let mut chain = member(Command::Create, 72, 8);
        chain.extend(member(Command::Close, 0, 24));
        let at_zero = split_chain(&chain).unwrap();
        // As SMB Direct hands it up: past its 24-byte header, left in the buffer.
        let buf = [vec![0xEE; 24], chain.clone()].concat();
        let msg = InMessage::at(buf, 24).unwrap();
        let members = split_chain(&msg).unwrap();
        let (buf, start) = msg.into_parts();
        let members = at_start(members, start);
        assert_eq!(members.len(), 2);
        for (m, z) in members.iter().zip(&at_zero) {
            assert_eq!(buf[m.range.clone()], chain[z.range.clone()]);
            assert_eq!(m.header, z.header);
        }
        assert_eq!(members[1].range, 24 + 72..buf.len());
    }

    #[test]
    fn split_checks_next_command_response_flag_and_length() {
        let mut buf = member(Command::Create, 72, 8);
        buf.extend(member(Command::Close, 0, 24));
        let m = split_chain(&buf).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].range, 72..buf.len());
        // Misaligned, too small, or past the end.
        for bad in [70u32, 8, 4096] {
            let mut b = member(Command::Create, bad, 8);
            b.extend(member(Command::Close, 0, 24));
            assert_eq!(split_chain(&b).err(), Some("invalid NextCommand"), "{bad}");
        }
        // A response in a request chain.
        let mut b = member(Command::Create, 72, 8);
        let mut resp = member(Command::Close, 0, 24);
        resp[16] |= 1;
        b.extend(resp);
        assert_eq!(
            split_chain(&b).err(),
            Some("response flag set in a request")
        );
        // MAX_COMPOUND members pass, one more does not.
        let chain = |n: usize| {
            let mut b = Vec::new();
            for i in 0..n {
                b.extend(member(Command::Echo, if i + 1 < n { 72 } else { 0 }, 8));
            }
            b
        };
        assert_eq!(
            split_chain(&chain(MAX_COMPOUND)).unwrap().len(),
            MAX_COMPOUND
        );
        assert_eq!(
            split_chain(&chain(MAX_COMPOUND + 1)).err(),
            Some("compound too long")
        );
    }
}
