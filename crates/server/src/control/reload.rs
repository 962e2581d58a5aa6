//! Live reload (SIGHUP, `smbx reload`): read smb.conf and the password database
//! again and put them in force as a whole, or refuse the new ones as a whole.
//!
//! What changes: new shares answer tree connects, removed shares refuse them (trees
//! already connected keep their share until disconnected, as Samba does), changed
//! shares apply to new tree connects; global options apply to new connections
//! (a connection keeps the configuration it was accepted with); the password
//! database applies to new logons. Listening sockets are not re-bound: the options
//! in [`RESTART_OPTIONS`] are reported as needing a restart.

use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use smbx_config::Config;

use crate::state::{ServerState, Settings};

/// Produces the configuration to reload: reads the file again (and re-applies
/// command-line overrides). The error names the file and line.
pub type Loader = Arc<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// Global options that are read once at start-up (listeners, logging): a change
/// is reported and takes effect at the next start.
pub const RESTART_OPTIONS: &[&str] = &[
    "interfaces",
    "bind interfaces only",
    "smb ports",
    "smb direct",
    "smb direct port",
    "smb direct crc",
    "smb direct large fpdus",
    "smb direct max send size",
    "smb direct max receive size",
    "smb direct max fragmented size",
    "smb direct mss",
    "max connections",
    "control socket",
    "metrics listen",
    "log file",
    "log level",
    "max log size",
];

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// The configuration file read (`null` in zero configuration).
    pub config_file: Option<String>,
    /// The configuration generation now in force (1 after the first reload).
    pub generation: u64,
    /// Shares that appeared.
    pub shares_added: Vec<String>,
    /// Shares that are gone (their connected trees keep working until disconnected).
    pub shares_removed: Vec<String>,
    /// Shares whose options changed (new tree connects see the new ones).
    pub shares_changed: Vec<String>,
    /// Global options whose value changed.
    pub globals_changed: Vec<String>,
    /// Of those, the ones that take effect only after a restart.
    pub restart_needed: Vec<String>,
    /// Users in the password database.
    pub users: usize,
    /// Warnings from the configuration and the password database.
    pub warnings: Vec<String>,
}

/// One reload at a time.
static RELOADING: Mutex<()> = Mutex::new(());

/// Loads the configuration with `loader` and puts it in force; on any error the
/// running configuration stays and the error (file and line) is returned and
/// logged. Blocking (reads files): call from a blocking context.
pub fn reload(server: &ServerState, loader: &Loader) -> Result<ReloadReport, String> {
    let _one = RELOADING.lock();
    let result = loader().and_then(|c| apply(server, c));
    match &result {
        Ok(r) => {
            for w in &r.warnings {
                tracing::warn!("{w}");
            }
            tracing::info!(
                generation = r.generation,
                added = ?r.shares_added,
                removed = ?r.shares_removed,
                changed = ?r.shares_changed,
                globals = ?r.globals_changed,
                "configuration reloaded"
            );
            if !r.restart_needed.is_empty() {
                tracing::warn!(
                    options = ?r.restart_needed,
                    "changed options take effect after a restart"
                );
            }
        }
        Err(e) => tracing::error!("reload refused, the running configuration stays: {e}"),
    }
    result
}

/// Puts `config` in force with a freshly read password database.
pub fn apply(server: &ServerState, config: Config) -> Result<ReloadReport, String> {
    let old = server.settings.current();
    let mut warnings = config.warnings.clone();
    let (credentials, passdb_file, users) = match &old.passdb_file {
        Some(_) => {
            let path = config.global.passdb_backend.clone();
            let db = smbx_passdb::PassDb::open(&path)
                .map_err(|e| format!("{}: cannot read password database: {e}", path.display()))?;
            warnings.extend(db.warnings().iter().cloned());
            let shared = smbx_passdb::SharedPassDb::open(&path)
                .map_err(|e| format!("{}: cannot read password database: {e}", path.display()))?;
            let store: Arc<dyn smbx_security::auth::CredentialStore> = Arc::new(shared);
            (store, Some(path), db.list().len())
        }
        // A store given by an embedder stays.
        None => (old.credentials.clone(), None, 0),
    };
    let config = Arc::new(config);
    let new = Settings::build(config.clone(), credentials, passdb_file, Some(&old));
    let mut report = ReloadReport {
        config_file: config.source.as_ref().map(|p| p.display().to_string()),
        generation: new.generation,
        users,
        warnings,
        ..ReloadReport::default()
    };
    for s in new.shares.iter().filter(|s| !s.is_ipc()) {
        match old.find_share(&s.name) {
            None => report.shares_added.push(s.name.clone()),
            Some(o) if !Arc::ptr_eq(&o, s) => report.shares_changed.push(s.name.clone()),
            Some(_) => {}
        }
    }
    for s in old.shares.iter().filter(|s| !s.is_ipc()) {
        if new.find_share(&s.name).is_none() {
            report.shares_removed.push(s.name.clone());
        }
    }
    report.globals_changed = changed_globals(&old.config, &config);
    report.restart_needed = report
        .globals_changed
        .iter()
        .filter(|n| RESTART_OPTIONS.contains(&n.as_str()))
        .cloned()
        .collect();
    let keep = new.shares.clone();
    server.settings.replace(new);
    server.files.retain_vfs_shares(&keep);
    Ok(report)
}

/// The `[global]` options whose effective value differs, by name (testparm's
/// rendering of both configurations, compared line by line).
fn changed_globals(old: &Config, new: &Config) -> Vec<String> {
    fn globals(c: &Config) -> Vec<(String, String)> {
        let text = c.to_smb_conf();
        let mut out = Vec::new();
        let mut in_global = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                in_global = t.eq_ignore_ascii_case("[global]");
                continue;
            }
            if !in_global || t.starts_with('#') {
                continue;
            }
            if let Some((k, v)) = t.split_once('=') {
                out.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        out
    }
    let (a, b) = (globals(old), globals(new));
    let mut names: Vec<String> = Vec::new();
    for (k, v) in &b {
        if a.iter().find(|(ka, _)| ka == k).map(|(_, va)| va) != Some(v) && !names.contains(k) {
            names.push(k.clone());
        }
    }
    for (k, _) in &a {
        if !b.iter().any(|(kb, _)| kb == k) && !names.contains(k) {
            names.push(k.clone());
        }
    }
    names
}

/// Reloads on every SIGHUP until the runtime shuts down.
pub fn spawn_sighup(server: Arc<ServerState>, loader: Loader) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the configuration");
            let (s, l) = (server.clone(), loader.clone());
            let _ = tokio::task::spawn_blocking(move || reload(&s, &l)).await;
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_changes_by_name() {
        let a = Config::parse_str("[global]\n smb ports = 445\n", "a").unwrap();
        let b = Config::parse_str(
            "[global]\n smb ports = 4450\n server signing = mandatory\n",
            "b",
        )
        .unwrap();
        let mut ch = changed_globals(&a, &b);
        ch.sort();
        assert_eq!(ch, vec!["server signing", "smb ports"]);
        assert!(changed_globals(&a, &a).is_empty());
    }
}
