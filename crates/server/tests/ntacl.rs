//! Stored NT security descriptors over real sockets: SET_INFO stores a DACL that
//! QUERY_INFO returns and CREATE enforces (empty DACL, NULL DACL), a SecD at CREATE,
//! and inheritance from the parent directory.

mod common;

use common::*;
use smbx_wire::create::{ctx as cname, encode_contexts, CreateRequestBuilder};
use smbx_wire::query_directory::decode_output_response;
use smbx_wire::query_info::{QueryInfoRequest, SMB2_0_INFO_SECURITY};
use smbx_wire::security_descriptor::well_known::everyone;
use smbx_wire::security_descriptor::{
    Ace, Acl, SecurityDescriptor, CONTAINER_INHERIT_ACE, OBJECT_INHERIT_ACE, SE_DACL_PRESENT,
};
use smbx_wire::set_info::{SetInfoRequest, SMB2_0_INFO_FILE};
use smbx_wire::{Command, NtStatus};

const READ_DATA: u32 = smbx_wire::AccessMask::FILE_READ_DATA.bits();
const WRITE_DATA: u32 = smbx_wire::AccessMask::FILE_WRITE_DATA.bits();
const READ_CONTROL: u32 = smbx_wire::AccessMask::READ_CONTROL.bits();
const WRITE_DAC: u32 = smbx_wire::AccessMask::WRITE_DAC.bits();
const FILE_GENERIC_READ: smbx_wire::AccessMask = smbx_wire::AccessMask::FILE_GENERIC_READ;
const DACL: u32 = 4;

/// CREATE with `disposition` (1 open, 2 create) and an optional SecD; the FileId.
async fn create(
    c: &mut Client,
    name: &str,
    access: u32,
    disposition: u32,
    dir: bool,
    sd: Option<&SecurityDescriptor>,
) -> Result<smbx_wire::FileId, NtStatus> {
    let blob = sd.map(SecurityDescriptor::encode);
    let contexts = match &blob {
        Some(b) => encode_contexts(&[(cname::SECD, b.as_slice())]),
        None => Vec::new(),
    };
    let req = CreateRequestBuilder {
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(access),
        file_attributes: smbx_wire::FileAttributes(if dir { 0x10 } else { 0x80 }),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: disposition,
        create_options: smbx_wire::CreateOptions(if dir { 1 } else { 0x40 }),
        name: name.into(),
        contexts,
        ..Default::default()
    };
    let r = c.request(Command::Create, &req.encode()).await;
    if r.status() != NtStatus::SUCCESS {
        return Err(r.status());
    }
    Ok(smbx_wire::FileId::from_bytes(
        r.body()[64..80].try_into().unwrap(),
    ))
}

async fn close(c: &mut Client, fid: smbx_wire::FileId) {
    let mut b = vec![24u8, 0, 0, 0, 0, 0, 0, 0];
    b.extend_from_slice(&fid.to_bytes());
    assert_eq!(
        c.request(Command::Close, &b).await.status(),
        NtStatus::SUCCESS
    );
}

async fn get_sd(c: &mut Client, fid: smbx_wire::FileId) -> SecurityDescriptor {
    let q = QueryInfoRequest {
        info_type: SMB2_0_INFO_SECURITY,
        info_class: 0,
        output_buffer_length: 4096,
        input: &[],
        additional_information: 7,
        flags: 0,
        file_id: fid,
    };
    let r = c.request(Command::QueryInfo, &q.encode()).await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    SecurityDescriptor::decode(decode_output_response(&r.bytes).unwrap()).unwrap()
}

/// SET_INFO of `buffer` as (`info_type`, `info_class`, AdditionalInformation); the status.
async fn set_info(
    c: &mut Client,
    fid: smbx_wire::FileId,
    info_type: u8,
    info_class: u8,
    additional_information: u32,
    buffer: &[u8],
) -> NtStatus {
    let s = SetInfoRequest {
        info_type,
        info_class,
        additional_information,
        file_id: fid,
        buffer,
    };
    c.request(Command::SetInfo, &s.encode()).await.status()
}

async fn set_dacl(c: &mut Client, fid: smbx_wire::FileId, sd: &SecurityDescriptor) {
    let st = set_info(c, fid, SMB2_0_INFO_SECURITY, 0, DACL, &sd.encode()).await;
    assert_eq!(st, NtStatus::SUCCESS);
}

