//! TREE_CONNECT ([MS-SMB2] 3.3.5.7).

use std::sync::Arc;

use smbx_config::{EncryptSetting, SigningSetting};
use smbx_wire::negotiate::CAP_ENCRYPTION;
use smbx_wire::tree::*;
use smbx_wire::AccessMask;
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, Request, Response};
use crate::state::session::SessionUser;
use crate::state::share::Share;
use crate::state::Tree;

/// FILE_ALL_ACCESS-style full access mask.
pub const ACCESS_FULL: AccessMask = AccessMask::FILE_ALL_ACCESS;
/// Read, execute and attribute/EA/ACL reads.
pub const ACCESS_READ: AccessMask =
    AccessMask::FILE_GENERIC_READ.union(AccessMask::FILE_GENERIC_EXECUTE);

/// May `user` use `share`? Returns the access mask or ACCESS_DENIED.
pub fn share_access(share: &Share, user: &SessionUser) -> Result<AccessMask, NtStatus> {
    if share.is_ipc() {
        return Ok(ACCESS_FULL);
    }
    if user.anonymous {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if user.guest && !share.config.guest_ok {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let valid = &share.config.valid_users;
    if !valid.is_empty()
        && (user.guest || !valid.iter().any(|v| v.eq_ignore_ascii_case(&user.name)))
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(if share.config.read_only {
        ACCESS_READ
    } else {
        ACCESS_FULL
    })
}

/// Handles TREE_CONNECT.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let tc = TreeConnectRequest::decode(req.msg)?;
    let session = ctx.session()?.clone();
    let name = tc.share_name().ok_or(NtStatus::BAD_NETWORK_NAME)?;
    let share = ctx
        .server
        .find_share(name)
        .ok_or(NtStatus::BAD_NETWORK_NAME)?;
    let user = session.user().ok_or(NtStatus::ACCESS_DENIED)?;
    // [MS-SMB2] 3.3.5.7: with 3.1.1 a session that can sign (neither guest nor anonymous)
    // must send TREE_CONNECT signed or encrypted. The spec says disconnect; like Samba we
    // refuse the request, which keeps the connection usable for a correct retry.
    if ctx.dialect() == Dialect::SMB3_1_1
        && !user.guest
        && !user.anonymous
        && !ctx.encrypted
        && !ctx.header.is_signed()
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let maximal_access = share_access(&share, &user)?;

    let dialect = ctx.dialect();
    let (client_can_encrypt, session_encrypts) = {
        let n = ctx.conn.negotiate.lock();
        let can = dialect >= Dialect::SMB3_0
            && if dialect == Dialect::SMB3_1_1 {
                n.cipher != 0
            } else {
                n.client_capabilities & CAP_ENCRYPTION != 0
            };
        (can, session.state.lock().encrypt_data)
    };
    let g = &ctx.config().global;
    let setting = if share.is_ipc() {
        g.server_smb_encrypt
    } else {
        share.config.effective_encrypt(g)
    };
    let encrypt_data = match setting {
        EncryptSetting::Required => {
            if !client_can_encrypt || user.guest || user.anonymous {
                return Err(NtStatus::ACCESS_DENIED);
            }
            true
        }
        EncryptSetting::Desired => client_can_encrypt && !user.guest && !user.anonymous,
        EncryptSetting::IfRequired | EncryptSetting::Off => false,
    } || session_encrypts;

    // Per-share `server signing = mandatory`: the tree's unencrypted traffic must be
    // signed, which needs a session with a signing key.
    let signing_required = !share.is_ipc()
        && share.config.effective_signing(g) == SigningSetting::Mandatory
        && !encrypt_data;
    if signing_required {
        if user.guest || user.anonymous || !crate::security::can_sign(&session) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        ctx.sign_response = true;
    }

    let (share_type, mut share_flags) = if share.is_ipc() {
        (SHARE_TYPE_PIPE, SHAREFLAG_NO_CACHING)
    } else {
        (SHARE_TYPE_DISK, SHAREFLAG_MANUAL_CACHING)
    };
    if encrypt_data {
        share_flags |= SHAREFLAG_ENCRYPT_DATA;
    }
    let read_only = maximal_access != ACCESS_FULL;
    let tree_id = {
        let mut trees = session.trees.lock();
        let id = trees.alloc_id();
        trees.trees.insert(
            id,
            Arc::new(Tree {
                id,
                session_id: session.id,
                share,
                maximal_access,
                read_only,
                encrypt_data,
                signing_required,
            }),
        );
        id
    };
    ctx.response_tree_id = Some(tree_id);
    Ok(Response::ok(
        TreeConnectResponse {
            share_type,
            share_flags,
            capabilities: 0,
            maximal_access,
        }
        .encode(),
    ))
}
