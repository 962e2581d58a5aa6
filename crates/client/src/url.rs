//! `smb://[domain;][user[:password]@]host[:port]/share/path` URLs.

use crate::error::{Error, InvalidArgument, Result};

/// The default SMB port (Direct TCP).
pub const DEFAULT_PORT: u16 = 445;

/// A parsed smb:// URL. User, password and path components are percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbUrl {
    /// Domain, from a `DOMAIN;user` user part.
    pub domain: Option<String>,
    /// User name.
    pub user: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (445 unless given, or 5445 with `?transport=rdma`).
    pub port: u16,
    /// Whether the URL names the port (otherwise the transport's default applies).
    pub port_given: bool,
    /// The share, if the URL names one.
    pub share: Option<String>,
    /// The path inside the share, `/`-separated, without leading or trailing `/`
    /// (empty for the share's root).
    pub path: String,
    /// The transport from a `?transport=tcp|rdma` query, if any (it also sets the
    /// default port: 445 or 5445).
    pub transport: Option<crate::Transport>,
    /// `rdma_threshold=BYTES`: READs/WRITEs larger than this move by RDMA.
    pub rdma_threshold: Option<usize>,
    /// `rdma_signed=0|1`: whether a signed session's READs/WRITEs may use RDMA
    /// ([`crate::ClientOptions::rdma_when_signed`]).
    pub rdma_signed: Option<bool>,
    /// `multichannel=N`: let the session use up to N channels (1 to 32).
    pub multichannel: Option<usize>,
}

fn percent_decode(s: &str) -> Result<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| InvalidArgument::PercentEscape(s.to_string()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| InvalidArgument::PercentUtf8(s.to_string()).into())
}

