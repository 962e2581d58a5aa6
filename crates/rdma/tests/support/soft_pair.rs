//! A connected soft-iWARP pair on 127.0.0.1 and the helpers the file-range
//! tests (write_file.rs, read_file.rs) share; [`connected_via`] dials another
//! address (a relay of capture.rs) and posts receives before the MPA exchange.
//! The client's direct_faults.rs includes this file by path for [`dialed`].

#![allow(dead_code)]

use std::net::SocketAddr;

use smbx_rdma::iwarp::{IwarpOptions, SoftIwarp, SoftListener, SoftMr, SoftPd, SoftQp};
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
    let hold = move |qp: &SoftQp, _: &SoftPd| {
        if hold {
            assert!(qp.hold_driver(), "soft-iWARP hands its driver out");
        }
    };
    let (s, c) = connected_with(
        opts,
        (ConnParams::default(), hold),
        (ConnParams::default(), |_, _| ()),
    )
    .await;
    (s.qp, s.pd, c.qp, c.pd)
}

/// [`connected_via`] over a provider with `opts`, dialing its listener directly.
pub async fn connected_with<A, C>(
    opts: IwarpOptions,
    accepting: (ConnParams, impl FnOnce(&SoftQp, &SoftPd) -> A),
    connecting: (ConnParams, impl FnOnce(&SoftQp, &SoftPd) -> C),
) -> (End<A>, End<C>) {
    let prov = SoftIwarp::new(opts);
    let lis = listen(&prov).await;
    let addr = lis.local_addr();
    connected_via(&prov, lis, addr, accepting, connecting).await
}

/// One end of a connection.
pub struct End<T> {
    /// Its queue pair.
    pub qp: SoftQp,
    /// Its protection domain (on the accepting side, the connection's own).
    pub pd: SoftPd,
    /// What the peer offered in the MPA exchange.
    pub peer: PeerParams,
    /// What the end did before the MPA exchange returned (say the region its
    /// receives land in: [`post_recvs`]).
    pub before: T,
}

/// A listener of `prov` on 127.0.0.1 (a port of its own).
pub async fn listen(prov: &SoftIwarp) -> SoftListener {
    prov.listen("127.0.0.1:0".parse().unwrap(), QpCaps::default())
        .await
        .unwrap()
}

/// Connects to `lis` by dialing `dial` (its address, or a relay's in front of
/// it): the accepting end, then the connecting one. Each end offers its
/// parameters, and its closure runs on its queue pair and protection domain
/// before the MPA exchange (posting the receives the first messages land in).
pub async fn connected_via<A, C>(
    prov: &SoftIwarp,
    lis: SoftListener,
    dial: SocketAddr,
    accepting: (ConnParams, impl FnOnce(&SoftQp, &SoftPd) -> A),
    connecting: (ConnParams, impl FnOnce(&SoftQp, &SoftPd) -> C),
) -> (End<A>, End<C>) {
    tokio::join!(accepted(lis, accepting), dialed(prov, dial, connecting))
}

/// The next connection on `lis`, accepted with `params` after `before` ran.
async fn accepted<T>(
    lis: SoftListener,
    (params, before): (ConnParams, impl FnOnce(&SoftQp, &SoftPd) -> T),
) -> End<T> {
    let req = lis.accept().await.unwrap();
    let before = before(req.qp(), req.pd());
    let pd = req.pd().clone();
    let peer = req.peer().clone();
    let qp = req.accept(params).await.unwrap();
    End {
        qp,
        pd,
        peer,
        before,
    }
}

/// A connection from a new protection domain of `prov` to `addr`, offering
/// `params` after `before` ran.
pub async fn dialed<T>(
    prov: &SoftIwarp,
    addr: SocketAddr,
    (params, before): (ConnParams, impl FnOnce(&SoftQp, &SoftPd) -> T),
) -> End<T> {
    let pd = prov.alloc_pd().unwrap();
    let c = prov
        .connect(&pd, addr, QpCaps::default())
        .await
        .expect("TCP connect");
    let before = before(c.qp(), &pd);
    let (qp, peer) = c.connect(params).await.expect("MPA exchange");
    End {
        qp,
        pd,
        peer,
        before,
    }
}

/// Posts `n` receives of `size` bytes on `qp` into one new region of `pd`,
/// work request `first + i` at offset `i * size`; returns the region.
pub fn post_recvs(qp: &SoftQp, pd: &SoftPd, first: u64, n: usize, size: usize) -> SoftMr {
    let rbuf = pd.alloc(n * size, Access::LOCAL_WRITE).unwrap();
    for i in 0..n {
        qp.post_recv(
            first + i as u64,
            &[Sge::new(&rbuf, (i * size) as u64, size as u32)],
        )
        .unwrap();
    }
    rbuf
}
