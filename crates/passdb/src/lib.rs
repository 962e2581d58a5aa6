//! smbx-passdb: the password database in Samba's smbpasswd format.
//!
//! Boundaries: owns the smbpasswd file; imports only smbx-security (NT hashes), never
//! the server.
//!
//! One user per line:
//! `name:uid:LMHASH:NTHASH:[FLAGS      ]:LCT-XXXXXXXX:` where the hashes are
//! 32 hex digits (or 32 `X` when absent — smbx never stores LM hashes), the
//! flags are 11 characters in brackets (`U` user, `D` disabled, `N` no
//! password required, ...) and LCT is the last change time in hex seconds.
//! Lines starting with `#` are comments. Malformed lines are kept verbatim
//! (so saving never loses data), skipped for lookups and reported through
//! [`PassDb::warnings`] with their line numbers.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod file;
mod hash;
mod shared;

use std::io;
use std::path::{Path, PathBuf};

pub use hash::nt_hash;
pub use shared::SharedPassDb;

/// One user of the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// User name as stored.
    pub user: String,
    /// Unix uid recorded for the user.
    pub uid: u32,
    /// NT hash (MD4 of the UTF-16LE password); all zero when `has_password` is false.
    pub nt_hash: [u8; 16],
    /// `D` flag: the account may not log on.
    pub disabled: bool,
    /// The account flags, the letters between the brackets (for example `U` or `DU`).
    pub flags: String,
    /// Last change time, seconds since the Unix epoch (0 if not recorded).
    pub last_change: u64,
    /// Whether an NT hash is stored (false for `NO PASSWORD` / `XXXX` entries).
    pub has_password: bool,
}

/// One line of the file.
#[derive(Debug, Clone)]
enum Line {
    /// Comment, blank or malformed line: written back unchanged.
    Verbatim(String),
    /// A user entry, with the original text while it is unchanged.
    User(Entry, Option<String>),
}

/// A smbpasswd file loaded in memory.
#[derive(Debug, Clone)]
pub struct PassDb {
    path: PathBuf,
    lines: Vec<Line>,
    warnings: Vec<String>,
}

impl PassDb {
    /// Loads `path`; a missing file is an empty database. Malformed lines
    /// are reported in [`PassDb::warnings`], never an error.
    pub fn open(path: &Path) -> io::Result<PassDb> {
        let text = match std::fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        Ok(PassDb::parse(path, &text))
    }

    /// Parses `text` as the contents of `path` (which is where `save` writes).
    pub fn parse(path: &Path, text: &str) -> PassDb {
        let mut lines = Vec::new();
        let mut warnings = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                lines.push(Line::Verbatim(raw.to_string()));
                continue;
            }
            match file::parse_line(trimmed) {
                Ok(e) => lines.push(Line::User(e, Some(raw.to_string()))),
                Err(msg) => {
                    warnings.push(format!("{}:{}: {msg}", path.display(), i + 1));
                    lines.push(Line::Verbatim(raw.to_string()));
                }
            }
        }
        PassDb {
            path: path.to_path_buf(),
            lines,
            warnings,
        }
    }

    /// The file this database reads from and saves to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Problems found while loading, as `FILE:LINE: message`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn users(&self) -> impl Iterator<Item = &Entry> {
        self.lines.iter().filter_map(|l| match l {
            Line::User(e, _) => Some(e),
            Line::Verbatim(_) => None,
        })
    }

    fn position(&self, user: &str) -> Option<usize> {
        let want = user.to_lowercase();
        self.lines
            .iter()
            .position(|l| matches!(l, Line::User(e, _) if e.user.to_lowercase() == want))
    }

    /// The entry for `user`, matched case-insensitively.
    pub fn lookup(&self, user: &str) -> Option<Entry> {
        let want = user.to_lowercase();
        self.users()
            .find(|e| e.user.to_lowercase() == want)
            .cloned()
    }

    /// All entries in file order.
    pub fn list(&self) -> Vec<Entry> {
        self.users().cloned().collect()
    }

    /// Sets `user`'s password (adding the user if new) and writes the file.
    /// The file is re-read first so concurrent edits by others are kept.
    /// New users get the uid of the Unix account of that name, or the
    /// caller's uid. Existing users keep their uid and flags.
    pub fn add_or_update(&mut self, user: &str, password: &str) -> io::Result<()> {
        file::check_user_name(user).map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        self.reload()?;
        let hash = nt_hash(password);
        let now = file::now_secs();
        match self.position(user) {
            Some(i) => {
                if let Line::User(e, raw) = &mut self.lines[i] {
                    *raw = None;
                    e.nt_hash = hash;
                    e.has_password = true;
                    e.last_change = now;
                }
            }
            None => self.lines.push(Line::User(
                Entry {
                    user: user.to_string(),
                    uid: file::unix_uid(user),
                    nt_hash: hash,
                    disabled: false,
                    flags: "U".into(),
                    last_change: now,
                    has_password: true,
                },
                None,
            )),
        }
        self.save()
    }

    /// Sets or clears the `D` (disabled) flag and writes the file.
    /// Returns false if the user does not exist.
    pub fn set_disabled(&mut self, user: &str, disabled: bool) -> io::Result<bool> {
        self.reload()?;
        let Some(i) = self.position(user) else {
            return Ok(false);
        };
        if let Line::User(e, raw) = &mut self.lines[i] {
            *raw = None;
            e.disabled = disabled;
            e.flags.retain(|c| c != 'D');
            if disabled {
                e.flags.insert(0, 'D');
            }
        }
        self.save()?;
        Ok(true)
    }

    /// Removes `user` and writes the file. Returns false if there was no such user.
    pub fn remove(&mut self, user: &str) -> io::Result<bool> {
        self.reload()?;
        let Some(i) = self.position(user) else {
            return Ok(false);
        };
        self.lines.remove(i);
        self.save()?;
        Ok(true)
    }

    fn reload(&mut self) -> io::Result<()> {
        *self = PassDb::open(&self.path)?;
        Ok(())
    }

    /// The file contents this database would save.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            match l {
                Line::Verbatim(s) => out.push_str(s),
                Line::User(_, Some(raw)) => out.push_str(raw),
                Line::User(e, None) => out.push_str(&file::format_line(e)),
            }
            out.push('\n');
        }
        out
    }

    /// Writes the file atomically: a temporary file (mode 0600) in the same
    /// directory, fsync, rename over the old file, fsync the directory. The
    /// parent directory is created (mode 0700) if missing.
    pub fn save(&self) -> io::Result<()> {
        file::write_atomic(&self.path, self.to_text().as_bytes())
    }
}