/// An empty DACL denies data access but leaves the owner READ_CONTROL; a NULL DACL
/// (DACL_PRESENT without a DACL) reads back as such and allows everything.
#[tokio::test]
async fn set_info_dacl_is_stored_and_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let h = create(&mut c, "f", READ_CONTROL | WRITE_DAC, 2, false, None)
        .await
        .unwrap();
    // The POSIX-derived descriptor has a DACL.
    assert!(get_sd(&mut c, h).await.dacl.is_some());

    let empty = SecurityDescriptor {
        dacl: Some(Acl::new(vec![])),
        ..Default::default()
    };
    set_dacl(&mut c, h, &empty).await;
    let sd = get_sd(&mut c, h).await;
    assert_eq!(sd.dacl.map(|a| a.aces.len()), Some(0));
    assert!(sd.owner.is_some());
    assert_eq!(
        create(&mut c, "f", READ_DATA, 1, false, None).await,
        Err(NtStatus::ACCESS_DENIED)
    );
    let rc = create(&mut c, "f", READ_CONTROL, 1, false, None)
        .await
        .unwrap();
    close(&mut c, rc).await;

    let null = SecurityDescriptor {
        control: SE_DACL_PRESENT,
        ..Default::default()
    };
    set_dacl(&mut c, h, &null).await;
    let sd = get_sd(&mut c, h).await;
    assert_ne!(sd.control & SE_DACL_PRESENT, 0);
    assert_eq!(sd.dacl, None);
    let rw = create(&mut c, "f", READ_DATA | WRITE_DATA, 1, false, None)
        .await
        .unwrap();
    close(&mut c, rw).await;
    close(&mut c, h).await;
}

/// A SecD at CREATE is stored as given; a new file in the directory inherits its
/// OBJECT_INHERIT ACE (not marked INHERITED: no auto-inheritance) and is
/// access-checked against it.
#[tokio::test]
async fn create_secd_and_inheritance() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let ace = Ace::allow(
        everyone(),
        FILE_GENERIC_READ,
        OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
    );
    let secd = SecurityDescriptor {
        control: SE_DACL_PRESENT,
        dacl: Some(Acl::new(vec![ace.clone()])),
        ..Default::default()
    };
    let d = create(&mut c, "d", READ_CONTROL, 2, true, Some(&secd))
        .await
        .unwrap();
    assert_eq!(get_sd(&mut c, d).await.dacl.unwrap().aces, vec![ace]);
    close(&mut c, d).await;

    let f = create(&mut c, "d\\f", READ_CONTROL, 2, false, None)
        .await
        .unwrap();
    assert_eq!(
        get_sd(&mut c, f).await.dacl.unwrap().aces,
        vec![Ace::allow(everyone(), FILE_GENERIC_READ, 0)]
    );
    close(&mut c, f).await;
    let r = create(&mut c, "d\\f", READ_DATA, 1, false, None)
        .await
        .unwrap();
    close(&mut c, r).await;
    assert_eq!(
        create(&mut c, "d\\f", WRITE_DATA, 1, false, None).await,
        Err(NtStatus::ACCESS_DENIED)
    );
}

/// SET_INFO of an owner or group as a session: `info` 1 owner, 2 group.
async fn set_owner(
    c: &mut Client,
    fid: smbx_wire::FileId,
    info: u32,
    sd: &SecurityDescriptor,
) -> NtStatus {
    set_info(c, fid, SMB2_0_INFO_SECURITY, 0, info, &sd.encode()).await
}

/// Giving a file to another Unix user or group needs `admin users`: a user may set
/// only SIDs of its own token or the current owner (issue 10, item 6).
#[tokio::test]
async fn owner_change_needs_the_sid_in_the_token_or_admin() {
    use smbx_wire::security_descriptor::well_known::{unix_group, unix_user};
    use std::os::unix::fs::MetadataExt;
    const WRITE_OWNER: u32 = smbx_wire::AccessMask::WRITE_OWNER.bits();
    let dir = tempfile::tempdir().unwrap();
    for admin in [false, true] {
        let mut cfg = test_config(dir.path());
        if admin {
            cfg.shares[0].admin_users = vec!["user".into()];
        }
        let srv = start(cfg).await;
        let mut c = connect_share(&srv).await;
        let name = format!("owned-{admin}");
        let h = create(&mut c, &name, READ_CONTROL | WRITE_OWNER, 2, false, None)
            .await
            .unwrap();
        let meta = std::fs::metadata(dir.path().join(&name)).unwrap();
        // The current owner may always be set again.
        let same = SecurityDescriptor {
            owner: Some(unix_user(meta.uid())),
            ..Default::default()
        };
        assert_eq!(set_owner(&mut c, h, 1, &same).await, NtStatus::SUCCESS);
        let other = SecurityDescriptor {
            owner: Some(unix_user(12345)),
            group: Some(unix_group(23456)),
            ..Default::default()
        };
        let (owner, group) = (
            set_owner(&mut c, h, 1, &other).await,
            set_owner(&mut c, h, 2, &other).await,
        );
        let meta = std::fs::metadata(dir.path().join(&name)).unwrap();
        if admin {
            assert_eq!((owner, group), (NtStatus::SUCCESS, NtStatus::SUCCESS));
            assert_eq!((meta.uid(), meta.gid()), (12345, 23456));
        } else {
            assert_eq!(
                (owner, group),
                (NtStatus::INVALID_OWNER, NtStatus::INVALID_PRIMARY_GROUP)
            );
            assert_ne!(meta.uid(), 12345);
            assert_ne!(meta.gid(), 23456);
        }
        close(&mut c, h).await;
    }
}

