//! The thin binding to rdma-core: libibverbs.so.1 and librdmacm.so.1 opened
//! with dlopen(3) at run time, so smbx builds without rdma-core's headers and
//! runs (over TCP and soft-iWARP) on machines that do not have it.
//!
//! Only the calls the provider needs are bound. The structures are declared
//! with the layout of rdma-core's public ABI (verbs.h, rdma_cma.h; the sizes
//! and offsets are checked at compile time against values measured with the
//! C compiler on rdma-core 44). Only prefixes of structures that rdma-core
//! allocates itself are declared. Every `unsafe` block in this crate's verbs
//! provider is a call through this table or a read of one of these
//! structures.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr`, with the `rdma` member of its `wr` union spelled out.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: c_uint,
    pub send_flags: c_uint,
    /// `imm_data` / `invalidate_rkey`.
    pub invalidate_rkey: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub _wr_rest: [u32; 5],
    pub _qp_type: [u32; 2],
    pub _bind_mw: [u64; 6],
}

impl Default for IbvSendWr {
    fn default() -> Self {
        IbvSendWr {
            wr_id: 0,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode: 0,
            send_flags: 0,
            invalidate_rkey: 0,
            remote_addr: 0,
            rkey: 0,
            _wr_rest: [0; 5],
            _qp_type: [0; 2],
            _bind_mw: [0; 6],
        }
    }
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IbvWc {
    pub wr_id: u64,
    pub status: c_uint,
    pub opcode: c_uint,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` / `invalidated_rkey`.
    pub invalidated_rkey: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_uint,
    pub sq_sig_all: c_int,
}

/// The start of `struct ibv_mr` (rdma-core allocates it).
#[repr(C)]
pub(crate) struct IbvMr {
    pub context: *mut c_void,
    pub pd: *mut c_void,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_context_ops`, up to `post_recv`: the data-path calls are
/// inline functions in verbs.h that call through this table.
#[repr(C)]
pub(crate) struct IbvContextOps {
    _before_poll_cq: [*const c_void; 11],
    pub poll_cq: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut IbvWc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut c_void, c_int) -> c_int>,
    _before_post_send: [*const c_void; 12],
    pub post_send:
        Option<unsafe extern "C" fn(*mut c_void, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut c_void, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int>,
}

/// The start of `struct ibv_context`.
#[repr(C)]
pub(crate) struct IbvContext {
    pub device: *mut c_void,
    pub ops: IbvContextOps,
}

/// The start of `struct ibv_cq` and of `struct ibv_qp`: both begin with
/// their context.
#[repr(C)]
pub(crate) struct WithContext {
    pub context: *mut IbvContext,
}

/// The start of `struct ibv_comp_channel`.
#[repr(C)]
pub(crate) struct IbvCompChannel {
    pub context: *mut c_void,
    pub fd: c_int,
}

/// `struct rdma_event_channel`.
#[repr(C)]
pub(crate) struct RdmaEventChannel {
    pub fd: c_int,
}

/// The start of `struct rdma_cm_id`.
#[repr(C)]
pub(crate) struct RdmaCmId {
    pub verbs: *mut IbvContext,
    pub channel: *mut RdmaEventChannel,
    pub context: *mut c_void,
    pub qp: *mut c_void,
    /// `route.addr.src_addr` (`rdma_get_local_addr` is an inline function).
    pub src: libc::sockaddr_storage,
    /// `route.addr.dst_addr` (`rdma_get_peer_addr`).
    pub dst: libc::sockaddr_storage,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RdmaConnParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

impl Default for RdmaConnParam {
    fn default() -> Self {
        RdmaConnParam {
            private_data: std::ptr::null(),
            private_data_len: 0,
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: 0,
            qp_num: 0,
        }
    }
}

/// The start of `struct rdma_cm_event` (its `param` union read as `conn`).
#[repr(C)]
pub(crate) struct RdmaCmEvent {
    pub id: *mut RdmaCmId,
    pub listen_id: *mut RdmaCmId,
    pub event: c_int,
    pub status: c_int,
    pub conn: RdmaConnParam,
}

/// `struct ibv_device_attr`, read field by field from its bytes.
#[repr(C, align(8))]
pub(crate) struct IbvDeviceAttr(pub [u8; 232]);

impl IbvDeviceAttr {
    fn u32_at(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[off..off + 4]);
        u32::from_ne_bytes(b)
    }
    /// `max_mr_size`.
    pub fn max_mr_size(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[80..88]);
        u64::from_ne_bytes(b)
    }
    /// `max_qp_wr`.
    pub fn max_qp_wr(&self) -> u32 {
        self.u32_at(112)
    }
    /// `device_cap_flags`.
    pub fn device_cap_flags(&self) -> u32 {
        self.u32_at(116)
    }
    /// `max_sge`.
    pub fn max_sge(&self) -> u32 {
        self.u32_at(120)
    }
    /// `max_cqe`.
    pub fn max_cqe(&self) -> u32 {
        self.u32_at(132)
    }
    /// `max_qp_rd_atom`.
    pub fn max_qp_rd_atom(&self) -> u32 {
        self.u32_at(144)
    }
    /// `max_qp_init_rd_atom`.
    pub fn max_qp_init_rd_atom(&self) -> u32 {
        self.u32_at(156)
    }
    /// `max_mw`.
    pub fn max_mw(&self) -> u32 {
        self.u32_at(176)
    }
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<IbvSge>() == 16);
    assert!(size_of::<IbvSendWr>() == 128);
    assert!(offset_of!(IbvSendWr, sg_list) == 16);
    assert!(offset_of!(IbvSendWr, opcode) == 28);
    assert!(offset_of!(IbvSendWr, invalidate_rkey) == 36);
    assert!(offset_of!(IbvSendWr, remote_addr) == 40);
    assert!(offset_of!(IbvSendWr, rkey) == 48);
    assert!(size_of::<IbvRecvWr>() == 32);
    assert!(size_of::<IbvWc>() == 48);
    assert!(offset_of!(IbvWc, byte_len) == 20);
    assert!(offset_of!(IbvWc, invalidated_rkey) == 24);
    assert!(offset_of!(IbvWc, wc_flags) == 36);
    assert!(size_of::<IbvQpInitAttr>() == 64);
    assert!(offset_of!(IbvQpInitAttr, cap) == 32);
    assert!(offset_of!(IbvQpInitAttr, qp_type) == 52);
    assert!(offset_of!(IbvMr, lkey) == 36);
    assert!(offset_of!(IbvMr, rkey) == 40);
    assert!(offset_of!(IbvContext, ops) == 8);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, poll_cq) == 96);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, req_notify_cq) == 104);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, post_send) == 208);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, post_recv) == 216);
    assert!(offset_of!(IbvCompChannel, fd) == 8);
    assert!(offset_of!(RdmaCmId, context) == 16);
    assert!(offset_of!(RdmaCmId, qp) == 24);
    assert!(offset_of!(RdmaCmId, src) == 32);
    assert!(offset_of!(RdmaCmId, dst) == 160);
    assert!(size_of::<RdmaConnParam>() == 24);
    assert!(offset_of!(RdmaConnParam, responder_resources) == 9);
    assert!(offset_of!(RdmaConnParam, qp_num) == 16);
    assert!(offset_of!(RdmaCmEvent, event) == 16);
    assert!(offset_of!(RdmaCmEvent, conn) == 24);
};

