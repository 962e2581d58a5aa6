//! Large WRITEs over TCP whose data the server splices from the socket into the file
//! (smbx_transport::splice): the bytes land where they were sent, WRITEs that do not
//! qualify (a Length that does not end with the frame, data after padding, signed)
//! take the ordinary path, and a spliced WRITE that fails (no write access, a closed
//! FileId, a bad Length) consumes its data: the requests after it are intact.

mod common;

use common::*;
use smbx_wire::oplock::OplockLevel;
use smbx_wire::rw::{decode_write_response, WriteRequest};
use smbx_wire::{Command, FileId, NtStatus, HEADER_SIZE};

fn data(n: usize, k: usize) -> Vec<u8> {
    (0..n).map(|j| (j * 13 + k) as u8).collect()
}

/// A WRITE body; `length` and `data_offset` as sent, whatever `data` holds.
fn write_body(fid: FileId, off: u64, data: &[u8], length: u32, data_offset: u16) -> Vec<u8> {
    let mut b = WriteRequest {
        offset: off,
        file_id: fid,
        length: data.len() as u32,
        data,
        ..Default::default()
    }
    .encode();
    b[4..8].copy_from_slice(&length.to_le_bytes());
    if data_offset != 0x70 {
        let pad = usize::from(data_offset) - 0x70;
        b[2..4].copy_from_slice(&data_offset.to_le_bytes());
        let tail = b.split_off(48);
        b.extend(std::iter::repeat_n(0, pad));
        b.extend(tail);
    }
    b
}

/// Sends a WRITE charged for its Length (a large WRITE takes a credit per 64 KiB and
/// as many MessageIds) and returns its status and Count.
async fn write_raw(c: &mut Client, body: &[u8]) -> (NtStatus, u32) {
    let id = send_write(c, body).await;
    let r = c.recv().await.expect("connection closed").remove(0);
    assert_eq!(r.header.message_id, id);
    let n = if r.status() == NtStatus::SUCCESS {
        let mut m = vec![0u8; HEADER_SIZE];
        m.extend_from_slice(r.body());
        decode_write_response(&m).unwrap()
    } else {
        0
    };
    (r.status(), n)
}

async fn open(c: &mut Client, name: &str, access: u32) -> FileId {
    let mut b = smbx_wire::create::CreateRequestBuilder {
        oplock_level: OplockLevel::NONE,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(access),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: 3,
        name: name.into(),
        ..Default::default()
    };
    b.oplock_level = OplockLevel::NONE;
    let r = c.request(Command::Create, &b.encode()).await;
    file_id_of(&created(&r))
}

