//! Kerberos 5 inside SPNEGO, through the system's GSSAPI ([`crate::gss`]).
//!
//! * [`KerberosAcceptor`]: what the server's acceptor ([`crate::auth::ServerAuth`]) needs
//!   to accept AP-REQs: the keytab and the service the tickets must be for.
//! * [`KerberosInitiator`]: the client side: an AP-REQ from the caller's credential
//!   cache in a SPNEGO NegTokenInit, then the server's AP-REP (mutual authentication)
//!   and the session key.
//!
//! The SMB session key is the key GSS_C_INQ_SSPI_SESSION_KEY returns (the acceptor
//! subkey with mutual authentication), at its full length: [`crate::keys::derive`] takes
//! its first 16 bytes (zero-padded) as Session.SessionKey and, for a 256-bit cipher at
//! 3.1.1, the full key, as [MS-SMB2] 3.3.5.5.3 and Windows do.

use std::path::PathBuf;

use crate::gss::{self, Context, Cred, GssError};
use crate::spnego::{self, NegState, NegTokenInit, NegotiationToken};

/// Whether `oid` (DER content) names Kerberos 5 (the IETF or Microsoft's OID).
pub fn is_krb5_oid(oid: &[u8]) -> bool {
    oid == spnego::OID_KRB5 || oid == spnego::OID_MS_KRB5
}

/// Splits `user@REALM` (or `host/name@REALM`) at its last unescaped `@`.
pub fn split_principal(principal: &str) -> (&str, &str) {
    let bytes = principal.as_bytes();
    let mut at = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'@' => at = Some(i),
            _ => {}
        }
        i += 1;
    }
    match at {
        Some(i) => (&principal[..i], &principal[i + 1..]),
        None => (principal, ""),
    }
}

/// The server's Kerberos settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosAcceptor {
    /// The keytab holding the service keys (`dedicated keytab file`); `None` is the
    /// system's default keytab (`KRB5_KTNAME` or /etc/krb5.keytab).
    pub keytab: Option<PathBuf>,
    /// The service tickets must be for (`cifs`): a ticket for any other service of
    /// the keytab is refused.
    pub service: String,
}

impl KerberosAcceptor {
    /// Acceptor settings for `cifs/<host>` tickets from `keytab`.
    pub fn new(keytab: Option<PathBuf>) -> KerberosAcceptor {
        KerberosAcceptor {
            keytab,
            service: "cifs".to_string(),
        }
    }

    /// The acceptor credentials (keys are read lazily, per ticket).
    pub(crate) fn credentials(&self) -> Result<Cred, GssError> {
        Cred::acceptor(self.keytab.as_deref())
    }

    /// Whether the accepted service principal (`cifs/host@REALM`) is one we serve.
    pub(crate) fn service_ok(&self, service_principal: &str) -> bool {
        let (name, _realm) = split_principal(service_principal);
        name.split('/')
            .next()
            .is_some_and(|s| s.eq_ignore_ascii_case(&self.service))
            && name.contains('/')
    }
}

/// Why a Kerberos logon could not proceed on the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosError(pub String);

impl std::fmt::Display for KerberosError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KerberosError {}

impl From<GssError> for KerberosError {
    fn from(e: GssError) -> Self {
        KerberosError(e.message)
    }
}

/// The mechanisms a Kerberos client offers, as Windows does: Microsoft's OID, then the
/// IETF one (the AP-REQ is the same).
const CLIENT_MECHS: [&[u8]; 2] = [spnego::OID_MS_KRB5, spnego::OID_KRB5];

/// A client's Kerberos logon: one AP-REQ out, one AP-REP back.
pub struct KerberosInitiator {
    ctx: Context,
    mech_types_der: Vec<u8>,
    first_token: Option<Vec<u8>>,
}

impl std::fmt::Debug for KerberosInitiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KerberosInitiator { .. }")
    }
}

