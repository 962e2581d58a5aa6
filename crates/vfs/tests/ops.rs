//! Behaviour of the operations on a real file system.

use std::fs;
use std::path::PathBuf;

use smbx_vfs::*;

fn setup(opts: ShareOptions) -> (tempfile::TempDir, PathBuf, Share) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("share");
    fs::create_dir(&dir).unwrap();
    let s = Share::open(&dir, opts).unwrap();
    (tmp, dir, s)
}

fn req(d: Disposition) -> CreateRequest {
    CreateRequest {
        disposition: d,
        want_write: true,
        ..CreateRequest::default()
    }
}

fn open_rw(s: &Share, p: &str) -> Handle {
    s.create(p, &req(Disposition::Open)).unwrap().0
}

fn names(h: &Handle) -> Vec<String> {
    h.read_dir().unwrap().into_iter().map(|e| e.name).collect()
}

#[test]
fn error_statuses_for_missing_components() {
    let (_t, dir, s) = setup(ShareOptions::default());
    fs::write(dir.join("f"), b"x").unwrap();
    fs::create_dir(dir.join("d")).unwrap();
    let open = CreateRequest::default();
    assert_eq!(
        s.create("nope", &open).unwrap_err(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(
        s.create("d\\nope", &open).unwrap_err(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(
        s.create("nodir\\x", &open).unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    assert_eq!(
        s.create("nodir\\x", &req(Disposition::Create)).unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    assert_eq!(
        s.create("f\\x", &open).unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    assert_eq!(
        s.create("f\\x", &req(Disposition::OpenIf)).unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    assert_eq!(
        s.create("a*b", &open).unwrap_err(),
        NtStatus::OBJECT_NAME_INVALID
    );
    let (root, a) = s.create("", &open).unwrap();
    assert_eq!(a, CreateAction::Opened);
    assert!(root.is_dir());
    assert_eq!(root.path(), "");
}

#[test]
fn dispositions_matrix() {
    use CreateAction::*;
    use Disposition::*;
    let (_t, dir, s) = setup(ShareOptions::default());
    // (disposition, exists?) -> expected
    let cases: [(Disposition, bool, Result<CreateAction, NtStatus>); 12] = [
        (Supersede, true, Ok(Superseded)),
        (Supersede, false, Ok(Created)),
        (Open, true, Ok(Opened)),
        (Open, false, Err(NtStatus::OBJECT_NAME_NOT_FOUND)),
        (Create, true, Err(NtStatus::OBJECT_NAME_COLLISION)),
        (Create, false, Ok(Created)),
        (OpenIf, true, Ok(Opened)),
        (OpenIf, false, Ok(Created)),
        (Overwrite, true, Ok(Overwritten)),
        (Overwrite, false, Err(NtStatus::OBJECT_NAME_NOT_FOUND)),
        (OverwriteIf, true, Ok(Overwritten)),
        (OverwriteIf, false, Ok(Created)),
    ];
    for (i, (d, exists, want)) in cases.into_iter().enumerate() {
        let name = format!("f{i}");
        if exists {
            fs::write(dir.join(&name), b"old data").unwrap();
        }
        let r = s.create(&name, &req(d)).map(|(h, a)| (a, h));
        assert_eq!(
            r.as_ref().map(|x| x.0).map_err(|e| *e),
            want,
            "{d:?} exists={exists}"
        );
        if let Ok((a, h)) = r {
            let size = h.stat().unwrap().size;
            match a {
                Opened => assert_eq!(size, 8),
                _ => assert_eq!(size, 0),
            }
            assert!(dir.join(&name).is_file());
        } else if !exists {
            assert!(!dir.join(&name).exists());
        }
    }
}

#[test]
fn directory_requirements() {
    let (_t, dir, s) = setup(ShareOptions::default());
    fs::write(dir.join("f"), b"x").unwrap();
    fs::create_dir(dir.join("d")).unwrap();
    let dir_req = |d| CreateRequest {
        disposition: d,
        directory: true,
        ..CreateRequest::default()
    };
    let file_req = |d| CreateRequest {
        disposition: d,
        non_directory: true,
        ..CreateRequest::default()
    };
    assert_eq!(
        s.create("d", &file_req(Disposition::Open)).unwrap_err(),
        NtStatus::FILE_IS_A_DIRECTORY
    );
    assert_eq!(
        s.create("f", &dir_req(Disposition::Open)).unwrap_err(),
        NtStatus::NOT_A_DIRECTORY
    );
    assert_eq!(
        s.create("d::$DATA", &CreateRequest::default()).unwrap_err(),
        NtStatus::FILE_IS_A_DIRECTORY
    );
    assert_eq!(
        s.create("d", &dir_req(Disposition::Create)).unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        s.create("x", &dir_req(Disposition::Overwrite)).unwrap_err(),
        NtStatus::INVALID_PARAMETER
    );
    let (h, a) = s.create("newdir", &dir_req(Disposition::Create)).unwrap();
    assert_eq!(a, CreateAction::Created);
    assert!(h.is_dir() && dir.join("newdir").is_dir());
    let info = h.stat().unwrap();
    assert!(info.is_dir);
    assert!(info.attributes.contains(FileAttributes::DIRECTORY));
    let (_, a) = s.create("newdir", &dir_req(Disposition::OpenIf)).unwrap();
    assert_eq!(a, CreateAction::Opened);
    let (h, a) = s
        .create("newdir\\sub", &dir_req(Disposition::OpenIf))
        .unwrap();
    assert_eq!(a, CreateAction::Created);
    assert_eq!(h.path(), "newdir\\sub");
}

#[test]
fn read_only_attribute_and_share() {
    let (_t, dir, s) = setup(ShareOptions::default());
    let (h, _) = s.create("ro.txt", &req(Disposition::Create)).unwrap();
    h.write_at(b"data", 0).unwrap();
    h.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::READONLY),
        ..BasicInfo::default()
    })
    .unwrap();
    assert_eq!(
        s.create("ro.txt", &req(Disposition::Overwrite))
            .unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        s.create("ro.txt", &req(Disposition::Open)).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    let (rh, _) = s.create("ro.txt", &CreateRequest::default()).unwrap();
    assert_eq!(rh.write_at(b"x", 0).unwrap_err(), NtStatus::ACCESS_DENIED);
    assert_eq!(s.delete(&rh).unwrap_err(), NtStatus::CANNOT_DELETE);
    // Hidden files can only be overwritten when HIDDEN is requested again.
    let (h2, _) = s.create("hid", &req(Disposition::Create)).unwrap();
    h2.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::HIDDEN),
        ..BasicInfo::default()
    })
    .unwrap();
    assert_eq!(
        s.create("hid", &req(Disposition::OverwriteIf)).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    let r = CreateRequest {
        attributes: FileAttributes::HIDDEN,
        ..req(Disposition::OverwriteIf)
    };
    assert_eq!(s.create("hid", &r).unwrap().1, CreateAction::Overwritten);

    let ro = Share::open(
        &dir,
        ShareOptions {
            read_only: true,
            ..ShareOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        ro.create("new", &req(Disposition::OpenIf)).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        ro.create(
            "new",
            &CreateRequest {
                disposition: Disposition::OpenIf,
                ..CreateRequest::default()
            }
        )
        .unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        ro.create("hid", &req(Disposition::Open)).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    let (h, _) = ro.create("hid", &CreateRequest::default()).unwrap();
    assert!(!h.is_writable());
    assert_eq!(h.write_at(b"x", 0).unwrap_err(), NtStatus::ACCESS_DENIED);
    assert_eq!(ro.delete(&h).unwrap_err(), NtStatus::ACCESS_DENIED);
    assert_eq!(
        ro.rename(&h, "other", false).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    assert!(!dir.join("new").exists() && !dir.join("other").exists());
    assert!(ro.fs_info().unwrap().read_only);
}

#[test]
fn case_insensitive_lookup() {
    let (_t, dir, s) = setup(ShareOptions::default());
    fs::create_dir_all(dir.join("Dir").join("Sub")).unwrap();
    fs::write(dir.join("Dir").join("Sub").join("foo.txt"), b"hello").unwrap();
    fs::write(dir.join("foo.txt"), b"top").unwrap();
    let (h, _) = s.create("FOO.TXT", &CreateRequest::default()).unwrap();
    assert_eq!(h.path(), "foo.txt");
    let (h, _) = s
        .create("dir\\SUB\\Foo.Txt", &CreateRequest::default())
        .unwrap();
    assert_eq!(h.path(), "Dir\\Sub\\foo.txt");
    let mut b = [0u8; 8];
    assert_eq!(h.read_at(&mut b, 0).unwrap(), 5);
    assert_eq!(&b[..5], b"hello");
    // CREATE of an existing name in another case collides.
    assert_eq!(
        s.create("DIR\\sub\\FOO.TXT", &req(Disposition::Create))
            .unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    // New names keep the client's case, under the real parent names.
    let (h, a) = s
        .create("DIR\\sub\\NewFile.TXT", &req(Disposition::OpenIf))
        .unwrap();
    assert_eq!(a, CreateAction::Created);
    assert_eq!(h.path(), "Dir\\Sub\\NewFile.TXT");
    assert!(dir.join("Dir").join("Sub").join("NewFile.TXT").is_file());
    // Unicode case folding.
    fs::write(dir.join("ÄÖÜ.txt"), b"u").unwrap();
    assert!(s.create("äöü.TXT", &CreateRequest::default()).is_ok());
    // A case-sensitive share does not fold.
    let cs = Share::open(
        &dir,
        ShareOptions {
            case_sensitive: true,
            ..ShareOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        cs.create("FOO.TXT", &CreateRequest::default()).unwrap_err(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(
        cs.create("dir\\Sub\\foo.txt", &CreateRequest::default())
            .unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
}

#[test]
fn read_write_truncate_and_stat() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let (h, _) = s.create("data.bin", &req(Disposition::Create)).unwrap();
    assert_eq!(h.write_at(b"hello world", 0).unwrap(), 11);
    assert_eq!(h.write_at(b"!", 20).unwrap(), 1);
    let mut b = vec![0u8; 64];
    assert_eq!(h.read_at(&mut b, 0).unwrap(), 21);
    assert_eq!(&b[..11], b"hello world");
    assert_eq!(&b[11..20], &[0u8; 9]);
    assert_eq!(h.read_at(&mut b, 100).unwrap(), 0);
    let info = h.stat().unwrap();
    assert_eq!(info.size, 21);
    assert_eq!(info.nlink, 1);
    assert!(!info.is_dir);
    assert!(info.attributes.contains(FileAttributes::ARCHIVE));
    assert!(info.last_write_time > 116_444_736_000_000_000);
    assert_eq!(info.file_id, h.file_id());
    h.set_end_of_file(5).unwrap();
    assert_eq!(h.stat().unwrap().size, 5);
    h.set_allocation(2).unwrap();
    assert_eq!(h.stat().unwrap().size, 2);
    h.set_allocation(1 << 20).unwrap();
    let info = h.stat().unwrap();
    assert_eq!(info.size, 2);
    assert!(info.allocation_size >= 1 << 20);
    h.flush().unwrap();
    assert_eq!(
        h.write_at(b"x", u64::MAX - 1).unwrap_err(),
        NtStatus::INVALID_PARAMETER
    );
    let (d, _) = s.create("", &CreateRequest::default()).unwrap();
    assert_eq!(
        d.read_at(&mut b, 0).unwrap_err(),
        NtStatus::INVALID_DEVICE_REQUEST
    );
}

#[test]
fn times_and_attributes_persist_across_shares() {
    let (_t, dir, s) = setup(ShareOptions::default());
    let (h, _) = s.create("f", &req(Disposition::Create)).unwrap();
    let created = h.stat().unwrap().creation_time;
    assert!(created > 0);
    let ct = 130_000_000_000_000_000u64; // 2012
    let wt = 131_000_000_000_000_100u64;
    let at = 132_000_000_000_000_000u64;
    h.set_basic(&BasicInfo {
        creation: Some(ct),
        last_write: Some(wt),
        last_access: Some(at),
        change: Some(1),
        attributes: Some(FileAttributes::HIDDEN | FileAttributes::SYSTEM),
    })
    .unwrap();
    drop(h);
    drop(s);
    let s2 = Share::open(&dir, ShareOptions::default()).unwrap();
    let info = s2.stat("F").unwrap();
    assert_eq!(info.creation_time, ct);
    assert_eq!(info.last_write_time, wt);
    assert_eq!(info.last_access_time, at);
    assert_eq!(
        info.attributes,
        FileAttributes::HIDDEN | FileAttributes::SYSTEM
    );
    // Clearing everything reports NORMAL.
    let h = open_rw(&s2, "f");
    h.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::NORMAL),
        ..BasicInfo::default()
    })
    .unwrap();
    assert_eq!(h.stat().unwrap().attributes, FileAttributes::NORMAL);
    assert_eq!(h.stat().unwrap().creation_time, ct);
    assert_eq!(
        h.set_basic(&BasicInfo {
            attributes: Some(FileAttributes::DIRECTORY),
            ..BasicInfo::default()
        })
        .unwrap_err(),
        NtStatus::INVALID_PARAMETER
    );
    // Without stored attributes: creation defaults to min(mtime, ctime); READONLY maps to mode.
    fs::write(dir.join("plain"), b"x").unwrap();
    let ns = Share::open(
        &dir,
        ShareOptions {
            store_dos_attributes: false,
            ..ShareOptions::default()
        },
    )
    .unwrap();
    let info = ns.stat("plain").unwrap();
    assert_eq!(
        info.creation_time,
        info.last_write_time.min(info.change_time)
    );
    let h = open_rw(&ns, "plain");
    h.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::READONLY),
        ..BasicInfo::default()
    })
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(dir.join("plain"))
            .unwrap()
            .permissions()
            .mode()
            & 0o222,
        0
    );
    assert!(ns
        .stat("plain")
        .unwrap()
        .attributes
        .contains(FileAttributes::READONLY));
}

#[test]
fn read_dir_lists_dot_entries_and_children() {
    let (_t, dir, s) = setup(ShareOptions::default());
    fs::create_dir(dir.join("sub")).unwrap();
    fs::write(dir.join("sub").join("b.txt"), b"bb").unwrap();
    fs::write(dir.join("sub").join("a.txt"), b"a").unwrap();
    fs::create_dir(dir.join("sub").join("inner")).unwrap();
    let (h, _) = s
        .create(
            "SUB",
            &CreateRequest {
                directory: true,
                ..CreateRequest::default()
            },
        )
        .unwrap();
    let entries = h.read_dir().unwrap();
    let n: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(n, vec![".", "..", "a.txt", "b.txt", "inner"]);
    assert!(entries[0].info.is_dir && entries[1].info.is_dir);
    assert_eq!(entries[0].info.file_id, h.file_id());
    let root_id = s.stat("").unwrap().file_id;
    assert_eq!(entries[1].info.file_id, root_id);
    assert_eq!(entries[3].info.size, 2);
    assert!(entries[4]
        .info
        .attributes
        .contains(FileAttributes::DIRECTORY));
    // At the root ".." is the root itself.
    let (r, _) = s.create("", &CreateRequest::default()).unwrap();
    let e = r.read_dir().unwrap();
    assert_eq!(e[1].info.file_id, root_id);
    assert_eq!(names(&r), vec![".", "..", "sub"]);
    // Pattern filtering (case-insensitive), DOS wildcards included.
    let n: Vec<String> = h
        .read_dir_matching("*.TXT")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(n, vec!["a.txt", "b.txt"]);
    let n: Vec<String> = h
        .read_dir_matching("B.txt")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(n, vec!["b.txt"]);
    let n: Vec<String> = h
        .read_dir_matching("<")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(n, vec!["inner"]);
    assert!(h.read_dir_matching("nothing").unwrap().is_empty());
    // Hidden attribute shows in listings.
    let f = open_rw(&s, "sub\\a.txt");
    f.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::HIDDEN),
        ..BasicInfo::default()
    })
    .unwrap();
    let e = h.read_dir().unwrap();
    assert_eq!(e[2].info.attributes, FileAttributes::HIDDEN);
}

#[test]
fn rename_semantics() {
    let (_t, dir, s) = setup(ShareOptions::default());
    fs::write(dir.join("a"), b"A").unwrap();
    fs::write(dir.join("b"), b"B").unwrap();
    fs::create_dir(dir.join("d")).unwrap();
    let h = open_rw(&s, "a");
    assert_eq!(
        s.rename(&h, "b", false).unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        s.rename(&h, "B", false).unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        s.rename(&h, "d", true).unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        s.rename(&h, "nodir\\x", true).unwrap_err(),
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    assert_eq!(fs::read(dir.join("a")).unwrap(), b"A");
    // Replace, spelled in another case: the client's spelling wins.
    s.rename(&h, "B", true).unwrap();
    assert_eq!(h.path(), "B");
    assert!(!dir.join("a").exists() && !dir.join("b").exists());
    assert_eq!(fs::read(dir.join("B")).unwrap(), b"A");
    // Move into a directory, then a case-only rename.
    s.rename(&h, "D\\moved", false).unwrap();
    assert_eq!(h.path(), "d\\moved");
    s.rename(&h, "d\\MOVED", false).unwrap();
    assert_eq!(h.path(), "d\\MOVED");
    assert_eq!(fs::read_dir(dir.join("d")).unwrap().count(), 1);
    assert!(dir.join("d").join("MOVED").is_file());
    // The handle keeps working and delete uses the new path.
    let mut b = [0u8; 1];
    h.read_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"A");
    s.delete(&h).unwrap();
    assert!(!dir.join("d").join("MOVED").exists());
    // Directories rename too; renaming onto itself is a no-op.
    let dh = s
        .create(
            "d",
            &CreateRequest {
                want_write: true,
                ..CreateRequest::default()
            },
        )
        .unwrap()
        .0;
    s.rename(&dh, "d", false).unwrap();
    s.rename(&dh, "e", false).unwrap();
    assert!(dir.join("e").is_dir());
    // Into itself is refused.
    fs::create_dir(dir.join("e").join("child")).unwrap();
    assert!(s.rename(&dh, "e\\child\\x", false).is_err());
    // Root cannot be renamed.
    let (r, _) = s.create("", &CreateRequest::default()).unwrap();
    assert!(s.rename(&r, "x", false).is_err());
}

#[test]
fn delete_and_hardlink() {
    let (_t, dir, s) = setup(ShareOptions::default());
    fs::create_dir(dir.join("full")).unwrap();
    fs::write(dir.join("full").join("x"), b"").unwrap();
    fs::create_dir(dir.join("empty")).unwrap();
    let full = s.create("full", &CreateRequest::default()).unwrap().0;
    assert_eq!(
        s.can_delete(&full).unwrap_err(),
        NtStatus::DIRECTORY_NOT_EMPTY
    );
    assert_eq!(s.delete(&full).unwrap_err(), NtStatus::DIRECTORY_NOT_EMPTY);
    let empty = s.create("EMPTY", &CreateRequest::default()).unwrap().0;
    s.delete(&empty).unwrap();
    assert!(!dir.join("empty").exists());
    let (root, _) = s.create("", &CreateRequest::default()).unwrap();
    assert!(s.delete(&root).is_err());
    // Hard links.
    let (f, _) = s.create("orig", &req(Disposition::Create)).unwrap();
    f.write_at(b"data", 0).unwrap();
    s.hardlink(&f, "full\\link", false).unwrap();
    assert_eq!(fs::read(dir.join("full").join("link")).unwrap(), b"data");
    assert_eq!(f.stat().unwrap().nlink, 2);
    assert_eq!(
        s.hardlink(&f, "FULL\\X", false).unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    s.hardlink(&f, "full\\x", true).unwrap();
    assert_eq!(fs::read(dir.join("full").join("x")).unwrap(), b"data");
    // Deleting a file whose name now refers to another inode is refused.
    let g = open_rw(&s, "full\\link");
    fs::remove_file(dir.join("full").join("link")).unwrap();
    fs::write(dir.join("full").join("link"), b"other").unwrap();
    assert_eq!(s.delete(&g).unwrap_err(), NtStatus::OBJECT_NAME_NOT_FOUND);
    assert!(dir.join("full").join("link").exists());
}

#[test]
fn named_streams() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let (base, _) = s.create("f.txt", &req(Disposition::Create)).unwrap();
    base.write_at(b"main data", 0).unwrap();
    assert_eq!(
        s.create("f.txt:s1", &req(Disposition::Open)).unwrap_err(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    let (h, a) = s
        .create("f.txt:s1:$DATA", &req(Disposition::Create))
        .unwrap();
    assert_eq!(a, CreateAction::Created);
    assert_eq!(h.stream_name(), Some("s1"));
    h.write_at(b"stream!", 0).unwrap();
    h.write_at(b"XY", 10).unwrap();
    let mut b = [0u8; 32];
    let n = h.read_at(&mut b, 0).unwrap();
    assert_eq!(&b[..n], b"stream!\0\0\0XY");
    assert_eq!(h.stat().unwrap().size, 12);
    assert_eq!(h.read_at(&mut b, 100).unwrap(), 0);
    // The default stream is unaffected.
    let n = base.read_at(&mut b, 0).unwrap();
    assert_eq!(&b[..n], b"main data");
    // Case-insensitive stream names; collision on CREATE.
    assert_eq!(
        s.create("F.TXT:S1", &req(Disposition::Create)).unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    let (h2, a) = s.create("F.TXT:S1", &req(Disposition::Open)).unwrap();
    assert_eq!(a, CreateAction::Opened);
    assert_eq!(h2.stream_name(), Some("s1"));
    // Truncation.
    h2.set_end_of_file(3).unwrap();
    let n = h.read_at(&mut b, 0).unwrap();
    assert_eq!(&b[..n], b"str");
    // Listing.
    s.create("f.txt:second", &req(Disposition::OpenIf)).unwrap();
    let list = base.streams().unwrap();
    let names: Vec<(&str, u64)> = list.iter().map(|x| (x.name.as_str(), x.size)).collect();
    assert_eq!(
        names,
        vec![("::$DATA", 9), (":s1:$DATA", 3), (":second:$DATA", 0)]
    );
    // Overwrite empties it.
    let (_, a) = s
        .create("f.txt:s1", &req(Disposition::OverwriteIf))
        .unwrap();
    assert_eq!(a, CreateAction::Overwritten);
    assert_eq!(h.stat().unwrap().size, 0);
    // Delete.
    s.delete(&h).unwrap();
    assert_eq!(
        s.create("f.txt:s1", &req(Disposition::Open)).unwrap_err(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert!(s.stat("f.txt").is_ok());
    // A stream on a missing file creates the file.
    let (h3, a) = s.create("new.txt:ads", &req(Disposition::OpenIf)).unwrap();
    assert_eq!(a, CreateAction::Created);
    assert_eq!(s.stat("new.txt").unwrap().size, 0);
    // Over the size limit.
    assert_eq!(
        h3.write_at(b"x", stream::MAX_STREAM_SIZE as u64)
            .unwrap_err(),
        NtStatus::DISK_FULL
    );
    // Large streams either work or report DISK_FULL (file systems bound xattr values).
    let (big, _) = s.create("f.txt:big", &req(Disposition::Create)).unwrap();
    let payload: Vec<u8> = (0..60_000u32).map(|i| i as u8).collect();
    match big.write_at(&payload, 0) {
        Ok(n) => {
            assert_eq!(n, payload.len());
            let mut back = vec![0u8; 70_000];
            assert_eq!(big.read_at(&mut back, 0).unwrap(), payload.len());
            assert_eq!(&back[..payload.len()], &payload[..]);
        }
        Err(e) => {
            assert_eq!(e, NtStatus::DISK_FULL);
            assert_eq!(big.stat().unwrap().size, 0);
        }
    }
    // Streams on directories.
    s.create(
        "dir",
        &CreateRequest {
            directory: true,
            ..req(Disposition::Create)
        },
    )
    .unwrap();
    let (ds, _) = s.create("dir:meta", &req(Disposition::Create)).unwrap();
    ds.write_at(b"m", 0).unwrap();
    assert!(!ds.is_dir());
    let (d, _) = s.create("dir", &CreateRequest::default()).unwrap();
    assert_eq!(d.streams().unwrap().len(), 1);
    // Reading via a read-only handle works; writing does not.
    let (ro, _) = s.create("dir:meta", &CreateRequest::default()).unwrap();
    assert_eq!(ro.write_at(b"z", 0).unwrap_err(), NtStatus::ACCESS_DENIED);
}

#[test]
fn extended_attributes() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let (h, _) = s.create("f", &req(Disposition::Create)).unwrap();
    assert!(h.eas().unwrap().is_empty());
    h.set_ea("Author", b"me").unwrap();
    h.set_ea("Zed", &[0, 1, 2]).unwrap();
    let eas = h.eas().unwrap();
    assert_eq!(
        eas,
        vec![
            Ea {
                name: "Author".into(),
                value: b"me".to_vec()
            },
            Ea {
                name: "Zed".into(),
                value: vec![0, 1, 2]
            }
        ]
    );
    h.set_ea("Zed", b"").unwrap();
    h.set_ea("missing", b"").unwrap();
    assert_eq!(h.eas().unwrap().len(), 1);
    assert_eq!(h.set_ea("", b"x").unwrap_err(), NtStatus::INVALID_PARAMETER);
    assert_eq!(
        h.set_ea("a\u{1}", b"x").unwrap_err(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.set_ea("big", &vec![0u8; 70_000]).unwrap_err(),
        NtStatus::EA_TOO_LARGE
    );
    // Stream xattrs and the DOS record are not EAs.
    s.create("f:s", &req(Disposition::Create)).unwrap();
    assert_eq!(h.eas().unwrap().len(), 1);
}

#[test]
fn sparse_files_and_allocated_ranges() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let (h, _) = s.create("sparse", &req(Disposition::Create)).unwrap();
    const MB: u64 = 1 << 20;
    let chunk = vec![0xABu8; MB as usize];
    for i in 0..4 {
        h.write_at(&chunk, i * MB).unwrap();
    }
    h.flush().unwrap();
    assert_eq!(h.allocated_ranges(0, 4 * MB).unwrap(), vec![(0, 4 * MB)]);
    h.set_sparse(true).unwrap();
    assert!(h
        .stat()
        .unwrap()
        .attributes
        .contains(FileAttributes::SPARSE_FILE));
    h.punch_hole(MB, MB).unwrap();
    let mut b = vec![1u8; 16];
    h.read_at(&mut b, MB + 100).unwrap();
    assert_eq!(b, vec![0u8; 16]);
    assert_eq!(h.stat().unwrap().size, 4 * MB);
    let r = h.allocated_ranges(0, 4 * MB).unwrap();
    assert_eq!(r, vec![(0, MB), (2 * MB, 2 * MB)]);
    // Windowed query.
    assert_eq!(
        h.allocated_ranges(MB / 2, 2 * MB).unwrap(),
        vec![(MB / 2, MB / 2), (2 * MB, MB / 2)]
    );
    assert_eq!(h.allocated_ranges(MB, MB).unwrap(), vec![]);
    // Zeroing past EOF does not extend.
    h.punch_hole(3 * MB, 10 * MB).unwrap();
    assert_eq!(h.stat().unwrap().size, 4 * MB);
    assert_eq!(
        h.allocated_ranges(0, u64::MAX).unwrap(),
        vec![(0, MB), (2 * MB, MB)]
    );
    // Non-sparse zeroing keeps data allocated but zero.
    h.set_sparse(false).unwrap();
    assert!(!h
        .stat()
        .unwrap()
        .attributes
        .contains(FileAttributes::SPARSE_FILE));
    h.write_at(&chunk, 0).unwrap();
    h.punch_hole(0, 4096).unwrap();
    h.read_at(&mut b, 0).unwrap();
    assert_eq!(b, vec![0u8; 16]);
}

#[test]
fn fs_info_reports_volume() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let i = s.fs_info().unwrap();
    assert!(i.total_bytes > 0 && i.free_bytes <= i.total_bytes);
    assert!(i.block_size >= 512);
    assert_eq!(i.fs_name, "NTFS");
    assert!(i
        .fs_attributes
        .contains(FileSystemAttributes::FILE_NAMED_STREAMS));
    // Advertised like NTFS and Samba (the file system can search case-sensitively).
    assert!(i
        .fs_attributes
        .contains(FileSystemAttributes::FILE_CASE_SENSITIVE_SEARCH));
    assert_eq!(s.fs_info().unwrap().volume_serial, i.volume_serial);
}

#[test]
fn share_is_send_sync_and_concurrent() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Share>();
    assert_send_sync::<Handle>();
    let (_t, _dir, s) = setup(ShareOptions::default());
    let s = std::sync::Arc::new(s);
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let (h, _) = s
                    .create(&format!("t{i}"), &req(Disposition::Create))
                    .unwrap();
                for j in 0..50u64 {
                    h.write_at(&j.to_le_bytes(), j * 8).unwrap();
                }
                h.stat().unwrap().size
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 400);
    }
}

#[test]
fn allocation_hint_and_overwrite_attributes() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let r = CreateRequest {
        allocation_size: 1 << 20,
        attributes: FileAttributes::HIDDEN,
        ..req(Disposition::Create)
    };
    let (h, _) = s.create("pre", &r).unwrap();
    let i = h.stat().unwrap();
    assert_eq!(i.size, 0);
    assert!(i.allocation_size >= 1 << 20);
    assert_eq!(
        i.attributes,
        FileAttributes::HIDDEN | FileAttributes::ARCHIVE
    );
    let r = CreateRequest {
        attributes: FileAttributes::HIDDEN | FileAttributes::SYSTEM,
        ..req(Disposition::Overwrite)
    };
    let (h, _) = s.create("pre", &r).unwrap();
    assert_eq!(
        h.stat().unwrap().attributes,
        FileAttributes::HIDDEN | FileAttributes::SYSTEM | FileAttributes::ARCHIVE
    );
}

