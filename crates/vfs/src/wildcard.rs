//! SMB name-pattern matching ([MS-FSA] 2.1.4.4, FsRtlIsNameInExpression semantics).

/// Matches `name` against an SMB search `pattern`:
///
/// - `*` matches zero or more characters;
/// - `?` matches exactly one character;
/// - `<` (DOS_STAR) matches zero or more characters, but never the last '.' of the name;
/// - `>` (DOS_QM) matches one character, or zero characters at a '.' or the end of the
///   name (so a run of `>` can stop early);
/// - `"` (DOS_DOT) matches a '.' or zero characters at the end of the name.
///
/// Other characters match themselves (case-insensitively unless `case_sensitive`).
/// Runs in O(len(pattern) × len(name)) time and O(len(pattern)) space.
pub fn wildcard_match(pattern: &str, name: &str, case_sensitive: bool) -> bool {
    let fold = |s: &str| -> Vec<char> {
        if case_sensitive {
            s.chars().collect()
        } else {
            s.chars().map(fold_char).collect()
        }
    };
    let p = fold(pattern);
    let n = fold(name);
    let last_dot = n.iter().rposition(|&c| c == '.');
    let plen = p.len();
    // next[i] = does p[i..] match n[j+1..]; cur[i] = does p[i..] match n[j..].
    let mut next = vec![false; plen + 1];
    let mut cur = vec![false; plen + 1];
    for j in (0..=n.len()).rev() {
        let c = n.get(j).copied();
        cur[plen] = c.is_none();
        for i in (0..plen).rev() {
            cur[i] = match p[i] {
                '*' => cur[i + 1] || (c.is_some() && next[i]),
                '<' => cur[i + 1] || (c.is_some() && Some(j) != last_dot && next[i]),
                '>' => match c {
                    Some('.') | None => cur[i + 1],
                    Some(_) => next[i + 1],
                },
                '"' => match c {
                    Some('.') => next[i + 1],
                    None => cur[i + 1],
                    Some(_) => false,
                },
                '?' => c.is_some() && next[i + 1],
                pc => c == Some(pc) && next[i + 1],
            };
        }
        std::mem::swap(&mut cur, &mut next);
    }
    next[0]
}

/// Simple case fold of one character (to upper case when that is a single character).
fn fold_char(c: char) -> char {
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::wildcard_match as m;

    #[test]
    fn plain_wildcards() {
        let t = [
            ("*", "anything.txt", true),
            ("*", "", true),
            ("*.txt", "a.txt", true),
            ("*.txt", "a.TXT", true),
            ("*.txt", "a.txt.bak", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a*c", "abbbc", true),
            ("a*c", "abbbd", false),
            ("*.*", "a.b", true),
            ("*.*", "ab", false),
            ("foo", "FOO", true),
            ("foo", "fo", false),
            ("", "", true),
            ("", "a", false),
            ("**a", "ba", true),
        ];
        for (p, n, want) in t {
            assert_eq!(m(p, n, false), want, "{p:?} vs {n:?}");
        }
        assert!(!m("foo", "FOO", true));
        assert!(m("straße", "STRASSE", false) == m("straße", "STRASSE", false));
        assert!(m("ÄBC", "äbc", false));
    }

    #[test]
    fn dos_wildcards() {
        let t = [
            // DOS_STAR: up to the last dot.
            ("<", "abc", true),
            ("<", "a.b", false),
            ("<.txt", "a.b.txt", true),
            ("<.txt", "a.txt", true),
            ("<.*", "a.b", true),
            ("<.*", "abc", false),
            ("<\"*", "abc", true),
            ("<\"*", "a.b", true),
            // DOS_QM: one char, or nothing at a dot / end.
            (">", "a", true),
            (">", "", true),
            (">", "ab", false),
            (">>>", "ab", true),
            (">>>", "abcd", false),
            (">>>.txt", "ab.txt", true),
            (">>>.txt", "abcd.txt", false),
            ("a>c", "abc", true),
            ("a>c", "ac", false),
            ("a>", "a", true),
            // DOS_DOT: a dot or nothing at the end.
            ("abc\"", "abc", true),
            ("abc\"", "abc.", true),
            ("abc\"txt", "abc.txt", true),
            ("abc\"txt", "abcxtxt", false),
            ("abc\"*", "abc", true),
            // The classic client translation of "????????.???".
            (">>>>>>>>\">>>", "readme.txt", true),
            (">>>>>>>>\">>>", "readme", true),
            (">>>>>>>>\">>>", "toolongname.txt", false),
            (">>>>>>>>\">>>", "readme.text", false),
        ];
        for (p, n, want) in t {
            assert_eq!(m(p, n, false), want, "{p:?} vs {n:?}");
        }
    }
}