/// `IBV_QPT_RC`.
pub(crate) const IBV_QPT_RC: c_uint = 2;
/// `RDMA_PS_TCP`.
pub(crate) const RDMA_PS_TCP: c_int = 0x0106;
/// `IBV_SEND_SIGNALED`, `IBV_SEND_SOLICITED`, `IBV_SEND_INLINE`.
pub(crate) const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub(crate) const IBV_SEND_SOLICITED: c_uint = 1 << 2;
pub(crate) const IBV_SEND_INLINE: c_uint = 1 << 3;
/// `IBV_WC_WITH_INV`.
pub(crate) const IBV_WC_WITH_INV: c_uint = 1 << 3;
/// `enum ibv_wr_opcode` values used.
pub(crate) const IBV_WR_RDMA_WRITE: c_uint = 0;
pub(crate) const IBV_WR_SEND: c_uint = 2;
pub(crate) const IBV_WR_RDMA_READ: c_uint = 4;
pub(crate) const IBV_WR_SEND_WITH_INV: c_uint = 9;
/// `enum rdma_cm_event_type` values.
pub(crate) mod ev {
    pub const ADDR_RESOLVED: i32 = 0;
    pub const ADDR_ERROR: i32 = 1;
    pub const ROUTE_RESOLVED: i32 = 2;
    pub const ROUTE_ERROR: i32 = 3;
    pub const CONNECT_REQUEST: i32 = 4;
    pub const CONNECT_ERROR: i32 = 6;
    pub const UNREACHABLE: i32 = 7;
    pub const REJECTED: i32 = 8;
    pub const ESTABLISHED: i32 = 9;
    pub const DISCONNECTED: i32 = 10;
    pub const DEVICE_REMOVAL: i32 = 11;
}

