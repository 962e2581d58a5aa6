//! SmbDirectConnection over the soft-iWARP provider on 127.0.0.1: negotiation,
//! messages of many sizes both ways, Send with Invalidate, and the RDMA
//! Write (SMB2 READ) and RDMA Read (SMB2 WRITE) helpers with Buffer
//! Descriptor V1 lists.

mod common;

use common::pattern;

use smbx_direct::{BufferDescriptorV1, Config, SmbDirectConnection, DEFAULT_MESSAGE_SIZE};
use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftListener, SoftPd, SoftQp};
use smbx_rdma::{
    Access, ConnectRequest, Listener, MemoryRegion, ProtectionDomain, Provider, QpCaps,
};

type Conn = SmbDirectConnection<SoftQp>;

/// A soft-iWARP provider with `opts`, listening on a free port of 127.0.0.1.
async fn listening(opts: IwarpOptions) -> (SoftIwarp, SoftListener, std::net::SocketAddr) {
    let prov = SoftIwarp::new(opts);
    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();
    (prov, lis, addr)
}

/// The server's side: accepts one connection with `cfg`; returns it and its
/// protection domain (to register the server's buffers in).
async fn accept_one(lis: SoftListener, cfg: Config) -> (Conn, SoftPd) {
    let req = lis.accept().await.unwrap();
    let spd = req.pd().clone();
    let conn: Conn = SmbDirectConnection::accept(req, cfg).await.unwrap();
    (conn, spd)
}

#[tokio::test]
async fn loopback_messages_and_rdma() {
    exercise(IwarpOptions::default()).await;
}

#[tokio::test]
async fn loopback_crc_off_and_mpa_rev1() {
    exercise(IwarpOptions {
        crc: false,
        ..IwarpOptions::default()
    })
    .await;
    exercise(IwarpOptions {
        mpa_revision: 1,
        ..IwarpOptions::default()
    })
    .await;
}

