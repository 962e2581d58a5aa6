//! Files on SMB shares, through smbx-client.
//!
//! Every worker thread has its own connection, session, tree and open of each smb:// target,
//! driven by a single-threaded tokio runtime (as fio's jobs and diskspd's threads are
//! independent of each other): a thread's I/Os are futures it polls itself, and while it
//! waits in `reap` the same thread runs its connection's reader and writer tasks, so a
//! response reaches the I/O waiting for it, and the next request leaves, without waking
//! another thread. When one OS thread runs several worker threads (more threads than
//! cores, `--os-threads`), their connections share that thread's runtime, and a queue
//! waiting for its own I/Os stops as soon as another one's have finished. Threads share nothing but the offsets of `-si`; their results are merged
//! at the end. The first thread uses the connection [`SmbTarget::open`] made (to create the
//! file with `-c` and learn its size); the others connect when their queue is opened, before
//! the warm-up starts. A thread keeps as many READ/WRITE requests in flight as it has slots
//! (the client queues what exceeds its credit window). `-Su` sets
//! FILE_NO_INTERMEDIATE_BUFFERING and `-Sw` FILE_WRITE_THROUGH in the CREATE options.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use smbx_client::{create_options, ClientOptions, File, OpenOptions, SmbUrl};
use smbx_task::WokenSet;
use tokio::runtime::Runtime;

use super::ready_group::ReadyGroup;
use super::{AlignedBuf, Completion, IoQueue, QueueConfig, Target, WriteData};
use crate::error::BenchError;
use crate::profile::Profile;
use crate::rng::Rng;
use crate::stats::IoKind;

/// A file on an SMB share.
pub struct SmbTarget {
    name: String,
    size: u64,
    /// How every thread's connection is made and its file opened.
    how: Arc<Connect>,
    /// The connection `open` made, until the first queue takes it.
    first: std::sync::Mutex<Option<Conn>>,
    /// The channels of each connection whose queue has closed (for the report).
    channels: Arc<std::sync::Mutex<Vec<smbx_client::ChannelStats>>>,
    /// `--shared-connection`: the queues of one OS thread open the file on one connection.
    shared_connection: bool,
}

impl std::fmt::Debug for SmbTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmbTarget")
            .field("name", &self.name)
            .field("size", &self.size)
            .finish()
    }
}

/// What a connection to the target is made with.
struct Connect {
    name: String,
    url: SmbUrl,
    password: Option<String>,
    options: ClientOptions,
    open: OpenOptions,
}

/// One connection and its open of the file, with the single-threaded runtime that runs
/// them (and maybe other connections of the same OS thread). Closed (the file, within
/// 2 s) when dropped.
struct Conn {
    // Declared before `rt` so that it is closed (in Drop) while the runtime still runs.
    file: Option<Arc<File>>,
    rt: Arc<Runtime>,
    /// The file's path inside the share.
    path: String,
    /// Whether the connection is this open's own (false: an open on the connection of
    /// another queue of the same OS thread, `--shared-connection`, which reports its
    /// channels).
    own: bool,
}

/// A new single-threaded runtime for connections.
fn runtime() -> Result<Arc<Runtime>, BenchError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|e| BenchError::io("starting the SMB runtime", e))
}

/// What the SMB queues of one OS thread that runs several worker threads share: the
/// runtime of their connections, and the group of their I/O sets.
pub(crate) struct SmbShare {
    rt: Arc<Runtime>,
    ready: Arc<ReadyGroup>,
    /// With `--shared-connection`: the tree (connection, session and share) of the
    /// thread's first queue, and the file's path in it, on which the others open the file.
    tree: Option<(smbx_client::Tree, String)>,
}

