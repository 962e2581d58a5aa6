//! IOCTL over a real socket: server-side copy, sparse files, network interfaces,
//! pipe transceive, and hostile requests.

mod common;

use common::*;
use smbx_wire::create::CreateRequestBuilder;
use smbx_wire::ioctl::*;
use smbx_wire::Dialect;
use smbx_wire::{Command, NtStatus, HEADER_SIZE};

const ALL: u32 = smbx_wire::AccessMask::FILE_ALL_ACCESS.bits();
const READ_DATA: u32 = smbx_wire::AccessMask::FILE_READ_DATA.bits();
const READ_ATTR: u32 = smbx_wire::AccessMask::FILE_READ_ATTRIBUTES.bits();

async fn create(c: &mut Client, name: &str, access: u32) -> (u64, u64) {
    let body = CreateRequestBuilder {
        oplock_level: smbx_wire::oplock::OplockLevel::NONE,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(access),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 3, // OPEN_IF
        create_options: smbx_wire::CreateOptions(0x40),
        name: name.into(),
        contexts: Vec::new(),
    }
    .encode();
    let r = c.request(Command::Create, &body).await;
    assert_eq!(r.status(), NtStatus::SUCCESS, "create {name}");
    let b = r.body();
    let p = u64::from_le_bytes(b[64..72].try_into().unwrap());
    let v = u64::from_le_bytes(b[72..80].try_into().unwrap());
    (p, v)
}

async fn ioctl(
    c: &mut Client,
    code: u32,
    fid: (u64, u64),
    input: &[u8],
    max_out: u32,
) -> (NtStatus, Vec<u8>) {
    let body = IoctlRequest {
        ctl_code: code,
        file_id: smbx_wire::FileId {
            persistent: fid.0,
            volatile: fid.1,
        },
        input,
        max_input_response: 0,
        output: &[],
        max_output_response: max_out,
        flags: SMB2_0_IOCTL_IS_FSCTL,
    }
    .encode();
    let r = c.request(Command::Ioctl, &body).await;
    let out = IoctlResponse::decode(&r.bytes)
        .map(|x| x.output)
        .unwrap_or_default();
    (r.status(), out)
}

const NO_FILE: (u64, u64) = (u64::MAX, u64::MAX);

