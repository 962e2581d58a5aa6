//! The client connection's request core, sans-IO: MessageIds, the credit window, the
//! table of requests in flight, interim (async) responses, timeouts by a clock the
//! caller passes in, cancellation, and the requests handed back when the channel is
//! lost. No tokio, no sockets: [`crate::conn`] drives it (one reader task per
//! channel feeds it responses; senders charge credits and register requests through
//! it), and the tests here drive it directly.
//!
//! [`outbound`] builds what goes on the wire (headers, compound chains, signing,
//! CANCEL); [`inbound`] opens what comes back (unsealing, splitting a compound,
//! checking signatures) before the core matches it.

pub(crate) mod inbound;
pub(crate) mod outbound;

use std::collections::VecDeque;
use std::time::Instant;

use smbx_wire::{Dialect, Header, NtStatus};

use crate::credits::credit_request;
use crate::error::DisconnectReason;

pub(crate) use outbound::Request;

/// The MessageId of unsolicited server messages (oplock and lease breaks).
pub(crate) const UNSOLICITED_ID: u64 = u64::MAX;

/// Credits the window may hold: a server granting more than this is capped (a hostile
/// peer cannot overflow the count).
const MAX_HELD: u32 = 1 << 24;

/// A table keyed by the u64 ids the client looks up at every request and response
/// (MessageIds, SessionIds), hashed with one multiplication instead of SipHash: the
/// table sees an insert and a removal per request and a session lookup per response.
/// MessageIds are the client's own; a server only chooses what it looks up, and the few
/// SessionIds it assigns.
pub(crate) type IdMap<V> = smbx_wire::id_hash::IdMap<u64, V>;

/// One value per member of a send (charges, MessageIds, headers, reply channels),
/// held inline up to two members: a lone request (every READ and WRITE) allocates
/// nothing for them.
pub(crate) type Members<T> = smallvec::SmallVec<[T; 2]>;

/// What a sender asked to charge: the result of [`RequestCore::acquire`].
#[derive(Debug)]
pub(crate) enum Acquire {
    /// The credits are spent; go on with [`RequestCore::begin`].
    Charged,
    /// Not enough credits (or others wait before): queue with [`RequestCore::enqueue`].
    Wait,
    /// The connection is closed.
    Closed(DisconnectReason),
}

/// What [`RequestCore::begin`] issued: the MessageIds of a send and its CreditRequest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Issued {
    /// The first member's MessageId; each member takes as many ids as it costs.
    pub first_id: u64,
    /// The CreditRequest of the first member (the others ask their own charge back).
    pub ask: u16,
}

/// Where a request in flight was sent: what a CANCEL for it needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sent {
    /// SessionId.
    pub session_id: u64,
    /// TreeId.
    pub tree_id: u32,
}

/// A request in flight that left the table without its response: timed out, or its
/// channel was lost.
#[derive(Debug)]
pub(crate) struct InFlight<T> {
    /// Its MessageId.
    pub message_id: u64,
    /// Its AsyncId, if the server answered STATUS_PENDING.
    pub async_id: Option<u64>,
    /// Where it was sent.
    pub sent: Sent,
    /// The caller's token.
    pub token: T,
    /// The request as it was before it was framed (header fields not yet written),
    /// when the send asked to retain it: to be sent again, with the replay flag, on
    /// another channel.
    pub request: Option<Request>,
}

impl<T> InFlight<T> {
    /// The CANCEL to send for this request ([MS-SMB2] 3.2.4.24): its MessageId, and its
    /// AsyncId when it went async.
    pub(crate) fn cancel(&self) -> outbound::Cancel {
        outbound::Cancel {
            message_id: self.message_id,
            async_id: self.async_id,
            session_id: self.sent.session_id,
            tree_id: self.sent.tree_id,
        }
    }
}

/// What a response meant to the core: the result of [`RequestCore::on_response`].
#[derive(Debug)]
pub(crate) enum Matched<T> {
    /// The final response to a request in flight: hand it to the token's waiter. The
    /// retained request (if any) is no longer needed, or may be replayed by a caller
    /// that sees a status asking for it.
    Done {
        /// The caller's token.
        token: T,
        /// The retained request, if the send kept one.
        request: Option<Request>,
    },
    /// An interim STATUS_PENDING: the request went async, its final answer follows.
    Interim,
    /// An unsolicited message (oplock or lease break).
    Unsolicited,
    /// A request from the server (no response flag): ignored, its credits not counted.
    NotAResponse,
    /// A response to no request in flight (a late answer to one that timed out): its
    /// credits counted, nothing else.
    Unknown,
}