impl Conn {
    /// Connected on `rt` (a new runtime when `None`), logged on, and the file opened;
    /// `create` (`-c`: size and seed) first writes the file.
    fn open(
        how: &Connect,
        create: Option<(u64, u64)>,
        rt: Option<Arc<Runtime>>,
    ) -> Result<Conn, BenchError> {
        let rt = match rt {
            Some(rt) => rt,
            None => runtime()?,
        };
        let name = &how.name;
        let (file, path) = rt.block_on(async {
            let (tree, path) = how
                .url
                .open(how.password.as_deref(), how.options.clone())
                .await
                .map_err(smb_err(format!("{name}: connecting")))?;
            if let Some((size, seed)) = create {
                create_remote(&tree, &path, size, seed)
                    .await
                    .map_err(smb_err(format!("-c: creating {name}")))?;
            }
            let file = tree
                .open(&path, &how.open)
                .await
                .map_err(smb_err(format!("opening {name}")))?;
            Ok::<_, BenchError>((file, path))
        })?;
        Ok(Conn {
            file: Some(Arc::new(file)),
            rt,
            path,
            own: true,
        })
    }

    /// The file opened once more on `tree` (another queue's connection, session and
    /// tree), on that queue's runtime `rt`.
    fn open_on(
        how: &Connect,
        tree: &smbx_client::Tree,
        path: &str,
        rt: Arc<Runtime>,
    ) -> Result<Conn, BenchError> {
        let file = rt
            .block_on(tree.open(path, &how.open))
            .map_err(smb_err(format!("opening {}", how.name)))?;
        Ok(Conn {
            file: Some(Arc::new(file)),
            rt,
            path: path.to_string(),
            own: false,
        })
    }

    fn file(&self) -> Option<&Arc<File>> {
        self.file.as_ref()
    }

    /// Its connection's channels (none for an open on another queue's connection).
    fn channels(&self) -> Vec<smbx_client::ChannelStats> {
        self.file()
            .filter(|_| self.own)
            .map(|f| f.tree().session().channel_stats())
            .unwrap_or_default()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(f) = self.file.take().and_then(|f| Arc::try_unwrap(f).ok()) {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(2), f.close()).await });
        }
    }
}

