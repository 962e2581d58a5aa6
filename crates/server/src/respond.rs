//! Building, signing, sealing and sending responses, including interim
//! STATUS_PENDING responses and the later completion of async operations.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use smbx_wire::error::ErrorResponse;
use smbx_wire::header::{FLAGS_ASYNC_COMMAND, FLAGS_RELATED_OPERATIONS, FLAGS_SERVER_TO_REDIR};
use smbx_wire::negotiate::{DIALECT_202, DIALECT_300, DIALECT_WILDCARD};
use smbx_wire::{Header, NtStatus, Writer};
use tokio::sync::oneshot;

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
}

/// One response member, ready to be padded, signed and concatenated.
pub(crate) struct OutMember {
    pub bytes: Vec<u8>,
    session: Option<Arc<Session>>,
    sign: bool,
    preauth: Option<PreauthTarget>,
    completion: Option<AsyncCompletion>,
}

fn credit_charge(conn: &Connection, hdr: &Header) -> u16 {
    let d = conn.dialect();
    if d <= DIALECT_202 || d == DIALECT_WILDCARD {
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
    if let Some(fut) = resp.pending.take() {
        match conn.pending.register(req.message_id, session_id) {
            Ok((async_id, cancel)) => {
                h.flags |= FLAGS_ASYNC_COMMAND;
                h.async_id = async_id;
                h.status = NtStatus::PENDING;
                body = ErrorResponse::empty().encode();
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
                });
            }
            Err(st) => {
                h.status = st;
                body = ErrorResponse::empty().encode();
            }
        }
    }
    // Interim responses are signed only in 3.x.
    let sign = sign && (completion.is_none() || conn.dialect() >= DIALECT_300);
    let mut w = Writer::with_capacity(64 + body.len());
    h.encode(&mut w);
    w.bytes(&body);
    OutMember {
        bytes: w.into_vec(),
        session,
        sign,
        preauth: info.preauth_response,
        completion,
    }
}

/// Pads, links, signs, seals and sends a chain of response members; then starts the
/// completion of any async member.
pub(crate) async fn send_chain(
    conn: &Arc<Connection>,
    mut out: Vec<OutMember>,
    encrypted: Option<u64>,
) {
    let n = out.len();
    let mut buf = Vec::with_capacity(out.iter().map(|m| m.bytes.len() + 8).sum());
    let mut completions = Vec::new();
    for (i, m) in out.iter_mut().enumerate() {
        if i + 1 < n {
            let padded = m.bytes.len().next_multiple_of(8);
            m.bytes.resize(padded, 0);
            m.bytes[20..24].copy_from_slice(&(padded as u32).to_le_bytes());
        }
        if let (true, Some(s)) = (m.sign, m.session.as_ref()) {
            security::sign(s, &mut m.bytes);
        }
        if let Some(t) = m.preauth {
            security::preauth_response(conn, t, &m.bytes);
        }
        buf.extend_from_slice(&m.bytes);
        if let Some(c) = m.completion.take() {
            completions.push(c);
        }
    }
    if let Some(sid) = encrypted {
        match security::seal(conn, sid, buf) {
            Ok(b) => buf = b,
            Err(_) => {
                conn.close();
                return;
            }
        }
    }
    conn.send(buf).await;
    for c in completions {
        let conn = conn.clone();
        tokio::spawn(complete(conn, c, encrypted));
    }
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
    } = c;
    let result = tokio::select! {
        r = AssertUnwindSafe(fut).catch_unwind() => r.unwrap_or(Err(NtStatus::INTERNAL_ERROR)),
        _ = cancel => Err(NtStatus::CANCELLED),
    };
    conn.pending.remove(async_id);
    let (status, body) = match result {
        Ok(r) if r.pending.is_none() => (r.status, r.body),
        Ok(_) => (NtStatus::INTERNAL_ERROR, ErrorResponse::empty().encode()),
        Err(st) => (st, ErrorResponse::empty().encode()),
    };
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
        security::sign(s, &mut msg);
    }
    if let Some(sid) = encrypted {
        match security::seal(&conn, sid, msg) {
            Ok(b) => msg = b,
            Err(_) => return,
        }
    }
    conn.send(msg).await;
}
