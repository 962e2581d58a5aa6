//! Building, signing, sealing and sending responses, including interim
//! STATUS_PENDING responses and the later completion of async operations.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use smbx_security::transform::TRANSFORM_HEADER_LEN;
use smbx_wire::compound;
use smbx_wire::error::ErrorResponse;
use smbx_wire::header::{FLAGS_ASYNC_COMMAND, FLAGS_RELATED_OPERATIONS, FLAGS_SERVER_TO_REDIR};
use smbx_wire::Dialect;
use smbx_wire::{Header, NtStatus, Writer, HEADER_SIZE};
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::conn::tail::FileTail;
use crate::conn::Connection;
use crate::dispatch::MemberInfo;
use crate::handlers::{PendingFuture, PreauthTarget, Response};
use crate::security;
use crate::state::Session;

/// A pending operation whose completion is sent after the interim response.
pub(crate) struct AsyncCompletion {
    fut: PendingFuture,
    async_id: u64,
    cancel: oneshot::Receiver<()>,
    header: Header,
    session: Option<Arc<Session>>,
    sign: bool,
    /// When the request arrived (for its latency).
    started: Option<std::time::Instant>,
}

/// One response member, ready to be padded, signed and concatenated.
pub(crate) struct OutMember {
    pub bytes: Vec<u8>,
    session: Option<Arc<Session>>,
    sign: bool,
    preauth: Option<PreauthTarget>,
    completion: Option<AsyncCompletion>,
    /// Client STag to invalidate with the message (SMB Direct).
    invalidate: Option<u32>,
    /// READ data still in the file, sent after `bytes`.
    tail: Option<FileTail>,
    /// `bytes` starts with this many bytes kept free for a TRANSFORM_HEADER.
    seal_room: usize,
}

fn credit_charge(conn: &Connection, hdr: &Header) -> u16 {
    let d = conn.dialect();
    if d <= Dialect::SMB2_0_2 || d == Dialect::WILDCARD {
        1
    } else {
        hdr.credit_charge.max(1)
    }
}

/// Whether a response on `session` should be signed.
fn should_sign(session: Option<&Arc<Session>>, info: &MemberInfo, encrypted: bool) -> bool {
    let Some(s) = session else { return false };
    if encrypted || !security::can_sign(s) {
        return false;
    }
    info.request_signed || info.sign_response || s.state.lock().signing_required
}

/// Builds the response member for a request header and a handler's response.
pub(crate) fn build(
    conn: &Arc<Connection>,
    req: &Header,
    mut resp: Response,
    info: &MemberInfo,
    encrypted: bool,
) -> OutMember {
    let charge = credit_charge(conn, req);
    let granted = conn.credits.lock().grant(req.credits, charge);
    conn.server.metrics.credits_granted(granted);
    let session_id = info.response_session_id.unwrap_or(req.session_id);
    let session = info
        .session
        .clone()
        .filter(|s| s.id == session_id)
        .or_else(|| conn.server.sessions.get(session_id));
    let sign = should_sign(session.as_ref(), info, encrypted);
    let mut h = Header {
        credit_charge: req.credit_charge,
        status: resp.status,
        command: req.command,
        credits: granted,
        flags: FLAGS_SERVER_TO_REDIR | (req.flags & FLAGS_RELATED_OPERATIONS),
        next_command: 0,
        message_id: req.message_id,
        async_id: 0,
        tree_id: info.response_tree_id.unwrap_or(req.tree_id),
        session_id,
        signature: [0; 16],
    };
    let mut completion = None;
    let mut body = std::mem::take(&mut resp.body);
    let mut header_room = resp.header_room;
    let mut seal_room = resp.seal_room;
    if let Some(fut) = resp.pending.take() {
        match conn.pending.register(req.message_id, session_id) {
            Ok((async_id, cancel)) => {
                h.flags |= FLAGS_ASYNC_COMMAND;
                h.async_id = async_id;
                h.status = NtStatus::PENDING;
                body = ErrorResponse::empty().encode();
                header_room = false;
                seal_room = 0;
                let mut final_hdr = req.clone();
                final_hdr.flags |= FLAGS_ASYNC_COMMAND;
                final_hdr.async_id = async_id;
                final_hdr.session_id = session_id;
                completion = Some(AsyncCompletion {
                    fut,
                    async_id,
                    cancel,
                    header: final_hdr,
                    session: session.clone(),
                    sign,
                    started: info.started,
                });
            }
            Err(st) => {
                h.status = st;
                body = ErrorResponse::empty().encode();
                header_room = false;
                seal_room = 0;
            }
        }
    }
    // A response that is final now counts; an async one when it completes.
    if let (None, Some(t)) = (&completion, info.started) {
        conn.server
            .metrics
            .request(req.command, h.status, t.elapsed());
    }
    // Interim responses are signed only in 3.x.
    let sign = sign && (completion.is_none() || conn.dialect() >= Dialect::SMB3_0);
    let bytes = if header_room && body.len() >= seal_room + HEADER_SIZE {
        let mut w = Writer::with_capacity(HEADER_SIZE);
        h.encode(&mut w);
        body[seal_room..seal_room + HEADER_SIZE].copy_from_slice(w.as_slice());
        body
    } else {
        seal_room = 0;
        let mut w = Writer::with_capacity(HEADER_SIZE + body.len());
        h.encode(&mut w);
        w.bytes(&body);
        w.into_vec()
    };
    OutMember {
        bytes,
        session,
        sign,
        preauth: info.preauth_response,
        completion,
        invalidate: resp.invalidate,
        tail: resp.tail.take(),
        seal_room,
    }
}

