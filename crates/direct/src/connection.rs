//! The sans-IO SMB Direct connection: one state machine for both roles.
//!
//! No sockets, no async, no clock: the caller feeds received messages and
//! the current time in, and takes messages to send, receives to post, events
//! and the next deadline out (the quinn-proto style).
//!
//! # Driving a connection
//!
//! ```text
//! let mut c = Connection::client(config, now);   // or ::server
//! loop {
//!     for _ in 0..c.poll_post_receives() { post a receive of c.receive_buffer_size() }
//!     while let Some(m) = c.poll_transmit() {
//!         for _ in 0..m.post_receives { post a receive of c.receive_buffer_size() }
//!         send m.bytes (Send, or Send with Invalidate of m.invalidate)
//!     }
//!     while let Some(ev) = c.poll_event() { Negotiated / Message / Disconnect }
//!     wait for: a receive completion → c.handle_receive(bytes, now)
//!               c.poll_timeout()     → c.handle_timeout(now)
//!               upper layer          → c.send_message(bytes)
//! }
//! ```
//!
//! Receives must be posted before the message that asks for them is sent:
//! that message grants them to the peer. On [`Event::Disconnect`] flush
//! `poll_transmit` once more (a server's STATUS_NOT_SUPPORTED response is
//! queued that way), then tear the queue pair down.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::config::{
    Config, NegotiatedParams, CLIENT_NEGOTIATE_TIMEOUT, PEER_DEFAULT_SEND_SIZE,
    SERVER_NEGOTIATE_TIMEOUT,
};
use crate::credits::{CreditError, Credits};
use crate::pdu::{
    DataHeader, NegotiateRequest, NegotiateResponse, PduError, DATA_OFFSET,
    FLAG_RESPONSE_REQUESTED, MIN_RECEIVE_SIZE, SMBD_VERSION,
};
use crate::reassembly::{Reassembler, ReassemblyError};
use smbx_wire::InMessage;

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends the Negotiate Request.
    Client,
    /// Answers it.
    Server,
}

/// Why the connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DisconnectReason {
    /// [`Connection::close`] was called.
    #[error("closed locally")]
    Local,
    /// No (valid) negotiate message arrived in time.
    #[error("negotiation timed out")]
    NegotiateTimeout,
    /// A keepalive went unanswered.
    #[error("keepalive timed out")]
    KeepaliveTimeout,
    /// A message failed to decode or a negotiate check failed.
    #[error("protocol error: {0}")]
    Protocol(#[from] PduError),
    /// The server's PreferredSendSize exceeds our receive size.
    #[error("peer send size {peer} exceeds our receive size {own}")]
    PeerSendSizeTooLarge {
        /// The peer's PreferredSendSize.
        peer: u32,
        /// Our MaxReceiveSize.
        own: u32,
    },
    /// A message longer than our receive size arrived.
    #[error("received {len} bytes, receive size is {max}")]
    ReceiveTooLarge {
        /// Length of the message.
        len: usize,
        /// Our receive size.
        max: u32,
    },
    /// The peer broke the credit rules.
    #[error("credit violation: {0}")]
    Credit(#[from] CreditError),
    /// A fragment did not fit the message being reassembled.
    #[error("reassembly: {0}")]
    Reassembly(#[from] ReassemblyError),
}

/// Why [`Connection::send_message`] refused a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Not negotiated yet, or already disconnected.
    #[error("connection not established")]
    NotConnected,
    /// An empty upper-layer message cannot be told apart from a
    /// credit/keepalive message on the wire.
    #[error("empty message")]
    Empty,
    /// Longer than the peer's MaxFragmentedSize.
    #[error("message of {len} bytes exceeds the peer's maximum {max}")]
    TooLarge {
        /// Length of the message.
        len: usize,
        /// The peer's MaxFragmentedSize.
        max: u32,
    },
}

/// Something the upper layer needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Negotiation succeeded with these parameters.
    Negotiated(NegotiatedParams),
    /// A whole upper-layer message arrived (in the buffer it was received into,
    /// when it came in one fragment over a provider that receives into buffers of
    /// their own).
    Message(InMessage),
    /// The connection is over; no further events follow.
    Disconnect(DisconnectReason),
}