type P = *mut c_void;

/// The rdma-core calls, resolved once per process.
pub(crate) struct Lib {
    pub ibv_get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut P,
    pub ibv_free_device_list: unsafe extern "C" fn(*mut P),
    pub ibv_get_device_name: unsafe extern "C" fn(P) -> *const c_char,
    pub ibv_open_device: unsafe extern "C" fn(P) -> *mut IbvContext,
    pub ibv_close_device: unsafe extern "C" fn(*mut IbvContext) -> c_int,
    pub ibv_create_qp: unsafe extern "C" fn(P, *mut IbvQpInitAttr) -> P,
    pub ibv_destroy_qp: unsafe extern "C" fn(P) -> c_int,
    pub ibv_query_device: unsafe extern "C" fn(*mut IbvContext, *mut IbvDeviceAttr) -> c_int,
    pub ibv_alloc_pd: unsafe extern "C" fn(*mut IbvContext) -> P,
    pub ibv_dealloc_pd: unsafe extern "C" fn(P) -> c_int,
    pub ibv_reg_mr: unsafe extern "C" fn(P, *mut c_void, usize, c_int) -> *mut IbvMr,
    pub ibv_dereg_mr: unsafe extern "C" fn(*mut IbvMr) -> c_int,
    pub ibv_create_comp_channel: unsafe extern "C" fn(*mut IbvContext) -> *mut IbvCompChannel,
    pub ibv_destroy_comp_channel: unsafe extern "C" fn(*mut IbvCompChannel) -> c_int,
    pub ibv_create_cq:
        unsafe extern "C" fn(*mut IbvContext, c_int, P, *mut IbvCompChannel, c_int) -> P,
    pub ibv_destroy_cq: unsafe extern "C" fn(P) -> c_int,
    pub ibv_get_cq_event: unsafe extern "C" fn(*mut IbvCompChannel, *mut P, *mut P) -> c_int,
    pub ibv_ack_cq_events: unsafe extern "C" fn(P, c_uint),
    pub rdma_create_event_channel: unsafe extern "C" fn() -> *mut RdmaEventChannel,
    pub rdma_destroy_event_channel: unsafe extern "C" fn(*mut RdmaEventChannel),
    pub rdma_create_id:
        unsafe extern "C" fn(*mut RdmaEventChannel, *mut *mut RdmaCmId, P, c_int) -> c_int,
    pub rdma_destroy_id: unsafe extern "C" fn(*mut RdmaCmId) -> c_int,
    pub rdma_bind_addr: unsafe extern "C" fn(*mut RdmaCmId, *const libc::sockaddr) -> c_int,
    pub rdma_listen: unsafe extern "C" fn(*mut RdmaCmId, c_int) -> c_int,
    pub rdma_resolve_addr: unsafe extern "C" fn(
        *mut RdmaCmId,
        *const libc::sockaddr,
        *const libc::sockaddr,
        c_int,
    ) -> c_int,
    pub rdma_resolve_route: unsafe extern "C" fn(*mut RdmaCmId, c_int) -> c_int,
    pub rdma_create_qp: unsafe extern "C" fn(*mut RdmaCmId, P, *mut IbvQpInitAttr) -> c_int,
    pub rdma_destroy_qp: unsafe extern "C" fn(*mut RdmaCmId),
    pub rdma_connect: unsafe extern "C" fn(*mut RdmaCmId, *mut RdmaConnParam) -> c_int,
    pub rdma_accept: unsafe extern "C" fn(*mut RdmaCmId, *mut RdmaConnParam) -> c_int,
    pub rdma_reject: unsafe extern "C" fn(*mut RdmaCmId, *const c_void, u8) -> c_int,
    pub rdma_disconnect: unsafe extern "C" fn(*mut RdmaCmId) -> c_int,
    pub rdma_get_cm_event:
        unsafe extern "C" fn(*mut RdmaEventChannel, *mut *mut RdmaCmEvent) -> c_int,
    pub rdma_ack_cm_event: unsafe extern "C" fn(*mut RdmaCmEvent) -> c_int,
    pub rdma_migrate_id: unsafe extern "C" fn(*mut RdmaCmId, *mut RdmaEventChannel) -> c_int,
    pub rdma_event_str: unsafe extern "C" fn(c_int) -> *const c_char,
    pub rdma_get_devices: unsafe extern "C" fn(*mut c_int) -> *mut *mut IbvContext,
    pub rdma_free_devices: unsafe extern "C" fn(*mut *mut IbvContext),
}