struct Pending<T> {
    token: T,
    charge: u16,
    async_id: Option<u64>,
    deadline: Option<Instant>,
    sent: Sent,
    request: Option<Request>,
}

struct Waiter<W> {
    need: u32,
    waker: W,
}

/// The request core of one connection (channel). `T` is the token a sender leaves
/// with each request in flight (the driver's completion channel); `W` the one it
/// leaves while it waits for credits.
pub(crate) struct RequestCore<T, W> {
    next_id: u64,
    /// Credits granted and not yet spent.
    held: u32,
    /// Credits spent on requests still in the table.
    in_flight: u32,
    /// The window the client asks the server to grow towards.
    target: u16,
    dialect: Dialect,
    large_mtu: bool,
    pending: IdMap<Pending<T>>,
    /// Senders waiting for credits, first come first served.
    waiting: VecDeque<Waiter<W>>,
    closed: Option<DisconnectReason>,
}

impl<T, W> RequestCore<T, W> {
    /// A core before NEGOTIATE: one credit, MessageId 0, asking for up to `target`.
    pub(crate) fn new(target: u16) -> Self {
        RequestCore {
            next_id: 0,
            held: 1,
            in_flight: 0,
            target: target.max(1),
            dialect: Dialect::NONE,
            large_mtu: false,
            pending: IdMap::default(),
            waiting: VecDeque::new(),
            closed: None,
        }
    }

    /// Records the negotiated dialect and whether multi-credit requests are allowed.
    pub(crate) fn set_negotiated(&mut self, dialect: Dialect, large_mtu: bool) {
        self.dialect = dialect;
        self.large_mtu = large_mtu;
    }

    /// The negotiated dialect ([`Dialect::NONE`] before NEGOTIATE).
    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// True if multi-credit requests are allowed.
    pub(crate) fn large_mtu(&self) -> bool {
        self.large_mtu
    }

    /// Credits granted and unspent.
    pub(crate) fn credits(&self) -> usize {
        self.held as usize
    }

