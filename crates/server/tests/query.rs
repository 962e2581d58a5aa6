//! QUERY_DIRECTORY and QUERY_INFO over a real socket: enumeration cursor and flags,
//! buffer limits, file/fs/security classes and their error statuses.

mod common;

use common::*;
use smbx_wire::codec::{from_utf16le, utf16le};
use smbx_wire::query_directory::*;
use smbx_wire::query_info::*;
use smbx_wire::security_descriptor::SecurityDescriptor;
use smbx_wire::{Command, NtStatus, HEADER_SIZE};

const LIST: u32 = smbx_wire::AccessMask::FILE_LIST_DIRECTORY.bits();
const READ_EA: u32 = smbx_wire::AccessMask::FILE_READ_EA.bits();
const READ_ATTR: u32 = smbx_wire::AccessMask::FILE_READ_ATTRIBUTES.bits();
const READ_CONTROL: u32 = smbx_wire::AccessMask::READ_CONTROL.bits();
const SYNCHRONIZE: u32 = smbx_wire::AccessMask::SYNCHRONIZE.bits();

/// CREATE (FILE_OPEN) of an existing name; returns the 16-byte FileId.
async fn open(
    c: &mut Client,
    name: &str,
    access: u32,
    dir: bool,
) -> Result<smbx_wire::FileId, NtStatus> {
    let n = utf16le(name);
    let mut b = Vec::new();
    b.extend_from_slice(&57u16.to_le_bytes());
    b.push(0); // security flags
    b.push(0); // oplock
    b.extend_from_slice(&2u32.to_le_bytes()); // impersonation
    b.extend_from_slice(&[0u8; 16]); // create flags, reserved
    b.extend_from_slice(&access.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // attributes
    b.extend_from_slice(&7u32.to_le_bytes()); // share access
    b.extend_from_slice(&1u32.to_le_bytes()); // FILE_OPEN
    b.extend_from_slice(&(if dir { 1u32 } else { 0x40 }).to_le_bytes());
    b.extend_from_slice(&((HEADER_SIZE + 56) as u16).to_le_bytes());
    b.extend_from_slice(&(n.len() as u16).to_le_bytes());
    b.extend_from_slice(&[0u8; 8]); // contexts
    if n.is_empty() {
        b.push(0);
    } else {
        b.extend_from_slice(&n);
    }
    let r = c.request(Command::Create, &b).await;
    if r.status() != NtStatus::SUCCESS {
        return Err(r.status());
    }
    Ok(smbx_wire::FileId::from_bytes(
        r.body()[64..80].try_into().unwrap(),
    ))
}

async fn find(
    c: &mut Client,
    fid: smbx_wire::FileId,
    class: u8,
    flags: u8,
    pattern: &str,
    max: u32,
) -> (NtStatus, Vec<u8>) {
    let q = QueryDirectoryRequest {
        info_class: class,
        flags,
        file_index: 0,
        file_id: fid,
        pattern: pattern.into(),
        output_buffer_length: max,
    };
    let r = c.request(Command::QueryDirectory, &q.encode()).await;
    let data = if r.status().is_error() {
        Vec::new()
    } else {
        decode_output_response(&r.bytes).unwrap().to_vec()
    };
    (r.status(), data)
}

/// Names (and short names) of FileIdBothDirectoryInformation entries.
fn id_both_names(mut b: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        let next = u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize;
        let nlen = u32::from_le_bytes(b[60..64].try_into().unwrap()) as usize;
        let slen = b[68] as usize;
        let short = from_utf16le(&b[70..70 + slen]).unwrap();
        let name = from_utf16le(&b[104..104 + nlen]).unwrap();
        out.push((name, short));
        if next == 0 {
            return out;
        }
        assert_eq!(next % 8, 0);
        b = &b[next..];
    }
}

