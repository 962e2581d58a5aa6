//! Escape attempts: every one must fail and leave files outside the share untouched.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use smbx_vfs::*;

struct Env {
    _tmp: tempfile::TempDir,
    share_dir: PathBuf,
    outside: PathBuf,
}

const SECRET: &[u8] = b"top secret";

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let share_dir = tmp.path().join("share");
    let outside = tmp.path().join("outside");
    fs::create_dir(&share_dir).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret"), SECRET).unwrap();
    fs::write(share_dir.join("file"), b"in share").unwrap();
    fs::create_dir(share_dir.join("a")).unwrap();
    Env {
        _tmp: tmp,
        share_dir,
        outside,
    }
}

fn share(e: &Env, follow: bool) -> Share {
    Share::open(
        &e.share_dir,
        ShareOptions {
            follow_symlinks_within_share: follow,
            ..ShareOptions::default()
        },
    )
    .unwrap()
}

fn outside_untouched(e: &Env) {
    assert_eq!(fs::read(e.outside.join("secret")).unwrap(), SECRET);
    let names: Vec<_> = fs::read_dir(&e.outside)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec!["secret"],
        "something was created outside the share"
    );
    assert!(fs::symlink_metadata(e.outside.join("secret"))
        .unwrap()
        .is_file());
    let attrs: Vec<_> = xattr_names(&e.outside.join("secret"));
    assert!(attrs.is_empty(), "xattrs written outside: {attrs:?}");
}

fn xattr_names(p: &Path) -> Vec<String> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: test helper; buffer is writable for its length and the path is NUL-terminated.
    let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0);
    buf.truncate(n as usize);
    buf.split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Every disposition, with and without write, directory or not.
fn all_requests() -> Vec<CreateRequest> {
    let mut v = Vec::new();
    for d in 0..=5 {
        for dir in [false, true] {
            for want_write in [false, true] {
                v.push(CreateRequest {
                    disposition: Disposition::from_u32(d).unwrap(),
                    directory: dir,
                    want_write,
                    ..CreateRequest::default()
                });
            }
        }
    }
    v
}

fn try_everything(s: &Share, path: &str) {
    for req in all_requests() {
        let r = s.create(path, &req);
        assert!(r.is_err(), "{path:?} {req:?} succeeded: {r:?}");
    }
}

fn attempt_mutations_via(s: &Share, target: &str) {
    // Rename and hardlink of an in-share file to a path through the escape.
    let (h, _) = s
        .create(
            "victim",
            &CreateRequest {
                disposition: Disposition::OpenIf,
                want_write: true,
                ..CreateRequest::default()
            },
        )
        .unwrap();
    assert!(s.rename(&h, target, true).is_err(), "rename to {target:?}");
    assert!(
        s.hardlink(&h, target, true).is_err(),
        "hardlink to {target:?}"
    );
    assert_eq!(h.path(), "victim");
}

#[test]
fn dotdot_and_absolute_paths() {
    let e = env();
    let s = share(&e, false);
    for p in [
        "..\\outside\\secret",
        "..\\x",
        "a\\..\\..\\x",
        "a\\..\\..\\outside\\secret",
        "..",
        "a\\..",
        ".\\file",
        "/etc/passwd",
        "..//outside/secret",
        "a/../../outside/secret",
        "C:\\outside\\secret",
        "\\\\?\\C:\\x",
        "a\\\\..\\x",
        "a\\.\\..\\x",
    ] {
        try_everything(&s, p);
        attempt_mutations_via(&s, p);
    }
    // Leading backslashes are stripped: stays inside the share.
    let (h, _) = s.create("\\file", &CreateRequest::default()).unwrap();
    assert_eq!(h.path(), "file");
    outside_untouched(&e);
}

#[test]
fn stream_name_tricks() {
    let e = env();
    let s = share(&e, false);
    for p in [
        "file:..\\..\\outside\\secret",
        "file:..\\..\\x",
        "file:/etc/passwd",
        "file:../../outside/secret",
        "file:..",
        "file:a/b",
        "file:x:$DATA:y",
        "file:x:$INDEX_ALLOCATION",
        "a:x\\file",
        "..:x",
    ] {
        try_everything(&s, p);
    }
    outside_untouched(&e);
}