#[test]
fn access_modes_on_readonly_files_and_shares() {
    let (_t, dir, s) = setup(ShareOptions::default());
    let (h, _) = s.create("ro", &req(Disposition::Create)).unwrap();
    h.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::READONLY),
        ..BasicInfo::default()
    })
    .unwrap();
    // FILE_WRITE_ATTRIBUTES is allowed on a READONLY file, so it can be cleared.
    let wa = CreateRequest {
        want_write_attributes: true,
        ..CreateRequest::default()
    };
    let (h, _) = s.create("ro", &wa).unwrap();
    assert!(!h.is_writable() && h.can_write_attributes());
    assert_eq!(h.write_at(b"x", 0).unwrap_err(), NtStatus::ACCESS_DENIED);
    h.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::ARCHIVE),
        ..BasicInfo::default()
    })
    .unwrap();
    assert_eq!(h.stat().unwrap().attributes, FileAttributes::ARCHIVE);
    // Read-only handles cannot set attributes.
    let (r, _) = s.create("ro", &CreateRequest::default()).unwrap();
    assert_eq!(
        r.set_basic(&BasicInfo {
            last_write: Some(1),
            ..BasicInfo::default()
        })
        .unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    // MAXIMUM_ALLOWED drops data writes on READONLY files instead of failing.
    let h2 = s.create("ro", &wa).unwrap().0;
    h2.set_basic(&BasicInfo {
        attributes: Some(FileAttributes::READONLY),
        ..BasicInfo::default()
    })
    .unwrap();
    let max = wire_request(Disposition::Open, 0, 0x0200_0000);
    let (m, _) = s.create("ro", &max).unwrap();
    assert!(!m.is_writable() && m.can_write_attributes());
    // Wire access masks map to the flags.
    let gw = wire_request(Disposition::OpenIf, 0x40, 0x4000_0000);
    assert!(gw.want_write && gw.want_write_attributes && !gw.want_read && gw.non_directory);
    let rd = wire_request(Disposition::Open, 1, 0x0012_0089);
    assert!(rd.want_read && !rd.want_write && !rd.want_write_attributes && rd.directory);
    let del = wire_request(Disposition::Open, 0, 0x0001_0000);
    assert!(!del.want_write && del.want_write_attributes);
    // On a read-only share MAXIMUM_ALLOWED opens read-only; explicit writes fail.
    let ro = Share::open(
        &dir,
        ShareOptions {
            read_only: true,
            ..ShareOptions::default()
        },
    )
    .unwrap();
    let (m, _) = ro.create("ro", &max).unwrap();
    assert!(!m.is_writable() && !m.can_write_attributes());
    assert_eq!(ro.create("ro", &wa).unwrap_err(), NtStatus::ACCESS_DENIED);
}