/// One message to send with a Send (or Send with Invalidate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    /// The complete SMB Direct message.
    pub bytes: Vec<u8>,
    /// True for Data Transfer messages (they used a send credit); false for
    /// the negotiate messages.
    pub needs_credit: bool,
    /// Receives of [`Connection::receive_buffer_size`] bytes to post before
    /// sending: the message grants them.
    pub post_receives: u32,
    /// Send as Send with Invalidate of this STag (first fragment of a
    /// message queued with [`Connection::send_message_with_invalidate`]).
    pub invalidate: Option<u32>,
}

/// Counters for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Data Transfer messages sent (payload or not).
    pub data_messages_sent: u64,
    /// Of those, without payload (grants, keepalives, keepalive answers).
    pub empty_messages_sent: u64,
    /// Data Transfer messages received.
    pub data_messages_received: u64,
    /// Upper-layer messages delivered.
    pub messages_delivered: u64,
    /// Keepalives (RESPONSE_REQUESTED) sent.
    pub keepalives_sent: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Client waiting for the Negotiate Response; server for the Request.
    Negotiating,
    Connected,
    Closed,
}

/// One message to send with a Send, borrowed from the connection
/// ([`Connection::poll_transmit_with`]): its bytes are `header` then `payload`.
#[derive(Debug)]
pub struct Transmit<'a> {
    /// The SMB Direct header (a negotiate message: all of it).
    pub header: &'a [u8],
    /// The fragment of the upper-layer message that follows the header.
    pub payload: &'a [u8],
    /// As [`OutgoingMessage::needs_credit`].
    pub needs_credit: bool,
    /// As [`OutgoingMessage::post_receives`].
    pub post_receives: u32,
    /// As [`OutgoingMessage::invalidate`].
    pub invalidate: Option<u32>,
    /// The buffer `payload` is borrowed from, and where in it `payload` starts:
    /// a provider that sends from the caller's own buffer takes a handle to it
    /// rather than a copy of `payload` (`None` for a message without payload).
    pub body: Option<(&'a Arc<Vec<u8>>, usize)>,
}

impl Transmit<'_> {
    /// The message's length in bytes.
    pub fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }

    /// Whether the message has no bytes (never: a header is always there).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An upper-layer message queued: `data[sent..]` is still to go (`sent` starts
/// where the message starts in its buffer).
#[derive(Debug)]
struct Pending {
    /// Shared with what sends a fragment from it ([`Transmit::body`]).
    data: Arc<Vec<u8>>,
    sent: usize,
    /// Whether its first fragment went out.
    started: bool,
    invalidate: Option<u32>,
}

/// The SMB Direct protocol state of one connection.
#[derive(Debug)]
pub struct Connection {
    role: Role,
    config: Config,
    state: State,
    params: Option<NegotiatedParams>,
    credits: Credits,
    /// Messages that use no credit (negotiate), sent first, with the
    /// receives to post before each.
    control: VecDeque<(Vec<u8>, u32)>,
    send_queue: VecDeque<Pending>,
    reassembler: Reassembler,
    events: VecDeque<Event>,
    receives_to_post: u32,
    negotiate_deadline: Option<Instant>,
    idle_deadline: Option<Instant>,
    keepalive_deadline: Option<Instant>,
    keepalive_due: bool,
    response_owed: bool,
    stats: Stats,
}

/// The largest message an endpoint sends: its own maximum, no larger than the
/// peer receives ([MS-SMBD] 3.1.5.2, 3.1.5.6) and no larger than the peer itself
/// prefers to send unless that is below [`PEER_DEFAULT_SEND_SIZE`]. A peer that
/// sends at most Windows' 1364 bytes (Windows, Linux cifs and ksmbd) gets
/// messages of at most 1364 bytes whatever its receive size; a peer that asks
/// to send more (an smbx peer) gets messages as large as it sends.
fn send_size(own_max: u32, peer_max_receive: u32, peer_preferred_send: u32) -> u32 {
    own_max
        .min(peer_max_receive)
        .min(peer_preferred_send.max(PEER_DEFAULT_SEND_SIZE))
}