async fn exercise(opts: IwarpOptions) {
    let (prov, lis, addr) = listening(opts).await;
    let cpd = prov.alloc_pd().unwrap();
    const N: usize = 256 * 1024;

    let server = tokio::spawn(async move {
        let (conn, spd) = accept_one(lis, Config::default()).await;
        let p = conn.params();
        assert_eq!(
            (p.max_send_size, p.max_receive_size),
            (DEFAULT_MESSAGE_SIZE, DEFAULT_MESSAGE_SIZE)
        );
        // Echo messages until an empty-ish "rdma" command arrives.
        loop {
            let m = conn.recv_message().await.unwrap().into_vec();
            if m.starts_with(b"RDMA") {
                // READ: write our data into the client's sink descriptors,
                // then answer with Send with Invalidate of the first one.
                let descs = BufferDescriptorV1::decode_list(&m[4..]).unwrap();
                let (sink, source) = (descs[0], descs[1]);
                let src = spd.register(pattern(7, N), Access::LOCAL_WRITE).unwrap();
                conn.rdma_write(&src, 0, N as u64, &[sink]).await.unwrap();
                // WRITE: read the client's source into our buffer.
                let dst = spd.alloc(N, Access::LOCAL_WRITE).unwrap();
                conn.rdma_read(&dst, 0, N as u64, &[source]).await.unwrap();
                let ok = dst.with(|b| b == &pattern(9, N)[..]);
                conn.send_message_with_invalidate(
                    if ok { b"done-ok" } else { b"done-bad" },
                    sink.token,
                )
                .await
                .unwrap();
                break;
            }
            conn.send_message(&m).await.unwrap();
        }
        conn.recv_message().await.unwrap_or_default().into_vec()
    });

    let conn: Conn = SmbDirectConnection::connect(&prov, &cpd, addr, Config::default())
        .await
        .unwrap();
    assert_eq!(conn.params().max_read_write_size, 8 << 20);
    for (i, n) in [1usize, 1340, 1341, 5000, 65_536, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let m = pattern(i as u32, n);
        conn.send_message(&m).await.unwrap();
        assert_eq!(
            conn.recv_message().await.unwrap().into_vec(),
            m,
            "echo of {n} bytes"
        );
    }
    // Many small messages in flight at once (credits get exhausted and refilled).
    for i in 0..600u32 {
        conn.send_message(&i.to_le_bytes()).await.unwrap();
    }
    for i in 0..600u32 {
        assert_eq!(
            conn.recv_message().await.unwrap().into_vec(),
            i.to_le_bytes()
        );
    }
    // RDMA: sink for the server's RDMA Write, source for its RDMA Read.
    let sink = cpd
        .alloc(N, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let source = cpd
        .register(pattern(9, N), Access::LOCAL_WRITE | Access::REMOTE_READ)
        .unwrap();
    let descs = [
        Conn::describe(&sink, 0, N as u32).unwrap(),
        Conn::describe(&source, 0, N as u32).unwrap(),
    ];
    let mut cmd = b"RDMA".to_vec();
    cmd.extend_from_slice(&BufferDescriptorV1::encode_list(&descs));
    conn.send_message(&cmd).await.unwrap();
    assert_eq!(conn.recv_message().await.unwrap().into_vec(), b"done-ok");
    assert!(sink.with(|b| b == &pattern(7, N)[..]), "RDMA Write data");
    assert_eq!(conn.take_invalidated(), vec![sink.stag()]);
    assert!(!sink.is_valid(), "remote invalidation");
    conn.send_message(b"bye").await.unwrap();
    assert_eq!(server.await.unwrap(), b"bye");
    conn.close().await;
    assert!(conn.is_closed());
}

/// A raw client (no SMB Direct core) that sends `first` as its first message
/// and returns what the server sent back before closing.
async fn raw_client(prov: &SoftIwarp, addr: std::net::SocketAddr, first: &[u8]) -> Vec<Vec<u8>> {
    use smbx_rdma::{Connecting, QueuePair, Sge, WcOpcode};
    let pd = prov.alloc_pd().unwrap();
    let c = prov.connect(&pd, addr, QpCaps::default()).await.unwrap();
    let rbuf = pd.alloc(4 * 8192, Access::LOCAL_WRITE).unwrap();
    for i in 0..4u64 {
        c.qp()
            .post_recv(i, &[Sge::new(&rbuf, i * 8192, 8192)])
            .unwrap();
    }
    let (qp, _) = c.connect(Default::default()).await.unwrap();
    let sbuf = pd.register(first.to_vec(), Access::LOCAL_WRITE).unwrap();
    qp.post_send_simple(100, &[Sge::new(&sbuf, 0, first.len() as u32)])
        .unwrap();
    let mut got = Vec::new();
    while let Some(c) = qp.cq().next().await {
        if c.opcode == WcOpcode::Recv && c.status == smbx_rdma::WcStatus::Success {
            let off = c.wr_id as usize * 8192;
            got.push(rbuf.with(|b| b[off..off + c.byte_len as usize].to_vec()));
        }
    }
    got
}

#[tokio::test]
async fn server_rejects_bad_negotiate_over_the_wire() {
    use smbx_direct::{
        DirectError, DisconnectReason, NegotiateRequest, NegotiateResponse, PduError,
    };
    let (prov, lis, addr) = listening(IwarpOptions::default()).await;
    let mut req = NegotiateRequest {
        min_version: 0x0200,
        max_version: 0x0200,
        credits_requested: 10,
        preferred_send_size: 1364,
        max_receive_size: 1364,
        max_fragmented_size: 1 << 20,
    };
    // Bad version: STATUS_NOT_SUPPORTED response, then disconnect.
    let server = tokio::spawn(async move {
        let r =
            SmbDirectConnection::<SoftQp>::accept(lis.accept().await.unwrap(), Config::default())
                .await;
        (r.err(), lis)
    });
    let got = raw_client(&prov, addr, &req.encode()).await;
    let (err, lis) = server.await.unwrap();
    assert!(matches!(
        err,
        Some(DirectError::Disconnected(DisconnectReason::Protocol(
            PduError::UnsupportedVersion { .. }
        )))
    ));
    assert_eq!(got.len(), 1);
    let rsp = NegotiateResponse::parse(&got[0]).unwrap();
    assert_eq!(rsp.status, smbx_wire::NtStatus::NOT_SUPPORTED);

    // Too short: dropped without a response.
    req.min_version = 0x0100;
    req.max_version = 0x0100;
    let server = tokio::spawn(async move {
        SmbDirectConnection::<SoftQp>::accept(lis.accept().await.unwrap(), Config::default())
            .await
            .err()
    });
    let got = raw_client(&prov, addr, &req.encode()[..19]).await;
    let err = server.await.unwrap();
    assert!(matches!(
        err,
        Some(DirectError::Disconnected(DisconnectReason::Protocol(
            PduError::TooShort { .. }
        )))
    ));
    assert!(got.is_empty());
}

#[tokio::test]
async fn rdma_read_with_invalid_token_fails_and_keepalive_keeps_idle_link() {
    use smbx_direct::DirectError;
    let (prov, lis, addr) = listening(IwarpOptions::default()).await;
    let cpd = prov.alloc_pd().unwrap();
    let fast = Config {
        keepalive_interval: std::time::Duration::from_millis(50),
        keepalive_timeout: std::time::Duration::from_secs(5),
        ..Config::default()
    };
    let scfg = fast.clone();
    let server = tokio::spawn(async move {
        let (conn, spd) = accept_one(lis, scfg).await;
        // Idle through several keepalive intervals, then take a message.
        let m = conn.recv_message().await.unwrap().into_vec();
        let d = BufferDescriptorV1::decode_list(&m).unwrap();
        let dst = spd.alloc(4096, Access::LOCAL_WRITE).unwrap();
        let r = conn.rdma_read(&dst, 0, 4096, &d).await;
        (r, conn.is_closed())
    });
    let conn: Conn = SmbDirectConnection::connect(&prov, &cpd, addr, fast)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!conn.is_closed(), "keepalives answered, link alive");
    let st = conn.stats();
    assert!(st.keepalives_sent >= 1, "{st:?}");
    // Each keepalive was answered by an empty message from the server.
    assert!(
        st.data_messages_received >= st.keepalives_sent.min(2),
        "{st:?}"
    );
    let bogus = BufferDescriptorV1 {
        offset: 0,
        token: 0x0bad_0bad,
        length: 4096,
    };
    conn.send_message(&BufferDescriptorV1::encode_list(&[bogus]))
        .await
        .unwrap();
    let (r, _) = server.await.unwrap();
    assert!(
        matches!(
            r,
            Err(DirectError::Transfer(_)) | Err(DirectError::QpClosed(_))
        ),
        "{r:?}"
    );
}

