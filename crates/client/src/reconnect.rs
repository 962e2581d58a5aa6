//! Reconnection for idempotent operations: a tree that, when its connection drops (or
//! the server forgets the session), connects, logs on and connects the share again, then
//! retries the operation once. Only operations that are safe to repeat are offered.

use std::future::Future;

use smbx_wire::NtStatus;
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use crate::info::{DirEntry, FileInfo};
use crate::options::ClientOptions;
use crate::{Client, Tree};

/// Who to log on as.
#[derive(Clone)]
enum Logon {
    User {
        user: String,
        password: String,
        domain: String,
    },
    Anonymous,
}

/// A share connection that re-establishes itself for idempotent operations.
pub struct ReconnectingTree {
    addr: String,
    options: ClientOptions,
    logon: Logon,
    share: String,
    current: Mutex<Tree>,
}

impl std::fmt::Debug for ReconnectingTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconnectingTree")
            .field("addr", &self.addr)
            .field("share", &self.share)
            .finish_non_exhaustive()
    }
}

/// True for failures a fresh connection can cure.
fn is_lost(e: &Error) -> bool {
    match e {
        Error::Disconnected(_) | Error::Io(_) => true,
        Error::Status { status, .. } => matches!(
            *status,
            NtStatus::NETWORK_SESSION_EXPIRED | NtStatus::USER_SESSION_DELETED
        ),
        _ => false,
    }
}

impl ReconnectingTree {
    /// Connects to `addr`, logs on as `user` (anonymously if `None`: then `password` and
    /// `domain` are ignored) and connects `share`.
    pub async fn connect(
        addr: &str,
        options: ClientOptions,
        user: Option<(&str, &str, &str)>,
        share: &str,
    ) -> Result<ReconnectingTree> {
        let logon = match user {
            Some((user, password, domain)) => Logon::User {
                user: user.to_string(),
                password: password.to_string(),
                domain: domain.to_string(),
            },
            None => Logon::Anonymous,
        };
        let tree = build(addr, &options, &logon, share).await?;
        Ok(ReconnectingTree {
            addr: addr.to_string(),
            options,
            logon,
            share: share.to_string(),
            current: Mutex::new(tree),
        })
    }

    /// The tree in use now (it may later be replaced by a reconnection).
    pub async fn tree(&self) -> Tree {
        self.current.lock().await.clone()
    }

    /// Replaces the connection, session and tree with new ones.
    pub async fn reconnect(&self) -> Result<Tree> {
        let mut cur = self.current.lock().await;
        cur.session().client().connection().close();
        let tree = build(&self.addr, &self.options, &self.logon, &self.share).await?;
        *cur = tree.clone();
        Ok(tree)
    }

    /// A working tree to replace `failed`: the current one if another caller already
    /// reconnected, else a new one.
    async fn replace(&self, failed: &Tree) -> Result<Tree> {
        let mut cur = self.current.lock().await;
        let (now_session, was_session) = (cur.session(), failed.session());
        let now = now_session.client().connection();
        let was = was_session.client().connection();
        if !std::ptr::eq(now, was) && !now.is_closed() {
            return Ok(cur.clone());
        }
        now.close();
        let tree = build(&self.addr, &self.options, &self.logon, &self.share).await?;
        *cur = tree.clone();
        Ok(tree)
    }

    /// Runs an idempotent operation, reconnecting and retrying once if the connection or
    /// session was lost.
    pub async fn run<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Tree) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let tree = self.tree().await;
        match op(tree.clone()).await {
            Err(e) if is_lost(&e) => op(self.replace(&tree).await?).await,
            r => r,
        }
    }

    /// [`Tree::stat`], retried across a reconnection.
    pub async fn stat(&self, path: &str) -> Result<FileInfo> {
        self.run(|t| async move { t.stat(path).await }).await
    }

    /// [`Tree::list`], retried across a reconnection.
    pub async fn list(&self, dir: &str) -> Result<Vec<DirEntry>> {
        self.run(|t| async move { t.list(dir).await }).await
    }

    /// [`Tree::read_file`], retried across a reconnection.
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        self.run(|t| async move { t.read_file(path).await }).await
    }

    /// [`Tree::write_file`] (create or truncate, then write everything): repeating it
    /// gives the same result, so it is retried across a reconnection.
    pub async fn write_file(&self, path: &str, data: &[u8]) -> Result<()> {
        self.run(|t| async move { t.write_file(path, data).await })
            .await
    }
}

async fn build(addr: &str, options: &ClientOptions, logon: &Logon, share: &str) -> Result<Tree> {
    let client = Client::connect(addr, options.clone()).await?;
    let session = match logon {
        Logon::User {
            user,
            password,
            domain,
        } => client.login(user, password, domain).await?,
        Logon::Anonymous => client.login_anonymous().await?,
    };
    session.tree(share).await
}
