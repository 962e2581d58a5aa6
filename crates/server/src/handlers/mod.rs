//! Command handlers: one module per SMB2 command.
//!
//! Every handler has the same shape:
//!
//! ```ignore
//! pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult
//! ```
//!
//! `req.msg` is this compound member from its SMB2 header to its end (offsets in
//! the body are header-relative, as the wire decoders expect). `ctx` carries the
//! connection, the resolved session and tree (the dispatcher has already checked
//! them for commands that need them), the effective header (related-compound ids
//! substituted), and helpers to resolve FileIds. Return `Ok(Response)` with a body
//! (the status may be an informational one such as `BUFFER_OVERFLOW`), `Err(status)`
//! for a plain error response, or `Ok(Response::pending(future))` to go async.

pub mod cancel;
pub mod change_notify;
pub mod close;
pub mod create;
pub mod echo;
pub mod flush;
pub mod ioctl;
pub mod lock;
pub mod logoff;
pub mod negotiate;
pub mod oplock_break;
pub mod pipe;
pub mod query_directory;
pub mod query_info;
pub mod rdma;
pub mod read;
pub mod session_bind;
pub mod session_setup;
pub mod set_info;
pub mod tree_connect;
pub mod tree_disconnect;
pub mod validate_negotiate;
pub mod write;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use smbx_config::Config;
use smbx_wire::error::ErrorResponse;
use smbx_wire::Dialect;
use smbx_wire::{Command, Header, NtStatus, HEADER_SIZE};

use crate::conn::tail::FileTail;
use crate::conn::Connection;
use crate::credits::required_charge;
use crate::state::{FileId, Open, ServerState, Session, Tree};

/// What a handler returns.
pub type HandlerResult = Result<Response, NtStatus>;

/// The future an async handler hands back; it must own everything it uses
/// (clone `Arc`s and ids out of the [`Ctx`]). Dropping it is the cancellation signal.
pub type PendingFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>>;

/// One compound member as received.
pub struct Request<'a> {
    /// This member's bytes, starting at its SMB2 header (NextCommand-bounded).
    pub msg: &'a [u8],
    /// The rest of a lone WRITE's data when it was spliced from the socket instead of
    /// read into `msg` (smbx_transport::splice); `None` for everything else.
    pub payload: Option<&'a smbx_transport::splice::SplicedPayload>,
}

impl Request<'_> {
    /// The body: the bytes after the 64-byte header.
    pub fn body(&self) -> &[u8] {
        self.msg.get(HEADER_SIZE..).unwrap_or(&[])
    }
}

/// A handler's answer.
pub struct Response {
    /// SUCCESS, an informational/warning status with a normal body, or an error status
    /// with an error body (see [`Response::error_with_data`]).
    pub status: NtStatus,
    /// The response body (after the header).
    pub body: Vec<u8>,
    pub(crate) pending: Option<PendingFuture>,
    /// Over SMB Direct: send the response as Send with Invalidate of this client
    /// STag (READ/WRITE with the RDMA_V1_INVALIDATE channel).
    pub(crate) invalidate: Option<u32>,
    /// `body` starts with [`smbx_wire::HEADER_SIZE`] bytes kept free for the
    /// response header, which is then written in place (no copy of the body).
    pub(crate) header_room: bool,
    /// `body` starts with this many more bytes kept free before the header room:
    /// a TRANSFORM_HEADER's, so a lone sealed response is encrypted where it lies.
    pub(crate) seal_room: usize,
    /// READ data that follows `body` on the wire, still in the file (sent from
    /// the page cache, or read in when the response must be signed or sealed).
    pub(crate) tail: Option<FileTail>,
}

impl Response {
    /// A success response whose `msg` holds [`smbx_wire::HEADER_SIZE`] spare
    /// bytes and then the body: the header is written into them in place, so a
    /// large body (READ data) is never copied.
    pub fn ok_with_header_room(msg: Vec<u8>) -> Response {
        Response {
            header_room: true,
            ..Response::ok(msg)
        }
    }

    /// Like [`Response::ok_with_header_room`], with `seal_room` more spare bytes
    /// before the header room: [`smbx_security::transform::TRANSFORM_HEADER_LEN`]
    /// when the response will be sealed (a lone one is then encrypted in place), 0
    /// otherwise.
    pub fn ok_with_room(msg: Vec<u8>, seal_room: usize) -> Response {
        Response {
            seal_room,
            ..Response::ok_with_header_room(msg)
        }
    }

    /// Like [`Response::ok_with_header_room`], the body followed on the wire by
    /// `tail`, data still in the file.
    pub(crate) fn ok_with_tail(msg: Vec<u8>, tail: FileTail) -> Response {
        Response {
            tail: Some(tail),
            ..Response::ok_with_header_room(msg)
        }
    }

