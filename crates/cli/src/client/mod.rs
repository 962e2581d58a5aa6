//! The client commands: `smbx ls|stat|get|put|cat|rm|mkdir|rmdir|mv URL ...`.
//!
//! `main` hands the command line here before clap sees it (as it does for `bench`), so
//! these commands keep their own argument definitions ([`args`]) and the server's
//! subcommands stay untouched. Every failure ends as one line on stderr,
//! `smbx: CMD URL: WHY`, where WHY is the NTSTATUS name when the server refused.

mod args;
mod connect;
mod listing;
mod progress;
mod transfer;

use std::process::ExitCode;

use clap::Parser;

pub use args::COMMANDS;
use args::{ClientCli, ClientCommand};

/// A failure: what to print after `smbx: `.
#[derive(Debug)]
pub struct Failure(String);

impl Failure {
    /// A failure with its message.
    pub fn new(msg: impl Into<String>) -> Failure {
        Failure(msg.into())
    }
}

impl From<smbx_client::Error> for Failure {
    fn from(e: smbx_client::Error) -> Self {
        Failure(e.to_string())
    }
}

/// Result of one command.
pub type CmdResult<T = ()> = Result<T, Failure>;

/// Runs a client command; `argv` starts at the command name (`ls`, `get`, ...).
pub fn main(argv: &[String]) -> ExitCode {
    let cli = match ClientCli::try_parse_from(
        std::iter::once("smbx".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let (name, url) = cli.command.name_and_url();
    let shown = connect::redact(url);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("smbx: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(&cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(why)) => {
            eprintln!("smbx: {name} {shown}: {why}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: &ClientCli) -> CmdResult {
    let conn = &cli.conn;
    match &cli.command {
        ClientCommand::Ls { url } => {
            let (tree, path) = connect::open(url, conn).await?;
            listing::ls(&tree, &path).await
        }
        ClientCommand::Stat { url } => {
            let (tree, path) = connect::open(url, conn).await?;
            listing::stat(&tree, &path).await
        }
        ClientCommand::Get { url, local, io } => {
            let (tree, path) = connect::open(url, conn).await?;
            transfer::get(&tree, &path, local.as_deref(), io).await
        }
        ClientCommand::Cat { url, io } => {
            let (tree, path) = connect::open(url, conn).await?;
            transfer::cat(&tree, &path, io).await
        }
        ClientCommand::Put { local, url, io } => {
            let (tree, path) = connect::open(url, conn).await?;
            transfer::put(&tree, local, &path, io).await
        }
        ClientCommand::Rm { url } => {
            let (tree, path) = connect::open(url, conn).await?;
            Ok(tree.remove(&path).await?)
        }
        ClientCommand::Mkdir { url } => {
            let (tree, path) = connect::open(url, conn).await?;
            Ok(tree.mkdir(&path).await?)
        }
        ClientCommand::Rmdir { url } => {
            let (tree, path) = connect::open(url, conn).await?;
            Ok(tree.rmdir(&path).await?)
        }
        ClientCommand::Mv { url, dest } => {
            let parsed = connect::parse(url)?;
            let to = connect::rename_target(&parsed, dest)?;
            let (tree, path) = connect::open(url, conn).await?;
            Ok(tree.rename(&path, &to).await?)
        }
    }
}