impl Connection {
    fn new(role: Role, config: Config, now: Instant) -> Self {
        let timeout = config.negotiate_timeout.unwrap_or(match role {
            Role::Client => CLIENT_NEGOTIATE_TIMEOUT,
            Role::Server => SERVER_NEGOTIATE_TIMEOUT,
        });
        Connection {
            role,
            credits: Credits::new(config.receive_credit_max),
            reassembler: Reassembler::new(config.max_fragmented_size),
            config,
            state: State::Negotiating,
            params: None,
            control: VecDeque::new(),
            send_queue: VecDeque::new(),
            events: VecDeque::new(),
            receives_to_post: 1,
            negotiate_deadline: now.checked_add(timeout),
            idle_deadline: None,
            keepalive_deadline: None,
            keepalive_due: false,
            response_owed: false,
            stats: Stats::default(),
        }
    }

    /// A client endpoint. It asks for one receive (for the Negotiate
    /// Response) and queues the Negotiate Request, which uses no credit.
    /// The configuration should have passed [`Config::validate`].
    pub fn client(config: Config, now: Instant) -> Self {
        let mut c = Self::new(Role::Client, config, now);
        let req = NegotiateRequest {
            min_version: SMBD_VERSION,
            max_version: SMBD_VERSION,
            credits_requested: c.config.send_credit_target,
            preferred_send_size: c.config.max_send_size,
            max_receive_size: c.config.max_receive_size,
            max_fragmented_size: c.config.max_fragmented_size,
        };
        c.control.push_back((req.encode().to_vec(), 0));
        c
    }

    /// A server endpoint for a freshly accepted queue pair. It asks for one
    /// receive (for the Negotiate Request); post it before accepting.
    pub fn server(config: Config, now: Instant) -> Self {
        Self::new(Role::Server, config, now)
    }

    /// This endpoint's role.
    pub fn role(&self) -> Role {
        self.role
    }
    /// The negotiated parameters, once negotiated.
    pub fn params(&self) -> Option<&NegotiatedParams> {
        self.params.as_ref()
    }
    /// True between a successful negotiation and the disconnect.
    pub fn is_connected(&self) -> bool {
        self.state == State::Connected
    }
    /// True once disconnected.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// Credits we hold.
    pub fn send_credits(&self) -> u32 {
        self.credits.send_credits()
    }
    /// Credits the peer holds (granted, not yet used).
    pub fn granted_credits(&self) -> u32 {
        self.credits.granted()
    }
    /// Receives posted and not yet consumed (as far as this core knows).
    pub fn posted_receives(&self) -> u32 {
        self.credits.posted()
    }
    /// Upper-layer messages (or parts) waiting for credits.
    pub fn queued_messages(&self) -> usize {
        self.send_queue.len()
    }
    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
    /// The size of each receive buffer to post.
    pub fn receive_buffer_size(&self) -> u32 {
        match &self.params {
            Some(p) => p.max_receive_size,
            None => self.config.max_receive_size,
        }
    }

    /// Receives to post now that no outgoing message accounts for (the
    /// single receive for the peer's negotiate message). They count as
    /// posted from this call on.
    pub fn poll_post_receives(&mut self) -> u32 {
        let n = std::mem::take(&mut self.receives_to_post);
        self.credits.add_posted(n);
        n
    }

    /// Queues an upper-layer message. It is fragmented into messages of at
    /// most the negotiated send size as credits allow.
    pub fn send_message(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.queue(data.to_vec(), 0, None)
    }

    /// Like [`send_message`](Self::send_message) for the message `data[start..]`,
    /// taken as it is (not copied); with `invalidate`, its first fragment is sent
    /// as Send with Invalidate of that STag.
    pub fn send_message_owned(
        &mut self,
        data: Vec<u8>,
        start: usize,
        invalidate: Option<u32>,
    ) -> Result<(), SendError> {
        self.queue(data, start, invalidate)
    }

