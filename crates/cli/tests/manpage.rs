//! The man page (dist/smbx.1, shipped in the Debian package) covers every
//! subcommand the binary has: those clap lists in `smbx --help`, the ones its
//! "More commands" part names (client, bench, demo), and `smbx user`'s actions.

use std::collections::BTreeSet;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_smbx"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "smbx {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Names listed under "Commands:" in clap's help.
fn clap_commands(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Every subcommand name in the man page's `.SS "smbx ..."` headings.
fn man_commands(man: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in man.lines().filter(|l| l.starts_with(".SS")) {
        let l = l.trim_start_matches(".SS").trim().trim_matches('"');
        let Some(rest) = l.strip_prefix("smbx ") else {
            continue;
        };
        // "smbx ls | stat | get ... URL" and "smbx user add ... | del NAME | list"
        for alt in rest.split('|') {
            let words: Vec<&str> = alt.split_whitespace().collect();
            if let Some(w) = words.first() {
                out.insert(w.to_string());
            }
            if words.first() == Some(&"user") {
                if let Some(w) = words.get(1) {
                    out.insert(format!("user {w}"));
                }
            }
        }
        for alt in rest.split('|').skip(1) {
            if let Some(w) = alt.split_whitespace().next() {
                out.insert(format!("user {w}"));
            }
        }
    }
    out
}

#[test]
fn man_page_covers_every_subcommand() {
    let man = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/smbx.1"))
        .expect("dist/smbx.1");
    let covered = man_commands(&man);
    let top = help(&["--help"]);
    let mut wanted: Vec<String> = clap_commands(&top);
    assert!(wanted.contains(&"serve".to_string()), "{top}");
    // "More commands": smbx demo, smbx bench, smbx ls|stat|get|...
    for l in top.lines().skip_while(|l| !l.starts_with("More commands")) {
        if let Some(rest) = l.trim().strip_prefix("smbx ") {
            let first = rest.split_whitespace().next().unwrap_or("");
            wanted.extend(first.split('|').map(str::to_string));
        }
    }
    assert!(wanted.contains(&"get".to_string()), "{wanted:?}");
    for action in clap_commands(&help(&["user", "--help"])) {
        if action != "help" {
            wanted.push(format!("user {action}"));
        }
    }
    let missing: Vec<&String> = wanted.iter().filter(|c| !covered.contains(*c)).collect();
    assert!(
        missing.is_empty(),
        "dist/smbx.1 has no .SS section for {missing:?} (it covers {covered:?})"
    );
}

#[test]
fn unit_file_is_type_notify_and_runs_the_packaged_config() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dist/systemd/smbx.service"
    ))
    .expect("dist/systemd/smbx.service");
    let has = |line: &str| unit.lines().any(|l| l.trim() == line);
    assert!(has("Type=notify"));
    assert!(has(
        "ExecStart=/usr/bin/smbx serve --config /etc/smbx/smb.conf"
    ));
    assert!(has("ExecReload=/bin/kill -HUP $MAINPID"));
    // The packaged smb.conf is what ExecStart names: it must load without warnings.
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/smb.conf");
    let out = Command::new(env!("CARGO_BIN_EXE_smbx"))
        .args(["testparm", conf])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(!text.to_lowercase().contains("warn"), "{text}");
    assert!(
        text.contains("[share]") && text.contains("/srv/smbx"),
        "{text}"
    );
}
