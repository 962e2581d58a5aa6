//! The scenarios every server is put through: every dialect with signing, every cipher,
//! the file operations, many requests in flight. `start(extra_global)` starts the server.

use super::common::{random_bytes, sha256, Server, PASSWORD, USER};
use smbx_client::{
    CipherId, Client, ClientOptions, Encryption, Error, NtStatus, OpenOptions, Signing,
    SigningAlgorithm,
};
use smbx_wire::Dialect;

const MIB: usize = 1024 * 1024;

async fn round_trip(server: &Server, opts: ClientOptions, share: &str, size: usize, label: &str) {
    let client = Client::connect(&server.addr(), opts)
        .await
        .unwrap_or_else(|e| panic!("{label}: connect: {e}\n{}", server.log()));
    let session = client
        .login(USER, PASSWORD, "")
        .await
        .unwrap_or_else(|e| panic!("{label}: login: {e}"));
    let tree = session
        .tree(share)
        .await
        .unwrap_or_else(|e| panic!("{label}: tree: {e}"));
    let data = random_bytes(size);
    let name = format!("rt-{}.bin", label.replace(['/', ' ', '.'], "_"));
    tree.write_file(&name, &data)
        .await
        .unwrap_or_else(|e| panic!("{label}: write: {e}"));
    let back = tree
        .read_file(&name)
        .await
        .unwrap_or_else(|e| panic!("{label}: read: {e}"));
    assert_eq!(back.len(), data.len(), "{label}: length");
    assert_eq!(sha256(&back), sha256(&data), "{label}: SHA-256 differs");
    // The bytes on the server's disk are the same too.
    let on_disk = std::fs::read(server.share_dir(share).join(&name)).unwrap();
    assert_eq!(
        sha256(&on_disk),
        sha256(&data),
        "{label}: on-disk SHA-256 differs"
    );
    tree.remove(&name).await.unwrap();
    // Error responses are protected too (signed or sealed) and still arrive as statuses.
    let e = tree.stat(&name).await.unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND), "{label}: {e}");
    tree.disconnect().await.unwrap();
    session.logoff().await.unwrap();
}

pub async fn every_dialect_with_signing_required(start: fn(&str) -> Server) {
    let server = start("    server signing = mandatory");
    for d in Dialect::ALL {
        let opts = ClientOptions::default()
            .with_dialect(d)
            .with_signing(Signing::Required);
        let client = Client::connect(&server.addr(), opts.clone()).await.unwrap();
        assert_eq!(client.dialect(), d);
        assert!(client.negotiated().server_requires_signing());
        let s = client.login(USER, PASSWORD, "").await.unwrap();
        assert!(s.is_signed(), "{}: session not signed", d.name());
        s.echo().await.unwrap();
        round_trip(
            &server,
            opts,
            "share",
            3 * MIB + 12345,
            &format!("signed {}", d.name()),
        )
        .await;
    }
}

pub async fn every_311_signing_algorithm(start: fn(&str) -> Server) {
    let server = start("    server signing = mandatory");
    for alg in [
        SigningAlgorithm::AesGmac,
        SigningAlgorithm::AesCmac,
        SigningAlgorithm::HmacSha256,
    ] {
        let opts = ClientOptions::default()
            .with_dialect(Dialect::SMB3_1_1)
            .with_signing(Signing::Required)
            .with_signing_algorithms(&[alg]);
        let c = Client::connect(&server.addr(), opts.clone()).await.unwrap();
        assert_eq!(c.negotiated().signing_algorithm, alg);
        round_trip(&server, opts, "share", 2 * MIB, &format!("3.1.1 {alg:?}")).await;
    }
}

