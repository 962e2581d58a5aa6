//! Deterministic 8.3 short names for FileBothDirectoryInformation and friends.

/// Returns the 8.3 short name for `name`, or `None` when `name` is already a valid,
/// 8.3 name (compared case-insensitively) (then it needs no separate short name).
///
/// The mangled form is `PREFIX~HH.EXT`: up to five upper-cased legal characters of the
/// base name, `~`, two characters of a hash of the whole name (so equal long names always
/// map to the same short name), and up to three legal characters of the last extension.
pub fn short_name(name: &str) -> Option<String> {
    if name == "." || name == ".." || is_valid_83(name) {
        return None;
    }
    let (base, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i + 1..]),
        _ => (name, ""),
    };
    let legal = |s: &str, max: usize| -> String {
        s.chars()
            .filter(|c| c.is_ascii() && is_legal_83_char(*c) && *c != '.')
            .map(|c| c.to_ascii_uppercase())
            .take(max)
            .collect()
    };
    let mut prefix = legal(base, 5);
    if prefix.is_empty() {
        prefix.push('_');
    }
    let h = fnv1a(name.as_bytes());
    const DIGITS: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let d1 = DIGITS[(h % 36) as usize] as char;
    let d2 = DIGITS[((h / 36) % 36) as usize] as char;
    let ext = legal(ext, 3);
    let mut out = format!("{prefix}~{d1}{d2}");
    if !ext.is_empty() {
        out.push('.');
        out.push_str(&ext);
    }
    Some(out)
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn is_legal_83_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'()-@^_`{}~".contains(c)
}

fn is_valid_83(name: &str) -> bool {
    let (base, ext) = match name.split_once('.') {
        Some((b, e)) => (b, Some(e)),
        None => (name, None),
    };
    let ok = |s: &str| s.chars().all(is_legal_83_char);
    if base.is_empty() || base.len() > 8 || !ok(base) {
        return false;
    }
    match ext {
        None => true,
        Some(e) => !e.is_empty() && e.len() <= 3 && ok(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_need_none() {
        assert_eq!(short_name("README.TXT"), None);
        assert_eq!(short_name("A"), None);
        assert_eq!(short_name("."), None);
    }

    #[test]
    fn mangles_deterministically() {
        let s = short_name("Long File Name.document").unwrap();
        assert_eq!(s, short_name("Long File Name.document").unwrap());
        assert!(s.starts_with("LONGF~"), "{s}");
        assert!(s.ends_with(".DOC"), "{s}");
        assert!(s.len() <= 12);
        assert!(is_valid_83(&s), "{s}");
        assert_eq!(short_name("readme.txt"), None);
        let t = short_name("readme.text").unwrap();
        assert!(t.starts_with("READM~") && t.ends_with(".TEX"), "{t}");
        let u = short_name(".bashrc").unwrap();
        assert!(is_valid_83(&u), "{u}");
        assert_ne!(short_name("abcdefghij1"), short_name("abcdefghij2"));
    }
}
