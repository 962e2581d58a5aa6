//! The server-side authentication acceptor: NTLMv2 over SPNEGO (or raw NTLMSSP), and
//! Kerberos 5 over SPNEGO when the server has a keytab ([`ServerAuth::with_kerberos`]).
//!
//! [`ServerAuth::step`] is fed each SESSION_SETUP security buffer and answers with the
//! next token, until it yields [`AuthStep::Done`] with the authenticated [`Identity`].
//! SPNEGO picks the first mechanism of the client's list that the server supports.

use std::sync::Arc;

use thiserror::Error;

use crate::gss;
use crate::kerberos::{self, KerberosAcceptor};
use crate::ntlm::{self, AuthenticateMessage, AvPairs, ChallengeMessage, NegotiateMessage};
use crate::spnego::{self, NegState, NegTokenResp, NegotiationToken};

/// Looks up the NT hash (MD4 of the UTF-16LE password) of a user.
pub trait CredentialStore: Send + Sync {
    /// The NT hash for `user` (matched case-insensitively by the implementor), or `None`.
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]>;
}

/// Server policy for the acceptor.
#[derive(Debug, Clone, Default)]
pub struct AuthPolicy {
    /// Map logons by unknown users to the guest account ("map to guest = bad user").
    pub map_to_guest_bad_user: bool,
    /// Allow anonymous (null session) logons.
    pub allow_anonymous: bool,
    /// NetBIOS computer name (MsvAvNbComputerName), e.g. "SMBX".
    pub netbios_name: String,
    /// NetBIOS domain / workgroup (MsvAvNbDomainName), e.g. "WORKGROUP".
    pub netbios_domain: String,
    /// DNS computer name (MsvAvDnsComputerName).
    pub dns_name: String,
    /// DNS domain name (MsvAvDnsDomainName).
    pub dns_domain: String,
}

/// What kind of principal authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityKind {
    /// A user whose password was verified.
    User,
    /// An unknown user mapped to guest.
    Guest,
    /// An anonymous (null) session.
    Anonymous,
}

/// The result of a successful authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name as the client sent it.
    pub user: String,
    /// The domain as the client sent it.
    pub domain: String,
    /// User, guest or anonymous.
    pub kind: IdentityKind,
    /// The session key (16 bytes for an NTLM user logon, the Kerberos session key at
    /// its full length; empty for guest and anonymous).
    pub session_key: Vec<u8>,
    /// For a Kerberos logon, the principals of the ticket: `user` and `domain` are the
    /// two parts of the client's, which the server maps to a local user.
    pub kerberos: Option<KerberosNames>,
}

/// The principals of an accepted Kerberos ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosNames {
    /// The client (`user@REALM`).
    pub client: String,
    /// The service it was for (`cifs/host@REALM`).
    pub service: String,
}

/// The outcome of one [`ServerAuth::step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    /// Send this token with STATUS_MORE_PROCESSING_REQUIRED and wait for the next one.
    Continue(Vec<u8>),
    /// Authentication finished: send `token` (possibly empty) with STATUS_SUCCESS.
    Done {
        /// The final security token.
        token: Vec<u8>,
        /// Who authenticated.
        identity: Identity,
    },
}

/// Why authentication failed.
///
/// Map [`AuthError::LogonFailure`] to STATUS_LOGON_FAILURE and [`AuthError::InvalidToken`]
/// to STATUS_INVALID_PARAMETER.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AuthError {
    /// Wrong password, unknown user (without guest mapping), NTLMv1, a bad MIC or
    /// mechListMIC, or an anonymous logon when anonymous is not allowed.
    #[error("logon failure")]
    LogonFailure,
    /// The token could not be parsed (including a malformed NTLMv2 response), was out of
    /// sequence, or offered no mechanism we support (no NTLMSSP).
    #[error("invalid security token")]
    InvalidToken,
}

/// Flags the server always sets in CHALLENGE.
const SERVER_BASE_FLAGS: u32 = ntlm::NEGOTIATE_NTLM
    | ntlm::NEGOTIATE_ALWAYS_SIGN
    | ntlm::NEGOTIATE_EXTENDED_SESSIONSECURITY
    | ntlm::NEGOTIATE_TARGET_INFO
    | ntlm::NEGOTIATE_VERSION
    | ntlm::TARGET_TYPE_SERVER;

