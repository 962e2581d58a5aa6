//! One SMB2 connection over a message link (Direct TCP or SMB Direct, see
//! [`smbx_transport::link`]): requests go out through the link's sender, a reader task
//! unseals, verifies and routes responses to the waiting requests by MessageId, and the
//! credit window that bounds how many requests are in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use smbx_security::protection::Protection;
use smbx_security::signing::Signer;
use smbx_security::transform::TRANSFORM_HEADER_LEN;
use smbx_transport::link::{self, LinkError, MessageReceiver, MessageSender};
use smbx_transport::DirectLink;
use smbx_wire::compound;
use smbx_wire::framing::MAX_FRAME_LEN;
use smbx_wire::header::{
    FLAGS_ASYNC_COMMAND, FLAGS_RELATED_OPERATIONS, FLAGS_REPLAY_OPERATION, FLAGS_SIGNED,
    TRANSFORM_PROTOCOL_ID,
};
use smbx_wire::oplock::OplockBreak;
use smbx_wire::Dialect;
use smbx_wire::{Command, Header, NtStatus, WireError, Writer, HEADER_SIZE};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;
use tracing::{debug, trace, warn};

use crate::credits::credit_request;
use crate::error::{DisconnectReason, Error, ProtocolError, Result, SecurityError};

/// The MessageId of unsolicited server messages (oplock and lease breaks).
const UNSOLICITED_ID: u64 = u64::MAX;
/// Events buffered before further ones are dropped.
const EVENT_QUEUE: usize = 256;

/// One request of a (possibly compound) send.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The command.
    pub command: Command,
    /// The body (everything after the 64-byte header).
    pub body: Vec<u8>,
    /// TreeId (0 when not tree-scoped).
    pub tree_id: u32,
    /// Credits this request costs (see [`crate::credits::charge_for`]); at least 1.
    pub charge: u16,
    /// True for the second and later members of a related compound.
    pub related: bool,
    /// True if `body` starts with [`HEADROOM`] reserved bytes, so that a lone request can
    /// become its frame without another copy.
    pub headroom: bool,
    /// Send with SMB2_FLAGS_REPLAY_OPERATION (3.x): a request resent after its
    /// channel failed (multichannel failover, channels.rs).
    pub replay: bool,
    /// ChannelSequence (3.x), carried in the low half of the header's Status
    /// field: the session's count of channel failures ([MS-SMB2] 3.2.4.1).
    pub channel_sequence: u16,
}

/// Bytes reserved before a body built with [`body_writer`]: frame header, TRANSFORM_HEADER
/// and SMB2 header.
pub(crate) const HEADROOM: usize = 4 + TRANSFORM_HEADER_LEN + HEADER_SIZE;

/// A writer for a request body, with [`HEADROOM`] reserved in front. A large one (a
/// WRITE's) is in a buffer from `pool`, which the writer task gives back once sent, so
/// its pages are not faulted in afresh for every request.
pub(crate) fn body_writer(pool: &smbx_transport::BufPool, body_len: usize) -> Writer {
    let mut w = Writer::from_vec(pool.take_spare(HEADROOM + body_len));
    w.zeros(HEADROOM);
    w
}

impl Request {
    /// A request costing one credit.
    pub fn new(command: Command, body: Vec<u8>, tree_id: u32) -> Request {
        Request {
            command,
            body,
            tree_id,
            charge: 1,
            related: false,
            headroom: false,
            replay: false,
            channel_sequence: 0,
        }
    }

    /// A request whose body was built with [`body_writer`].
    pub fn with_headroom(command: Command, body: Writer, tree_id: u32) -> Request {
        Request {
            headroom: true,
            ..Request::new(command, body.into_vec(), tree_id)
        }
    }
}

/// One response: its header and the whole message starting at the header.
#[derive(Debug, Clone)]
pub struct Response {
    /// The decoded header.
    pub header: Header,
    /// The message (header, body, and for compound members any padding).
    pub msg: Vec<u8>,
}

impl Response {
    /// The response status.
    pub fn status(&self) -> NtStatus {
        self.header.status
    }
    /// Ok(self) on success, the typed error otherwise.
    pub fn ok(self) -> Result<Response> {
        if self.header.status.is_error() {
            return Err(Error::Status {
                status: self.header.status,
                command: self.header.command,
            });
        }
        Ok(self)
    }
}

/// Something the server sent without being asked.
#[derive(Debug, Clone)]
pub enum Event {
    /// An oplock break notification.
    OplockBreak(OplockBreak),
    /// Any other unsolicited message (lease break notifications), raw.
    Other(Response),
}

/// A session's keys on this connection and the client's policy for them.
#[derive(Debug, Default)]
pub(crate) struct SessionSecurity {
    /// Signs requests, verifies responses, seals requests and unseals responses.
    pub keys: Protection,
    /// Sign requests and require signed responses (when not sealed).
    pub sign: bool,
    /// Seal every request of the session.
    pub encrypt: bool,
}

