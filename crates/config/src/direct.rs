//! `smb direct provider`: which RDMA provider carries SMB Direct.

/// `smb direct provider = auto | soft | verbs` (smbx).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SmbDirectProvider {
    /// rdma-core verbs on addresses whose interface has an RDMA device,
    /// soft-iWARP on the others (the default).
    #[default]
    Auto,
    /// smbx's own soft-iWARP over TCP everywhere.
    Soft,
    /// rdma-core verbs only: no SMB Direct where there is no RDMA device.
    Verbs,
}

/// Parses a `smb direct provider` value; the error lists the accepted ones.
pub fn parse_smb_direct_provider(v: &str) -> Result<SmbDirectProvider, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(SmbDirectProvider::Auto),
        "soft" | "soft-iwarp" | "softiwarp" => Ok(SmbDirectProvider::Soft),
        "verbs" | "rdma-core" => Ok(SmbDirectProvider::Verbs),
        _ => Err("auto, soft, verbs".into()),
    }
}

/// The canonical spelling of a `smb direct provider`.
pub fn fmt_smb_direct_provider(p: SmbDirectProvider) -> &'static str {
    match p {
        SmbDirectProvider::Auto => "auto",
        SmbDirectProvider::Soft => "soft",
        SmbDirectProvider::Verbs => "verbs",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for (s, p) in [
            ("auto", SmbDirectProvider::Auto),
            ("Soft", SmbDirectProvider::Soft),
            ("VERBS", SmbDirectProvider::Verbs),
        ] {
            assert_eq!(parse_smb_direct_provider(s), Ok(p));
            assert_eq!(parse_smb_direct_provider(fmt_smb_direct_provider(p)), Ok(p));
        }
        assert!(parse_smb_direct_provider("rocev2").is_err());
    }
}
