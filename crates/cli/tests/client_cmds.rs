//! The client commands (`smbx ls|stat|get|put|cat|rm|mkdir|rmdir|mv`) run as the built
//! binary against a real Samba smbd and against `smbx serve`, each started on 127.0.0.1
//! by the test with its own smb.conf (the recipe the client library's tests use).
//! smbd must be installed: these tests fail, never skip, without it.

#[path = "../../client/tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::Once;

use common::{random_bytes, sha256, Server, PASSWORD, USER};

const SMBX: &str = env!("CARGO_BIN_EXE_smbx");

/// `common::start_smbx` runs $SMBX_BIN: point it at the binary under test.
fn use_this_binary() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("SMBX_BIN", SMBX));
}

/// Runs `smbx ARGS` with the password in SMBX_PASSWORD and `stdin` on its input.
fn smbx_in(args: &[&str], password: &str, stdin: &[u8]) -> Output {
    let mut child = Command::new(SMBX)
        .args(args)
        .env("SMBX_PASSWORD", password)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run smbx");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn smbx(args: &[&str]) -> Output {
    smbx_in(args, PASSWORD, b"")
}

fn ok(args: &[&str]) -> String {
    let out = smbx(args);
    assert!(
        out.status.success(),
        "smbx {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts failure with one line on stderr naming the command, the URL and `status`.
fn fails_with(out: &Output, cmd: &str, status: &str) {
    assert!(!out.status.success(), "expected {status}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("smbx: {cmd} smb://")), "{err}");
    assert!(err.trim_end().ends_with(status), "{err}");
    assert!(!err.contains(PASSWORD), "password leaked: {err}");
}

fn scenario(server: &Server) {
    let base = format!("smb://{USER}@127.0.0.1:{}/share", server.port);
    let share = server.share_dir("share");
    let local = tempfile::tempdir().unwrap();
    let u = |p: &str| format!("{base}/{p}");

    // put 8 MiB of random data into the share's root (the name comes from LOCAL), get it back.
    let data = random_bytes(8 << 20);
    let src = local.path().join("big.bin");
    std::fs::write(&src, &data).unwrap();
    ok(&["put", src.to_str().unwrap(), &format!("{base}/")]);
    assert_eq!(
        sha256(&std::fs::read(share.join("big.bin")).unwrap()),
        sha256(&data),
        "{}: the server's copy differs",
        server.kind
    );
    let back = local.path().join("back.bin");
    ok(&["get", &u("big.bin"), back.to_str().unwrap()]);
    assert_eq!(sha256(&std::fs::read(&back).unwrap()), sha256(&data));
    // Smaller chunks and depth, and a LOCAL that is a directory.
    let dir = local.path().join("into");
    std::fs::create_dir(&dir).unwrap();
    ok(&[
        "get",
        "--chunk",
        "64K",
        "--depth",
        "3",
        &u("big.bin"),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        sha256(&std::fs::read(dir.join("big.bin")).unwrap()),
        sha256(&data)
    );

    // ls: the directory, a wildcard, the file itself.
    let listing = ok(&["ls", &base]);
    let line = listing
        .lines()
        .find(|l| l.trim_start().starts_with("big.bin "))
        .unwrap_or_else(|| panic!("big.bin not listed:\n{listing}"));
    assert!(line.contains(" 8388608 "), "{line}");
    assert!(line.contains('A'), "{line}");
    assert!(ok(&["ls", &u("*.bin")]).contains("big.bin"));
    assert_eq!(ok(&["ls", &u("big.bin")]).lines().count(), 1);

    // stat.
    let st = ok(&["stat", &u("big.bin")]);
    for needle in [
        "File: big.bin",
        "Size: 8388608",
        "Type: file",
        "File id: 0x",
    ] {
        assert!(st.contains(needle), "{needle}: {st}");
    }

    // mv, relative to the source's directory.
    ok(&["mv", &u("big.bin"), "renamed.bin"]);
    assert!(share.join("renamed.bin").is_file());
    assert!(!share.join("big.bin").exists());
    fails_with(
        &smbx(&["stat", &u("big.bin")]),
        "stat",
        "STATUS_OBJECT_NAME_NOT_FOUND",
    );

    // cat into a reader that stops early: quiet success, like cat(1).
    let mut child = Command::new(SMBX)
        .args(["cat", &u("renamed.bin")])
        .env("SMBX_PASSWORD", PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first[..], &data[..16]);
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // put from stdin, cat; signed, sealed and an older dialect too.
    let small = b"hello from smbx cat\n";
    let out = smbx_in(&["put", "-", &u("small.txt")], PASSWORD, small);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ok(&["cat", &u("small.txt")]).as_bytes(), small);
    assert_eq!(ok(&["cat", "--sign", &u("small.txt")]).as_bytes(), small);
    assert_eq!(ok(&["cat", "--encrypt", &u("small.txt")]).as_bytes(), small);
    assert_eq!(
        ok(&["cat", "--dialect", "2.1", &u("small.txt")]).as_bytes(),
        small
    );

    // rm.
    ok(&["rm", &u("renamed.bin")]);
    assert!(!share.join("renamed.bin").exists());
    fails_with(
        &smbx(&["rm", &u("renamed.bin")]),
        "rm",
        "STATUS_OBJECT_NAME_NOT_FOUND",
    );

    // mkdir / rmdir; rmdir of a non-empty directory fails.
    ok(&["mkdir", &u("d")]);
    assert!(share.join("d").is_dir());
    fails_with(
        &smbx(&["mkdir", &u("d")]),
        "mkdir",
        "STATUS_OBJECT_NAME_COLLISION",
    );
    ok(&["mv", &u("small.txt"), "/d/small.txt"]);
    fails_with(
        &smbx(&["rmdir", &u("d")]),
        "rmdir",
        "STATUS_DIRECTORY_NOT_EMPTY",
    );
    ok(&["rm", &u("d/small.txt")]);
    ok(&["rmdir", &u("d")]);
    assert!(!share.join("d").exists());

    // Failures: a missing file, a directory, a wrong password.
    let missing = local.path().join("missing");
    let out = smbx(&["get", &u("no-such-file"), missing.to_str().unwrap()]);
    fails_with(&out, "get", "STATUS_OBJECT_NAME_NOT_FOUND");
    assert!(
        !missing.exists(),
        "get created a local file for a missing one"
    );
    fails_with(
        &smbx(&["cat", &u("nope")]),
        "cat",
        "STATUS_OBJECT_NAME_NOT_FOUND",
    );
    let out = smbx_in(&["ls", &base], "not-the-password", b"");
    fails_with(&out, "ls", "STATUS_LOGON_FAILURE");
    let in_url = format!("smb://{USER}:wrong@127.0.0.1:{}/share/x", server.port);
    let out = smbx(&["get", &in_url]);
    fails_with(&out, "get", "STATUS_LOGON_FAILURE");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("wrong@"));
}

#[test]
fn against_samba() {
    let server = common::start_samba("");
    scenario(&server);
}

#[test]
fn against_smbx_serve() {
    use_this_binary();
    let server = common::start_smbx("");
    scenario(&server);
}

#[test]
fn usage_errors() {
    // Without a password anywhere and no terminal to prompt on.
    let out = Command::new(SMBX)
        .args(["ls", "smb://someone@127.0.0.1:1/share"])
        .env_remove("SMBX_PASSWORD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SMBX_PASSWORD"));
    // A bad URL, a missing argument.
    let out = smbx(&["stat", "http://x/y"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("smb://"));
    assert_eq!(smbx(&["mv", "smb://h/s/a"]).status.code(), Some(2));
    // --multichannel takes 1 to 32 channels.
    for bad in ["0", "33", "x"] {
        let out = smbx(&["ls", "--multichannel", bad, "smb://h/s"]);
        assert_eq!(out.status.code(), Some(2), "--multichannel {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid value") && err.contains("--multichannel <N>"),
            "{err}"
        );
    }
}