/// Flags echoed only when the client asked for them.
const SERVER_OPTIONAL_FLAGS: u32 = ntlm::REQUEST_TARGET
    | ntlm::NEGOTIATE_SIGN
    | ntlm::NEGOTIATE_SEAL
    | ntlm::NEGOTIATE_128
    | ntlm::NEGOTIATE_56
    | ntlm::NEGOTIATE_KEY_EXCH;

enum State {
    /// Waiting for the NTLM NEGOTIATE (possibly inside SPNEGO).
    Start,
    /// CHALLENGE sent; waiting for AUTHENTICATE.
    Challenged {
        negotiate: Vec<u8>,
        challenge: Vec<u8>,
        server_challenge: [u8; 8],
        flags: u32,
    },
    /// Kerberos chosen: waiting for (or processing) the AP-REQ.
    Kerberos {
        ctx: gss::Context,
        cred: gss::Cred,
        /// The Kerberos OID the client chose (echoed as supportedMech).
        mech: Vec<u8>,
    },
    /// Kerberos accepted and our mechListMIC sent; waiting for the client's.
    KerberosMic {
        ctx: gss::Context,
        identity: Identity,
    },
    /// Finished (successfully or not); further steps are errors.
    Finished,
}

/// The server-side acceptor for one SESSION_SETUP exchange.
pub struct ServerAuth {
    store: Arc<dyn CredentialStore>,
    policy: AuthPolicy,
    state: State,
    /// Whether the client uses SPNEGO (answers use the same wrapping).
    spnego: bool,
    /// DER of the client's mechTypes, covered by mechListMIC.
    mech_types_der: Option<Vec<u8>>,
    /// True when the chosen mechanism was not the client's first choice (mechListMIC
    /// then required).
    ntlm_not_preferred: bool,
    /// Fixed server challenge and timestamp for deterministic tests.
    fixed: Option<([u8; 8], u64)>,
    /// Kerberos settings; `None` offers and accepts NTLM only.
    kerberos: Option<KerberosAcceptor>,
    /// Whether supportedMech has been sent (it goes in the first reply only).
    sent_supported_mech: bool,
    /// Why the last step failed, for the server's log.
    failure: Option<String>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("policy", &self.policy)
            .field("spnego", &self.spnego)
            .finish_non_exhaustive()
    }
}

impl ServerAuth {
    /// A new acceptor.
    pub fn new(store: Arc<dyn CredentialStore>, policy: AuthPolicy) -> ServerAuth {
        ServerAuth {
            store,
            policy,
            state: State::Start,
            spnego: false,
            mech_types_der: None,
            ntlm_not_preferred: false,
            fixed: None,
            kerberos: None,
            sent_supported_mech: false,
            failure: None,
        }
    }

    /// Accepts Kerberos 5 (inside SPNEGO) beside NTLM, with `kerberos`'s keytab.
    pub fn with_kerberos(mut self, kerberos: Option<KerberosAcceptor>) -> ServerAuth {
        self.kerberos = kerberos;
        self
    }

    /// Why the last [`ServerAuth::step`] failed, when there is more to say than the
    /// error (the GSSAPI message for a refused ticket: expired, replayed, wrong key...).
    pub fn failure_detail(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// The mechanism in use, for logs: `"kerberos"`, `"ntlm"` or `"none"` before the
    /// client chose.
    pub fn mechanism(&self) -> &'static str {
        match self.state {
            State::Kerberos { .. } | State::KerberosMic { .. } => "kerberos",
            State::Challenged { .. } => "ntlm",
            _ => "none",
        }
    }

    /// Fixes the server challenge and timestamp (tests only).
    #[doc(hidden)]
    pub fn with_fixed_challenge(mut self, challenge: [u8; 8], time: u64) -> ServerAuth {
        self.fixed = Some((challenge, time));
        self
    }

    /// The SPNEGO NegTokenInit2 for the NEGOTIATE response's security buffer.
    pub fn initial_token(_policy: &AuthPolicy) -> Vec<u8> {
        spnego::server_init_token()
    }

    /// The NegTokenInit2 of a server that also accepts Kerberos when `kerberos`:
    /// mechTypes Microsoft's Kerberos OID, Kerberos 5 and NTLMSSP (as Windows lists them).
    pub fn initial_token_for(policy: &AuthPolicy, kerberos: bool) -> Vec<u8> {
        if kerberos {
            spnego::server_init_token_with(&[
                spnego::OID_MS_KRB5,
                spnego::OID_KRB5,
                spnego::OID_NTLMSSP,
            ])
        } else {
            Self::initial_token(policy)
        }
    }

