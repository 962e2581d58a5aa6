//! Durable handle reconnect ([MS-SMB2] 3.3.5.9.7 DHnC, 3.3.5.9.12 DH2C): a client
//! whose connection broke reclaims a durable open (kept by
//! [`crate::state::open::preserve_durable_opens_where`]) on a new connection and session.

use std::sync::Arc;

use smbx_vfs::CreateAction;
use smbx_wire::create::{ctx as cname, encode_contexts, CreateResponse, DurableReconnect};
use smbx_wire::oplock::OplockLevel;
use smbx_wire::NtStatus;

use super::super::{Ctx, HandlerResult, Response};
use crate::state::{FileId, Open, OpenKind, Tree};

/// Who a durable open belongs to: `domain\name` of the session's user; for a
/// guest or anonymous session (whose name anyone can give) also the client's
/// ClientGuid, so only the same client reclaims it.
pub fn owner_of(ctx: &Ctx<'_>) -> Result<String, NtStatus> {
    let Some(u) = ctx.session()?.user() else {
        return Ok(String::new());
    };
    let mut owner = format!("{}\\{}", u.domain.to_lowercase(), u.name.to_lowercase());
    if u.guest || u.anonymous {
        let guid = ctx.conn.negotiate.lock().client_guid;
        owner.push('@');
        for b in guid {
            owner.push_str(&format!("{b:02x}"));
        }
    }
    Ok(owner)
}

/// A client that lost its connection reconnects at once; the server may not have
/// seen the old connection end yet. If the open is still attached to another
/// connection, wait a little for that connection's teardown to preserve it.
async fn wait_for_disconnect(
    server: &Arc<crate::state::ServerState>,
    id: FileId,
    this_conn: u64,
) -> Option<Arc<Open>> {
    const TRIES: u32 = 50;
    const STEP: std::time::Duration = std::time::Duration::from_millis(10);
    let elsewhere = |s: &crate::state::ServerState| {
        s.opens.get(id).is_some_and(|o| {
            o.conn_id != this_conn && o.as_file().is_some_and(|f| f.durable.lock().is_some())
        })
    };
    if !elsewhere(server) {
        return None;
    }
    for _ in 0..TRIES {
        tokio::time::sleep(STEP).await;
        if let Some(o) = server.opens.disconnected(id) {
            return Some(o);
        }
        if !elsewhere(server) {
            return None;
        }
    }
    None
}

/// Reclaims the durable open named by `rc` for this session and tree.
pub async fn reconnect(
    ctx: &mut Ctx<'_>,
    tree: &Arc<Tree>,
    rc: DurableReconnect,
    name: &str,
    lease: Option<&[u8]>,
) -> HandlerResult {
    let server = ctx.server.clone();
    let not_found = NtStatus::OBJECT_NAME_NOT_FOUND;
    let old = match server.opens.disconnected(rc.file_id) {
        Some(o) => o,
        None => wait_for_disconnect(&server, rc.file_id, ctx.conn.id)
            .await
            .ok_or(not_found)?,
    };
    let f = old.as_file().ok_or(not_found)?;
    let d = f.durable.lock().clone().ok_or(not_found)?;
    // DH2C must also name the CreateGuid (zero for a version 1 open); DHnC reclaims
    // either version (smb2.durable-v2-open.reopen2b, smb2.durable-open.reopen2-lease).
    if rc.v2 && d.create_guid != rc.create_guid {
        return Err(not_found);
    }
    if d.owner != owner_of(ctx)? {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let vfs = server.files.vfs_share(&tree.share)?;
    if vfs.root_path() != f.vfs.root_path() {
        return Err(not_found);
    }
    // A leased open is reclaimed with its lease key (and only then).
    let client_guid = ctx.conn.negotiate.lock().client_guid;
    let had_lease = f.file.oplocks.granted_level(f.entry_id) == OplockLevel::LEASE;
    let lease = lease.and_then(|l| smbx_wire::oplock::decode_lease_request(l).ok());
    let lease_state = match (had_lease, lease) {
        (true, Some(l)) => Some((
            l,
            f.file
                .oplocks
                .lease_state(client_guid, l.lease_key)
                .ok_or(not_found)?,
        )),
        (true, None) => return Err(not_found),
        (false, Some(_)) => return Err(not_found),
        (false, None) => None,
    };
    // A leased open is reclaimed under its own name only ([MS-SMB2] 3.3.5.9.7: the
    // lease belongs to that file): another name is INVALID_PARAMETER.
    if lease_state.is_some() {
        let same = super::normalize_name(name)
            .map(|(n, _)| {
                n.eq_ignore_ascii_case(&f.path) || n.to_lowercase() == f.path.to_lowercase()
            })
            .unwrap_or(false);
        if !same {
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    drop(old);
    let old = server
        .opens
        .take_disconnected(rc.file_id)
        .ok_or(not_found)?;
    let old = match Arc::try_unwrap(old) {
        Ok(o) => o,
        Err(_) => return Err(not_found), // still referenced: it is being closed
    };
    let session_id = ctx.session()?.id;
    let open = Open {
        file_id: old.file_id,
        session_id,
        tree_id: tree.id,
        conn_id: ctx.conn.id,
        kind: old.kind,
    };
    let open = server.opens.insert_open(open).ok_or(not_found)?;
    let OpenKind::File(f) = &open.kind else {
        return Err(not_found);
    };
    f.file.oplocks.rebind(f.entry_id, ctx.conn.id, session_id);
    let info = f.stat()?;
    let mut resp = CreateResponse {
        create_action: CreateAction::Opened.as_u32(),
        creation_time: info.creation_time,
        last_access_time: info.last_access_time,
        last_write_time: info.last_write_time,
        change_time: info.change_time,
        allocation_size: if info.is_dir { 0 } else { info.allocation_size },
        end_of_file: if info.is_dir { 0 } else { info.size },
        file_attributes: info.attributes,
        file_id: open.file_id,
        ..Default::default()
    };
    let mut out: Vec<(&[u8], Vec<u8>)> = Vec::new();
    match lease_state {
        Some((mut l, state)) => {
            resp.oplock_level = OplockLevel::LEASE;
            l.lease_state = state;
            l.lease_flags = smbx_wire::oplock::LeaseFlags::empty();
            out.push((cname::RQLS, smbx_wire::oplock::encode_lease_response(&l)));
        }
        None => resp.oplock_level = f.file.oplocks.oplock_level(f.entry_id),
    }
    // A reclaim answers no durable context: none was requested (as Samba;
    // smb2.durable-open.reopen2-lease, smb2.durable-v2-open.reopen2: "no dh2q response
    // blob").
    if !out.is_empty() {
        let refs: Vec<(&[u8], &[u8])> = out.iter().map(|(n, d)| (*n, d.as_slice())).collect();
        resp.contexts = encode_contexts(&refs);
    }
    ctx.set_file_id(open.file_id);
    Ok(Response::ok(resp.encode()))
}
