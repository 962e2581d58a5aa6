//! tracing-subscriber setup.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

use crate::error::{other, CliError};

/// The filter directive for a Samba `log level`.
pub fn level_for(log_level: u32) -> &'static str {
    match log_level {
        0 => "warn",
        1 => "info",
        2 | 3 => "debug",
        _ => "trace",
    }
}

/// Installs the global subscriber: `RUST_LOG` if set, else `log_level`;
/// to `log_file` if given, else standard error.
pub fn init(log_level: u32, log_file: Option<&Path>) -> Result<(), CliError> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level_for(log_level)));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let result = match log_file {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| other(format!("cannot open log file {}: {e}", path.display())))?;
            builder
                .with_ansi(false)
                .with_writer(Mutex::new(file))
                .try_init()
        }
        None => builder.with_writer(std::io::stderr).try_init(),
    };
    result.map_err(|e| other(format!("cannot set up logging: {e}")))
}