/// Pads, links, signs, seals and sends a chain of response members; then starts the
/// completion of any async member.
pub(crate) async fn send_chain(
    conn: &Arc<Connection>,
    mut out: Vec<OutMember>,
    encrypted: Option<u64>,
    permit: Option<OwnedSemaphorePermit>,
) {
    let n = out.len();
    if reads_tails_in(&out, encrypted) {
        // Reading READ data in and signing or sealing it is the heaviest step of
        // any response (~0.15 ns a byte: 80 µs for 512 KiB). The connection's next
        // request starts only once this one's task first waits (StartOrder), so
        // wait once before that step: the responses of one connection are then
        // read in and protected on every worker at once, not one after another.
        tokio::task::yield_now().await;
    }
    let mut buf = Vec::new();
    if n > 1 {
        buf.reserve_exact(out.iter().map(|m| m.bytes.len() + 8).sum());
    }
    let mut completions = Vec::new();
    let invalidate = out.iter().find_map(|m| m.invalidate);
    let mut session = None;
    let mut out_tail = None;
    // Bytes reserved in front of a lone response for its TRANSFORM_HEADER.
    let mut room = 0;
    for (i, m) in out.iter_mut().enumerate() {
        // Room for a TRANSFORM_HEADER is used by a lone sealed response and
        // dropped anywhere else (a compound member: the chain is sealed whole).
        let lone_sealed = n == 1 && encrypted.is_some() && !m.sign && m.preauth.is_none();
        if m.seal_room > 0 {
            if lone_sealed && m.tail.is_none() {
                room = m.seal_room;
            } else {
                m.bytes.drain(..m.seal_room.min(m.bytes.len()));
            }
            m.seal_room = 0;
        }
        // READ data goes from the file to the socket only in a lone response
        // that is neither signed nor sealed; anything else reads it in here
        // (it was in the page cache when the READ ran).
        // A lone sealed one is read in behind room for its TRANSFORM_HEADER and
        // sealed in place below.
        if reads_tail_in(n, m, encrypted) {
            if let Some(t) = m.tail.take() {
                if lone_sealed {
                    room = TRANSFORM_HEADER_LEN;
                }
                m.bytes = t.materialize(&m.bytes, room, &conn.server.frames);
            }
        }
        // Every member of a compound response is padded to 8 bytes, the last one
        // included (as Windows and Samba: smb2.compound.compound-padding); a single
        // response is not.
        if n > 1 {
            compound::end_member(&mut m.bytes, 0, i + 1 < n);
        }
        if let (true, Some(s)) = (m.sign, m.session.as_ref()) {
            security::sign(s, conn.id, &mut m.bytes);
        }
        if let Some(t) = m.preauth {
            security::preauth_response(conn, t, &m.bytes);
        }
        // A single response is moved, not copied: only one copy of a queued
        // response is ever alive.
        if n == 1 {
            buf = std::mem::take(&mut m.bytes);
            out_tail = m.tail.take();
        } else {
            buf.extend_from_slice(&m.bytes);
            m.bytes = Vec::new();
        }
        if let Some(c) = m.completion.take() {
            completions.push(c);
        }
        if session.is_none() {
            session = m.session.clone().filter(|s| Some(s.id) == encrypted);
        }
    }
    drop(out);
    if let Some(sid) = encrypted {
        let sealed = if room > 0 {
            security::seal_in_place(conn, sid, session.as_ref(), &mut buf).map(|()| buf)
        } else {
            security::seal(conn, sid, session.as_ref(), buf)
        };
        match sealed {
            Ok(b) => buf = b,
            Err(_) => {
                conn.close();
                return;
            }
        }
    }
    match out_tail {
        Some(t) => conn.send_with_tail(buf, t, permit).await,
        None => conn.send_holding(buf, permit, invalidate).await,
    }
    for c in completions {
        let conn = conn.clone();
        tokio::spawn(tracing::Instrument::in_current_span(complete(
            conn, c, encrypted,
        )));
    }
}