/// The URL without its password, for reports.
pub fn redact(url: &str) -> String {
    match SmbUrl::parse(url) {
        Ok(u) if u.password.is_some() => {
            let scheme_len = "smb://".len();
            let rest = url.get(scheme_len..).unwrap_or("");
            // Everything up to the last '@' before the first '/' is user information.
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => {
                    let userinfo = &rest[..at];
                    let user = userinfo.split(':').next().unwrap_or("");
                    format!("smb://{user}{}", &rest[at..])
                }
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

fn smb_err(what: String) -> impl FnOnce(smbx_client::Error) -> BenchError {
    move |e| BenchError::Smb {
        what,
        msg: e.to_string(),
    }
}

impl SmbTarget {
    /// Connects, logs on (password from the URL or `SMBX_PASSWORD`), creates the file
    /// with `-c`, and opens it: the first worker thread's connection.
    pub fn open(url: &str, p: &Profile) -> Result<SmbTarget, BenchError> {
        let name = redact(url);
        let parsed = SmbUrl::parse(url).map_err(smb_err(name.clone()))?;
        if parsed.path.is_empty() {
            return Err(BenchError::Other(format!(
                "{name}: the URL names a share but no file in it"
            )));
        }
        let mut options = ClientOptions::default();
        if let Some(t) = p.transport {
            options.transport = t;
        }
        if let Some(n) = p.rdma_threshold {
            options.rdma_threshold = Some(n);
        }
        if let Some(n) = p.multichannel {
            options.max_channels = n;
        }
        if let Some(list) = &p.socket_options {
            options.socket = smbx_client::SocketOptions::parse(list).0;
        }
        if let Some(us) = p.spin_us {
            options.spin_wait = std::time::Duration::from_micros(us);
        }
        options = p.protection.apply(options);
        if p.kerberos {
            options.kerberos = smbx_client::Kerberos::Required;
        }
        let mut open = OpenOptions::read_only();
        if p.write_percent > 0 {
            open = open.write(true);
        }
        open = open.write_through(p.write_through);
        if p.no_cache {
            open.options |= create_options::NO_INTERMEDIATE_BUFFERING;
        }
        let how = Connect {
            name: name.clone(),
            url: parsed,
            password: std::env::var("SMBX_PASSWORD").ok(),
            options,
            open,
        };
        let conn = Conn::open(&how, p.create_size.map(|s| (s, p.seed)), None)?;
        let size = conn.file().map_or(0, |f| f.size_at_open());
        Ok(SmbTarget {
            name,
            size,
            how: Arc::new(how),
            first: std::sync::Mutex::new(Some(conn)),
            channels: Arc::default(),
            shared_connection: p.shared_connection,
        })
    }
}

async fn create_remote(
    tree: &smbx_client::Tree,
    path: &str,
    size: u64,
    seed: u64,
) -> smbx_client::Result<()> {
    let f = tree.open(path, &OpenOptions::create_truncate()).await?;
    let mut rng = Rng::new(seed, 0xC0FFEE);
    const CHUNK: u64 = 8 << 20;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(CHUNK) as usize;
        rng.fill(&mut buf[..n]);
        f.write_at(off, &buf[..n]).await?;
        off += n as u64;
    }
    f.close().await?;
    Ok(())
}

impl Target for SmbTarget {
    fn name(&self) -> &str {
        &self.name
    }
    fn size(&self) -> u64 {
        self.size
    }
    /// The channels of every thread's connection, in the order the threads finished (the
    /// first connection's while no thread has taken it).
    fn channels(&self) -> Vec<smbx_client::ChannelStats> {
        let mut all = self.channels.lock().map(|c| c.clone()).unwrap_or_default();
        if let Ok(first) = self.first.lock() {
            if let Some(c) = first.as_ref() {
                all.extend(c.channels());
            }
        }
        all
    }

    fn engine(&self) -> &'static str {
        "smb"
    }
    fn shares_threads(&self) -> bool {
        true
    }

    fn queue(&self, cfg: &QueueConfig) -> Result<Box<dyn IoQueue>, BenchError> {
        let take_first = || self.first.lock().ok().and_then(|mut f| f.take());
        let (conn, group) = match &cfg.share {
            None => match take_first() {
                Some(c) => (c, None),
                None => (Conn::open(&self.how, None, None)?, None),
            },
            Some(share) => {
                let mut smb = share.smb.borrow_mut();
                match smb.as_ref() {
                    // Later queues of this OS thread open the file on the first one's
                    // connection (`--shared-connection`) or connect on its runtime.
                    Some(sh) => (
                        match &sh.tree {
                            Some((tree, path)) => {
                                Conn::open_on(&self.how, tree, path, sh.rt.clone())?
                            }
                            None => Conn::open(&self.how, None, Some(sh.rt.clone()))?,
                        },
                        Some(sh.ready.clone()),
                    ),
                    // The first one takes the connection `open` made, whose runtime
                    // becomes the thread's, if no other thread took it.
                    None => {
                        let conn = match take_first() {
                            Some(c) => c,
                            None => Conn::open(&self.how, None, None)?,
                        };
                        let ready = Arc::new(ReadyGroup::default());
                        let tree = conn
                            .file()
                            .filter(|_| self.shared_connection)
                            .map(|f| (f.tree().clone(), conn.path.clone()));
                        *smb = Some(SmbShare {
                            rt: conn.rt.clone(),
                            ready: ready.clone(),
                            tree,
                        });
                        (conn, Some(ready))
                    }
                }
            }
        };
        if conn.file().is_none() {
            return Err(BenchError::Other(format!("{}: closed", self.name)));
        }
        let inflight = WokenSet::new();
        if let Some(g) = &group {
            g.join(&inflight);
        }
        Ok(Box::new(SmbQueue {
            conn,
            start: run,
            inflight,
            group,
            block: cfg.block,
            depth: cfg.depth,
            source: cfg.write_source.clone(),
            lent: Arc::default(),
            channels: self.channels.clone(),
        }))
    }
}

/// What one I/O does, and the data a WRITE sends.
enum Io {
    /// A READ of one block.
    Read,
    /// A WRITE of a copy of the one-block source, lent from (and back to) the list.
    WriteLent(Vec<u8>, Lent),
    /// A WRITE of a block of the source, shared.
    WriteShared(smbx_client::Bytes),
    /// A WRITE of a copy of the caller's bytes.
    WriteCopied(Vec<u8>),
}

/// Copies of a one-block write source, lent to WRITEs (see [`SmbQueue::lent`]).
type Lent = Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

/// One I/O on `slot`, as the queue's futures all are: one type, so that each slot of
/// the queue's [`WokenSet`] reuses its box (no allocation per I/O).
async fn run(slot: usize, file: Arc<File>, offset: u64, block: usize, io: Io) -> Completion {
    let result = match io {
        // The data stays in the buffer it arrived in (no copy into one of ours); the
        // buffer goes back to the client's pool.
        Io::Read => file
            .read_data(offset, block)
            .await
            .map_err(to_io)
            .and_then(|d| exact(d.len(), block)),
        Io::WriteLent(buf, lent) => {
            let (result, buf) = file.write_vec(offset, buf).await;
            if buf.len() == block {
                if let Ok(mut l) = lent.lock() {
                    l.push(buf);
                }
            }
            result.map_err(to_io)
        }
        Io::WriteShared(bytes) => file.write_bytes(offset, bytes).await.map_err(to_io),
        Io::WriteCopied(owned) => file.write_at(offset, &owned).await.map_err(to_io),
    };
    Completion { slot, result }
}

/// The I/Os of one worker thread on one SMB target: futures polled on the worker thread
/// itself, which also runs its connection's reader and writer tasks (its own
/// single-threaded runtime) while it waits for completions. `S` starts an I/O ([`run`]:
/// its futures' type `F` has no name to write here, so it is the type `S` returns).
struct SmbQueue<S, F: Future> {
    conn: Conn,
    start: S,
    inflight: WokenSet<F>,
    /// The I/O sets of the other worker threads this OS thread runs on the same runtime.
    group: Option<Arc<ReadyGroup>>,
    block: usize,
    depth: usize,
    source: Arc<AlignedBuf>,
    /// Copies of a one-block write source, lent to WRITEs ([`smbx_client::File::write_vec`])
    /// and back after each: over SMB Direct the server reads the data by RDMA straight
    /// from one of them, no copy per WRITE (at most one copy per I/O slot, made once).
    lent: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    channels: Arc<std::sync::Mutex<Vec<smbx_client::ChannelStats>>>,
}

impl<S, F: Future> Drop for SmbQueue<S, F> {
    fn drop(&mut self) {
        // Unfinished I/Os are dropped (cancelled) before the file is closed.
        self.inflight = WokenSet::new();
        if let Ok(mut all) = self.channels.lock() {
            all.extend(self.conn.channels());
        }
        // `conn` closes the file when it is dropped, after this.
    }
}

/// A block of the write source, as the bytes of a WRITE (held until it is sent).
struct SourceBlock(Arc<AlignedBuf>, std::ops::Range<usize>);

impl AsRef<[u8]> for SourceBlock {
    fn as_ref(&self) -> &[u8] {
        &self.0.as_slice()[self.1.clone()]
    }
}

fn to_io(e: smbx_client::Error) -> io::Error {
    io::Error::other(e.to_string())
}

fn exact(n: usize, want: usize) -> io::Result<usize> {
    if n == want {
        Ok(n)
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short transfer: {n} of {want} bytes"),
        ))
    }
}