/// SET_INFO FileRenameInformation (10) or FileLinkInformation (11) with
/// ReplaceIfExists.
async fn replace_by(c: &mut Client, fid: smbx_wire::FileId, class: u8, target: &str) -> NtStatus {
    let info = smbx_wire::set_info::FileRenameInfo {
        replace_if_exists: true,
        root_directory: 0,
        file_name: target.into(),
    }
    .encode();
    set_info(c, fid, SMB2_0_INFO_FILE, class, 0, &info).await
}

/// Rename and hard link over an existing file apply the checks of deleting it
/// ([MS-FSA] 2.1.5.14.6, 2.1.5.14.11; issue 10, item 5): a target whose descriptor
/// (and parent's) does not grant this caller DELETE, a READONLY target, an open
/// target and a directory are all refused with ACCESS_DENIED and left in place.
#[tokio::test]
async fn replacing_a_file_needs_the_right_to_delete_it() {
    const DELETE: u32 = smbx_wire::AccessMask::DELETE.bits();
    const LIST_ADD: u32 = smbx_wire::AccessMask::FILE_LIST_DIRECTORY
        .union(smbx_wire::AccessMask::FILE_ADD_FILE)
        .union(smbx_wire::AccessMask::FILE_ADD_SUBDIRECTORY)
        .union(smbx_wire::AccessMask::FILE_TRAVERSE)
        .union(smbx_wire::AccessMask::FILE_READ_ATTRIBUTES)
        .bits();
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let d = create(&mut c, "d", READ_CONTROL | WRITE_DAC, 2, true, None)
        .await
        .unwrap();
    let victim = create(
        &mut c,
        "d\\victim",
        READ_CONTROL | WRITE_DAC,
        2,
        false,
        None,
    )
    .await
    .unwrap();
    let src = create(&mut c, "d\\src", DELETE | READ_CONTROL, 2, false, None)
        .await
        .unwrap();
    let allow = |mask: u32| SecurityDescriptor {
        control: SE_DACL_PRESENT,
        dacl: Some(Acl::new(vec![Ace::allow(
            everyone(),
            smbx_wire::AccessMask(mask),
            0,
        )])),
        ..Default::default()
    };
    // The victim grants only reading, its directory no FILE_DELETE_CHILD.
    set_dacl(&mut c, victim, &allow(FILE_GENERIC_READ.bits())).await;
    close(&mut c, victim).await;
    set_dacl(&mut c, d, &allow(LIST_ADD | READ_CONTROL | WRITE_DAC)).await;
    for class in [10u8, 11] {
        assert_eq!(
            replace_by(&mut c, src, class, "d\\victim").await,
            NtStatus::ACCESS_DENIED,
            "class {class}"
        );
    }
    assert!(dir.path().join("d/victim").exists());
    assert!(dir.path().join("d/src").exists());

    // A READONLY target, an open one and a directory are refused whatever the ACLs.
    set_dacl(&mut c, d, &allow(0x1F01FF)).await;
    std::fs::write(dir.path().join("ro"), b"keep").unwrap();
    let h = create(
        &mut c, "ro", 0x100, /* FILE_WRITE_ATTRIBUTES */
        1, false, None,
    )
    .await
    .unwrap();
    let basic = smbx_wire::set_info::FileBasicInfo::encode_raw([0; 4], 0x1);
    let st = set_info(&mut c, h, SMB2_0_INFO_FILE, 4, 0, &basic).await;
    assert_eq!(st, NtStatus::SUCCESS);
    close(&mut c, h).await;
    let held = create(&mut c, "held", READ_DATA, 2, false, None)
        .await
        .unwrap();
    let adir = create(&mut c, "adir", READ_CONTROL, 2, true, None)
        .await
        .unwrap();
    close(&mut c, adir).await;
    for target in ["ro", "held", "adir"] {
        for class in [10u8, 11] {
            assert_eq!(
                replace_by(&mut c, src, class, target).await,
                NtStatus::ACCESS_DENIED,
                "{target} class {class}"
            );
        }
    }
    assert_eq!(std::fs::read(dir.path().join("ro")).unwrap(), b"keep");
    close(&mut c, held).await;

    // Once the victim may be deleted, the rename replaces it.
    set_dacl(&mut c, d, &allow(0x1F01FF)).await;
    let v = create(&mut c, "d\\victim", WRITE_DAC, 1, false, None)
        .await
        .unwrap();
    set_dacl(&mut c, v, &allow(0x1F01FF)).await;
    close(&mut c, v).await;
    assert_eq!(
        replace_by(&mut c, src, 10, "d\\victim").await,
        NtStatus::SUCCESS
    );
    assert!(!dir.path().join("d/src").exists());
    close(&mut c, src).await;
    close(&mut c, d).await;
}
