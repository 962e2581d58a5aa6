//! The crates' arrows ([DESIGN.md]: cli → server | client | bench → transport →
//! direct → rdma; everything may use wire and security, and the std-only task
//! helpers (crates/task) sit below all; the server never imports the client, nor the
//! client the server). A new `smbx-*` dependency that breaks them fails here; each
//! crate's lib.rs says the same in words.

use std::collections::BTreeSet;
use std::path::Path;

/// The smbx crates each crate may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("wire", &[]),
    ("task", &[]),
    ("security", &["wire"]),
    ("rdma", &["wire", "security"]),
    ("direct", &["wire", "security", "task", "rdma"]),
    ("transport", &["wire", "security", "direct", "rdma"]),
    ("vfs", &["wire", "security"]),
    ("config", &["wire", "security"]),
    ("passdb", &["wire", "security"]),
    ("rpc", &["wire", "security"]),
    (
        "server",
        &[
            "wire",
            "security",
            "config",
            "passdb",
            "rpc",
            "vfs",
            "transport",
            "task",
        ],
    ),
    ("client", &["wire", "security", "transport", "task"]),
    (
        "bench",
        &["wire", "security", "transport", "client", "task"],
    ),
];

/// The `smbx-*` names in the `[dependencies]` table of a Cargo.toml.
fn smbx_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(rest) = t.strip_prefix("smbx-") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(&crates).expect("crates/ is readable") {
        let dir = entry.expect("directory entry").path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        seen.insert(name.clone());
        if name == "cli" {
            continue; // the binary composes everything
        }
        let allowed = ALLOWED
            .iter()
            .find(|(c, _)| *c == name)
            .unwrap_or_else(|| panic!("crates/{name} has no row in ALLOWED: add its layer"))
            .1;
        for dep in smbx_dependencies(&manifest) {
            assert!(
                allowed.contains(&dep.as_str()),
                "crates/{name} depends on smbx-{dep}, against the layers (allowed: {allowed:?})"
            );
        }
    }
    for (c, _) in ALLOWED {
        assert!(seen.contains(*c), "ALLOWED names crates/{c}, which is gone");
    }
}

#[test]
fn the_manifest_reader_finds_dependencies_only_in_their_table() {
    let m = "[package]\nname = \"smbx-x\"\n[dependencies]\nsmbx-wire.workspace = true\n\
             smbx-security = { path = \"../security\" }\ntokio = \"1\"\n\
             [dev-dependencies]\nsmbx-server.workspace = true\n";
    let got: Vec<String> = smbx_dependencies(m).into_iter().collect();
    assert_eq!(got, vec!["security".to_string(), "wire".to_string()]);
}
