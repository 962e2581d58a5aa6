//! SMB2 CREATE ([MS-SMB2] 3.3.5.9, [MS-FSA] 2.1.5.1): files, directories and streams on
//! disk shares through `smbx_vfs`, named pipes on `IPC$`.

use std::sync::Arc;

use smbx_vfs::{CreateAction, Disposition, FileInfo};
use smbx_wire::create::response as context_response;
use smbx_wire::create::{
    ctx as cname, encode_contexts, CreateContexts, CreateRequest, CreateResponse, DurableRequest,
    IMPERSONATION_DELEGATE,
};
use smbx_wire::oplock::{LeaseState, OplockLevel};
use smbx_wire::security_descriptor::SecurityDescriptor;
use smbx_wire::Dialect;
use smbx_wire::NtStatus;
use smbx_wire::{AccessMask, CreateDisposition, CreateOptions, FileAttributes, ShareAccess};

use super::{pipe, Ctx, HandlerResult, Request, Response};

mod durable;
mod replay;
use crate::breaks::{until_waiting, GoingAsync, Started};
use crate::state::file::{FileKey, Registration};
use crate::state::open::{FileOpen, FileOpenParams};
use crate::state::{acl, oplock, FileId, Open, OpenKind, ServerState, Tree};

/// Rights that modify the file (data, attributes, EAs, delete, ACL, owner).
pub const WRITE_RIGHTS: AccessMask = AccessMask::FILE_WRITE_DATA
    .union(AccessMask::FILE_APPEND_DATA)
    .union(AccessMask::FILE_WRITE_EA)
    .union(AccessMask::FILE_DELETE_CHILD)
    .union(AccessMask::FILE_WRITE_ATTRIBUTES)
    .union(AccessMask::DELETE)
    .union(AccessMask::WRITE_DAC)
    .union(AccessMask::WRITE_OWNER);

/// FILE_WRITE_DATA | FILE_APPEND_DATA: what a READONLY file denies.
const DATA_WRITE: AccessMask = AccessMask::FILE_WRITE_DATA.union(AccessMask::FILE_APPEND_DATA);

