//! SmbDirectConnection with its driver polled by its owner
//! (`accept_driven`/`connect_driven`) over soft-iWARP on 127.0.0.1, both ends in
//! one task of a single-threaded runtime: nothing of either connection is a task
//! of its own, yet they negotiate, exchange messages of several sizes and move
//! data by RDMA Write and Read; each driver ends once its connection has closed,
//! whichever end closes first.

use smbx_direct::{Config, SmbDirectConnection};
use std::net::SocketAddr;

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftListener, SoftPd, SoftQp};
use smbx_rdma::{
    Access, ConnectRequest, Driver, Listener, MemoryRegion, ProtectionDomain, Provider, QpCaps,
};

mod common;

use common::pattern;

type Conn = SmbDirectConnection<SoftQp>;

/// A soft-iWARP provider listening on 127.0.0.1, its address, and a protection
/// domain for the connecting side.
async fn listening() -> (SoftIwarp, SoftListener, SocketAddr, SoftPd) {
    let prov = SoftIwarp::new(IwarpOptions::default());
    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();
    let cpd = prov.alloc_pd().unwrap();
    (prov, lis, addr, cpd)
}

/// A server connection (and its protection domain) and a client connection,
/// with their drivers, none of them running.
async fn driven_pair() -> ((Conn, SoftPd, Driver), (Conn, SoftPd, Driver)) {
    let (prov, lis, addr, cpd) = listening().await;
    let (connected, client_connected) = tokio::sync::oneshot::channel::<()>();
    let server = async {
        let req = lis.accept().await.unwrap();
        let spd = req.pd().clone();
        let (conn, mut driver) = Conn::accept_driven(req, Config::default()).await.unwrap();
        // The server has taken the client's negotiate request; its response goes
        // out as its driver runs on.
        tokio::select! {
            () = &mut driver => panic!("the server's driver ended"),
            _ = client_connected => {}
        }
        (conn, spd, driver)
    };
    let client = async {
        let (conn, driver) = Conn::connect_driven(&prov, &cpd, addr, Config::default())
            .await
            .unwrap();
        connected.send(()).unwrap();
        (conn, cpd.clone(), driver)
    };
    tokio::join!(server, client)
}

#[tokio::test(flavor = "current_thread")]
async fn both_ends_driven_in_one_task() {
    let ((server, spd, sdrv), (client, cpd, cdrv)) = driven_pair().await;
    const N: usize = 256 * 1024;
    let work = async move {
        for (i, n) in [1usize, 1341, 65_536, 1 << 20].into_iter().enumerate() {
            let m = pattern(i as u32, n);
            client.send_message(&m).await.unwrap();
            let got = server.recv_message().await.unwrap().into_vec();
            assert!(got == m, "message of {n} bytes");
            server.send_message(&got).await.unwrap();
            assert!(client.recv_message().await.unwrap().into_vec() == m);
        }
        // The server's RDMA Write into the client's sink, and its RDMA Read
        // from the client's source.
        let sink = cpd
            .alloc(N, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
        let source = cpd
            .register(pattern(9, N), Access::LOCAL_WRITE | Access::REMOTE_READ)
            .unwrap();
        let sd = Conn::describe(&sink, 0, N as u32).unwrap();
        let rd = Conn::describe(&source, 0, N as u32).unwrap();
        let src = spd.register(pattern(7, N), Access::LOCAL_WRITE).unwrap();
        server.rdma_write(&src, 0, N as u64, &[sd]).await.unwrap();
        let dst = spd.alloc(N, Access::LOCAL_WRITE).unwrap();
        server.rdma_read(&dst, 0, N as u64, &[rd]).await.unwrap();
        assert!(dst.with(|b| b == pattern(9, N).as_slice()));
        assert!(sink.with(|b| b == pattern(7, N).as_slice()));
        // The client goes away: the server sees its connection end.
        drop(client);
        assert!(server.recv_message().await.is_err());
        assert!(server.is_closed());
    };
    // Both drivers end once their connections have closed.
    tokio::join!(sdrv, cdrv, work);
}

#[tokio::test(flavor = "current_thread")]
async fn the_owner_dropping_its_connection_ends_its_driver() {
    let ((server, _spd, sdrv), (client, _cpd, cdrv)) = driven_pair().await;
    let work = async move {
        client.send_message(b"hello").await.unwrap();
        assert_eq!(server.recv_message().await.unwrap().into_vec(), b"hello");
        // The serving end's loop ends first: it drops its connection, which
        // closes the socket; the client's receive fails.
        drop(server);
        assert!(client.recv_message().await.is_err());
        assert!(client.is_closed());
    };
    tokio::join!(sdrv, cdrv, work);
}

/// A peer that connects (MPA done) but never sends its negotiate request is
/// dropped at the negotiate timeout with the driver polled by the accepting task
/// (its timers run in that driver): accept_driven fails and the peer sees the
/// close.
#[tokio::test(flavor = "current_thread")]
async fn a_peer_that_never_negotiates_is_dropped_at_the_timeout() {
    use smbx_rdma::{ConnParams, Connecting, QueuePair};
    let (prov, lis, addr, cpd) = listening().await;
    let server = async {
        let req = lis.accept().await.unwrap();
        let cfg = Config {
            negotiate_timeout: Some(std::time::Duration::from_millis(200)),
            ..Config::default()
        };
        Conn::accept_driven(req, cfg).await.map(|_| ())
    };
    let client = async {
        let c = prov.connect(&cpd, addr, QpCaps::default()).await.unwrap();
        c.connect(ConnParams::default()).await.unwrap().0
    };
    let (accepted, qp) = tokio::join!(server, client);
    assert!(accepted.is_err(), "negotiation timed out");
    let closed = tokio::time::timeout(std::time::Duration::from_secs(10), qp.closed()).await;
    assert!(closed.is_ok(), "the peer sees the close");
}
