//! CREATE, CLOSE, FLUSH, READ and WRITE over a real socket: dispositions, share modes
//! across connections, delete-on-close, access checks, create contexts, offsets and
//! malformed requests, and named pipes on IPC$.

mod common;

use common::*;
use smbx_wire::close::{CloseRequest, CloseResponse, FlushRequest, CLOSE_FLAG_POSTQUERY_ATTRIB};
use smbx_wire::create::{ctx, encode_contexts, CreateRequestBuilder, CreateResponse};
use smbx_wire::oplock::OplockLevel;
use smbx_wire::rw::{decode_write_response, ReadRequest, ReadResponse, WriteRequest};
use smbx_wire::Dialect;
use smbx_wire::{Command, NtStatus, HEADER_SIZE};

const ALL: u32 = smbx_wire::AccessMask::FILE_ALL_ACCESS.bits();
const READ: u32 = smbx_wire::AccessMask::FILE_GENERIC_READ.bits();
const MAX_ALLOWED: u32 = smbx_wire::AccessMask::MAXIMUM_ALLOWED.bits();
const DELETE: u32 = smbx_wire::AccessMask::DELETE.bits();

struct Opened {
    status: NtStatus,
    resp: Option<CreateResponse>,
}

impl Opened {
    fn fid(&self) -> (u64, u64) {
        let r = self.resp.as_ref().expect("create succeeded");
        (r.file_id.persistent, r.file_id.volatile)
    }
}

async fn create_full(c: &mut Client, b: CreateRequestBuilder) -> Opened {
    let r = c.request(Command::Create, &b.encode()).await;
    let resp = if r.status() == NtStatus::SUCCESS {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(r.body());
        Some(CreateResponse::decode(&m).unwrap())
    } else {
        None
    };
    Opened {
        status: r.status(),
        resp,
    }
}

async fn create(
    c: &mut Client,
    name: &str,
    access: u32,
    share: u32,
    disposition: u32,
    options: u32,
) -> Opened {
    create_full(
        c,
        CreateRequestBuilder {
            impersonation_level: 2,
            desired_access: smbx_wire::AccessMask(access),
            file_attributes: smbx_wire::FileAttributes(0x80),
            share_access: smbx_wire::ShareAccess(share),
            create_disposition: disposition,
            create_options: smbx_wire::CreateOptions(options),
            name: name.into(),
            ..Default::default()
        },
    )
    .await
}

async fn close(c: &mut Client, fid: (u64, u64), flags: u16) -> (NtStatus, Option<CloseResponse>) {
    let body = CloseRequest {
        flags,
        file_id: smbx_wire::FileId {
            persistent: fid.0,
            volatile: fid.1,
        },
    }
    .encode();
    let r = c.request(Command::Close, &body).await;
    let resp = (r.status() == NtStatus::SUCCESS).then(|| {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(r.body());
        CloseResponse::decode(&m).unwrap()
    });
    (r.status(), resp)
}

async fn write(c: &mut Client, fid: (u64, u64), off: u64, data: &[u8]) -> (NtStatus, u32) {
    let body = WriteRequest {
        offset: off,
        file_id: smbx_wire::FileId {
            persistent: fid.0,
            volatile: fid.1,
        },
        length: data.len() as u32,
        data,
        ..Default::default()
    }
    .encode();
    let r = c.request(Command::Write, &body).await;
    let mut m = vec![0u8; HEADER_SIZE];
    m.extend_from_slice(r.body());
    let n = if r.status() == NtStatus::SUCCESS {
        decode_write_response(&m).unwrap()
    } else {
        0
    };
    (r.status(), n)
}

async fn read(
    c: &mut Client,
    fid: (u64, u64),
    off: u64,
    len: u32,
    min: u32,
) -> (NtStatus, Vec<u8>) {
    let body = ReadRequest {
        length: len,
        offset: off,
        file_id: smbx_wire::FileId {
            persistent: fid.0,
            volatile: fid.1,
        },
        minimum_count: min,
        ..Default::default()
    }
    .encode();
    let r = c.request(Command::Read, &body).await;
    if r.status() != NtStatus::SUCCESS && r.status() != NtStatus::BUFFER_OVERFLOW {
        return (r.status(), Vec::new());
    }
    assert_eq!(r.body()[2], 0x50, "DataOffset");
    let mut m = vec![0u8; HEADER_SIZE];
    m.extend_from_slice(r.body());
    (r.status(), ReadResponse::decode(&m).unwrap().data.to_vec())
}