    /// A success response with `body`.
    pub fn ok(body: Vec<u8>) -> Response {
        Response {
            status: NtStatus::SUCCESS,
            body,
            pending: None,
            invalidate: None,
            header_room: false,
            seal_room: 0,
            tail: None,
        }
    }

    /// A response with a non-error status (e.g. `BUFFER_OVERFLOW`) and a normal body.
    pub fn with_status(status: NtStatus, body: Vec<u8>) -> Response {
        Response {
            status,
            body,
            pending: None,
            invalidate: None,
            header_room: false,
            seal_room: 0,
            tail: None,
        }
    }

    /// An error response carrying error data (symlink error, 3.1.1 error contexts).
    pub fn error_with_data(status: NtStatus, err: ErrorResponse) -> Response {
        Response {
            status,
            body: err.encode(),
            pending: None,
            invalidate: None,
            header_room: false,
            seal_room: 0,
            tail: None,
        }
    }

    /// Goes async: the dispatcher sends an interim STATUS_PENDING response with a
    /// fresh AsyncId, then the result of `fut` when it completes. A CANCEL naming the
    /// AsyncId (or the MessageId) drops `fut` and answers STATUS_CANCELLED.
    pub fn pending(fut: impl Future<Output = HandlerResult> + Send + 'static) -> Response {
        Response {
            status: NtStatus::PENDING,
            body: Vec::new(),
            pending: Some(Box::pin(fut)),
            invalidate: None,
            header_room: false,
            seal_room: 0,
            tail: None,
        }
    }

    /// The plain 9-byte error body for `status`.
    pub fn error(status: NtStatus) -> Response {
        Response::error_with_data(status, ErrorResponse::empty())
    }
}

/// Where a response must be fed into a preauth integrity hash (3.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PreauthTarget {
    /// The connection hash (NEGOTIATE).
    Connection,
    /// A session's hash (SESSION_SETUP legs).
    Session(u64),
    /// The hash of a channel binding in progress on this connection (3.1.1).
    Binding(u64),
}

/// Per-request context handed to handlers.
pub struct Ctx<'a> {
    /// The connection the request arrived on.
    pub conn: &'a Arc<Connection>,
    /// Server-wide state (sessions, opens, config).
    pub server: &'a Arc<ServerState>,
    /// The effective header: related-compound SessionId/TreeId already substituted.
    pub header: Header,
    /// The session, resolved and checked (None only for NEGOTIATE, SESSION_SETUP of a
    /// new session, and ECHO).
    pub session: Option<Arc<Session>>,
    /// The tree, resolved and checked, for commands that need one.
    pub tree: Option<Arc<Tree>>,
    /// The request arrived inside a TRANSFORM (encrypted).
    pub encrypted: bool,
    /// True if this is the last member of its compound (only then may it go async).
    pub last_in_compound: bool,
    /// What the previous member of the compound leaves for a related one (its
    /// FileId, or the error it failed with).
    pub(crate) related: smbx_wire::compound::Related,
    /// The FileId this member used or created (feeds the next related member).
    pub(crate) file_id: Option<FileId>,
    /// SessionId to put in the response header (SESSION_SETUP of a new session).
    pub(crate) response_session_id: Option<u64>,
    /// TreeId to put in the response header (TREE_CONNECT).
    pub(crate) response_tree_id: Option<u32>,
    /// Feed the response into this preauth hash once it is final.
    pub(crate) preauth_response: Option<PreauthTarget>,
    /// Sign this response with the session's (new) key even though the request
    /// was unsigned (final SESSION_SETUP response).
    pub(crate) sign_response: bool,
    /// The request carried a signature that verified with its session's key.
    pub(crate) signature_ok: bool,
    /// The open this request is counted outstanding on ([MS-SMB2] 3.3.5.2.10),
    /// until the context drops (or, for a request that goes async, until its
    /// final response: [`route`] moves it into the operation).
    pub(crate) channel_seq: Option<crate::state::channel_seq::Outstanding>,
}

impl<'a> Ctx<'a> {
    /// The configuration of this connection (the one in force when it was accepted).
    pub fn config(&self) -> &Config {
        &self.conn.config
    }

    /// The negotiated dialect (0 before NEGOTIATE).
    pub fn dialect(&self) -> Dialect {
        self.conn.dialect()
    }

    /// The command of this request.
    pub fn command(&self) -> Option<Command> {
        self.header.cmd()
    }