pub async fn every_cipher_client_requested(start: fn(&str) -> Server) {
    let server = start("");
    // 3.0 and 3.0.2: AES-128-CCM only.
    for d in [Dialect::SMB3_0, Dialect::SMB3_0_2] {
        let opts = ClientOptions::default()
            .with_dialect(d)
            .with_encryption(Encryption::Required);
        let c = Client::connect(&server.addr(), opts.clone()).await.unwrap();
        assert_eq!(c.negotiated().cipher, Some(CipherId::Aes128Ccm));
        let s = c.login(USER, PASSWORD, "").await.unwrap();
        assert!(s.is_encrypted());
        round_trip(
            &server,
            opts,
            "share",
            2 * MIB,
            &format!("sealed {}", d.name()),
        )
        .await;
    }
    for cipher in [
        CipherId::Aes128Ccm,
        CipherId::Aes128Gcm,
        CipherId::Aes256Ccm,
        CipherId::Aes256Gcm,
    ] {
        let opts = ClientOptions::default()
            .with_dialect(Dialect::SMB3_1_1)
            .with_encryption(Encryption::Required)
            .with_ciphers(&[cipher]);
        let c = Client::connect(&server.addr(), opts.clone()).await.unwrap();
        assert_eq!(c.negotiated().cipher, Some(cipher));
        round_trip(
            &server,
            opts,
            "share",
            3 * MIB,
            &format!("sealed 3.1.1 {cipher:?}"),
        )
        .await;
    }
}

pub async fn share_that_requires_encryption(start: fn(&str) -> Server) {
    let server = start("");
    for d in [Dialect::SMB3_0, Dialect::SMB3_0_2, Dialect::SMB3_1_1] {
        let opts = ClientOptions::default().with_dialect(d);
        let c = Client::connect(&server.addr(), opts.clone()).await.unwrap();
        let s = c.login(USER, PASSWORD, "").await.unwrap();
        assert!(!s.is_encrypted());
        let t = s.tree("secret").await.unwrap();
        assert!(
            t.is_encrypted(),
            "{}: share did not ask for encryption",
            d.name()
        );
        round_trip(
            &server,
            opts,
            "secret",
            MIB,
            &format!("secret {}", d.name()),
        )
        .await;
    }
    // SMB 2.x cannot encrypt: Samba refuses the share.
    let c = Client::connect(
        &server.addr(),
        ClientOptions::default().with_dialect(Dialect::SMB2_1),
    )
    .await
    .unwrap();
    let s = c.login(USER, PASSWORD, "").await.unwrap();
    let e = s.tree("secret").await.unwrap_err();
    assert!(e.is_status(NtStatus::ACCESS_DENIED), "{e}");
}