static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();

/// The library names tried, in order.
const IBVERBS: &CStr = c"libibverbs.so.1";
const RDMACM: &CStr = c"librdmacm.so.1";

/// rdma-core's calls, or why they cannot be had (rdma-core is not installed).
pub(crate) fn lib() -> Result<&'static Lib, &'static str> {
    LIB.get_or_init(load).as_ref().map_err(|e| e.as_str())
}

fn open(name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: dlopen with a valid NUL-terminated name; the handle is kept for
    // the life of the process (never dlclose'd), so resolved symbols stay valid.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        return Err(format!(
            "{} not found: rdma-core is not installed (Debian: apt-get install libibverbs1 librdmacm1 ibverbs-providers)",
            name.to_string_lossy()
        ));
    }
    Ok(h)
}

fn sym(h: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: `h` is a live dlopen handle and `name` NUL-terminated.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    if p.is_null() {
        return Err(format!(
            "rdma-core lacks {} (too old an rdma-core?)",
            name.to_string_lossy()
        ));
    }
    Ok(p)
}

/// `p` as the function pointer type `F`.
///
/// # Safety
/// `p` must be a function whose C prototype `F` spells.
unsafe fn fn_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked); the caller vouches for the prototype.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn load() -> Result<Lib, String> {
    let v = open(IBVERBS)?;
    let c = open(RDMACM)?;
    macro_rules! f {
        ($h:expr, $name:ident) => {{
            let p = sym(
                $h,
                &std::ffi::CString::new(stringify!($name)).expect("no NUL"),
            )?;
            // SAFETY: the symbol was resolved from rdma-core by its C name; the
            // Rust type of the field it lands in is that function's C prototype
            // (verbs.h, rdma_cma.h).
            unsafe { fn_ptr(p) }
        }};
    }
    Ok(Lib {
        ibv_get_device_list: f!(v, ibv_get_device_list),
        ibv_free_device_list: f!(v, ibv_free_device_list),
        ibv_get_device_name: f!(v, ibv_get_device_name),
        ibv_open_device: f!(v, ibv_open_device),
        ibv_close_device: f!(v, ibv_close_device),
        ibv_create_qp: f!(v, ibv_create_qp),
        ibv_destroy_qp: f!(v, ibv_destroy_qp),
        ibv_query_device: f!(v, ibv_query_device),
        ibv_alloc_pd: f!(v, ibv_alloc_pd),
        ibv_dealloc_pd: f!(v, ibv_dealloc_pd),
        ibv_reg_mr: f!(v, ibv_reg_mr),
        ibv_dereg_mr: f!(v, ibv_dereg_mr),
        ibv_create_comp_channel: f!(v, ibv_create_comp_channel),
        ibv_destroy_comp_channel: f!(v, ibv_destroy_comp_channel),
        ibv_create_cq: f!(v, ibv_create_cq),
        ibv_destroy_cq: f!(v, ibv_destroy_cq),
        ibv_get_cq_event: f!(v, ibv_get_cq_event),
        ibv_ack_cq_events: f!(v, ibv_ack_cq_events),
        rdma_create_event_channel: f!(c, rdma_create_event_channel),
        rdma_destroy_event_channel: f!(c, rdma_destroy_event_channel),
        rdma_create_id: f!(c, rdma_create_id),
        rdma_destroy_id: f!(c, rdma_destroy_id),
        rdma_bind_addr: f!(c, rdma_bind_addr),
        rdma_listen: f!(c, rdma_listen),
        rdma_resolve_addr: f!(c, rdma_resolve_addr),
        rdma_resolve_route: f!(c, rdma_resolve_route),
        rdma_create_qp: f!(c, rdma_create_qp),
        rdma_destroy_qp: f!(c, rdma_destroy_qp),
        rdma_connect: f!(c, rdma_connect),
        rdma_accept: f!(c, rdma_accept),
        rdma_reject: f!(c, rdma_reject),
        rdma_disconnect: f!(c, rdma_disconnect),
        rdma_get_cm_event: f!(c, rdma_get_cm_event),
        rdma_ack_cm_event: f!(c, rdma_ack_cm_event),
        rdma_migrate_id: f!(c, rdma_migrate_id),
        rdma_event_str: f!(c, rdma_event_str),
        rdma_get_devices: f!(c, rdma_get_devices),
        rdma_free_devices: f!(c, rdma_free_devices),
    })
}