    /// The session, or USER_SESSION_DELETED.
    pub fn session(&self) -> Result<&Arc<Session>, NtStatus> {
        self.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)
    }

    /// The tree, or NETWORK_NAME_DELETED.
    pub fn tree(&self) -> Result<&Arc<Tree>, NtStatus> {
        self.tree.as_ref().ok_or(NtStatus::NETWORK_NAME_DELETED)
    }

    /// Resolves a FileId from a request body: the all-ones value in a related member
    /// means "the previous member's FileId" (failing with that member's error if it
    /// failed). Records the result for the next related member.
    pub fn resolve_file_id(&mut self, id: FileId) -> Result<FileId, NtStatus> {
        let id = self.related.resolve(id, self.header.is_related())?;
        self.file_id = Some(id);
        Ok(id)
    }

    /// Resolves `id` (see [`Ctx::resolve_file_id`]) and finds the open, which must
    /// belong to this session and tree; otherwise FILE_CLOSED.
    pub fn lookup_open(&mut self, id: FileId) -> Result<Arc<Open>, NtStatus> {
        let id = self.resolve_file_id(id)?;
        let open = self.server.opens.get(id).ok_or(NtStatus::FILE_CLOSED)?;
        let sid = self.session.as_ref().map(|s| s.id);
        let tid = self.tree.as_ref().map(|t| t.id);
        if Some(open.session_id) != sid || Some(open.tree_id) != tid {
            return Err(NtStatus::FILE_CLOSED);
        }
        if self.dialect() >= smbx_wire::Dialect::SMB3_0 {
            if let Some(f) = open.as_file() {
                // ChannelSequence: the low half of the Status field of a 3.x request.
                let csn = (self.header.status.0 & 0xFFFF) as u16;
                let modifying = matches!(
                    self.command(),
                    Some(Command::Write | Command::Ioctl | Command::SetInfo)
                );
                let replay = self.header.flags & smbx_wire::header::FLAGS_REPLAY_OPERATION != 0;
                if let Some(counted) = f.check_channel_sequence(csn, replay, modifying)? {
                    // A related member's count ends as the next one starts.
                    self.channel_seq = Some(counted);
                }
            }
        }
        if let Some(f) = open.as_file() {
            // The client has this open's CREATE response (create/replay.rs).
            f.note_used();
        }
        Ok(open)
    }

    /// Records the FileId a CREATE produced, for following related members.
    pub fn set_file_id(&mut self, id: FileId) {
        self.file_id = Some(id);
    }

    /// Checks that CreditCharge covers a payload of `len` bytes (READ/WRITE/IOCTL/
    /// QUERY_DIRECTORY...): `ceil(len / 64 KiB)` for dialects above 2.0.2.
    pub fn check_credit_charge(&self, len: usize) -> Result<(), NtStatus> {
        if self.dialect() <= smbx_wire::Dialect::SMB2_0_2 {
            return if len > 65536 {
                Err(NtStatus::INVALID_PARAMETER)
            } else {
                Ok(())
            };
        }
        if self.header.credit_charge.max(1) < required_charge(len) {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        Ok(())
    }
}

/// Routes one request to its handler.
pub(crate) async fn route(cmd: Command, ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let mut r = route_command(cmd, ctx, req).await?;
    // A request that goes async stays outstanding on its open ([MS-SMB2]
    // 3.3.5.2.10) until its final response, not its interim one.
    if r.pending.is_some() {
        if let Some(counted) = ctx.channel_seq.take() {
            let fut = r.pending.take().expect("pending checked above");
            r.pending = Some(Box::pin(counted.held_during(fut)));
        }
    }
    Ok(r)
}

async fn route_command(cmd: Command, ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    match cmd {
        Command::Negotiate => negotiate::handle(ctx, req).await,
        Command::SessionSetup => session_setup::handle(ctx, req).await,
        Command::Logoff => logoff::handle(ctx, req).await,
        Command::TreeConnect => tree_connect::handle(ctx, req).await,
        Command::TreeDisconnect => tree_disconnect::handle(ctx, req).await,
        Command::Create => create::handle(ctx, req).await,
        Command::Close => close::handle(ctx, req).await,
        Command::Flush => flush::handle(ctx, req).await,
        Command::Read => read::handle(ctx, req).await,
        Command::Write => write::handle(ctx, req).await,
        Command::Lock => lock::handle(ctx, req).await,
        Command::Ioctl => ioctl::handle(ctx, req).await,
        Command::Cancel => cancel::handle(ctx, req).await,
        Command::Echo => echo::handle(ctx, req).await,
        Command::QueryDirectory => query_directory::handle(ctx, req).await,
        Command::ChangeNotify => change_notify::handle(ctx, req).await,
        Command::QueryInfo => query_info::handle(ctx, req).await,
        Command::SetInfo => set_info::handle(ctx, req).await,
        Command::OplockBreak => oplock_break::handle(ctx, req).await,
    }
}
