//! Named pipes on `IPC$`: opening an in-process DCE/RPC endpoint as an open.
//! CREATE calls [`open_pipe`] on an IPC tree; READ/WRITE/IOCTL find the
//! [`crate::state::PipeOpen`] through `Open::as_pipe()`.

use std::sync::Arc;

use parking_lot::Mutex;
use smbx_rpc::{PipeContext, ShareInfo, STYPE_DISKTREE, STYPE_IPC, STYPE_SPECIAL};
use smbx_wire::NtStatus;

use super::Ctx;
use crate::state::{policy, Open, OpenKind, PipeOpen, ServerState};

/// The share list srvsvc reports: browseable disk shares plus `IPC$`. Local paths
/// only for an administrator (`admin users`; as Windows, which shows them to
/// administrators only); everyone else gets an empty path at every level.
pub fn share_infos(server: &ServerState, show_paths: bool) -> Vec<ShareInfo> {
    server
        .shares()
        .iter()
        .filter(|s| s.is_ipc() || s.config.browseable)
        .map(|s| ShareInfo {
            name: s.name.clone(),
            share_type: if s.is_ipc() {
                STYPE_IPC | STYPE_SPECIAL
            } else {
                STYPE_DISKTREE
            },
            comment: s.config.comment.clone(),
            path: if show_paths {
                s.config.path.display().to_string()
            } else {
                String::new()
            },
        })
        .collect()
}

/// Opens pipe `name` (e.g. `srvsvc`, leading `\` and `PIPE\` tolerated) on the
/// current IPC tree and registers it in the open table.
pub fn open_pipe(ctx: &mut Ctx<'_>, name: &str) -> Result<Arc<Open>, NtStatus> {
    let session = ctx.session()?.clone();
    let tree = ctx.tree()?.clone();
    if !tree.share.is_ipc() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let n = name.trim_start_matches('\\');
    let n = n
        .strip_prefix("PIPE\\")
        .or_else(|| n.strip_prefix("pipe\\"))
        .unwrap_or(n);
    let user = session.user().ok_or(NtStatus::ACCESS_DENIED)?;
    let config = ctx.config();
    let g = &config.global;
    let pctx = PipeContext {
        server_name: g.netbios_name.clone(),
        domain: g.workgroup.clone(),
        shares: share_infos(ctx.server, policy::is_admin(config, &user)),
        shares_denied: !policy::may_enumerate_shares(config, &user),
        user: user.name,
    };
    let pipe = smbx_rpc::Pipe::open(n, pctx).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let open = ctx.server.opens.insert(
        session.id,
        tree.id,
        ctx.conn.id,
        OpenKind::Pipe(Box::new(PipeOpen {
            name: n.to_string(),
            pipe: Mutex::new(pipe),
        })),
        g.max_open_files,
    )?;
    ctx.set_file_id(open.file_id);
    Ok(open)
}