#[test]
fn hidden_names_show_hidden_attribute() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    s.set_hidden_names(true, vec!["hidefile".into(), "*.tmp".into()]);
    let req = CreateRequest {
        disposition: Disposition::Create,
        want_write: true,
        ..CreateRequest::default()
    };
    for (name, hidden) in [
        ("hidefile", true),
        ("HideFile2", false),
        (".dot", true),
        ("a.tmp", true),
        ("plain", false),
    ] {
        let (h, _) = s.create(name, &req).unwrap();
        assert_eq!(
            h.stat()
                .unwrap()
                .attributes
                .contains(FileAttributes::HIDDEN),
            hidden,
            "{name}"
        );
    }
    let (root, _) = s.create("", &CreateRequest::default()).unwrap();
    for e in root.read_dir_matching("*").unwrap() {
        let want = matches!(e.name.as_str(), "hidefile" | ".dot" | "a.tmp");
        assert_eq!(
            e.info.attributes.contains(FileAttributes::HIDDEN),
            want,
            "{}",
            e.name
        );
    }
    for (name, want) in [("hidefile", true), ("plain", false), (".dot", true)] {
        let e = root.dir_entry(name).unwrap();
        assert_eq!(
            e.info.attributes.contains(FileAttributes::HIDDEN),
            want,
            "{name}"
        );
    }
    // Overwriting a file hidden by name needs no HIDDEN in the request.
    let (_h, _) = s
        .create(
            "hidefile",
            &CreateRequest {
                disposition: Disposition::OverwriteIf,
                want_write: true,
                ..CreateRequest::default()
            },
        )
        .unwrap();
}

