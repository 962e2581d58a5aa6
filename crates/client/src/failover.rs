//! Multichannel failover ([MS-SMB2] 3.2.4.1, 3.2.5.1): a session's requests
//! survive the loss of a channel.
//!
//! Every request of a multichannel session goes out through [`send`]: on the
//! live channel with the most room, carrying the session's ChannelSequence.
//! When its channel fails under it (the connection closes, or a response does
//! not come within the timeout and the channel then does not answer an ECHO
//! either) the channel is marked down (its socket stays open until a new
//! connection replaces it, so that the server keeps the session), the
//! session's ChannelSequence advances, and the request is sent again on
//! another live channel with SMB2_FLAGS_REPLAY_OPERATION: the server either
//! recognises the operation or runs it, and an older request still in the
//! server from the dead channel is refused rather than applied after it
//! (3.3.5.2.10). A STATUS_FILE_NOT_AVAILABLE answer (the server saw a newer
//! ChannelSequence on the open) is replayed the same way. The failed channel
//! is re-established in the background ([`spawn_rebind`]): its address is
//! tried again with exponential backoff and the new connection is bound to the
//! session in the old one's place.
//!
//! Only requests that may be repeated are replayed: READ, WRITE, SET_INFO,
//! QUERY_INFO, IOCTL, FLUSH, CLOSE, ECHO, and CREATE in a compound that also
//! closes what it opened (the path operations). A lone CREATE (no durable
//! create GUID yet), LOCK, QUERY_DIRECTORY and CHANGE_NOTIFY are not: their
//! caller sees the failure.

use std::sync::Arc;
use std::time::Duration;

use smbx_wire::ioctl::fsctl;
use smbx_wire::{Command, NtStatus};

use crate::channels::{Channel, ChannelSet, Link, Pinned};
use crate::client::Session;
use crate::conn::{Request, Response, HEADROOM};
use crate::error::{Error, Result};

/// How many times one request may be sent again.
const MAX_REPLAYS: u32 = 16;
/// First wait before trying a failed channel's address again.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(4);
/// Tries to re-establish one failed channel before giving up on it.
const REBIND_ATTEMPTS: u32 = 1000;
/// How long a request waits for some channel to come back when all are down.
const ALL_DOWN_WAIT: Duration = Duration::from_secs(60);
/// How long the ECHO that tells a slow channel from a dead one may take.
const PROBE_WAIT: Duration = Duration::from_secs(5);

/// True for a failure of the channel itself (not of the operation).
pub(crate) fn channel_lost(e: &Error) -> bool {
    matches!(e, Error::Disconnected(_) | Error::Timeout | Error::Io(_))
}

/// True if the server refused a binding because the session is gone there:
/// no later try can succeed.
fn session_gone(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::USER_SESSION_DELETED | NtStatus::NETWORK_SESSION_EXPIRED)
    )
}