/// Counts the wake-ups of the task it stands for.
#[derive(Default)]
struct WakeCount(std::sync::atomic::AtomicUsize);

impl std::task::Wake for WakeCount {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl WakeCount {
    fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Completions are applied where the provider delivers them: a task waiting for a
/// message is woken by the message, not by the completions of its own connection's
/// sends nor by the peer's credit grants, and the message is there when it runs.
#[tokio::test]
async fn only_a_message_wakes_the_task_waiting_for_one() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let (prov, lis, addr) = listening(IwarpOptions::default()).await;
    let cpd = prov.alloc_pd().unwrap();
    let server = tokio::spawn(async move {
        let req = lis.accept().await.unwrap();
        SmbDirectConnection::<SoftQp>::accept(req, Config::default())
            .await
            .unwrap()
    });
    let client: Conn = SmbDirectConnection::connect(&prov, &cpd, addr, Config::default())
        .await
        .unwrap();
    let server = server.await.unwrap();
    // The server waits for a message (one poll, with a waker that counts).
    let count = std::sync::Arc::new(WakeCount::default());
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut recv = Box::pin(server.recv_message());
    assert!(recv.as_mut().poll(&mut cx).is_pending());
    // Meanwhile it sends: each Send completes on its queue, and the client's
    // receives come back to it as credit grants.
    for i in 0..40u32 {
        let m = pattern(i, 100 + 300 * i as usize);
        server.send_message(&m).await.unwrap();
        assert_eq!(client.recv_message().await.unwrap().into_vec(), m);
    }
    assert_eq!(count.get(), 0, "woken with no message for it");
    client.send_message(b"ping").await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while count.get() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the message wakes its receiver");
    match recv.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(m)) => assert_eq!(m.bytes(), b"ping"),
        other => panic!("woken, but no message: {other:?}"),
    }
}

