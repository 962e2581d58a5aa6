//! The system's GSSAPI (MIT krb5's `libgssapi_krb5.so.2`) for the Kerberos 5 mechanism:
//! the only module of this crate with `unsafe`, every call behind a safe wrapper.
//!
//! Only what SMB needs is bound: credentials from a keytab (acceptor) or the caller's
//! credential cache (initiator), one context step at a time, the names of the two
//! principals, the session key ([MS-SMB2] 3.3.5.5.3: GSS_C_INQ_SSPI_SESSION_KEY) and
//! MICs over the SPNEGO mechanism list. The library is linked by its run-time name, so
//! building needs no development package (no headers, no bindgen).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

type OmUint32 = u32;

#[repr(C)]
struct BufferDesc {
    length: usize,
    value: *mut c_void,
}

#[repr(C)]
struct OidDesc {
    length: OmUint32,
    elements: *mut c_void,
}

#[repr(C)]
struct OidSetDesc {
    count: usize,
    elements: *mut OidDesc,
}

#[repr(C)]
struct BufferSetDesc {
    count: usize,
    elements: *mut BufferDesc,
}

#[repr(C)]
struct KeyValueElement {
    key: *const c_char,
    value: *const c_char,
}

#[repr(C)]
struct KeyValueSet {
    count: OmUint32,
    elements: *mut KeyValueElement,
}

type Handle = *mut c_void;

const GSS_C_INITIATE: c_int = 1;
const GSS_C_ACCEPT: c_int = 2;
const GSS_C_GSS_CODE: c_int = 1;
const GSS_C_MECH_CODE: c_int = 2;
const GSS_C_INDEFINITE: OmUint32 = 0xffff_ffff;
const GSS_S_CONTINUE_NEEDED: OmUint32 = 1;

/// GSS_C_MUTUAL_FLAG: ask for (or report) mutual authentication.
pub const MUTUAL_FLAG: u32 = 2;
/// GSS_C_REPLAY_FLAG.
pub const REPLAY_FLAG: u32 = 4;
/// GSS_C_SEQUENCE_FLAG.
pub const SEQUENCE_FLAG: u32 = 8;
/// GSS_C_CONF_FLAG.
pub const CONF_FLAG: u32 = 16;
/// GSS_C_INTEG_FLAG.
pub const INTEG_FLAG: u32 = 32;

/// DER content of the Kerberos 5 mechanism OID 1.2.840.113554.1.2.2.
const KRB5_MECH: &[u8] = crate::spnego::OID_KRB5;
/// GSS_C_NT_HOSTBASED_SERVICE, 1.2.840.113554.1.2.1.4.
const NT_HOSTBASED_SERVICE: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x04];
/// GSS_C_INQ_SSPI_SESSION_KEY, 1.2.840.113554.1.2.2.5.5.
const INQ_SSPI_SESSION_KEY: &[u8] = &[
    0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x05, 0x05,
];