#[tokio::test]
async fn copychunk_copies_and_enforces_rules() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
    std::fs::write(dir.path().join("src"), &data).unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let src = create(&mut c, "src", ALL).await;
    let dst = create(&mut c, "dst", ALL).await;

    let (st, key) = ioctl(&mut c, fsctl::SRV_REQUEST_RESUME_KEY, src, &[], 32).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(key.len(), 32);
    let source_key: [u8; 24] = key[..24].try_into().unwrap();
    let cc = |chunks: Vec<Chunk>| {
        CopychunkCopy {
            source_key,
            chunk_count: chunks.len() as u32,
            chunks,
        }
        .encode()
    };
    let chunk = |s: u64, t: u64, l: u32| Chunk {
        source_offset: s,
        target_offset: t,
        length: l,
    };

    // Two chunks, the second appending.
    let (st, out) = ioctl(
        &mut c,
        fsctl::SRV_COPYCHUNK,
        dst,
        &cc(vec![chunk(0, 0, 4096), chunk(4096, 4096, 4096)]),
        12,
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    let r = CopychunkResponse::decode(&out).unwrap();
    assert_eq!((r.chunks_written, r.total_bytes_written), (2, 8192));
    assert_eq!(std::fs::read(dir.path().join("dst")).unwrap(), data);

    // Over the limits: INVALID_PARAMETER carrying the limits.
    let (st, out) = ioctl(
        &mut c,
        fsctl::SRV_COPYCHUNK,
        dst,
        &cc(vec![chunk(0, 0, u32::MAX)]),
        12,
    )
    .await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    let r = CopychunkResponse::decode(&out).unwrap();
    assert_eq!(
        (
            r.chunks_written,
            r.chunk_bytes_written,
            r.total_bytes_written
        ),
        (256, 1 << 20, 16 << 20)
    );
    // Zero-length chunk.
    let (st, _) = ioctl(
        &mut c,
        fsctl::SRV_COPYCHUNK,
        dst,
        &cc(vec![chunk(0, 0, 0)]),
        12,
    )
    .await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    // Past the source's end: the first chunk still lands.
    let (st, out) = ioctl(
        &mut c,
        fsctl::SRV_COPYCHUNK,
        dst,
        &cc(vec![chunk(0, 0, 10), chunk(8000, 0, 4096)]),
        12,
    )
    .await;
    assert_eq!(st, NtStatus::INVALID_VIEW_SIZE);
    assert_eq!(CopychunkResponse::decode(&out).unwrap().chunks_written, 1);
    // Output room below 12 bytes.
    let (st, _) = ioctl(
        &mut c,
        fsctl::SRV_COPYCHUNK,
        dst,
        &cc(vec![chunk(0, 0, 1)]),
        11,
    )
    .await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    // A forged key.
    let mut bad = cc(vec![chunk(0, 0, 1)]);
    bad[..24].copy_from_slice(b"deadbeefdeadbeefdeadbeef");
    let (st, _) = ioctl(&mut c, fsctl::SRV_COPYCHUNK, dst, &bad, 12).await;
    assert_eq!(st, NtStatus::OBJECT_NAME_NOT_FOUND);
    // ChunkCount larger than the buffer.
    let mut lying = cc(vec![chunk(0, 0, 1)]);
    lying[24..28].copy_from_slice(&5u32.to_le_bytes());
    let (st, _) = ioctl(&mut c, fsctl::SRV_COPYCHUNK, dst, &lying, 12).await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    // Target without READ_DATA: COPYCHUNK refused, COPYCHUNK_WRITE allowed.
    let wo = create(&mut c, "dst", 0x2 | READ_ATTR).await;
    let req = cc(vec![chunk(0, 0, 100)]);
    let (st, _) = ioctl(&mut c, fsctl::SRV_COPYCHUNK, wo, &req, 12).await;
    assert_eq!(st, NtStatus::ACCESS_DENIED);
    let (st, _) = ioctl(&mut c, fsctl::SRV_COPYCHUNK_WRITE, wo, &req, 12).await;
    assert_eq!(st, NtStatus::SUCCESS);
    // Source without READ_DATA/EXECUTE.
    let nr = create(&mut c, "src", READ_ATTR).await;
    let (_, key2) = ioctl(&mut c, fsctl::SRV_REQUEST_RESUME_KEY, nr, &[], 32).await;
    let mut req = cc(vec![chunk(0, 0, 100)]);
    req[..24].copy_from_slice(&key2[..24]);
    let (st, _) = ioctl(&mut c, fsctl::SRV_COPYCHUNK, dst, &req, 12).await;
    assert_eq!(st, NtStatus::ACCESS_DENIED);
}

