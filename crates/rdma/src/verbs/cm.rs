//! RDMA CM: connecting, listening and accepting, with private data and IRD/ORD.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::unix::AsyncFd;

use super::ffi::{self, ev, Lib, RdmaConnParam};
use super::mr::{VerbsMr, VerbsPd};
use super::qp::{next_event, Conn, OwnedEvent, Phase, VerbsQp};
use super::{new_id, set_nonblocking, Fd, IdHolder, Verbs, VerbsOptions};
use crate::error::{RdmaError, Result};
use crate::provider::{ConnectRequest, Connecting, Listener, Provider};
use crate::types::{ConnParams, PeerParams, QpCaps, MAX_PRIVATE_DATA};

/// RC retry counts sent in the connection parameters (7: retry for ever on
/// receiver-not-ready; SMB Direct's credits keep receives posted).
const RETRY_COUNT: u8 = 7;

/// Waits for the next CM event on `id`'s channel, at most `timeout`.
async fn wait_event(
    lib: &Lib,
    id: &IdHolder,
    fd: &AsyncFd<Fd>,
    timeout: std::time::Duration,
) -> Result<OwnedEvent> {
    let fut = async {
        loop {
            if let Some(e) = next_event(lib, id.channel) {
                return Ok(e);
            }
            let mut g = fd.readable().await.map_err(RdmaError::Io)?;
            g.clear_ready();
        }
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| RdmaError::Setup("RDMA CM timed out".into()))?
}

fn conn_param(p: &ConnParams, ird: u16, ord: u16) -> Result<RdmaConnParam> {
    if p.private_data.len() > MAX_PRIVATE_DATA {
        return Err(RdmaError::InvalidRequest("private data too long"));
    }
    Ok(RdmaConnParam {
        private_data: if p.private_data.is_empty() {
            std::ptr::null()
        } else {
            p.private_data.as_ptr().cast()
        },
        private_data_len: p.private_data.len() as u8,
        responder_resources: ird.min(255) as u8,
        initiator_depth: ord.min(255) as u8,
        retry_count: RETRY_COUNT,
        rnr_retry_count: RETRY_COUNT,
        ..RdmaConnParam::default()
    })
}

fn os_err(what: &str) -> RdmaError {
    RdmaError::Setup(format!("{what}: {}", std::io::Error::last_os_error()))
}

impl Provider for Verbs {
    type Mr = VerbsMr;
    type Pd = VerbsPd;
    type Qp = VerbsQp;
    type Connecting = VerbsConnecting;
    type Listener = VerbsListener;

    fn alloc_pd(&self) -> Result<VerbsPd> {
        Verbs::lib()?;
        Ok(VerbsPd::new())
    }

    async fn connect(
        &self,
        pd: &VerbsPd,
        addr: SocketAddr,
        caps: QpCaps,
    ) -> Result<VerbsConnecting> {
        let lib = Verbs::lib()?;
        let id = new_id(lib)?;
        let fd = super::async_fd(id.fd())?;
        let (ss, _) = ffi::to_sockaddr(addr);
        let ms = self.opts.resolve_timeout.as_millis().min(60_000) as i32;
        // SAFETY: live id; `ss` holds `addr` and outlives the call.
        let rc = unsafe {
            (lib.rdma_resolve_addr)(
                id.id,
                std::ptr::null(),
                (&ss as *const libc::sockaddr_storage).cast(),
                ms,
            )
        };
        if rc != 0 {
            return Err(os_err(&format!("rdma_resolve_addr({addr})")));
        }
        let e = wait_event(lib, &id, &fd, self.opts.resolve_timeout * 2).await?;
        if e.kind != ev::ADDR_RESOLVED {
            return Err(RdmaError::Setup(format!(
                "no RDMA device reaches {addr}: {} (status {})",
                ffi::event_name(lib, e.kind),
                e.status
            )));
        }
        // SAFETY: live id with a resolved address.
        if unsafe { (lib.rdma_resolve_route)(id.id, ms) } != 0 {
            return Err(os_err("rdma_resolve_route"));
        }
        let e = wait_event(lib, &id, &fd, self.opts.resolve_timeout * 2).await?;
        if e.kind != ev::ROUTE_RESOLVED {
            return Err(RdmaError::Setup(format!(
                "no route to {addr}: {} (status {})",
                ffi::event_name(lib, e.kind),
                e.status
            )));
        }
        pd.bind(lib, &id)?;
        let conn = Conn::create(lib, id, fd, pd.clone(), caps, &self.opts, Phase::Created)?;
        Ok(VerbsConnecting {
            qp: VerbsQp { conn },
        })
    }

