//! Shared helpers of the transport crate's integration tests.

use std::sync::Arc;

use smbx_rdma::iwarp::IwarpOptions;
use smbx_transport::soft::{self, SoftDirectListener};
use smbx_transport::{DirectConfig, DirectLink};

/// A negotiated soft-iWARP SMB Direct pair on loopback: (server side, client side).
pub async fn pair() -> (Arc<dyn DirectLink>, Arc<dyn DirectLink>) {
    let listener = SoftDirectListener::bind(
        "127.0.0.1:0".parse().unwrap(),
        IwarpOptions::default(),
        DirectConfig::default(),
    )
    .await
    .unwrap();
    let client = tokio::spawn(soft::connect(
        listener.local_addr(),
        IwarpOptions::default(),
        DirectConfig::default(),
    ));
    let server = listener.accept().await.unwrap().negotiate().await.unwrap();
    (server, client.await.unwrap().unwrap())
}