    /// Processes one security token from the client.
    pub fn step(&mut self, input: &[u8]) -> Result<AuthStep, AuthError> {
        self.failure = None;
        let r = self.step_inner(input);
        if r.is_err() {
            self.state = State::Finished;
        }
        r
    }

    /// Fails with `e`, keeping `detail` for [`ServerAuth::failure_detail`].
    fn fail(&mut self, e: AuthError, detail: String) -> AuthError {
        self.failure = Some(detail);
        e
    }

    fn step_inner(&mut self, input: &[u8]) -> Result<AuthStep, AuthError> {
        if input.starts_with(ntlm::SIGNATURE) {
            if matches!(self.state, State::Start) {
                self.spnego = false;
            } else if self.spnego {
                return Err(AuthError::InvalidToken);
            }
            return self.ntlm_step(input, None);
        }
        let tok = spnego::decode(input).map_err(|_| AuthError::InvalidToken)?;
        match tok {
            NegotiationToken::Init(init) => {
                if !matches!(self.state, State::Start) {
                    return Err(AuthError::InvalidToken);
                }
                self.spnego = true;
                let krb5 = self.kerberos.is_some();
                let pos = init
                    .mech_types
                    .iter()
                    .position(|m| m == spnego::OID_NTLMSSP || (krb5 && kerberos::is_krb5_oid(m)))
                    .ok_or(AuthError::InvalidToken)?;
                self.mech_types_der = Some(init.mech_types_der());
                self.ntlm_not_preferred = pos != 0;
                let chosen = init.mech_types[pos].clone();
                if kerberos::is_krb5_oid(&chosen) {
                    self.start_kerberos(chosen.clone())?;
                    return match init.mech_token {
                        Some(tok) if pos == 0 => self.krb5_step(&tok, None),
                        _ => {
                            // Ask for the AP-REQ (and, on a downgrade, a mechListMIC).
                            self.sent_supported_mech = true;
                            let neg_state = if pos == 0 {
                                NegState::AcceptIncomplete
                            } else {
                                NegState::RequestMic
                            };
                            Ok(AuthStep::Continue(spnego::encode_resp(&NegTokenResp {
                                neg_state: Some(neg_state),
                                supported_mech: Some(chosen),
                                response_token: None,
                                mech_list_mic: None,
                            })))
                        }
                    };
                }
                match init.mech_token {
                    Some(tok) if pos == 0 => self.ntlm_step(&tok, None),
                    _ => {
                        // Ask the client to continue with NTLMSSP.
                        Ok(AuthStep::Continue(spnego::encode_resp(&NegTokenResp {
                            neg_state: Some(NegState::AcceptIncomplete),
                            supported_mech: Some(spnego::OID_NTLMSSP.to_vec()),
                            response_token: None,
                            mech_list_mic: None,
                        })))
                    }
                }
            }
            NegotiationToken::Resp(resp) => {
                if matches!(self.state, State::Start) && !self.spnego {
                    return Err(AuthError::InvalidToken);
                }
                if resp.neg_state == Some(NegState::Reject) {
                    return Err(AuthError::LogonFailure);
                }
                match self.state {
                    State::Kerberos { .. } => {
                        let tok = resp.response_token.ok_or(AuthError::InvalidToken)?;
                        return self.krb5_step(&tok, resp.mech_list_mic.as_deref());
                    }
                    State::KerberosMic { .. } => {
                        return self.krb5_client_mic(resp.mech_list_mic.as_deref())
                    }
                    _ => {}
                }
                let tok = resp.response_token.ok_or(AuthError::InvalidToken)?;
                self.ntlm_step(&tok, resp.mech_list_mic.as_deref())
            }
        }
    }

    fn wrap_continue(&self, ntlm_token: Vec<u8>) -> Vec<u8> {
        if self.spnego {
            spnego::encode_resp(&NegTokenResp {
                neg_state: Some(NegState::AcceptIncomplete),
                supported_mech: Some(spnego::OID_NTLMSSP.to_vec()),
                response_token: Some(ntlm_token),
                mech_list_mic: None,
            })
        } else {
            ntlm_token
        }
    }

