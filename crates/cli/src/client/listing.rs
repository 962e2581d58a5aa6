//! `ls` and `stat`: directory listings laid out like smbclient's, and file metadata.

use std::io::Write;

use smbx_client::{filetime_to_system, DirEntry, FileAttributes, FileInfo, Tree};

use super::{CmdResult, Failure};

/// smbclient's attribute letters: D directory, A archive, H hidden, S system,
/// R read-only, N normal.
pub fn attr_letters(a: FileAttributes) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (FileAttributes::DIRECTORY, 'D'),
        (FileAttributes::ARCHIVE, 'A'),
        (FileAttributes::HIDDEN, 'H'),
        (FileAttributes::SYSTEM, 'S'),
        (FileAttributes::READONLY, 'R'),
        (FileAttributes::NORMAL, 'N'),
    ] {
        if a.intersects(bit) {
            s.push(c);
        }
    }
    s
}

/// A FILETIME as local time, `Sun Nov 22 03:06:02 2026` (`-` when unset).
pub fn format_time(ft: u64) -> String {
    let Some(t) = filetime_to_system(ft) else {
        return "-".to_string();
    };
    let secs: i64 = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs().try_into().unwrap_or(i64::MAX),
        Err(e) => -(e.duration().as_secs().try_into().unwrap_or(i64::MAX)),
    };
    let tt = secs as libc::time_t;
    // SAFETY: localtime_r reads `tt` and writes only the `tm` we own; a zeroed tm is a
    // valid value of that plain C struct.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&tt, &mut tm).is_null() {
            return format!("@{secs}");
        }
        tm
    };
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let day = DAYS.get(tm.tm_wday as usize).copied().unwrap_or("???");
    let mon = MONTHS.get(tm.tm_mon as usize).copied().unwrap_or("???");
    format!(
        "{day} {mon} {:2} {:02}:{:02}:{:02} {}",
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        i64::from(tm.tm_year) + 1900
    )
}

/// One `ls` line: name, attributes, size, modification time.
pub fn ls_line(e: &DirEntry) -> String {
    format!(
        "  {:<30}{:>7} {:>8}  {}",
        e.name,
        attr_letters(e.info.attributes),
        e.info.size,
        format_time(e.info.last_write_time)
    )
}

fn is_pattern(s: &str) -> bool {
    s.contains(['*', '?', '<', '>', '"'])
}

fn split_last(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

/// Lists `path`: a directory's entries, the entries matching a wildcard in its last
/// component, or the one file it names.
pub async fn ls(tree: &Tree, path: &str) -> CmdResult {
    let (parent, last) = split_last(path);
    let mut entries = if is_pattern(last) {
        tree.list_matching(parent, last).await?
    } else if path.is_empty() || tree.stat(path).await?.is_dir() {
        tree.list(path).await?
    } else {
        tree.list_matching(parent, last).await?
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = std::io::stdout().lock();
    let mut text = String::new();
    for e in &entries {
        text.push_str(&ls_line(e));
        text.push('\n');
    }
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(format!("stdout: {e}")))
}

/// The `stat` report.
pub fn stat_text(path: &str, i: &FileInfo) -> String {
    let kind = if i.is_dir() { "directory" } else { "file" };
    format!(
        "  File: {name}\n  Type: {kind}\n  Size: {size}\tAllocation: {alloc}\tLinks: {links}\n  \
         Attributes: {letters} (0x{attr:08x})\n  File id: 0x{id:016x}\n  \
         Created:  {c}\n  Accessed: {a}\n  Modified: {m}\n  Changed:  {ch}\n",
        name = if path.is_empty() { "/" } else { path },
        size = i.size,
        alloc = i.allocation_size,
        links = i.number_of_links,
        letters = attr_letters(i.attributes),
        attr = i.attributes.bits(),
        id = i.index_number,
        c = format_time(i.creation_time),
        a = format_time(i.last_access_time),
        m = format_time(i.last_write_time),
        ch = format_time(i.change_time),
    )
}

/// Prints the metadata of `path`.
pub async fn stat(tree: &Tree, path: &str) -> CmdResult {
    let info = tree.stat(path).await?;
    let mut out = std::io::stdout().lock();
    out.write_all(stat_text(path, &info).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(format!("stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_lines() {
        assert_eq!(attr_letters(FileAttributes(0x10)), "D");
        assert_eq!(attr_letters(FileAttributes(0x20 | 0x02 | 0x01)), "AHR");
        assert_eq!(attr_letters(FileAttributes(0)), "");
        let e = DirEntry {
            name: "f.txt".into(),
            info: FileInfo {
                size: 1234,
                attributes: FileAttributes::ARCHIVE,
                ..Default::default()
            },
            ..Default::default()
        };
        let l = ls_line(&e);
        assert!(l.starts_with("  f.txt "), "{l}");
        assert!(l.contains("      A     1234  -"), "{l}");
    }

    #[test]
    fn times() {
        assert_eq!(format_time(0), "-");
        let ft = smbx_wire_filetime(1_700_000_000);
        let s = format_time(ft);
        assert!(s.ends_with("2023"), "{s}");
        assert_eq!(s.split_whitespace().count(), 5, "{s}");
    }

    fn smbx_wire_filetime(unix: u64) -> u64 {
        (unix + 11_644_473_600) * 10_000_000
    }

    #[test]
    fn stat_report_names_everything() {
        let i = FileInfo {
            size: 8,
            attributes: FileAttributes::ARCHIVE,
            index_number: 0xabc,
            number_of_links: 1,
            ..Default::default()
        };
        let t = stat_text("d/f", &i);
        for needle in ["File: d/f", "Size: 8", "0x0000000000000abc", "(0x00000020)"] {
            assert!(t.contains(needle), "{needle}: {t}");
        }
    }
}