#[tokio::test]
async fn dispositions_and_actions() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let o = create(&mut c, "f.txt", ALL, 7, 1, 0).await; // OPEN, missing
    assert_eq!(o.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    let o = create(&mut c, "f.txt", ALL, 7, 2, 0).await; // CREATE
    assert_eq!(o.status, NtStatus::SUCCESS);
    let r = o.resp.as_ref().unwrap();
    assert_eq!(r.create_action, 2);
    assert!(
        r.file_attributes
            .contains(smbx_wire::FileAttributes::ARCHIVE),
        "ARCHIVE on new files"
    );
    let fid = o.fid();
    assert_eq!(
        write(&mut c, fid, 0, b"hello world").await,
        (NtStatus::SUCCESS, 11)
    );
    let (st, cr) = close(&mut c, fid, CLOSE_FLAG_POSTQUERY_ATTRIB).await;
    assert_eq!(st, NtStatus::SUCCESS);
    let cr = cr.unwrap();
    assert_eq!(cr.flags, CLOSE_FLAG_POSTQUERY_ATTRIB);
    assert_eq!(cr.end_of_file, 11);
    // A second close of the same id.
    assert_eq!(close(&mut c, fid, 0).await.0, NtStatus::FILE_CLOSED);

    let o = create(&mut c, "f.txt", ALL, 7, 2, 0).await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_COLLISION);
    let o = create(&mut c, "f.txt", ALL, 7, 3, 0).await; // OPEN_IF
    assert_eq!(o.resp.as_ref().unwrap().create_action, 1);
    assert_eq!(o.resp.as_ref().unwrap().end_of_file, 11);
    close(&mut c, o.fid(), 0).await;
    let o = create(&mut c, "f.txt", ALL, 7, 4, 0).await; // OVERWRITE
    assert_eq!(o.resp.as_ref().unwrap().create_action, 3);
    assert_eq!(o.resp.as_ref().unwrap().end_of_file, 0);
    close(&mut c, o.fid(), 0).await;
    let o = create(&mut c, "f.txt", ALL, 7, 0, 0).await; // SUPERSEDE
    assert_eq!(o.resp.as_ref().unwrap().create_action, 0);
    // Without POSTQUERY the close response is all zero.
    let (_, cr) = close(&mut c, o.fid(), 0).await;
    assert_eq!(cr.unwrap(), CloseResponse::default());

    // Directories.
    let o = create(&mut c, "d", ALL, 7, 2, 1).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(o
        .resp
        .as_ref()
        .unwrap()
        .file_attributes
        .contains(smbx_wire::FileAttributes::DIRECTORY));
    let d = o.fid();
    assert_eq!(
        read(&mut c, d, 0, 10, 0).await.0,
        NtStatus::INVALID_DEVICE_REQUEST
    );
    close(&mut c, d, 0).await;
    assert_eq!(
        create(&mut c, "d", ALL, 7, 1, 0x40).await.status,
        NtStatus::FILE_IS_A_DIRECTORY
    );
    assert_eq!(
        create(&mut c, "f.txt", ALL, 7, 1, 1).await.status,
        NtStatus::NOT_A_DIRECTORY
    );
    assert_eq!(
        create(&mut c, "d", ALL, 7, 1, 0x41).await.status,
        NtStatus::INVALID_PARAMETER
    );
    // Root of the share.
    let o = create(&mut c, "", READ, 7, 1, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    close(&mut c, o.fid(), 0).await;
}

