//! Kerberos options as Samba spells them: `kerberos method`, and the `username map`
//! file that maps Kerberos principals to local users.
//!
//! A username map has Samba's format: one mapping per line, `local = name name ...`,
//! names matched case-insensitively against the client's name (for Kerberos, the
//! principal `user@REALM`, then the bare `user` when the realm is the server's); `*`
//! matches every name; a name with spaces is quoted; `#` and `;` start comments. Every
//! line is tried and the last match wins, except that a line whose local name starts
//! with `!` ends the search when it matches. `@group` names are not supported (a
//! warning, and they never match).

use std::path::{Path, PathBuf};

use crate::ConfigError;

/// `kerberos method`: where the server's Kerberos keys come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KerberosMethod {
    /// `secrets only` (Samba's default, also `default`): smbx keeps no machine
    /// secrets, so Kerberos is off and clients log in with NTLM.
    #[default]
    SecretsOnly,
    /// `dedicated keytab`: the keys are in `dedicated keytab file`.
    DedicatedKeytab,
    /// `system keytab` (and `secrets and keytab`): the system's keytab
    /// (`KRB5_KTNAME`, else /etc/krb5.keytab).
    SystemKeytab,
}

impl KerberosMethod {
    /// Whether the server accepts Kerberos with this method.
    pub fn enabled(self) -> bool {
        self != KerberosMethod::SecretsOnly
    }
}

/// Parses a `kerberos method` value; `Err` holds the accepted values.
pub fn parse_kerberos_method(v: &str) -> Result<KerberosMethod, String> {
    match v.to_ascii_lowercase().replace(['_', ' '], "").as_str() {
        "default" | "secretsonly" => Ok(KerberosMethod::SecretsOnly),
        "dedicatedkeytab" => Ok(KerberosMethod::DedicatedKeytab),
        "systemkeytab" | "secretsandkeytab" => Ok(KerberosMethod::SystemKeytab),
        _ => {
            Err("secrets only, dedicated keytab, system keytab, secrets and keytab, default".into())
        }
    }
}

/// The canonical spelling of a `kerberos method`.
pub fn fmt_kerberos_method(m: KerberosMethod) -> &'static str {
    match m {
        KerberosMethod::SecretsOnly => "secrets only",
        KerberosMethod::DedicatedKeytab => "dedicated keytab",
        KerberosMethod::SystemKeytab => "system keytab",
    }
}

/// Largest username map file read (1 MiB); a larger one is refused.
pub const MAX_USERNAME_MAP_BYTES: u64 = 1 << 20;

/// One `local = names` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MapLine {
    local: String,
    stop: bool,
    names: Vec<String>,
}

/// A parsed `username map` file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsernameMap {
    lines: Vec<MapLine>,
    /// Warnings (`FILE:LINE: message`) for entries that are ignored.
    pub warnings: Vec<String>,
}

/// Splits the right-hand side into names, honouring double quotes.
fn split_names(v: &str) -> Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in v.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote");
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