    async fn listen(&self, addr: SocketAddr, caps: QpCaps) -> Result<VerbsListener> {
        let lib = Verbs::lib()?;
        let id = new_id(lib)?;
        let (ss, _) = ffi::to_sockaddr(addr);
        // SAFETY: live id; `ss` holds `addr`.
        if unsafe { (lib.rdma_bind_addr)(id.id, (&ss as *const libc::sockaddr_storage).cast()) }
            != 0
        {
            return Err(RdmaError::Io(std::io::Error::last_os_error()));
        }
        // SAFETY: bound id.
        if unsafe { (lib.rdma_listen)(id.id, 128) } != 0 {
            return Err(RdmaError::Io(std::io::Error::last_os_error()));
        }
        let local = ffi::id_addrs(id.id).0.unwrap_or(addr);
        let fd = super::async_fd(id.fd())?;
        Ok(VerbsListener {
            lib,
            fd,
            id,
            local,
            caps,
            opts: self.opts.clone(),
            removed: AtomicBool::new(false),
        })
    }
}

/// An active connection whose queue pair exists (address and route resolved).
pub struct VerbsConnecting {
    qp: VerbsQp,
}

impl Connecting for VerbsConnecting {
    type Qp = VerbsQp;

    fn qp(&self) -> &VerbsQp {
        &self.qp
    }

    async fn connect(self, params: ConnParams) -> Result<(VerbsQp, PeerParams)> {
        let qp = self.qp;
        let c = &qp.conn;
        let lim = c.pd.limits().ok_or(RdmaError::NotConnected)?;
        let ird = params.ird.min(lim.max_qp_rd_atom.min(255) as u16);
        let ord = params.ord.min(lim.max_qp_init_rd_atom.min(255) as u16);
        c.lock().phase = Phase::Connecting;
        let rc = {
            let mut p = conn_param(&params, ird, ord)?;
            // SAFETY: live id with a queue pair; `p` and the private data it
            // points to outlive the call (rdma_connect copies them).
            unsafe { (c.lib().rdma_connect)(c.id.id, &mut p) }
        };
        if rc != 0 {
            let e = os_err("rdma_connect");
            c.lock().phase = Phase::Failed(e.to_string());
            return Err(e);
        }
        match qp.wait_phase_change(&Phase::Connecting).await {
            Phase::Established => {
                let peer = {
                    let mut st = c.lock();
                    let peer_ird = if st.peer.ird == 0 { ord } else { st.peer.ird };
                    st.limits = (ird, ord.min(peer_ird));
                    st.peer.clone()
                };
                Ok((qp, peer))
            }
            Phase::Rejected(pd) => Err(RdmaError::Rejected(pd)),
            Phase::Failed(s) => Err(RdmaError::Setup(s)),
            other => Err(RdmaError::Setup(format!("unexpected state {other:?}"))),
        }
    }
}

/// A listening RDMA CM id.
pub struct VerbsListener {
    lib: &'static Lib,
    // Declared (so dropped) before `id`, whose channel owns the descriptor.
    fd: AsyncFd<Fd>,
    id: Arc<IdHolder>,
    local: SocketAddr,
    caps: QpCaps,
    opts: VerbsOptions,
    removed: AtomicBool,
}

impl VerbsListener {
    /// Whether the device under the listener was removed (`rdma link
    /// delete`, a driver unbound): the kernel has dropped its side of the
    /// listening id, so it accepts nothing more. Drop it (that lets librdmacm
    /// close the device) and listen again once a device has the address.
    pub fn device_removed(&self) -> bool {
        self.removed.load(Ordering::Relaxed)
    }

    /// Sets up a connection request's own channel, protection domain and
    /// queue pair. The request is refused on failure.
    fn request(&self, e: OwnedEvent) -> Result<VerbsConnectRequest> {
        let lib = self.lib;
        let child = e.id;
        // SAFETY: a plain constructor.
        let channel = unsafe { (lib.rdma_create_event_channel)() };
        if channel.is_null() {
            // SAFETY: the request's id, not yet handed to anyone.
            unsafe {
                (lib.rdma_reject)(child, std::ptr::null(), 0);
                (lib.rdma_destroy_id)(child);
            }
            return Err(os_err("rdma_create_event_channel"));
        }
        // SAFETY: the event that named `child` was acknowledged; moving it to
        // its own channel is allowed then.
        if unsafe { (lib.rdma_migrate_id)(child, channel) } != 0 {
            let err = os_err("rdma_migrate_id");
            // SAFETY: as above; the channel is unused.
            unsafe {
                (lib.rdma_reject)(child, std::ptr::null(), 0);
                (lib.rdma_destroy_id)(child);
                (lib.rdma_destroy_event_channel)(channel);
            }
            return Err(err);
        }
        let id = Arc::new(IdHolder {
            lib,
            id: child,
            channel,
        });
        let fail = |err: RdmaError| {
            // SAFETY: live id; refused before anything else used it.
            unsafe { (lib.rdma_reject)(child, std::ptr::null(), 0) };
            err
        };
        set_nonblocking(id.fd()).map_err(fail)?;
        let fd = super::async_fd(id.fd()).map_err(fail)?;
        let pd = VerbsPd::new();
        pd.bind(lib, &id).map_err(fail)?;
        let conn = Conn::create(
            lib,
            id,
            fd,
            pd.clone(),
            self.caps,
            &self.opts,
            Phase::Requested,
        )
        .map_err(fail)?;
        // As the kernel reports a request: initiator_depth is how many Reads we
        // may issue (the initiator's IRD), responder_resources how many it
        // will issue (its ORD).
        let peer = PeerParams {
            private_data: e.private,
            ird: u16::from(e.initiator_depth),
            ord: u16::from(e.responder_resources),
        };
        conn.lock().peer = peer.clone();
        let peer_addr = conn.peer_addr;
        Ok(VerbsConnectRequest {
            qp: VerbsQp { conn },
            pd,
            peer,
            peer_addr,
        })
    }
}

