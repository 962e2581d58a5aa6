//! smbx-rdma: the RDMA provider interface and its providers.
//!
//! Boundaries: owns RDMA providers; imports no other smbx crate (SMB Direct lives in
//! smbx-direct, SMB2 in smbx-wire).
//!
//! * [`provider`] — the traits a provider implements ([`Provider`],
//!   [`ProtectionDomain`], [`MemoryRegion`], [`QueuePair`], [`Listener`],
//!   [`ConnectRequest`], [`Connecting`]), shaped after verbs/rdmacm.
//! * [`types`] — STags, access rights, work requests, completions,
//!   connection parameters.
//! * [`cq`] — the [`CompletionQueue`] consumers await, or handle where the
//!   provider delivers (a [`CompletionHandler`]).
//! * [`iwarp`] — the soft-iWARP provider: RFC 5044/6581 MPA, RFC 5041 DDP and
//!   RFC 5040 RDMAP over tokio TCP, with a sans-IO core.
//! * [`sock`] — socket calls the soft-iWARP driver shares with Direct TCP.
//! * [`verbs`] — the rdma-core provider (libibverbs/librdmacm, loaded at run
//!   time) for RDMA NICs and the kernel's siw and rxe.
//!
//! ```ignore
//! use smbx_rdma::{iwarp::SoftIwarp, *};
//! let prov = SoftIwarp::default();
//! let pd = prov.alloc_pd()?;
//! let mr = pd.alloc(8192, Access::LOCAL_WRITE)?;
//! let c = prov.connect(&pd, addr, QpCaps::default()).await?;
//! c.qp().post_recv(1, &[Sge::new(&mr, 0, 8192)])?;
//! let (qp, peer) = c.connect(ConnParams { private_data: vec![..], ird: 8, ord: 8 }).await?;
//! let done = qp.cq().next().await;
//! ```

#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod cq;
pub mod error;
pub mod iwarp;
pub mod provider;
pub mod sink;
pub mod sock;
pub mod source;
pub mod types;
pub mod verbs;

pub use cq::{CompletionHandler, CompletionQueue};
pub use error::{RdmaError, Result};
pub use provider::{
    ConnectRequest, Connecting, Driver, Listener, MemoryRegion, ProtectionDomain, Provider,
    QueuePair, OWNED_HEAD_MAX,
};
pub use sink::FileSink;
pub use source::FileRange;
pub use types::{
    Access, CloseReason, Completion, ConnParams, Granted, PeerParams, QpCaps, QpState, RemoteBuf,
    STag, SendOp, SendWr, Sge, TermInfo, WcOpcode, WcStatus, MAX_PRIVATE_DATA,
};