impl UsernameMap {
    /// Parses map text; `file` names it in errors and warnings.
    pub fn parse(text: &str, file: &str) -> Result<UsernameMap, ConfigError> {
        let mut map = UsernameMap::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let err = |message: String| ConfigError {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let Some((left, right)) = line.split_once('=') else {
                return Err(err(format!(
                    "username map line {line:?} has no '=': write \"localuser = name1 name2\""
                )));
            };
            let left = left.trim();
            let (stop, local) = match left.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, left),
            };
            if local.is_empty() || local.contains(char::is_whitespace) {
                return Err(err(format!(
                    "username map: bad local user name {local:?} (one name, no spaces)"
                )));
            }
            let names = split_names(right).map_err(|m| err(format!("username map: {m}")))?;
            let mut kept = Vec::with_capacity(names.len());
            for n in names {
                if n.starts_with('@') || n.starts_with('+') || n.starts_with('&') {
                    map.warnings.push(format!(
                        "{file}:{}: username map: group {n:?} is not supported; ignored",
                        i + 1
                    ));
                } else {
                    kept.push(n);
                }
            }
            map.lines.push(MapLine {
                local: local.to_string(),
                stop,
                names: kept,
            });
        }
        Ok(map)
    }

    /// Reads and parses `path` (at most [`MAX_USERNAME_MAP_BYTES`]).
    pub fn load(path: &Path) -> Result<UsernameMap, ConfigError> {
        let file = path.display().to_string();
        let whole = |message: String| ConfigError {
            file: file.clone(),
            line: 0,
            message,
        };
        let meta =
            std::fs::metadata(path).map_err(|e| whole(format!("cannot read username map: {e}")))?;
        if meta.len() > MAX_USERNAME_MAP_BYTES {
            return Err(whole(format!(
                "username map is larger than {MAX_USERNAME_MAP_BYTES} bytes"
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| whole(format!("cannot read username map: {e}")))?;
        UsernameMap::parse(&text, &file)
    }

    /// The local user `name` maps to, if any line matches.
    pub fn map(&self, name: &str) -> Option<&str> {
        let mut found = None;
        for l in &self.lines {
            if l.names
                .iter()
                .any(|n| n == "*" || n.eq_ignore_ascii_case(name))
            {
                found = Some(l.local.as_str());
                if l.stop {
                    break;
                }
            }
        }
        found
    }
}

/// The `username map` path as written (relative paths are kept as they are).
pub fn username_map_path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("a file path".into());
    }
    Ok(PathBuf::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_as_samba_spells_them() {
        assert_eq!(
            parse_kerberos_method("dedicated keytab"),
            Ok(KerberosMethod::DedicatedKeytab)
        );
        assert_eq!(
            parse_kerberos_method("Secrets And Keytab"),
            Ok(KerberosMethod::SystemKeytab)
        );
        assert_eq!(
            parse_kerberos_method("default"),
            Ok(KerberosMethod::SecretsOnly)
        );
        assert!(parse_kerberos_method("keytab please").is_err());
        for m in [
            KerberosMethod::SecretsOnly,
            KerberosMethod::DedicatedKeytab,
            KerberosMethod::SystemKeytab,
        ] {
            assert_eq!(parse_kerberos_method(fmt_kerberos_method(m)), Ok(m));
        }
    }

    #[test]
    fn map_lines_last_match_wins_unless_stopped() {
        let text = "# comment\n; also\nroot = admin@R.TEST\nbob = \"Robert Smith\" rob@R.TEST\n!carol = carol@OTHER.TEST\nguest = *\n";
        let m = UsernameMap::parse(text, "map").unwrap();
        assert_eq!(m.map("ROB@r.test"), Some("guest"));
        assert_eq!(m.map("carol@OTHER.TEST"), Some("carol"));
        let text = "!root = admin@R.TEST\nbob = rob@R.TEST\n";
        let m = UsernameMap::parse(text, "map").unwrap();
        assert_eq!(m.map("admin@R.TEST"), Some("root"));
        assert_eq!(m.map("Robert Smith"), None);
        assert_eq!(m.map("rob@R.TEST"), Some("bob"));
        assert_eq!(m.map("nobody@R.TEST"), None);
    }

    #[test]
    fn bad_lines_name_the_line() {
        let e = UsernameMap::parse("a = b\n\nno equals sign\n", "m.map").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("m.map", 3));
        let e = UsernameMap::parse("a = \"open\n", "m.map").unwrap_err();
        assert_eq!(e.line, 1);
        let e = UsernameMap::parse("two names = x\n", "m.map").unwrap_err();
        assert_eq!(e.line, 1);
        let m = UsernameMap::parse("a = @staff b\n", "m.map").unwrap();
        assert_eq!(m.warnings.len(), 1);
        assert_eq!(m.map("b"), Some("a"));
        assert_eq!(m.map("@staff"), None);
    }
}
