//! `smbx bench`: the diskspd-style load generator (crates/bench).
//!
//! Its flags glue values to letters (`-b4K -o32 -r`), which clap cannot parse, so
//! `main` hands everything after `bench` to [`main`] before clap sees the command line.
//! `smbx bench sweep ...` runs a matrix of profiles (crates/bench/src/sweep.rs).

use std::io::Write;
use std::process::ExitCode;

use smbx_bench::BenchError;

/// Runs `smbx bench ARGS...` (or `smbx bench sweep ARGS...`): the report goes to stdout; errors to stderr with exit
/// status 2 for a bad command line and 1 for anything else.
pub fn main(args: &[String]) -> ExitCode {
    let result = match args.first().map(String::as_str) {
        Some("sweep") => smbx_bench::sweep::run_cli(&args[1..]),
        _ => smbx_bench::run_cli(args),
    };
    match result {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(report.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(BenchError::Args(e)) => {
            eprintln!("smbx bench: {e}");
            if !e.0.starts_with("usage:") {
                if args.first().map(String::as_str) == Some("sweep") {
                    eprintln!("(smbx bench sweep --help lists the flags)");
                } else {
                    eprintln!("(smbx bench --help lists the flags)");
                }
            }
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("smbx bench: {e}");
            ExitCode::from(1)
        }
    }
}