/// Whether `m`, one of `n` members, has its READ data read in before sending
/// rather than sent from the file (sendfile): in a compound, or when it is signed,
/// hashed or sealed.
fn reads_tail_in(n: usize, m: &OutMember, encrypted: Option<u64>) -> bool {
    n > 1 || m.sign || m.preauth.is_some() || encrypted.is_some()
}

/// Whether the members of `out` have at least
/// [`BLOCKING_THRESHOLD`](crate::handlers::read::BLOCKING_THRESHOLD) bytes of READ
/// data to read in (see [`reads_tail_in`]): enough work to let the next request
/// start first (a 16 KiB one is signed in less time than the wait costs).
fn reads_tails_in(out: &[OutMember], encrypted: Option<u64>) -> bool {
    let bytes: usize = out
        .iter()
        .filter(|m| reads_tail_in(out.len(), m, encrypted))
        .filter_map(|m| m.tail.as_ref().map(|t| t.len))
        .sum();
    bytes >= crate::handlers::read::BLOCKING_THRESHOLD
}

/// Runs an async operation to completion (or cancellation) and sends its final response.
async fn complete(conn: Arc<Connection>, c: AsyncCompletion, encrypted: Option<u64>) {
    let AsyncCompletion {
        fut,
        async_id,
        cancel,
        header,
        session,
        sign,
        started,
    } = c;
    // Biased: an operation that is already complete when its cancel arrives (LOGOFF
    // closes the opens before cancelling, handlers/logoff.rs) answers with its result.
    let result = tokio::select! {
        biased;
        r = AssertUnwindSafe(fut).catch_unwind() => r.unwrap_or(Err(NtStatus::INTERNAL_ERROR)),
        _ = cancel => Err(NtStatus::CANCELLED),
    };
    conn.pending.remove(async_id);
    let (status, body) = match result {
        Ok(mut r) if r.pending.is_none() => {
            if let Some(t) = r.tail.take() {
                t.read_into(&mut r.body);
            }
            if r.header_room {
                r.body
                    .drain(..(r.seal_room + HEADER_SIZE).min(r.body.len()));
            }
            (r.status, r.body)
        }
        Ok(_) => (NtStatus::INTERNAL_ERROR, ErrorResponse::empty().encode()),
        Err(st) => (st, ErrorResponse::empty().encode()),
    };
    if let Some(t) = started {
        conn.server
            .metrics
            .request(header.command, status, t.elapsed());
    }
    let h = Header {
        credit_charge: header.credit_charge,
        status,
        command: header.command,
        credits: 0,
        flags: FLAGS_SERVER_TO_REDIR | FLAGS_ASYNC_COMMAND,
        next_command: 0,
        message_id: header.message_id,
        async_id,
        tree_id: 0,
        session_id: header.session_id,
        signature: [0; 16],
    };
    let mut w = Writer::with_capacity(64 + body.len());
    h.encode(&mut w);
    w.bytes(&body);
    let mut msg = w.into_vec();
    if let (true, Some(s)) = (sign, session.as_ref()) {
        security::sign(s, conn.id, &mut msg);
    }
    if let Some(sid) = encrypted {
        match security::seal(&conn, sid, session.as_ref(), msg) {
            Ok(b) => msg = b,
            Err(_) => return,
        }
    }
    // The completion waits for room in the connection's budget like any response.
    let Some(permit) = conn.reserve(msg.len()).await else {
        return;
    };
    conn.send_holding(msg, Some(permit), None).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ServerState;
    use smbx_transport::link;
    use smbx_transport::tcp::FrameReader;
    use smbx_wire::Command;
    use tokio::net::{TcpListener, TcpStream};

    struct NoUsers;
    impl smbx_security::auth::CredentialStore for NoUsers {
        fn nt_hash(&self, _: &str) -> Option<[u8; 16]> {
            None
        }
    }

    /// The client's end of a connection's Direct TCP link.
    struct Peer {
        sock: tokio::net::tcp::OwnedReadHalf,
        _wr: tokio::net::tcp::OwnedWriteHalf,
        frames: FrameReader,
    }

    impl Peer {
        /// The next message the connection sent.
        async fn next(&mut self) -> Vec<u8> {
            self.frames.next(&mut self.sock, None).await.unwrap().msg
        }
    }

    /// A connection over a real loopback Direct TCP link, and the client's end of it.
    async fn conn() -> (Arc<Connection>, Peer) {
        let state = Arc::new(ServerState::with_credentials(
            Arc::new(smbx_config::Config::default()),
            Arc::new(NoUsers),
        ));
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (a, s) = tokio::join!(TcpStream::connect(l.local_addr().unwrap()), l.accept());
        let (a, s) = (a.unwrap(), s.unwrap().0);
        let opts = link::TcpOptions::new(1 << 20, state.frames.clone());
        let (tx, _rx, writer) = link::tcp_with(s, opts);
        tokio::spawn(writer);
        let c = Arc::new(Connection::new(1, state, Box::new(tx)));
        c.negotiate.lock().dialect = Dialect::SMB3_1_1;
        let (sock, _wr) = a.into_split();
        let peer = Peer {
            sock,
            _wr,
            frames: FrameReader::new(1 << 20),
        };
        (c, peer)
    }

    fn req(id: u64) -> Header {
        Header {
            command: Command::ChangeNotify as u16,
            message_id: id,
            credits: 5,
            credit_charge: 1,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn pending_sends_interim_then_final() {
        let (c, mut rx) = conn().await;
        c.credits.lock().consume(0, 1).unwrap();
        let (gate_tx, gate_rx) = oneshot::channel::<()>();
        let resp = Response::pending(async move {
            let _ = gate_rx.await;
            Ok(Response::ok(vec![7; 8]))
        });
        let om = build(&c, &req(0), resp, &MemberInfo::default(), false);
        send_chain(&c, vec![om], None, None).await;
        let interim = rx.next().await;
        let h = Header::decode(&interim).unwrap();
        assert_eq!(h.status, NtStatus::PENDING);
        assert!(h.is_async());
        assert_eq!(h.credits, 5);
        assert_eq!(c.pending.len(), 1);
        gate_tx.send(()).unwrap();
        let fin = rx.next().await;
        let f = Header::decode(&fin).unwrap();
        assert_eq!(f.status, NtStatus::SUCCESS);
        assert_eq!(f.async_id, h.async_id);
        assert_eq!(f.message_id, 0);
        assert_eq!(f.credits, 0);
        assert_eq!(&fin[64..], &[7; 8]);
        assert!(c.pending.is_empty());
    }

    #[tokio::test]
    async fn cancel_by_async_id_and_message_id() {
        let (c, mut rx) = conn().await;
        for (i, by_async) in [(0u64, true), (1, false)] {
            let om = build(
                &c,
                &req(i),
                Response::pending(std::future::pending()),
                &MemberInfo::default(),
                false,
            );
            send_chain(&c, vec![om], None, None).await;
            let h = Header::decode(&rx.next().await).unwrap();
            assert_eq!(h.status, NtStatus::PENDING);
            let found = if by_async {
                c.pending.cancel_async(h.async_id, 0)
            } else {
                c.pending.cancel_message(i, 0)
            };
            assert!(found);
            let f = Header::decode(&rx.next().await).unwrap();
            assert_eq!(f.status, NtStatus::CANCELLED);
            assert_eq!(f.message_id, i);
        }
        assert!(!c.pending.cancel_async(999, 0));
    }

    /// READ data that is read in before sending (here: in a compound; likewise
    /// when signed or sealed) is read in only after the connection's next request
    /// has started, so one connection's large protected responses are built on
    /// every worker at once; the data arrives whole.
    #[tokio::test]
    async fn the_next_request_starts_before_read_data_is_read_in() {
        let (c, mut rx) = conn().await;
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), &data).unwrap();
        let share = smbx_vfs::Share::open(tmp.path(), Default::default()).unwrap();
        let open = smbx_vfs::CreateRequest {
            want_read: true,
            ..Default::default()
        };
        let (handle, _) = share.create("f", &open).unwrap();
        let tail = FileTail {
            handle: Arc::new(handle),
            offset: 0,
            len: data.len(),
        };
        let read = Response::ok_with_tail(vec![0; HEADER_SIZE + 16], tail);
        let info = MemberInfo::default();
        let out = vec![
            build(&c, &req(0), read, &info, false),
            build(&c, &req(1), Response::ok(vec![7; 8]), &info, false),
        ];
        let order = &c.start_order;
        let (first, second) = (order.ticket(), order.ticket());
        let next_started = std::sync::atomic::AtomicBool::new(false);
        let next_started = &next_started;
        let started_before = async {
            let chain = std::pin::pin!(async {
                let c = c.clone();
                send_chain(&c, out, None, None).await;
            });
            order.run(first, chain).await;
            next_started.load(std::sync::atomic::Ordering::SeqCst)
        };
        let next_chain =
            std::pin::pin!(async { next_started.store(true, std::sync::atomic::Ordering::SeqCst) });
        let next = order.run(second, next_chain);
        let (started_before, ()) = tokio::join!(started_before, next);
        assert!(started_before, "the next request waited for the read-in");
        let msg = rx.next().await;
        let h = Header::decode(&msg).unwrap();
        assert_eq!(h.message_id, 0);
        let at = HEADER_SIZE + 16;
        assert_eq!(&msg[at..at + data.len()], &data[..]);
    }

    /// Room left for a TRANSFORM_HEADER in front of a response that is not sealed
    /// alone (here: a compound member) is dropped: the member starts with its header
    /// and its body follows as the handler wrote it.
    #[tokio::test]
    async fn unused_seal_room_is_dropped() {
        let (c, mut rx) = conn().await;
        let front = TRANSFORM_HEADER_LEN;
        let mut msg = vec![0xee; front + HEADER_SIZE];
        msg.extend((0..300u32).map(|i| i as u8));
        let info = MemberInfo::default();
        let out = vec![
            build(
                &c,
                &req(0),
                Response::ok_with_room(msg, front),
                &info,
                false,
            ),
            build(&c, &req(1), Response::ok(vec![7; 8]), &info, false),
        ];
        send_chain(&c, out, None, None).await;
        let got = rx.next().await;
        let h = Header::decode(&got).unwrap();
        assert_eq!((h.message_id, h.status), (0, NtStatus::SUCCESS));
        let next = h.next_command as usize;
        assert!(next >= HEADER_SIZE + 300, "member length {next}");
        let body: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        assert_eq!(&got[HEADER_SIZE..HEADER_SIZE + 300], &body[..]);
        let second = Header::decode(&got[next..]).unwrap();
        assert_eq!(second.message_id, 1);
        assert_eq!(&got[next + HEADER_SIZE..next + HEADER_SIZE + 8], &[7; 8]);
    }

    /// An operation that completed before its cancel was seen answers with its own
    /// result (LOGOFF closes the opens, which completes their waiters, then cancels).
    #[tokio::test]
    async fn ready_result_wins_over_cancel() {
        let (c, mut rx) = conn().await;
        for i in 0..8u64 {
            let (gate_tx, gate_rx) = oneshot::channel::<()>();
            let resp = Response::pending(async move {
                let _ = gate_rx.await;
                Err(NtStatus::RANGE_NOT_LOCKED)
            });
            let om = build(&c, &req(i), resp, &MemberInfo::default(), false);
            send_chain(&c, vec![om], None, None).await;
            let h = Header::decode(&rx.next().await).unwrap();
            assert_eq!(h.status, NtStatus::PENDING);
            tokio::task::yield_now().await;
            gate_tx.send(()).unwrap();
            c.pending.cancel_all(None);
            let f = Header::decode(&rx.next().await).unwrap();
            assert_eq!(f.status, NtStatus::RANGE_NOT_LOCKED);
            assert_eq!(f.message_id, i);
        }
    }
}