    fn ntlm_step(
        &mut self,
        token: &[u8],
        mech_list_mic: Option<&[u8]>,
    ) -> Result<AuthStep, AuthError> {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Start => {
                let neg = NegotiateMessage::decode(token).map_err(|_| AuthError::InvalidToken)?;
                let (challenge_bytes, server_challenge, flags) = self.make_challenge(&neg)?;
                let out = self.wrap_continue(challenge_bytes.clone());
                self.state = State::Challenged {
                    negotiate: token.to_vec(),
                    challenge: challenge_bytes,
                    server_challenge,
                    flags,
                };
                Ok(AuthStep::Continue(out))
            }
            State::Challenged {
                negotiate,
                challenge,
                server_challenge,
                flags,
            } => self.finish(
                token,
                mech_list_mic,
                &negotiate,
                &challenge,
                &server_challenge,
                flags,
            ),
            _ => Err(AuthError::InvalidToken),
        }
    }

    fn start_kerberos(&mut self, mech: Vec<u8>) -> Result<(), AuthError> {
        let Some(k) = self.kerberos.as_ref() else {
            return Err(AuthError::InvalidToken);
        };
        let cred = match k.credentials() {
            Ok(c) => c,
            Err(e) => {
                let keytab = k
                    .keytab
                    .as_ref()
                    .map_or("the default keytab".to_string(), |p| {
                        p.display().to_string()
                    });
                return Err(self.fail(
                    AuthError::LogonFailure,
                    format!("Kerberos: no acceptor credentials from {keytab}: {e}"),
                ));
            }
        };
        self.state = State::Kerberos {
            ctx: gss::Context::acceptor(),
            cred,
            mech,
        };
        Ok(())
    }

    /// One Kerberos leg: the AP-REQ in, the AP-REP (mutual authentication) out.
    fn krb5_step(
        &mut self,
        token: &[u8],
        mech_list_mic: Option<&[u8]>,
    ) -> Result<AuthStep, AuthError> {
        let State::Kerberos {
            mut ctx,
            cred,
            mech,
        } = std::mem::replace(&mut self.state, State::Finished)
        else {
            return Err(AuthError::InvalidToken);
        };
        let logon = |e: gss::GssError| format!("Kerberos ticket refused: {e}");
        let step = match ctx.accept(&cred, token) {
            Ok(s) => s,
            Err(e) => return Err(self.fail(AuthError::LogonFailure, logon(e))),
        };
        let supported_mech = if self.sent_supported_mech {
            None
        } else {
            self.sent_supported_mech = true;
            Some(mech.clone())
        };
        let response_token = (!step.output.is_empty()).then_some(step.output);
        if !step.complete {
            let out = spnego::encode_resp(&NegTokenResp {
                neg_state: Some(NegState::AcceptIncomplete),
                supported_mech,
                response_token,
                mech_list_mic: None,
            });
            self.state = State::Kerberos { ctx, cred, mech };
            return Ok(AuthStep::Continue(out));
        }
        let (client, service, _flags) = match ctx.names() {
            Ok(n) => n,
            Err(e) => return Err(self.fail(AuthError::LogonFailure, logon(e))),
        };
        let k = self.kerberos.as_ref().ok_or(AuthError::InvalidToken)?;
        if !k.service_ok(&service) {
            let msg = format!(
                "Kerberos ticket refused: it is for {service}, not a {}/ service principal",
                k.service
            );
            return Err(self.fail(AuthError::LogonFailure, msg));
        }
        let session_key = match ctx.session_key() {
            Ok(key) => key,
            Err(e) => return Err(self.fail(AuthError::LogonFailure, logon(e))),
        };
        let types = self.mech_types_der.clone().unwrap_or_default();
        if let Some(mic) = mech_list_mic {
            if let Err(e) = ctx.verify_mic(&types, mic) {
                return Err(self.fail(
                    AuthError::LogonFailure,
                    format!("Kerberos: bad mechListMIC from {client}: {e}"),
                ));
            }
        }
        let (user, realm) = kerberos::split_principal(&client);
        let identity = Identity {
            user: user.to_string(),
            domain: realm.to_string(),
            kind: IdentityKind::User,
            session_key,
            kerberos: Some(KerberosNames {
                client: client.clone(),
                service,
            }),
        };
        let send_mic = mech_list_mic.is_some() || self.ntlm_not_preferred;
        let our_mic = if send_mic {
            match ctx.get_mic(&types) {
                Ok(m) => Some(m),
                Err(e) => return Err(self.fail(AuthError::LogonFailure, logon(e))),
            }
        } else {
            None
        };
        if self.ntlm_not_preferred && mech_list_mic.is_none() {
            // A downgrade must be protected: our MIC now, the client's in the next leg.
            let out = spnego::encode_resp(&NegTokenResp {
                neg_state: Some(NegState::AcceptIncomplete),
                supported_mech,
                response_token,
                mech_list_mic: our_mic,
            });
            self.state = State::KerberosMic { ctx, identity };
            return Ok(AuthStep::Continue(out));
        }
        let token = spnego::encode_resp(&NegTokenResp {
            neg_state: Some(NegState::AcceptCompleted),
            supported_mech,
            response_token,
            mech_list_mic: our_mic,
        });
        Ok(AuthStep::Done { token, identity })
    }

    /// The client's mechListMIC after a downgraded Kerberos exchange.
    fn krb5_client_mic(&mut self, mic: Option<&[u8]>) -> Result<AuthStep, AuthError> {
        let State::KerberosMic { ctx, identity } =
            std::mem::replace(&mut self.state, State::Finished)
        else {
            return Err(AuthError::InvalidToken);
        };
        let types = self.mech_types_der.clone().unwrap_or_default();
        let Some(mic) = mic else {
            return Err(self.fail(
                AuthError::LogonFailure,
                "Kerberos: no mechListMIC from the client after a downgrade".into(),
            ));
        };
        if let Err(e) = ctx.verify_mic(&types, mic) {
            return Err(self.fail(
                AuthError::LogonFailure,
                format!("Kerberos: bad mechListMIC: {e}"),
            ));
        }
        let token = spnego::encode_resp(&NegTokenResp {
            neg_state: Some(NegState::AcceptCompleted),
            supported_mech: None,
            response_token: None,
            mech_list_mic: None,
        });
        Ok(AuthStep::Done { token, identity })
    }

    fn make_challenge(&self, neg: &NegotiateMessage) -> Result<(Vec<u8>, [u8; 8], u32), AuthError> {
        let client = neg.flags;
        let mut flags = SERVER_BASE_FLAGS | (client & SERVER_OPTIONAL_FLAGS);
        flags |= if client & ntlm::NEGOTIATE_UNICODE != 0 || client & ntlm::NEGOTIATE_OEM == 0 {
            ntlm::NEGOTIATE_UNICODE
        } else {
            ntlm::NEGOTIATE_OEM
        };
        let (server_challenge, time) = match self.fixed {
            Some(f) => f,
            None => {
                let mut c = [0u8; 8];
                aws_lc_rs::rand::fill(&mut c).map_err(|_| AuthError::InvalidToken)?;
                (c, smbx_wire::time::now_filetime())
            }
        };
        let p = &self.policy;
        let u = smbx_wire::codec::utf16le;
        let mut ti = AvPairs::default();
        ti.set(ntlm::av::NB_DOMAIN_NAME, u(&p.netbios_domain));
        ti.set(ntlm::av::NB_COMPUTER_NAME, u(&p.netbios_name));
        ti.set(ntlm::av::DNS_DOMAIN_NAME, u(&p.dns_domain));
        ti.set(ntlm::av::DNS_COMPUTER_NAME, u(&p.dns_name));
        ti.set(ntlm::av::TIMESTAMP, time.to_le_bytes().to_vec());
        let msg = ChallengeMessage {
            flags,
            target_name: if client & ntlm::REQUEST_TARGET != 0 {
                p.netbios_name.clone()
            } else {
                String::new()
            },
            server_challenge,
            target_info: ti.encode(),
            version: Some(ntlm::OUR_VERSION),
        };
        Ok((msg.encode(), server_challenge, flags))
    }

    fn finish(
        &mut self,
        token: &[u8],
        mech_list_mic: Option<&[u8]>,
        negotiate: &[u8],
        challenge: &[u8],
        server_challenge: &[u8; 8],
        challenge_flags: u32,
    ) -> Result<AuthStep, AuthError> {
        let auth = AuthenticateMessage::decode(token).map_err(|_| AuthError::InvalidToken)?;

        // Anonymous: empty user and empty (or single zero byte) responses.
        let anon_lm = auth.lm_response.is_empty() || auth.lm_response == [0];
        if auth.user.is_empty() && auth.nt_response.is_empty() && anon_lm {
            if !self.policy.allow_anonymous {
                return Err(AuthError::LogonFailure);
            }
            return Ok(self.done(
                Identity {
                    user: String::new(),
                    domain: auth.domain,
                    kind: IdentityKind::Anonymous,
                    session_key: Vec::new(),
                    kerberos: None,
                },
                None,
            ));
        }
        // NTLMv1 (24-byte NT response) is refused. Anything longer must be a well-formed
        // NTLMv2_RESPONSE, checked before the user is looked up: a malformed one (such as
        // NetApp's "net diag" sends) is an invalid parameter, not a failed logon (as
        // Windows and Samba, smb2.session.ntlmssp_bug14932).
        if auth.nt_response.len() <= 24 {
            return Err(AuthError::LogonFailure);
        }
        let v2 =
            ntlm::Ntlmv2Response::decode(&auth.nt_response).map_err(|_| AuthError::InvalidToken)?;
        let Some(hash) = self.store.nt_hash(&auth.user) else {
            if self.policy.map_to_guest_bad_user {
                return Ok(self.done(
                    Identity {
                        user: auth.user,
                        domain: auth.domain,
                        kind: IdentityKind::Guest,
                        session_key: Vec::new(),
                        kerberos: None,
                    },
                    None,
                ));
            }
            return Err(AuthError::LogonFailure);
        };

        let proof = v2.nt_proof_str;
        // The client challenge as sent (the NTProofStr covers its exact bytes).
        let blob = auth.nt_response.get(16..).unwrap_or_default();
        let p = &self.policy;
        let mut domains: Vec<&str> = Vec::with_capacity(4);
        for d in [
            auth.domain.as_str(),
            "",
            p.netbios_domain.as_str(),
            p.netbios_name.as_str(),
        ] {
            if !domains.contains(&d) {
                domains.push(d);
            }
        }
        let owf = domains
            .iter()
            .map(|d| ntlm::ntowfv2(&hash, &auth.user, d))
            .find(|owf| ntlm::ct_eq(&ntlm::nt_proof_str(owf, server_challenge, blob), &proof))
            .ok_or(AuthError::LogonFailure)?;

        let base = ntlm::session_base_key(&owf, &proof);
        let flags = challenge_flags & auth.flags;
        let esk: [u8; 16] = if flags & ntlm::NEGOTIATE_KEY_EXCH != 0 {
            let enc: [u8; 16] = auth
                .encrypted_session_key
                .as_slice()
                .try_into()
                .map_err(|_| AuthError::InvalidToken)?;
            ntlm::rc4(&base, &enc).try_into().expect("16 bytes")
        } else {
            base
        };

        // MIC, when the client says it sent one.
        let mic_present = v2
            .client_challenge
            .av_pairs
            .flags()
            .is_some_and(|f| f & ntlm::av::FLAG_MIC_PRESENT != 0);
        if mic_present {
            let mic = auth.mic.ok_or(AuthError::LogonFailure)?;
            let mut zeroed = token.to_vec();
            zeroed[ntlm::MIC_OFFSET..ntlm::MIC_OFFSET + 16].fill(0);
            let expect = ntlm::compute_mic(&esk, negotiate, challenge, &zeroed);
            if !ntlm::ct_eq(&expect, &mic) {
                return Err(AuthError::LogonFailure);
            }
        }

        let mut session = ntlm::NtlmSession::new(&esk, flags);
        if let (Some(mic), Some(types)) = (mech_list_mic, self.mech_types_der.as_ref()) {
            if !session.verify_c2s(types, mic) {
                return Err(AuthError::LogonFailure);
            }
        }
        let send_mic = mech_list_mic.is_some() || self.ntlm_not_preferred;
        let identity = Identity {
            user: auth.user,
            domain: auth.domain,
            kind: IdentityKind::User,
            session_key: esk.to_vec(),
            kerberos: None,
        };
        let server_mic = match (&self.mech_types_der, send_mic) {
            (Some(types), true) => Some(session.sign_s2c(types).to_vec()),
            _ => None,
        };
        Ok(self.done(identity, server_mic))
    }

    fn done(&mut self, identity: Identity, mech_list_mic: Option<Vec<u8>>) -> AuthStep {
        self.state = State::Finished;
        let token = if self.spnego {
            spnego::encode_resp(&NegTokenResp {
                neg_state: Some(NegState::AcceptCompleted),
                supported_mech: None,
                response_token: None,
                mech_list_mic,
            })
        } else {
            Vec::new()
        };
        AuthStep::Done { token, identity }
    }
}
