//! Turns smb.conf text into a flat list of section headers and `name = value`
//! parameters, each tagged with the file and line it came from. Handles
//! comments, line continuations and `include`.

use std::path::{Path, PathBuf};

use crate::ConfigError;

/// Maximum nesting of `include = FILE` directives.
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// Where something was written: file name and 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    /// File name as given (or the name passed to `parse_str`).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
}

impl Loc {
    /// An error at this location.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: self.line,
            message: message.into(),
        }
    }

    /// A warning string at this location, `FILE:LINE: message`.
    pub fn warning(&self, message: impl AsRef<str>) -> String {
        format!("{}:{}: {}", self.file, self.line, message.as_ref())
    }
}

/// One syntactic item of an smb.conf file.
#[derive(Debug, Clone)]
pub enum Item {
    /// `[name]`
    Section { name: String, loc: Loc },
    /// `name = value` (name as written, value trimmed)
    Param {
        name: String,
        value: String,
        loc: Loc,
    },
}

/// Normalises an option name for matching: lower case, spaces and
/// underscores removed (Samba's matching rule).
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_whitespace() && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Lexes `text` (named `name`); `base` is the directory relative `include`
/// paths are resolved against.
pub fn lex(
    text: &str,
    name: &str,
    base: Option<&Path>,
    depth: usize,
    out: &mut Vec<Item>,
) -> Result<(), ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate();
    while let Some((idx, raw)) = lines.next() {
        let start_line = idx + 1;
        let mut line = raw.trim().to_string();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        // Trailing backslash joins the next physical line.
        while line.ends_with('\\') {
            line.pop();
            match lines.next() {
                Some((_, next)) => line.push_str(next.trim()),
                None => break,
            }
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let loc = Loc {
            file: name.to_string(),
            line: start_line,
        };
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else {
                return Err(loc.error(format!("section header {line:?} has no closing ']'")));
            };
            let section = rest[..end].trim();
            if section.is_empty() {
                return Err(loc.error("empty section name '[]'"));
            }
            out.push(Item::Section {
                name: section.to_string(),
                loc,
            });
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(loc.error(format!(
                "expected 'name = value' or '[section]', found {line:?}"
            )));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(loc.error("missing option name before '='"));
        }
        let value = value.trim();
        if normalize(key) == "include" {
            include(value, base, depth, &loc, out)?;
            continue;
        }
        out.push(Item::Param {
            name: key.to_string(),
            value: value.to_string(),
            loc,
        });
    }
    Ok(())
}

fn include(
    value: &str,
    base: Option<&Path>,
    depth: usize,
    loc: &Loc,
    out: &mut Vec<Item>,
) -> Result<(), ConfigError> {
    if value.is_empty() {
        return Err(loc.error("include: missing file name"));
    }
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(loc.error(format!(
            "include: nesting deeper than {MAX_INCLUDE_DEPTH} levels (include loop?)"
        )));
    }
    let mut path = PathBuf::from(value);
    if path.is_relative() {
        if let Some(base) = base {
            path = base.join(path);
        }
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| loc.error(format!("include: cannot read {}: {e}", path.display())))?;
    let shown = path.display().to_string();
    lex(&text, &shown, path.parent(), depth + 1, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_names() {
        assert_eq!(normalize("Server SMB_Encrypt"), "serversmbencrypt");
        assert_eq!(normalize("read only"), normalize("readonly"));
    }

    #[test]
    fn continuation_and_comments() {
        let mut out = Vec::new();
        lex(
            "# c\n; c\n[a]\n x = 1 \\\n 2\n y=3\n",
            "t",
            None,
            0,
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 3);
        match &out[1] {
            Item::Param { name, value, loc } => {
                assert_eq!(name, "x");
                assert_eq!(value, "1 2");
                assert_eq!(loc.line, 4);
            }
            other => panic!("{other:?}"),
        }
        match &out[2] {
            Item::Param { loc, .. } => assert_eq!(loc.line, 6),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn skips_byte_order_mark() {
        let mut out = Vec::new();
        lex("\u{feff}[global]\n", "t", None, 0, &mut out).unwrap();
        assert!(matches!(&out[0], Item::Section { name, .. } if name == "global"));
    }

    #[test]
    fn bad_lines_name_the_line() {
        let mut out = Vec::new();
        let e = lex("[a]\n\njunk\n", "f.conf", None, 0, &mut out).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("f.conf", 3));
        let e = lex("[a\n", "f.conf", None, 0, &mut out).unwrap_err();
        assert_eq!(e.line, 1);
    }
}