#[tokio::test]
async fn directory_enumeration() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    std::fs::create_dir(&d).unwrap();
    for n in ["b.txt", "a.txt", "Long File Name.document"] {
        std::fs::write(d.join(n), b"x").unwrap();
    }
    std::fs::create_dir(d.join("sub")).unwrap();
    let (_srv, mut c) = start_with_client(tmp.path()).await;
    let h = open(&mut c, "d", LIST | READ_ATTR | SYNCHRONIZE, true)
        .await
        .unwrap();

    let (st, data) = find(&mut c, h, 37, 0, "*", 65536).await;
    assert_eq!(st, NtStatus::SUCCESS);
    let names = id_both_names(&data);
    let plain: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        plain,
        [
            ".",
            "..",
            "Long File Name.document",
            "a.txt",
            "b.txt",
            "sub"
        ]
    );
    assert!(names[2].1.starts_with("LONGF~") && names[2].1.ends_with(".DOC"));
    assert_eq!(names[3].1, "");
    // Cursor at the end.
    assert_eq!(
        find(&mut c, h, 37, 0, "*", 65536).await.0,
        NtStatus::NO_MORE_FILES
    );
    // Restart, one entry at a time.
    let (st, data) = find(
        &mut c,
        h,
        12,
        SMB2_RESTART_SCANS | SMB2_RETURN_SINGLE_ENTRY,
        "*",
        65536,
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(u32::from_le_bytes(data[0..4].try_into().unwrap()), 0);
    assert_eq!(from_utf16le(&data[12..]).unwrap(), ".");
    // Wildcards and single-name lookups (case-insensitive).
    let (st, data) = find(&mut c, h, 12, SMB2_REOPEN, "A.TXT", 65536).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(from_utf16le(&data[12..]).unwrap(), "a.txt");
    assert_eq!(
        find(&mut c, h, 12, SMB2_RESTART_SCANS, "*.zzz", 65536)
            .await
            .0,
        NtStatus::NO_SUCH_FILE
    );
    // Buffer limits: below the fixed size, and an entry that does not fit.
    assert_eq!(
        find(&mut c, h, 1, SMB2_RESTART_SCANS, "*", 10).await.0,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    assert_eq!(
        find(&mut c, h, 1, SMB2_RESTART_SCANS, "Long*", 70).await.0,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    // Two directory entries fit in 64+2 -> 72 + 64+4.
    let (st, data) = find(&mut c, h, 1, SMB2_RESTART_SCANS, "*", 72 + 68).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(data.len(), 140);
    // Unknown class; a pattern with a path separator.
    assert_eq!(
        find(&mut c, h, 99, 0, "*", 65536).await.0,
        NtStatus::INVALID_INFO_CLASS
    );
    assert_eq!(
        find(&mut c, h, 1, 0, "a\\b", 65536).await.0,
        NtStatus::OBJECT_PATH_INVALID
    );
    // QUERY_DIRECTORY on a file; on a directory opened without LIST.
    let f = open(&mut c, "d\\a.txt", READ_ATTR, false).await.unwrap();
    assert_eq!(
        find(&mut c, f, 1, 0, "*", 65536).await.0,
        NtStatus::INVALID_PARAMETER
    );
    let h2 = open(&mut c, "d", READ_ATTR, true).await.unwrap();
    assert_eq!(
        find(&mut c, h2, 1, 0, "*", 65536).await.0,
        NtStatus::ACCESS_DENIED
    );
}

#[tokio::test]
async fn enumeration_skips_removed_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    std::fs::create_dir(&d).unwrap();
    for i in 0..20 {
        std::fs::write(d.join(format!("f{i:02}")), b"x").unwrap();
    }
    let (_srv, mut c) = start_with_client(tmp.path()).await;
    let h = open(&mut c, "d", LIST | SYNCHRONIZE, true).await.unwrap();
    let (st, _) = find(&mut c, h, 12, SMB2_RETURN_SINGLE_ENTRY, "*", 65536).await;
    assert_eq!(st, NtStatus::SUCCESS);
    for i in 0..20 {
        std::fs::remove_file(d.join(format!("f{i:02}"))).unwrap();
    }
    let (st, data) = find(&mut c, h, 12, 0, "*", 65536).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(from_utf16le(&data[12..]).unwrap(), "..");
    assert_eq!(
        find(&mut c, h, 12, 0, "*", 65536).await.0,
        NtStatus::NO_MORE_FILES
    );
}

#[tokio::test]
async fn file_fs_and_security_info() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("file.txt"), b"hello").unwrap();
    let (_srv, mut c) = start_with_client(tmp.path()).await;
    let f = open(
        &mut c,
        "file.txt",
        READ_ATTR | READ_CONTROL | READ_EA | 1,
        false,
    )
    .await
    .unwrap();

    // FileStandardInformation
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILE, 5, 0, 1000).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(d.len(), 24);
    assert_eq!(u64::from_le_bytes(d[8..16].try_into().unwrap()), 5);
    // FileAllInformation: name, length rules.
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILE, 18, 0, 1000).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(from_utf16le(&d[100..]).unwrap(), "\\file.txt");
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_FILE, 18, 0, 103).await.0,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILE, 18, 0, 106).await;
    assert_eq!((st, d.len()), (NtStatus::BUFFER_OVERFLOW, 106));
    // Streams: the default stream.
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILE, 22, 0, 1000).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(from_utf16le(&d[24..]).unwrap(), "::$DATA");
    // No EAs; unknown and set-only classes.
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_FILE, 15, 0, 1000).await.0,
        NtStatus::NO_EAS_ON_FILE
    );
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_FILE, 20, 0, 1000).await.0,
        NtStatus::INVALID_INFO_CLASS
    );
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_FILE, 200, 0, 1000)
            .await
            .0,
        NtStatus::INVALID_INFO_CLASS
    );
    // File system: attribute info names NTFS; volume below its minimum size.
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILESYSTEM, 5, 0, 1000).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(from_utf16le(&d[12..]).unwrap(), "NTFS");
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_FILESYSTEM, 1, 0, 23)
            .await
            .0,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_FILESYSTEM, 7, 0, 1000).await;
    assert_eq!((st, d.len()), (NtStatus::SUCCESS, 32));
    // Security: too small -> BUFFER_TOO_SMALL with the required size; then the SD.
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_SECURITY, 0, 7, 0).await;
    assert_eq!(st, NtStatus::BUFFER_TOO_SMALL);
    let need = u32::from_le_bytes(d[..4].try_into().unwrap());
    let (st, d) = query_info(&mut c, f, SMB2_0_INFO_SECURITY, 0, 7, need).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(d.len(), need as usize);
    let sd = SecurityDescriptor::decode(&d).unwrap();
    let uid = file_uid(tmp.path());
    assert_eq!(sd.owner.unwrap().to_string(), format!("S-1-22-1-{uid}"));
    assert!(sd.dacl.is_some());
    // SACL without ACCESS_SYSTEM_SECURITY.
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_SECURITY, 0, 8, 1000)
            .await
            .0,
        NtStatus::ACCESS_DENIED
    );
    // Access checks: no READ_ATTRIBUTES.
    let g = open(&mut c, "file.txt", 1, false).await.unwrap();
    assert_eq!(
        query_info(&mut c, g, SMB2_0_INFO_FILE, 4, 0, 1000).await.0,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        query_info(&mut c, g, SMB2_0_INFO_SECURITY, 0, 1, 1000)
            .await
            .0,
        NtStatus::ACCESS_DENIED
    );
    // Quota: not supported; unknown info type.
    assert_eq!(
        query_info(&mut c, f, SMB2_0_INFO_QUOTA, 0, 0, 1000).await.0,
        NtStatus::NOT_SUPPORTED
    );
    assert_eq!(
        query_info(&mut c, f, 9, 0, 0, 1000).await.0,
        NtStatus::INVALID_PARAMETER
    );
}

/// The owner uid of `p` (from std metadata).
fn file_uid(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p.join("file.txt")).unwrap().uid()
}
