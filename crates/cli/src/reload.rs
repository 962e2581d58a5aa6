//! `smbx reload`: the running server reads smb.conf and the password database again.

use smbx_server::control::{ReloadReport, Request, Response};

use crate::args::ControlArgs;
use crate::control;
use crate::error::{other, CliError};

/// Asks the server to reload and prints what changed; a refused reload is an
/// error naming the file and line (exit status 1), the old configuration staying.
pub fn run(args: &ControlArgs) -> Result<(), CliError> {
    match control::ask(args, &Request::Reload)? {
        Response::Reloaded(r) => {
            print!("{}", render(&r));
            Ok(())
        }
        _ => Err(other("unexpected answer from the server")),
    }
}

fn render(r: &ReloadReport) -> String {
    let mut o = format!(
        "reloaded {} (configuration generation {})\n",
        r.config_file.as_deref().unwrap_or("zero configuration"),
        r.generation
    );
    let list = |o: &mut String, what: &str, v: &[String]| {
        if !v.is_empty() {
            o.push_str(&format!("  {what}: {}\n", v.join(", ")));
        }
    };
    list(&mut o, "shares added", &r.shares_added);
    list(&mut o, "shares removed", &r.shares_removed);
    list(&mut o, "shares changed", &r.shares_changed);
    list(&mut o, "global options changed", &r.globals_changed);
    list(&mut o, "take effect after a restart", &r.restart_needed);
    o.push_str(&format!("  users in the password database: {}\n", r.users));
    for w in &r.warnings {
        o.push_str(&format!("  warning: {w}\n"));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_changes() {
        let r = ReloadReport {
            config_file: Some("/etc/smbx/smb.conf".into()),
            generation: 2,
            shares_added: vec!["new".into()],
            shares_removed: vec!["old".into()],
            restart_needed: vec!["smb ports".into()],
            globals_changed: vec!["smb ports".into()],
            users: 3,
            ..Default::default()
        };
        let s = render(&r);
        assert!(s.starts_with("reloaded /etc/smbx/smb.conf (configuration generation 2)"));
        assert!(s.contains("shares added: new\n"));
        assert!(s.contains("shares removed: old\n"));
        assert!(!s.contains("shares changed"));
        assert!(s.contains("take effect after a restart: smb ports\n"));
    }
}