#[tokio::test]
async fn large_writes_land_whole_and_failures_consume_their_data() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let fid = open(&mut c, "f", 0x001F_01FF).await;
    let mut want = Vec::new();
    let put = |want: &mut Vec<u8>, off: usize, d: &[u8]| {
        if want.len() < off + d.len() {
            want.resize(off + d.len(), 0);
        }
        want[off..off + d.len()].copy_from_slice(d);
    };
    // Spliced: sizes around the threshold and past what one pipe holds.
    for (i, (off, n)) in [
        (5usize, 300_000usize),
        (1 << 20, 64 * 1024),
        (3 << 20, 64 * 1024 - 112),
        (3 << 20, 64 * 1024 - 113),
        (4 << 20, 1 << 20),
        (6 << 20, 6 << 20),
    ]
    .into_iter()
    .enumerate()
    {
        let d = data(n, i);
        let body = write_body(fid, off as u64, &d, n as u32, 0x70);
        assert_eq!(
            write_raw(&mut c, &body).await,
            (NtStatus::SUCCESS, n as u32),
            "{off}+{n}"
        );
        put(&mut want, off, &d);
    }
    // Spliced and write-through (the data is on disk before the answer).
    let d = data(200_000, 13);
    let mut body = write_body(fid, 9 << 20, &d, 200_000, 0x70);
    body[44..48].copy_from_slice(&smbx_wire::rw::WRITEFLAG_WRITE_THROUGH.to_le_bytes());
    assert_eq!(write_raw(&mut c, &body).await, (NtStatus::SUCCESS, 200_000));
    put(&mut want, 9 << 20, &d);
    // Not spliced: Length short of the data (the first Length bytes are written),
    // data after 8 bytes of padding.
    let d = data(200_000, 7);
    let body = write_body(fid, 100, &d, 199_999, 0x70);
    assert_eq!(write_raw(&mut c, &body).await, (NtStatus::SUCCESS, 199_999));
    put(&mut want, 100, &d[..199_999]);
    let d = data(150_000, 8);
    let body = write_body(fid, 700_000, &d, 150_000, 0x78);
    assert_eq!(write_raw(&mut c, &body).await, (NtStatus::SUCCESS, 150_000));
    put(&mut want, 700_000, &d);
    // Length past the data: refused, and the connection goes on.
    let body = write_body(fid, 0, &data(200_000, 9), 200_001, 0x70);
    assert_eq!(
        write_raw(&mut c, &body).await.0,
        NtStatus::INVALID_PARAMETER
    );
    // A spliced WRITE that fails: a closed FileId, an open without write access.
    let gone = FileId {
        persistent: 77,
        volatile: 77,
    };
    let body = write_body(gone, 0, &data(300_000, 10), 300_000, 0x70);
    assert_eq!(write_raw(&mut c, &body).await.0, NtStatus::FILE_CLOSED);
    let ro = open(&mut c, "f", 0x0012_0089).await;
    let body = write_body(ro, 0, &data(300_000, 11), 300_000, 0x70);
    assert_eq!(write_raw(&mut c, &body).await.0, NtStatus::ACCESS_DENIED);
    // Past the largest file size: nothing written.
    let body = write_body(fid, 0xfff_ffff_0000 - 10, &data(100_000, 12), 100_000, 0x70);
    assert_eq!(
        write_raw(&mut c, &body).await.0,
        NtStatus::INVALID_PARAMETER
    );
    // Every byte where it was sent, nothing else.
    let got = std::fs::read(dir.path().join("f")).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "file content differs");
    // A small WRITE after all that still works.
    let body = write_body(fid, 0, b"tail", 4, 0x70);
    assert_eq!(write_raw(&mut c, &body).await, (NtStatus::SUCCESS, 4));
}

/// A named stream cannot take a splice: its data is gathered and written from memory,
/// with the same outcome as the same bytes sent unspliced to another stream (streams
/// live in extended attributes, which may hold less than this: then both fail alike).
#[tokio::test]
async fn a_stream_takes_a_large_write_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let _base = open(&mut c, "g", 0x001F_01FF).await;
    let d = data(64 * 1024 - 112, 3);
    let mut outcome = Vec::new();
    for (name, data_offset) in [("g:s1", 0x70u16), ("g:s2", 0x78)] {
        let b = smbx_wire::create::CreateRequestBuilder {
            impersonation_level: 2,
            desired_access: smbx_wire::AccessMask(0x001F_01FF),
            file_attributes: smbx_wire::FileAttributes(0x80),
            share_access: smbx_wire::ShareAccess(7),
            create_disposition: 3,
            name: name.into(),
            ..Default::default()
        };
        let r = c.request(Command::Create, &b.encode()).await;
        if r.status() != NtStatus::SUCCESS {
            // No user extended attributes on this file system: nothing to compare.
            return;
        }
        let fid = file_id_of(&created(&r));
        // 0x70: a frame of exactly 64 KiB, spliced; 0x78: padded, not spliced.
        let w = write_raw(&mut c, &write_body(fid, 0, &d, d.len() as u32, data_offset)).await;
        let rd = smbx_wire::rw::ReadRequest {
            length: 64 * 1024,
            file_id: fid,
            ..Default::default()
        }
        .encode();
        let mut h = c.header(Command::Read);
        h.credit_charge = 1;
        c.send_raw(&Client::message(&h, &rd)).await;
        let r = c.recv().await.expect("connection closed").remove(0);
        outcome.push((w, r.status(), r.body().to_vec()));
    }
    assert!(
        outcome[0] == outcome[1],
        "{:?} / {:?}",
        outcome[0].0,
        outcome[1].0
    );
}

/// Sends a WRITE charged for its Length without waiting for its answer; returns its
/// MessageId.
async fn send_write(c: &mut Client, body: &[u8]) -> u64 {
    let length = u32::from_le_bytes(body[4..8].try_into().unwrap()) as u64;
    let charge = length.div_ceil(65536).max(1);
    let mut h = c.header(Command::Write);
    h.credit_charge = charge as u16;
    c.next_message_id += charge - 1;
    c.send_raw(&Client::message(&h, body)).await;
    h.message_id
}

