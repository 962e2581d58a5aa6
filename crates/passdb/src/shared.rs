//! A thread-safe database that follows changes to its file.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::PassDb;

/// What identifies a version of the file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path).ok().map(|m| Stamp {
        ino: m.ino(),
        len: m.len(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
        ctime: m.ctime(),
        ctime_nsec: m.ctime_nsec(),
    })
}

struct Cached {
    db: PassDb,
    stamp: Option<Stamp>,
}

/// A [`PassDb`] shared between threads that re-reads its file whenever the
/// file changes (inode, size, mtime or ctime), so `smbx user add` takes
/// effect without a restart. Disabled users and users without a password
/// have no hash.
pub struct SharedPassDb {
    path: PathBuf,
    cached: Mutex<Cached>,
}

impl SharedPassDb {
    /// Loads `path` (a missing file is an empty database, filled in when it appears).
    pub fn open(path: &Path) -> io::Result<SharedPassDb> {
        let stamp = stamp(path);
        let db = PassDb::open(path)?;
        for w in db.warnings() {
            tracing::warn!("{w}");
        }
        Ok(SharedPassDb {
            path: path.to_path_buf(),
            cached: Mutex::new(Cached { db, stamp }),
        })
    }

    /// The file being followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Re-reads the file if it changed and returns a copy of the current database.
    pub fn snapshot(&self) -> PassDb {
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh(&mut c);
        c.db.clone()
    }

    fn refresh(&self, c: &mut Cached) {
        let now = stamp(&self.path);
        if now == c.stamp {
            return;
        }
        match PassDb::open(&self.path) {
            Ok(db) => {
                for w in db.warnings() {
                    tracing::warn!("{w}");
                }
                tracing::info!(path = %self.path.display(), users = db.list().len(), "password database reloaded");
                c.db = db;
                c.stamp = now;
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot reload password database: {e}");
            }
        }
    }

    /// The NT hash for `user` (case-insensitive), or `None` if the user is
    /// unknown, disabled, or has no password.
    pub fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh(&mut c);
        c.db.lookup(user)
            .filter(|e| !e.disabled && e.has_password)
            .map(|e| e.nt_hash)
    }
}

impl smbx_security::auth::CredentialStore for SharedPassDb {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        SharedPassDb::nt_hash(self, user)
    }
}