    /// Credits spent on requests still waiting for their response.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight as usize
    }

    /// Requests waiting for their response.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Why the connection is closed, once it is.
    pub(crate) fn closed(&self) -> Option<&DisconnectReason> {
        self.closed.as_ref()
    }

    /// What each request costs on this connection: its charge with large MTU, else 1.
    pub(crate) fn charge_of(&self, req: &Request) -> u16 {
        if self.large_mtu {
            req.charge.max(1)
        } else {
            1
        }
    }

    /// Spends `need` credits if the window holds them and nobody waits before.
    pub(crate) fn acquire(&mut self, need: u32) -> Acquire {
        if let Some(why) = &self.closed {
            return Acquire::Closed(why.clone());
        }
        if self.waiting.is_empty() && self.held >= need {
            self.held -= need;
            Acquire::Charged
        } else {
            Acquire::Wait
        }
    }

    /// Queues a sender that [`RequestCore::acquire`] told to wait; `waker` is handed
    /// to `wake` once its credits are spent for it (and if `wake` says the sender is
    /// gone, the credits go back to the window).
    pub(crate) fn enqueue(&mut self, need: u32, waker: W) {
        self.waiting.push_back(Waiter { need, waker });
    }

    /// Gives back credits spent but not used (a sender that stopped before issuing
    /// MessageIds); waiters they now satisfy are charged and woken.
    pub(crate) fn release(&mut self, credits: u32, wake: impl FnMut(W) -> bool) {
        self.held = self.held.saturating_add(credits).min(MAX_HELD);
        self.wake_waiters(wake);
    }

    fn wake_waiters(&mut self, mut wake: impl FnMut(W) -> bool) {
        while let Some(w) = self.waiting.front() {
            if w.need > self.held {
                break;
            }
            let Some(w) = self.waiting.pop_front() else {
                break;
            };
            if wake(w.waker) {
                self.held -= w.need;
            }
        }
    }

    /// Issues MessageIds for a send whose credits are spent (`charges`, one per
    /// member, summing to what was acquired) and records each member in flight with
    /// its token (`token(i)`) and deadline. Nothing can answer a member before it is
    /// recorded here.
    pub(crate) fn begin(
        &mut self,
        charges: &[u16],
        sent: Sent,
        deadline: Option<Instant>,
        mut token: impl FnMut(usize) -> T,
    ) -> Result<Issued, DisconnectReason> {
        if let Some(why) = &self.closed {
            return Err(why.clone());
        }
        let total: u32 = charges.iter().map(|&c| c as u32).sum();
        let before = self.in_flight;
        let first_id = self.next_id;
        let ask = credit_request(
            total.min(u16::MAX as u32) as u16,
            self.held as usize,
            before as usize,
            self.target,
        );
        let mut id = first_id;
        for (i, &charge) in charges.iter().enumerate() {
            let p = Pending {
                token: token(i),
                charge,
                async_id: None,
                deadline,
                sent,
                request: None,
            };
            self.pending.insert(id, p);
            id += charge as u64;
        }
        self.next_id = id;
        self.in_flight = before.saturating_add(total);
        Ok(Issued { first_id, ask })
    }

    /// Keeps `reqs` (one per MessageId of `ids`, as [`RequestCore::begin`] issued
    /// them) with their entries, to be handed back with the response, on timeout or
    /// when the channel is lost. If any entry is gone already (the connection closed
    /// meanwhile) nothing is kept and `reqs` come back.
    pub(crate) fn retain(&mut self, ids: &[u64], reqs: Vec<Request>) -> Option<Vec<Request>> {
        if ids.len() != reqs.len() || !ids.iter().all(|id| self.pending.contains_key(id)) {
            return Some(reqs);
        }
        for (id, r) in ids.iter().zip(reqs) {
            if let Some(p) = self.pending.get_mut(id) {
                p.request = Some(r);
            }
        }
        None
    }

    /// Takes a response's header (already verified or not: `trusted` says) and matches
    /// it: credits granted count (and wake waiters), an interim STATUS_PENDING marks
    /// its request async, a final response takes its request out of the table.
    /// A response that failed verification still completes its request (the driver
    /// hands the waiter the error) but never marks one async.
    pub(crate) fn on_response(
        &mut self,
        h: &Header,
        trusted: bool,
        wake: impl FnMut(W) -> bool,
    ) -> Matched<T> {
        if !h.is_response() {
            return Matched::NotAResponse;
        }
        if h.credits > 0 {
            self.release(h.credits as u32, wake);
        }
        if h.message_id == UNSOLICITED_ID {
            return Matched::Unsolicited;
        }
        let interim = h.status == NtStatus::PENDING && h.is_async();
        if interim && trusted {
            if let Some(p) = self.pending.get_mut(&h.message_id) {
                p.async_id = Some(h.async_id);
            }
            return Matched::Interim;
        }
        match self.pending.remove(&h.message_id) {
            Some(p) => {
                self.in_flight = self.in_flight.saturating_sub(p.charge as u32);
                Matched::Done {
                    token: p.token,
                    request: p.request,
                }
            }
            None => Matched::Unknown,
        }
    }

    /// Takes out the requests whose deadline is `now` or before: their callers see a
    /// timeout, the driver sends each a CANCEL. Their credits stay spent (the server
    /// may still answer, and then grants them back).
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<InFlight<T>> {
        let due: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|d| d <= now))
            .map(|(&id, _)| id)
            .collect();
        self.forget(&due)
    }

    /// Takes these MessageIds out of the table (a send that failed after
    /// [`RequestCore::begin`], a caller that gave up): those still there are returned.
    pub(crate) fn forget(&mut self, ids: &[u64]) -> Vec<InFlight<T>> {
        let mut out = Vec::new();
        for id in ids {
            if let Some(p) = self.pending.remove(id) {
                self.in_flight = self.in_flight.saturating_sub(p.charge as u32);
                out.push(in_flight(*id, p));
            }
        }
        out
    }

    /// The connection is lost (or closed): every request in flight is handed back,
    /// MessageId order, with its retained request for a replay elsewhere; senders
    /// waiting for credits are dropped (handed back too), and later sends fail.
    pub(crate) fn close(&mut self, why: DisconnectReason) -> (Vec<InFlight<T>>, Vec<W>) {
        if self.closed.is_none() {
            self.closed = Some(why);
        }
        let mut out: Vec<InFlight<T>> = self
            .pending
            .drain()
            .map(|(id, p)| in_flight(id, p))
            .collect();
        out.sort_by_key(|f| f.message_id);
        self.in_flight = 0;
        let waiting = self.waiting.drain(..).map(|w| w.waker).collect();
        (out, waiting)
    }
}

fn in_flight<T>(message_id: u64, p: Pending<T>) -> InFlight<T> {
    InFlight {
        message_id,
        async_id: p.async_id,
        sent: p.sent,
        token: p.token,
        request: p.request,
    }
}

#[cfg(test)]
pub(crate) mod tests;