pub async fn file_operations_and_errors(start: fn(&str) -> Server) {
    let server = start("");
    let c = Client::connect(&server.addr(), ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(c.dialect(), Dialect::SMB3_1_1);
    c.echo().await.unwrap();
    // Wrong password: a typed error that prints the status name.
    let e = c.login(USER, "wrong", "").await.unwrap_err();
    assert_eq!(e.to_string(), "STATUS_LOGON_FAILURE");
    let s = c.login(USER, PASSWORD, "").await.unwrap();
    let e = s.tree("nosuchshare").await.unwrap_err();
    assert_eq!(e.to_string(), "STATUS_BAD_NETWORK_NAME", "{}", server.log());
    let t = s.tree("share").await.unwrap();

    // mkdir, nested files, list, stat.
    t.mkdir("dir").await.unwrap();
    assert!(matches!(
        t.mkdir("dir").await,
        Err(Error::Status {
            status: NtStatus::OBJECT_NAME_COLLISION,
            ..
        })
    ));
    t.mkdir("dir/sub").await.unwrap();
    t.write_file("dir/a.txt", b"hello").await.unwrap();
    t.write_file("dir/b.bin", &random_bytes(100_000))
        .await
        .unwrap();
    let mut names: Vec<(String, bool, u64)> = t
        .list("dir")
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name.clone(), e.is_dir(), e.info.size))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ("a.txt".to_string(), false, 5),
            ("b.bin".to_string(), false, 100_000),
            ("sub".to_string(), true, 0)
        ]
    );
    let st = t.stat("dir/b.bin").await.unwrap();
    assert_eq!(st.size, 100_000);
    assert!(!st.is_dir());
    assert!(st.modified().is_some());
    assert!(t.stat("dir").await.unwrap().is_dir());
    let e = t.stat("dir/missing").await.unwrap_err();
    assert_eq!(e.to_string(), "STATUS_OBJECT_NAME_NOT_FOUND");
    let e = t.stat("nodir/missing").await.unwrap_err();
    assert_eq!(e.to_string(), "STATUS_OBJECT_PATH_NOT_FOUND");

    // rename, including onto an existing name.
    t.rename("dir/a.txt", "dir/c.txt").await.unwrap();
    assert_eq!(t.read_file("dir/c.txt").await.unwrap(), b"hello");
    assert!(t
        .stat("dir/a.txt")
        .await
        .unwrap_err()
        .is_status(NtStatus::OBJECT_NAME_NOT_FOUND));
    let e = t.rename("dir/c.txt", "dir/b.bin").await.unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_COLLISION), "{e}");
    t.rename_with("dir/c.txt", "dir/b.bin", true).await.unwrap();
    assert_eq!(t.stat("dir/b.bin").await.unwrap().size, 5);

    // rmdir refuses a non-empty directory; remove, then rmdir.
    let e = t.rmdir("dir").await.unwrap_err();
    assert!(e.is_status(NtStatus::DIRECTORY_NOT_EMPTY), "{e}");
    t.remove("dir/b.bin").await.unwrap();
    let e = t.remove("dir/b.bin").await.unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
    t.rmdir("dir/sub").await.unwrap();
    t.rmdir("dir").await.unwrap();
    assert!(t.list("").await.unwrap().is_empty());
    assert!(!server.share_dir("share").join("dir").exists());

    // Offsets, short reads at EOF, holes, truncation, flush, delete-on-close.
    let f = t
        .open("f.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    assert_eq!(f.create_action(), 2);
    f.write_at(10, b"xyz").await.unwrap();
    f.flush().await.unwrap();
    assert_eq!(f.read_at(0, 100).await.unwrap(), b"\0\0\0\0\0\0\0\0\0\0xyz");
    assert_eq!(f.read_at(12, 10).await.unwrap(), b"z");
    assert!(f.read_at(13, 10).await.unwrap().is_empty());
    assert!(f.read_at(1000, 10).await.unwrap().is_empty());
    f.set_len(4).await.unwrap();
    assert_eq!(f.stat().await.unwrap().size, 4);
    let closed = f.close().await.unwrap();
    assert_eq!(closed.size, 4);
    let g = t
        .open(
            "gone.bin",
            &OpenOptions::create_truncate().delete_on_close(true),
        )
        .await
        .unwrap();
    g.write_at(0, b"bye").await.unwrap();
    g.close().await.unwrap();
    assert!(t
        .stat("gone.bin")
        .await
        .unwrap_err()
        .is_status(NtStatus::OBJECT_NAME_NOT_FOUND));
    let e = t
        .open("missing.bin", &OpenOptions::read_only())
        .await
        .unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND));
    let e = t
        .open("f.bin", &OpenOptions::new().create_new(true))
        .await
        .unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_COLLISION));
    t.remove("f.bin").await.unwrap();
}

