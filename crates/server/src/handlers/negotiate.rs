//! NEGOTIATE ([MS-SMB2] 3.3.5.3, 3.3.5.4), including the SMB1 multi-protocol
//! negotiate that upgrades to SMB2.

use std::sync::Arc;

use smbx_config::{EncryptSetting, SigningSetting};
use smbx_wire::header::{FLAGS_SERVER_TO_REDIR, HEADER_SIZE};
use smbx_wire::negotiate::*;
use smbx_wire::Dialect;
use smbx_wire::{smb1, Command, Header, NtStatus, Writer};

use super::{Ctx, HandlerResult, PreauthTarget, Request, Response};
use crate::conn::{Connection, NegotiateState};
use crate::dispatch::Flow;
use crate::security;

/// STATUS_SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP.
pub const STATUS_NO_PREAUTH_INTEGRITY_HASH_OVERLAP: NtStatus = NtStatus(0xC05D_0000);

/// Ciphers supported, any order (the client's order decides).
const SUPPORTED_CIPHERS: [u16; 4] = [
    CIPHER_AES128_GCM,
    CIPHER_AES128_CCM,
    CIPHER_AES256_GCM,
    CIPHER_AES256_CCM,
];

/// Signing algorithms supported.
const SUPPORTED_SIGNING: [u16; 3] = [SIGNING_AES_GMAC, SIGNING_AES_CMAC, SIGNING_HMAC_SHA256];

/// Picks the highest dialect both sides support within `[min, max]`.
pub fn choose_dialect(offered: &[Dialect], min: Dialect, max: Dialect) -> Option<Dialect> {
    offered
        .iter()
        .copied()
        .filter(|d| d.is_known() && *d >= min && *d <= max)
        .max()
}

/// Capabilities and security mode for a dialect.
fn server_caps(ctx_cfg: &smbx_config::Global, dialect: Dialect, client_caps: u32) -> u32 {
    let mut caps = 0;
    if dialect >= Dialect::SMB2_1 {
        caps |= CAP_LEASING | CAP_LARGE_MTU;
    }
    if dialect >= Dialect::SMB3_0 && ctx_cfg.server_multi_channel_support {
        caps |= CAP_MULTI_CHANNEL;
    }
    if (dialect == Dialect::SMB3_0 || dialect == Dialect::SMB3_0_2)
        && client_caps & CAP_ENCRYPTION != 0
        && ctx_cfg.server_smb_encrypt != EncryptSetting::Off
    {
        caps |= CAP_ENCRYPTION;
    }
    caps
}

fn security_mode(g: &smbx_config::Global) -> u16 {
    if g.server_signing == SigningSetting::Mandatory {
        SECURITY_SIGNING_ENABLED | SECURITY_SIGNING_REQUIRED
    } else {
        SECURITY_SIGNING_ENABLED
    }
}

fn base_response(conn: &Connection, dialect: Dialect, caps: u32) -> NegotiateResponse {
    let g = &conn.config.global;
    let (max_t, max_r, max_w) = if dialect == Dialect::SMB2_0_2 || dialect == Dialect::WILDCARD {
        (65536, 65536, 65536)
    } else {
        (g.smb2_max_trans, g.smb2_max_read, g.smb2_max_write)
    };
    NegotiateResponse {
        security_mode: security_mode(g),
        dialect,
        server_guid: conn.server.guid,
        capabilities: caps,
        max_transact_size: max_t,
        max_read_size: max_r,
        max_write_size: max_w,
        system_time: smbx_wire::time::now_filetime(),
        server_start_time: 0,
        security_buffer: security::negotiate_token(&conn.server),
        contexts: Vec::new(),
    }
}

/// Handles an SMB2 NEGOTIATE.
pub async fn handle(ctx: &mut Ctx<'_>, req: &Request<'_>) -> HandlerResult {
    let neg = NegotiateRequest::decode(req.msg)?;
    let g = &ctx.config().global;
    let dialect = choose_dialect(&neg.dialects, g.server_min_protocol, g.server_max_protocol)
        .ok_or(NtStatus::NOT_SUPPORTED)?;
    let caps = server_caps(g, dialect, neg.capabilities);
    let mut resp = base_response(ctx.conn, dialect, caps);
    let mut state = NegotiateState {
        dialect,
        client_capabilities: neg.capabilities,
        client_guid: neg.client_guid,
        client_security_mode: neg.security_mode,
        client_dialects: neg.dialects.clone(),
        server_capabilities: caps,
        server_security_mode: resp.security_mode,
        cipher: 0,
        signing_algorithm: None,
        preauth: None,
    };
    if caps & CAP_ENCRYPTION != 0 {
        state.cipher = CIPHER_AES128_CCM;
    }
    if dialect == Dialect::SMB3_1_1 {
        resp.contexts = negotiate_contexts(g, &neg.contexts, &mut state)?;
    }
    *ctx.conn.negotiate.lock() = state;
    if dialect == Dialect::SMB3_1_1 {
        security::preauth_negotiate_request(ctx.conn, req.msg);
        ctx.preauth_response = Some(PreauthTarget::Connection);
    }
    Ok(Response::ok(resp.encode()))
}

