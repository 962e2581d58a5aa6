//! The reloadable part of the server state: the configuration, the shares built
//! from it, the credential store and the authentication policy. A reload builds a
//! new [`Settings`] and swaps it in whole ([`LiveSettings::replace`]); whoever took
//! the old one keeps it until they drop it. Connections keep the configuration
//! they started with (global options apply to new connections); tree connects look
//! shares up in the current settings, and a tree keeps its `Arc<Share>`, so a
//! removed share refuses new tree connects while its trees keep working.

use std::sync::Arc;

use parking_lot::RwLock;
use smbx_config::{Config, MapToGuest};
use smbx_security::auth::{AuthPolicy, CredentialStore};

use super::share::{shares_from_config, Share};

/// One consistent generation of reloadable settings.
pub struct Settings {
    /// The configuration.
    pub config: Arc<Config>,
    /// Shares from the configuration plus `IPC$`.
    pub shares: Vec<Arc<Share>>,
    /// Where SESSION_SETUP finds NT hashes (the passdb).
    pub credentials: Arc<dyn CredentialStore>,
    /// The password database file `credentials` reads, when it is one (a reload
    /// opens it again); `None` for a store given by an embedder or a test.
    pub passdb_file: Option<std::path::PathBuf>,
    /// Authentication policy derived from the configuration.
    pub auth_policy: AuthPolicy,
    /// Counts reloads: 0 for the settings the server started with.
    pub generation: u64,
}

impl Settings {
    /// Settings for `config` with `credentials`; shares whose section is unchanged
    /// from `previous` keep their `Arc<Share>` (and so their identity).
    pub fn build(
        config: Arc<Config>,
        credentials: Arc<dyn CredentialStore>,
        passdb_file: Option<std::path::PathBuf>,
        previous: Option<&Settings>,
    ) -> Settings {
        let shares = shares_from_config(&config)
            .into_iter()
            .map(|s| {
                previous
                    .and_then(|p| {
                        p.shares
                            .iter()
                            .find(|o| o.name == s.name && o.kind == s.kind && o.config == s.config)
                    })
                    .cloned()
                    .unwrap_or(s)
            })
            .collect();
        Settings {
            auth_policy: auth_policy(&config),
            shares,
            credentials,
            passdb_file,
            config,
            generation: previous.map_or(0, |p| p.generation.wrapping_add(1)),
        }
    }

    /// Finds a share by name, case-insensitively.
    pub fn find_share(&self, name: &str) -> Option<Arc<Share>> {
        self.shares
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
            .cloned()
    }
}

/// The authentication policy a configuration asks for.
pub fn auth_policy(config: &Config) -> AuthPolicy {
    let g = &config.global;
    AuthPolicy {
        map_to_guest_bad_user: g.map_to_guest == MapToGuest::BadUser,
        allow_anonymous: true,
        netbios_name: g.netbios_name.to_uppercase(),
        netbios_domain: g.workgroup.to_uppercase(),
        dns_name: g.netbios_name.to_lowercase(),
        dns_domain: String::new(),
    }
}

/// The current [`Settings`], swappable as a whole.
pub struct LiveSettings {
    current: RwLock<Arc<Settings>>,
}

impl LiveSettings {
    /// Starts with `settings`.
    pub fn new(settings: Settings) -> LiveSettings {
        LiveSettings {
            current: RwLock::new(Arc::new(settings)),
        }
    }

    /// The settings in force now.
    pub fn current(&self) -> Arc<Settings> {
        self.current.read().clone()
    }

    /// Puts `settings` in force; returns the ones it replaced.
    pub fn replace(&self, settings: Settings) -> Arc<Settings> {
        std::mem::replace(&mut *self.current.write(), Arc::new(settings))
    }
}
