//! Parsers for option values. Each returns `Err(accepted)` with a
//! description of the accepted values; the caller adds file, line and option.

use smbx_wire::Dialect;

use crate::{EncryptSetting, MapToGuest, SigningSetting};

const BOOL_ACCEPTED: &str = "yes, no, true, false, 1, 0, on, off";

/// Samba booleans: yes/no, true/false, 1/0, on/off (case-insensitive).
pub fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Ok(true),
        "no" | "false" | "0" | "off" => Ok(false),
        _ => Err(BOOL_ACCEPTED.into()),
    }
}

/// `Yes`/`No` as testparm prints booleans.
pub fn fmt_bool(b: bool) -> &'static str {
    if b {
        "Yes"
    } else {
        "No"
    }
}

/// `server signing`, with Samba's synonyms.
pub fn parse_signing(v: &str) -> Result<SigningSetting, String> {
    match v.to_ascii_lowercase().as_str() {
        "auto" | "default" | "if_required" | "yes" | "true" | "1" | "on" | "enabled"
        | "desired" => Ok(SigningSetting::Auto),
        "mandatory" | "required" | "force" | "forced" | "enforced" => Ok(SigningSetting::Mandatory),
        "disabled" | "no" | "false" | "0" | "off" => Ok(SigningSetting::Disabled),
        _ => Err(
            "auto, mandatory, disabled (synonyms: default, if_required, \
                  desired, yes = auto; required, force = mandatory; no, off = disabled)"
                .into(),
        ),
    }
}

/// Canonical name of a signing setting.
pub fn fmt_signing(s: SigningSetting) -> &'static str {
    match s {
        SigningSetting::Auto => "auto",
        SigningSetting::Mandatory => "mandatory",
        SigningSetting::Disabled => "disabled",
    }
}

/// `server smb encrypt`, with Samba's synonyms.
pub fn parse_encrypt(v: &str) -> Result<EncryptSetting, String> {
    match v.to_ascii_lowercase().as_str() {
        "off" | "no" | "false" | "0" | "disabled" => Ok(EncryptSetting::Off),
        "if_required" | "default" | "auto" | "yes" | "true" | "1" | "on" | "enabled" => {
            Ok(EncryptSetting::IfRequired)
        }
        "desired" => Ok(EncryptSetting::Desired),
        "required" | "mandatory" | "force" | "forced" | "enforced" => Ok(EncryptSetting::Required),
        _ => Err(
            "off, if_required, desired, required (synonyms: default, auto = \
                  if_required; mandatory = required; no, disabled = off)"
                .into(),
        ),
    }
}

/// Canonical name of an encryption setting.
pub fn fmt_encrypt(s: EncryptSetting) -> &'static str {
    match s {
        EncryptSetting::Off => "off",
        EncryptSetting::IfRequired => "if_required",
        EncryptSetting::Desired => "desired",
        EncryptSetting::Required => "required",
    }
}

/// `map to guest`.
pub fn parse_map_to_guest(v: &str) -> Result<MapToGuest, String> {
    match v.to_ascii_lowercase().replace(['_', ' '], "").as_str() {
        "never" => Ok(MapToGuest::Never),
        "baduser" => Ok(MapToGuest::BadUser),
        _ => Err("never, bad user (\"bad password\" and \"bad uid\" are not supported)".into()),
    }
}

/// Canonical name of a map-to-guest setting.
pub fn fmt_map_to_guest(m: MapToGuest) -> &'static str {
    match m {
        MapToGuest::Never => "Never",
        MapToGuest::BadUser => "Bad User",
    }
}

const PROTOCOL_ACCEPTED: &str =
    "SMB2_02, SMB2_10, SMB2 (= SMB2_10), SMB3_00, SMB3_02, SMB3_11, SMB3 (= SMB3_11), default";

/// A protocol name as Samba spells it; `default` yields `default`.
pub fn parse_protocol(v: &str, default: Dialect) -> Result<Dialect, String> {
    match v.to_ascii_uppercase().as_str() {
        "DEFAULT" => Ok(default),
        "SMB2_02" => Ok(Dialect::SMB2_0_2),
        "SMB2_10" | "SMB2" => Ok(Dialect::SMB2_1),
        "SMB3_00" => Ok(Dialect::SMB3_0),
        "SMB3_02" => Ok(Dialect::SMB3_0_2),
        "SMB3_11" | "SMB3" => Ok(Dialect::SMB3_1_1),
        "NT1" | "LANMAN1" | "LANMAN2" | "CORE" | "COREPLUS" | "CORE+" => Err(format!(
            "SMB1 is not supported; accepted values: {PROTOCOL_ACCEPTED}"
        )),
        _ => Err(PROTOCOL_ACCEPTED.into()),
    }
}

