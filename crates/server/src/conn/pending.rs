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
}

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
        false
    }

    /// Cancels every operation of a session (LOGOFF) or, with `None`, all of them.
    pub fn cancel_all(&self, session_id: Option<u64>) {
        let mut t = self.inner.lock();
        for op in t.ops.values_mut() {
            if session_id.is_none_or(|s| s == op.session_id) {
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