/// Answers to `n` requests sent back to back, by MessageId: (status, WRITE Count).
async fn answers(c: &mut Client, n: usize) -> std::collections::HashMap<u64, (NtStatus, u32)> {
    let mut got = std::collections::HashMap::new();
    while got.len() < n {
        for r in c.recv().await.expect("connection closed") {
            let count = if r.status() == NtStatus::SUCCESS && r.header.cmd() == Some(Command::Write)
            {
                let mut m = vec![0u8; HEADER_SIZE];
                m.extend_from_slice(r.body());
                decode_write_response(&m).unwrap()
            } else {
                0
            };
            got.insert(r.header.message_id, (r.status(), count));
        }
    }
    got
}

/// Spliced WRITEs sent back to back (each runs in the read loop when it can) start in
/// the order they came, also behind a request that started before them and had not
/// run yet: a SET_INFO that cuts the file to nothing comes first, then overlapping
/// WRITEs, each partly over the one before; the file is what that order makes.
#[tokio::test]
async fn back_to_back_spliced_writes_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let fid = open(&mut c, "f", 0x001F_01FF).await;
    let old = data(1 << 20, 99);
    let body = write_body(fid, 0, &old, old.len() as u32, 0x70);
    assert_eq!(write_raw(&mut c, &body).await, (NtStatus::SUCCESS, 1 << 20));
    // Cut to nothing, then eight WRITEs of 200,000 bytes, each 50,000 bytes on.
    let eof = 0u64.to_le_bytes();
    let cut = smbx_wire::set_info::SetInfoRequest {
        info_type: smbx_wire::set_info::SMB2_0_INFO_FILE,
        info_class: smbx_wire::set_info::FILE_END_OF_FILE_INFORMATION,
        additional_information: 0,
        file_id: fid,
        buffer: &eof,
    }
    .encode();
    let h = c.header(Command::SetInfo);
    let cut_id = h.message_id;
    c.send_raw(&Client::message(&h, &cut)).await;
    let mut want = Vec::new();
    let mut ids = Vec::new();
    for k in 0..8usize {
        let d = data(200_000, k);
        let off = k * 50_000;
        ids.push(send_write(&mut c, &write_body(fid, off as u64, &d, 200_000, 0x70)).await);
        want.resize(off + d.len(), 0);
        want[off..].copy_from_slice(&d);
    }
    let got = answers(&mut c, 9).await;
    assert_eq!(got[&cut_id].0, NtStatus::SUCCESS);
    for id in ids {
        assert_eq!(got[&id], (NtStatus::SUCCESS, 200_000), "WRITE {id}");
    }
    let file = std::fs::read(dir.path().join("f")).unwrap();
    assert_eq!(file.len(), want.len());
    assert!(file == want, "file content differs");
}

/// A spliced WRITE the file system cannot take (a full volume: a 1 MiB tmpfs) is
/// DISK_FULL, its data is consumed with it (the pipe it filled is not reused: the next
/// WRITEs land whole, where they were sent), and a WRITE on a closed handle sent right
/// behind it is FILE_CLOSED. Needs root (to mount the tmpfs): skipped otherwise.
#[tokio::test]
async fn a_spliced_write_to_a_full_volume_is_disk_full_and_the_next_ones_land() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().to_path_buf();
    let mounted = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=1m",
            "smbx-test",
            mnt.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("cannot mount a tmpfs here: skipped");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            // Lazily: the server (still running until the runtime ends) holds the share open.
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let srv = start(test_config(&mnt)).await;
    let mut c = connect_share(&srv).await;
    let fid = open(&mut c, "f", 0x001F_01FF).await;
    let gone = FileId {
        persistent: 77,
        volatile: 77,
    };
    // 2 MiB into a 1 MiB volume, then (sent at once behind it) a WRITE on a closed
    // handle and a WRITE that fits.
    let big = send_write(
        &mut c,
        &write_body(fid, 0, &data(2 << 20, 1), 2 << 20, 0x70),
    )
    .await;
    let closed = send_write(
        &mut c,
        &write_body(gone, 0, &data(300_000, 2), 300_000, 0x70),
    )
    .await;
    let got = answers(&mut c, 2).await;
    assert_eq!(got[&big].0, NtStatus::DISK_FULL);
    assert_eq!(got[&closed].0, NtStatus::FILE_CLOSED);
    // Room again: the file cut to nothing, then three WRITEs in a row, sent at once.
    std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("f"))
        .unwrap()
        .set_len(0)
        .unwrap();
    let mut want = Vec::new();
    let mut ids = Vec::new();
    for k in 0..3usize {
        let d = data(200_000, 10 + k);
        ids.push(
            send_write(
                &mut c,
                &write_body(fid, want.len() as u64, &d, 200_000, 0x70),
            )
            .await,
        );
        want.extend_from_slice(&d);
    }
    let got = answers(&mut c, 3).await;
    for id in ids {
        assert_eq!(got[&id], (NtStatus::SUCCESS, 200_000), "WRITE {id}");
    }
    let file = std::fs::read(mnt.join("f")).unwrap();
    assert_eq!(file.len(), want.len());
    assert!(file == want, "file content differs");
}

