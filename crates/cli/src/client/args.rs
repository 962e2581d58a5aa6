//! Arguments of the client commands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The command names `main` hands to [`super::main`].
pub const COMMANDS: [&str; 9] = [
    "ls", "stat", "get", "put", "cat", "rm", "mkdir", "rmdir", "mv",
];

/// smbx client commands. URLs are smb://[user[:password]@]host[:port]/share/path; the
/// password comes from the URL, else $SMBX_PASSWORD, else a prompt.
#[derive(Debug, Parser)]
#[command(name = "smbx", version)]
pub struct ClientCli {
    /// Connection options.
    #[command(flatten)]
    pub conn: ConnArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: ClientCommand,
}

/// Options for the connection.
#[derive(Debug, Args)]
pub struct ConnArgs {
    /// Offer only this dialect: 2.0.2, 2.1, 3.0, 3.0.2 or 3.1.1 (default: all).
    #[arg(long, global = true, value_name = "DIALECT")]
    pub dialect: Option<String>,
    /// Require signing.
    #[arg(long, global = true)]
    pub sign: bool,
    /// Require encryption (SMB 3.x).
    #[arg(long, global = true)]
    pub encrypt: bool,
    /// tcp (Direct TCP, port 445) or rdma (SMB Direct over soft-iWARP, port 5445);
    /// `?transport=` in the URL takes precedence.
    #[arg(long, global = true, value_name = "tcp|rdma")]
    pub transport: Option<String>,
    /// Over rdma: READs and WRITEs larger than this move their data by RDMA (4K on
    /// RDMA NICs; over soft-iWARP 16K for READs, 32K for WRITEs).
    #[arg(long, global = true, value_parser = parse_size, value_name = "SIZE")]
    pub rdma_threshold: Option<usize>,
    /// Let the session bind up to N channels (1..32): after the first tree connect
    /// the client asks the server for its interfaces and binds further connections;
    /// `?multichannel=` in the URL takes precedence.
    #[arg(long, global = true, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=32))]
    pub multichannel: Option<u8>,
    /// Log on with Kerberos from the credential cache (KRB5CCNAME) for cifs/<host>,
    /// as smbclient -k; no password is asked for.
    #[arg(short = 'k', long, global = true)]
    pub kerberos: bool,
    /// required (= -k), desired (Kerberos, then NTLM with the URL's user and password
    /// if Kerberos fails) or off (NTLM, the default); smbclient's words.
    #[arg(long, global = true, value_name = "required|desired|off")]
    pub use_kerberos: Option<String>,
}

/// Options for streaming transfers.
#[derive(Debug, Args, Clone)]
pub struct IoArgs {
    /// Bytes per READ or WRITE (K/M suffixes).
    #[arg(long, default_value = "1M", value_parser = parse_size, value_name = "SIZE")]
    pub chunk: usize,
    /// READs or WRITEs in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub depth: u32,
}

/// The client commands.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// List a directory, or the entries matching a wildcard (smb://h/s/dir/*.txt).
    Ls {
        /// smb:// URL of a directory, a file or a pattern.
        url: String,
    },
    /// Show size, times, attributes and file id.
    Stat {
        /// smb:// URL.
        url: String,
    },
    /// Download a file (LOCAL defaults to its name in the current directory; `-` is stdout).
    Get {
        /// smb:// URL of the file.
        url: String,
        /// Local file or directory.
        local: Option<PathBuf>,
        #[command(flatten)]
        io: IoArgs,
    },
    /// Upload a file (`-` reads stdin); a URL naming a directory gets LOCAL's name.
    Put {
        /// Local file.
        local: PathBuf,
        /// smb:// URL of the destination file or directory.
        url: String,
        #[command(flatten)]
        io: IoArgs,
    },
    /// Write a file to stdout.
    Cat {
        /// smb:// URL of the file.
        url: String,
        #[command(flatten)]
        io: IoArgs,
    },
    /// Delete a file.
    Rm {
        /// smb:// URL of the file.
        url: String,
    },
    /// Create a directory.
    Mkdir {
        /// smb:// URL of the new directory.
        url: String,
    },
    /// Remove an empty directory.
    Rmdir {
        /// smb:// URL of the directory.
        url: String,
    },
    /// Rename within the share: DEST is a path from the share root if it starts with `/`,
    /// else relative to the source's directory (or an smb:// URL on the same share).
    Mv {
        /// smb:// URL of the file or directory.
        url: String,
        /// New name.
        dest: String,
    },
}

impl ClientCommand {
    /// The command's name and its URL, for error messages.
    pub fn name_and_url(&self) -> (&'static str, &str) {
        match self {
            ClientCommand::Ls { url } => ("ls", url),
            ClientCommand::Stat { url } => ("stat", url),
            ClientCommand::Get { url, .. } => ("get", url),
            ClientCommand::Put { url, .. } => ("put", url),
            ClientCommand::Cat { url, .. } => ("cat", url),
            ClientCommand::Rm { url } => ("rm", url),
            ClientCommand::Mkdir { url } => ("mkdir", url),
            ClientCommand::Rmdir { url } => ("rmdir", url),
            ClientCommand::Mv { url, .. } => ("mv", url),
        }
    }
}

/// Parses `1048576`, `64K`, `1M` (binary multiples).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                _ => return Err(format!("unknown suffix in {s:?} (use K or M)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("too large: {s:?}"))?;
    if v == 0 || v > 8 << 20 {
        return Err(format!("{s:?}: must be between 1 and 8M"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("9M").is_err());
        assert!(parse_size("1Q").is_err());
        assert!(parse_size("M").is_err());
    }

    #[test]
    fn parses_commands_and_global_options() {
        let c = ClientCli::try_parse_from(["smbx", "get", "--sign", "smb://h/s/f", "out"]).unwrap();
        assert!(c.conn.sign);
        match c.command {
            ClientCommand::Get { url, local, io } => {
                assert_eq!(url, "smb://h/s/f");
                assert_eq!(local, Some(PathBuf::from("out")));
                assert_eq!((io.chunk, io.depth), (1 << 20, 8));
            }
            other => panic!("{other:?}"),
        }
        assert!(ClientCli::try_parse_from(["smbx", "mv", "smb://h/s/f"]).is_err());
    }
}
