//! Where the unsolicited messages of a client's connections go ([`EventSink`]):
//! every channel of its sessions (also re-established ones) pumps its oplock and
//! lease break notifications into the sink of the client the application holds.
//! The sink acknowledges the breaks of leases the client itself asked for
//! (durable opens: [`crate::durable`]) with LEASE_BREAK_ACK and the new state
//! ([MS-SMB2] 3.2.5.19.2, 3.2.4.24), so that an application that never reads
//! [`Client::events`](crate::Client::events) does not leave the server waiting
//! out its break timeout; then it hands the event to the application if it asked
//! for events.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use smbx_wire::oplock::{LeaseBreakAck, LeaseBreakFlags, LeaseBreakNotification, LeaseState};
use smbx_wire::Command;
use tokio::sync::mpsc;

use crate::conn::{Event, Request};
use crate::tree::{Tree, TreeInner};

/// Events kept for the application before further ones are dropped.
const APP_QUEUE: usize = 256;

/// The event sink of one client and of every channel bound to its sessions.
pub(crate) struct EventSink {
    app_tx: mpsc::Sender<Event>,
    /// The application's end, until [`EventSink::take_app`] hands it out.
    app_rx: Mutex<Option<mpsc::Receiver<Event>>>,
    /// The lease keys of the client's own durable opens, and their tree.
    leases: Mutex<HashMap<[u8; 16], Weak<TreeInner>>>,
    /// Breaks acknowledged (the server answered the acknowledgment).
    acked: AtomicU64,
}

/// What the sink does with a lease break notification: acknowledge it on the
/// tree with this new state, or leave it to the application.
fn claim(
    leases: &HashMap<[u8; 16], Weak<TreeInner>>,
    n: &LeaseBreakNotification,
) -> Option<(Tree, LeaseState)> {
    if !n.flags.contains(LeaseBreakFlags::ACK_REQUIRED) {
        return None;
    }
    let inner = leases.get(&n.lease_key)?.upgrade()?;
    Some((Tree { inner }, n.new_lease_state))
}

impl EventSink {
    /// An empty sink: no leases, the application's queue not yet taken.
    pub(crate) fn new() -> Arc<EventSink> {
        let (app_tx, app_rx) = mpsc::channel(APP_QUEUE);
        Arc::new(EventSink {
            app_tx,
            app_rx: Mutex::new(Some(app_rx)),
            leases: Mutex::new(HashMap::new()),
            acked: AtomicU64::new(0),
        })
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<[u8; 16], Weak<TreeInner>>> {
        // A map of weak references cannot be left half-updated.
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The application's queue of events; only the first caller gets it.
    pub(crate) fn take_app(&self) -> Option<mpsc::Receiver<Event>> {
        self.app_rx.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Claims the breaks of lease `key`, held by opens of `tree`.
    pub(crate) fn register(&self, key: [u8; 16], tree: &Tree) {
        let mut l = self.leases();
        l.retain(|_, t| t.strong_count() > 0);
        l.insert(key, Arc::downgrade(&tree.inner));
    }

    /// Lease breaks acknowledged so far.
    pub(crate) fn acknowledged(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Delivers the events of one connection (`rx`, taken from it) until it
    /// closes.
    pub(crate) fn pump(self: &Arc<Self>, mut rx: mpsc::Receiver<Event>) {
        let sink = self.clone();
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                sink.deliver(ev);
            }
        });
    }

    /// Acknowledges `ev` if it breaks a lease the client holds, then queues it
    /// for the application if the application took the queue.
    fn deliver(self: &Arc<Self>, ev: Event) {
        if let Event::Other(r) = &ev {
            if r.header.command == Command::OplockBreak as u16 {
                if let Ok(n) = LeaseBreakNotification::decode(&r.msg) {
                    let claimed = claim(&self.leases(), &n);
                    if let Some((tree, state)) = claimed {
                        self.acknowledge(tree, n.lease_key, state);
                    }
                }
            }
        }
        let taken = self
            .app_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none();
        if taken && self.app_tx.try_send(ev).is_err() {
            tracing::warn!("dropping a break notification: the application does not read events");
        }
    }

    /// Sends LEASE_BREAK_ACK for `key` with `state` on `tree` (in the
    /// background: the pump goes on with the next event).
    fn acknowledge(self: &Arc<Self>, tree: Tree, key: [u8; 16], state: LeaseState) {
        let sink = self.clone();
        tokio::spawn(async move {
            let body = LeaseBreakAck {
                flags: 0,
                lease_key: key,
                lease_state: state,
                lease_duration: 0,
            }
            .encode();
            let req = Request::new(Command::OplockBreak, body, tree.id());
            match tree.call(req).await.and_then(|r| r.ok()) {
                Ok(_) => {
                    sink.acked.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("lease {key:02x?} broken to {state:?}: acknowledged");
                }
                Err(e) => tracing::warn!("lease {key:02x?}: break acknowledgment failed: {e}"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(key: u8, flags: LeaseBreakFlags) -> LeaseBreakNotification {
        LeaseBreakNotification {
            new_epoch: 2,
            flags,
            lease_key: [key; 16],
            current_lease_state: LeaseState::RH,
            new_lease_state: LeaseState::READ,
        }
    }

    #[test]
    fn only_registered_leases_that_need_an_ack_are_claimed() {
        let leases: HashMap<[u8; 16], Weak<TreeInner>> = HashMap::new();
        assert!(claim(&leases, &note(1, LeaseBreakFlags::ACK_REQUIRED)).is_none());
        // A key whose tree is gone is not claimed either.
        let mut gone = HashMap::new();
        gone.insert([1u8; 16], Weak::new());
        assert!(claim(&gone, &note(1, LeaseBreakFlags::ACK_REQUIRED)).is_none());
    }

    #[tokio::test]
    async fn events_reach_the_application_only_once_it_asked() {
        let sink = EventSink::new();
        let ev = || {
            let mut w = smbx_wire::Writer::new();
            smbx_wire::Header {
                command: Command::OplockBreak as u16,
                message_id: u64::MAX,
                ..Default::default()
            }
            .encode(&mut w);
            w.bytes(&note(9, LeaseBreakFlags::ACK_REQUIRED).encode());
            let msg = w.into_vec();
            Event::Other(crate::conn::Response {
                header: smbx_wire::Header::decode(&msg).unwrap(),
                msg: msg.into(),
            })
        };
        // Not asked for: nothing queued (and nothing acknowledged: no lease).
        sink.deliver(ev());
        let mut rx = sink.take_app().unwrap();
        assert!(sink.take_app().is_none());
        assert!(rx.try_recv().is_err());
        sink.deliver(ev());
        match rx.try_recv().unwrap() {
            Event::Other(r) => {
                let n = LeaseBreakNotification::decode(&r.msg).unwrap();
                assert_eq!(n.lease_key, [9; 16]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sink.acknowledged(), 0);
    }
}