#[link(name = "libgssapi_krb5.so.2", kind = "dylib", modifiers = "+verbatim")]
extern "C" {
    fn gss_acquire_cred_from(
        minor: *mut OmUint32,
        desired_name: Handle,
        time_req: OmUint32,
        desired_mechs: *mut OidSetDesc,
        cred_usage: c_int,
        cred_store: *const KeyValueSet,
        output_cred: *mut Handle,
        actual_mechs: *mut *mut OidSetDesc,
        time_rec: *mut OmUint32,
    ) -> OmUint32;
    fn gss_release_cred(minor: *mut OmUint32, cred: *mut Handle) -> OmUint32;
    fn gss_accept_sec_context(
        minor: *mut OmUint32,
        context: *mut Handle,
        acceptor_cred: Handle,
        input_token: *mut BufferDesc,
        chan_bindings: *mut c_void,
        src_name: *mut Handle,
        mech_type: *mut *mut OidDesc,
        output_token: *mut BufferDesc,
        ret_flags: *mut OmUint32,
        time_rec: *mut OmUint32,
        delegated_cred: *mut Handle,
    ) -> OmUint32;
    fn gss_init_sec_context(
        minor: *mut OmUint32,
        claimant_cred: Handle,
        context: *mut Handle,
        target_name: Handle,
        mech_type: *mut OidDesc,
        req_flags: OmUint32,
        time_req: OmUint32,
        chan_bindings: *mut c_void,
        input_token: *mut BufferDesc,
        actual_mech_type: *mut *mut OidDesc,
        output_token: *mut BufferDesc,
        ret_flags: *mut OmUint32,
        time_rec: *mut OmUint32,
    ) -> OmUint32;
    fn gss_delete_sec_context(
        minor: *mut OmUint32,
        context: *mut Handle,
        output_token: *mut BufferDesc,
    ) -> OmUint32;
    fn gss_inquire_context(
        minor: *mut OmUint32,
        context: Handle,
        src_name: *mut Handle,
        targ_name: *mut Handle,
        lifetime_rec: *mut OmUint32,
        mech_type: *mut *mut OidDesc,
        ctx_flags: *mut OmUint32,
        locally_initiated: *mut c_int,
        open: *mut c_int,
    ) -> OmUint32;
    fn gss_inquire_sec_context_by_oid(
        minor: *mut OmUint32,
        context: Handle,
        desired_object: *mut OidDesc,
        data_set: *mut *mut BufferSetDesc,
    ) -> OmUint32;
    fn gss_release_buffer_set(minor: *mut OmUint32, set: *mut *mut BufferSetDesc) -> OmUint32;
    fn gss_get_mic(
        minor: *mut OmUint32,
        context: Handle,
        qop_req: OmUint32,
        message: *mut BufferDesc,
        token: *mut BufferDesc,
    ) -> OmUint32;
    fn gss_verify_mic(
        minor: *mut OmUint32,
        context: Handle,
        message: *mut BufferDesc,
        token: *mut BufferDesc,
        qop_state: *mut OmUint32,
    ) -> OmUint32;
    fn gss_import_name(
        minor: *mut OmUint32,
        input: *mut BufferDesc,
        name_type: *mut OidDesc,
        output: *mut Handle,
    ) -> OmUint32;
    fn gss_display_name(
        minor: *mut OmUint32,
        name: Handle,
        output: *mut BufferDesc,
        name_type: *mut *mut OidDesc,
    ) -> OmUint32;
    fn gss_release_name(minor: *mut OmUint32, name: *mut Handle) -> OmUint32;
    fn gss_release_buffer(minor: *mut OmUint32, buffer: *mut BufferDesc) -> OmUint32;
    fn gss_display_status(
        minor: *mut OmUint32,
        status: OmUint32,
        status_type: c_int,
        mech_type: *mut OidDesc,
        message_context: *mut OmUint32,
        status_string: *mut BufferDesc,
    ) -> OmUint32;
}

fn is_error(major: OmUint32) -> bool {
    major & 0xffff_0000 != 0
}

/// An OID descriptor pointing at static DER content. GSSAPI only reads it.
fn oid(bytes: &'static [u8]) -> OidDesc {
    OidDesc {
        length: bytes.len() as OmUint32,
        elements: bytes.as_ptr() as *mut c_void,
    }
}

/// A borrowed input buffer. GSSAPI only reads input tokens.
fn input(bytes: &[u8]) -> BufferDesc {
    BufferDesc {
        length: bytes.len(),
        value: bytes.as_ptr() as *mut c_void,
    }
}

fn empty_buffer() -> BufferDesc {
    BufferDesc {
        length: 0,
        value: ptr::null_mut(),
    }
}

/// The result of one accept or init call: its output token (released either way),
/// then the error, or the step and whether the exchange is complete.
fn step(major: OmUint32, minor: OmUint32, out: BufferDesc) -> Result<Step, GssError> {
    let output = take_buffer(out);
    if is_error(major) {
        return Err(error(major, minor));
    }
    Ok(Step {
        output,
        complete: major & GSS_S_CONTINUE_NEEDED == 0,
    })
}

/// Copies a buffer GSSAPI allocated and releases it.
fn take_buffer(mut b: BufferDesc) -> Vec<u8> {
    let out = if b.value.is_null() || b.length == 0 {
        Vec::new()
    } else {
        // SAFETY: GSSAPI returned `length` initialized bytes at `value`, which stay
        // valid until gss_release_buffer below.
        unsafe { std::slice::from_raw_parts(b.value as *const u8, b.length) }.to_vec()
    };
    let mut minor = 0;
    // SAFETY: `b` was filled by GSSAPI (or is empty); releasing it once is required.
    unsafe { gss_release_buffer(&mut minor, &mut b) };
    out
}

