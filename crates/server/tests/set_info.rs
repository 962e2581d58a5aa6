//! SET_INFO over a real socket: basic info, rename, disposition, EOF, EAs, access
//! checks and malformed buffers.

mod common;

use common::*;
use smbx_wire::close::CloseRequest;
use smbx_wire::create::CreateRequestBuilder;
use smbx_wire::set_info::*;
use smbx_wire::{Command, NtStatus};

const ALL: u32 = smbx_wire::AccessMask::FILE_ALL_ACCESS.bits();
const READ_ATTR: u32 = smbx_wire::AccessMask::FILE_READ_ATTRIBUTES.bits();
const DELETE: u32 = smbx_wire::AccessMask::DELETE.bits();

async fn create(c: &mut Client, name: &str, access: u32, options: u32) -> smbx_wire::FileId {
    let body = CreateRequestBuilder {
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(access),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 3, // OPEN_IF
        create_options: smbx_wire::CreateOptions(options),
        name: name.into(),
        ..Default::default()
    }
    .encode();
    let r = c.request(Command::Create, &body).await;
    assert_eq!(r.status(), NtStatus::SUCCESS, "create {name}");
    let b = r.body();
    smbx_wire::FileId::from_bytes(b[64..80].try_into().unwrap())
}

async fn close(c: &mut Client, fid: smbx_wire::FileId) -> NtStatus {
    let body = CloseRequest {
        flags: 0,
        file_id: fid,
    }
    .encode();
    c.request(Command::Close, &body).await.status()
}

async fn set(c: &mut Client, fid: smbx_wire::FileId, ty: u8, class: u8, buf: &[u8]) -> NtStatus {
    let body = SetInfoRequest {
        info_type: ty,
        info_class: class,
        additional_information: 0,
        file_id: fid,
        buffer: buf,
    }
    .encode();
    let r = c.request(Command::SetInfo, &body).await;
    if r.status() == NtStatus::SUCCESS {
        assert_eq!(r.body(), &[2, 0]);
    }
    r.status()
}

fn rename_buf(name: &str, replace: bool) -> Vec<u8> {
    FileRenameInfo {
        replace_if_exists: replace,
        root_directory: 0,
        file_name: name.into(),
    }
    .encode()
}

