//! SESSION_SETUP with SMB2_SESSION_FLAG_BINDING ([MS-SMB2] 3.3.5.5.2): binds the
//! connection as a new channel of an existing session (multichannel). The binding
//! request is signed with the session's key; a new authentication as the same user
//! yields the channel's own signing key (3.1.1: derived with the binding's preauth
//! hash), and the connection's signing algorithm. Encryption keys stay the session's.

use std::sync::Arc;

use smbx_security::auth::{AuthError, AuthStep, IdentityKind, ServerAuth};
use smbx_security::keys;
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_wire::session::*;
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use super::session_setup::{auth_status, reply};
use super::{Ctx, HandlerResult, PreauthTarget, Request};
use crate::security::{self, Channel};
use crate::state::session::SessionPhase;

/// Most channels one session may have (as Windows); one more binding is refused
/// with STATUS_INSUFFICIENT_RESOURCES, as Windows and Samba do
/// (smb2.multichannel.generic.num_channels).
pub const MAX_CHANNELS: usize = 32;

/// Handles a binding SESSION_SETUP leg.
pub fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>, ss: &SessionSetupRequest) -> HandlerResult {
    if ctx.header.session_id == 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let session = ctx.session()?.clone();
    ctx.response_session_id = Some(session.id);
    let conn_id = ctx.conn.id;
    let (dialect, conn_alg, conn_cipher, multichannel) = {
        let n = ctx.conn.negotiate.lock();
        (
            n.dialect,
            security::signing_algorithm(n.dialect, n.signing_algorithm),
            n.cipher,
            n.server_capabilities & smbx_wire::negotiate::CAP_MULTI_CHANNEL != 0,
        )
    };
    let continuing = {
        let st = session.state.lock();
        if st.phase != SessionPhase::Valid {
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        let sec = &st.security;
        let session_alg = sec
            .signing_algorithm
            .unwrap_or(SigningAlgorithm::HmacSha256);
        // A GMAC-signed session binds only GMAC channels and vice versa.
        if session_alg == SigningAlgorithm::AesGmac && conn_alg != session_alg {
            return Err(NtStatus::REQUEST_OUT_OF_SEQUENCE);
        }
        if conn_alg == SigningAlgorithm::AesGmac && session_alg != conn_alg {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        if dialect < Dialect::SMB3_0 || !multichannel {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        // The request must be signed (its signature was checked with the session's key).
        if !ctx.signature_ok || !sec.keys.can_sign() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if session.dialect != dialect || sec.cipher != conn_cipher {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        match sec.channels.iter().find(|c| c.conn_id == conn_id) {
            Some(c) if c.established => return Err(NtStatus::REQUEST_NOT_ACCEPTED),
            Some(_) => true,
            None => {
                let user = st.user.as_ref();
                if user.is_none_or(|u| u.guest || u.anonymous) {
                    return Err(NtStatus::NOT_SUPPORTED);
                }
                if sec.channels.len() >= MAX_CHANNELS {
                    return Err(NtStatus::INSUFFICIENT_RESOURCES);
                }
                false
            }
        }
    };
    ctx.session = Some(session.clone());

    // Start (or continue) the channel's own authentication.
    let step = {
        let mut st = session.state.lock();
        if !continuing {
            let preauth = if dialect == Dialect::SMB3_1_1 {
                Some(security::connection_preauth(ctx.conn)?)
            } else {
                None
            };
            st.security.channels.push(Channel {
                conn_id,
                established: false,
                signer: None,
                auth: Some(
                    ServerAuth::new(ctx.server.credentials(), ctx.server.auth_policy())
                        .with_kerberos(crate::kerberos::acceptor(&ctx.server.config())),
                ),
                preauth,
            });
        }
        let ch = st
            .security
            .channel_mut(conn_id)
            .ok_or(NtStatus::INTERNAL_ERROR)?;
        if let Some(h) = ch.preauth.as_mut() {
            h.update(req.msg);
        }
        match ch.auth.as_mut() {
            Some(a) => a.step(&ss.security_buffer),
            None => Err(AuthError::InvalidToken),
        }
    };
    {
        let mut cs = ctx.conn.sessions.lock();
        if !cs.contains(&session.id) {
            cs.push(session.id);
        }
    }

    let drop_channel = |ctx: &mut Ctx<'_>| {
        session.remove_channel(conn_id);
        ctx.conn.sessions.lock().retain(|s| *s != session.id);
    };
    match step {
        Ok(AuthStep::Continue(token)) => {
            if dialect == Dialect::SMB3_1_1 {
                ctx.preauth_response = Some(PreauthTarget::Binding(session.id));
            }
            Ok(reply(NtStatus::MORE_PROCESSING_REQUIRED, 0, token))
        }
        Ok(AuthStep::Done {
            token,
            mut identity,
        }) => {
            if let Some(names) = &identity.kerberos {
                // A Kerberos channel binds as the local user its principal maps to.
                match crate::kerberos::local_user(&ctx.server.config(), names) {
                    Ok(local) => identity.user = local,
                    Err(why) => {
                        tracing::warn!(conn = conn_id, "channel binding refused: Kerberos {why}");
                        drop_channel(ctx);
                        return Err(NtStatus::LOGON_FAILURE);
                    }
                }
            }
            let mut st = session.state.lock();
            let same_user = identity.kind == IdentityKind::User
                && st
                    .user
                    .as_ref()
                    .is_some_and(|u| u.name.eq_ignore_ascii_case(&identity.user));
            if !same_user {
                drop(st);
                drop_channel(ctx);
                return Err(NtStatus::ACCESS_DENIED);
            }
            if identity.session_key.is_empty() {
                drop(st);
                drop_channel(ctx);
                return Err(NtStatus::NOT_SUPPORTED);
            }
            let encrypt = st.encrypt_data;
            let ch = st
                .security
                .channel_mut(conn_id)
                .ok_or(NtStatus::INTERNAL_ERROR)?;
            let preauth = ch.preauth.take();
            let k = keys::derive(
                dialect,
                &identity.session_key,
                preauth.as_ref().map(|h| h.value()),
                None,
            );
            ch.signer = Some(Arc::new(Signer::new(conn_alg, &k.signing)));
            ch.auth = None;
            ch.established = true;
            drop(st);
            ctx.sign_response = true;
            tracing::info!(
                conn = conn_id,
                session = session.id,
                user = %identity.user,
                "channel bound to session"
            );
            let flags = if encrypt {
                SESSION_FLAG_ENCRYPT_DATA
            } else {
                0
            };
            Ok(reply(NtStatus::SUCCESS, flags, token))
        }
        Err(e) => {
            drop_channel(ctx);
            Err(auth_status(e))
        }
    }
}