/// Validates DesiredAccess and computes the granted mask given the tree's maximal
/// access: reserved bits → ACCESS_DENIED, ACCESS_SYSTEM_SECURITY →
/// PRIVILEGE_NOT_HELD, an empty mask → ACCESS_DENIED, rights beyond
/// `maximal` → ACCESS_DENIED; MAXIMUM_ALLOWED grants `maximal`.
pub fn granted_access(desired: AccessMask, maximal: AccessMask) -> Result<AccessMask, NtStatus> {
    if desired.intersects(AccessMask::RESERVED) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if desired.intersects(AccessMask::ACCESS_SYSTEM_SECURITY) {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    let mapped = desired
        .difference(AccessMask::MAXIMUM_ALLOWED)
        .map_generic();
    if desired.contains(AccessMask::MAXIMUM_ALLOWED) {
        return Ok(maximal | (mapped & maximal));
    }
    if mapped.is_empty() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !mapped
        .difference(maximal | AccessMask::SYNCHRONIZE)
        .is_empty()
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(mapped)
}

/// Checks the fixed request fields the way Windows orders them.
fn validate(req: &CreateRequest<'_>) -> Result<(), NtStatus> {
    if req.impersonation_level > IMPERSONATION_DELEGATE {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    let o = req.create_options;
    if o.intersects(CreateOptions::INVALID) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if o.intersects(
        CreateOptions::FILE_CREATE_TREE_CONNECTION
            | CreateOptions::FILE_OPEN_BY_FILE_ID
            | CreateOptions::FILE_RESERVE_OPFILTER,
    ) {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if o.contains(CreateOptions::FILE_DIRECTORY_FILE | CreateOptions::FILE_NON_DIRECTORY_FILE) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.disposition().is_none() || !ShareAccess::ALL.contains(req.share_access) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

/// Normalizes a CREATE path name: `/` separates components like `\\` (as Samba
/// accepts, smb2.timestamps), `..` components are OBJECT_PATH_SYNTAX_BAD (as Samba and
/// smb2.mkdir expect). Returns the name without a trailing separator, and whether it
/// had one.
pub fn normalize_name(name: &str) -> Result<(String, bool), NtStatus> {
    let name = name.replace('/', "\\");
    // The stream part (after ':') is not a path.
    let path_part = name.split(':').next().unwrap_or("");
    if path_part.split('\\').any(|c| c == "..") {
        return Err(NtStatus::OBJECT_PATH_SYNTAX_BAD);
    }
    match name.strip_suffix('\\') {
        Some(rest) if !rest.is_empty() => Ok((rest.to_string(), true)),
        _ => Ok((name, false)),
    }
}

/// A name with a trailing backslash names a directory ([MS-FSA] 2.1.5.1): unless
/// FILE_DIRECTORY_FILE is set, it is OBJECT_NAME_INVALID for FILE_NON_DIRECTORY_FILE,
/// for an existing non-directory, and when a new file would be created.
fn check_trailing_sep(
    vfs: &smbx_vfs::Share,
    name: &str,
    options: CreateOptions,
    disposition: Disposition,
) -> Result<(), NtStatus> {
    if options.contains(CreateOptions::FILE_NON_DIRECTORY_FILE) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    match vfs.stat(name) {
        Ok(info) if info.is_dir => Ok(()),
        Ok(_) => Err(NtStatus::OBJECT_NAME_INVALID),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
            if !matches!(disposition, Disposition::Open | Disposition::Overwrite) =>
        {
            Err(NtStatus::OBJECT_NAME_INVALID)
        }
        Err(_) => Ok(()),
    }
}

/// Durable handle timeout when the client asks for none (ms).
pub const DURABLE_DEFAULT_TIMEOUT_MS: u32 = 60_000;
/// Longest durable handle timeout granted (ms; as Windows: 300 s).
pub const DURABLE_MAX_TIMEOUT_MS: u32 = 300_000;

/// An `ExtA` FILE_FULL_EA_INFORMATION list ([`smbx_wire::fscc::ea::decode_full_list`])
/// as (name, value): a malformed list, or a name that is empty or not UTF-8, is
/// INVALID_PARAMETER (what failed is logged at debug level).
fn parse_eas(buf: &[u8]) -> Result<Vec<(String, Vec<u8>)>, NtStatus> {
    let bad = NtStatus::malformed(NtStatus::INVALID_PARAMETER);
    let eas = smbx_wire::fscc::ea::decode_full_list(buf).map_err(&bad)?;
    eas.into_iter()
        .map(|e| match String::from_utf8(e.name) {
            Ok(name) if !name.is_empty() => Ok((name, e.value)),
            _ => Err(NtStatus::INVALID_PARAMETER),
        })
        .collect()
}

fn response_from_info(info: &FileInfo, action: u32) -> CreateResponse {
    CreateResponse {
        oplock_level: OplockLevel::NONE,
        flags: 0,
        create_action: action,
        creation_time: info.creation_time,
        last_access_time: info.last_access_time,
        last_write_time: info.last_write_time,
        change_time: info.change_time,
        // Directories report no allocation (as QUERY_INFO; smb2.create.open).
        allocation_size: if info.is_dir { 0 } else { info.allocation_size },
        end_of_file: if info.is_dir { 0 } else { info.size },
        file_attributes: info.attributes,
        ..Default::default()
    }
}

fn key_of(info: &FileInfo, h: &smbx_vfs::Handle) -> FileKey {
    FileKey {
        volume_id: info.volume_id,
        file_id: info.file_id,
        stream: h.stream_name().map(|s| s.to_lowercase()),
    }
}

/// Advises the kernel of the access pattern (FILE_SEQUENTIAL_ONLY / FILE_RANDOM_ACCESS).
fn fadvise(h: &smbx_vfs::Handle, options: CreateOptions) {
    if options.contains(CreateOptions::FILE_SEQUENTIAL_ONLY) {
        h.advise(smbx_vfs::AccessPattern::Sequential);
    } else if options.contains(CreateOptions::FILE_RANDOM_ACCESS) {
        h.advise(smbx_vfs::AccessPattern::Random);
    }
}

/// The oplock / lease the CREATE asks for: a lease only with a valid `RqLs` context
/// on 2.1+, otherwise the plain oplock level (a lease request without context or on
/// 2.0.2 gets none).
fn oplock_request(
    ctx: &Ctx<'_>,
    level: OplockLevel,
    lease: Option<&[u8]>,
) -> oplock::OplockRequest {
    if level != OplockLevel::LEASE {
        return oplock::OplockRequest { level, lease: None };
    }
    let lease = if ctx.dialect() >= Dialect::SMB2_1 {
        lease.and_then(|d| smbx_wire::oplock::decode_lease_request(d).ok())
    } else {
        None
    };
    match lease {
        Some(mut l) => {
            if ctx.dialect() < Dialect::SMB3_0 {
                l.version = 1;
            }
            oplock::OplockRequest {
                level: OplockLevel::LEASE,
                lease: Some(l),
            }
        }
        None => oplock::OplockRequest::default(),
    }
}

/// Handles CREATE.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let cr = CreateRequest::decode(req.msg)?;
    let contexts = cr.create_contexts()?;
    let tree = ctx.tree()?.clone();
    let name = cr
        .name()
        .map_err(NtStatus::malformed(NtStatus::OBJECT_NAME_INVALID))?;

    if tree.share.is_ipc() {
        if cr.impersonation_level > IMPERSONATION_DELEGATE {
            return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
        }
        let open = pipe::open_pipe(ctx, &name)?;
        let resp = CreateResponse {
            create_action: CreateAction::Opened.as_u32(),
            allocation_size: 4096,
            file_attributes: FileAttributes::NORMAL,
            file_id: open.file_id,
            ..Default::default()
        };
        return Ok(Response::ok(resp.encode()));
    }

    // A durable reconnect ignores the other request fields ([MS-SMB2] 3.3.5.9.7).
    let early = CreateContexts::decode(&contexts, ctx.dialect())
        .map_err(NtStatus::malformed(NtStatus::INVALID_PARAMETER))?;
    if let Some(rc) = early.reconnect {
        return durable::reconnect(ctx, &tree, rc, &name, early.lease).await;
    }
    // DH2Q: create replay detection (handlers/create/replay.rs).
    let reservation = match early.durable.filter(|d| d.v2) {
        Some(d) => match replay::check(ctx, d.create_guid, cr.oplock_level, early.lease)? {
            replay::Check::Replayed(resp, id) => {
                ctx.set_file_id(id);
                return Ok(resp);
            }
            replay::Check::New(r) => Some(r),
        },
        None => None,
    };
    validate(&cr)?;
    if name.starts_with('\\') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (name, trailing_sep) = normalize_name(&name)?;
    let cx = early;
    if cx.twrp {
        // No snapshots: the requested point in time does not exist.
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }

    let options = cr.create_options;
    let granted = granted_access(cr.desired_access, tree.maximal_access)?;
    // Windows checks the access mask before the attributes.
    if cr
        .file_attributes
        .intersects(FileAttributes::CREATE_INVALID)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if cr.file_attributes.contains(FileAttributes::ENCRYPTED)
        && cr.disposition() != Some(CreateDisposition::Open)
    {
        // No EFS: a standalone Windows server refuses encrypted files likewise.
        return Err(NtStatus::ACCESS_DENIED);
    }
    // DesiredAccess without MAXIMUM_ALLOWED, generic rights mapped.
    let explicit_rights = cr
        .desired_access
        .difference(AccessMask::MAXIMUM_ALLOWED)
        .map_generic();
    if tree.read_only && explicit_rights.intersects(WRITE_RIGHTS) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if options.contains(CreateOptions::FILE_DELETE_ON_CLOSE)
        && !granted.contains(AccessMask::DELETE)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let disposition = cr.disposition().ok_or(NtStatus::INVALID_PARAMETER)?;
    let maximum_allowed = cr.desired_access.contains(AccessMask::MAXIMUM_ALLOWED);
    let vreq = smbx_vfs::CreateRequest::from_wire(
        disposition,
        options,
        // The vfs resolves MAXIMUM_ALLOWED itself (READONLY files drop data writes).
        if maximum_allowed {
            cr.desired_access.map_generic()
        } else {
            granted
        },
        cr.file_attributes,
        cx.alloc.unwrap_or(0),
    );
    // A SecD that does not decode fails the CREATE ([MS-SMB2] 2.2.13.2.5 / 3.3.5.9).
    let sd = match cx.sd {
        Some(b) => Some(
            SecurityDescriptor::decode(b)
                .map_err(NtStatus::malformed(NtStatus::INVALID_SECURITY_DESCR))?,
        ),
        None => None,
    };
    // `max open files` per session and connection, before the file system is touched
    // (OpenTable::insert checks again when the open is registered).
    let session_id = ctx.session()?.id;
    let limit = ctx.config().global.max_open_files;
    if !ctx.server.opens.admits(session_id, ctx.conn.id, limit) {
        return Err(NtStatus::TOO_MANY_OPENED_FILES);
    }
    let token = acl::Token::for_user(ctx.session()?.user().as_ref());
    let vfs = ctx.server.files.vfs_share(&tree.share)?;
    if trailing_sep && !options.contains(CreateOptions::FILE_DIRECTORY_FILE) {
        check_trailing_sep(&vfs, &name, options, disposition)?;
    }
    // Oplocks/leases (state/oplock): the request, and who is asking.
    let oplock_req = oplock_request(ctx, cr.oplock_level, cx.lease);
    let requester = oplock::Requester {
        conn_id: ctx.conn.id,
        session_id: ctx.session()?.id,
        client_guid: ctx.conn.negotiate.lock().client_guid,
    };
    let (going_async, waiting) = if ctx.last_in_compound {
        let (g, rx) = GoingAsync::channel();
        (g, Some(rx))
    } else {
        (GoingAsync::none(), None)
    };
    let p = OpenParams {
        server: ctx.server.clone(),
        tree,
        vfs,
        name,
        vreq,
        disposition,
        granted,
        maximum_allowed,
        explicit_rights,
        share_access: cr.share_access,
        options,
        mxac: cx.mxac,
        qfid: cx.qfid,
        alloc: cx.alloc,
        ea: cx.ea.map(|e| e.to_vec()),
        oplock_req,
        requester,
        durable: cx.durable,
        owner: durable::owner_of(ctx)?,
        sd,
        token,
        going_async,
    };
    // Opening may wait for other opens' oplock/lease break acknowledgments. It runs
    // inline until it completes or says it waits (GoingAsync); a CREATE that waits and
    // is the last member of its compound goes async (interim STATUS_PENDING), so the
    // connection keeps reading (the acknowledgment may come on this very connection).
    let csn = (ctx.header.status.0 & 0xFFFF) as u16;
    let fut = Box::pin(replay::track(
        open_file(p),
        reservation,
        ctx.server.clone(),
        csn,
    ));
    let done = match waiting {
        Some(waiting) => match until_waiting(fut, waiting).await {
            Started::Done(r) => r,
            Started::Waiting(fut) => {
                return Ok(Response::pending(
                    async move { fut.await.map(|(resp, _)| resp) },
                ));
            }
        },
        None => fut.await,
    };
    let (resp, id) = done?;
    ctx.set_file_id(id);
    Ok(resp)
}

/// Everything the open phase of CREATE needs, owned (it may run as an async
/// continuation after the handler returned).
struct OpenParams {
    server: Arc<ServerState>,
    tree: Arc<Tree>,
    vfs: smbx_vfs::Share,
    name: String,
    vreq: smbx_vfs::CreateRequest,
    disposition: Disposition,
    granted: AccessMask,
    maximum_allowed: bool,
    /// DesiredAccess without MAXIMUM_ALLOWED, generic rights mapped.
    explicit_rights: AccessMask,
    share_access: ShareAccess,
    options: CreateOptions,
    mxac: bool,
    qfid: bool,
    alloc: Option<u64>,
    ea: Option<Vec<u8>>,
    oplock_req: oplock::OplockRequest,
    requester: oplock::Requester,
    durable: Option<DurableRequest>,
    owner: String,
    /// SecD of the request (applied to a new file).
    sd: Option<SecurityDescriptor>,
    /// Whom the access check of a stored descriptor is for.
    token: acl::Token,
    /// Tells the handler when the open starts to wait for break acknowledgments.
    going_async: GoingAsync,
}

/// A new open (other than an attribute-only one) would break the oplocks / leases of
/// disconnected durable opens of the file, which cannot acknowledge: they are closed
/// first ([MS-SMB2] 3.3.4.6 as Windows behaves).
fn purge_disconnected(
    server: &ServerState,
    f: &Arc<crate::state::file::SharedFile>,
    access: AccessMask,
) {
    if !oplock::is_stat_open(access) {
        server.opens.purge_disconnected_of(f);
    }
}

/// The open phase of CREATE, in four steps: probe and break (an overwrite checks
/// access and breaks oplocks before it truncates), open with checks (the vfs, the
/// security descriptor), register (breaks, share modes, the open table) and grant and
/// respond (oplock or lease, durable handle, response contexts). A share-mode
/// registration is a [`Registration`]: every failure before the open exists undoes it
/// by dropping it.
async fn open_file(mut p: OpenParams) -> Result<(Response, FileId), NtStatus> {
    // What the access check compares with a stored descriptor: the rights asked for
    // explicitly (with MAXIMUM_ALLOWED too: smb2.acls.MXAC-NOT-GRANTED).
    let desired_rights = if p.maximum_allowed {
        p.granted & p.explicit_rights
    } else {
        p.granted
    };
    let pre = probe_and_break(&p, desired_rights).await?;
    check_lease_key(&p)?;
    let Opened {
        handle,
        action,
        sd_max,
        info,
        key,
    } = open_with_checks(&mut p, desired_rights)?;
    let registration = register(&p, pre, &key).await?;
    let (open, info, handle) = install(&mut p, registration, handle, action, info)?;
    grant_and_respond(p, &open, &info, &handle, sd_max, action)
}

/// A probe of `name` as it is: opens it without data access to see whether it
/// exists and which file it is.
fn probe(p: &OpenParams) -> Result<smbx_vfs::Handle, NtStatus> {
    let req = smbx_vfs::CreateRequest {
        disposition: Disposition::Open,
        want_read: false,
        want_write: false,
        want_write_attributes: false,
        maximum_allowed: false,
        directory: false,
        non_directory: false,
        ..p.vreq
    };
    p.vfs.create(&p.name, &req).map(|(h, _)| h)
}

/// Step 1: sharing is checked before a truncating disposition touches the file. An
/// existing file is checked against its stored descriptor (truncating needs
/// FILE_WRITE_DATA: smb2.acls.OVERWRITE_READ_ONLY_FILE), the oplocks and leases it
/// conflicts with are broken (and waited for), and the open is registered.
async fn probe_and_break(
    p: &OpenParams,
    desired_rights: AccessMask,
) -> Result<Option<Registration>, NtStatus> {
    if !matches!(
        p.disposition,
        Disposition::Supersede | Disposition::Overwrite | Disposition::OverwriteIf
    ) {
        return Ok(None);
    }
    let h = match probe(p) {
        Ok(h) => h,
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) => return Ok(None),
        Err(e) if p.disposition == Disposition::Overwrite => return Err(e),
        Err(_) => return Ok(None),
    };
    acl::check_stored_sd(
        &p.vfs,
        &p.name,
        &h,
        &p.token,
        desired_rights | AccessMask::FILE_WRITE_DATA,
    )?;
    let info = h.stat()?;
    let key = key_of(&info, &h);
    break_before_share_check(p, &key, true).await;
    p.server
        .files
        .register_guarded(key, p.granted, p.share_access)
        .map(Some)
}

/// Breaks the oplocks and leases of the other opens of `key` that conflict with this
/// one and waits for them (before the share check), after closing disconnected
/// durable opens that could not acknowledge.
async fn break_before_share_check(p: &OpenParams, key: &FileKey, overwrite: bool) {
    if let Some(f) = p.server.files.get(key) {
        purge_disconnected(&p.server, &f, p.granted);
        crate::breaks::break_conflicting(
            &p.server,
            &f,
            &p.requester,
            p.oplock_req.lease.map(|l| l.lease_key),
            p.granted,
            p.share_access,
            overwrite,
            &p.going_async,
        )
        .await;
    }
}

/// A lease key held on another file: INVALID_PARAMETER before anything is created
/// (state/oplock).
fn check_lease_key(p: &OpenParams) -> Result<(), NtStatus> {
    if !oplock::lease_key_in_use(&p.server, &p.requester, &p.oplock_req) {
        return Ok(());
    }
    let existing = probe(p)
        .ok()
        .and_then(|h| h.stat().ok().map(|i| key_of(&i, &h)));
    oplock::check_lease_key(&p.server, &p.requester, &p.oplock_req, existing.as_ref())
}

/// What step 2 opened.
struct Opened {
    handle: smbx_vfs::Handle,
    action: CreateAction,
    /// The most a stored security descriptor grants (None: no descriptor decides).
    sd_max: Option<AccessMask>,
    info: FileInfo,
    key: FileKey,
}

/// Step 2: the vfs open, and NT security descriptors (state/acl.rs): an existing
/// file's stored one decides access; a new file gets the SecD and/or what its parent
/// passes on. MAXIMUM_ALLOWED is narrowed to what the descriptor grants.
fn open_with_checks(p: &mut OpenParams, desired_rights: AccessMask) -> Result<Opened, NtStatus> {
    let (handle, action) = p.vfs.create(&p.name, &p.vreq)?;
    let sd_max = if action == CreateAction::Created {
        let parent = acl::parent_sd(&p.vfs, &p.name).and_then(|(p, _)| p);
        if p.sd.is_some() || parent.is_some() {
            let info = handle.stat()?;
            if let Some(new_sd) = acl::for_new_file(p.sd.as_ref(), parent.as_ref(), &info) {
                if let Err(e) = handle.set_nt_acl(Some(&new_sd.encode())) {
                    tracing::debug!(path = %p.name, "cannot store the security descriptor: {e:?}");
                }
            }
        }
        None
    } else {
        acl::check_stored_sd(&p.vfs, &p.name, &handle, &p.token, desired_rights)?
    };
    if let (true, Some(m)) = (p.maximum_allowed, sd_max) {
        p.granted &= m;
    }
    let info = handle.stat()?;
    let key = key_of(&info, &handle);
    Ok(Opened {
        handle,
        action,
        sd_max,
        info,
        key,
    })
}

/// Step 3a: the registration of the file that was opened: the one of step 1 if it is
/// the same file, else a new one after breaking what conflicts.
async fn register(
    p: &OpenParams,
    pre: Option<Registration>,
    key: &FileKey,
) -> Result<Registration, NtStatus> {
    match pre {
        Some(r) if &r.file().key == key => Ok(r),
        other => {
            drop(other);
            break_before_share_check(p, key, false).await;
            let files = &p.server.files;
            files
                .register_guarded(key.clone(), p.granted, p.share_access)
                .inspect_err(|_| files.forget_if_unused(key))
        }
    }
}

/// Step 3b: the open itself. The registration is committed into a `FileOpen`, which
/// undoes it when it closes; create-time EAs and allocation are applied; the open joins
/// the server's table unless its session or tree went away while it waited.
fn install(
    p: &mut OpenParams,
    registration: Registration,
    handle: smbx_vfs::Handle,
    action: CreateAction,
    info: FileInfo,
) -> Result<(Arc<Open>, FileInfo, Arc<smbx_vfs::Handle>), NtStatus> {
    if p.maximum_allowed && !handle.is_writable() && !handle.is_dir() {
        p.granted.remove(DATA_WRITE);
    }
    let handle = Arc::new(handle);
    let (file, entry_id) = registration.commit();
    let fopen = FileOpen::new(FileOpenParams {
        path: p.name.clone(),
        handle: handle.clone(),
        vfs: p.vfs.clone(),
        access: p.granted,
        share_access: p.share_access,
        create_options: p.options,
        file,
        entry_id,
    });
    if p.options.contains(CreateOptions::FILE_DELETE_ON_CLOSE) {
        match p.vfs.can_delete(&handle) {
            Ok(()) | Err(NtStatus::DIRECTORY_NOT_EMPTY) => {}
            Err(e) => {
                fopen
                    .delete_on_close
                    .store(false, std::sync::atomic::Ordering::Release);
                return Err(e);
            }
        }
    }
    if let Some(ea) = &p.ea {
        if action != CreateAction::Opened {
            for (n, v) in parse_eas(ea)? {
                handle.set_ea(&n, &v)?;
            }
        }
    }
    if let Some(alloc) = p.alloc {
        if action != CreateAction::Opened && !handle.is_dir() && alloc > 0 {
            let _ = handle.set_allocation(alloc);
        }
    }
    fadvise(&handle, p.options);
    let mut info = if p.ea.is_some() || p.alloc.is_some() {
        handle.stat()?
    } else {
        info
    };
    fopen
        .file
        .times
        .adjust(&mut info, smbx_wire::time::now_filetime());
    let server = &p.server;
    let open = server.opens.insert(
        p.requester.session_id,
        p.tree.id,
        p.requester.conn_id,
        OpenKind::File(fopen),
        server.config().global.max_open_files,
    )?;
    // A CREATE that waited (an oplock break) may finish after its session ended
    // (its last channel went away) or its tree was disconnected: their opens are
    // already closed, so this one is too. (The session or tree leaves its table
    // before its opens are removed, so one of the two always sees the other.)
    let gone = match server.sessions.get(p.requester.session_id) {
        None => Some(NtStatus::USER_SESSION_DELETED),
        Some(s) => match s.tree(p.tree.id) {
            Some(t) if Arc::ptr_eq(&t, &p.tree) => None,
            _ => Some(NtStatus::NETWORK_NAME_DELETED),
        },
    };
    if let Some(status) = gone {
        if let Some(o) = server.opens.remove(open.file_id) {
            if let OpenKind::File(f) = &o.kind {
                let _ = f.close();
            }
        }
        return Err(status);
    }
    Ok((open, info, handle))
}

/// Step 4: the oplock level or lease the open gets (state/oplock), a durable handle
/// when it caches handles ([MS-SMB2] 3.3.5.9.6, 3.3.5.9.10), and the response with its
/// create contexts (smbx_wire::create::response).
fn grant_and_respond(
    p: OpenParams,
    open: &Open,
    info: &FileInfo,
    handle: &smbx_vfs::Handle,
    sd_max: Option<AccessMask>,
    action: CreateAction,
) -> Result<(Response, FileId), NtStatus> {
    let mut resp = response_from_info(info, action.as_u32());
    resp.file_id = open.file_id;
    let mut out: Vec<(&[u8], Vec<u8>)> = Vec::new();
    if let Some(f) = open.as_file() {
        let g = oplock::grant(
            &p.server,
            &f.file,
            &p.requester,
            f.entry_id,
            open.file_id,
            f.is_dir,
            &p.oplock_req,
        );
        resp.oplock_level = g.level;
        if let Some(l) = g.lease {
            out.push((cname::RQLS, smbx_wire::oplock::encode_lease_response(&l)));
        }
        // Durable handles only with a batch oplock or a handle-caching lease; never
        // persistent (no CA shares).
        let caching = g.level == OplockLevel::BATCH
            || g.lease
                .is_some_and(|l| l.lease_state.contains(LeaseState::HANDLE));
        if let (Some(d), true, false) = (p.durable, caching, f.is_dir) {
            // 0 asks for the server's default; at most 300 s are granted (as Windows;
            // smb2.durable-v2-open.create-blob).
            let timeout_ms = match d.timeout_ms {
                0 => DURABLE_DEFAULT_TIMEOUT_MS,
                t => t.min(DURABLE_MAX_TIMEOUT_MS),
            };
            *f.durable.lock() = Some(Box::new(crate::state::open::Durable {
                v2: d.v2,
                timeout_ms,
                create_guid: d.create_guid,
                owner: p.owner,
            }));
            if d.v2 {
                out.push((cname::DH2Q, context_response::durable_v2(timeout_ms, 0)));
            } else {
                out.push((cname::DHNQ, context_response::durable_v1()));
            }
        }
    }
    if p.mxac {
        // A READONLY file denies data writes to everyone (the attribute, not this
        // open's access, decides; smb2.acls.OWNER-RIGHTS queries with READ_CONTROL).
        let readonly = info.attributes.contains(FileAttributes::READONLY);
        let tree = &p.tree;
        let max = if !readonly || handle.is_dir() || tree.read_only {
            tree.maximal_access
        } else {
            tree.maximal_access.difference(DATA_WRITE)
        };
        // A stored descriptor limits it further (smb2.acls.OWNER-RIGHTS).
        let max = sd_max.map_or(max, |m| max & m);
        out.push((
            cname::MXAC,
            context_response::maximal_access(NtStatus::SUCCESS, max),
        ));
    }
    if p.qfid {
        out.push((
            cname::QFID,
            context_response::on_disk_id(info.file_id, info.volume_id),
        ));
    }
    if !out.is_empty() {
        let refs: Vec<(&[u8], &[u8])> = out.iter().map(|(n, d)| (*n, d.as_slice())).collect();
        resp.contexts = encode_contexts(&refs);
    }
    Ok((Response::ok(resp.encode()), open.file_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_mapping() {
        let all = AccessMask::FILE_ALL_ACCESS;
        let granted = |desired: u32, maximal| granted_access(AccessMask(desired), maximal);
        assert_eq!(
            granted(AccessMask::MAXIMUM_ALLOWED.bits(), all),
            Ok(AccessMask(0x1f01ff))
        );
        assert_eq!(granted(0x08000000, all), Err(NtStatus::ACCESS_DENIED));
        assert_eq!(granted(0x04000000, all), Err(NtStatus::ACCESS_DENIED));
        assert_eq!(
            granted(AccessMask::ACCESS_SYSTEM_SECURITY.bits(), all),
            Err(NtStatus::PRIVILEGE_NOT_HELD)
        );
        assert_eq!(granted(0, all), Err(NtStatus::ACCESS_DENIED));
        assert_eq!(
            granted(AccessMask::SYNCHRONIZE.bits(), all),
            Ok(AccessMask::SYNCHRONIZE)
        );
        // Every single bit that is refused (smb2.create.gentest's Windows 7 mask;
        // SYNCHRONIZE alone is allowed as smb2.sharemode expects).
        let mut denied = 0;
        for i in 0..32 {
            if granted(1 << i, all).is_err() {
                denied |= 1 << i;
            }
        }
        assert_eq!(denied, 0x0de0fe00);
        // Read-only trees refuse write rights.
        let read_only = AccessMask(0x1200a9);
        assert_eq!(
            granted(AccessMask::GENERIC_WRITE.bits(), read_only),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(
            granted(AccessMask::GENERIC_READ.bits(), read_only),
            Ok(AccessMask::FILE_GENERIC_READ)
        );
    }

    #[test]
    fn name_normalization() {
        assert_eq!(normalize_name("a/b\\c"), Ok(("a\\b\\c".to_string(), false)));
        assert_eq!(normalize_name("dir\\"), Ok(("dir".to_string(), true)));
        assert_eq!(normalize_name(""), Ok((String::new(), false)));
        assert_eq!(
            normalize_name("..\\..\\.."),
            Err(NtStatus::OBJECT_PATH_SYNTAX_BAD)
        );
        assert_eq!(
            normalize_name("a/../b"),
            Err(NtStatus::OBJECT_PATH_SYNTAX_BAD)
        );
        // A stream name is not a path.
        assert_eq!(normalize_name("f:..").map(|x| x.1), Ok(false));
    }

    #[test]
    fn ea_parsing() {
        let mut b = vec![0u8; 8];
        b[5] = 3;
        b[6] = 2;
        b.extend_from_slice(b"abc\0xy");
        let v = parse_eas(&b).unwrap();
        assert_eq!(v, vec![("abc".to_string(), b"xy".to_vec())]);
        assert!(parse_eas(&b[..10]).is_err());
        let mut bad = b.clone();
        bad[0] = 3; // misaligned next
        assert!(parse_eas(&bad).is_err());
    }
}