/// A READ's data goes by RDMA Writes that nobody waits for, its response right
/// behind them: every response (many in flight at once) arrives after its data is
/// in the client's buffer, byte-exact, and the source buffers are released only
/// when their Writes completed.
#[tokio::test]
async fn a_message_posted_behind_rdma_writes_arrives_after_their_data() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (prov, lis, addr) = listening(IwarpOptions::default()).await;
    let cpd = prov.alloc_pd().unwrap();
    const N: usize = 48;
    const LEN: usize = 70_000;
    let released = Arc::new(AtomicUsize::new(0));
    let rel = released.clone();
    let server = tokio::spawn(async move {
        let (conn, spd) = accept_one(lis, Config::default()).await;
        let m = conn.recv_message().await.unwrap().into_vec();
        let descs = BufferDescriptorV1::decode_list(&m).unwrap();
        for (i, d) in descs.iter().enumerate() {
            let src = spd
                .register(pattern(i as u32, LEN), Access::LOCAL_WRITE)
                .unwrap();
            let rel = rel.clone();
            let keep = src.clone();
            let release: smbx_direct::Release = Box::new(move |ok| {
                assert!(ok);
                drop(keep);
                rel.fetch_add(1, Ordering::SeqCst);
            });
            conn.rdma_write_posted(&src, 0, LEN as u64, &[*d], release)
                .await
                .unwrap();
            conn.send_message(&(i as u32).to_le_bytes()).await.unwrap();
        }
        conn.recv_message().await.unwrap_or_default().into_vec();
    });
    let conn: Conn = SmbDirectConnection::connect(&prov, &cpd, addr, Config::default())
        .await
        .unwrap();
    let sinks: Vec<_> = (0..N)
        .map(|_| {
            cpd.alloc(LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap()
        })
        .collect();
    let descs: Vec<_> = sinks
        .iter()
        .map(|s| Conn::describe(s, 0, LEN as u32).unwrap())
        .collect();
    conn.send_message(&BufferDescriptorV1::encode_list(&descs))
        .await
        .unwrap();
    for (i, sink) in sinks.iter().enumerate() {
        let m = conn.recv_message().await.unwrap().into_vec();
        assert_eq!(m, (i as u32).to_le_bytes());
        assert!(
            sink.with(|b| b == &pattern(i as u32, LEN)[..]),
            "the data of response {i} is in place when it arrives"
        );
    }
    conn.send_message(b"bye").await.unwrap();
    server.await.unwrap();
    assert_eq!(released.load(Ordering::SeqCst), N, "every source released");
}