#[test]
fn symlinks_created_after_open_are_not_followed() {
    let e = env();
    let s = share(&e, false);
    // Created after the share was opened.
    symlink(&e.outside, e.share_dir.join("dirlink")).unwrap();
    symlink(e.outside.join("secret"), e.share_dir.join("filelink")).unwrap();
    symlink("../outside/secret", e.share_dir.join("rellink")).unwrap();
    symlink("/proc/self/root/etc", e.share_dir.join("proclink")).unwrap();
    symlink("file", e.share_dir.join("inlink")).unwrap();
    for p in [
        "dirlink\\secret",
        "DIRLINK\\secret",
        "dirlink\\new",
        "dirlink",
        "filelink",
        "FileLink",
        "filelink:stream",
        "rellink",
        "proclink\\passwd",
        "inlink",
    ] {
        try_everything(&s, p);
        attempt_mutations_via(&s, p);
    }
    assert_eq!(
        s.create("dirlink\\secret", &CreateRequest::default())
            .unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    assert_eq!(
        s.create("filelink", &CreateRequest::default()).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    // Symlinks are invisible in listings.
    let (root, _) = s.create("", &CreateRequest::default()).unwrap();
    let names: Vec<String> = root
        .read_dir()
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, vec![".", "..", "a", "file", "victim"]);
    outside_untouched(&e);
}

#[test]
fn follow_mode_allows_links_within_share_only() {
    let e = env();
    let s = share(&e, true);
    symlink(&e.outside, e.share_dir.join("dirlink")).unwrap();
    symlink(e.outside.join("secret"), e.share_dir.join("filelink")).unwrap();
    symlink("../outside/secret", e.share_dir.join("rellink")).unwrap();
    symlink("../../outside", e.share_dir.join("a").join("uplink")).unwrap();
    symlink("../file", e.share_dir.join("a").join("inlink")).unwrap();
    symlink("a", e.share_dir.join("adir")).unwrap();
    for p in [
        "dirlink\\secret",
        "dirlink\\new",
        "filelink",
        "rellink",
        "a\\uplink\\secret",
        "A\\UPLINK\\secret",
    ] {
        try_everything(&s, p);
        attempt_mutations_via(&s, p);
    }
    let mut buf = [0u8; 32];
    let (h, _) = s.create("a\\inlink", &CreateRequest::default()).unwrap();
    let n = h.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"in share");
    let (h, _) = s.create("adir\\inlink", &CreateRequest::default()).unwrap();
    assert_eq!(h.read_at(&mut buf, 0).unwrap(), 8);
    // Listing shows in-share links, hides escaping ones.
    let (root, _) = s.create("", &CreateRequest::default()).unwrap();
    let names: Vec<String> = root
        .read_dir()
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, vec![".", "..", "a", "adir", "file", "victim"]);
    outside_untouched(&e);
}

#[test]
fn symlink_loops() {
    let e = env();
    for follow in [false, true] {
        let s = share(&e, follow);
        let _ = fs::remove_file(e.share_dir.join("loop1"));
        let _ = fs::remove_file(e.share_dir.join("loop2"));
        let _ = fs::remove_file(e.share_dir.join("self"));
        symlink("loop2", e.share_dir.join("loop1")).unwrap();
        symlink("loop1", e.share_dir.join("loop2")).unwrap();
        symlink("self", e.share_dir.join("self")).unwrap();
        for p in ["loop1", "loop1\\x", "self", "self\\self\\x", "LOOP2"] {
            try_everything(&s, p);
        }
    }
    outside_untouched(&e);
}

#[test]
fn directory_swapped_for_symlink_after_resolution() {
    let e = env();
    for follow in [false, true] {
        let s = share(&e, follow);
        let d = e.share_dir.join("d");
        let _ = fs::remove_file(&d);
        let _ = fs::remove_dir_all(&d);
        let _ = fs::remove_dir_all(e.share_dir.join("d.moved"));
        fs::create_dir(&d).unwrap();
        fs::write(d.join("secret"), b"inner").unwrap();
        // Resolve: hold handles to the directory and a file inside it.
        let (dh, _) = s.create("d", &CreateRequest::default()).unwrap();
        let (fh, _) = s
            .create(
                "d\\secret",
                &CreateRequest {
                    want_write: true,
                    ..CreateRequest::default()
                },
            )
            .unwrap();
        // Swap: move the directory away and put a symlink to the outside in its place.
        fs::rename(&d, e.share_dir.join("d.moved")).unwrap();
        symlink(&e.outside, &d).unwrap();
        // Opening beneath it must not reach the outside.
        try_everything(&s, "d\\secret");
        try_everything(&s, "d\\newfile");
        try_everything(&s, "D\\SECRET");
        // Path-based mutations through the stale handles must not either.
        assert!(s.delete(&fh).is_err());
        assert!(s.rename(&fh, "d\\renamed", true).is_err());
        assert!(s.rename(&fh, "x", true).is_err());
        assert!(s.hardlink(&fh, "y", true).is_err());
        assert!(s.delete(&dh).is_err());
        // Listing the old directory handle lists the moved directory, not the outside.
        let names: Vec<String> = dh.read_dir().unwrap().into_iter().map(|d| d.name).collect();
        assert_eq!(names, vec![".", "..", "secret"]);
        // The open file handle still writes to the (moved) in-share file only.
        fh.write_at(b"INNER", 0).unwrap();
        assert_eq!(
            fs::read(e.share_dir.join("d.moved").join("secret")).unwrap(),
            b"INNER"
        );
        assert!(!e.share_dir.join("x").exists() && !e.share_dir.join("y").exists());
    }
    outside_untouched(&e);
}

#[test]
fn intermediate_file_symlink_and_parent_escape_in_rename_target() {
    let e = env();
    let s = share(&e, false);
    symlink(&e.outside, e.share_dir.join("a").join("out")).unwrap();
    attempt_mutations_via(&s, "a\\out\\stolen");
    attempt_mutations_via(&s, "a\\out\\secret");
    attempt_mutations_via(&s, "a\\out");
    outside_untouched(&e);
}