    /// Like [`send_message`](Self::send_message), but the first fragment is
    /// sent as Send with Invalidate of `token` (remote invalidation of the
    /// peer's buffer after an RDMA transfer, SMB2 channel
    /// RDMA_V1_INVALIDATE).
    pub fn send_message_with_invalidate(
        &mut self,
        data: &[u8],
        token: u32,
    ) -> Result<(), SendError> {
        self.queue(data.to_vec(), 0, Some(token))
    }

    fn queue(
        &mut self,
        data: Vec<u8>,
        start: usize,
        invalidate: Option<u32>,
    ) -> Result<(), SendError> {
        let Some(p) = self.params.filter(|_| self.state == State::Connected) else {
            return Err(SendError::NotConnected);
        };
        let len = data.len().saturating_sub(start);
        if len == 0 {
            return Err(SendError::Empty);
        }
        if len > p.max_fragmented_send_size as usize {
            return Err(SendError::TooLarge {
                len,
                max: p.max_fragmented_send_size,
            });
        }
        self.send_queue.push_back(Pending {
            data: Arc::new(data),
            sent: start,
            started: false,
            invalidate,
        });
        Ok(())
    }

    /// Ends the connection locally.
    pub fn close(&mut self) {
        self.disconnect(DisconnectReason::Local);
    }

    fn disconnect(&mut self, reason: DisconnectReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.send_queue.clear();
        self.negotiate_deadline = None;
        self.idle_deadline = None;
        self.keepalive_deadline = None;
        self.events.push_back(Event::Disconnect(reason));
    }