impl SessionSecurity {
    /// The protection of a channel bound to this session ([MS-SMB2] 3.2.5.3.1):
    /// its own signer, the session's policy, sealing keys and nonce source.
    pub fn for_channel(&self, signer: Signer) -> SessionSecurity {
        SessionSecurity {
            keys: self.keys.for_channel(signer),
            sign: self.sign,
            encrypt: self.encrypt,
        }
    }
}

/// Where a send goes: its session and whether it is sealed.
#[derive(Clone, Default)]
pub(crate) struct Route {
    /// SessionId (0 before a session exists).
    pub session_id: u64,
    /// The session's keys, if it has any.
    pub security: Option<Arc<SessionSecurity>>,
    /// Seal the message.
    pub encrypt: bool,
    /// Sign even if the session does not require it (3.1.1 TREE_CONNECT, 3.0.x
    /// VALIDATE_NEGOTIATE_INFO).
    pub force_sign: bool,
}

struct Pending {
    tx: oneshot::Sender<Result<Response>>,
    charge: u16,
    async_id: Option<u64>,
}

#[derive(Default)]
struct Table {
    pending: HashMap<u64, Pending>,
    /// Why the connection is closed, once it is.
    closed: Option<DisconnectReason>,
}

struct Shared {
    table: Mutex<Table>,
    sessions: RwLock<HashMap<u64, Arc<SessionSecurity>>>,
    credits: Semaphore,
    next_message_id: Mutex<u64>,
    in_flight: AtomicUsize,
    dialect: AtomicU16,
    large_mtu: AtomicBool,
    max_credits: u16,
    events: mpsc::Sender<Event>,
    /// I/O buffers reused across operations: RDMA transfer buffers over SMB
    /// Direct, received frames of 64 KiB and more over TCP.
    pool: Arc<smbx_transport::BufPool>,
}

impl Shared {
    fn close(&self, why: DisconnectReason) {
        let pending = {
            let mut t = self.table.lock().expect("table lock");
            if t.closed.is_none() {
                t.closed = Some(why.clone());
            }
            std::mem::take(&mut t.pending)
        };
        self.credits.close();
        for (_, p) in pending {
            let _ = p.tx.send(Err(Error::Disconnected(why.clone())));
        }
    }

    fn session(&self, id: u64) -> Option<Arc<SessionSecurity>> {
        self.sessions
            .read()
            .expect("sessions lock")
            .get(&id)
            .cloned()
    }
}

