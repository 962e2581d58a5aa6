//! `smbx user add|del|list`.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use smbx_config::{Config, DEFAULT_CONFIG_PATH, DEFAULT_PASSDB_PATH};
use smbx_passdb::PassDb;

use crate::args::{UserAction, UserArgs};
use crate::error::{other, CliError};

/// The password database named by `config` (or the default configuration).
pub fn passdb_path(config: Option<&Path>) -> Result<PathBuf, CliError> {
    let file = match config {
        Some(f) => f.to_path_buf(),
        None => {
            let default = PathBuf::from(DEFAULT_CONFIG_PATH);
            if !default.exists() {
                return Ok(PathBuf::from(DEFAULT_PASSDB_PATH));
            }
            default
        }
    };
    let c = Config::parse_file(&file)?;
    Ok(c.global.passdb_backend)
}

fn read_password_stdin() -> Result<String, CliError> {
    let mut line = String::new();
    let n = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| other(format!("cannot read password from standard input: {e}")))?;
    if n == 0 {
        return Err(other("no password on standard input"));
    }
    if line.ends_with('\n') {
        line.pop();
        if line.ends_with('\r') {
            line.pop();
        }
    }
    Ok(line)
}

fn prompt_password() -> Result<String, CliError> {
    let read = |prompt: &str| {
        rpassword::prompt_password(prompt).map_err(|e| {
            other(format!(
                "cannot read password from the terminal: {e} (use --stdin)"
            ))
        })
    };
    let first = read("New SMB password: ")?;
    let second = read("Retype new SMB password: ")?;
    if first != second {
        return Err(other("passwords do not match"));
    }
    Ok(first)
}

/// Runs a `smbx user` action.
pub fn run(args: &UserArgs) -> Result<(), CliError> {
    let path = passdb_path(args.config.as_deref())?;
    let open = || {
        let db = PassDb::open(&path)
            .map_err(|e| other(format!("cannot read {}: {e}", path.display())))?;
        for w in db.warnings() {
            eprintln!("smbx: warning: {w}");
        }
        Ok::<_, CliError>(db)
    };
    let write_err = |e: std::io::Error| other(format!("cannot write {}: {e}", path.display()));
    match &args.action {
        UserAction::Add { stdin, name } => {
            let password = if *stdin {
                read_password_stdin()?
            } else {
                prompt_password()?
            };
            let mut db = open()?;
            let existed = db.lookup(name).is_some();
            db.add_or_update(name, &password).map_err(write_err)?;
            eprintln!(
                "{} user {name} in {}",
                if existed { "Updated" } else { "Added" },
                path.display()
            );
        }
        UserAction::Del { name } => {
            let mut db = open()?;
            if !db.remove(name).map_err(write_err)? {
                return Err(other(format!(
                    "user {name:?} does not exist in {}",
                    path.display()
                )));
            }
            eprintln!("Deleted user {name} from {}", path.display());
        }
        UserAction::List => {
            for e in open()?.list() {
                println!("{}\t{}\t[{}]", e.user, e.uid, e.flags);
            }
        }
    }
    Ok(())
}
