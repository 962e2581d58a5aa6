//! The smbpasswd line format and atomic file writes.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Entry;

const NO_HASH: &str = "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";

/// Longest user name accepted.
pub const MAX_USER_LEN: usize = 256;

/// Rejects names that cannot be stored in the file.
pub fn check_user_name(user: &str) -> Result<(), String> {
    if user.is_empty() {
        return Err("user name is empty".into());
    }
    if user.len() > MAX_USER_LEN {
        return Err(format!("user name longer than {MAX_USER_LEN} bytes"));
    }
    if user.contains(':') || user.chars().any(char::is_control) {
        return Err(format!(
            "user name {user:?} contains ':' or a control character"
        ));
    }
    if user.trim() != user || user.starts_with('#') {
        return Err(format!(
            "user name {user:?} has leading or trailing blanks or starts with '#'"
        ));
    }
    Ok(())
}

fn parse_hash(field: &str) -> Result<Option<[u8; 16]>, String> {
    if field.len() == 32 && field.bytes().all(|b| b.is_ascii_hexdigit()) {
        let mut out = [0u8; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = field.get(2 * i..2 * i + 2).ok_or("bad hash")?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| "bad hash")?;
        }
        return Ok(Some(out));
    }
    let upper = field.to_ascii_uppercase();
    if upper.starts_with("NO PASSWORD") || upper.chars().all(|c| c == 'X') || field.starts_with('*')
    {
        return Ok(None);
    }
    Err(format!(
        "password hash {field:?} is neither 32 hex digits nor 32 'X'"
    ))
}

/// Parses one non-comment line.
pub fn parse_line(line: &str) -> Result<Entry, String> {
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 4 {
        return Err(format!(
            "expected name:uid:LMHASH:NTHASH:[FLAGS]:LCT-XXXXXXXX:, found {} field(s)",
            fields.len()
        ));
    }
    let user = fields[0];
    check_user_name(user)?;
    let uid: u32 = fields[1]
        .trim()
        .parse()
        .map_err(|_| format!("uid {:?} is not a number", fields[1]))?;
    parse_hash(fields[2]).map_err(|m| format!("LM {m}"))?;
    let nt = parse_hash(fields[3]).map_err(|m| format!("NT {m}"))?;
    let mut flags = String::from("U");
    let mut last_change = 0;
    if let Some(f) = fields.get(4).filter(|f| f.starts_with('[')) {
        let inner = f
            .strip_prefix('[')
            .and_then(|f| f.strip_suffix(']'))
            .ok_or_else(|| format!("account flags {f:?} lack a closing ']'"))?;
        if !inner.chars().all(|c| c.is_ascii_uppercase() || c == ' ') {
            return Err(format!("account flags {f:?} must be upper-case letters"));
        }
        flags = inner.chars().filter(|c| *c != ' ').collect();
        if let Some(lct) = fields.get(5).filter(|f| !f.is_empty()) {
            let hex = lct
                .strip_prefix("LCT-")
                .ok_or_else(|| format!("last change field {lct:?} does not start with LCT-"))?;
            last_change = u64::from_str_radix(hex, 16)
                .map_err(|_| format!("last change time {hex:?} is not hex"))?;
        }
    }
    Ok(Entry {
        user: user.to_string(),
        uid,
        nt_hash: nt.unwrap_or([0; 16]),
        disabled: flags.contains('D'),
        flags,
        last_change,
        has_password: nt.is_some(),
    })
}

/// Formats an entry as Samba writes it.
pub fn format_line(e: &Entry) -> String {
    let nt = if e.has_password {
        e.nt_hash.iter().map(|b| format!("{b:02X}")).collect()
    } else {
        NO_HASH.to_string()
    };
    let mut flags: String = e.flags.chars().filter(|c| c.is_ascii_uppercase()).collect();
    if e.disabled && !flags.contains('D') {
        flags.insert(0, 'D');
    }
    if !e.disabled {
        flags.retain(|c| c != 'D');
    }
    format!(
        "{}:{}:{NO_HASH}:{nt}:[{flags:<11}]:LCT-{:08X}:",
        e.user, e.uid, e.last_change
    )
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The uid of the Unix account `user` from /etc/passwd, else the caller's uid.
pub fn unix_uid(user: &str) -> u32 {
    if let Ok(text) = std::fs::read_to_string("/etc/passwd") {
        for line in text.lines() {
            let mut f = line.split(':');
            if f.next() == Some(user) {
                if let Some(uid) = f.nth(1).and_then(|u| u.parse().ok()) {
                    return uid;
                }
            }
        }
    }
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

static TMP_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Writes `data` to `path` atomically with mode 0600.
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "passdb path has no file name")
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_line() {
        let line = "alice:1000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[U          ]:LCT-5F5E1000:";
        let e = parse_line(line).unwrap();
        assert_eq!(e.flags, "U");
        assert_eq!(e.last_change, 0x5F5E1000);
        assert_eq!(format_line(&e), line);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        for bad in [
            "",
            ":",
            "a:b:c:d",
            "a:1",
            "a:1:XX:YY:",
            "a:1:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:ZZ49C406510BDCAB6824EE7C30FD852Z:[U]:",
            "a:1:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[U:",
            "a:1:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[u]:",
            "a:1:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[U]:LCT-zz:",
            "a:99999999999:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:",
            "é:1:é:é:é",
        ] {
            assert!(parse_line(bad).is_err(), "{bad:?}");
        }
    }
}