#[tokio::test]
async fn request_validation() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let base = CreateRequestBuilder {
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(MAX_ALLOWED),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 5,
        name: "v.txt".into(),
        ..Default::default()
    };
    let st = |o: Opened| o.status;
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                impersonation_level: 4,
                ..base.clone()
            }
        )
        .await),
        NtStatus::BAD_IMPERSONATION_LEVEL
    );
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                create_options: smbx_wire::CreateOptions(0xF000_0000),
                ..base.clone()
            }
        )
        .await),
        NtStatus::INVALID_PARAMETER
    );
    for bit in [0x80u32, 0x2000, 0x0010_0000] {
        assert_eq!(
            st(create_full(
                &mut c,
                CreateRequestBuilder {
                    create_options: smbx_wire::CreateOptions(bit),
                    ..base.clone()
                }
            )
            .await),
            NtStatus::NOT_SUPPORTED,
            "option {bit:#x}"
        );
    }
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                file_attributes: smbx_wire::FileAttributes(0x8),
                ..base.clone()
            }
        )
        .await),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                desired_access: smbx_wire::AccessMask(0x0800_0000),
                file_attributes: smbx_wire::FileAttributes(0x8),
                ..base.clone()
            }
        )
        .await),
        NtStatus::ACCESS_DENIED,
        "access is checked before attributes"
    );
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                desired_access: smbx_wire::AccessMask(0),
                ..base.clone()
            }
        )
        .await),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                create_disposition: 6,
                ..base.clone()
            }
        )
        .await),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                share_access: smbx_wire::ShareAccess(8),
                ..base.clone()
            }
        )
        .await),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                name: "\\v.txt".into(),
                ..base.clone()
            }
        )
        .await),
        NtStatus::INVALID_PARAMETER
    );
    // DELETE_ON_CLOSE needs DELETE access.
    assert_eq!(
        st(create_full(
            &mut c,
            CreateRequestBuilder {
                desired_access: smbx_wire::AccessMask(READ),
                create_options: smbx_wire::CreateOptions(0x1000),
                ..base.clone()
            }
        )
        .await),
        NtStatus::INVALID_PARAMETER
    );
    // Create contexts: MxAc and QFid answered, TWrp refused, unknown ignored, bad names.
    let o = create_full(
        &mut c,
        CreateRequestBuilder {
            contexts: encode_contexts(&[
                (ctx::MXAC, &[]),
                (ctx::QFID, &[]),
                (b"FooO", &[]),
                (ctx::ALSI, &(1u64 << 20).to_le_bytes()),
            ]),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let resp = o.resp.as_ref().unwrap();
    assert_eq!(resp.allocation_size, 1 << 20);
    let ctxs = smbx_wire::create::parse_contexts(&resp.contexts).unwrap();
    assert_eq!(ctxs.len(), 2);
    assert_eq!(ctxs[0].name, b"MxAc");
    assert_eq!(&ctxs[0].data[4..8], &ALL.to_le_bytes());
    assert_eq!(ctxs[1].name, b"QFid");
    assert_eq!(ctxs[1].data.len(), 32);
    close(&mut c, o.fid(), 0).await;
    let o = create_full(
        &mut c,
        CreateRequestBuilder {
            contexts: encode_contexts(&[(ctx::TWRP, &[0; 8])]),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    let o = create_full(
        &mut c,
        CreateRequestBuilder {
            contexts: encode_contexts(&[(b"xx", &[])]),
            ..base.clone()
        },
    )
    .await;
    assert_eq!(o.status, NtStatus::INVALID_PARAMETER);
    // Garbage context chain offsets: the request body is truncated.
    let mut body = CreateRequestBuilder {
        contexts: encode_contexts(&[(ctx::MXAC, &[])]),
        ..base.clone()
    }
    .encode();
    let n = body.len();
    body.truncate(n - 4);
    assert_eq!(
        c.request(Command::Create, &body).await.status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[tokio::test]
async fn share_modes_across_connections_and_delete_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, mut a) = start_with_client(dir.path()).await;
    let mut b = connect_share(&srv).await;
    let o = create(&mut a, "s.txt", ALL, 1, 3, 0).await; // share READ only
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(
        create(&mut b, "s.txt", 0x2, 7, 1, 0).await.status,
        NtStatus::SHARING_VIOLATION
    );
    assert_eq!(
        create(&mut b, "s.txt", 0x1, 7, 1, 0).await.status,
        NtStatus::SUCCESS
    );
    // Attribute-only opens never conflict; overwrite is checked before truncating.
    assert_eq!(
        create(&mut b, "s.txt", 0x80, 0, 1, 0).await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(
        write(&mut a, o.fid(), 0, b"data").await.0,
        NtStatus::SUCCESS
    );
    assert_eq!(
        create(&mut b, "s.txt", ALL, 7, 5, 0).await.status,
        NtStatus::SHARING_VIOLATION
    );
    assert_eq!(std::fs::read(dir.path().join("s.txt")).unwrap(), b"data");
    close(&mut a, o.fid(), 0).await;

    // DELETE_ON_CLOSE: the file goes when the last open closes; new opens meanwhile
    // see DELETE_PENDING.
    let x = create(&mut a, "doc.txt", ALL, 7, 2, 0x1000).await;
    assert_eq!(x.status, NtStatus::SUCCESS);
    let y = create(&mut b, "doc.txt", READ, 7, 1, 0).await;
    assert_eq!(y.status, NtStatus::SUCCESS);
    close(&mut a, x.fid(), 0).await;
    assert!(dir.path().join("doc.txt").exists());
    assert_eq!(
        create(&mut a, "doc.txt", READ, 7, 1, 0).await.status,
        NtStatus::DELETE_PENDING
    );
    close(&mut b, y.fid(), 0).await;
    assert!(!dir.path().join("doc.txt").exists());

    // DELETE_ON_CLOSE on a READONLY file.
    let r = create_full(
        &mut a,
        CreateRequestBuilder {
            impersonation_level: 2,
            desired_access: smbx_wire::AccessMask(ALL),
            file_attributes: smbx_wire::FileAttributes(0x1),
            share_access: smbx_wire::ShareAccess(7),
            create_disposition: 2,
            name: "ro.txt".into(),
            ..Default::default()
        },
    )
    .await;
    close(&mut a, r.fid(), 0).await;
    assert_eq!(
        create(&mut a, "ro.txt", DELETE, 7, 1, 0x1000).await.status,
        NtStatus::CANNOT_DELETE
    );
    // Writing a READONLY file is refused; MAXIMUM_ALLOWED drops the data write rights.
    assert_eq!(
        create(&mut a, "ro.txt", ALL, 7, 1, 0).await.status,
        NtStatus::ACCESS_DENIED
    );
    let m = create(&mut a, "ro.txt", MAX_ALLOWED, 7, 1, 0).await;
    assert_eq!(m.status, NtStatus::SUCCESS);
    assert_eq!(
        write(&mut a, m.fid(), 0, b"x").await.0,
        NtStatus::ACCESS_DENIED
    );
    close(&mut a, m.fid(), 0).await;

    // A dropped connection closes its opens (and runs delete-on-close).
    let z = create(&mut b, "gone.txt", ALL, 7, 2, 0x1000).await;
    assert_eq!(z.status, NtStatus::SUCCESS);
    drop(b);
    for _ in 0..100 {
        if !dir.path().join("gone.txt").exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!dir.path().join("gone.txt").exists());
}

#[tokio::test]
async fn read_write_limits_and_access() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let o = create(&mut c, "rw.bin", ALL, 7, 5, 0).await;
    let f = o.fid();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
    // 200 KB needs a credit charge above 1 on 3.1.1: the raw client charges 1.
    assert_eq!(
        write(&mut c, f, 0, &data[..65536]).await,
        (NtStatus::SUCCESS, 65536)
    );
    assert_eq!(write(&mut c, f, 65536, &data[65536..131072]).await.1, 65536);
    assert_eq!(read(&mut c, f, 0, 65536, 0).await.1, &data[..65536]);
    let (st, tail) = read(&mut c, f, 131000, 1000, 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(tail, &data[131000..131072]);
    assert_eq!(
        read(&mut c, f, 131072, 10, 0).await.0,
        NtStatus::END_OF_FILE
    );
    assert_eq!(read(&mut c, f, 131072, 0, 0).await.0, NtStatus::SUCCESS);
    assert_eq!(read(&mut c, f, 131072, 0, 1).await.0, NtStatus::END_OF_FILE);
    assert_eq!(
        read(&mut c, f, 131000, 100, 100).await.0,
        NtStatus::END_OF_FILE
    );
    assert_eq!(
        read(&mut c, f, i64::MAX as u64, 1, 0).await.0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        read(&mut c, f, 1u64 << 63, 0, 0).await.0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        write(&mut c, f, u64::MAX, b"x").await.0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        write(&mut c, f, i64::MAX as u64, b"").await,
        (NtStatus::SUCCESS, 0)
    );
    assert_eq!(
        write(&mut c, f, 0xfff_ffff_0000, b"x").await.0,
        NtStatus::INVALID_PARAMETER
    );
    // Growing a non-sparse file to MAXFILESIZE needs more than the free space: Windows
    // allocates the skipped range (smb2.rw.invalid).
    assert_eq!(
        write(&mut c, f, 0xfff_ffff_0000 - 1, b"x").await.0,
        NtStatus::DISK_FULL
    );
    assert_eq!(
        write(&mut c, f, 0xfff_ffff_0000, b"").await,
        (NtStatus::SUCCESS, 0)
    );
    // Over the credit charge: 65537 bytes with CreditCharge 1.
    assert_eq!(
        read(&mut c, f, 0, 65537, 0).await.0,
        NtStatus::INVALID_PARAMETER
    );
    // FLUSH.
    let fl = FlushRequest {
        file_id: smbx_wire::FileId {
            persistent: f.0,
            volatile: f.1,
        },
    }
    .encode();
    assert_eq!(
        c.request(Command::Flush, &fl).await.status(),
        NtStatus::SUCCESS
    );
    close(&mut c, f, 0).await;

    // Access checks: read-only open cannot write or flush; write-only cannot read.
    let r = create(&mut c, "rw.bin", READ, 7, 1, 0).await.fid();
    assert_eq!(write(&mut c, r, 0, b"x").await.0, NtStatus::ACCESS_DENIED);
    let fl = FlushRequest {
        file_id: smbx_wire::FileId {
            persistent: r.0,
            volatile: r.1,
        },
    }
    .encode();
    assert_eq!(
        c.request(Command::Flush, &fl).await.status(),
        NtStatus::ACCESS_DENIED
    );
    close(&mut c, r, 0).await;
    let w = create(&mut c, "rw.bin", 0x2, 7, 1, 0).await.fid();
    assert_eq!(read(&mut c, w, 0, 1, 0).await.0, NtStatus::ACCESS_DENIED);
    close(&mut c, w, 0).await;

    // Bad FileId, malformed WRITE (DataOffset into the header, Length past the end).
    assert_eq!(
        read(&mut c, (1, 12345), 0, 1, 0).await.0,
        NtStatus::FILE_CLOSED
    );
    let o = create(&mut c, "rw.bin", ALL, 7, 1, 0).await.fid();
    let mut body = WriteRequest {
        file_id: smbx_wire::FileId {
            persistent: o.0,
            volatile: o.1,
        },
        data: b"abc",
        length: 3,
        ..Default::default()
    }
    .encode();
    body[2..4].copy_from_slice(&10u16.to_le_bytes());
    assert_eq!(
        c.request(Command::Write, &body).await.status(),
        NtStatus::INVALID_PARAMETER
    );
    body[2..4].copy_from_slice(&112u16.to_le_bytes());
    body[4..8].copy_from_slice(&1000u32.to_le_bytes());
    assert_eq!(
        c.request(Command::Write, &body).await.status(),
        NtStatus::INVALID_PARAMETER
    );
    close(&mut c, o, 0).await;
}

#[tokio::test]
async fn ipc_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    c.session_setup("user", "pass").await;
    assert_eq!(c.tree_connect("IPC$").await.status(), NtStatus::SUCCESS);
    assert_eq!(
        create(&mut c, "nosuchpipe", 0x12019f, 7, 1, 0).await.status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    let p = create(&mut c, "srvsvc", 0x12019f, 7, 1, 0).await;
    assert_eq!(p.status, NtStatus::SUCCESS);
    let f = p.fid();
    // Nothing written yet.
    assert_eq!(read(&mut c, f, 0, 1024, 0).await.0, NtStatus(0xC000_00D9));
    // DCE/RPC bind to srvsvc (4b324fc8-1670-01d3-1278-5a47bf6ee188 v3.0, NDR).
    let mut bind = vec![5, 0, 11, 3, 0x10, 0, 0, 0];
    bind.extend_from_slice(&72u16.to_le_bytes());
    bind.extend_from_slice(&0u16.to_le_bytes());
    bind.extend_from_slice(&1u32.to_le_bytes());
    bind.extend_from_slice(&4280u16.to_le_bytes());
    bind.extend_from_slice(&4280u16.to_le_bytes());
    bind.extend_from_slice(&0u32.to_le_bytes());
    bind.extend_from_slice(&[1, 0, 0, 0]);
    bind.extend_from_slice(&0u16.to_le_bytes());
    bind.extend_from_slice(&[1, 0]);
    bind.extend_from_slice(&[
        0xc8, 0x4f, 0x32, 0x4b, 0x70, 0x16, 0xd3, 0x01, 0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1,
        0x88,
    ]);
    bind.extend_from_slice(&3u16.to_le_bytes());
    bind.extend_from_slice(&0u16.to_le_bytes());
    bind.extend_from_slice(&[
        0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48,
        0x60,
    ]);
    bind.extend_from_slice(&2u32.to_le_bytes());
    assert_eq!(bind.len(), 72);
    assert_eq!(write(&mut c, f, 0, &bind).await, (NtStatus::SUCCESS, 72));
    // Read the bind_ack in two pieces: the first says BUFFER_OVERFLOW.
    let (st, part) = read(&mut c, f, 0, 10, 0).await;
    assert_eq!(st, NtStatus::BUFFER_OVERFLOW);
    assert_eq!(part.len(), 10);
    assert_eq!(part[2], 12, "bind_ack");
    let (st, rest) = read(&mut c, f, 0, 4096, 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    let frag_len = u16::from_le_bytes([part[8], part[9]]) as usize;
    assert_eq!(10 + rest.len(), frag_len);
    let fl = FlushRequest {
        file_id: smbx_wire::FileId {
            persistent: f.0,
            volatile: f.1,
        },
    }
    .encode();
    assert_eq!(
        c.request(Command::Flush, &fl).await.status(),
        NtStatus::SUCCESS
    );
    assert_eq!(close(&mut c, f, 0).await.0, NtStatus::SUCCESS);
}

#[tokio::test]
async fn path_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    // `..` components: OBJECT_PATH_SYNTAX_BAD (smb2.mkdir).
    let o = create(&mut c, "..\\..\\..", ALL, 7, 2, 1).await;
    assert_eq!(o.status, NtStatus::OBJECT_PATH_SYNTAX_BAD);
    let o = create(&mut c, "a\\..\\b", ALL, 7, 3, 0).await;
    assert_eq!(o.status, NtStatus::OBJECT_PATH_SYNTAX_BAD);
    // Missing parent: OBJECT_PATH_NOT_FOUND.
    let o = create(&mut c, "nodir\\x\\y", ALL, 7, 2, 1).await;
    assert_eq!(o.status, NtStatus::OBJECT_PATH_NOT_FOUND);
    let d = create(&mut c, "d", ALL, 7, 2, 1).await;
    assert_eq!(d.status, NtStatus::SUCCESS);
    close(&mut c, d.fid(), 0).await;
    // `/` separates components like `\` (as Samba; smb2.timestamps).
    let f = create(&mut c, "d/f.txt", ALL, 7, 3, 0).await;
    assert_eq!(f.status, NtStatus::SUCCESS);
    close(&mut c, f.fid(), 0).await;
    assert!(dir.path().join("d").join("f.txt").is_file());
    // A trailing backslash names a directory.
    let o = create(&mut c, "d\\f.txt\\", ALL, 7, 1, 0).await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_INVALID);
    let o = create(&mut c, "d\\new.txt\\", ALL, 7, 3, 0).await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_INVALID);
    assert!(!dir.path().join("d").join("new.txt").exists());
    let o = create(&mut c, "d\\", ALL, 7, 1, 0x40).await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_INVALID);
    let o = create(&mut c, "d\\", READ, 7, 1, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    close(&mut c, o.fid(), 0).await;
    let o = create(&mut c, "d2\\", ALL, 7, 2, 1).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    close(&mut c, o.fid(), 0).await;
    assert!(dir.path().join("d2").is_dir());
}

/// Windows write-time semantics (smb2.timestamps): a write does not move the visible
/// LastWriteTime at once; FLUSH makes the pending update happen; an open that writes
/// after that stamps its close time.
#[tokio::test]
async fn delayed_write_time() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let h1 = create(&mut c, "t.txt", ALL, 7, 2, 0).await;
    assert_eq!(h1.status, NtStatus::SUCCESS);
    let created = h1.resp.as_ref().unwrap().last_write_time;
    // Let the kernel clock move past the creation time.
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(write(&mut c, h1.fid(), 0, b"s").await.0, NtStatus::SUCCESS);
    // The mtime on disk moved; the visible LastWriteTime did not.
    let h2 = create(&mut c, "t.txt", READ, 7, 1, 0).await;
    assert_eq!(h2.resp.as_ref().unwrap().last_write_time, created);
    let fl = FlushRequest {
        file_id: smbx_wire::FileId {
            persistent: h1.fid().0,
            volatile: h1.fid().1,
        },
    }
    .encode();
    assert_eq!(
        c.request(Command::Flush, &fl).await.status(),
        NtStatus::SUCCESS
    );
    let (st, r) = close(&mut c, h2.fid(), CLOSE_FLAG_POSTQUERY_ATTRIB).await;
    assert_eq!(st, NtStatus::SUCCESS);
    let flushed = r.unwrap().last_write_time;
    assert!(flushed > created, "FLUSH updates the write time");
    // A second write through the same open changes nothing until its close...
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(write(&mut c, h1.fid(), 0, b"t").await.0, NtStatus::SUCCESS);
    let h3 = create(&mut c, "t.txt", READ, 7, 1, 0).await;
    assert_eq!(h3.resp.as_ref().unwrap().last_write_time, flushed);
    // ...which stamps the close time.
    let (_, r) = close(&mut c, h1.fid(), CLOSE_FLAG_POSTQUERY_ATTRIB).await;
    let closed = r.unwrap().last_write_time;
    assert!(closed > flushed);
    let (_, r) = close(&mut c, h3.fid(), CLOSE_FLAG_POSTQUERY_ATTRIB).await;
    assert_eq!(r.unwrap().last_write_time, closed);
    // The last close stored it on disk.
    let h4 = create(&mut c, "t.txt", READ, 7, 1, 0).await;
    assert_eq!(h4.resp.as_ref().unwrap().last_write_time, closed);
    close(&mut c, h4.fid(), 0).await;
}

/// Durable handles are granted with a batch oplock (DHnQ, DH2Q on 3.x), not without.
#[tokio::test]
async fn durable_handle_grant() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let names = |o: &Opened| -> Vec<Vec<u8>> {
        let r = o.resp.as_ref().unwrap();
        smbx_wire::create::parse_contexts(&r.contexts)
            .unwrap()
            .iter()
            .map(|x| x.name.to_vec())
            .collect()
    };
    let req = |name: &str, oplock: OplockLevel, contexts: Vec<u8>| CreateRequestBuilder {
        oplock_level: oplock,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(ALL),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 3,
        name: name.into(),
        contexts,
        ..Default::default()
    };
    // No oplock: no durable handle.
    let o = create_full(
        &mut c,
        req(
            "a",
            OplockLevel::NONE,
            encode_contexts(&[(ctx::DHNQ, &[0; 16])]),
        ),
    )
    .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(!names(&o).contains(&ctx::DHNQ.to_vec()));
    close(&mut c, o.fid(), 0).await;
    // Batch oplock: DHnQ answered.
    let o = create_full(
        &mut c,
        req(
            "b",
            OplockLevel::BATCH,
            encode_contexts(&[(ctx::DHNQ, &[0; 16])]),
        ),
    )
    .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(names(&o).contains(&ctx::DHNQ.to_vec()));
    close(&mut c, o.fid(), 0).await;
    // DH2Q: timeout 0 gets the default; the response carries it.
    let o = create_full(
        &mut c,
        req(
            "c",
            OplockLevel::BATCH,
            encode_contexts(&[(ctx::DH2Q, &[7; 32])]),
        ),
    )
    .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let r = o.resp.as_ref().unwrap();
    let cx = smbx_wire::create::parse_contexts(&r.contexts).unwrap();
    let d = cx
        .iter()
        .find(|x| x.name == ctx::DH2Q)
        .expect("DH2Q granted");
    assert_eq!(d.data.len(), 8);
    close(&mut c, o.fid(), 0).await;
    // Malformed, or both versions at once: INVALID_PARAMETER.
    let o = create_full(
        &mut c,
        req(
            "d",
            OplockLevel::BATCH,
            encode_contexts(&[(ctx::DHNQ, &[0; 3])]),
        ),
    )
    .await;
    assert_eq!(o.status, NtStatus::INVALID_PARAMETER);
    let both = encode_contexts(&[(ctx::DHNQ, &[0; 16]), (ctx::DH2Q, &[0; 32])]);
    let o = create_full(&mut c, req("e", OplockLevel::BATCH, both)).await;
    assert_eq!(o.status, NtStatus::INVALID_PARAMETER);
}

