//! Connection threads: each runs a single-threaded runtime, and a Direct TCP
//! connection lives on one of them (the one with the fewest connections) from accept
//! to close.
//!
//! On the server's multi-threaded runtime one connection's read loop moved between
//! the workers from time to time: the I/O driver is polled by whichever worker is
//! parked when the socket becomes readable, and a worker woken by a timer wakes the
//! other, which then takes the driver. Unpinned, every move put the connection's work
//! on a thread the kernel had placed elsewhere. On a connection thread the read loop,
//! the link's writer and the requests that complete at once (lone READs and WRITEs,
//! dispatch.rs) always run on the same thread; different connections still spread
//! over the threads. Requests that run as tasks of their own (sealed, signed,
//! compounds, those that wait for the disk) go to the multi-threaded runtime, so
//! that one connection's CPU work still spreads over every core.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::runtime::Handle;

/// A set of connection threads, and the runtime where request tasks go.
#[derive(Debug)]
pub struct ConnectionThreads {
    threads: Vec<Thread>,
    next: AtomicUsize,
    tasks: Handle,
}

#[derive(Debug)]
struct Thread {
    handle: Handle,
    /// Connections on the thread now.
    connections: Arc<AtomicUsize>,
    /// Dropped (with the set) to stop the thread's runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl ConnectionThreads {
    /// Starts `n` (at least one) connection threads; request tasks go to `tasks`
    /// (the multi-threaded runtime). The threads stop when the set is dropped.
    pub fn start(n: usize, tasks: Handle) -> io::Result<Arc<ConnectionThreads>> {
        let mut threads = Vec::new();
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = rt.handle().clone();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("smbx-conn-{i}"))
                .spawn(move || {
                    let _ = rt.block_on(stopped);
                })?;
            threads.push(Thread {
                handle,
                connections: Arc::new(AtomicUsize::new(0)),
                _stop: stop,
            });
        }
        Ok(Arc::new(ConnectionThreads {
            threads,
            next: AtomicUsize::new(0),
            tasks,
        }))
    }

    /// How many connection threads there are.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether there are none (never: [`ConnectionThreads::start`] starts one at least).
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// The runtime of the thread with the fewest connections (the first of those
    /// from the next in turn), and the connection's place on it, given back when
    /// the [`Seat`] is dropped.
    pub(crate) fn pick(&self) -> (&Handle, Seat) {
        let n = self.threads.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let t = (0..n)
            .map(|k| &self.threads[(start + k) % n])
            .min_by_key(|t| t.connections.load(Ordering::Relaxed))
            .unwrap_or(&self.threads[0]);
        t.connections.fetch_add(1, Ordering::Relaxed);
        (&t.handle, Seat(t.connections.clone()))
    }

    /// The runtime request tasks are spawned on.
    pub(crate) fn tasks(&self) -> &Handle {
        &self.tasks
    }
}

/// A connection's place on its connection thread: counted until dropped.
#[derive(Debug)]
pub(crate) struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Where a connection spawns the requests that run as tasks of their own.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskSpawner(Option<Handle>);

impl TaskSpawner {
    /// Spawns on the runtime this is called in.
    pub(crate) fn current() -> TaskSpawner {
        TaskSpawner(None)
    }

    /// Spawns on `handle`'s runtime.
    pub(crate) fn on(handle: Handle) -> TaskSpawner {
        TaskSpawner(Some(handle))
    }

    /// Spawns `task`, detached.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match &self.0 {
            Some(h) => drop(h.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(t: &ConnectionThreads) -> Vec<usize> {
        t.threads
            .iter()
            .map(|t| t.connections.load(Ordering::Relaxed))
            .collect()
    }

    #[test]
    fn connections_go_to_the_thread_with_the_fewest() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let t = ConnectionThreads::start(2, rt.handle().clone()).unwrap();
        let a = t.pick().1;
        let b = t.pick().1;
        let c = t.pick().1;
        assert_eq!(counts(&t), [2, 1]);
        drop((a, c));
        // Both seats of the first thread are free again: it takes the next two.
        let d = t.pick().1;
        let e = t.pick().1;
        assert_eq!(counts(&t), [2, 1]);
        drop((b, d, e));
        assert_eq!(counts(&t), [0, 0]);
    }

    #[test]
    fn a_spawned_connection_runs_on_its_thread() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let t = ConnectionThreads::start(1, rt.handle().clone()).unwrap();
        let (h, _seat) = t.pick();
        let (tx, rx) = std::sync::mpsc::channel();
        h.spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        let name = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(name.as_deref(), Some("smbx-conn-0"));
    }
}
