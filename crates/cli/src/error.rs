//! Errors and exit statuses.

use std::fmt;
use std::process::ExitCode;

use smbx_config::ConfigError;

/// A failure of a subcommand.
#[derive(Debug)]
pub enum CliError {
    /// The configuration is invalid: exit status 2.
    Config(ConfigError),
    /// Anything else: exit status 1.
    Other(String),
}

impl CliError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Config(_) => ExitCode::from(2),
            CliError::Other(_) => ExitCode::from(1),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Config(e) => write!(f, "{e}"),
            CliError::Other(m) => f.write_str(m),
        }
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::Config(e)
    }
}

/// Shorthand for an [`CliError::Other`].
pub fn other(msg: impl Into<String>) -> CliError {
    CliError::Other(msg.into())
}
