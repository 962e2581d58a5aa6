//! The server's inner arrows: `state/` (the tables of sessions, trees, opens, locks,
//! oplocks) never reaches up into the request handlers nor into the connections'
//! internals: it holds connections through its own `ConnectionHandle` trait.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("state/ is readable") {
        let p = e.expect("directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn state_files_naming(needles: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/state");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(
        files.len() > 5,
        "found the state sources under {}",
        root.display()
    );
    let mut hits: Vec<String> = files
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).expect("source is readable");
            // `use crate::{handlers, ...}` and paths both name the module.
            needles.iter().any(|n| text.contains(n))
        })
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    hits.sort();
    hits
}

#[test]
fn state_never_imports_the_handlers() {
    let hits = state_files_naming(&["crate::handlers", "handlers::", "super::super::handlers"]);
    assert!(hits.is_empty(), "state/ names the handlers in {hits:?}");
}

#[test]
fn state_never_names_the_connections() {
    // The table of live connections and session teardown hold connections as
    // `state::connections::ConnectionHandle`s; breaks are delivered by crate::breaks
    // and the concrete connection is recovered in conn/ (issue 14 item 5).
    let hits = state_files_naming(&["crate::conn", "conn::Connection", "super::super::conn"]);
    assert!(
        hits.is_empty(),
        "state/ names the connection internals in {hits:?}"
    );
}

#[test]
fn the_oplock_core_has_no_io_and_no_server_state() {
    // The rules of oplocks and leases take the state of one file and return
    // decisions; sending, waiting and the server's tables live elsewhere.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/state/oplock");
    let mut files = Vec::new();
    for f in ["core.rs", "lease.rs"] {
        files.push(root.join(f));
    }
    sources(&root.join("core"), &mut files);
    assert!(
        files.len() >= 3,
        "found the core sources under {}",
        root.display()
    );
    for p in &files {
        let text = std::fs::read_to_string(p).expect("source is readable");
        for needle in [
            "tokio",
            "ServerState",
            "SharedFile",
            "crate::",
            "Mutex",
            ".await",
        ] {
            assert!(
                !text.contains(needle),
                "{} names {needle}: the oplock core must stay without I/O and server state",
                p.display()
            );
        }
    }
}