/// A failed GSSAPI call: its major and minor status and their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GssError {
    /// The major status.
    pub major: u32,
    /// The mechanism's minor status (a krb5 error code).
    pub minor: u32,
    /// What GSSAPI says about both.
    pub message: String,
}

impl fmt::Display for GssError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GssError {}

/// The text of one status value (all its messages, joined).
fn status_text(status: OmUint32, kind: c_int) -> String {
    let mut parts = Vec::new();
    let mut ctx: OmUint32 = 0;
    let mut mech = oid(KRB5_MECH);
    // Bounded: a status has a handful of messages at most.
    for _ in 0..8 {
        let mut minor = 0;
        let mut buf = empty_buffer();
        // SAFETY: every pointer is valid for the call; the output buffer is released
        // by take_buffer.
        let major =
            unsafe { gss_display_status(&mut minor, status, kind, &mut mech, &mut ctx, &mut buf) };
        if is_error(major) {
            break;
        }
        let s = String::from_utf8_lossy(&take_buffer(buf)).into_owned();
        if !s.is_empty() {
            parts.push(s);
        }
        if ctx == 0 {
            break;
        }
    }
    parts.join("; ")
}

fn error(major: OmUint32, minor: OmUint32) -> GssError {
    let mut message = status_text(major, GSS_C_GSS_CODE);
    if minor != 0 {
        let m = status_text(minor, GSS_C_MECH_CODE);
        if !m.is_empty() {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&m);
        }
    }
    GssError {
        major,
        minor,
        message,
    }
}

fn local_error(message: &str) -> GssError {
    GssError {
        major: 0,
        minor: 0,
        message: message.to_string(),
    }
}

/// Kerberos credentials: an acceptor's keys from a keytab, or an initiator's tickets.
pub struct Cred(Handle);

// SAFETY: a credential handle is owned by this value alone; MIT krb5 allows a handle
// to be used from any thread, one call at a time, which `&mut`/ownership ensures.
unsafe impl Send for Cred {}

impl Cred {
    /// Acceptor credentials for every principal in `keytab` (the default keytab when
    /// `None`), Kerberos 5 only.
    pub fn acceptor(keytab: Option<&Path>) -> Result<Cred, GssError> {
        let key = CString::new("keytab").expect("no NUL");
        let value = match keytab {
            Some(p) => Some(
                CString::new(p.as_os_str().as_bytes())
                    .map_err(|_| local_error("keytab path contains NUL"))?,
            ),
            None => None,
        };
        let mut elems = [KeyValueElement {
            key: key.as_ptr(),
            value: value.as_ref().map_or(ptr::null(), |v| v.as_ptr()),
        }];
        let store = KeyValueSet {
            count: u32::from(value.is_some()),
            elements: elems.as_mut_ptr(),
        };
        Self::acquire(GSS_C_ACCEPT, &store)
    }

    /// Initiator credentials from the caller's credential cache (`KRB5CCNAME` or the
    /// default cache).
    pub fn initiator() -> Result<Cred, GssError> {
        let store = KeyValueSet {
            count: 0,
            elements: ptr::null_mut(),
        };
        Self::acquire(GSS_C_INITIATE, &store)
    }

