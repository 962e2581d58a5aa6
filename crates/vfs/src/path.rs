//! Parsing and validation of SMB path names (`dir\file:stream:$DATA`).

use smbx_wire::NtStatus;

/// Longest name component in bytes (Linux NAME_MAX).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Longest stream name in bytes, so that `user.DosStream.<name>:$DATA` fits XATTR_NAME_MAX.
pub const MAX_STREAM_NAME_BYTES: usize =
    255 - crate::stream::STREAM_PREFIX.len() - crate::stream::STREAM_SUFFIX.len();
/// Most components accepted in one path.
pub const MAX_COMPONENTS: usize = 4096;

/// A parsed, validated share-relative SMB path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbPath {
    /// Name components from the share root; empty for the root itself.
    pub components: Vec<String>,
    /// Named stream, if any (`None` is the default data stream).
    pub stream: Option<String>,
    /// True when the default stream was named explicitly (`name::$DATA`).
    pub explicit_default_stream: bool,
}

impl SmbPath {
    /// Parses an SMB path: backslash separators, relative to the share root. Leading
    /// backslashes and a single trailing backslash are ignored.
    ///
    /// Errors: OBJECT_NAME_INVALID for "." or ".." components, empty interior components,
    /// wildcard or control characters, '/' in a name, ':' outside the last component,
    /// malformed stream syntax, or over-long names.
    pub fn parse(path: &str) -> Result<SmbPath, NtStatus> {
        let p = path.trim_start_matches('\\');
        let p = p.strip_suffix('\\').unwrap_or(p);
        let mut out = SmbPath {
            components: Vec::new(),
            stream: None,
            explicit_default_stream: false,
        };
        if p.is_empty() {
            return Ok(out);
        }
        let parts: Vec<&str> = p.split('\\').collect();
        if parts.len() > MAX_COMPONENTS {
            return Err(NtStatus::OBJECT_NAME_INVALID);
        }
        let last_idx = parts.len() - 1;
        for (i, part) in parts.iter().enumerate() {
            let name = match part.find(':') {
                Some(idx) => {
                    if i != last_idx {
                        return Err(NtStatus::OBJECT_NAME_INVALID);
                    }
                    let (base, rest) = part.split_at(idx);
                    let (stream, explicit) = parse_stream(&rest[1..])?;
                    out.stream = stream;
                    out.explicit_default_stream = explicit;
                    base
                }
                None => part,
            };
            validate_component(name)?;
            out.components.push(name.to_string());
        }
        Ok(out)
    }
}

/// Parses the part after the first ':' of `name:stream[:type]`. Returns the stream name
/// (None for the default stream) and whether the default stream was named explicitly.
fn parse_stream(rest: &str) -> Result<(Option<String>, bool), NtStatus> {
    let mut it = rest.split(':');
    let name = it.next().unwrap_or("");
    let ty = it.next();
    if it.next().is_some() {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if let Some(t) = ty {
        if !t.eq_ignore_ascii_case("$DATA") {
            return Err(NtStatus::OBJECT_NAME_INVALID);
        }
    }
    if ty.is_none() && name.eq_ignore_ascii_case("$DATA") {
        // `name:$DATA` names the default stream too.
        return Ok((None, true));
    }
    if name.is_empty() {
        return match ty {
            Some(_) => Ok((None, true)),
            None => Err(NtStatus::OBJECT_NAME_INVALID),
        };
    }
    validate_stream_name(name)?;
    Ok((Some(name.to_string()), false))
}

fn is_bad_char(c: char) -> bool {
    matches!(
        c,
        '"' | '*' | '<' | '>' | '?' | '|' | '/' | '\\' | ':' | '\0'
    ) || (c as u32) < 0x20
}

/// Checks one name component (no separators, no stream part).
pub fn validate_component(name: &str) -> Result<(), NtStatus> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if name.len() > MAX_COMPONENT_BYTES || name.chars().any(is_bad_char) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(())
}

/// Checks a stream name (the part between the colons). NTFS allows every character in
/// a stream name except '\\', '/', ':' and NUL (control characters and wildcards
/// included; smb2.streams.names / names2).
pub fn validate_stream_name(name: &str) -> Result<(), NtStatus> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > MAX_STREAM_NAME_BYTES
        || name.chars().any(|c| matches!(c, '\\' | '/' | ':' | '\0'))
    {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(())
}

/// Joins validated components into a relative path for openat2 ("." for the root).
pub(crate) fn join(components: &[String]) -> std::ffi::CString {
    let s = if components.is_empty() {
        ".".to_string()
    } else {
        components.join("/")
    };
    // Components were validated to contain no NUL.
    std::ffi::CString::new(s).unwrap_or_else(|_| c".".to_owned())
}

/// Formats components as an SMB path with backslashes.
pub(crate) fn to_smb(components: &[String]) -> String {
    components.join("\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps(p: &str) -> Vec<String> {
        SmbPath::parse(p).unwrap().components
    }

    #[test]
    fn plain_paths() {
        assert_eq!(comps(""), Vec::<String>::new());
        assert_eq!(comps("\\"), Vec::<String>::new());
        assert_eq!(comps("a\\b\\c.txt"), vec!["a", "b", "c.txt"]);
        assert_eq!(comps("\\a\\b\\"), vec!["a", "b"]);
    }

    #[test]
    fn rejects_bad_components() {
        for p in [
            "..",
            "a\\..\\b",
            ".",
            "a\\.\\b",
            "a\\\\b",
            "a\\b\\\\",
            "a/b",
            "/etc/passwd",
            "a*",
            "a?",
            "a<",
            "a>",
            "a|",
            "a\"",
            "a\u{1}",
            "C:\\x",
            "a:b\\c",
            "file:..\\..\\x",
            "file:/etc/passwd",
            "file:",
            "file:s:$BAD",
            "file:s:$DATA:x",
            ":s",
        ] {
            assert_eq!(
                SmbPath::parse(p).unwrap_err(),
                NtStatus::OBJECT_NAME_INVALID,
                "{p:?}"
            );
        }
        let long = "x".repeat(256);
        assert!(SmbPath::parse(&long).is_err());
        assert!(SmbPath::parse(&"x".repeat(255)).is_ok());
    }

    #[test]
    fn streams() {
        let p = SmbPath::parse("d\\f.txt:s1").unwrap();
        assert_eq!(p.components, vec!["d", "f.txt"]);
        assert_eq!(p.stream.as_deref(), Some("s1"));
        let p = SmbPath::parse("f:s1:$DATA").unwrap();
        assert_eq!(p.stream.as_deref(), Some("s1"));
        let p = SmbPath::parse("f:s1:$data").unwrap();
        assert_eq!(p.stream.as_deref(), Some("s1"));
        let p = SmbPath::parse("f::$DATA").unwrap();
        assert_eq!(p.stream, None);
        assert!(p.explicit_default_stream);
        let p = SmbPath::parse("f:$DATA").unwrap();
        assert_eq!(p.stream, None);
        assert!(p.explicit_default_stream); // Control characters and wildcards are fine in stream names.
        let p = SmbPath::parse("f:\u{5}Stream\n One").unwrap();
        assert_eq!(p.stream.as_deref(), Some("\u{5}Stream\n One"));
        let p = SmbPath::parse("f:?Stream*:$DATA").unwrap();
        assert_eq!(p.stream.as_deref(), Some("?Stream*"));
        for bad in ["f:a/b", "f:a\u{0}b", "d*\\f:s"] {
            assert_eq!(
                SmbPath::parse(bad).unwrap_err(),
                NtStatus::OBJECT_NAME_INVALID
            );
        }
    }
}