/// An IOCTL request's CtlCode (body offset 4, after any reserved headroom).
fn ctl_code(r: &Request) -> Option<u32> {
    let at = if r.headroom { HEADROOM } else { 0 } + 4;
    let b = r.body.get(at..at + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// True if sending `reqs` twice cannot do what sending them once would not.
pub(crate) fn replayable(reqs: &[Request]) -> bool {
    let closes = reqs.iter().any(|r| r.command == Command::Close);
    reqs.iter().all(|r| match r.command {
        Command::Read
        | Command::Write
        | Command::SetInfo
        | Command::QueryInfo
        | Command::Flush
        | Command::Close
        | Command::Echo => true,
        // A named pipe's transceive, peek or wait talks to a program, which would
        // see a replay as a second call; the file system controls repeat safely.
        Command::Ioctl => !matches!(
            ctl_code(r),
            Some(fsctl::PIPE_TRANSCEIVE | fsctl::PIPE_PEEK | fsctl::PIPE_WAIT) | None
        ),
        // A path operation: CREATE ... CLOSE in one compound leaves no open behind.
        Command::Create => closes,
        _ => false,
    })
}

/// Sends `reqs` (one compound) on the session's channel with the most room,
/// counting them as outstanding there until answered; replays them on another
/// channel if that one fails (see the module documentation). A request pinned
/// to a channel (`on`: its RDMA descriptor is registered with that channel's
/// link) goes there and is not replayed elsewhere: when the channel fails, it is
/// marked down and the error is the caller's, who registers the buffer again
/// on another channel.
pub(crate) async fn send(
    session: &Session,
    reqs: Vec<Request>,
    encrypt_tree: bool,
    on: Option<&Pinned>,
) -> Result<Vec<Response>> {
    send_keeping(session, reqs, encrypt_tree, on, false).await.0
}

/// [`send`], and with `keep` a failed send's requests handed back as they were
/// before they were framed (by the connection, [`crate::conn::Connection::send_retained`];
/// no copy made before sending) when they may be replayed, for the caller to send
/// again on a re-established session ([`crate::durable`]).
pub(crate) async fn send_keeping(
    session: &Session,
    mut reqs: Vec<Request>,
    encrypt_tree: bool,
    on: Option<&Pinned>,
    keep: bool,
) -> (Result<Vec<Response>>, Option<Vec<Request>>) {
    let set = session.channels();
    let sent: u64 = reqs.iter().map(|r| r.wire_len() as u64).sum();
    // Credits stand for 64 KiB each: a READ's answer weighs what it asks for.
    let weight = reqs
        .iter()
        .map(|r| (r.charge.max(1) as u64) * 65536)
        .sum::<u64>()
        .max(sent);
    // A READ's or WRITE's weight is its message size: an SMB Direct channel
    // carries it inline only up to its fragmented size.
    let read = reqs.iter().any(|r| r.command == Command::Read);
    // One channel has nowhere to replay to: the requests are retained then only
    // for a caller that keeps them.
    let retain = on.is_none() && (set.len() > 1 || keep) && replayable(&reqs);
    let can_replay = retain && set.len() > 1;
    let mut replay = on.is_some_and(|p| p.replay);
    let mut replays = 0u32;
    loop {
        let (ch, link) = match on {
            Some(p) => (p.channel.clone(), p.link.clone()),
            None => {
                let ch = set.pick_inline(weight, weight, read);
                let link = ch.link();
                (ch, link)
            }
        };
        let sequence = set.sequence();
        for r in reqs.iter_mut() {
            r.replay = replay;
            r.channel_sequence = sequence;
        }
        let guard = ch.start(weight);
        let route = session.route_on(&link, encrypt_tree);
        let conn = link.client.connection();
        // A request that may be replayed is handed back by the connection (as it was
        // before it was framed), not copied before sending.
        let (res, keep) = if retain && replays < MAX_REPLAYS {
            conn.send_retained(reqs, &route).await
        } else {
            (conn.send(reqs, &route, false).await.map(|(v, _)| v), None)
        };
        drop(guard);
        match (res, keep) {
            (Ok(v), Some(again))
                if can_replay && v.iter().any(|r| r.status() == NtStatus::FILE_NOT_AVAILABLE) =>
            {
                // The open moved on to a newer ChannelSequence while this
                // request was on its way ([MS-SMB2] 3.2.5.1.x): replay it.
                tracing::debug!("multichannel: FILE_NOT_AVAILABLE, replaying");
                reqs = again;
                replay = true;
                replays += 1;
                // Boxed, as `answers` and `wait_for_live` below: the failover paths'
                // state is not carried by every request's future.
                Box::pin(tokio::time::sleep(FIRST_BACKOFF * replays)).await;
            }
            (Ok(v), kept) => {
                ch.record(sent, v.iter().map(|r| r.msg.len() as u64).sum(), replay);
                for r in kept.into_iter().flatten() {
                    conn.pool().recycle(r.body);
                }
                return (Ok(v), None);
            }
            (Err(e), keep) if channel_lost(&e) && set.len() > 1 => {
                // A request that timed out on a channel that still answers was
                // slow (a long async operation) or its answer was lost in a
                // brief outage: the channel stays; the request is replayed if
                // it may be, else the timeout is the caller's.
                if matches!(e, Error::Timeout) && Box::pin(answers(session, &ch, &link)).await {
                    let Some(again) = keep else {
                        return (Err(e), None);
                    };
                    reqs = again;
                    replay = true;
                    replays += 1;
                    continue;
                }
                channel_failed(session, &ch, &link, &e);
                let Some(again) = keep else {
                    return (Err(e), None);
                };
                if !Box::pin(wait_for_live(set)).await {
                    return (Err(e), Some(again));
                }
                reqs = again;
                replay = true;
                replays += 1;
            }
            (Err(e), keep) => return (Err(e), keep),
        }
    }
}

/// True if `link`, still the channel's connection and not yet known to have
/// failed, answers an ECHO within [`PROBE_WAIT`].
async fn answers(session: &Session, ch: &Channel, link: &Link) -> bool {
    if !ch.link().same(link) || !ch.is_live() {
        return false;
    }
    let echo = Request::new(Command::Echo, smbx_wire::simple::encode_simple(), 0);
    let route = session.route_on(link, false);
    let probe = link.client.connection().call(echo, &route);
    matches!(tokio::time::timeout(PROBE_WAIT, probe).await, Ok(Ok(_)))
}

/// A channel's connection failed under a request: close it, and if this is
/// the first report of it, advance the session's ChannelSequence and start
/// re-establishing the channel.
fn channel_failed(session: &Session, ch: &Arc<Channel>, link: &Link, e: &Error) {
    if ch.fail(link) {
        tracing::warn!(
            "multichannel: channel to {} failed ({e}); replaying its requests elsewhere",
            ch.addr.map_or_else(|| "?".to_string(), |a| a.to_string())
        );
        session.channels().advance_sequence();
        spawn_rebind(session, ch.clone());
    }
}

/// Waits (bounded) until some channel of `set` is live; false if none came
/// back, or the server no longer knows the session (then the caller's tree is
/// re-established on a new one, [`crate::durable`]).
async fn wait_for_live(set: &ChannelSet) -> bool {
    let deadline = tokio::time::Instant::now() + ALL_DOWN_WAIT;
    while !set.any_live() {
        if tokio::time::Instant::now() >= deadline || set.session_gone() {
            return false;
        }
        tokio::time::sleep(FIRST_BACKOFF).await;
    }
    true
}

/// Re-establishes a failed channel in the background: tries its address again
/// with exponential backoff (from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`], at
/// most [`REBIND_ATTEMPTS`] times), and binds the first connection that
/// negotiates to the session in the failed one's place. Stops when the session
/// is gone (dropped here, or deleted on the server).
pub(crate) fn spawn_rebind(session: &Session, ch: Arc<Channel>) {
    let Some(addr) = ch.addr else {
        return;
    };
    let weak = Arc::downgrade(&session.inner);
    tokio::spawn(async move {
        let mut delay = FIRST_BACKOFF;
        for attempt in 1..=REBIND_ATTEMPTS {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_BACKOFF);
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let session = Session { inner };
            if session.channels().session_gone() {
                return;
            }
            match session.bind_one(addr).await {
                Ok(link) => {
                    tracing::info!(
                        "multichannel: channel to {addr} re-established (try {attempt})"
                    );
                    ch.restore(link);
                    return;
                }
                Err(e) if session_gone(&e) => {
                    tracing::warn!("multichannel: {addr} not re-established: {e}");
                    session.channels().mark_session_gone();
                    return;
                }
                Err(e) => tracing::debug!("multichannel: {addr} not back yet: {e}"),
            }
        }
        tracing::warn!("multichannel: gave up re-establishing the channel to {addr}");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(c: Command) -> Request {
        Request::new(c, vec![0; 8], 1)
    }

    #[test]
    fn what_may_be_replayed() {
        assert!(replayable(&[req(Command::Write)]));
        assert!(replayable(&[req(Command::Read)]));
        assert!(replayable(&[
            req(Command::Create),
            req(Command::QueryInfo),
            req(Command::Close)
        ]));
        assert!(!replayable(&[req(Command::Create)]));
        assert!(!replayable(&[req(Command::Lock)]));
        assert!(!replayable(&[
            req(Command::Create),
            req(Command::QueryDirectory),
            req(Command::Close)
        ]));
        assert!(!replayable(&[req(Command::ChangeNotify)]));
        let ioctl = |code: u32| {
            let mut body = vec![0u8; 56];
            body[0..2].copy_from_slice(&57u16.to_le_bytes());
            body[4..8].copy_from_slice(&code.to_le_bytes());
            Request::new(Command::Ioctl, body, 1)
        };
        assert!(replayable(&[ioctl(fsctl::SET_ZERO_DATA)]));
        assert!(replayable(&[ioctl(fsctl::SRV_COPYCHUNK_WRITE)]));
        assert!(!replayable(&[ioctl(fsctl::PIPE_TRANSCEIVE)]));
        assert!(!replayable(&[ioctl(fsctl::PIPE_PEEK)]));
        assert!(!replayable(&[Request::new(Command::Ioctl, vec![0; 3], 1)]));
    }

    #[test]
    fn a_deleted_session_stops_the_rebinding() {
        let st = |status| Error::Status { status, command: 1 };
        assert!(session_gone(&st(NtStatus::USER_SESSION_DELETED)));
        assert!(session_gone(&st(NtStatus::NETWORK_SESSION_EXPIRED)));
        assert!(!session_gone(&st(NtStatus::INSUFFICIENT_RESOURCES)));
        assert!(!session_gone(&Error::Disconnected(
            crate::error::DisconnectReason::ClosedByServer
        )));
    }

    /// What a request sent with `replay` and ChannelSequence 7 looks like on
    /// the wire at `dialect`: (Flags, the low half of Status).
    async fn sent_header(dialect: smbx_wire::Dialect, replay: bool) -> (u32, u32) {
        use crate::conn::{Connection, Route};
        use smbx_wire::header::FLAGS_SERVER_TO_REDIR;
        use smbx_wire::{Header, Writer};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(tokio::net::TcpStream::connect(addr), l.accept());
        let conn = Connection::start(
            c.unwrap(),
            64,
            Some(Duration::from_secs(20)),
            crate::DEFAULT_SPIN_WAIT,
        );
        conn.set_negotiated(dialect, true);
        let mut srv = s.unwrap().0;
        let peer = tokio::spawn(async move {
            let mut len = [0u8; 4];
            srv.read_exact(&mut len).await.unwrap();
            let mut f = vec![0u8; u32::from_be_bytes(len) as usize];
            srv.read_exact(&mut f).await.unwrap();
            let h = Header::decode(&f).unwrap();
            let mut w = Writer::new();
            Header {
                command: h.command,
                credits: 1,
                flags: FLAGS_SERVER_TO_REDIR,
                message_id: h.message_id,
                ..Default::default()
            }
            .encode(&mut w);
            w.bytes(&smbx_wire::simple::encode_simple());
            let r = w.into_vec();
            srv.write_all(&(r.len() as u32).to_be_bytes())
                .await
                .unwrap();
            srv.write_all(&r).await.unwrap();
            (h.flags, h.status.0)
        });
        let mut req = Request::new(Command::Echo, smbx_wire::simple::encode_simple(), 0);
        req.replay = replay;
        req.channel_sequence = 7;
        conn.call(req, &Route::default()).await.unwrap();
        peer.await.unwrap()
    }

    #[tokio::test]
    async fn replay_flag_and_channel_sequence_on_the_wire() {
        use smbx_wire::header::FLAGS_REPLAY_OPERATION;
        use smbx_wire::Dialect;
        let (flags, status) = sent_header(Dialect::SMB3_1_1, true).await;
        assert_ne!(flags & FLAGS_REPLAY_OPERATION, 0);
        assert_eq!(status, 7, "ChannelSequence in the Status field");
        let (flags, status) = sent_header(Dialect::SMB3_0, false).await;
        assert_eq!((flags & FLAGS_REPLAY_OPERATION, status), (0, 7));
        // SMB 2.x has neither: the field is Status, the flag undefined.
        let (flags, status) = sent_header(Dialect::SMB2_1, true).await;
        assert_eq!((flags & FLAGS_REPLAY_OPERATION, status), (0, 0));
    }

    #[test]
    fn lost_channels_are_told_from_refusals() {
        assert!(channel_lost(&Error::Timeout));
        assert!(channel_lost(&Error::Disconnected(
            crate::error::DisconnectReason::ClosedByServer
        )));
        assert!(!channel_lost(&Error::Status {
            status: NtStatus::ACCESS_DENIED,
            command: 9
        }));
    }
}