    fn acquire(usage: c_int, store: &KeyValueSet) -> Result<Cred, GssError> {
        let mut mech = oid(KRB5_MECH);
        let mut set = OidSetDesc {
            count: 1,
            elements: &mut mech,
        };
        let mut minor = 0;
        let mut cred: Handle = ptr::null_mut();
        // SAFETY: all pointers are valid for the call (the store's strings outlive it);
        // the output handle is owned by the returned Cred and released on drop.
        let major = unsafe {
            gss_acquire_cred_from(
                &mut minor,
                ptr::null_mut(),
                GSS_C_INDEFINITE,
                &mut set,
                usage,
                store,
                &mut cred,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if is_error(major) {
            return Err(error(major, minor));
        }
        Ok(Cred(cred))
    }
}

impl Drop for Cred {
    fn drop(&mut self) {
        if !self.0.is_null() {
            let mut minor = 0;
            // SAFETY: the handle came from gss_acquire_cred_from and is released once.
            unsafe { gss_release_cred(&mut minor, &mut self.0) };
        }
    }
}

/// A GSSAPI name.
struct Name(Handle);

impl Name {
    /// `service@host`, as GSS_C_NT_HOSTBASED_SERVICE.
    fn hostbased(service_at_host: &str) -> Result<Name, GssError> {
        let mut buf = input(service_at_host.as_bytes());
        let mut nt = oid(NT_HOSTBASED_SERVICE);
        let mut minor = 0;
        let mut name: Handle = ptr::null_mut();
        // SAFETY: valid pointers; the input is only read; the output name is owned by
        // the returned Name.
        let major = unsafe { gss_import_name(&mut minor, &mut buf, &mut nt, &mut name) };
        if is_error(major) {
            return Err(error(major, minor));
        }
        Ok(Name(name))
    }

    /// The printable form of `name` (`user@REALM`, `cifs/host@REALM`).
    fn display(name: Handle) -> Result<String, GssError> {
        let mut minor = 0;
        let mut buf = empty_buffer();
        // SAFETY: `name` is a valid name handle; the output buffer is released by
        // take_buffer; the returned name type is a static OID (not freed).
        let major = unsafe { gss_display_name(&mut minor, name, &mut buf, ptr::null_mut()) };
        if is_error(major) {
            return Err(error(major, minor));
        }
        Ok(String::from_utf8_lossy(&take_buffer(buf)).into_owned())
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        if !self.0.is_null() {
            let mut minor = 0;
            // SAFETY: the name is owned and released once.
            unsafe { gss_release_name(&mut minor, &mut self.0) };
        }
    }
}

/// The result of one context step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The token for the peer (possibly empty).
    pub output: Vec<u8>,
    /// True once the context is established.
    pub complete: bool,
}

/// One Kerberos 5 security context (acceptor or initiator).
pub struct Context {
    handle: Handle,
    target: Option<Name>,
}

// SAFETY: the context handle is owned by this value alone and used one call at a time
// (every method takes `&self`/`&mut self` of the owner, which is never shared between
// threads without a lock); MIT krb5 allows that from any thread.
unsafe impl Send for Context {}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("gss::Context { .. }")
    }
}

impl Context {
    /// A context that will accept a client's token.
    pub fn acceptor() -> Context {
        Context {
            handle: ptr::null_mut(),
            target: None,
        }
    }

    /// A context that will initiate towards `service@host`.
    pub fn initiator(service_at_host: &str) -> Result<Context, GssError> {
        Ok(Context {
            handle: ptr::null_mut(),
            target: Some(Name::hostbased(service_at_host)?),
        })
    }