/// A `sockaddr_storage` holding `addr`, and its length.
pub(crate) fn to_sockaddr(addr: std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// The address at `sa` (from rdma-core), if it is IPv4 or IPv6.
pub(crate) fn from_sockaddr(sa: *const libc::sockaddr) -> Option<std::net::SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: `sa` points to a sockaddr rdma-core filled (inside its cm_id);
    // the family says which structure it is.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let sin = &*(sa as *const libc::sockaddr_in);
                Some(std::net::SocketAddr::new(
                    std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(),
                    u16::from_be(sin.sin_port),
                ))
            }
            libc::AF_INET6 => {
                let sin6 = &*(sa as *const libc::sockaddr_in6);
                Some(std::net::SocketAddr::V6(std::net::SocketAddrV6::new(
                    sin6.sin6_addr.s6_addr.into(),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// rdma-core's name for a CM event type.
pub(crate) fn event_name(lib: &Lib, e: c_int) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    let p = unsafe { (lib.rdma_event_str)(e) };
    if p.is_null() {
        return format!("event {e}");
    }
    // SAFETY: a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The local and peer addresses of a CM id.
pub(crate) fn id_addrs(
    id: *mut RdmaCmId,
) -> (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>) {
    // SAFETY: `id` is a live CM id; its route addresses are plain data that
    // rdma-core fills in when binding and resolving.
    unsafe {
        (
            from_sockaddr(std::ptr::addr_of!((*id).src).cast()),
            from_sockaddr(std::ptr::addr_of!((*id).dst).cast()),
        )
    }
}