/// A spliced WRITE whose frame arrives in pieces (the head itself cut in two, the data
/// in parts) lands whole, as does a signed one (never spliced: its data is read in and
/// its signature checked) sent right behind it.
#[tokio::test]
async fn a_write_arriving_in_pieces_and_a_signed_one_land_whole() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let fid = open(&mut c, "f", 0x001F_01FF).await;
    let d = data(300_000, 5);
    let mut h = c.header(Command::Write);
    h.credit_charge = 5;
    c.next_message_id += 4;
    let msg = Client::message(&h, &write_body(fid, 0, &d, 300_000, 0x70));
    let mut frame = smbx_wire::framing::encode_frame_header(msg.len())
        .unwrap()
        .to_vec();
    frame.extend_from_slice(&msg);
    for part in [
        &frame[..60],
        &frame[60..4000],
        &frame[4000..150_000],
        &frame[150_000..],
    ] {
        c.stream.write_all(part).await.unwrap();
        c.stream.flush().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = answers(&mut c, 1).await;
    assert_eq!(r[&h.message_id], (NtStatus::SUCCESS, 300_000));
    // Signed, at the end of the file.
    let s = data(300_000, 6);
    let mut h = c.header(Command::Write);
    h.credit_charge = 5;
    h.flags |= smbx_wire::header::FLAGS_SIGNED;
    c.next_message_id += 4;
    let mut m = Client::message(&h, &write_body(fid, 300_000, &s, 300_000, 0x70));
    c.signer.as_ref().expect("a signing session").sign(&mut m);
    c.send_raw(&m).await;
    let r = answers(&mut c, 1).await;
    assert_eq!(r[&h.message_id], (NtStatus::SUCCESS, 300_000));
    let file = std::fs::read(dir.path().join("f")).unwrap();
    assert!(file.len() == 600_000 && file[..300_000] == d[..] && file[300_000..] == s[..]);
}

/// WRITEs in flight while the file is cut to nothing from outside: each is answered
/// whole, the ones sent after the cut land as sent, and what the earlier ones wrote
/// is either their data or zeros (never another WRITE's bytes).
#[tokio::test]
async fn writes_in_flight_while_the_file_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, mut c) = start_with_client(dir.path()).await;
    let fid = open(&mut c, "f", 0x001F_01FF).await;
    let n = 200_000usize;
    let mut ids = Vec::new();
    for k in 0..8usize {
        if k == 4 {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path().join("f"))
                .unwrap()
                .set_len(0)
                .unwrap();
        }
        let d = data(n, 20 + k);
        ids.push(send_write(&mut c, &write_body(fid, (k * n) as u64, &d, n as u32, 0x70)).await);
    }
    let got = answers(&mut c, 8).await;
    for id in &ids {
        assert_eq!(got[id], (NtStatus::SUCCESS, n as u32), "WRITE {id}");
    }
    let file = std::fs::read(dir.path().join("f")).unwrap();
    assert_eq!(file.len(), 8 * n);
    for k in 0..8usize {
        let d = data(n, 20 + k);
        let at = &file[k * n..(k + 1) * n];
        if k >= 4 {
            assert!(at == &d[..], "WRITE {k} sent after the cut");
        } else {
            assert!(
                at.iter().zip(&d).all(|(a, b)| a == b || *a == 0),
                "WRITE {k}: bytes neither its own nor zeros"
            );
        }
    }
}
