//! Graceful shutdown (`Server::run_until`): once the shutdown future resolves the
//! listener is closed, logged-on connections that have nothing in flight are closed,
//! and `run_until` returns `Ok`. (With a request in flight: tests/interop/test_systemd.py.)

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use smbx_server::Server;
use smbx_wire::NtStatus;
use tokio::sync::oneshot;

#[tokio::test]
async fn run_until_stops_accepting_closes_connections_and_returns_ok() {
    let dir = tempfile::tempdir().unwrap();
    let store = Users(vec![("user".into(), smbx_passdb::nt_hash("pass"))]);
    let server = Server::bind_with_credentials(Arc::new(test_config(dir.path())), Arc::new(store))
        .await
        .unwrap();
    let addr = server.local_addrs()[0];
    let state = server.state();
    let srv = TestServer {
        addr,
        state: state.clone(),
    };
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stop_rx.await;
    }));

    // Two logged-on clients, idle.
    let mut a = connect_share(&srv).await;
    let mut b = connect_share(&srv).await;
    assert_eq!(
        a.request(
            smbx_wire::Command::Echo,
            &smbx_wire::simple::encode_simple()
        )
        .await
        .status(),
        NtStatus::SUCCESS
    );
    assert_eq!(state.connections.len(), 2);
    assert_eq!(state.shutdown.deadline(), None);

    stop_tx.send(()).unwrap();
    // Bounded by the drain deadline plus the close grace (a hang fails here).
    let result = tokio::time::timeout(
        smbx_server::shutdown::DRAIN_TIMEOUT
            + smbx_server::shutdown::CLOSE_GRACE
            + Duration::from_secs(10),
        running,
    )
    .await
    .expect("run_until did not return")
    .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert!(state.shutdown.deadline().is_some());
    assert!(state.connections.is_empty());
    // Both clients see the connection end.
    assert!(a.recv_frame().await.is_none());
    assert!(b.recv_frame().await.is_none());
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