pub async fn many_requests_in_flight(start: fn(&str) -> Server) {
    let server = start("");
    let c = Client::connect(&server.addr(), ClientOptions::default())
        .await
        .unwrap();
    let s = c.login(USER, PASSWORD, "").await.unwrap();
    let t = s.tree("share").await.unwrap();
    let data = random_bytes(4 * MIB);
    t.write_file("qd.bin", &data).await.unwrap();
    let f = t.open("qd.bin", &OpenOptions::read_only()).await.unwrap();
    // 1024 concurrent 4 KiB reads on one connection, bounded by the credit window.
    let len = data.len() as u64;
    let reads = (0..1024u64).map(|i| {
        let f = &f;
        async move {
            let off = (i * 4096) % len;
            (off, f.read_at(off, 4096).await)
        }
    });
    for (off, r) in futures_util::future::join_all(reads).await {
        let got = r.unwrap();
        assert_eq!(got, &data[off as usize..off as usize + 4096]);
    }
    // Large multi-credit reads: 8 MiB at once spans several MaxReadSize READs.
    let all = f.read_at(0, data.len()).await.unwrap();
    assert_eq!(sha256(&all), sha256(&data));
    // Into a caller's buffer, past end of file: the count says where the file ended.
    let mut buf = vec![0u8; data.len() + 12345];
    let n = f.read_into(0, &mut buf).await.unwrap();
    assert_eq!(n, data.len());
    assert_eq!(sha256(&buf[..n]), sha256(&data));
    assert_eq!(f.read_into(data.len() as u64, &mut buf).await.unwrap(), 0);
    // In the buffer it arrived in: many in flight, every size, short at the
    // end, empty past it; the buffers go back to the pool and are reused.
    for round in 0..2 {
        let reads = (0..32usize).map(|i| {
            let f = &f;
            let len = [4096, 65536, 100_000, 512 * 1024][i % 4];
            let off = (i * 77_777 + round * 4096) % (data.len() - len);
            async move { (off, len, f.read_data(off as u64, len).await) }
        });
        for (off, len, r) in futures_util::future::join_all(reads).await {
            let d = r.unwrap();
            assert!(*d == data[off..off + len], "{off}+{len}");
        }
    }
    let d = f.read_data(data.len() as u64 - 1000, 65536).await.unwrap();
    assert!(*d == data[data.len() - 1000..]);
    assert!(f
        .read_data(data.len() as u64, 65536)
        .await
        .unwrap()
        .is_empty());
    f.close().await.unwrap();
    assert!(c.connection().credits_available() > 1);
}