#[tokio::test]
async fn sparse_zero_data_and_allocated_ranges() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), vec![0xAB; 8192]).unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let f = create(&mut c, "f", ALL).await;
    let range = |o: i64, l: i64| {
        let mut v = o.to_le_bytes().to_vec();
        v.extend_from_slice(&l.to_le_bytes());
        v
    };
    // Not sparse: one range, clipped to EOF.
    let (st, out) = ioctl(
        &mut c,
        fsctl::QUERY_ALLOCATED_RANGES,
        f,
        &range(1, 100_000),
        1024,
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(out, range(1, 8191));
    // Malformed and overflowing ranges.
    let (st, _) = ioctl(&mut c, fsctl::QUERY_ALLOCATED_RANGES, f, &[0; 8], 1024).await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    let (st, _) = ioctl(
        &mut c,
        fsctl::QUERY_ALLOCATED_RANGES,
        f,
        &range(512, -1),
        1024,
    )
    .await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    // No room for one entry.
    let (st, _) = ioctl(&mut c, fsctl::QUERY_ALLOCATED_RANGES, f, &range(0, 10), 0).await;
    assert_eq!(st, NtStatus::BUFFER_TOO_SMALL);

    // Set sparse without a buffer, zero the first half.
    let (st, _) = ioctl(&mut c, fsctl::SET_SPARSE, f, &[], 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    let (st, _) = ioctl(&mut c, fsctl::SET_ZERO_DATA, f, &range(0, 4096), 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    let got = std::fs::read(dir.path().join("f")).unwrap();
    assert_eq!(got.len(), 8192, "zero data never changes the size");
    assert!(got[..4096].iter().all(|b| *b == 0));
    assert!(got[4096..].iter().all(|b| *b == 0xAB));
    // FileOffset beyond BeyondFinalZero.
    let (st, _) = ioctl(&mut c, fsctl::SET_ZERO_DATA, f, &range(4096, 4095), 0).await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    // Past EOF is fine and does not grow the file.
    let (st, _) = ioctl(&mut c, fsctl::SET_ZERO_DATA, f, &range(9000, 9100), 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(std::fs::metadata(dir.path().join("f")).unwrap().len(), 8192);
    // The allocated ranges now end where data is (file-system dependent start).
    let (st, out) = ioctl(
        &mut c,
        fsctl::QUERY_ALLOCATED_RANGES,
        f,
        &range(0, 8192),
        1024,
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert!(!out.is_empty() && out.len() % 16 == 0);
    let last = &out[out.len() - 16..];
    let (o, l) = decode_allocated_range(last).unwrap();
    assert_eq!(o + l, 8192);

    // Access checks: zero data needs WRITE_DATA, ranges need READ_DATA.
    let ro = create(&mut c, "f", READ_DATA | READ_ATTR).await;
    let (st, _) = ioctl(&mut c, fsctl::SET_ZERO_DATA, ro, &range(0, 10), 0).await;
    assert_eq!(st, NtStatus::ACCESS_DENIED);
    let (st, _) = ioctl(&mut c, fsctl::SET_SPARSE, ro, &[1], 0).await;
    assert_eq!(st, NtStatus::ACCESS_DENIED);
    let attr_only = create(&mut c, "f", READ_ATTR).await;
    let (st, _) = ioctl(
        &mut c,
        fsctl::QUERY_ALLOCATED_RANGES,
        attr_only,
        &range(0, 10),
        64,
    )
    .await;
    assert_eq!(st, NtStatus::ACCESS_DENIED);
}

#[tokio::test]
async fn connection_level_fsctls_and_hostile_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    // Network interfaces: the bound loopback address.
    let (st, out) = ioctl(
        &mut c,
        fsctl::QUERY_NETWORK_INTERFACE_INFO,
        NO_FILE,
        &[],
        65536,
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(out.len() % NETWORK_INTERFACE_INFO_LEN, 0);
    assert_eq!(&out[24..26], &2u16.to_le_bytes());
    assert_eq!(&out[28..32], &[127, 0, 0, 1]);
    let (st, _) = ioctl(&mut c, fsctl::QUERY_NETWORK_INTERFACE_INFO, NO_FILE, &[], 1).await;
    assert_eq!(st, NtStatus::BUFFER_TOO_SMALL);
    let (st, _) = ioctl(
        &mut c,
        fsctl::QUERY_NETWORK_INTERFACE_INFO,
        (1, 1),
        &[],
        65536,
    )
    .await;
    assert_eq!(st, NtStatus::INVALID_PARAMETER);
    // DFS is not offered.
    let (st, _) = ioctl(&mut c, fsctl::DFS_GET_REFERRALS, NO_FILE, &[0; 4], 1024).await;
    assert_eq!(st, NtStatus::FS_DRIVER_REQUIRED);
    // An unknown FSCTL on a file, and one on a closed handle.
    let f = create(&mut c, "x", ALL).await;
    let (st, _) = ioctl(&mut c, 0x0009_0000 | 0x3FC, f, &[], 64).await;
    assert_eq!(st, NtStatus::NOT_SUPPORTED);
    let (st, _) = ioctl(&mut c, fsctl::GET_REPARSE_POINT, f, &[], 64).await;
    assert_eq!(st, NtStatus::NOT_A_REPARSE_POINT);
    let (st, out) = ioctl(&mut c, fsctl::SRV_ENUMERATE_SNAPSHOTS, f, &[], 16).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(&out[..4], &[0, 0, 0, 0]);
    let (st, out) = ioctl(&mut c, fsctl::CREATE_OR_GET_OBJECT_ID, f, &[], 64).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(out.len(), 64);
    let (st, _) = ioctl(&mut c, fsctl::SET_SPARSE, (77, 77), &[], 0).await;
    assert_eq!(st, NtStatus::FILE_CLOSED);

    // Flags without IS_FSCTL.
    let mut body = IoctlRequest {
        ctl_code: fsctl::SET_SPARSE,
        file_id: smbx_wire::FileId {
            persistent: f.0,
            volatile: f.1,
        },
        input: &[],
        max_input_response: 0,
        output: &[],
        max_output_response: 0,
        flags: 0,
    }
    .encode();
    let r = c.request(Command::Ioctl, &body).await;
    assert_eq!(r.status(), NtStatus::NOT_SUPPORTED);
    // InputOffset/InputCount outside the message, and a truncated body.
    body[48..52].copy_from_slice(&1u32.to_le_bytes()); // Flags = IS_FSCTL
    body[24..28].copy_from_slice(&((HEADER_SIZE + 56) as u32).to_le_bytes());
    body[28..32].copy_from_slice(&0x10000u32.to_le_bytes());
    let r = c.request(Command::Ioctl, &body).await;
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    let r = c.request(Command::Ioctl, &body[..30]).await;
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    // The connection survives all of that.
    let (st, _) = ioctl(&mut c, fsctl::SET_SPARSE, f, &[], 0).await;
    assert_eq!(st, NtStatus::SUCCESS);
}

#[tokio::test]
async fn pipe_transceive_on_ipc() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(test_config(dir.path())).await;
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[Dialect::SMB3_1_1]).await;
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    assert_eq!(c.tree_connect("IPC$").await.status(), NtStatus::SUCCESS);
    let p = create(&mut c, "srvsvc", 0x0012_019F).await;
    // A DCE/RPC bind to srvsvc v3.0 with NDR32.
    let mut bind = vec![5, 0, 11, 3, 0x10, 0, 0, 0];
    bind.extend_from_slice(&72u16.to_le_bytes());
    bind.extend_from_slice(&0u16.to_le_bytes());
    bind.extend_from_slice(&1u32.to_le_bytes());
    bind.extend_from_slice(&4280u16.to_le_bytes());
    bind.extend_from_slice(&4280u16.to_le_bytes());
    bind.extend_from_slice(&0u32.to_le_bytes());
    bind.extend_from_slice(&[1, 0, 0, 0]); // one context
    bind.extend_from_slice(&[0, 0, 1, 0]); // id 0, one transfer syntax
    bind.extend_from_slice(&[
        0xc8, 0x4f, 0x32, 0x4b, 0x70, 0x16, 0xd3, 0x01, 0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1,
        0x88,
    ]);
    bind.extend_from_slice(&[3, 0, 0, 0]);
    bind.extend_from_slice(&[
        0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48,
        0x60,
    ]);
    bind.extend_from_slice(&[2, 0, 0, 0]);
    assert_eq!(bind.len(), 72);
    // A tiny output window: the reply comes back in BUFFER_OVERFLOW pieces.
    let (st, first) = ioctl(&mut c, fsctl::PIPE_TRANSCEIVE, p, &bind, 16).await;
    assert_eq!(st, NtStatus::BUFFER_OVERFLOW);
    assert_eq!(first.len(), 16);
    assert_eq!(first[2], 12, "bind_ack");
}
