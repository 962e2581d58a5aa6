//! Shares: the configured disk shares and the `IPC$` pipe share.

use std::sync::Arc;

use smbx_config::{Config, ShareConfig};

/// What kind of share a tree connect reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    /// A disk share backed by a directory.
    Disk,
    /// `IPC$`: named pipes.
    Ipc,
}

/// One share as the server serves it.
#[derive(Debug)]
pub struct Share {
    /// Share name as configured.
    pub name: String,
    /// Disk or IPC.
    pub kind: ShareKind,
    /// The configuration section (a synthesized one for `IPC$`).
    pub config: ShareConfig,
}

impl Share {
    /// True for `IPC$`.
    pub fn is_ipc(&self) -> bool {
        self.kind == ShareKind::Ipc
    }
}

/// Builds the share list: every configured share plus `IPC$` (unless configured).
pub fn shares_from_config(config: &Config) -> Vec<Arc<Share>> {
    let mut out: Vec<Arc<Share>> = config
        .shares
        .iter()
        .filter(|s| !s.name.eq_ignore_ascii_case("IPC$"))
        .map(|s| {
            Arc::new(Share {
                name: s.name.clone(),
                kind: ShareKind::Disk,
                config: s.clone(),
            })
        })
        .collect();
    let mut ipc = ShareConfig::with_defaults("IPC$", Default::default(), &config.global);
    ipc.comment = "IPC Service".into();
    ipc.guest_ok = true;
    ipc.valid_users.clear();
    out.push(Arc::new(Share {
        name: "IPC$".into(),
        kind: ShareKind::Ipc,
        config: ipc,
    }));
    out
}
