//! SESSION_SETUP ([MS-SMB2] 3.3.5.5): multi-leg SPNEGO/NTLM through
//! `smbx_security::auth::ServerAuth`, re-authentication, key derivation, session
//! flags, and the signed final response.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smbx_config::{EncryptSetting, SigningSetting};
use smbx_security::auth::{AuthError, AuthStep, Identity, IdentityKind, ServerAuth};
use smbx_security::keys;
use smbx_wire::negotiate::SECURITY_SIGNING_REQUIRED;
use smbx_wire::session::*;
use smbx_wire::Dialect;
use smbx_wire::NtStatus;

use super::{Ctx, HandlerResult, PreauthTarget, Request, Response};
use crate::security::{self, SessionSecurity};
use crate::state::session::{LogonSlot, SessionPhase, SessionUser};
use crate::state::Session;

/// Handles SESSION_SETUP.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let ss = SessionSetupRequest::decode(req.msg)?;
    let dialect = ctx.dialect();
    if ss.flags & SESSION_FLAG_BINDING != 0 {
        return super::session_bind::handle(ctx, req, &ss);
    }
    let is_311 = dialect == Dialect::SMB3_1_1;

    // Find or create the session.
    let (session, new) = if ctx.header.session_id == 0 {
        // Logons in progress are bounded per connection and server-wide (each
        // holds an authentication context until it completes or the session ends).
        let Some(slot) = LogonSlot::take(&ctx.conn.logons, &ctx.server.logons) else {
            tracing::debug!(conn = ctx.conn.id, "too many logons in progress; refused");
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        };
        let mut sec = SessionSecurity {
            auth: Some(
                ServerAuth::new(ctx.server.credentials(), ctx.server.auth_policy())
                    .with_kerberos(crate::kerberos::acceptor(&ctx.server.config())),
            ),
            ..Default::default()
        };
        if is_311 {
            sec.preauth = Some(security::connection_preauth(ctx.conn)?);
        }
        let s = ctx.server.sessions.create(dialect, ctx.conn.id, sec, slot);
        ctx.conn.sessions.lock().push(s.id);
        (s, true)
    } else {
        let s = ctx.session()?.clone();
        // Without the binding flag only a channel of the session may re-authenticate.
        if !s.is_bound(ctx.conn.id) {
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        {
            let mut st = s.state.lock();
            if st.security.auth.is_none() {
                // Re-authentication of a valid session.
                st.security.auth = Some(
                    ServerAuth::new(ctx.server.credentials(), ctx.server.auth_policy())
                        .with_kerberos(crate::kerberos::acceptor(&ctx.server.config())),
                );
            }
        }
        (s, false)
    };
    ctx.response_session_id = Some(session.id);
    ctx.session = Some(session.clone());
    let first_logon = session.phase() == SessionPhase::InProgress;

    // Run one authentication leg without holding the lock across anything else.
    let step = {
        let mut st = session.state.lock();
        if first_logon {
            if let Some(h) = st.security.preauth.as_mut() {
                h.update(req.msg);
            }
        }
        match st.security.auth.as_mut() {
            Some(a) => {
                let r = a.step(&ss.security_buffer);
                if let (Err(e), Some(detail)) = (&r, a.failure_detail()) {
                    tracing::warn!(
                        conn = ctx.conn.id,
                        client = %ctx.conn.peer,
                        session = session.id,
                        error = %e,
                        "logon failed: {detail}"
                    );
                }
                r
            }
            None => Err(AuthError::InvalidToken),
        }
    };

    match step {
        Ok(AuthStep::Continue(token)) => {
            if first_logon && is_311 {
                ctx.preauth_response = Some(PreauthTarget::Session(session.id));
            }
            Ok(reply(NtStatus::MORE_PROCESSING_REQUIRED, 0, token))
        }
        Ok(AuthStep::Done { token, identity }) => {
            let flags = complete(ctx, &session, &ss, identity, first_logon, new)?;
            Ok(reply(NtStatus::SUCCESS, flags, token))
        }
        Err(e) => {
            fail(ctx, &session);
            Err(auth_status(e))
        }
    }
}

/// A SESSION_SETUP response carrying `token`.
pub(super) fn reply(status: NtStatus, session_flags: u16, token: Vec<u8>) -> Response {
    Response::with_status(
        status,
        SessionSetupResponse {
            session_flags,
            security_buffer: token,
        }
        .encode(),
    )
}

/// The status a failed authentication leg answers.
pub(super) fn auth_status(e: AuthError) -> NtStatus {
    match e {
        AuthError::LogonFailure => NtStatus::LOGON_FAILURE,
        AuthError::InvalidToken => NtStatus::INVALID_PARAMETER,
    }
}

/// Drops a session whose authentication failed, on every channel.
fn fail(ctx: &mut Ctx<'_>, session: &Arc<Session>) {
    super::logoff::end_session(ctx.server, session);
}

