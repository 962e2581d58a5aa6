//! Create replay ([MS-SMB2] 3.3.5.9.10, as Samba and Windows behave): a CREATE with a
//! DH2Q context reserves its CreateGuid in the server's replay cache
//! (`state/replay.rs`) while it runs and names its open once it succeeded.
//!
//! - Another CREATE with the CreateGuid while the first still runs (it waits for an
//!   oplock / lease break): FILE_NOT_AVAILABLE, the client retries.
//! - With SMB2_FLAGS_REPLAY_OPERATION, once the open exists: the open is answered
//!   again (same FileId, CreateAction, times) and nothing is opened. An oplock open
//!   answers the requested level (and DH2Q only if that level could be durable); a
//!   leased open must be replayed with its lease key (else ACCESS_DENIED) and answers
//!   its lease's current state. A lease replay of an oplock open is ACCESS_DENIED.
//! - Without the flag, once the open exists: DUPLICATE_OBJECTID.
//! - Once any request has named the open's FileId (the client evidently has the
//!   CREATE response), the CreateGuid no longer refers to it: a replay then is a new
//!   CREATE (which may break the first open's oplock), as Samba behaves
//!   (smb2.replay.replay6).

use std::future::Future;

use smbx_vfs::CreateAction;
use smbx_wire::create::{ctx as cname, encode_contexts};
use smbx_wire::header::FLAGS_REPLAY_OPERATION;
use smbx_wire::oplock::OplockLevel;
use smbx_wire::NtStatus;

use super::super::{Ctx, Response};
use crate::state::replay::{Lookup, Reservation};
use crate::state::FileId;

/// What [`check`] decided.
pub enum Check {
    /// A replay answered from the existing open.
    Replayed(Response, FileId),
    /// A new CREATE: it holds the CreateGuid until it completes or fails.
    New(Reservation),
}

/// Looks the DH2Q `create_guid` of this CREATE up in the replay cache.
pub fn check(
    ctx: &Ctx<'_>,
    create_guid: [u8; 16],
    requested_level: OplockLevel,
    lease: Option<&[u8]>,
) -> Result<Check, NtStatus> {
    let server = ctx.server.clone();
    let client_guid = ctx.conn.negotiate.lock().client_guid;
    let key = (client_guid, create_guid);
    // An open whose FileId a later request used no longer answers replays: the client
    // has seen its CREATE response (Samba likewise drops it from its replay cache).
    let replayable = |id| {
        server
            .opens
            .get(id)
            .is_some_and(|o| o.as_file().is_none_or(|f| !f.was_used()))
    };
    let (id, action) = match server.replay.reserve(key, replayable) {
        Lookup::Reserved(token) => return Ok(Check::New(Reservation::new(server, key, token))),
        Lookup::Pending => return Err(NtStatus::FILE_NOT_AVAILABLE),
        Lookup::Done(id, action) => (id, action),
    };
    if ctx.header.flags & FLAGS_REPLAY_OPERATION == 0 {
        return Err(NtStatus::DUPLICATE_OBJECTID);
    }
    let open = server.opens.get(id).ok_or(NtStatus::FILE_NOT_AVAILABLE)?;
    if open.session_id != ctx.session()?.id {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let f = open.as_file().ok_or(NtStatus::ACCESS_DENIED)?;
    let requested_lease = match lease {
        Some(b) if requested_level == OplockLevel::LEASE => {
            Some(smbx_wire::oplock::decode_lease_request(b)?)
        }
        _ => None,
    };
    let leased = f.file.oplocks.granted_level(f.entry_id) == OplockLevel::LEASE;
    let mut out: Vec<(&[u8], Vec<u8>)> = Vec::new();
    let oplock_level = match (leased, requested_lease) {
        (true, Some(req)) => {
            let cur = f
                .file
                .oplocks
                .lease_of(f.entry_id)
                .ok_or(NtStatus::ACCESS_DENIED)?;
            if cur.lease_key != req.lease_key {
                return Err(NtStatus::ACCESS_DENIED);
            }
            out.push((cname::RQLS, smbx_wire::oplock::encode_lease_response(&cur)));
            OplockLevel::LEASE
        }
        (true, None) | (false, Some(_)) => return Err(NtStatus::ACCESS_DENIED),
        (false, None) => requested_level,
    };
    let durable = f
        .durable
        .lock()
        .as_ref()
        .filter(|d| d.v2)
        .map(|d| d.timeout_ms);
    if let Some(timeout_ms) = durable {
        if oplock_level == OplockLevel::BATCH || oplock_level == OplockLevel::LEASE {
            out.push((
                cname::DH2Q,
                smbx_wire::create::response::durable_v2(timeout_ms, 0),
            ));
        }
    }
    let mut info = f.stat()?;
    f.file
        .times
        .adjust(&mut info, smbx_wire::time::now_filetime());
    let mut resp = super::response_from_info(&info, action);
    resp.oplock_level = oplock_level;
    resp.file_id = id;
    if !out.is_empty() {
        let refs: Vec<(&[u8], &[u8])> = out.iter().map(|(n, d)| (*n, d.as_slice())).collect();
        resp.contexts = encode_contexts(&refs);
    }
    Ok(Check::Replayed(Response::ok(resp.encode()), id))
}

/// Runs the open phase of a CREATE holding `reservation`: on success the cache names
/// the new open; on failure (or if the CREATE is dropped) the CreateGuid is freed.
/// The new open also takes the CREATE's ChannelSequence `csn` ([MS-SMB2] 3.3.5.9:
/// Open.ChannelSequence; see `FileOpen::check_channel_sequence`).
pub async fn track<F>(
    open: F,
    reservation: Option<Reservation>,
    server: std::sync::Arc<crate::state::ServerState>,
    csn: u16,
) -> Result<(Response, FileId), NtStatus>
where
    F: Future<Output = Result<(Response, FileId), NtStatus>>,
{
    let r = open.await;
    if let Ok((resp, id)) = &r {
        if let Some(f) = server.opens.get(*id).as_ref().and_then(|o| o.as_file()) {
            f.set_channel_sequence(csn);
        }
        if let Some(g) = reservation {
            g.complete(*id, create_action_of(&resp.body));
        }
    }
    r
}

/// CreateAction of an encoded CREATE response body (bytes 4..8, [MS-SMB2] 2.2.14).
fn create_action_of(body: &[u8]) -> u32 {
    body.get(4..8)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(CreateAction::Opened.as_u32())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_action_from_body() {
        let r = smbx_wire::create::CreateResponse {
            create_action: CreateAction::Created.as_u32(),
            ..Default::default()
        };
        assert_eq!(
            create_action_of(&r.encode()),
            CreateAction::Created.as_u32()
        );
        assert_eq!(create_action_of(&[0; 3]), CreateAction::Opened.as_u32());
    }
}
