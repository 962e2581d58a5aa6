//! The rdma-core verbs provider: RDMA NICs (iWARP, RoCE, InfiniBand) and the
//! kernel's software devices (siw, rxe) through libibverbs and librdmacm.
//!
//! * [`ffi`] — the binding: rdma-core loaded with dlopen at run time (smbx
//!   builds without it and runs without it over TCP and soft-iWARP).
//! * [`device`] — the devices the kernel has (sysfs), for listing and for
//!   choosing a provider per address.
//! * [`mr`] — protection domains and memory regions.
//! * [`probe`] — what a device grants a queue pair, without a connection.
//! * the queue pair and its completion driver: completions come through the
//!   completion channel's file descriptor, registered with tokio (no busy
//!   polling unless [`VerbsOptions::busy_poll`]).
//! * RDMA CM: listen, accept (each connection on its own event channel and
//!   protection domain), connect, with private data and IRD/ORD.
//!
//! Invalidation: regions are `ibv_reg_mr` registrations; a local invalidate
//! or a peer's Send with Invalidate of one of our STags deregisters it (user
//! space has no fast-register MRs).

mod cm;
pub mod device;
mod ffi;
pub mod mr;
pub mod probe;
mod qp;

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

pub use cm::{VerbsConnectRequest, VerbsConnecting, VerbsListener};
pub use device::{devices, Device, Port, Transport};
pub use mr::{DeviceLimits, VerbsMr, VerbsPd};
pub use probe::{probe, Probe};
pub use qp::VerbsQp;

use crate::error::{RdmaError, Result};
use ffi::{IbvContext, Lib, RdmaCmId, RdmaEventChannel};

/// Verbs provider options.
#[derive(Clone, Debug)]
pub struct VerbsOptions {
    /// Poll the completion queue from the driver task instead of waiting on
    /// the completion channel: lowest latency, one core busy per connection.
    pub busy_poll: bool,
    /// Inline data to ask the device for: Sends up to this size are copied
    /// into the work request (0 disables; the device may grant less).
    pub max_inline: u32,
    /// Address and route resolution timeout.
    pub resolve_timeout: std::time::Duration,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        VerbsOptions {
            busy_poll: false,
            max_inline: 256,
            resolve_timeout: std::time::Duration::from_secs(5),
        }
    }
}

/// The verbs provider. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Verbs {
    pub(crate) opts: VerbsOptions,
}

impl Verbs {
    /// A provider with `opts`.
    pub fn new(opts: VerbsOptions) -> Self {
        Verbs { opts }
    }

    /// Whether rdma-core can be loaded; the error says what to install.
    pub fn available() -> std::result::Result<(), String> {
        ffi::lib().map(|_| ()).map_err(str::to_string)
    }

    pub(crate) fn lib() -> Result<&'static Lib> {
        ffi::lib().map_err(|e| RdmaError::Setup(e.to_string()))
    }
}

/// A CM id and its own event channel, destroyed together (after the queue
/// pair and the protection domain that use its device are gone).
pub(crate) struct IdHolder {
    lib: &'static Lib,
    pub id: *mut RdmaCmId,
    pub channel: *mut RdmaEventChannel,
}

// SAFETY: rdma-core's CM ids and channels may be used from any thread; they
// are destroyed once, in Drop.
unsafe impl Send for IdHolder {}
// SAFETY: as above.
unsafe impl Sync for IdHolder {}

impl IdHolder {
    /// The device context of the id (null until an address is bound or resolved).
    pub fn context(&self) -> *mut IbvContext {
        // SAFETY: `id` is live for as long as self.
        unsafe { (*self.id).verbs }
    }
    /// The event channel's descriptor.
    pub fn fd(&self) -> RawFd {
        // SAFETY: the channel is live for as long as self.
        unsafe { (*self.channel).fd }
    }
}

impl Drop for IdHolder {
    fn drop(&mut self) {
        // SAFETY: created by rdma_create_id on `channel`; every event was
        // acknowledged when read; the queue pair was destroyed before.
        unsafe {
            (self.lib.rdma_destroy_id)(self.id);
            (self.lib.rdma_destroy_event_channel)(self.channel);
        }
    }
}

/// Lets librdmacm notice that a device is gone, so that it closes its context
/// (the process's `/dev/infiniband/uverbsN` descriptor) once no CM id uses it.
/// librdmacm keeps one context per device, shared by every CM id on it, and
/// closes a device's context only after it has seen, in a fresh device list,
/// that the device was removed (`rdma link delete`, a driver unbound): listing
/// the devices (`rdma_get_devices`) is what makes it look. Called on each
/// DEVICE_REMOVAL event; a device that is still in use is marked dead then and
/// closed when its last CM id is destroyed. librdmacm (`sync_devices_list`)
/// ignores a list with no device at all: when the removed device was the last
/// one, its context stays open until a device is back. (Listing also opens
/// the contexts of the devices that remain; librdmacm keeps them, as it would
/// for any CM id on them.)
pub(crate) fn forget_removed_devices(lib: &Lib) {
    // SAFETY: a plain query; a null count pointer is allowed.
    let list = unsafe { (lib.rdma_get_devices)(std::ptr::null_mut()) };
    if !list.is_null() {
        // SAFETY: the list rdma_get_devices returned, freed once.
        unsafe { (lib.rdma_free_devices)(list) };
    }
}

/// Has librdmacm list the devices again ([`forget_removed_devices`]): a
/// device removed since it last looked is closed, or closed when its last CM
/// id goes. For a listener whose device was removed, while it waits for one
/// to come back. Does nothing without rdma-core.
pub fn refresh_devices() {
    if let Ok(lib) = Verbs::lib() {
        forget_removed_devices(lib);
    }
}

/// A descriptor owned by rdma-core, for tokio's AsyncFd (not closed on drop).
pub(crate) struct Fd(pub RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Registers an rdma-core descriptor with tokio (readable interest).
pub(crate) fn async_fd(fd: RawFd) -> Result<tokio::io::unix::AsyncFd<Fd>> {
    // SAFETY: `fd` is a CM event channel's or completion channel's descriptor,
    // which rdma-core keeps open until that channel is destroyed; every
    // AsyncFd on it is dropped before (the driver task and the listener drop
    // theirs before the objects holding the channel).
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(Fd(fd), tokio::io::Interest::READABLE)
    }
    .map_err(|e| RdmaError::Io(e.into_parts().1))
}

/// Sets O_NONBLOCK on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd) -> Result<()> {
    // SAFETY: fcntl on a descriptor rdma-core opened and keeps open.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(RdmaError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A new event channel (non-blocking) with a new RC CM id on it.
pub(crate) fn new_id(lib: &'static Lib) -> Result<Arc<IdHolder>> {
    // SAFETY: plain constructor.
    let channel = unsafe { (lib.rdma_create_event_channel)() };
    if channel.is_null() {
        return Err(RdmaError::Setup(format!(
            "rdma_create_event_channel: {} (is /dev/infiniband/rdma_cm there? the rdma_ucm module loaded?)",
            std::io::Error::last_os_error()
        )));
    }
    let mut id: *mut RdmaCmId = std::ptr::null_mut();
    // SAFETY: `channel` is live; `id` receives the new id.
    let rc =
        unsafe { (lib.rdma_create_id)(channel, &mut id, std::ptr::null_mut(), ffi::RDMA_PS_TCP) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: created above, unused.
        unsafe { (lib.rdma_destroy_event_channel)(channel) };
        return Err(RdmaError::Io(e));
    }
    let h = Arc::new(IdHolder { lib, id, channel });
    set_nonblocking(h.fd())?;
    Ok(h)
}