/// A URL opens a tree; open+read+close runs as one compound.
pub async fn url_and_compound_read(start: fn(&str) -> Server) {
    let server = start("");
    let url = smbx_client::SmbUrl::parse(&format!(
        "smb://{USER}@127.0.0.1:{}/share/sub%20dir/f.txt",
        server.port
    ))
    .unwrap();
    let (tree, path) = url
        .open(Some(PASSWORD), ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(path, "sub dir/f.txt");
    tree.mkdir("sub dir").await.unwrap();
    let data = random_bytes(200_000);
    tree.write_file(&path, &data).await.unwrap();
    assert_eq!(tree.read_small(&path, 1 << 20).await.unwrap(), data);
    assert_eq!(tree.read_small(&path, 10).await.unwrap(), &data[..10]);
    tree.write_file("empty", b"").await.unwrap();
    assert!(tree.read_small("empty", 100).await.unwrap().is_empty());
    let e = tree.read_small("missing", 100).await.unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
    // A wrong password in the URL is the server's refusal, by name.
    let bad = smbx_client::SmbUrl::parse(&format!(
        "smb://{USER}:nope@127.0.0.1:{}/share",
        server.port
    ))
    .unwrap();
    let e = bad.open(None, ClientOptions::default()).await.unwrap_err();
    assert_eq!(e.to_string(), "STATUS_LOGON_FAILURE");
}

/// A dropped connection is re-established (connect, logon, tree) for idempotent operations.
pub async fn reconnect_after_drop(start: fn(&str) -> Server) {
    let server = start("");
    let rt = smbx_client::ReconnectingTree::connect(
        &server.addr(),
        ClientOptions::default(),
        Some((USER, PASSWORD, "")),
        "share",
    )
    .await
    .unwrap();
    let data = random_bytes(300_000);
    rt.write_file("r.bin", &data).await.unwrap();
    let first = rt.tree().await;
    first.session().client().connection().close();
    let e = first.stat("r.bin").await.unwrap_err();
    assert!(matches!(e, Error::Disconnected(_)), "{e}");
    assert_eq!(rt.stat("r.bin").await.unwrap().size, data.len() as u64);
    let second = rt.tree().await;
    assert!(!second.session().client().connection().is_closed());
    assert_eq!(rt.read_file("r.bin").await.unwrap(), data);
    assert_eq!(rt.list("").await.unwrap().len(), 1);
    // Refusals are not connection losses: no retry, the status comes back.
    let e = rt.stat("missing").await.unwrap_err();
    assert!(e.is_status(NtStatus::OBJECT_NAME_NOT_FOUND), "{e}");
    assert!(std::ptr::eq(
        rt.tree().await.session().client().connection(),
        second.session().client().connection()
    ));
}

/// 64 MiB round trip per dialect, signed and sealed (SHA-256 compared).
pub async fn big_round_trip(start: fn(&str) -> Server) {
    let server = start("    server signing = mandatory");
    for d in Dialect::ALL {
        let opts = ClientOptions::default()
            .with_dialect(d)
            .with_signing(Signing::Required);
        round_trip(
            &server,
            opts,
            "share",
            64 * MIB,
            &format!("big signed {}", d.name()),
        )
        .await;
    }
    for cipher in [
        CipherId::Aes128Ccm,
        CipherId::Aes128Gcm,
        CipherId::Aes256Ccm,
        CipherId::Aes256Gcm,
    ] {
        let opts = ClientOptions::default()
            .with_encryption(Encryption::Required)
            .with_ciphers(&[cipher]);
        round_trip(
            &server,
            opts,
            "share",
            64 * MIB,
            &format!("big sealed {cipher:?}"),
        )
        .await;
    }
}

/// WRITEs of shared bytes (`File::write_bytes`, sent from the caller's buffer behind the
/// request's fields over Direct TCP): plain, signed and sealed sessions write the same
/// bytes as `write_at` (whole, more than MaxWriteSize at once, at an odd offset past the
/// end of the file, a slice of a larger buffer), and an empty one writes nothing.
pub async fn shared_bytes_writes(start: fn(&str) -> Server) {
    let server = start("");
    let cases = [
        ("plain", ClientOptions::default()),
        (
            "signed",
            ClientOptions::default().with_signing(Signing::Required),
        ),
        (
            "sealed",
            ClientOptions::default().with_encryption(Encryption::Required),
        ),
    ];
    for (label, opts) in cases {
        let client = Client::connect(&server.addr(), opts).await.unwrap();
        let session = client.login(USER, PASSWORD, "").await.unwrap();
        let t = session.tree("share").await.unwrap();
        let name = format!("shared-{label}.bin");
        let f = t
            .open(&name, &OpenOptions::create_truncate())
            .await
            .unwrap();
        // More than the server's MaxWriteSize (8 MiB).
        let all = smbx_client::Bytes::from(random_bytes(8 * MIB + 12_345));
        // Several WRITEs, each a slice of the same buffer.
        assert_eq!(f.write_bytes(0, all.clone()).await.unwrap(), all.len());
        // Past the end, at an odd offset: the gap reads as zeros.
        let part = all.slice(777..777 + 300_001);
        let at = all.len() as u64 + 4097;
        assert_eq!(f.write_bytes(at, part.clone()).await.unwrap(), part.len());
        assert_eq!(
            f.write_bytes(5, smbx_client::Bytes::new()).await.unwrap(),
            0
        );
        f.close().await.unwrap();
        let mut want = all.to_vec();
        want.resize(at as usize, 0);
        want.extend_from_slice(&part);
        let back = t.read_file(&name).await.unwrap();
        assert_eq!(back.len(), want.len(), "{label}: length");
        assert_eq!(sha256(&back), sha256(&want), "{label}: SHA-256 differs");
        let on_disk = std::fs::read(server.share_dir("share").join(&name)).unwrap();
        assert_eq!(sha256(&on_disk), sha256(&want), "{label}: on disk");
        t.remove(&name).await.unwrap();
    }
}