/// Finishes a successful logon: keys, signing/encryption policy, session flags.
fn complete(
    ctx: &mut Ctx<'_>,
    session: &Arc<Session>,
    ss: &SessionSetupRequest,
    identity: Identity,
    first_logon: bool,
    _new: bool,
) -> Result<u16, NtStatus> {
    let dialect = ctx.dialect();
    let g = &ctx.config().global;
    let guest = identity.kind == IdentityKind::Guest;
    let anonymous = identity.kind == IdentityKind::Anonymous;
    let mut identity = identity;
    if let Some(names) = &identity.kerberos {
        // A Kerberos principal logs on as the local user it maps to.
        match crate::kerberos::local_user(&ctx.server.config(), names) {
            Ok(local) => {
                tracing::info!(
                    conn = ctx.conn.id,
                    session = session.id,
                    principal = %names.client,
                    service = %names.service,
                    user = %local,
                    "Kerberos ticket accepted"
                );
                identity.user = local;
            }
            Err(why) => {
                tracing::warn!(
                    conn = ctx.conn.id,
                    client = %ctx.conn.peer,
                    session = session.id,
                    "logon failed: Kerberos {why}"
                );
                fail(ctx, session);
                return Err(NtStatus::LOGON_FAILURE);
            }
        }
    }
    let user = SessionUser {
        name: identity.user.clone(),
        domain: identity.domain.clone(),
        guest,
        anonymous,
    };
    if let Err(e) = crate::state::policy::logon_allowed(ctx.config(), &user) {
        fail(ctx, session);
        return Err(e);
    }

    if !first_logon {
        // Re-authentication: same keys; the identity may be refreshed.
        let mut st = session.state.lock();
        st.security.auth = None;
        let flags = session_flags(&user, st.encrypt_data);
        st.user = Some(user);
        ctx.sign_response = st.security.keys.can_sign();
        return Ok(flags);
    }

    let mut st = session.state.lock();
    st.security.auth = None;
    st.logon = None;
    let preauth = st.security.preauth.take();
    let has_key = !identity.session_key.is_empty() && !guest && !anonymous;
    if has_key {
        let cipher = security::connection_cipher(ctx.conn);
        let k = keys::derive(
            dialect,
            &identity.session_key,
            preauth.as_ref().map(|h| h.value()),
            cipher,
        );
        security::install_keys(ctx.conn, &mut st.security, &k);
    }
    let client_requires = u16::from(ss.security_mode) & SECURITY_SIGNING_REQUIRED != 0;
    st.signing_required =
        has_key && (g.server_signing == SigningSetting::Mandatory || client_requires);
    let can_encrypt = has_key && dialect >= Dialect::SMB3_0 && st.security.keys.can_seal();
    st.encrypt_data = match g.server_smb_encrypt {
        EncryptSetting::Required => {
            if !can_encrypt {
                drop(st);
                fail(ctx, session);
                return Err(NtStatus::ACCESS_DENIED);
            }
            true
        }
        EncryptSetting::Desired => can_encrypt,
        _ => false,
    };
    // 3.x signs the final response whenever there is a key; 2.x when signing is required.
    ctx.sign_response = has_key && (dialect >= Dialect::SMB3_0 || st.signing_required);
    let flags = session_flags(&user, st.encrypt_data);
    st.user = Some(user);
    st.phase = SessionPhase::Valid;
    drop(st);
    // An anonymous session leaves the connection under the unauthenticated
    // timeout (it counts from the connection's start).
    if !anonymous {
        ctx.conn.authenticated.store(true, Ordering::Relaxed);
    }
    if ss.previous_session_id != 0 && ss.previous_session_id != session.id {
        close_previous(ctx, ss.previous_session_id, &identity);
    }
    tracing::info!(
        conn = ctx.conn.id,
        session = session.id,
        user = %identity.user,
        kind = ?identity.kind,
        "session established"
    );
    Ok(flags)
}

/// A client reconnecting after losing its connection names its old session in
/// PreviousSessionId ([MS-SMB2] 3.3.5.5.3): once the new session is authenticated as
/// the same user, the old one is logged off (its durable opens kept for reclaim, as
/// on a lost connection). Another user's session, a guest or anonymous logon leaves
/// it alone.
fn close_previous(ctx: &Ctx<'_>, previous: u64, identity: &Identity) {
    if identity.kind != IdentityKind::User {
        return;
    }
    let Some(old) = ctx.server.sessions.get(previous) else {
        return;
    };
    let same_user = old.user().is_some_and(|u| {
        !u.guest
            && !u.anonymous
            && u.name.eq_ignore_ascii_case(&identity.user)
            && u.domain.eq_ignore_ascii_case(&identity.domain)
    });
    if !same_user || old.phase() != SessionPhase::Valid {
        return;
    }
    tracing::info!(old = previous, new = ?ctx.response_session_id, "previous session closed");
    crate::state::open::preserve_durable_opens_of_session(ctx.server, previous);
    super::logoff::end_session(ctx.server, &old);
}

fn session_flags(user: &SessionUser, encrypt: bool) -> u16 {
    let mut f = 0;
    if user.anonymous {
        f |= SESSION_FLAG_IS_NULL;
    } else if user.guest {
        f |= SESSION_FLAG_IS_GUEST;
    }
    if encrypt {
        f |= SESSION_FLAG_ENCRYPT_DATA;
    }
    f
}