impl SmbUrl {
    /// Parses a URL.
    pub fn parse(url: &str) -> Result<SmbUrl> {
        let bad = |why: &'static str| {
            Error::from(InvalidArgument::Url {
                url: url.to_string(),
                why,
            })
        };
        let rest = url
            .strip_prefix("smb://")
            .or_else(|| url.strip_prefix("SMB://"))
            .ok_or_else(|| bad("URL must start with smb://"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let mut transport = None;
        let mut rdma_threshold = None;
        let mut rdma_signed = None;
        let mut multichannel = None;
        for kv in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            match kv.split_once('=') {
                Some(("transport", v)) => {
                    transport = Some(
                        crate::Transport::parse(v)
                            .ok_or_else(|| bad("transport must be tcp or rdma"))?,
                    )
                }
                Some(("rdma_threshold", v)) => {
                    rdma_threshold = Some(
                        v.parse()
                            .map_err(|_| bad("rdma_threshold must be a number"))?,
                    )
                }
                Some(("rdma_signed", v)) => {
                    rdma_signed = Some(match v {
                        "1" | "yes" | "true" => true,
                        "0" | "no" | "false" => false,
                        _ => return Err(bad("rdma_signed must be 0 or 1")),
                    })
                }
                Some(("multichannel", v)) => {
                    multichannel = Some(
                        v.parse::<usize>()
                            .ok()
                            .filter(|n| (1..=32).contains(n))
                            .ok_or_else(|| bad("multichannel must be a number from 1 to 32"))?,
                    )
                }
                _ => {
                    return Err(InvalidArgument::UrlParameter {
                        url: url.to_string(),
                        param: kv.to_string(),
                    }
                    .into())
                }
            }
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (mut domain, mut user, mut password) = (None, None, None);
        if let Some(ui) = userinfo {
            let (u, p) = match ui.find(':') {
                Some(i) => (&ui[..i], Some(&ui[i + 1..])),
                None => (ui, None),
            };
            let u = percent_decode(u)?;
            let u = match u.split_once(';') {
                Some((d, u)) => {
                    domain = Some(d.to_string());
                    u.to_string()
                }
                None => u,
            };
            if !u.is_empty() {
                user = Some(u);
            }
            password = p.map(percent_decode).transpose()?;
        }
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("unclosed [ in host"))?;
            let host = &v6[..end];
            let after = &v6[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(bad("junk after ]")),
            };
            (host.to_string(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port_given = port.is_some();
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
            None => transport.map_or(DEFAULT_PORT, |t| t.default_port()),
        };
        let mut parts = path.split('/').filter(|s| !s.is_empty());
        let share = parts.next().map(percent_decode).transpose()?;
        let rest: Vec<String> = parts.map(percent_decode).collect::<Result<_>>()?;
        if rest.iter().any(|p| p == "." || p == "..") {
            return Err(bad("path may not contain . or .."));
        }
        Ok(SmbUrl {
            domain,
            user,
            password,
            host,
            port,
            port_given,
            share,
            path: rest.join("/"),
            transport,
            rdma_threshold,
            rdma_signed,
            multichannel,
        })
    }

    /// `host:port`, with brackets around IPv6 addresses, for connecting.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl SmbUrl {
    /// Connects to the URL's server, logs on and connects its share. The password comes
    /// from the URL, else from `password`; without a user the logon is anonymous. With
    /// `options.kerberos` the logon is Kerberos (falling back to NTLM when
    /// [`crate::Kerberos::Desired`] and the URL names a user). Returns
    /// the tree and the path inside the share.
    pub async fn open(
        &self,
        password: Option<&str>,
        mut options: crate::ClientOptions,
    ) -> Result<(crate::Tree, String)> {
        let mut url = self.clone();
        if let Some(t) = self.transport {
            options.transport = t;
        }
        if let Some(n) = self.rdma_threshold {
            options.rdma_threshold = Some(n);
        }
        if let Some(b) = self.rdma_signed {
            options.rdma_when_signed = b;
        }
        if let Some(n) = self.multichannel {
            options.max_channels = n;
        }
        if !self.port_given {
            url.port = options.transport.default_port();
        }
        let share = self.share.as_deref().ok_or(InvalidArgument::NoShare)?;
        let kerberos = options.kerberos;
        let client = crate::Client::connect(&url.addr(), options).await?;
        let ntlm = || async {
            match &self.user {
                Some(user) => {
                    let pw = self
                        .password
                        .as_deref()
                        .or(password)
                        .ok_or_else(|| InvalidArgument::NoPassword(user.clone()))?;
                    let domain = self.domain.as_deref().unwrap_or("");
                    client.login(user, pw, domain).await
                }
                None => client.login_anonymous().await,
            }
        };
        let session = match kerberos {
            crate::Kerberos::Off => ntlm().await?,
            crate::Kerberos::Required => client.login_kerberos().await?,
            crate::Kerberos::Desired => match client.login_kerberos().await {
                Ok(s) => s,
                Err(e) if self.user.is_some() => {
                    tracing::warn!("Kerberos logon failed ({e}); falling back to NTLM");
                    ntlm().await?
                }
                Err(e) => return Err(e),
            },
        };
        let tree = session.tree(share).await?;
        Ok((tree, self.path.clone()))
    }
}

impl std::str::FromStr for SmbUrl {
    type Err = Error;
    fn from_str(s: &str) -> Result<SmbUrl> {
        SmbUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_url() {
        let u =
            SmbUrl::parse("smb://alice:p%40ss:w@host.example:4445/share/dir/f%20x.txt").unwrap();
        assert_eq!(u.user.as_deref(), Some("alice"));
        assert_eq!(u.password.as_deref(), Some("p@ss:w"));
        assert_eq!(u.host, "host.example");
        assert_eq!(u.port, 4445);
        assert_eq!(u.share.as_deref(), Some("share"));
        assert_eq!(u.path, "dir/f x.txt");
        assert_eq!(u.addr(), "host.example:4445");
    }

    #[test]
    fn multichannel_query() {
        let u = SmbUrl::parse("smb://h/share/f?multichannel=3").unwrap();
        assert_eq!(u.multichannel, Some(3));
        assert_eq!(SmbUrl::parse("smb://h/s").unwrap().multichannel, None);
        for bad in ["0", "33", "x", ""] {
            assert!(SmbUrl::parse(&format!("smb://h/s?multichannel={bad}")).is_err());
        }
    }

    #[test]
    fn transport_query() {
        let u = SmbUrl::parse("smb://h/share/f?transport=rdma").unwrap();
        assert_eq!(u.transport, Some(crate::Transport::Rdma));
        assert_eq!((u.port, u.path.as_str()), (5445, "f"));
        let u = SmbUrl::parse("smb://h:7/share?transport=tcp").unwrap();
        assert_eq!((u.port, u.transport), (7, Some(crate::Transport::Tcp)));
        assert!(SmbUrl::parse("smb://h/s?transport=udp").is_err());
        assert!(SmbUrl::parse("smb://h/s?x=1").is_err());
        let u = SmbUrl::parse("smb://h/s/f?transport=rdma&rdma_threshold=65536").unwrap();
        assert_eq!(u.rdma_threshold, Some(65536));
        assert_eq!(u.rdma_signed, None);
        let u = SmbUrl::parse("smb://h/s/f?transport=rdma&rdma_signed=0").unwrap();
        assert_eq!(u.rdma_signed, Some(false));
        assert!(SmbUrl::parse("smb://h/s/f?rdma_signed=maybe").is_err());
    }

    #[test]
    fn minimal_and_ipv6_and_domain() {
        let u = SmbUrl::parse("smb://server").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.share, u.user),
            ("server", 445, None, None)
        );
        let u = SmbUrl::parse("smb://WG;bob@[::1]:1445/s/").unwrap();
        assert_eq!(u.domain.as_deref(), Some("WG"));
        assert_eq!(u.user.as_deref(), Some("bob"));
        assert_eq!(u.host, "::1");
        assert_eq!(u.addr(), "[::1]:1445");
        assert_eq!(u.share.as_deref(), Some("s"));
        assert_eq!(u.path, "");
    }

    #[test]
    fn rejects() {
        for bad in [
            "http://x/s",
            "smb://",
            "smb://h:notaport/s",
            "smb://h/s/../etc",
            "smb://u%zz@h/s",
            "smb://[::1/s",
        ] {
            assert!(SmbUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
