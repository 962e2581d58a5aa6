use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn smbx(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_smbx"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run smbx");
    {
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write_config(dir: &Path, passdb: &Path) -> std::path::PathBuf {
    let conf = dir.join("smb.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\n\tworkgroup = TESTGRP\n\tpassdb backend = smbpasswd:{}\n\tno such option = 1\n\n[data]\n\tpath = {}\n\tread only = no\n",
            passdb.display(),
            dir.display()
        ),
    )
    .unwrap();
    conf
}

#[test]
fn testparm_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write_config(dir.path(), &dir.path().join("smbpasswd"));
    let out = smbx(&["testparm", conf.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("[global]") && stdout.contains("[data]"),
        "{stdout}"
    );
    assert!(stdout.contains("workgroup = TESTGRP"), "{stdout}");
    assert!(stdout.contains("read only = No"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("smb.conf:4:") && stderr.contains("no such option"),
        "{stderr}"
    );

    // the printed configuration is itself valid and equivalent
    let dump = dir.path().join("dump.conf");
    std::fs::write(&dump, &stdout).unwrap();
    let again = smbx(&["testparm", dump.to_str().unwrap()], None);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), stdout);
}

#[test]
fn testparm_bad_config_exits_2_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("broken.conf");
    std::fs::write(
        &conf,
        "[global]\n\tworkgroup = X\n\tserver max protocol = NT1\n",
    )
    .unwrap();
    let out = smbx(&["testparm", conf.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("smbx: {}:3:", conf.display())),
        "{stderr}"
    );
    assert!(stderr.contains("SMB1 is not supported"), "{stderr}");
    assert!(out.stdout.is_empty());

    let missing = smbx(&["testparm", "/nonexistent/smb.conf"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/nonexistent/smb.conf"));
}

#[test]
fn user_add_list_del_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let passdb = dir.path().join("state/smbpasswd");
    let conf = write_config(dir.path(), &passdb);
    let c = conf.to_str().unwrap();

    let out = smbx(
        &["user", "add", "--config", c, "--stdin", "alice"],
        Some("Password\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = smbx(
        &["user", "--config", c, "add", "--stdin", "bob"],
        Some("x\r\nignored\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let mode = std::fs::metadata(&passdb).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let file = std::fs::read_to_string(&passdb).unwrap();
    // NT hash of "Password" ([MS-NLMP] 4.2.2.1.2)
    assert!(
        file.contains(":A4F49C406510BDCAB6824EE7C30FD852:"),
        "{file}"
    );
    assert!(!file.contains("ignored"));

    let out = smbx(&["user", "list", "--config", c], None);
    assert!(out.status.success());
    let list = text(&out.stdout);
    let names: Vec<&str> = list
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, vec!["alice", "bob"], "{list}");
    assert!(list.lines().all(|l| l.ends_with("[U]")), "{list}");

    let out = smbx(&["user", "del", "--config", c, "alice"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = smbx(&["user", "del", "--config", c, "alice"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("alice"));

    let out = smbx(&["user", "list", "--config", c], None);
    assert_eq!(text(&out.stdout).lines().count(), 1);
}

#[test]
fn user_add_without_password_on_stdin_fails() {
    let dir = tempfile::tempdir().unwrap();
    let passdb = dir.path().join("smbpasswd");
    let conf = write_config(dir.path(), &passdb);
    let out = smbx(
        &[
            "user",
            "add",
            "--config",
            conf.to_str().unwrap(),
            "--stdin",
            "carol",
        ],
        Some(""),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!passdb.exists());
}

#[test]
fn user_with_bad_config_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("smb.conf");
    std::fs::write(&conf, "[global]\npassdb backend = tdbsam\n").unwrap();
    let out = smbx(&["user", "list", "--config", conf.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("smb.conf:2:"),
        "{}",
        text(&out.stderr)
    );
}
