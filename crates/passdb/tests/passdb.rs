use std::os::unix::fs::PermissionsExt;

use smbx_passdb::{nt_hash, PassDb, SharedPassDb};

#[test]
fn nt_hash_matches_ms_nlmp_vector() {
    // [MS-NLMP] 4.2.2.1.2: NTOWFv1("Password")
    assert_eq!(
        hex::encode(nt_hash("Password")),
        "a4f49c406510bdcab6824ee7c30fd852"
    );
    // empty password: well-known value
    assert_eq!(hex::encode(nt_hash("")), "31d6cfe0d16ae931b73c59d7e0c089c0");
}

#[test]
fn parses_a_samba_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smbpasswd");
    let text = "\
# written by smbpasswd -a
alice:1000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[U          ]:LCT-65A1B2C3:
Bob:1001:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:31D6CFE0D16AE931B73C59D7E0C089C0:[DU         ]:LCT-65A1B2C4:
nopass:1002:NO PASSWORDXXXXXXXXXXXXXXXXXXXXX:NO PASSWORDXXXXXXXXXXXXXXXXXXXXX:[NU         ]:LCT-00000000:
";
    std::fs::write(&path, text).unwrap();
    let db = PassDb::open(&path).unwrap();
    assert!(db.warnings().is_empty(), "{:?}", db.warnings());
    let a = db.lookup("ALICE").unwrap();
    assert_eq!(a.user, "alice");
    assert_eq!(a.uid, 1000);
    assert_eq!(a.nt_hash, nt_hash("Password"));
    assert!(!a.disabled);
    assert_eq!(a.last_change, 0x65A1B2C3);
    let b = db.lookup("bob").unwrap();
    assert!(b.disabled);
    assert_eq!(b.flags, "DU");
    let n = db.lookup("nopass").unwrap();
    assert!(!n.has_password);
    assert_eq!(db.list().len(), 3);
    // untouched entries are written back byte for byte
    assert_eq!(db.to_text(), text);

    let shared = SharedPassDb::open(&path).unwrap();
    assert_eq!(shared.nt_hash("Alice"), Some(nt_hash("Password")));
    assert_eq!(shared.nt_hash("bob"), None, "disabled");
    assert_eq!(shared.nt_hash("nopass"), None, "no hash stored");
    assert_eq!(shared.nt_hash("carol"), None);
}

#[test]
fn malformed_lines_are_reported_with_line_numbers_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smbpasswd");
    let text = "\
ok:1:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[U          ]:LCT-00000001:
garbage line
bad:x:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:A4F49C406510BDCAB6824EE7C30FD852:[U          ]:LCT-00000001:
";
    std::fs::write(&path, text).unwrap();
    let mut db = PassDb::open(&path).unwrap();
    let w = db.warnings().to_vec();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("smbpasswd:2:"), "{w:?}");
    assert!(
        w[1].contains("smbpasswd:3:") && w[1].contains("uid"),
        "{w:?}"
    );
    assert!(db.lookup("ok").is_some());
    assert!(db.lookup("bad").is_none());
    db.add_or_update("new", "pw").unwrap();
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.contains("garbage line\n"), "{after}");
}

#[test]
fn add_update_remove_and_file_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/dir/smbpasswd");
    let mut db = PassDb::open(&path).unwrap();
    assert!(db.list().is_empty());
    db.add_or_update("carol", "secret").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dmode = std::fs::metadata(path.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dmode, 0o700);

    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().next().unwrap();
    assert!(line.starts_with("carol:"), "{line}");
    assert!(
        line.contains(":XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:"),
        "no LM hash stored: {line}"
    );
    assert!(
        line.contains(&hex::encode_upper(nt_hash("secret"))),
        "{line}"
    );
    assert!(line.contains(":[U          ]:LCT-"), "{line}");
    assert!(line.ends_with(':'));

    let reopened = PassDb::open(&path).unwrap();
    let e = reopened.lookup("CAROL").unwrap();
    assert_eq!(e.nt_hash, nt_hash("secret"));
    assert!(e.last_change > 0);

    db.add_or_update("Carol", "other").unwrap();
    let db2 = PassDb::open(&path).unwrap();
    assert_eq!(db2.list().len(), 1);
    assert_eq!(db2.lookup("carol").unwrap().nt_hash, nt_hash("other"));
    assert_eq!(db2.lookup("carol").unwrap().user, "carol", "name kept");

    assert!(db.set_disabled("carol", true).unwrap());
    assert!(
        PassDb::open(&path)
            .unwrap()
            .lookup("carol")
            .unwrap()
            .disabled
    );

    assert!(db.remove("CAROL").unwrap());
    assert!(!db.remove("carol").unwrap());
    assert!(PassDb::open(&path).unwrap().list().is_empty());
}

#[test]
fn bad_user_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = PassDb::open(&dir.path().join("p")).unwrap();
    for bad in ["", "a:b", "x\ny", " lead", "#c"] {
        assert!(db.add_or_update(bad, "pw").is_err(), "{bad:?}");
    }
}

#[test]
fn shared_db_follows_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smbpasswd");
    let shared = SharedPassDb::open(&path).unwrap();
    assert_eq!(shared.nt_hash("dave"), None);
    let mut db = PassDb::open(&path).unwrap();
    db.add_or_update("dave", "one").unwrap();
    assert_eq!(shared.nt_hash("dave"), Some(nt_hash("one")));
    db.add_or_update("dave", "two").unwrap();
    assert_eq!(shared.nt_hash("DAVE"), Some(nt_hash("two")));
    db.set_disabled("dave", true).unwrap();
    assert_eq!(shared.nt_hash("dave"), None);
}

#[test]
fn shared_db_is_a_credential_store() {
    use smbx_security::auth::CredentialStore;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smbpasswd");
    PassDb::open(&path)
        .unwrap()
        .add_or_update("erin", "Password")
        .unwrap();
    let store: Arc<dyn CredentialStore> = Arc::new(SharedPassDb::open(&path).unwrap());
    assert_eq!(store.nt_hash("ERIN"), Some(nt_hash("Password")));
    assert_eq!(store.nt_hash("nobody"), None);
}