#[tokio::test]
async fn basic_rename_disposition_eof_eas() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let f = create(&mut c, "a.txt", ALL, 0x40).await;

    // Times and attributes.
    let t = smbx_wire::time::filetime_from_unix(1_000_000_000, 0);
    let b = FileBasicInfo::encode_raw([t, t, t, 0], 0x2);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::SUCCESS
    );
    let md = std::fs::metadata(dir.path().join("a.txt")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(md.mtime(), 1_000_000_000);
    // DIRECTORY on a file, bad negative time, short buffer.
    let b = FileBasicInfo::encode_raw([0; 4], 0x10);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::INVALID_PARAMETER
    );
    let b = FileBasicInfo::encode_raw([u64::MAX - 5, 0, 0, 0], 0);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_BASIC_INFORMATION,
            &[0; 20]
        )
        .await,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    // -1 / -2 are accepted and change nothing.
    let b = FileBasicInfo::encode_raw([0, 0, u64::MAX, 0], 0);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::SUCCESS
    );
    let b = FileBasicInfo::encode_raw([0, 0, u64::MAX - 1, 0], 0x80);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::SUCCESS
    );
    let md = std::fs::metadata(dir.path().join("a.txt")).unwrap();
    assert_eq!(md.mtime(), 1_000_000_000);

    // End of file.
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_END_OF_FILE_INFORMATION,
            &37u64.to_le_bytes()
        )
        .await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("a.txt")).unwrap().len(),
        37
    );

    // EAs: set, delete, invalid name, malformed list.
    let eas = encode_full_ea_list(&[FullEa {
        flags: 0,
        name: b"MyEa".to_vec(),
        value: b"v".to_vec(),
    }]);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_FULL_EA_INFORMATION, &eas).await,
        NtStatus::SUCCESS
    );
    let bad = encode_full_ea_list(&[FullEa {
        flags: 0,
        name: b"a*b".to_vec(),
        value: b"v".to_vec(),
    }]);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_FULL_EA_INFORMATION, &bad).await,
        NtStatus::INVALID_EA_NAME
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_FULL_EA_INFORMATION,
            &eas[..eas.len() - 1]
        )
        .await,
        NtStatus::EA_LIST_INCONSISTENT
    );

    // Mode and position; unknown class; quota.
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_MODE_INFORMATION,
            &1u32.to_le_bytes()
        )
        .await,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_MODE_INFORMATION,
            &2u32.to_le_bytes()
        )
        .await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_POSITION_INFORMATION,
            &9u64.to_le_bytes()
        )
        .await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, 18, &[0; 100]).await,
        NtStatus::INVALID_INFO_CLASS
    );
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_QUOTA, 32, &[0; 8]).await,
        NtStatus::NOT_SUPPORTED
    );

    // Rename: collision, then success.
    let g = create(&mut c, "b.txt", ALL, 0x40).await;
    assert_eq!(close(&mut c, g).await, NtStatus::SUCCESS);
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_RENAME_INFORMATION,
            &rename_buf("b.txt", false)
        )
        .await,
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_RENAME_INFORMATION,
            &rename_buf("c.txt", false)
        )
        .await,
        NtStatus::SUCCESS
    );
    assert!(dir.path().join("c.txt").exists());
    assert!(!dir.path().join("a.txt").exists());
    // Bad name length.
    let mut rb = rename_buf("d.txt", false);
    rb[16..20].copy_from_slice(&1000u32.to_le_bytes());
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_RENAME_INFORMATION, &rb).await,
        NtStatus::INVALID_PARAMETER
    );

    // Disposition: pending until the last close.
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_DISPOSITION_INFORMATION,
            &[1]
        )
        .await,
        NtStatus::SUCCESS
    );
    assert!(dir.path().join("c.txt").exists());
    assert_eq!(close(&mut c, f).await, NtStatus::SUCCESS);
    assert!(!dir.path().join("c.txt").exists());
}

