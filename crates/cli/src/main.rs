//! The `smbx` binary: argument parsing, configuration, logging, and dispatch
//! to the server and the password database.

mod args;
mod bench;
mod client;
mod control;
mod demo;
mod error;
mod logging;
mod rdma;
mod reload;
mod rlimit;
mod sd_notify;
mod serve;
mod status;
mod testparm;
mod user;
mod zeroconf;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("bench") {
        return bench::main(&argv[2..]);
    }
    if argv.get(1).map(String::as_str) == Some("rdma") {
        return rdma::main(&argv[2..]);
    }
    if argv.get(1).map(String::as_str) == Some("demo") {
        return demo::main(&argv[2..]);
    }
    if argv
        .get(1)
        .is_some_and(|c| client::COMMANDS.contains(&c.as_str()))
    {
        return client::main(&argv[1..]);
    }
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Serve(a) => serve::run(a, cli.log_file.as_deref()),
        Command::Testparm { file } => testparm::run(file),
        Command::Status(a) => status::run(a),
        Command::Reload(a) => reload::run(a),
        Command::User(a) => logging::init(0, cli.log_file.as_deref()).and_then(|()| user::run(a)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smbx: {e}");
            e.exit_code()
        }
    }
}