/// CREATE (open-if, full access, batch oplock) of `name` asking for a durable
/// handle (DHnQ).
fn durable_request(name: &str) -> CreateRequestBuilder {
    CreateRequestBuilder {
        oplock_level: OplockLevel::BATCH,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(ALL),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 3,
        name: name.into(),
        contexts: encode_contexts(&[(ctx::DHNQ, &[0; 16])]),
        ..Default::default()
    }
}

/// A durable open survives the loss of its connection and is reclaimed (DHnC) by the
/// same user on a new connection, keeping its FileId and oplock.
#[tokio::test]
async fn durable_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut a = connect_share(&srv).await;
    let o = create_full(&mut a, durable_request("dur.txt")).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let fid = o.fid();
    assert_eq!(write(&mut a, fid, 0, b"kept").await.0, NtStatus::SUCCESS);
    drop(a);
    let mut b = connect_share(&srv).await;
    let mut dhnc = Vec::new();
    dhnc.extend_from_slice(&fid.0.to_le_bytes());
    dhnc.extend_from_slice(&fid.1.to_le_bytes());
    let reclaim = |data: Vec<u8>| CreateRequestBuilder {
        name: "dur.txt".into(),
        contexts: encode_contexts(&[(ctx::DHNC, &data)]),
        ..Default::default()
    };
    // An unknown FileId: nothing to reclaim.
    let mut bad = dhnc.clone();
    bad[0] ^= 0xff;
    assert_eq!(
        create_full(&mut b, reclaim(bad)).await.status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    // The server notices the lost connection asynchronously: retry a little.
    let mut got = None;
    for _ in 0..100 {
        let o = create_full(&mut b, reclaim(dhnc.clone())).await;
        if o.status == NtStatus::SUCCESS {
            got = Some(o);
            break;
        }
        assert_eq!(o.status, NtStatus::OBJECT_NAME_NOT_FOUND);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let o = got.expect("durable open reclaimed");
    assert_eq!(o.fid(), fid);
    let r = o.resp.as_ref().unwrap();
    assert_eq!(r.oplock_level, OplockLevel::BATCH);
    assert_eq!(r.create_action, 1);
    let (st, data) = read(&mut b, fid, 0, 4, 0).await;
    assert_eq!((st, data.as_slice()), (NtStatus::SUCCESS, &b"kept"[..]));
    // Reclaimed once only.
    assert_eq!(close(&mut b, fid, 0).await.0, NtStatus::SUCCESS);
    assert_eq!(
        create_full(&mut b, reclaim(dhnc)).await.status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
}

/// Create replay (DH2Q CreateGuid): a replayed CREATE answers the existing open until
/// a request uses the open's FileId; after that the CreateGuid names no open any more
/// and a replay is a new CREATE, whose own open then answers replays; a CREATE with the
/// CreateGuid of a live replayable open but without the replay flag is
/// DUPLICATE_OBJECTID.
#[tokio::test]
async fn create_replay_until_the_open_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let mut dh2q = [0u8; 32];
    dh2q[16..].copy_from_slice(&[0x42; 16]);
    let body = CreateRequestBuilder {
        oplock_level: OplockLevel::NONE,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(ALL),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 3,
        name: "replay.txt".into(),
        contexts: encode_contexts(&[(ctx::DH2Q, &dh2q)]),
        ..Default::default()
    }
    .encode();
    async fn send(c: &mut Client, body: &[u8], replay: bool) -> (NtStatus, Option<(u64, u64)>) {
        let mut h = c.header(Command::Create);
        if replay {
            h.flags |= smbx_wire::header::FLAGS_REPLAY_OPERATION;
        }
        c.send_raw(&Client::message(&h, body)).await;
        let r = c.recv().await.expect("response").remove(0);
        let fid = (r.status() == NtStatus::SUCCESS).then(|| {
            let d = CreateResponse::decode(&r.bytes).unwrap();
            (d.file_id.persistent, d.file_id.volatile)
        });
        (r.status(), fid)
    }
    let (st, first) = send(&mut c, &body, false).await;
    assert_eq!(st, NtStatus::SUCCESS);
    // Replayed before any use: the same open.
    assert_eq!(send(&mut c, &body, true).await, (NtStatus::SUCCESS, first));
    assert_eq!(
        send(&mut c, &body, false).await.0,
        NtStatus::DUPLICATE_OBJECTID
    );
    // The client uses the FileId: it has the response.
    let first = first.unwrap();
    let fl = FlushRequest {
        file_id: smbx_wire::FileId {
            persistent: first.0,
            volatile: first.1,
        },
    }
    .encode();
    assert_eq!(
        c.request(Command::Flush, &fl).await.status(),
        NtStatus::SUCCESS
    );
    let (st, second) = send(&mut c, &body, true).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_ne!(second, Some(first), "a new open");
    // The new open is the one the CreateGuid names now.
    assert_eq!(
        send(&mut c, &body, false).await.0,
        NtStatus::DUPLICATE_OBJECTID
    );
    assert_eq!(send(&mut c, &body, true).await, (NtStatus::SUCCESS, second));
    close(&mut c, first, 0).await;
    close(&mut c, second.unwrap(), 0).await;
}

/// A guest's durable open can be reclaimed only by the same client (ClientGuid):
/// another guest, who can give the same name, gets ACCESS_DENIED even with the
/// right FileId (issue 10).
#[tokio::test]
async fn guest_durable_open_is_bound_to_its_client() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.global.map_to_guest = smbx_config::MapToGuest::BadUser;
    cfg.shares[0].guest_ok = true;
    let srv = start(cfg).await;
    let guest = |guid: u8| {
        let addr = srv.addr;
        async move {
            let mut c = Client::connect(addr).await;
            c.client_guid = [guid; 16];
            c.negotiate(&[smbx_wire::Dialect::SMB3_1_1]).await;
            assert_eq!(
                c.session_setup("nobody-here", "x").await.status(),
                NtStatus::SUCCESS
            );
            assert_eq!(c.tree_connect("share").await.status(), NtStatus::SUCCESS);
            c
        }
    };
    let mut a = guest(0xA1).await;
    let o = create_full(&mut a, durable_request("g.txt")).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let fid = o.fid();
    drop(a);
    let mut dhnc = fid.0.to_le_bytes().to_vec();
    dhnc.extend_from_slice(&fid.1.to_le_bytes());
    let reclaim = || CreateRequestBuilder {
        name: "g.txt".into(),
        contexts: encode_contexts(&[(ctx::DHNC, &dhnc)]),
        ..Default::default()
    };
    // Another guest client: refused once the open is disconnected.
    let mut other = guest(0xB2).await;
    let mut refused = false;
    for _ in 0..100 {
        match create_full(&mut other, reclaim()).await.status {
            NtStatus::ACCESS_DENIED => {
                refused = true;
                break;
            }
            st => assert_eq!(st, NtStatus::OBJECT_NAME_NOT_FOUND),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(refused, "another guest was not refused");
    // The same client reclaims it.
    let mut same = guest(0xA1).await;
    let o = create_full(&mut same, reclaim()).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(o.fid(), fid);
}

/// Reads whose data is in the page cache go from the file to the socket after
/// the response (unsigned), or are read in (signed): the same bytes either way,
/// short at the end of the file, END_OF_FILE past it or below MinimumCount, and
/// a file that shrank after the READ was answered still yields a whole frame.
#[tokio::test]
async fn reads_from_the_page_cache_at_the_edges() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..200 * 1024u32).map(|i| (i * 31 + 7) as u8).collect();
    std::fs::write(dir.path().join("big"), &data).unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let o = create(&mut c, "big", ALL, 7, 1, 0).await;
    let fid = o.fid();
    for (off, len, want) in [
        (0u64, 65536u32, 0..65536usize),
        (4097, 65536, 4097..69_633),
        (190 * 1024, 65536, 190 * 1024..200 * 1024),
        (20_000, 20_000, 20_000..40_000),
    ] {
        let (st, got) = read(&mut c, fid, off, len, 0).await;
        assert_eq!(st, NtStatus::SUCCESS, "{off}+{len}");
        assert!(got == data[want.clone()], "{off}+{len}: wrong data");
        // Signed: the response carries the data itself, and the same bytes.
        let body = ReadRequest {
            length: len,
            offset: off,
            file_id: smbx_wire::FileId {
                persistent: fid.0,
                volatile: fid.1,
            },
            ..Default::default()
        }
        .encode();
        let r = c.request_signed(Command::Read, &body).await;
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(r.body());
        assert!(
            ReadResponse::decode(&m).unwrap().data == &data[want],
            "signed {off}+{len}"
        );
    }
    // Past the end, and less than MinimumCount left.
    assert_eq!(
        read(&mut c, fid, 200 * 1024, 65536, 0).await.0,
        NtStatus::END_OF_FILE
    );
    assert_eq!(
        read(&mut c, fid, 190 * 1024, 65536, 20 * 1024).await.0,
        NtStatus::END_OF_FILE
    );
    // Many READs in flight while the file is cut short: every response is a
    // whole, well-formed frame (what was cut off reads as zeros or is not
    // there), and the connection keeps working.
    let mut mids = Vec::new();
    for i in 0..32u64 {
        let body = ReadRequest {
            length: 65536,
            offset: (i % 3) * 65536,
            file_id: smbx_wire::FileId {
                persistent: fid.0,
                volatile: fid.1,
            },
            ..Default::default()
        }
        .encode();
        let h = c.header(Command::Read);
        mids.push(h.message_id);
        c.send_raw(&Client::message(&h, &body)).await;
        if i == 8 {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path().join("big"))
                .unwrap()
                .set_len(70_000)
                .unwrap();
        }
    }
    let mut seen = 0;
    while seen < mids.len() {
        for m in c.recv().await.expect("connection closed") {
            assert!(mids.contains(&m.header.message_id));
            if m.status() == NtStatus::SUCCESS {
                let mut b = vec![0u8; HEADER_SIZE];
                b.extend_from_slice(m.body());
                let d = ReadResponse::decode(&b).unwrap().data;
                assert!(d.len() <= 65536);
            } else {
                assert_eq!(m.status(), NtStatus::END_OF_FILE);
            }
            seen += 1;
        }
    }
    let (st, got) = read(&mut c, fid, 0, 65536, 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert!(got == data[..65536]);
}