#[test]
fn overwrite_and_supersede_drop_named_streams() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    let w = |d| CreateRequest {
        disposition: d,
        want_write: true,
        ..CreateRequest::default()
    };
    for d in [
        Disposition::Overwrite,
        Disposition::OverwriteIf,
        Disposition::Supersede,
    ] {
        let (h, _) = s.create("f:s1", &w(Disposition::OpenIf)).unwrap();
        h.write_at(b"x", 0).unwrap();
        drop(h);
        let (base, _) = s.create("f", &w(Disposition::Open)).unwrap();
        assert_eq!(base.streams().unwrap().len(), 2);
        let (base, _) = s.create("f", &w(d)).unwrap();
        assert_eq!(base.streams().unwrap().len(), 1, "{d:?}");
        assert_eq!(
            s.create("f:s1", &w(Disposition::Open)).unwrap_err(),
            NtStatus::OBJECT_NAME_NOT_FOUND
        );
    }
    // Opening (no truncation) keeps them.
    s.create("f:s2", &w(Disposition::OpenIf)).unwrap();
    let (base, _) = s.create("f", &w(Disposition::OpenIf)).unwrap();
    assert_eq!(base.streams().unwrap().len(), 2);
}

#[test]
fn reserved_ea_names_are_private() {
    let (_t, _dir, s) = setup(ShareOptions::default());
    s.set_reserved_ea_names(vec!["hackme".into()]);
    let (h, _) = s
        .create(
            "f",
            &CreateRequest {
                disposition: Disposition::Create,
                want_write: true,
                want_write_attributes: true,
                ..CreateRequest::default()
            },
        )
        .unwrap();
    h.set_ea("void", b"testme").unwrap();
    assert_eq!(
        h.set_ea("HackMe", b"x").unwrap_err(),
        NtStatus::ACCESS_DENIED
    );
    let names: Vec<String> = h.eas().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["void".to_string()]);
}