    /// Feeds the client's token to an acceptor context.
    pub fn accept(&mut self, cred: &Cred, token: &[u8]) -> Result<Step, GssError> {
        let mut minor = 0;
        let mut inp = input(token);
        let mut out = empty_buffer();
        // SAFETY: valid pointers for the call; `self.handle` is null or a context this
        // value owns; the output token is released by take_buffer; no source name or
        // delegated credential is asked for (null out-pointers are allowed).
        let major = unsafe {
            gss_accept_sec_context(
                &mut minor,
                &mut self.handle,
                cred.0,
                &mut inp,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        step(major, minor, out)
    }

    /// Produces the initiator's next token (`server_token` is `None` at first).
    pub fn init(
        &mut self,
        cred: Option<&Cred>,
        server_token: Option<&[u8]>,
        flags: u32,
    ) -> Result<Step, GssError> {
        let target = self
            .target
            .as_ref()
            .ok_or_else(|| local_error("not an initiator context"))?
            .0;
        let mut minor = 0;
        let mut mech = oid(KRB5_MECH);
        let mut inp = input(server_token.unwrap_or_default());
        let inp_ptr: *mut BufferDesc = if server_token.is_some() {
            &mut inp
        } else {
            ptr::null_mut()
        };
        let mut out = empty_buffer();
        // SAFETY: valid pointers; the context handle is owned; the claimant credential
        // is a live handle or null (the default credentials); the output token is
        // released by take_buffer.
        let major = unsafe {
            gss_init_sec_context(
                &mut minor,
                cred.map_or(ptr::null_mut(), |c| c.0),
                &mut self.handle,
                target,
                &mut mech,
                flags,
                0,
                ptr::null_mut(),
                inp_ptr,
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        step(major, minor, out)
    }

    fn established(&self) -> Result<Handle, GssError> {
        if self.handle.is_null() {
            Err(local_error("no security context"))
        } else {
            Ok(self.handle)
        }
    }

    /// The initiator's and the acceptor's principal names (`user@REALM`,
    /// `cifs/host@REALM`) and the context flags.
    pub fn names(&self) -> Result<(String, String, u32), GssError> {
        let h = self.established()?;
        let mut minor = 0;
        let mut src: Handle = ptr::null_mut();
        let mut targ: Handle = ptr::null_mut();
        let mut flags: OmUint32 = 0;
        // SAFETY: `h` is a live context; the two names returned are owned by the Name
        // guards below and released once.
        let major = unsafe {
            gss_inquire_context(
                &mut minor,
                h,
                &mut src,
                &mut targ,
                ptr::null_mut(),
                ptr::null_mut(),
                &mut flags,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let (src, targ) = (Name(src), Name(targ));
        if is_error(major) {
            return Err(error(major, minor));
        }
        Ok((Name::display(src.0)?, Name::display(targ.0)?, flags))
    }

    /// The session key (GSS_C_INQ_SSPI_SESSION_KEY: the acceptor subkey when there is
    /// one, else the initiator's subkey, else the ticket's session key), full length.
    pub fn session_key(&self) -> Result<Vec<u8>, GssError> {
        let h = self.established()?;
        let mut minor = 0;
        let mut what = oid(INQ_SSPI_SESSION_KEY);
        let mut set: *mut BufferSetDesc = ptr::null_mut();
        // SAFETY: `h` is a live context; the buffer set is released below, once.
        let major = unsafe { gss_inquire_sec_context_by_oid(&mut minor, h, &mut what, &mut set) };
        if is_error(major) {
            return Err(error(major, minor));
        }
        // SAFETY: on success `set` is null or points at `count` buffers GSSAPI owns
        // until gss_release_buffer_set; the first buffer holds the key.
        let key = unsafe {
            match set.as_ref() {
                Some(s) if s.count >= 1 && !s.elements.is_null() => {
                    let b = &*s.elements;
                    if b.value.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(b.value as *const u8, b.length).to_vec()
                    }
                }
                _ => Vec::new(),
            }
        };
        // SAFETY: `set` came from GSSAPI (or is null, which it accepts).
        unsafe { gss_release_buffer_set(&mut minor, &mut set) };
        if key.is_empty() {
            return Err(local_error("the security context has no session key"));
        }
        Ok(key)
    }

    /// A MIC over `message` (SPNEGO's mechListMIC).
    pub fn get_mic(&self, message: &[u8]) -> Result<Vec<u8>, GssError> {
        let h = self.established()?;
        let mut minor = 0;
        let mut msg = input(message);
        let mut out = empty_buffer();
        // SAFETY: live context, valid pointers; the token is released by take_buffer.
        let major = unsafe { gss_get_mic(&mut minor, h, 0, &mut msg, &mut out) };
        let mic = take_buffer(out);
        if is_error(major) {
            return Err(error(major, minor));
        }
        Ok(mic)
    }

    /// Checks the peer's MIC over `message`.
    pub fn verify_mic(&self, message: &[u8], mic: &[u8]) -> Result<(), GssError> {
        let h = self.established()?;
        let mut minor = 0;
        let mut msg = input(message);
        let mut tok = input(mic);
        // SAFETY: live context; both buffers are only read.
        let major = unsafe { gss_verify_mic(&mut minor, h, &mut msg, &mut tok, ptr::null_mut()) };
        if is_error(major) {
            return Err(error(major, minor));
        }
        Ok(())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            let mut minor = 0;
            // SAFETY: the context is owned and deleted once; no output token is wanted.
            unsafe { gss_delete_sec_context(&mut minor, &mut self.handle, ptr::null_mut()) };
        }
    }
}