impl KerberosInitiator {
    /// Gets a ticket for `cifs/<host>` from the caller's credential cache
    /// (`KRB5CCNAME`) and builds the AP-REQ (mutual authentication asked for).
    pub fn new(host: &str) -> Result<KerberosInitiator, KerberosError> {
        if host.is_empty() || host.contains(['@', '/', '\0']) {
            return Err(KerberosError(format!(
                "bad host name {host:?} for a service principal"
            )));
        }
        let cred = Cred::initiator()?;
        let mut ctx = Context::initiator(&format!("cifs@{host}"))?;
        let step = ctx.init(Some(&cred), None, Self::flags())?;
        let mech_types: Vec<Vec<u8>> = CLIENT_MECHS.iter().map(|m| m.to_vec()).collect();
        let init = NegTokenInit {
            mech_types,
            mech_token: Some(step.output),
            ..Default::default()
        };
        Ok(KerberosInitiator {
            ctx,
            mech_types_der: init.mech_types_der(),
            first_token: Some(spnego::encode_init(&init)),
        })
    }

    fn flags() -> u32 {
        gss::MUTUAL_FLAG | gss::REPLAY_FLAG | gss::SEQUENCE_FLAG | gss::INTEG_FLAG | gss::CONF_FLAG
    }

    /// The SESSION_SETUP security buffer: a NegTokenInit carrying the AP-REQ.
    pub fn first_token(&mut self) -> Vec<u8> {
        self.first_token.take().unwrap_or_default()
    }

    /// Processes the server's final NegTokenResp: the AP-REP (mutual authentication)
    /// and, when present, its mechListMIC. Returns the session key.
    pub fn finish(&mut self, server_token: &[u8]) -> Result<Vec<u8>, KerberosError> {
        let resp = match spnego::decode(server_token)
            .map_err(|e| KerberosError(format!("server's SPNEGO token: {e}")))?
        {
            NegotiationToken::Resp(r) => r,
            NegotiationToken::Init(_) => {
                return Err(KerberosError("server answered with a NegTokenInit".into()))
            }
        };
        match resp.neg_state {
            Some(NegState::AcceptCompleted) | None => {}
            Some(NegState::Reject) => {
                return Err(KerberosError("the server rejected Kerberos".into()))
            }
            Some(s) => {
                return Err(KerberosError(format!(
                    "the server did not complete Kerberos in one round ({s:?})"
                )))
            }
        }
        if let Some(m) = &resp.supported_mech {
            if !is_krb5_oid(m) {
                return Err(KerberosError(
                    "the server chose another mechanism than Kerberos".into(),
                ));
            }
        }
        let ap_rep = resp.response_token.ok_or_else(|| {
            KerberosError("no AP-REP from the server (mutual authentication)".into())
        })?;
        let step = self.ctx.init(None, Some(&ap_rep), Self::flags())?;
        if !step.complete {
            return Err(KerberosError(
                "Kerberos context not complete after the AP-REP".into(),
            ));
        }
        if let Some(mic) = &resp.mech_list_mic {
            self.ctx
                .verify_mic(&self.mech_types_der, mic)
                .map_err(|e| KerberosError(format!("bad mechListMIC from the server: {e}")))?;
        }
        Ok(self.ctx.session_key()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_split_at_the_last_unescaped_at() {
        assert_eq!(
            split_principal("alice@EXAMPLE.TEST"),
            ("alice", "EXAMPLE.TEST")
        );
        assert_eq!(split_principal("cifs/host@R"), ("cifs/host", "R"));
        assert_eq!(split_principal(r"a\@b@R"), (r"a\@b", "R"));
        assert_eq!(split_principal("noreal"), ("noreal", ""));
        assert_eq!(split_principal("trailing\\"), ("trailing\\", ""));
    }

    #[test]
    fn only_cifs_services_are_served() {
        let a = KerberosAcceptor::new(None);
        assert!(a.service_ok("cifs/srv.example.test@EXAMPLE.TEST"));
        assert!(a.service_ok("CIFS/srv@EXAMPLE.TEST"));
        assert!(!a.service_ok("host/srv@EXAMPLE.TEST"));
        assert!(!a.service_ok("cifs@EXAMPLE.TEST"));
        assert!(!a.service_ok("alice@EXAMPLE.TEST"));
    }
}