#[test]
fn delete_on_close_readonly_new_file_is_not_created() {
    let (_t, dir, s) = setup(ShareOptions::default());
    let r = CreateRequest {
        disposition: Disposition::Create,
        attributes: FileAttributes::READONLY,
        ..wire_request(
            Disposition::Create,
            smbx_wire::CreateOptions::FILE_DELETE_ON_CLOSE.bits(),
            0x0012_019f,
        )
    };
    assert!(r.delete_on_close);
    assert_eq!(s.create("ro", &r).unwrap_err(), NtStatus::CANNOT_DELETE);
    assert!(!dir.join("ro").exists());
    // Without delete-on-close the READONLY file is created.
    let r = CreateRequest {
        delete_on_close: false,
        ..r
    };
    let (_h, action) = s.create("ro", &r).unwrap();
    assert_eq!(action, CreateAction::Created);
    // An existing name still collides first.
    let r = CreateRequest {
        delete_on_close: true,
        ..r
    };
    assert_eq!(
        s.create("ro", &r).unwrap_err(),
        NtStatus::OBJECT_NAME_COLLISION
    );
}

/// A request built from CREATE's raw DesiredAccess and CreateOptions values.
fn wire_request(disposition: Disposition, options: u32, access: u32) -> CreateRequest {
    CreateRequest::from_wire(
        disposition,
        smbx_wire::CreateOptions(options),
        smbx_wire::AccessMask(access),
        FileAttributes::empty(),
        0,
    )
}
