//! From a URL and the connection options to a connected share: password lookup
//! (URL, `SMBX_PASSWORD`, prompt), dialect, signing and encryption.

use std::io::IsTerminal;

use smbx_client::options::parse_dialect;
use smbx_client::{ClientOptions, Encryption, Kerberos, Signing, SmbUrl, Transport, Tree};

use super::args::ConnArgs;
use super::{CmdResult, Failure};

/// Parses an smb:// URL that must name a share.
pub fn parse(url: &str) -> CmdResult<SmbUrl> {
    let u = SmbUrl::parse(url)?;
    if u.share.is_none() {
        return Err(Failure::new("the URL names no share"));
    }
    Ok(u)
}

/// The URL with any password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some(rest) = url.strip_prefix("smb://") else {
        return url.to_string();
    };
    let auth_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(c) => format!("smb://{}:***{}{}", &userinfo[..c], &authority[at..], tail),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

/// Client options from the command line.
pub fn options(conn: &ConnArgs) -> CmdResult<ClientOptions> {
    let mut o = ClientOptions::default();
    if let Some(d) = &conn.dialect {
        let d = parse_dialect(d).ok_or_else(|| {
            Failure::new(format!(
                "unknown dialect {d:?} (use 2.0.2, 2.1, 3.0, 3.0.2 or 3.1.1)"
            ))
        })?;
        o = o.with_dialect(d);
    }
    if conn.sign {
        o = o.with_signing(Signing::Required);
    }
    if conn.encrypt {
        o = o.with_encryption(Encryption::Required);
    }
    if let Some(t) = &conn.transport {
        o.transport = Transport::parse(t)
            .ok_or_else(|| Failure::new(format!("unknown transport {t:?} (use tcp or rdma)")))?;
    }
    if let Some(n) = conn.rdma_threshold {
        o.rdma_threshold = Some(n);
    }
    if let Some(n) = conn.multichannel {
        o = o.with_max_channels(usize::from(n));
    }
    if conn.kerberos {
        o.kerberos = Kerberos::Required;
    }
    if let Some(k) = &conn.use_kerberos {
        let k = Kerberos::parse(k).ok_or_else(|| {
            Failure::new(format!(
                "--use-kerberos: {k:?} is not one of required, desired, off"
            ))
        })?;
        if conn.kerberos && k != Kerberos::Required {
            return Err(Failure::new("-k and --use-kerberos disagree"));
        }
        o.kerberos = k;
    }
    Ok(o)
}

/// The password when the URL has a user and none in it: `SMBX_PASSWORD`, else a prompt
/// when stdin is a terminal.
fn password_for(u: &SmbUrl) -> CmdResult<Option<String>> {
    let Some(user) = &u.user else {
        return Ok(None);
    };
    if u.password.is_some() {
        return Ok(None);
    }
    if let Ok(p) = std::env::var("SMBX_PASSWORD") {
        return Ok(Some(p));
    }
    if std::io::stdin().is_terminal() {
        let p = rpassword::prompt_password(format!("Password for {user}@{}: ", u.host))
            .map_err(|e| Failure::new(format!("cannot read the password: {e}")))?;
        return Ok(Some(p));
    }
    Err(Failure::new(format!(
        "no password for {user}: put it in the URL or in SMBX_PASSWORD"
    )))
}

/// Connects, logs on and connects the share; returns the tree and the path in it.
pub async fn open(url: &str, conn: &ConnArgs) -> CmdResult<(Tree, String)> {
    let u = parse(url)?;
    let opts = options(conn)?;
    let pw = match opts.kerberos {
        // Kerberos needs no password; a fallback to NTLM uses one only if it is there.
        Kerberos::Required => None,
        Kerberos::Desired => password_for(&u).ok().flatten(),
        Kerberos::Off => password_for(&u)?,
    };
    Ok(u.open(pw.as_deref(), opts).await?)
}

/// The share path `dest` names for `mv`: from the share root when it starts with `/`,
/// relative to the source's directory otherwise; an smb:// URL must name the same share.
pub fn rename_target(src: &SmbUrl, dest: &str) -> CmdResult<String> {
    if dest.starts_with("smb://") || dest.starts_with("SMB://") {
        let d = parse(dest)?;
        if !d.host.eq_ignore_ascii_case(&src.host)
            || d.port != src.port
            || !d
                .share
                .as_deref()
                .unwrap_or("")
                .eq_ignore_ascii_case(src.share.as_deref().unwrap_or(""))
        {
            return Err(Failure::new(format!(
                "{}: mv stays on one share",
                redact(dest)
            )));
        }
        return check_dest(d.path);
    }
    if let Some(abs) = dest.strip_prefix('/') {
        return check_dest(abs.to_string());
    }
    let dir = match src.path.rfind('/') {
        Some(i) => &src.path[..i],
        None => "",
    };
    check_dest(if dir.is_empty() {
        dest.to_string()
    } else {
        format!("{dir}/{dest}")
    })
}

fn check_dest(p: String) -> CmdResult<String> {
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    if parts.is_empty() || parts.iter().any(|s| *s == "." || *s == "..") {
        return Err(Failure::new(format!(
            "bad destination {p:?}: name a path inside the share, without . or .."
        )));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("smb://bob:s3cret@h:445/s/f"),
            "smb://bob:***@h:445/s/f"
        );
        assert_eq!(redact("smb://bob@h/s/f"), "smb://bob@h/s/f");
        assert_eq!(redact("smb://h/s/a:b@c"), "smb://h/s/a:b@c");
    }

    #[test]
    fn rename_targets() {
        let src = SmbUrl::parse("smb://u@h/s/dir/a.txt").unwrap();
        assert_eq!(rename_target(&src, "b.txt").unwrap(), "dir/b.txt");
        assert_eq!(rename_target(&src, "/top/b").unwrap(), "top/b");
        assert_eq!(rename_target(&src, "smb://h/S/x/y").unwrap(), "x/y");
        assert!(rename_target(&src, "smb://h/other/x").is_err());
        assert!(rename_target(&src, "../x").is_err());
        assert!(rename_target(&src, "/").is_err());
        let top = SmbUrl::parse("smb://h/s/a").unwrap();
        assert_eq!(rename_target(&top, "b").unwrap(), "b");
    }
}