/// Processes the client's 3.1.1 negotiate contexts and builds the server's.
fn negotiate_contexts(
    g: &smbx_config::Global,
    client: &[NegotiateContext],
    state: &mut NegotiateState,
) -> Result<Vec<NegotiateContext>, NtStatus> {
    let mut out = Vec::new();
    let (mut preauth, mut enc, mut sig) = (0, 0, 0);
    for c in client {
        match c {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms, ..
            } => {
                preauth += 1;
                if !hash_algorithms.contains(&HASH_SHA512) {
                    return Err(STATUS_NO_PREAUTH_INTEGRITY_HASH_OVERLAP);
                }
                let mut salt = vec![0u8; 32];
                rand::Rng::fill(&mut rand::thread_rng(), &mut salt[..]);
                out.push(NegotiateContext::PreauthIntegrity {
                    hash_algorithms: vec![HASH_SHA512],
                    salt,
                });
            }
            NegotiateContext::Encryption { ciphers } => {
                enc += 1;
                let chosen = if g.server_smb_encrypt == EncryptSetting::Off {
                    0
                } else {
                    ciphers
                        .iter()
                        .copied()
                        .find(|c| SUPPORTED_CIPHERS.contains(c))
                        .unwrap_or(0)
                };
                state.cipher = chosen;
                out.push(NegotiateContext::Encryption {
                    ciphers: vec![chosen],
                });
            }
            NegotiateContext::Signing { algorithms } => {
                sig += 1;
                let chosen = algorithms
                    .iter()
                    .copied()
                    .find(|a| SUPPORTED_SIGNING.contains(a))
                    .unwrap_or(SIGNING_AES_CMAC);
                state.signing_algorithm = Some(chosen);
                out.push(NegotiateContext::Signing {
                    algorithms: vec![chosen],
                });
            }
            // Compression, netname, transport, RDMA transform and unknown: ignored.
            _ => {}
        }
    }
    if preauth != 1 || enc > 1 || sig > 1 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // The preauth context comes first in the response.
    out.sort_by_key(|c| c.context_type() != CTX_PREAUTH_INTEGRITY);
    Ok(out)
}

/// Answers an SMB1 multi-protocol NEGOTIATE with an SMB2 NEGOTIATE response
/// (dialect 0x0202 or the wildcard 0x02FF), or drops the connection.
pub(crate) async fn smb1(conn: &Arc<Connection>, frame: &[u8]) -> Flow {
    if conn.dialect() != Dialect::NONE {
        return Flow::Disconnect("SMB1 after negotiate");
    }
    let Ok(dialects) = smb1::parse_negotiate(frame) else {
        return Flow::Disconnect("SMB1 message is not a valid NEGOTIATE");
    };
    let g = &conn.config.global;
    let Some(dialect) = smb1::smb2_answer(&dialects, g.server_min_protocol, g.server_max_protocol)
    else {
        return Flow::Disconnect("SMB1 client without SMB2 dialects");
    };
    let caps = server_caps(g, dialect, 0);
    let resp = base_response(conn, dialect, caps);
    {
        let mut n = conn.negotiate.lock();
        n.dialect = dialect;
        n.server_capabilities = caps;
        n.server_security_mode = resp.security_mode;
    }
    // MessageId 0 is used by this exchange; the SMB2 NEGOTIATE that follows uses 1.
    let granted = {
        let mut w = conn.credits.lock();
        let _ = w.consume(0, 1);
        w.grant(1, 1)
    };
    let h = Header {
        command: Command::Negotiate as u16,
        credits: granted,
        flags: FLAGS_SERVER_TO_REDIR,
        ..Default::default()
    };
    let mut w = Writer::with_capacity(HEADER_SIZE + 128);
    h.encode(&mut w);
    w.bytes(&resp.encode());
    conn.send(w.into_vec()).await;
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_choice_respects_bounds() {
        let all = Dialect::ALL;
        assert_eq!(
            choose_dialect(&all, Dialect::SMB2_0_2, Dialect::SMB3_1_1),
            Some(Dialect::SMB3_1_1)
        );
        assert_eq!(
            choose_dialect(&all, Dialect::SMB2_0_2, Dialect::SMB3_0_2),
            Some(Dialect::SMB3_0_2)
        );
        assert_eq!(
            choose_dialect(
                &[Dialect::SMB2_0_2, Dialect::SMB2_1],
                Dialect::SMB3_0,
                Dialect::SMB3_1_1
            ),
            None
        );
        assert_eq!(
            choose_dialect(
                &[Dialect::WILDCARD, Dialect::from_u16(0x222)],
                Dialect::SMB2_0_2,
                Dialect::SMB3_1_1
            ),
            None
        );
    }

    #[test]
    fn contexts_follow_client_order_and_require_preauth() {
        let g = smbx_config::Global::default();
        let mut st = NegotiateState::default();
        let pre = NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![HASH_SHA512],
            salt: vec![1; 32],
        };
        let out = negotiate_contexts(
            &g,
            &[
                NegotiateContext::Encryption {
                    ciphers: vec![9, CIPHER_AES256_GCM, CIPHER_AES128_GCM],
                },
                pre.clone(),
                NegotiateContext::Signing {
                    algorithms: vec![7, SIGNING_AES_CMAC, SIGNING_AES_GMAC],
                },
                NegotiateContext::Unknown {
                    context_type: 0x99,
                    data: vec![],
                },
            ],
            &mut st,
        )
        .unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0].context_type(), CTX_PREAUTH_INTEGRITY);
        assert_eq!(st.cipher, CIPHER_AES256_GCM);
        assert_eq!(st.signing_algorithm, Some(SIGNING_AES_CMAC));
        assert_eq!(
            negotiate_contexts(&g, &[], &mut st),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(
            negotiate_contexts(&g, &[pre.clone(), pre], &mut st),
            Err(NtStatus::INVALID_PARAMETER)
        );
        let bad = NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![2],
            salt: vec![],
        };
        assert_eq!(
            negotiate_contexts(&g, &[bad], &mut st),
            Err(STATUS_NO_PREAUTH_INTEGRITY_HASH_OVERLAP)
        );
    }
}