/// Samba's name for a dialect code.
pub fn fmt_protocol(d: Dialect) -> String {
    match d {
        Dialect::SMB2_0_2 => "SMB2_02".into(),
        Dialect::SMB2_1 => "SMB2_10".into(),
        Dialect::SMB3_0 => "SMB3_00".into(),
        Dialect::SMB3_0_2 => "SMB3_02".into(),
        Dialect::SMB3_1_1 => "SMB3_11".into(),
        other => format!("0x{:04x}", other.as_u16()),
    }
}

/// An unsigned integer in `min..=max`.
pub fn parse_u32(v: &str, min: u32, max: u32) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("an integer from {min} to {max}")),
    }
}

/// A byte count with an optional K/M/G suffix (binary units), in `min..=max`.
pub fn parse_bytes(v: &str, min: u32, max: u32) -> Result<u32, String> {
    let accepted = || format!("a byte count from {min} to {max} (suffixes K, M, G allowed)");
    let v = v.trim();
    let (digits, mult) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&v[..v.len() - 1], 1u64 << 10),
        Some('M') => (&v[..v.len() - 1], 1u64 << 20),
        Some('G') => (&v[..v.len() - 1], 1u64 << 30),
        _ => (v, 1),
    };
    let n: u64 = digits.trim().parse().map_err(|_| accepted())?;
    let n = n.checked_mul(mult).ok_or_else(accepted)?;
    match u32::try_from(n) {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(accepted()),
    }
}

/// Splits a Samba list: items separated by whitespace or commas; double
/// quotes group an item containing spaces.
pub fn parse_list(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in v.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if !quoted && (c.is_whitespace() || c == ',') => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Formats a list so that [`parse_list`] gives it back.
pub fn fmt_list(items: &[String]) -> String {
    items
        .iter()
        .map(|s| {
            if s.contains(|c: char| c.is_whitespace() || c == ',') {
                format!("\"{s}\"")
            } else {
                s.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses a listening address `IP:PORT` (`[IPv6]:PORT` for IPv6); an empty value,
/// `no` or `off` turns the listener off (`None`).
pub fn parse_listen(v: &str) -> Result<Option<std::net::SocketAddr>, String> {
    let v = v.trim();
    if v.is_empty() || v.eq_ignore_ascii_case("no") || v.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|_| "an address and port such as 127.0.0.1:9445 or [::1]:9445, or no".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for t in ["yes", "True", "1", "ON"] {
            assert_eq!(parse_bool(t), Ok(true));
        }
        for f in ["no", "FALSE", "0", "off"] {
            assert_eq!(parse_bool(f), Ok(false));
        }
        assert!(parse_bool("maybe").is_err());
    }

    #[test]
    fn protocols() {
        assert_eq!(parse_protocol("smb2", Dialect::NONE), Ok(Dialect::SMB2_1));
        assert_eq!(parse_protocol("SMB3", Dialect::NONE), Ok(Dialect::SMB3_1_1));
        assert_eq!(
            parse_protocol("default", Dialect::SMB3_0),
            Ok(Dialect::SMB3_0)
        );
        assert!(parse_protocol("NT1", Dialect::NONE)
            .unwrap_err()
            .contains("SMB1 is not supported"));
        for d in Dialect::ALL {
            assert_eq!(parse_protocol(&fmt_protocol(d), Dialect::NONE), Ok(d));
        }
    }

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("8M", 1, u32::MAX), Ok(8 << 20));
        assert_eq!(parse_bytes("65536", 1, u32::MAX), Ok(65536));
        assert!(parse_bytes("99999999999G", 1, u32::MAX).is_err());
        assert!(parse_bytes("", 1, 10).is_err());
        assert!(parse_bytes("M", 1, 10).is_err());
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list("a, b  c"), vec!["a", "b", "c"]);
        assert_eq!(parse_list("\"x y\" z"), vec!["x y", "z"]);
        let l = vec!["x y".to_string(), "@g".to_string()];
        assert_eq!(parse_list(&fmt_list(&l)), l);
    }
}