    /// Next event for the upper layer.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout)
    /// must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.negotiate_deadline,
            self.idle_deadline,
            self.keepalive_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Fires the timers that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.negotiate_deadline.is_some_and(|d| now >= d) {
            self.disconnect(DisconnectReason::NegotiateTimeout);
            return;
        }
        if self.keepalive_deadline.is_some_and(|d| now >= d) {
            self.disconnect(DisconnectReason::KeepaliveTimeout);
            return;
        }
        if self.idle_deadline.is_some_and(|d| now >= d) {
            self.idle_deadline = None;
            self.keepalive_due = true;
            self.keepalive_deadline = now.checked_add(self.config.keepalive_timeout);
        }
    }

    /// Processes one received message (the bytes of one receive completion).
    pub fn handle_receive(&mut self, bytes: &[u8], now: Instant) {
        match self.state {
            State::Closed => {}
            State::Negotiating => {
                self.credits.consume_negotiate_receive();
                let r = match self.role {
                    Role::Server => self.on_negotiate_request(bytes, now),
                    Role::Client => self.on_negotiate_response(bytes, now),
                };
                if let Err(reason) = r {
                    self.disconnect(reason);
                }
            }
            State::Connected => {
                if let Err(reason) = self.on_data(bytes, now) {
                    self.disconnect(reason);
                }
            }
        }
    }

    /// [`Connection::handle_receive`] of a message received into a buffer of its
    /// own: a Data Transfer message's payload is handed up in `bytes` itself
    /// rather than copied (a message of one fragment; the first of several
    /// collects the rest).
    pub fn handle_receive_owned(&mut self, bytes: Vec<u8>, now: Instant) {
        if !matches!(self.state, State::Connected) {
            return self.handle_receive(&bytes, now);
        }
        let r = match self.data_header(&bytes, now) {
            Ok(Some((h, at))) => self
                .reassembler
                .push_owned(h.remaining_data_length, bytes, at)
                .map(|m| self.deliver(m))
                .map_err(DisconnectReason::from),
            Ok(None) => Ok(()),
            Err(reason) => Err(reason),
        };
        if let Err(reason) = r {
            self.disconnect(reason);
        }
    }

    fn connected(&mut self, params: NegotiatedParams, now: Instant) {
        self.state = State::Connected;
        self.negotiate_deadline = None;
        self.reassembler = Reassembler::new(params.max_fragmented_receive_size);
        self.params = Some(params);
        self.idle_deadline = now.checked_add(self.config.keepalive_interval);
        self.events.push_back(Event::Negotiated(params));
    }

    fn on_negotiate_request(&mut self, bytes: &[u8], now: Instant) -> Result<(), DisconnectReason> {
        let req = match NegotiateRequest::decode(bytes) {
            Ok(r) => r,
            Err(e @ PduError::UnsupportedVersion { .. }) => {
                self.control
                    .push_back((NegotiateResponse::not_supported().encode().to_vec(), 0));
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        let cfg = &self.config;
        let max_receive_size = cfg
            .max_receive_size
            .min(req.preferred_send_size)
            .max(MIN_RECEIVE_SIZE);
        let max_send_size = send_size(
            cfg.max_send_size,
            req.max_receive_size,
            req.preferred_send_size,
        );
        self.credits
            .set_receive_target(req.credits_requested.min(255));
        let grant = self.credits.receive_credit_target();
        let params = NegotiatedParams {
            max_send_size,
            max_receive_size,
            max_fragmented_send_size: req.max_fragmented_size,
            max_fragmented_receive_size: cfg.max_fragmented_size,
            max_read_write_size: cfg.max_read_write_size,
            initial_send_credits: 0,
            receive_credit_target: grant as u16,
        };
        let rsp = NegotiateResponse {
            min_version: SMBD_VERSION,
            max_version: SMBD_VERSION,
            negotiated_version: SMBD_VERSION,
            credits_requested: cfg.send_credit_target,
            credits_granted: grant as u16,
            status: smbx_wire::NtStatus::SUCCESS,
            max_read_write_size: cfg.max_read_write_size,
            preferred_send_size: max_send_size,
            max_receive_size,
            max_fragmented_size: cfg.max_fragmented_size,
        };
        // The adapter posts the granted receives (of the negotiated receive
        // size) before it sends the response.
        self.control.push_back((rsp.encode().to_vec(), grant));
        self.credits.add_posted(grant);
        self.credits.grant_posted(grant);
        self.connected(params, now);
        Ok(())
    }

    fn on_negotiate_response(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<(), DisconnectReason> {
        let rsp = NegotiateResponse::decode(bytes)?;
        let cfg = &self.config;
        if rsp.preferred_send_size > cfg.max_receive_size {
            return Err(DisconnectReason::PeerSendSizeTooLarge {
                peer: rsp.preferred_send_size,
                own: cfg.max_receive_size,
            });
        }
        let params = NegotiatedParams {
            max_send_size: send_size(
                cfg.max_send_size,
                rsp.max_receive_size,
                rsp.preferred_send_size,
            ),
            max_receive_size: rsp
                .preferred_send_size
                .max(MIN_RECEIVE_SIZE)
                .min(cfg.max_receive_size),
            max_fragmented_send_size: rsp.max_fragmented_size,
            max_fragmented_receive_size: cfg.max_fragmented_size,
            max_read_write_size: cfg.max_read_write_size.min(rsp.max_read_write_size),
            initial_send_credits: rsp.credits_granted,
            receive_credit_target: rsp.credits_requested.min(cfg.receive_credit_max),
        };
        self.credits.set_initial_send_credits(rsp.credits_granted);
        self.credits.set_receive_target(rsp.credits_requested);
        self.connected(params, now);
        Ok(())
    }

    fn on_data(&mut self, bytes: &[u8], now: Instant) -> Result<(), DisconnectReason> {
        if let Some((h, at)) = self.data_header(bytes, now)? {
            let payload = bytes.get(at).unwrap_or_default();
            let m = self.reassembler.push(h.remaining_data_length, payload)?;
            self.deliver(m.map(InMessage::from));
        }
        Ok(())
    }

    /// Queues a message the reassembler completed.
    fn deliver(&mut self, msg: Option<InMessage>) {
        if let Some(msg) = msg {
            self.stats.messages_delivered += 1;
            self.events.push_back(Event::Message(msg));
        }
    }

    /// Checks and accounts for a Data Transfer message (credits, keepalive);
    /// returns its header and where its payload lies in `bytes` when it has one.
    fn data_header(
        &mut self,
        bytes: &[u8],
        now: Instant,
    ) -> Result<Option<(DataHeader, std::ops::Range<usize>)>, DisconnectReason> {
        let Some(p) = self.params else {
            return Ok(None);
        };
        if bytes.len() > p.max_receive_size as usize {
            return Err(DisconnectReason::ReceiveTooLarge {
                len: bytes.len(),
                max: p.max_receive_size,
            });
        }
        self.credits.on_receive()?;
        let (h, payload) = DataHeader::decode(bytes, p.max_fragmented_receive_size)?;
        self.stats.data_messages_received += 1;
        self.credits.on_grant(h.credits_granted)?;
        self.credits.set_receive_target(h.credits_requested);
        self.idle_deadline = now.checked_add(self.config.keepalive_interval);
        self.keepalive_deadline = None;
        if h.response_requested() {
            self.response_owed = true;
        }
        if payload.is_empty() {
            return Ok(None);
        }
        // `decode` found the payload at data_offset within `bytes`.
        let at = h.data_offset as usize;
        Ok(Some((h, at..at + payload.len())))
    }

    /// The next message to send, if the credit rules allow one now.
    pub fn poll_transmit(&mut self) -> Option<OutgoingMessage> {
        self.poll_transmit_with(|t| {
            let mut bytes = Vec::with_capacity(t.len());
            bytes.extend_from_slice(t.header);
            bytes.extend_from_slice(t.payload);
            OutgoingMessage {
                bytes,
                needs_credit: t.needs_credit,
                post_receives: t.post_receives,
                invalidate: t.invalidate,
            }
        })
    }

    /// Like [`poll_transmit`](Self::poll_transmit), but hands the message to `f`
    /// as borrowed pieces (header, then the fragment of the queued upper-layer
    /// message), for it to copy straight where it is sent from: no message is
    /// built in between.
    pub fn poll_transmit_with<R>(&mut self, f: impl FnOnce(Transmit<'_>) -> R) -> Option<R> {
        if let Some((bytes, post_receives)) = self.control.pop_front() {
            return Some(f(Transmit {
                header: &bytes,
                payload: &[],
                needs_credit: false,
                post_receives,
                invalidate: None,
                body: None,
            }));
        }
        if self.state != State::Connected {
            return None;
        }
        let p = self.params?;
        let has_data = !self.send_queue.is_empty();
        let must_send_empty = self.response_owed || self.keepalive_due;
        if !has_data && !must_send_empty && !self.credits.grant_needed() {
            return None;
        }
        let plan = self.credits.plan_send()?;
        if !has_data && !must_send_empty && plan.grant == 0 {
            return None;
        }
        self.credits.commit_send(plan);
        let flags = if self.keepalive_due {
            self.stats.keepalives_sent += 1;
            FLAG_RESPONSE_REQUESTED
        } else {
            0
        };
        self.keepalive_due = false;
        self.response_owed = false;
        let requested = self.config.send_credit_target;
        self.stats.data_messages_sent += 1;
        let mut header = [0u8; DATA_OFFSET];
        let t = match self.send_queue.front_mut() {
            Some(m) => {
                let max_payload = p.max_fragment_payload().max(1);
                let left = m.data.len() - m.sent;
                let n = max_payload.min(left);
                let remaining = (left - n) as u32;
                let invalidate = if m.started { None } else { m.invalidate };
                m.started = true;
                DataHeader::write(
                    &mut header,
                    requested,
                    plan.grant,
                    flags,
                    remaining,
                    n as u32,
                );
                let r = f(Transmit {
                    header: &header,
                    payload: &m.data[m.sent..m.sent + n],
                    needs_credit: true,
                    post_receives: plan.post,
                    invalidate,
                    body: Some((&m.data, m.sent)),
                });
                m.sent += n;
                if m.sent == m.data.len() {
                    self.send_queue.pop_front();
                }
                r
            }
            None => {
                self.stats.empty_messages_sent += 1;
                let n = DataHeader::write(&mut header, requested, plan.grant, flags, 0, 0);
                f(Transmit {
                    header: &header[..n],
                    payload: &[],
                    needs_credit: true,
                    post_receives: plan.post,
                    invalidate: None,
                    body: None,
                })
            }
        };
        Some(t)
    }
}
