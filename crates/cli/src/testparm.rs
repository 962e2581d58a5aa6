//! `smbx testparm`.

use std::path::Path;

use smbx_config::Config;

use crate::error::CliError;

/// Parses `file`, prints warnings to stderr and the effective configuration to stdout.
pub fn run(file: &Path) -> Result<(), CliError> {
    let config = Config::parse_file(file)?;
    eprintln!(
        "Loaded {} ({} share(s))",
        file.display(),
        config.shares.len()
    );
    for w in &config.warnings {
        eprintln!("WARNING: {w}");
    }
    print!("{}", config.to_smb_conf());
    Ok(())
}
