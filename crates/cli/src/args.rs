//! Command-line arguments.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// smbx: an SMB3 file server.
#[derive(Debug, Parser)]
#[command(
    name = "smbx",
    version,
    about,
    after_help = "More commands (each has --help):\n  \
                  smbx demo                           TCP against SMB Direct on this machine, no configuration\n  \
                  smbx bench [diskspd flags] TARGET   load generator (smbx bench sweep: a matrix with charts)\n  \
                  smbx rdma [--json]                  the RDMA devices, ports and addresses smbx sees\n  \
                  smbx ls|stat|get|put|cat|rm|mkdir|rmdir|mv smb://[user@]host[:port]/share/path"
)]
pub struct Cli {
    /// Write logs to this file (appended) instead of standard error.
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the SMB server. Without --config, share PATH (default ./share)
    /// on 127.0.0.1:4445 with a fresh user and password.
    Serve(ServeArgs),
    /// Check a configuration file and print the effective configuration.
    Testparm {
        /// Configuration file.
        #[arg(default_value = smbx_config::DEFAULT_CONFIG_PATH)]
        file: PathBuf,
    },
    /// Manage the password database.
    User(UserArgs),
    /// Show the running server's sessions, tree connects, opens and locks.
    Status(StatusArgs),
    /// Make the running server read smb.conf and the password database again.
    Reload(ControlArgs),
}

/// Which running server to talk to (its control socket).
#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The smb.conf the server was started with (default /etc/smbx/smb.conf if it
    /// exists, else zero configuration).
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The control socket itself, instead of the one --config names.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// `smbx status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Which server.
    #[command(flatten)]
    pub control: ControlArgs,
    /// Print JSON (field names documented in the README, section Status).
    #[arg(long)]
    pub json: bool,
}

/// `smbx serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory to share in zero-configuration mode (default ./share).
    pub path: Option<PathBuf>,
    /// smb.conf to use instead of zero configuration.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// TCP port (overrides `smb ports`; zero configuration uses 4445).
    #[arg(long, short)]
    pub port: Option<u16>,
    /// Address to listen on (overrides `interfaces`; zero configuration uses 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<IpAddr>,
}

/// `smbx user`.
#[derive(Debug, Args)]
pub struct UserArgs {
    /// smb.conf whose `passdb backend` names the database
    /// (default /etc/smbx/smb.conf if it exists).
    #[arg(long, short, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub action: UserAction,
}

/// `smbx user` actions.
#[derive(Debug, Subcommand)]
pub enum UserAction {
    /// Add a user or change a user's password.
    Add {
        /// Read the password as one line from standard input instead of prompting.
        #[arg(long)]
        stdin: bool,
        /// User name.
        name: String,
    },
    /// Delete a user.
    Del {
        /// User name.
        name: String,
    },
    /// List users: name, uid, flags.
    List,
}
