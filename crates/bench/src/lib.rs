//! smbx-bench: a diskspd-style load generator for local files and smb:// targets.
//!
//! Boundaries: owns load generation and reports; imports the client (for smb://
//! targets), never the server.
//!
//! ```text
//! args::parse ─▶ Profile ─▶ target::open (LocalTarget | SmbTarget)
//!                                │
//!                 engine::run ◀──┘  worker threads × IoQueue (io_uring | psync | smb)
//!                      │            HDR histograms per thread per target, IOPS per -D
//!                      ▼
//!                 report::Report ─▶ text (diskspd layout) | JSON (README schema) | XML (diskspd -Rxml)
//! ```
//!
//! [`run_cli`] does all of it for the `smbx bench` subcommand; [`sweep`] runs a matrix of
//! profiles and draws its charts with [`svg`] (`smbx bench sweep`).

#![warn(missing_docs)]
pub mod affinity;
pub mod args;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod pattern;
pub mod profile;
pub mod report;
pub mod rng;
pub mod stats;
pub mod svg;
pub mod sweep;
pub mod target;
pub mod tcp_stats;

pub use args::{parse, ArgError, USAGE};
pub use error::BenchError;
pub use profile::{Format, Profile};
pub use report::Report;

/// Runs a parsed profile and returns its report.
pub fn run(profile: &Profile, command_line: String) -> Result<Report, BenchError> {
    let targets = profile
        .targets
        .iter()
        .map(|t| target::open(t, profile))
        .collect::<Result<Vec<_>, _>>()?;
    let result = engine::run(profile, &targets)?;
    drop(targets);
    Ok(Report::build(profile, command_line, &result))
}

/// Renders a report in the profile's format.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Text => report::text::render(report),
        Format::Json => report.to_json() + "\n",
        Format::Xml => report::xml::render(report),
    }
}

/// `smbx bench ARGS...`: parses, runs, and returns the rendered report.
pub fn run_cli(args: &[String]) -> Result<String, BenchError> {
    if args.iter().any(|a| a == "--help") {
        return Ok(USAGE.to_string());
    }
    let profile = parse(args)?;
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            if a.starts_with("smb://") || a.starts_with("SMB://") {
                target::smb::redact(a)
            } else {
                a.clone()
            }
        })
        .collect();
    let report = run(&profile, format!("smbx bench {}", shown.join(" ")))?;
    Ok(render(&report, profile.format))
}
