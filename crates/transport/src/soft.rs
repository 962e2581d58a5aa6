//! SMB Direct over the soft-iWARP provider: listening and connecting.

use std::net::SocketAddr;
use std::sync::Arc;

use smbx_direct::adapter::qp_caps;
use smbx_direct::{Config, DirectError, SmbDirectConnection};
use smbx_rdma::iwarp::{IwarpOptions, SoftConnectRequest, SoftIwarp, SoftListener, SoftPd, SoftQp};
use smbx_rdma::{ConnectRequest, Driver, Listener, Provider};

use crate::direct::{DirectLink, Link};

/// [`DirectLink::rdma_threshold`] for READs over soft-iWARP: at and below 16 KiB a
/// READ's data costs less inline than by RDMA Write. Both cross the same TCP stream
/// (the RDMA Write copies no fewer bytes than the Send), and RDMA adds a
/// registration, a transfer and its completion per I/O: 8 KiB random reads at QD32
/// ran at 0.54x TCP by RDMA and 0.81x inline; at 16 KiB the two were even, at
/// 32 KiB RDMA led. Measured again once the receive batch counted messages
/// (08d46e8), with `rdma_threshold=4096` against this one: 8 KiB QD32 was higher
/// by RDMA in 2 of 8 pairs (client CPU per READ lower in 6, server's in 2), 12 KiB
/// QD32 2 of 8, 16 KiB QD32 4 of 8, 8 KiB QD1 3 of 8, so it stays. The test is
/// `len > threshold`: a READ of exactly the threshold goes inline.
pub const SOFT_RDMA_READ_THRESHOLD: usize = 16 * 1024;

/// [`DirectLink::rdma_threshold`] for WRITEs over soft-iWARP: an RDMA Read costs a
/// Read Request's round trip more, so WRITEs up to 32 KiB go inline (8 KiB random
/// writes at QD32 ran 1.9-2.6x faster inline than by RDMA, 16 KiB 1.6-4.1x, 32 KiB
/// 1.8-2.4x; 64 KiB was even, 512 KiB 2x faster by RDMA).
pub const SOFT_RDMA_WRITE_THRESHOLD: usize = 32 * 1024;

/// The soft-iWARP provider's queue pairs and registered memory in this process
/// now (for metrics).
pub use smbx_rdma::iwarp::{stats as provider_stats, ProviderStats};

/// A listening soft-iWARP endpoint for SMB Direct.
pub struct SoftDirectListener {
    listener: SoftListener,
    config: Config,
}

/// A connection request whose MPA exchange is done; [`Incoming::negotiate`]
/// accepts it and runs the SMB Direct negotiation (do that off the accept loop).
pub struct Incoming {
    request: SoftConnectRequest,
    config: Config,
}

impl SoftDirectListener {
    /// Listens on `addr` with the provider options `opts` and SMB Direct
    /// parameters `config`.
    pub async fn bind(
        addr: SocketAddr,
        opts: IwarpOptions,
        config: Config,
    ) -> Result<Self, DirectError> {
        config.validate()?;
        let provider = SoftIwarp::new(opts);
        let listener = provider.listen(addr, qp_caps(&config)).await?;
        Ok(SoftDirectListener { listener, config })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// The next connection request.
    pub async fn accept(&self) -> Result<Incoming, DirectError> {
        let request = self.listener.accept().await?;
        Ok(Incoming {
            request,
            config: self.config.clone(),
        })
    }
}

impl Incoming {
    /// The initiator's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.request.peer_addr()
    }

    /// Accepts and negotiates (bounded by the negotiate timeout).
    pub async fn negotiate(self) -> Result<Arc<dyn DirectLink>, DirectError> {
        // The connection's own protection domain, for its registrations.
        let pd = self.request.pd().clone();
        let conn = SmbDirectConnection::accept(self.request, self.config).await?;
        Ok(Arc::new(link(conn, pd)))
    }

    /// Like [`Incoming::negotiate`], with the connection's driver (the socket's
    /// I/O and the SMB Direct timers) handed to the caller instead of running as
    /// tasks of their own: poll it in the task that serves the link, joined with
    /// it, until it ends ([`SmbDirectConnection::accept_driven`]).
    pub async fn negotiate_driven(self) -> Result<(Arc<dyn DirectLink>, Driver), DirectError> {
        let pd = self.request.pd().clone();
        let (conn, driver) = SmbDirectConnection::accept_driven(self.request, self.config).await?;
        Ok((Arc::new(link(conn, pd)), driver))
    }
}

/// The link of a soft-iWARP SMB Direct connection, with its RDMA thresholds.
fn link(conn: SmbDirectConnection<SoftQp>, pd: SoftPd) -> Link<SoftIwarp> {
    Link::<SoftIwarp>::new(conn, pd)
        .with_rdma_threshold(SOFT_RDMA_READ_THRESHOLD, SOFT_RDMA_WRITE_THRESHOLD)
}

/// Connects to an SMB Direct server over soft-iWARP and negotiates.
pub async fn connect(
    addr: SocketAddr,
    opts: IwarpOptions,
    config: Config,
) -> Result<Arc<dyn DirectLink>, DirectError> {
    let provider = SoftIwarp::new(opts);
    let pd = provider.alloc_pd()?;
    let conn = SmbDirectConnection::connect(&provider, &pd, addr, config).await?;
    Ok(Arc::new(link(conn, pd)))
}

/// Like [`connect`], with the connection's driver (soft-iWARP's socket I/O and the
/// SMB Direct timers) handed to the caller to poll in the task that uses the link,
/// until it ends ([`SmbDirectConnection::connect_driven`]), as the server's
/// [`Incoming::negotiate_driven`] does.
pub async fn connect_driven(
    addr: SocketAddr,
    opts: IwarpOptions,
    config: Config,
) -> Result<(Arc<dyn DirectLink>, Driver), DirectError> {
    let provider = SoftIwarp::new(opts);
    let pd = provider.alloc_pd()?;
    let (conn, driver) = SmbDirectConnection::connect_driven(&provider, &pd, addr, config).await?;
    Ok((Arc::new(link(conn, pd)), driver))
}

pub use smbx_rdma::iwarp::IwarpOptions as Options;
pub use smbx_rdma::iwarp::SocketSetup;