/// A connection to one server.
pub struct Connection {
    shared: Arc<Shared>,
    /// Unbounded so that nothing awaits between spending MessageIds and queueing the frame
    /// (a cancelled caller must not leave a hole in the server's window); the credit
    /// window bounds what can be queued.
    sender: Box<dyn MessageSender>,
    events: Mutex<Option<mpsc::Receiver<Event>>>,
    timeout: Option<Duration>,
    tasks: Vec<JoinHandle<()>>,
    direct: Option<Arc<dyn DirectLink>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("credits", &self.shared.credits.available_permits())
            .field("in_flight", &self.shared.in_flight.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Connection {
    /// Wraps a connected socket and starts the reader and writer tasks.
    pub(crate) fn start(
        stream: TcpStream,
        max_credits: u16,
        timeout: Option<Duration>,
    ) -> Connection {
        let (shared, events_rx) = Self::shared(max_credits, 8);
        // Frames of the usual I/O sizes land in pooled buffers, never zero-filled first.
        let (tx, rx, writer) = link::tcp(stream, MAX_FRAME_LEN, shared.pool.clone());
        let reader = tokio::spawn(reader_task(Box::new(rx), shared.clone()));
        let sh = shared.clone();
        let writer = tokio::spawn(async move {
            if let Err(e) = writer.await {
                sh.close(DisconnectReason::Write(Arc::new(e)));
            }
        });
        Connection {
            shared,
            sender: Box::new(tx),
            events: Mutex::new(Some(events_rx)),
            timeout,
            tasks: vec![reader, writer],
            direct: None,
        }
    }

    /// Runs over a negotiated SMB Direct link: messages without the Direct-TCP
    /// prefix, READ and WRITE data by RDMA where the file operations ask for it.
    pub(crate) fn start_direct(
        link: Arc<dyn DirectLink>,
        max_credits: u16,
        timeout: Option<Duration>,
    ) -> Connection {
        let (shared, events_rx) = Self::shared(max_credits, 64);
        // Requests are posted on the link as they are sent: no writer task.
        let (tx, rx) = link::direct(link.clone());
        let reader = tokio::spawn(reader_task(Box::new(rx), shared.clone()));
        Connection {
            shared,
            sender: Box::new(tx),
            events: Mutex::new(Some(events_rx)),
            timeout,
            tasks: vec![reader],
            direct: Some(link),
        }
    }

    /// The pool of I/O buffers: RDMA transfer buffers, or received frames.
    pub(crate) fn pool(&self) -> &Arc<smbx_transport::BufPool> {
        &self.shared.pool
    }

    /// The SMB Direct link, when the connection runs over one.
    pub(crate) fn direct(&self) -> Option<&Arc<dyn DirectLink>> {
        self.direct.as_ref()
    }

    fn shared(max_credits: u16, pool: usize) -> (Arc<Shared>, mpsc::Receiver<Event>) {
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::default()),
            sessions: RwLock::new(HashMap::new()),
            credits: Semaphore::new(1),
            next_message_id: Mutex::new(0),
            in_flight: AtomicUsize::new(0),
            dialect: AtomicU16::new(0),
            large_mtu: AtomicBool::new(false),
            max_credits: max_credits.max(1),
            events: events_tx,
            pool: Arc::new(smbx_transport::BufPool::new(pool)),
        });
        (shared, events_rx)
    }

    /// Records the negotiated dialect and whether multi-credit requests are allowed.
    pub(crate) fn set_negotiated(&self, dialect: Dialect, large_mtu: bool) {
        self.shared
            .dialect
            .store(dialect.as_u16(), Ordering::Relaxed);
        self.shared.large_mtu.store(large_mtu, Ordering::Relaxed);
    }

    /// True if multi-credit requests are allowed.
    pub(crate) fn large_mtu(&self) -> bool {
        self.shared.large_mtu.load(Ordering::Relaxed)
    }

    /// Installs a session's keys, so responses on it are verified and unsealed.
    pub(crate) fn add_session(&self, id: u64, sec: Arc<SessionSecurity>) {
        self.shared
            .sessions
            .write()
            .expect("sessions lock")
            .insert(id, sec);
    }

    /// Forgets a session's keys.
    pub(crate) fn remove_session(&self, id: u64) {
        self.shared
            .sessions
            .write()
            .expect("sessions lock")
            .remove(&id);
    }

    /// The receiver of unsolicited messages (oplock and lease breaks); only the first
    /// caller gets it.
    pub fn take_events(&self) -> Option<mpsc::Receiver<Event>> {
        self.events.lock().expect("events lock").take()
    }

    /// Credits currently granted and unused.
    pub fn credits_available(&self) -> usize {
        self.shared.credits.available_permits()
    }

    /// True once the connection has failed or been closed.
    pub fn is_closed(&self) -> bool {
        self.shared
            .table
            .lock()
            .expect("table lock")
            .closed
            .is_some()
    }

    /// Sends requests as one compound (a single request is a compound of one) and waits
    /// for all their responses. With `keep_sent`, also returns the plaintext bytes of the
    /// message as sent (for the preauth integrity hash).
    pub(crate) async fn send(
        &self,
        mut reqs: Vec<Request>,
        route: &Route,
        keep_sent: bool,
    ) -> Result<(Vec<Response>, Option<Vec<u8>>)> {
        if reqs.is_empty() {
            return Ok((Vec::new(), None));
        }
        let sh = &self.shared;
        let large_mtu = sh.large_mtu.load(Ordering::Relaxed);
        let dialect = Dialect::from_u16(sh.dialect.load(Ordering::Relaxed));
        let charges: Vec<u16> = reqs
            .iter()
            .map(|r| if large_mtu { r.charge.max(1) } else { 1 })
            .collect();
        let total: u32 = charges.iter().map(|&c| c as u32).sum();
        // Wait for the window to hold enough credits, then spend them.
        let permits = sh
            .credits
            .acquire_many(total)
            .await
            .map_err(|_| self.closed_error())?;
        permits.forget();
        let first_id = {
            let mut id = sh.next_message_id.lock().expect("message id lock");
            let first = *id;
            *id += total as u64;
            first
        };
        let in_flight = sh.in_flight.fetch_add(total as usize, Ordering::Relaxed);
        let ask = credit_request(
            total.min(u16::MAX as u32) as u16,
            sh.credits.available_permits(),
            in_flight,
            sh.max_credits,
        );

        let seal_with = if route.encrypt {
            let sec = route
                .security
                .as_ref()
                .filter(|s| s.keys.can_seal())
                .ok_or(ProtocolError::CannotSeal)?;
            Some(sec.clone())
        } else {
            None
        };
        let signer = match (&route.security, route.encrypt) {
            (Some(s), false) if s.sign || route.force_sign => s.keys.signer(),
            _ => None,
        };

        // A single request built with headroom becomes the frame in place; otherwise the
        // members are copied into one buffer. Either way the layout is
        // [frame header][TRANSFORM_HEADER if sealed][message...], starting at `frame_start`.
        let sealed = seal_with.is_some();
        let n = reqs.len();
        let in_place = n == 1 && reqs[0].headroom;
        let mut ids = Vec::with_capacity(n);
        let mut headers = Vec::with_capacity(n);
        let mut next_id = first_id;
        for (i, (req, &charge)) in reqs.iter().zip(&charges).enumerate() {
            let mut flags = 0;
            if req.related {
                flags |= FLAGS_RELATED_OPERATIONS;
            }
            let smb3 = dialect.is_smb3();
            if req.replay && smb3 {
                flags |= FLAGS_REPLAY_OPERATION;
            }
            headers.push(Header {
                credit_charge: if dialect == Dialect::SMB2_0_2 || dialect == Dialect::NONE {
                    0
                } else {
                    charge
                },
                status: NtStatus(if smb3 { req.channel_sequence as u32 } else { 0 }),
                command: req.command as u16,
                credits: if i == 0 { ask } else { charge },
                flags,
                next_command: 0,
                message_id: next_id,
                async_id: 0,
                tree_id: req.tree_id,
                session_id: route.session_id,
                signature: [0; 16],
            });
            ids.push((next_id, charge));
            next_id += charge as u64;
        }
        let encode = |h: &Header| {
            let mut w = Writer::with_capacity(HEADER_SIZE);
            h.encode(&mut w);
            w
        };
        // A single request built with headroom becomes the frame in place; otherwise the
        // members are chained into one buffer. Either way the layout is
        // [frame header][TRANSFORM_HEADER if sealed][message...], starting at `frame_start`.
        let (mut buf, frame_start, msg_start) = if in_place {
            let mut b = std::mem::take(&mut reqs[0].body);
            let frame_start = if sealed { 0 } else { TRANSFORM_HEADER_LEN };
            let msg_start = HEADROOM - HEADER_SIZE;
            b[msg_start..HEADROOM].copy_from_slice(encode(&headers[0]).as_slice());
            if let Some(signer) = signer {
                signer.sign(&mut b[msg_start..]);
            }
            (b, frame_start, msg_start)
        } else {
            let body_len: usize = reqs.iter().map(|r| HEADER_SIZE + r.body.len() + 8).sum();
            let prefix = 4 + if sealed { TRANSFORM_HEADER_LEN } else { 0 };
            let mut b = Vec::with_capacity(prefix + body_len);
            b.resize(prefix, 0);
            let mut chain = compound::Builder::new(b);
            for (req, hdr) in reqs.iter().zip(&headers) {
                let m = chain.member();
                m.extend_from_slice(encode(hdr).as_slice());
                let body = if req.headroom {
                    req.body.get(HEADROOM..).unwrap_or_default()
                } else {
                    &req.body[..]
                };
                m.extend_from_slice(body);
            }
            let (mut b, members) = chain.finish(false);
            if let Some(signer) = signer {
                for r in members {
                    signer.sign(&mut b[r]);
                }
            }
            (b, 0, prefix)
        };
        let sent = keep_sent.then(|| buf[msg_start..].to_vec());

        // Register the waiters before the bytes can reach the server.
        let mut rxs = Vec::with_capacity(n);
        {
            let mut t = sh.table.lock().expect("table lock");
            if let Some(why) = &t.closed {
                return Err(Error::Disconnected(why.clone()));
            }
            for &(id, charge) in &ids {
                let (tx, rx) = oneshot::channel();
                t.pending.insert(
                    id,
                    Pending {
                        tx,
                        charge,
                        async_id: None,
                    },
                );
                rxs.push(rx);
            }
        }

        if let Some(sec) = &seal_with {
            sec.keys.seal_in_place(route.session_id, &mut buf[4..])?;
        }
        // Queued, never awaited: no MessageId is left unsent by a cancelled caller.
        if let Err(e) = self.sender.send(buf, frame_start + 4) {
            return Err(self.send_failed(e));
        }

        let mut out = Vec::with_capacity(n);
        for rx in rxs {
            let r = match self.timeout {
                Some(d) => match tokio::time::timeout(d, rx).await {
                    Ok(r) => r,
                    Err(_) => {
                        let tree_id = reqs.get(out.len()).map_or(0, |r| r.tree_id);
                        for (id, async_id) in self.forget(&ids[out.len()..]) {
                            self.cancel(route, id, async_id, tree_id);
                        }
                        return Err(Error::Timeout);
                    }
                },
                None => rx.await,
            };
            out.push(r.map_err(|_| self.closed_error())??);
        }
        Ok((out, sent))
    }

    /// Stops waiting for these MessageIds (after a timeout); their credits stay spent.
    /// Returns the ones that were still pending, with their AsyncId if they went async.
    fn forget(&self, ids: &[(u64, u16)]) -> Vec<(u64, Option<u64>)> {
        let mut t = self.shared.table.lock().expect("table lock");
        let mut out = Vec::new();
        for (id, _) in ids {
            if let Some(p) = t.pending.remove(id) {
                self.shared
                    .in_flight
                    .fetch_sub(p.charge as usize, Ordering::Relaxed);
                out.push((*id, p.async_id));
            }
        }
        out
    }

    /// Sends SMB2 CANCEL for a request (async form when it went async). CANCEL takes no
    /// credit and gets no response of its own; failures are ignored.
    fn cancel(&self, route: &Route, message_id: u64, async_id: Option<u64>, tree_id: u32) {
        let mut hdr = Header {
            command: Command::Cancel as u16,
            message_id,
            tree_id,
            session_id: route.session_id,
            ..Default::default()
        };
        if let Some(a) = async_id {
            hdr.flags |= FLAGS_ASYNC_COMMAND;
            hdr.async_id = a;
        }
        let sealed = route.encrypt;
        let prefix = 4 + if sealed { TRANSFORM_HEADER_LEN } else { 0 };
        let mut w = Writer::with_capacity(prefix + HEADER_SIZE + 4);
        w.zeros(prefix);
        hdr.encode(&mut w);
        w.bytes(&smbx_wire::simple::SIMPLE_BODY);
        let mut buf = w.into_vec();
        let sec = route.security.as_ref();
        if sealed {
            let Some(sec) = sec else { return };
            if sec
                .keys
                .seal_in_place(route.session_id, &mut buf[4..])
                .is_err()
            {
                return;
            }
        } else if let Some(sec) = sec.filter(|s| s.sign) {
            sec.keys.sign(&mut buf[prefix..]);
        }
        let _ = self.sender.send(buf, 4);
    }

    /// The error of a send the link refused; a failed link closes the connection.
    fn send_failed(&self, e: LinkError) -> Error {
        match e {
            LinkError::Direct(e) => self.shared.close(DisconnectReason::DirectSend(Arc::new(e))),
            LinkError::TooLarge => {
                return WireError::Invalid("message too large for the transport").into()
            }
            LinkError::Closed | LinkError::Frame(_) => {}
        }
        self.closed_error()
    }

    fn closed_error(&self) -> Error {
        let why = self
            .shared
            .table
            .lock()
            .expect("table lock")
            .closed
            .clone()
            .unwrap_or(DisconnectReason::Unknown);
        Error::Disconnected(why)
    }

    /// Sends one request and returns its response (error statuses included).
    pub(crate) async fn call(&self, req: Request, route: &Route) -> Result<Response> {
        let (mut v, _) = self.send(vec![req], route, false).await?;
        v.pop().ok_or_else(|| ProtocolError::NoResponse.into())
    }

    /// Fails every pending request (and any later one) with `why`, but keeps the
    /// socket open and its tasks running: a multichannel session's channel that
    /// stopped answering is given up this way, so that the server does not see
    /// the connection end (and end the session with its last channel) before a
    /// new channel is bound; dropping the `Connection` closes it.
    pub(crate) fn fail_requests(&self, why: DisconnectReason) {
        self.shared.close(why);
    }

    /// Closes the connection: pending requests fail, tasks stop.
    pub fn close(&self) {
        self.shared.close(DisconnectReason::ClosedByClient);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Receives whole messages until the link fails or the server closes it.
async fn reader_task(mut rx: Box<dyn MessageReceiver>, shared: Arc<Shared>) {
    let why = loop {
        match rx.recv().await {
            Ok(Some(msg)) => {
                if let Err(e) = process_frame(msg, &shared) {
                    break DisconnectReason::Receive(Arc::new(e));
                }
            }
            Ok(None) => break DisconnectReason::ClosedByServer,
            Err(LinkError::Direct(e)) => break DisconnectReason::from(e),
            Err(e) => {
                let e = Error::from(ProtocolError::Frame(match e {
                    LinkError::Frame(why) => why,
                    _ => "link closed",
                }));
                break DisconnectReason::Receive(Arc::new(e));
            }
        }
    };
    debug!("connection reader stops: {why}");
    shared.close(why);
    rx.close().await;
}

/// Unseals a frame if needed, splits a compound, and dispatches each response. Errors
/// returned here are fatal to the connection; per-message failures go to their waiter.
fn process_frame(frame: Vec<u8>, shared: &Shared) -> Result<()> {
    let (plain, encrypted) = if frame.get(..4) == Some(&TRANSFORM_PROTOCOL_ID[..]) {
        let th = smbx_security::transform::parse_header(&frame)?;
        let sec = shared
            .session(th.session_id)
            .ok_or(ProtocolError::UnknownSession(th.session_id))?;
        if !sec.keys.can_seal() {
            return Err(ProtocolError::SealedWithoutCipher.into());
        }
        // Decrypted straight into a buffer of the plaintext's size (no move of the
        // plaintext over the TRANSFORM_HEADER afterwards).
        let plain = sec
            .keys
            .unseal_with(&frame, |n| shared.pool.take_exact(n))
            .map_err(SecurityError::Unseal)?;
        shared.pool.recycle(frame);
        (plain, true)
    } else {
        (frame, false)
    };
    // Fast path: a single, uncompounded response keeps its buffer.
    let first = Header::decode(&plain)?;
    if first.next_command == 0 {
        dispatch(first, plain, encrypted, shared);
        return Ok(());
    }
    let mut members = compound::members(&plain);
    while let Some(m) = members.next() {
        let m = m.map_err(|e| ProtocolError::BadCompound {
            what: e.reason(),
            offset: members.offset(),
        })?;
        dispatch(m.header, plain[m.range].to_vec(), encrypted, shared);
    }
    Ok(())
}

fn dispatch(h: Header, mut msg: Vec<u8>, encrypted: bool, shared: &Shared) {
    if !h.is_response() {
        warn!("ignoring a request from the server (command {})", h.command);
        return;
    }
    if h.credits > 0 {
        shared.credits.add_permits(h.credits as usize);
    }
    let interim = h.status == NtStatus::PENDING && h.is_async();
    // Verify before believing anything else the message says.
    let mut verdict: Result<()> = Ok(());
    if h.message_id != UNSOLICITED_ID && h.session_id != 0 {
        if let Some(sec) = shared.session(h.session_id) {
            if !encrypted {
                if sec.encrypt && !interim {
                    verdict = Err(SecurityError::Unencrypted { command: h.command }.into());
                } else if h.flags & FLAGS_SIGNED != 0 {
                    // In place: a GMAC check would otherwise copy the message.
                    if sec.keys.can_sign() && !sec.keys.verify_in_place(&mut msg) {
                        verdict = Err(SecurityError::BadSignature { command: h.command }.into());
                    }
                } else if sec.sign && !interim {
                    verdict = Err(SecurityError::Unsigned { command: h.command }.into());
                }
            }
        }
    }
    if h.message_id == UNSOLICITED_ID {
        if verdict.is_ok() {
            let ev = match OplockBreak::decode(&msg) {
                Ok(b) if h.command == Command::OplockBreak as u16 => Event::OplockBreak(b),
                _ => Event::Other(Response { header: h, msg }),
            };
            if shared.events.try_send(ev).is_err() {
                warn!("dropping an unsolicited message: nobody reads events");
            }
        }
        return;
    }
    let mut t = shared.table.lock().expect("table lock");
    if interim && verdict.is_ok() {
        if let Some(p) = t.pending.get_mut(&h.message_id) {
            trace!("message {} went async ({:#x})", h.message_id, h.async_id);
            p.async_id = Some(h.async_id);
        }
        return;
    }
    match t.pending.remove(&h.message_id) {
        Some(p) => {
            drop(t);
            shared
                .in_flight
                .fetch_sub(p.charge as usize, Ordering::Relaxed);
            let _ = p.tx.send(verdict.map(|_| Response { header: h, msg }));
        }
        None => debug!("response to unknown message id {}", h.message_id),
    }
}

#[cfg(test)]
mod tests {
    //! The connection against a scripted peer on loopback: interim responses, compound
    //! splitting, credit accounting, unsolicited messages, signature checks, disconnects.

    use super::*;
    use smbx_security::signing::{Signer, SigningAlgorithm};
    use smbx_wire::header::{FLAGS_ASYNC_COMMAND, FLAGS_SERVER_TO_REDIR};
    use smbx_wire::simple::encode_simple;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (Connection, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        (
            Connection::start(c.unwrap(), 64, Some(Duration::from_secs(20))),
            s.unwrap().0,
        )
    }

    async fn read_frame(s: &mut TcpStream) -> Vec<u8> {
        let mut h = [0u8; 4];
        s.read_exact(&mut h).await.unwrap();
        let mut b = vec![0u8; u32::from_be_bytes(h) as usize];
        s.read_exact(&mut b).await.unwrap();
        b
    }

    async fn write_frame(s: &mut TcpStream, msg: &[u8]) {
        s.write_all(&(msg.len() as u32).to_be_bytes())
            .await
            .unwrap();
        s.write_all(msg).await.unwrap();
    }

    fn response(req: &Header, status: NtStatus, credits: u16, flags: u32, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            status,
            command: req.command,
            credits,
            flags: FLAGS_SERVER_TO_REDIR | flags,
            message_id: req.message_id,
            async_id: if flags & FLAGS_ASYNC_COMMAND != 0 {
                77
            } else {
                0
            },
            tree_id: req.tree_id,
            session_id: req.session_id,
            ..Default::default()
        }
        .encode(&mut w);
        w.bytes(body);
        w.into_vec()
    }

    #[tokio::test]
    async fn interim_pending_then_final() {
        let (conn, mut srv) = pair().await;
        let server = tokio::spawn(async move {
            let f = read_frame(&mut srv).await;
            let h = Header::decode(&f).unwrap();
            write_frame(
                &mut srv,
                &response(
                    &h,
                    NtStatus::PENDING,
                    3,
                    FLAGS_ASYNC_COMMAND,
                    &[9, 0, 0, 0, 0, 0, 0, 0, 0],
                ),
            )
            .await;
            write_frame(
                &mut srv,
                &response(
                    &h,
                    NtStatus::SUCCESS,
                    0,
                    FLAGS_ASYNC_COMMAND,
                    &encode_simple(),
                ),
            )
            .await;
            srv
        });
        let r = conn
            .call(
                Request::new(Command::Echo, encode_simple(), 0),
                &Route::default(),
            )
            .await
            .unwrap();
        assert_eq!(r.status(), NtStatus::SUCCESS);
        assert_eq!(r.header.async_id, 77);
        // The interim response's credits count; the request's own credit was spent.
        assert_eq!(conn.credits_available(), 3);
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn compound_split_and_credit_charges() {
        let (conn, mut srv) = pair().await;
        conn.set_negotiated(Dialect::SMB3_1_1, true);
        let server = tokio::spawn(async move {
            // 1: one echo, granted 10 credits.
            let f = read_frame(&mut srv).await;
            let h = Header::decode(&f).unwrap();
            assert_eq!(h.message_id, 0);
            write_frame(
                &mut srv,
                &response(&h, NtStatus::SUCCESS, 10, 0, &encode_simple()),
            )
            .await;
            // 2: a compound of a 4-credit and a 1-credit request, answered as one chain.
            let f = read_frame(&mut srv).await;
            let a = Header::decode(&f).unwrap();
            assert_eq!((a.message_id, a.credit_charge), (1, 4));
            // 64-byte header + 10-byte body, padded to 8 (headroom is not sent).
            assert_eq!(a.next_command, 80);
            let b = Header::decode(&f[a.next_command as usize..]).unwrap();
            assert_eq!((b.message_id, b.credit_charge), (5, 1));
            assert!(b.is_related());
            let mut chain = response(&a, NtStatus::SUCCESS, 4, 0, &encode_simple());
            chain.resize(chain.len().next_multiple_of(8), 0);
            let next = chain.len() as u32;
            chain[20..24].copy_from_slice(&next.to_le_bytes());
            chain.extend_from_slice(&response(
                &b,
                NtStatus::OBJECT_NAME_NOT_FOUND,
                1,
                0,
                &[9, 0, 0, 0, 0, 0, 0, 0, 0],
            ));
            write_frame(&mut srv, &chain).await;
            srv
        });
        conn.call(
            Request::new(Command::Echo, encode_simple(), 0),
            &Route::default(),
        )
        .await
        .unwrap();
        assert_eq!(conn.credits_available(), 10);
        let mut body = body_writer(&smbx_transport::BufPool::new(1), 10);
        body.zeros(10);
        let mut big = Request::with_headroom(Command::Read, body, 1);
        big.charge = 4;
        let mut second = Request::new(Command::Close, vec![0; 10], 1);
        second.related = true;
        let (v, _) = conn
            .send(vec![big, second], &Route::default(), false)
            .await
            .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].status(), NtStatus::SUCCESS);
        assert_eq!(v[1].status(), NtStatus::OBJECT_NAME_NOT_FOUND);
        assert_eq!(
            v[1].clone().ok().unwrap_err().to_string(),
            "STATUS_OBJECT_NAME_NOT_FOUND"
        );
        // 10 granted - 5 spent + 5 granted back.
        assert_eq!(conn.credits_available(), 10);
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn never_exceeds_the_granted_window() {
        let (conn, mut srv) = pair().await;
        let conn = Arc::new(conn);
        // Only one credit: two concurrent requests must go one after the other.
        let c2 = conn.clone();
        let both = tokio::spawn(async move {
            let route = Route::default();
            let a = c2.call(Request::new(Command::Echo, encode_simple(), 0), &route);
            let b = c2.call(Request::new(Command::Echo, encode_simple(), 0), &route);
            let (a, b) = tokio::join!(a, b);
            (a.unwrap().header.message_id, b.unwrap().header.message_id)
        });
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        assert_eq!(h.message_id, 0);
        // The second request cannot have been sent: no credit is left.
        assert_eq!(conn.credits_available(), 0);
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple()),
        )
        .await;
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        assert_eq!(h.message_id, 1);
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple()),
        )
        .await;
        let (a, b) = both.await.unwrap();
        let mut ids = [a, b];
        ids.sort();
        assert_eq!(ids, [0, 1]);
    }

    #[tokio::test]
    async fn oplock_break_goes_to_events() {
        let (conn, mut srv) = pair().await;
        let mut events = conn.take_events().unwrap();
        assert!(conn.take_events().is_none());
        let mut body = Writer::new();
        body.u16(24).u8(1).u8(0).u32(0).u64(5).u64(6);
        let h = Header {
            command: Command::OplockBreak as u16,
            message_id: UNSOLICITED_ID,
            ..Default::default()
        };
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 0, 0, body.as_slice()),
        )
        .await;
        match events.recv().await.unwrap() {
            Event::OplockBreak(b) => {
                assert_eq!(b.oplock_level, smbx_wire::oplock::OplockLevel::II);
                assert_eq!(b.file_id.volatile, 6);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn signatures_are_checked() {
        let (conn, mut srv) = pair().await;
        let key = [0x42u8; 16];
        let sec = SessionSecurity {
            keys: Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &key)),
            sign: true,
            ..SessionSecurity::default()
        };
        let sec = Arc::new(sec);
        conn.add_session(9, sec.clone());
        let route = Route {
            session_id: 9,
            security: Some(sec),
            ..Default::default()
        };
        let server = tokio::spawn(async move {
            let signer = Signer::new(SigningAlgorithm::AesCmac, &key);
            for case in 0..3 {
                let f = read_frame(&mut srv).await;
                assert!(signer.verify(&f), "request {case} not signed");
                let h = Header::decode(&f).unwrap();
                let mut r = response(&h, NtStatus::SUCCESS, 1, 0, &encode_simple());
                match case {
                    0 => signer.sign(&mut r),
                    1 => {
                        signer.sign(&mut r);
                        r[66] ^= 1; // tamper with the body after signing
                    }
                    _ => {} // unsigned
                }
                write_frame(&mut srv, &r).await;
            }
            srv
        });
        let echo = || Request::new(Command::Echo, encode_simple(), 0);
        conn.call(echo(), &route).await.unwrap();
        assert!(matches!(
            conn.call(echo(), &route).await,
            Err(Error::Crypto(SecurityError::BadSignature { .. }))
        ));
        assert!(matches!(
            conn.call(echo(), &route).await,
            Err(Error::Crypto(SecurityError::Unsigned { .. }))
        ));
        drop(server.await.unwrap());
    }

    #[tokio::test]
    async fn timeout_forgets_the_request() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let conn = Connection::start(c.unwrap(), 64, Some(Duration::from_millis(200)));
        let mut srv = s.unwrap().0;
        let e = conn
            .call(
                Request::new(Command::Echo, encode_simple(), 0),
                &Route::default(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e}");
        assert!(conn.shared.table.lock().unwrap().pending.is_empty());
        assert_eq!(conn.shared.in_flight.load(Ordering::Relaxed), 0);
        // A late answer is dropped quietly, and its credits still count.
        let f = read_frame(&mut srv).await;
        let h = Header::decode(&f).unwrap();
        write_frame(
            &mut srv,
            &response(&h, NtStatus::SUCCESS, 2, 0, &encode_simple()),
        )
        .await;
        let granted = async {
            while conn.credits_available() < 2 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), granted)
            .await
            .expect("the late response's credits were never added");
        assert!(!conn.is_closed());
    }

    #[tokio::test]
    async fn hostile_frames_never_panic() {
        let (conn, _srv) = pair().await;
        let sec = SessionSecurity {
            keys: Protection::signing(Signer::new(SigningAlgorithm::AesCmac, &[1; 16])),
            sign: true,
            ..SessionSecurity::default()
        };
        conn.add_session(5, Arc::new(sec));
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let base = response(
            &Header {
                session_id: 5,
                ..Default::default()
            },
            NtStatus::SUCCESS,
            1,
            0,
            &encode_simple(),
        );
        for i in 0..20_000u32 {
            let mut f = base.clone();
            // Mutate a few bytes, sometimes the length, sometimes the magic.
            for _ in 0..1 + rnd() % 6 {
                let pos = (rnd() as usize) % f.len();
                f[pos] = rnd() as u8;
            }
            match i % 5 {
                0 => f.truncate((rnd() as usize) % f.len()),
                1 => f.extend((0..rnd() % 200).map(|_| rnd() as u8)),
                2 => f[..4].copy_from_slice(&smbx_wire::header::TRANSFORM_PROTOCOL_ID),
                _ => {}
            }
            // Chains: NextCommand pointing anywhere.
            if i % 7 == 0 && f.len() >= 24 {
                let next = (rnd() % 256) as u32;
                f[20..24].copy_from_slice(&next.to_le_bytes());
            }
            let _ = process_frame(f, &conn.shared);
        }
    }

    #[tokio::test]
    async fn timed_out_async_request_is_cancelled() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        let conn = Connection::start(c.unwrap(), 64, Some(Duration::from_millis(300)));
        let mut srv = s.unwrap().0;
        let server = tokio::spawn(async move {
            let f = read_frame(&mut srv).await;
            let h = Header::decode(&f).unwrap();
            let interim = response(
                &h,
                NtStatus::PENDING,
                1,
                FLAGS_ASYNC_COMMAND,
                &[9, 0, 0, 0, 0, 0, 0, 0, 0],
            );
            write_frame(&mut srv, &interim).await;
            // Never answer; expect a CANCEL naming the AsyncId.
            let f = read_frame(&mut srv).await;
            (h, Header::decode(&f).unwrap())
        });
        let mut req = Request::new(Command::ChangeNotify, vec![0; 32], 3);
        req.charge = 1;
        let e = conn.call(req, &Route::default()).await.unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e}");
        let (orig, cancel) = server.await.unwrap();
        assert_eq!(cancel.command, Command::Cancel as u16);
        assert!(cancel.is_async());
        assert_eq!(cancel.async_id, 77);
        assert_eq!(cancel.message_id, orig.message_id);
        assert_eq!(cancel.credit_charge, 0);
    }

    #[tokio::test]
    async fn disconnect_fails_pending_requests() {
        let (conn, mut srv) = pair().await;
        let server = tokio::spawn(async move {
            read_frame(&mut srv).await;
            drop(srv);
        });
        let e = conn
            .call(
                Request::new(Command::Echo, encode_simple(), 0),
                &Route::default(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Disconnected(_)), "{e}");
        assert!(conn.is_closed());
        server.await.unwrap();
        let e = conn
            .call(
                Request::new(Command::Echo, encode_simple(), 0),
                &Route::default(),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Disconnected(_)), "{e}");
    }
}
