//! Async operations in flight on a connection, cancellable by AsyncId or MessageId.

use std::collections::HashMap;

use parking_lot::Mutex;
use smbx_wire::NtStatus;
use tokio::sync::oneshot;

/// Most async operations one connection may have in flight.
pub const MAX_PENDING: usize = 4096;

struct PendingOp {
    message_id: u64,
    session_id: u64,
    cancel: Option<oneshot::Sender<()>>,
}

/// The table of pending async operations.
#[derive(Default)]
pub struct PendingTable {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    ops: HashMap<u64, PendingOp>,
    next_async_id: u64,
    /// (MessageId, SessionId) of CANCELs that arrived before their request went async
    /// (the two are dispatched concurrently); bounded, oldest dropped first.
    early_cancels: std::collections::VecDeque<(u64, u64)>,
}

/// Most early CANCELs remembered per connection.
const MAX_EARLY_CANCELS: usize = 64;

impl PendingTable {
    /// Registers an operation; returns its AsyncId and the receiver that fires on cancel.
    pub fn register(
        &self,
        message_id: u64,
        session_id: u64,
    ) -> Result<(u64, oneshot::Receiver<()>), NtStatus> {
        let mut t = self.inner.lock();
        if t.ops.len() >= MAX_PENDING {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        t.next_async_id += 1;
        let id = t.next_async_id;
        let (tx, rx) = oneshot::channel();
        if let Some(i) = t
            .early_cancels
            .iter()
            .position(|&(m, s)| m == message_id && (s == session_id || s == 0))
        {
            // Its CANCEL already arrived: the operation is cancelled from the start.
            t.early_cancels.remove(i);
            let _ = tx.send(());
            t.ops.insert(
                id,
                PendingOp {
                    message_id,
                    session_id,
                    cancel: None,
                },
            );
            return Ok((id, rx));
        }
        t.ops.insert(
            id,
            PendingOp {
                message_id,
                session_id,
                cancel: Some(tx),
            },
        );
        Ok((id, rx))
    }

    /// Forgets a completed operation.
    pub fn remove(&self, async_id: u64) {
        self.inner.lock().ops.remove(&async_id);
    }

    /// Cancels by AsyncId. Returns true if an operation was signalled.
    pub fn cancel_async(&self, async_id: u64, session_id: u64) -> bool {
        let mut t = self.inner.lock();
        match t.ops.get_mut(&async_id) {
            Some(op) if op.session_id == session_id || session_id == 0 => {
                op.cancel.take().map(|c| c.send(())).is_some()
            }
            _ => false,
        }
    }

    /// Cancels by the MessageId of the original request.
    pub fn cancel_message(&self, message_id: u64, session_id: u64) -> bool {
        let mut t = self.inner.lock();
        for op in t.ops.values_mut() {
            if op.message_id == message_id && (op.session_id == session_id || session_id == 0) {
                return op.cancel.take().map(|c| c.send(())).is_some();
            }
        }
        if t.early_cancels.len() >= MAX_EARLY_CANCELS {
            t.early_cancels.pop_front();
        }
        t.early_cancels.push_back((message_id, session_id));
        false
    }

    /// Cancels every operation of a session (LOGOFF) or, with `None`, all of them.
    pub fn cancel_all(&self, session_id: Option<u64>) {
        self.cancel_where(|sid| session_id.is_none_or(|s| s == sid));
    }

    /// Cancels every operation whose SessionId matches `pred`.
    pub fn cancel_where(&self, pred: impl Fn(u64) -> bool) {
        let mut t = self.inner.lock();
        for op in t.ops.values_mut() {
            if pred(op.session_id) {
                if let Some(c) = op.cancel.take() {
                    let _ = c.send(());
                }
            }
        }
    }

    /// Number of operations in flight.
    pub fn len(&self) -> usize {
        self.inner.lock().ops.len()
    }

    /// True if none are in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
