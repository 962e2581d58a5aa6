//! A connected soft-iWARP pair on 127.0.0.1 and the helpers the file-range
//! tests (write_file.rs, read_file.rs) share.

#![allow(dead_code)]

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftQp};
use smbx_rdma::*;

/// Bytes that differ at every offset of a long run (no period of a page or an
/// FPDU), so a misplaced piece shows.
pub fn pattern(n: usize) -> Vec<u8> {
    seeded(0, n)
}

/// [`pattern`] from `seed`: the messages or regions of one test differ.
pub fn seeded(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed as u32) as u8
                ^ (i >> 11) as u8
        })
        .collect()
}

/// The next completion of `qp`, which must have succeeded.
pub async fn next_ok<Q: QueuePair>(qp: &Q) -> Completion {
    let c = qp.cq().next().await.expect("completion");
    assert_eq!(c.status, WcStatus::Success, "{c:?}");
    c
}

/// A connected pair with both protection domains: the accepting side's queue pair
/// and protection domain, then the connecting side's.
pub type Pds = (
    SoftQp,
    <SoftIwarp as Provider>::Pd,
    SoftQp,
    <SoftIwarp as Provider>::Pd,
);

/// A connection over a provider with `opts` (IRD and ORD 16 each way): the
/// accepting side's queue pair, the connecting side's, and the connecting side's
/// protection domain.
pub async fn connected(opts: IwarpOptions) -> (SoftQp, SoftQp, <SoftIwarp as Provider>::Pd) {
    let (sqp, _, cqp, cpd) = connected_pds(opts).await;
    (sqp, cqp, cpd)
}

/// [`connected`] with both sides' protection domains: the accepting side's queue
/// pair and protection domain, then the connecting side's.
pub async fn connected_pds(opts: IwarpOptions) -> Pds {
    connect(opts, false).await
}

/// [`connected_pds`] whose accepting side holds its driver back
/// ([`QueuePair::hold_driver`]): the test takes it ([`QueuePair::take_driver`])
/// and polls it; nothing moves on that side until then.
pub async fn connected_pds_held(opts: IwarpOptions) -> Pds {
    connect(opts, true).await
}

/// [`connected_pds`], the accepting side's driver held back when `hold`.
async fn connect(opts: IwarpOptions, hold: bool) -> Pds {
    let prov = SoftIwarp::new(opts);
    let lis = prov
        .listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap();
    let addr = lis.local_addr();
    let params = ConnParams {
        private_data: Vec::new(),
        ird: 16,
        ord: 16,
    };
    let accepted = params.clone();
    let server = tokio::spawn(async move {
        let req = lis.accept().await.unwrap();
        if hold {
            assert!(req.qp().hold_driver(), "soft-iWARP hands its driver out");
        }
        let pd = req.pd().clone();
        (req.accept(accepted).await.unwrap(), pd)
    });
    let cpd = prov.alloc_pd().unwrap();
    let c = prov.connect(&cpd, addr, QpCaps::default()).await.unwrap();
    let (cqp, _) = c.connect(params).await.unwrap();
    let (sqp, spd) = server.await.unwrap();
    (sqp, spd, cqp, cpd)
}