/// READs below the size sent from the file are read in place (the read loop's first
/// poll, with a read that never waits for the disk) or, when their data is not in the
/// page cache, on a task of their own: either way the right bytes, short at the end of
/// the file, END_OF_FILE past it or below MinimumCount, what another opener wrote or cut
/// off since the last READ, and in-flight WRITEs and READs of one connection all
/// answered.
#[tokio::test]
async fn small_reads_in_place_at_the_edges() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small");
    let mut data: Vec<u8> = (0..100_000u32).map(|i| (i * 13 + 5) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let o = create(&mut c, "small", ALL, 7, 1, 0).await;
    let fid = o.fid();
    for (off, len, want) in [
        (0u64, 4096u32, 0..4096usize),
        (4095, 8192, 4095..12_287),
        (96_000, 8192, 96_000..100_000),
        (99_999, 1, 99_999..100_000),
    ] {
        let (st, got) = read(&mut c, fid, off, len, 0).await;
        assert_eq!(st, NtStatus::SUCCESS, "{off}+{len}");
        assert!(got == data[want], "{off}+{len}: wrong data");
    }
    assert_eq!(
        read(&mut c, fid, 100_000, 4096, 0).await.0,
        NtStatus::END_OF_FILE
    );
    assert_eq!(
        read(&mut c, fid, 96_000, 8192, 5_000).await.0,
        NtStatus::END_OF_FILE
    );
    // Another opener rewrites a range and then cuts the file short: the next READs see both.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0xAB; 4096], 8192).unwrap();
    data[8192..12_288].fill(0xAB);
    let (st, got) = read(&mut c, fid, 6144, 8192, 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert!(got == data[6144..14_336], "another opener's write not seen");
    f.set_len(50_000).unwrap();
    let (st, got) = read(&mut c, fid, 45_056, 8192, 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert!(got == data[45_056..50_000], "the cut not seen");
    assert_eq!(
        read(&mut c, fid, 50_000, 8192, 0).await.0,
        NtStatus::END_OF_FILE
    );
    // Out of the page cache (where the file system drops clean pages): read all the same.
    f.sync_all().unwrap();
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let (st, got) = read(&mut c, fid, 20_480, 8192, 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert!(got == data[20_480..28_672], "uncached read");
    // 32 requests in flight, WRITEs between READs of other ranges: all answered, the
    // READs with the file's bytes.
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for i in 0..32u64 {
        let h = c.header(if i % 3 == 2 {
            Command::Write
        } else {
            Command::Read
        });
        let fid = smbx_wire::FileId {
            persistent: fid.0,
            volatile: fid.1,
        };
        let body = if i % 3 == 2 {
            writes.push(h.message_id);
            WriteRequest {
                offset: 60_000 + i * 100,
                file_id: fid,
                length: 100,
                data: &[i as u8; 100],
                ..Default::default()
            }
            .encode()
        } else {
            reads.push((h.message_id, (i % 6) * 8192));
            ReadRequest {
                length: 8192,
                offset: (i % 6) * 8192,
                file_id: fid,
                ..Default::default()
            }
            .encode()
        };
        c.send_raw(&Client::message(&h, &body)).await;
    }
    let mut seen = 0;
    while seen < 32 {
        for m in c.recv().await.expect("connection closed") {
            assert_eq!(m.status(), NtStatus::SUCCESS);
            if let Some(&(_, off)) = reads.iter().find(|(id, _)| *id == m.header.message_id) {
                let mut b = vec![0u8; HEADER_SIZE];
                b.extend_from_slice(m.body());
                let d = ReadResponse::decode(&b).unwrap().data;
                let off = off as usize;
                assert!(d == &data[off..off + 8192], "READ at {off}");
            } else {
                assert!(writes.contains(&m.header.message_id));
            }
            seen += 1;
        }
    }
}