impl<S, F> IoQueue for SmbQueue<S, F>
where
    S: Fn(usize, Arc<File>, u64, usize, Io) -> F,
    F: Future<Output = Completion>,
{
    fn submit(
        &mut self,
        slot: usize,
        kind: IoKind,
        offset: u64,
        data: WriteData<'_>,
    ) -> io::Result<()> {
        let file = self
            .conn
            .file()
            .cloned()
            .ok_or_else(|| io::Error::other("file closed"))?;
        let block = self.block;
        // The request goes out when the queue is next polled (in `reap`, right after the
        // worker has filled its free slots).
        let io = match (kind, data) {
            (IoKind::Read, _) => Io::Read,
            // Every WRITE sends the same block: lend it (see `lent`).
            (IoKind::Write, WriteData::Source(0)) if self.source.len() == block => {
                let buf = self.lent.lock().ok().and_then(|mut l| l.pop());
                let buf = buf.unwrap_or_else(|| self.source.as_slice().to_vec());
                Io::WriteLent(buf, self.lent.clone())
            }
            (IoKind::Write, WriteData::Source(at)) => {
                if at.saturating_add(block) > self.source.len() {
                    return Err(io::Error::other("write source offset out of range"));
                }
                // Shared, not copied: the WRITE sends its data from the source buffer.
                Io::WriteShared(smbx_client::Bytes::from_owner(SourceBlock(
                    self.source.clone(),
                    at..at + block,
                )))
            }
            (IoKind::Write, WriteData::Bytes(b)) => Io::WriteCopied(b.to_vec()),
        };
        let fut = (self.start)(slot, file, offset, block, io);
        self.inflight.push(fut);
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let want = min.min(self.inflight.len());
        let inflight = &mut self.inflight;
        let group = self.group.as_deref();
        self.conn.rt.block_on(async {
            let mut got = 0;
            if want > 0 {
                // Until `want` of ours are done, or (on a shared runtime) another queue's
                // are: the worker reaps those rather than sleep here while they wait.
                std::future::poll_fn(|cx| loop {
                    match inflight.poll_next(cx) {
                        Poll::Ready(Some(c)) => {
                            out.push(c);
                            got += 1;
                            if got >= want {
                                return Poll::Ready(());
                            }
                        }
                        Poll::Ready(None) => return Poll::Ready(()),
                        Poll::Pending if group.is_some_and(|g| g.others_ready(inflight)) => {
                            return Poll::Ready(())
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                })
                .await;
            }
            // Whatever else is ready; this also sends requests submitted since the last
            // poll. Polled with the runtime's waker (not a no-op one), so that a response
            // to any of them wakes whichever queue of this thread is waiting.
            std::future::poll_fn(|cx| {
                while let Poll::Ready(Some(c)) = inflight.poll_next(cx) {
                    out.push(c);
                }
                Poll::Ready(())
            })
            .await;
            // Lets the connection's tasks run once, so requests handed to its writer are
            // on the wire before the worker goes back to its own bookkeeping. With nothing
            // in flight (QD1 once its I/O is back) nothing was handed over: the yield
            // would only cost another poll of the socket (an epoll_wait) per I/O. On a
            // shared runtime it is left to the wait that follows the worker's pass over
            // all its queues (the runtime runs every connection's tasks there), instead of
            // costing one poll of the sockets per queue per pass.
            if !inflight.is_empty() && group.is_none() {
                tokio::task::yield_now().await;
            }
        });
        Ok(())
    }

    fn depth(&self) -> usize {
        self.depth
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_removed() {
        assert_eq!(
            redact("smb://DOM;bob:s3cr%40t@host:4445/share/f"),
            "smb://DOM;bob@host:4445/share/f"
        );
        assert_eq!(redact("smb://bob@host/share/f"), "smb://bob@host/share/f");
        assert_eq!(redact("/local/path"), "/local/path");
    }
}