/// A posted RDMA Write into a buffer the client never registered fails at the
/// client, which ends the connection: the message posted behind it never arrives
/// as if the data had, and the server's side learns the connection is down.
#[tokio::test]
async fn a_failed_posted_write_breaks_the_connection_before_the_message_behind_it() {
    let (prov, lis, addr) = listening(IwarpOptions::default()).await;
    let cpd = prov.alloc_pd().unwrap();
    let server = tokio::spawn(async move {
        let (conn, spd) = accept_one(lis, Config::default()).await;
        let m = conn.recv_message().await.unwrap().into_vec();
        let d = BufferDescriptorV1::decode_list(&m).unwrap();
        let src = spd.register(pattern(3, 4096), Access::LOCAL_WRITE).unwrap();
        let posted = conn
            .rdma_write_posted(&src, 0, 4096, &d, Box::new(|_| {}))
            .await;
        let sent = conn.send_message(b"success").await;
        // The client's Terminate ends the connection here too.
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while !conn.is_closed() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .is_ok();
        (posted.is_ok() && sent.is_ok(), closed)
    });
    let conn: Conn = SmbDirectConnection::connect(&prov, &cpd, addr, Config::default())
        .await
        .unwrap();
    let bogus = BufferDescriptorV1 {
        offset: 0,
        token: 0x0bad_0bad,
        length: 4096,
    };
    conn.send_message(&BufferDescriptorV1::encode_list(&[bogus]))
        .await
        .unwrap();
    let got = tokio::time::timeout(std::time::Duration::from_secs(10), conn.recv_message())
        .await
        .expect("the connection ends");
    assert!(got.is_err(), "no message behind the failed Write: {got:?}");
    let (_, closed) = server.await.unwrap();
    assert!(closed, "the server's side is down too");
}

/// Messages sent from the caller's own buffer (soft-iWARP sends every fragment
/// from it: no copy into a send slot) arrive byte-exact at every fragment
/// boundary (8680 payload bytes a fragment at the default 8704 send size; an
/// 8 KiB READ response, 8272 bytes, is one), from a buffer with bytes before the
/// message, with and without CRC, and the buffer is let go once the message is
/// sent.
#[tokio::test]
async fn owned_messages_arrive_whole_at_every_fragment_boundary() {
    // Soft-iWARP receives a message of one fragment (8680 payload bytes at most)
    // into a buffer of its own, handed up as it is: the message starts past the
    // 24-byte data transfer header. A longer one is reassembled into a buffer
    // that starts with it.
    const FRAGMENT: usize = DEFAULT_MESSAGE_SIZE as usize - 24;
    fn start_of(n: usize) -> usize {
        if n <= FRAGMENT {
            24
        } else {
            0
        }
    }
    for crc in [true, false] {
        let (prov, lis, addr) = listening(IwarpOptions {
            crc,
            ..IwarpOptions::default()
        })
        .await;
        let cpd = prov.alloc_pd().unwrap();
        let f = FRAGMENT;
        let sizes = [
            1,
            511,
            512,
            8272,
            f - 1,
            f,
            f + 1,
            2 * f,
            2 * f + 1,
            100_000,
        ];
        let server = tokio::spawn(async move {
            let (conn, _spd) = accept_one(lis, Config::default()).await;
            for _ in 0..sizes.len() {
                let m = conn.recv_message().await.unwrap();
                assert_eq!(m.start(), start_of(m.len()), "{} bytes", m.len());
                // Echoed from a buffer of its own, 5 bytes into it.
                let mut b = vec![0xEE; 5];
                b.extend_from_slice(m.bytes());
                conn.send_message_owned(b, 5, None).await.unwrap();
            }
            conn.recv_message().await.unwrap_or_default().into_vec()
        });
        let conn: Conn = SmbDirectConnection::connect(&prov, &cpd, addr, Config::default())
            .await
            .unwrap();
        for (i, n) in sizes.into_iter().enumerate() {
            let m = pattern(100 + i as u32, n);
            let mut b = vec![0xAA; 3];
            b.extend_from_slice(&m);
            conn.send_message_owned(b, 3, None).await.unwrap();
            let got = conn.recv_message().await.unwrap();
            assert!(got.bytes() == m, "echo of {n} bytes (crc {crc})");
            assert_eq!(got.start(), start_of(n), "{n} bytes handed up in place");
        }
        conn.send_message(b"bye").await.unwrap();
        assert_eq!(server.await.unwrap(), b"bye");
        conn.close().await;
    }
}