impl Listener for VerbsListener {
    type Qp = VerbsQp;
    type Pd = VerbsPd;
    type Request = VerbsConnectRequest;

    async fn accept(&self) -> Result<VerbsConnectRequest> {
        loop {
            if self.device_removed() {
                return Err(RdmaError::Setup(format!(
                    "the RDMA device under {} was removed",
                    self.local
                )));
            }
            let Some(e) = next_event(self.lib, self.id.channel) else {
                let mut g = self.fd.readable().await.map_err(RdmaError::Io)?;
                g.clear_ready();
                continue;
            };
            match e.kind {
                ev::CONNECT_REQUEST => match self.request(e) {
                    Ok(r) => return Ok(r),
                    Err(err) => tracing::warn!(error = %err, "refused an RDMA connection request"),
                },
                ev::DEVICE_REMOVAL => {
                    self.removed.store(true, Ordering::Relaxed);
                    // Marks the device dead in librdmacm: its context is closed
                    // when the last CM id on it (this one, once dropped, and
                    // the connections') is destroyed.
                    super::forget_removed_devices(self.lib);
                }
                k => {
                    tracing::debug!(event = %ffi::event_name(self.lib, k), "rdma cm listener event")
                }
            }
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// A connection request with its queue pair and protection domain made.
pub struct VerbsConnectRequest {
    qp: VerbsQp,
    pd: VerbsPd,
    peer: PeerParams,
    peer_addr: SocketAddr,
}

impl ConnectRequest for VerbsConnectRequest {
    type Qp = VerbsQp;
    type Pd = VerbsPd;

    fn peer(&self) -> &PeerParams {
        &self.peer
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    fn qp(&self) -> &VerbsQp {
        &self.qp
    }

    fn pd(&self) -> &VerbsPd {
        &self.pd
    }

    async fn accept(self, params: ConnParams) -> Result<VerbsQp> {
        let qp = self.qp;
        let c = &qp.conn;
        let lim = self.pd.limits().ok_or(RdmaError::NotConnected)?;
        let ird = params.ird.min(lim.max_qp_rd_atom.min(255) as u16);
        // Our ORD never exceeds the initiator's IRD.
        let mut ord = params.ord.min(lim.max_qp_init_rd_atom.min(255) as u16);
        if self.peer.ird != 0 {
            ord = ord.min(self.peer.ird);
        }
        {
            let mut st = c.lock();
            st.phase = Phase::Connecting;
            st.limits = (ird, ord);
        }
        let rc = {
            let mut p = conn_param(&params, ird, ord)?;
            // SAFETY: live id with its queue pair; `p` outlives the call.
            unsafe { (c.lib().rdma_accept)(c.id.id, &mut p) }
        };
        if rc != 0 {
            let e = os_err("rdma_accept");
            c.lock().phase = Phase::Failed(e.to_string());
            return Err(e);
        }
        match qp.wait_phase_change(&Phase::Connecting).await {
            Phase::Established => Ok(qp),
            Phase::Failed(s) => Err(RdmaError::Setup(s)),
            other => Err(RdmaError::Setup(format!("unexpected state {other:?}"))),
        }
    }

    async fn reject(self, private_data: &[u8]) -> Result<()> {
        if private_data.len() > MAX_PRIVATE_DATA {
            return Err(RdmaError::InvalidRequest("private data too long"));
        }
        let c = &self.qp.conn;
        c.lock().phase = Phase::Failed("rejected".into());
        // SAFETY: live id of an unanswered request.
        let rc = unsafe {
            (c.lib().rdma_reject)(
                c.id.id,
                private_data.as_ptr().cast(),
                private_data.len() as u8,
            )
        };
        if rc != 0 {
            return Err(os_err("rdma_reject"));
        }
        Ok(())
    }
}