/// Open.Mode keeps the CreateOptions [MS-FSA] 2.1.5.1 names (FileModeInformation
/// reports them), and an unbuffered open takes only sector-aligned positions.
#[tokio::test]
async fn open_mode_from_create_options() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let mode = |d: Vec<u8>| u32::from_le_bytes(d[..4].try_into().unwrap());
    let pos = |p: u64| p.to_le_bytes();

    // FILE_NON_DIRECTORY_FILE | FILE_NO_INTERMEDIATE_BUFFERING.
    let f = create(&mut c, "unbuffered.bin", ALL, 0x48).await;
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILE, FILE_MODE_INFORMATION, 0, 64).await;
    assert_eq!((st, mode(d)), (NtStatus::SUCCESS, 0x8));
    for (p, want) in [
        (9, NtStatus::INVALID_PARAMETER),
        (512, NtStatus::SUCCESS),
        (4096, NtStatus::SUCCESS),
    ] {
        let st = set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_POSITION_INFORMATION,
            &pos(p),
        )
        .await;
        assert_eq!(st, want, "position {p}");
    }
    // FILE_WRITE_THROUGH set by SET_INFO joins it; the unbuffered bit stays.
    let st = set(
        &mut c,
        f,
        SMB2_0_INFO_FILE,
        FILE_MODE_INFORMATION,
        &2u32.to_le_bytes(),
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    let (_, d) = query_info(&mut c, f, SMB2_0_INFO_FILE, FILE_MODE_INFORMATION, 0, 64).await;
    assert_eq!(mode(d), 0xA);
    assert_eq!(close(&mut c, f).await, NtStatus::SUCCESS);

    // FILE_NON_DIRECTORY_FILE | FILE_DELETE_ON_CLOSE; a buffered open takes any position.
    let g = create(&mut c, "doc.bin", ALL, 0x1040).await;
    let (_, d) = query_info(&mut c, g, SMB2_0_INFO_FILE, FILE_MODE_INFORMATION, 0, 64).await;
    assert_eq!(mode(d), 0x1000);
    let st = set(
        &mut c,
        g,
        SMB2_0_INFO_FILE,
        FILE_POSITION_INFORMATION,
        &pos(9),
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(close(&mut c, g).await, NtStatus::SUCCESS);
    assert!(!dir.path().join("doc.bin").exists());
}

#[tokio::test]
async fn access_checks_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ro.txt"), b"x").unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d").join("inner"), b"x").unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;

    // A read-attributes handle may not rename, delete, set times or EOF.
    let f = create(&mut c, "ro.txt", READ_ATTR, 0x40).await;
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_RENAME_INFORMATION,
            &rename_buf("x", false)
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_DISPOSITION_INFORMATION,
            &[1]
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    let b = FileBasicInfo::encode_raw([0; 4], 0x2);
    assert_eq!(
        set(&mut c, f, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(
            &mut c,
            f,
            SMB2_0_INFO_FILE,
            FILE_END_OF_FILE_INFORMATION,
            &0u64.to_le_bytes()
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(close(&mut c, f).await, NtStatus::SUCCESS);

    // Non-empty directory: DIRECTORY_NOT_EMPTY; rename with an open file below:
    // ACCESS_DENIED.
    let d = create(&mut c, "d", ALL | DELETE, 0x1).await;
    assert_eq!(
        set(
            &mut c,
            d,
            SMB2_0_INFO_FILE,
            FILE_DISPOSITION_INFORMATION,
            &[1]
        )
        .await,
        NtStatus::DIRECTORY_NOT_EMPTY
    );
    let inner = create(&mut c, "d\\inner", ALL, 0x40).await;
    assert_eq!(
        set(
            &mut c,
            d,
            SMB2_0_INFO_FILE,
            FILE_RENAME_INFORMATION,
            &rename_buf("e", false)
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(close(&mut c, inner).await, NtStatus::SUCCESS);
    assert_eq!(
        set(
            &mut c,
            d,
            SMB2_0_INFO_FILE,
            FILE_RENAME_INFORMATION,
            &rename_buf("e", false)
        )
        .await,
        NtStatus::SUCCESS
    );
    assert!(dir.path().join("e").join("inner").exists());
    // Filesystem classes cannot be set.
    assert_eq!(
        set(
            &mut c,
            d,
            SMB2_0_INFO_FILESYSTEM,
            FILE_FS_CONTROL_INFORMATION,
            &[0; 48]
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(
            &mut c,
            d,
            SMB2_0_INFO_FILESYSTEM,
            FILE_FS_CONTROL_INFORMATION,
            &[0; 8]
        )
        .await,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    // READONLY file: CANNOT_DELETE.
    let r = create(&mut c, "ro.txt", ALL, 0x40).await;
    let b = FileBasicInfo::encode_raw([0; 4], 0x1);
    assert_eq!(
        set(&mut c, r, SMB2_0_INFO_FILE, FILE_BASIC_INFORMATION, &b).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(
            &mut c,
            r,
            SMB2_0_INFO_FILE,
            FILE_DISPOSITION_INFORMATION,
            &[1]
        )
        .await,
        NtStatus::CANNOT_DELETE
    );
    // ...unless IGNORE_READONLY_ATTRIBUTE.
    let flags = FILE_DISPOSITION_DELETE | FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE;
    assert_eq!(
        set(
            &mut c,
            r,
            SMB2_0_INFO_FILE,
            FILE_DISPOSITION_INFORMATION_EX,
            &flags.to_le_bytes()
        )
        .await,
        NtStatus::SUCCESS
    );
    assert_eq!(close(&mut c, r).await, NtStatus::SUCCESS);
    assert!(!dir.path().join("ro.txt").exists());
    // A truncated request is refused, and the connection stays usable.
    let mut body = SetInfoRequest {
        info_type: 1,
        info_class: 4,
        additional_information: 0,
        file_id: d,
        buffer: &[0; 40],
    }
    .encode();
    body[4..8].copy_from_slice(&4000u32.to_le_bytes());
    assert_eq!(
        c.request(Command::SetInfo, &body).await.status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(close(&mut c, d).await, NtStatus::SUCCESS);
}
