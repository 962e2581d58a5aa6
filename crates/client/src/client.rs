//! `Client` (one connection: negotiate, echo) and `Session` (an authenticated user on it:
//! SESSION_SETUP with SPNEGO/NTLMv2 or Kerberos, keys, LOGOFF, TREE_CONNECT).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use smbx_security::cipher::CipherId;
use smbx_security::kerberos::KerberosInitiator;
use smbx_security::keys::derive;
use smbx_security::ntlm::Initiator;
use smbx_security::preauth::PreauthHash;
use smbx_security::protection::{Protection, Role};
use smbx_security::signing::{Signer, SigningAlgorithm};
use smbx_security::spnego::{self, NegState, NegotiationToken};
use smbx_wire::codec::utf16le;
use smbx_wire::ioctl::{fsctl, IoctlRequest, IoctlResponse, SMB2_0_IOCTL_IS_FSCTL};
use smbx_wire::negotiate::{
    NegotiateContext, NegotiateRequest, NegotiateResponse, CAP_ENCRYPTION, CAP_LARGE_MTU,
    CAP_MULTI_CHANNEL, HASH_SHA512, SECURITY_SIGNING_ENABLED, SECURITY_SIGNING_REQUIRED,
};
use smbx_wire::session::{
    SessionSetupRequest, SessionSetupResponse, SESSION_FLAG_BINDING, SESSION_FLAG_ENCRYPT_DATA,
    SESSION_FLAG_IS_GUEST, SESSION_FLAG_IS_NULL,
};
use smbx_wire::simple::{decode_simple, encode_simple};
use smbx_wire::tree::{TreeConnectRequest, TreeConnectResponse, SHAREFLAG_ENCRYPT_DATA};
use smbx_wire::Dialect;
use smbx_wire::{Command, NtStatus, Writer};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::channels::{Channel, ChannelSet, ChannelStats, Link};
use crate::conn::{Connection, Event, Request, Response, Route, SessionSecurity};
use crate::error::{
    AuthError, DisconnectReason, Error, InvalidArgument, ProtocolError, Result, SecurityError,
};
use crate::options::{ClientOptions, Encryption, Signing, Transport};
use crate::tree::Tree;

/// What the client's NEGOTIATE request offered.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    pub security_mode: u16,
    pub capabilities: u32,
    pub client_guid: [u8; 16],
    pub dialects: Vec<Dialect>,
}

/// What NEGOTIATE settled.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// The dialect.
    pub dialect: Dialect,
    /// The server's SecurityMode.
    pub security_mode: u16,
    /// The server's capabilities.
    pub capabilities: u32,
    /// ServerGuid.
    pub server_guid: [u8; 16],
    /// Largest READ the client will send (server MaxReadSize capped by our options).
    pub max_read: u32,
    /// Largest WRITE the client will send.
    pub max_write: u32,
    /// MaxTransactSize.
    pub max_transact: u32,
    /// The cipher, if the connection can encrypt.
    pub cipher: Option<CipherId>,
    /// The signing algorithm sessions use.
    pub signing_algorithm: SigningAlgorithm,
    /// The connection's preauth integrity hash after NEGOTIATE (3.1.1).
    pub preauth: Option<PreauthHash>,
}

impl Negotiated {
    /// True if the server requires signing.
    pub fn server_requires_signing(&self) -> bool {
        self.security_mode & SECURITY_SIGNING_REQUIRED != 0
    }
}

pub(crate) struct ClientInner {
    pub conn: Connection,
    pub negotiated: Negotiated,
    /// What NEGOTIATE offered (for VALIDATE_NEGOTIATE_INFO).
    pub offered: Offered,
    pub options: ClientOptions,
    pub host: String,
    /// The server address of the connection (Direct TCP or SMB Direct), for
    /// multichannel.
    pub peer: OnceLock<SocketAddr>,
    /// Where the breaks of this connection and of its sessions' channels go
    /// (a re-established session's client adopts the one it replaces).
    pub sink: std::sync::RwLock<Arc<crate::breaks::EventSink>>,
}

/// A connection to an SMB server, negotiated and ready for logons. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("host", &self.inner.host)
            .field("negotiated", &self.inner.negotiated)
            .finish_non_exhaustive()
    }
}

fn split_host(addr: &str, default_port: u16) -> (String, String) {
    // "[v6]:port", "[v6]", "host:port", "host", bare IPv6.
    if let Some(rest) = addr.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let host = rest[..end].to_string();
            let target = if rest[end + 1..].starts_with(':') {
                addr.to_string()
            } else {
                format!("[{host}]:{default_port}")
            };
            return (host, target);
        }
    }
    match addr.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok() => {
            (h.to_string(), addr.to_string())
        }
        _ if addr.matches(':').count() > 1 => {
            (addr.to_string(), format!("[{addr}]:{default_port}"))
        }
        _ => (addr.to_string(), format!("{addr}:{default_port}")),
    }
}

impl Client {
    /// Connects to `addr` ("host", "host:port", "[v6]:port") and negotiates.
    /// With [`Transport::Rdma`] in `options` the connection is SMB Direct over
    /// soft-iWARP (default port 5445).
    pub async fn connect(addr: &str, options: ClientOptions) -> Result<Client> {
        let (host, target) = split_host(addr, options.transport.default_port());
        match options.transport {
            Transport::Tcp => {
                let stream = TcpStream::connect(&target).await?;
                Client::from_stream(stream, &host, options).await
            }
            Transport::Rdma => {
                let sa = tokio::net::lookup_host(&target)
                    .await?
                    .next()
                    .ok_or_else(|| InvalidArgument::Unresolved(target.to_string()))?;
                Client::connect_direct(sa, &host, options).await
            }
        }
    }

    /// Connects to `sa` over SMB Direct and negotiates: rdma-core verbs where the
    /// route to the server has an RDMA device ($SMBX_RDMA_PROVIDER=auto|soft|verbs),
    /// else soft-iWARP. Further channels of its sessions that are SMB Direct use
    /// `sa`'s port.
    pub(crate) async fn connect_direct(
        sa: SocketAddr,
        host: &str,
        mut options: ClientOptions,
    ) -> Result<Client> {
        let (link, driver) = smbx_transport::verbs::connect(
            sa,
            smbx_transport::verbs::ProviderChoice::from_env(),
            options.iwarp.clone(),
            smbx_transport::verbs::Options::default(),
            options.direct.clone(),
        )
        .await
        .map_err(|e| {
            Error::Disconnected(DisconnectReason::DirectConnect {
                addr: sa,
                source: Arc::new(e),
            })
        })?;
        options.direct_port = sa.port();
        let conn = Connection::start_direct(
            link,
            driver,
            options.max_credits,
            options.timeout,
            options.spin_wait,
        );
        let client = Client::start(conn, host, options).await?;
        let _ = client.inner.peer.set(sa);
        Ok(client)
    }

    /// Negotiates over an already connected socket; `host` names the server in
    /// TREE_CONNECT paths.
    pub async fn from_stream(
        stream: TcpStream,
        host: &str,
        options: ClientOptions,
    ) -> Result<Client> {
        let peer = stream.peer_addr().ok();
        options.socket.apply(&stream)?;
        let conn = Connection::start(
            stream,
            options.max_credits,
            options.timeout,
            options.spin_wait,
        );
        let client = Client::start(conn, host, options).await?;
        if let Some(p) = peer {
            let _ = client.inner.peer.set(p);
        }
        Ok(client)
    }

    async fn start(conn: Connection, host: &str, options: ClientOptions) -> Result<Client> {
        if options.dialects.is_empty() {
            return Err(InvalidArgument::NoDialects.into());
        }
        let (negotiated, offered) = negotiate(&conn, &options, host).await?;
        conn.set_negotiated(
            negotiated.dialect,
            negotiated.dialect != Dialect::SMB2_0_2 && negotiated.capabilities & CAP_LARGE_MTU != 0,
        );
        Ok(Client {
            inner: Arc::new(ClientInner {
                conn,
                negotiated,
                offered,
                options,
                host: host.to_string(),
                peer: OnceLock::new(),
                sink: std::sync::RwLock::new(crate::breaks::EventSink::new()),
            }),
        })
    }

    /// What NEGOTIATE settled.
    pub fn negotiated(&self) -> &Negotiated {
        &self.inner.negotiated
    }

    /// The dialect in use.
    pub fn dialect(&self) -> Dialect {
        self.inner.negotiated.dialect
    }

    /// The connection (credits, events, close).
    pub fn connection(&self) -> &Connection {
        &self.inner.conn
    }

    /// Unsolicited server messages (oplock/lease breaks), from this connection and
    /// from every further channel bound to its sessions (also re-established
    /// ones), once a session is logged on; only the first caller gets them.
    /// Breaks of the leases of the client's own durable opens are acknowledged
    /// by the client whether or not anyone reads them.
    pub fn events(&self) -> Option<mpsc::Receiver<Event>> {
        self.sink().take_app()
    }

    /// Lease breaks the client acknowledged itself (those of its durable
    /// opens' leases), on every channel and re-established session.
    pub fn breaks_acknowledged(&self) -> u64 {
        self.sink().acknowledged()
    }

    /// The sink this connection's events (and its sessions' channels') go to.
    pub(crate) fn sink(&self) -> Arc<crate::breaks::EventSink> {
        self.inner
            .sink
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes `sink` this client's, before any session pumps into it: a
    /// re-established session's events reach the queue the application holds.
    pub(crate) fn adopt_sink(&self, sink: Arc<crate::breaks::EventSink>) {
        *self.inner.sink.write().unwrap_or_else(|e| e.into_inner()) = sink;
    }

    /// ECHO without a session.
    pub async fn echo(&self) -> Result<()> {
        let r = self
            .inner
            .conn
            .call(
                Request::new(Command::Echo, encode_simple(), 0),
                &Route::default(),
            )
            .await?
            .ok()?;
        decode_simple(&r.msg)?;
        Ok(())
    }

    /// Logs on with NTLMv2 (inside SPNEGO).
    pub async fn login(&self, user: &str, password: &str, domain: &str) -> Result<Session> {
        let init = Initiator::new(user, password, domain)
            .with_workstation(&self.inner.options.workstation);
        let a = self.ntlm_legs(init, false, None, 0).await?;
        self.finish_setup(
            a,
            false,
            Logon::Ntlm {
                user: user.to_string(),
                password: password.to_string(),
                domain: domain.to_string(),
            },
        )
    }

    /// Logs on with Kerberos: a ticket for `cifs/<host>` (the host this client
    /// connected to) from the caller's credential cache (`KRB5CCNAME`), mutual
    /// authentication, and the session key of the Kerberos exchange.
    pub async fn login_kerberos(&self) -> Result<Session> {
        self.kerberos_logon(0).await
    }

    /// A Kerberos logon asking the server to end session `previous` (0: none).
    async fn kerberos_logon(&self, previous: u64) -> Result<Session> {
        let a = self.kerberos_legs(None, previous).await?;
        self.finish_setup(a, false, Logon::Kerberos)
    }

    /// The SESSION_SETUP leg of a Kerberos logon (one AP-REQ, mutual
    /// authentication), or of binding this connection to `bind` as a further
    /// channel (the binding flag and the session's id, signed with its key).
    async fn kerberos_legs(&self, bind: Option<&Session>, previous: u64) -> Result<Authenticated> {
        let host = self.inner.host.clone();
        // Getting the service ticket may talk to the KDC: off the async threads.
        let mut init = tokio::task::spawn_blocking(move || KerberosInitiator::new(&host))
            .await
            .map_err(AuthError::KerberosTask)?
            .map_err(AuthError::Kerberos)?;
        let security_mode = self.security_mode();
        let mut preauth = self.inner.negotiated.preauth;
        let req = SessionSetupRequest {
            flags: if bind.is_some() {
                SESSION_FLAG_BINDING
            } else {
                0
            },
            security_mode,
            previous_session_id: previous,
            security_buffer: init.first_token(),
            ..Default::default()
        };
        let (resp, sent) = self
            .setup_leg(req, bind.map_or(0, |s| s.id()), bind)
            .await?;
        if let Some(h) = preauth.as_mut() {
            h.update(&sent);
        }
        if resp.status() == NtStatus::MORE_PROCESSING_REQUIRED {
            return Err(AuthError::KerberosRounds.into());
        }
        let session_id = resp.header.session_id;
        let resp = resp.ok()?;
        let setup = SessionSetupResponse::decode(&resp.msg)?;
        let session_key = init
            .finish(&setup.security_buffer)
            .map_err(AuthError::Kerberos)?;
        Ok(Authenticated {
            resp,
            setup,
            session_id,
            preauth,
            session_key,
        })
    }

    /// Logs on again as `logon` did, asking the server to end `previous`
    /// (PreviousSessionId, [MS-SMB2] 3.2.4.2.3): the new session of a tree
    /// re-established after the server lost the old one ([`crate::durable`]).
    pub(crate) async fn relogin(&self, logon: &Logon, previous: u64) -> Result<Session> {
        match logon {
            Logon::Ntlm {
                user,
                password,
                domain,
            } => {
                let init = Initiator::new(user, password, domain)
                    .with_workstation(&self.inner.options.workstation);
                let a = self.ntlm_legs(init, false, None, previous).await?;
                self.finish_setup(a, false, logon.clone())
            }
            Logon::Kerberos => self.kerberos_logon(previous).await,
            Logon::Anonymous => self.login_anonymous().await,
        }
    }

    fn security_mode(&self) -> u8 {
        SECURITY_SIGNING_ENABLED as u8
            | if self.inner.options.signing == Signing::Required {
                SECURITY_SIGNING_REQUIRED as u8
            } else {
                0
            }
    }

    /// Logs on anonymously (a null session: no signing keys).
    pub async fn login_anonymous(&self) -> Result<Session> {
        let a = self
            .ntlm_legs(Initiator::anonymous(), true, None, 0)
            .await?;
        self.finish_setup(a, true, Logon::Anonymous)
    }

    /// The two SESSION_SETUP legs of an NTLM logon (SPNEGO), or of binding this
    /// connection to `bind` as a further channel ([MS-SMB2] 3.2.4.2.3: the
    /// binding flag and the session's id, each leg signed with the session's key).
    async fn ntlm_legs(
        &self,
        mut init: Initiator,
        anonymous: bool,
        bind: Option<&Session>,
        previous: u64,
    ) -> Result<Authenticated> {
        let security_mode = self.security_mode();
        let mut preauth = self.inner.negotiated.preauth;

        // Leg 1: NegTokenInit carrying NTLM NEGOTIATE.
        let token = spnego::client_init_ntlm(&init.negotiate());
        let req = SessionSetupRequest {
            flags: if bind.is_some() {
                SESSION_FLAG_BINDING
            } else {
                0
            },
            security_mode,
            previous_session_id: previous,
            security_buffer: token,
            ..Default::default()
        };
        let (resp, sent) = self
            .setup_leg(req, bind.map_or(0, |s| s.id()), bind)
            .await?;
        if let Some(h) = preauth.as_mut() {
            h.update(&sent);
            h.update(&resp.msg);
        }
        if resp.status() != NtStatus::MORE_PROCESSING_REQUIRED {
            return Err(resp
                .ok()
                .err()
                .unwrap_or_else(|| AuthError::NoChallengeRound.into()));
        }
        let session_id = resp.header.session_id;
        let challenge = spnego_token(&SessionSetupResponse::decode(&resp.msg)?.security_buffer)?
            .ok_or(AuthError::NoChallenge)?;

        // Leg 2: NegTokenResp carrying NTLM AUTHENTICATE and the mechListMIC.
        let (auth, session_key) = init.authenticate(&challenge).map_err(AuthError::Ntlm)?;
        let mic = if anonymous {
            None
        } else {
            init.session()
                .map(|s| s.sign_c2s(&spnego::ntlm_only_mech_types_der()).to_vec())
        };
        let req = SessionSetupRequest {
            flags: if bind.is_some() {
                SESSION_FLAG_BINDING
            } else {
                0
            },
            security_mode,
            previous_session_id: previous,
            security_buffer: spnego::client_resp(&auth, mic.as_deref()),
            ..Default::default()
        };
        let (resp, sent) = self.setup_leg(req, session_id, bind).await?;
        if let Some(h) = preauth.as_mut() {
            h.update(&sent);
        }
        let resp = resp.ok()?;
        let setup = SessionSetupResponse::decode(&resp.msg)?;
        if let Ok(NegotiationToken::Resp(r)) = spnego::decode(&setup.security_buffer) {
            if r.neg_state == Some(NegState::Reject) {
                return Err(AuthError::SpnegoRejected.into());
            }
        }
        Ok(Authenticated {
            resp,
            setup,
            session_id,
            preauth,
            session_key: session_key.to_vec(),
        })
    }

    /// The end of every logon: keys from `session_key`, signing and encryption
    /// policy, the final response's signature, and the session registered.
    fn finish_setup(&self, a: Authenticated, anonymous: bool, logon: Logon) -> Result<Session> {
        let Authenticated {
            resp,
            setup,
            session_id,
            preauth,
            session_key,
        } = a;
        let session_key = &session_key[..];
        let inner = &self.inner;
        let n = &inner.negotiated;
        let require_signing = inner.options.signing == Signing::Required;
        let flags = setup.session_flags;
        let keyless = anonymous || flags & (SESSION_FLAG_IS_GUEST | SESSION_FLAG_IS_NULL) != 0;
        let sec = if keyless {
            if require_signing {
                return Err(AuthError::CannotSign.into());
            }
            SessionSecurity::default()
        } else {
            let keys = derive(
                n.dialect,
                session_key,
                preauth.as_ref().map(|h| h.value()),
                n.cipher,
            );
            let mut sec = SessionSecurity {
                keys: Protection::new(&keys, Role::Client, n.signing_algorithm, n.cipher)?,
                ..SessionSecurity::default()
            };
            sec.sign = n.server_requires_signing() || require_signing;
            let must_encrypt = flags & SESSION_FLAG_ENCRYPT_DATA != 0
                || inner.options.encryption == Encryption::Required;
            if must_encrypt && !sec.keys.can_seal() {
                return Err(ProtocolError::NoCipher(n.dialect).into());
            }
            sec.encrypt = must_encrypt;
            // The final response is signed with the new key (always in 3.1.1).
            if resp.header.is_signed() {
                if !sec.keys.verify(&resp.msg) {
                    return Err(SecurityError::BadSignature {
                        command: Command::SessionSetup as u16,
                    }
                    .into());
                }
            } else if sec.sign || n.dialect == Dialect::SMB3_1_1 {
                return Err(SecurityError::Unsigned {
                    command: Command::SessionSetup as u16,
                }
                .into());
            }
            sec
        };
        let sec = Arc::new(sec);
        inner.conn.add_session(session_id, sec.clone());
        let first = Channel::new(
            Link {
                client: self.clone(),
                security: sec.clone(),
            },
            inner.peer.get().copied(),
            0,
        );
        Ok(Session {
            inner: Arc::new(SessionInner {
                client: self.clone(),
                id: session_id,
                flags,
                security: sec,
                channels: ChannelSet::new(first),
                logon,
                discovered: AtomicBool::new(false),
                rdma_interfaces: Default::default(),
            }),
        })
    }

    /// Binds this connection to `session` as a further channel ([MS-SMB2]
    /// 3.2.4.2.3, 3.2.5.3.1): a new authentication as the same user, signed with
    /// the session's key; the channel's signing key comes from that
    /// authentication's session key (3.1.1: with this connection's binding
    /// preauth hash) and must verify the final response. Returns the channel's
    /// connection and protection.
    pub(crate) async fn bind(&self, session: &Session) -> Result<Link> {
        let first = session.inner.client.negotiated();
        let n = &self.inner.negotiated;
        if n.dialect != first.dialect || n.dialect < Dialect::SMB3_0 {
            return Err(ProtocolError::ChannelDialect {
                channel: n.dialect,
                session: first.dialect,
            }
            .into());
        }
        if n.capabilities & CAP_MULTI_CHANNEL == 0 {
            return Err(ProtocolError::NoMultichannel.into());
        }
        let a = match &session.inner.logon {
            Logon::Ntlm {
                user,
                password,
                domain,
            } => {
                let init = Initiator::new(user, password, domain)
                    .with_workstation(&self.inner.options.workstation);
                self.ntlm_legs(init, false, Some(session), 0).await?
            }
            // A fresh AP-REQ for the same service: the ticket's session key
            // (and this connection's preauth hash) keys the channel.
            Logon::Kerberos => self.kerberos_legs(Some(session), 0).await?,
            Logon::Anonymous => return Err(InvalidArgument::BindNeedsNtlm.into()),
        };
        if a.session_id != session.id() {
            return Err(ProtocolError::BindingOtherSession {
                expected: session.id(),
                got: a.session_id,
            }
            .into());
        }
        let keys = derive(
            n.dialect,
            &a.session_key,
            a.preauth.as_ref().map(|h| h.value()),
            None,
        );
        let signer = Signer::new(n.signing_algorithm, &keys.signing);
        if !a.resp.header.is_signed() || !signer.verify(&a.resp.msg) {
            return Err(SecurityError::BindingNotSigned.into());
        }
        let sec = Arc::new(session.inner.security.for_channel(signer));
        self.inner.conn.add_session(session.id(), sec.clone());
        // Breaks the server sends on this channel reach the session's events.
        session.inner.channels.forward_events(self);
        Ok(Link {
            client: self.clone(),
            security: sec,
        })
    }

    async fn setup_leg(
        &self,
        req: SessionSetupRequest,
        session_id: u64,
        bind: Option<&Session>,
    ) -> Result<(Response, Vec<u8>)> {
        let route = match bind {
            // Binding legs are signed with the session's key.
            Some(s) => Route {
                session_id,
                security: Some(s.inner.security.clone()),
                encrypt: false,
                force_sign: true,
            },
            None => Route {
                session_id,
                ..Default::default()
            },
        };
        let (mut v, sent) = self
            .inner
            .conn
            .send(
                vec![Request::new(Command::SessionSetup, req.encode(), 0)],
                &route,
                true,
            )
            .await?;
        let resp = v.pop().ok_or(ProtocolError::NoResponse)?;
        Ok((resp, sent.unwrap_or_default()))
    }
}

/// The NTLM token inside a server SPNEGO token (or a raw NTLMSSP token).
fn spnego_token(buf: &[u8]) -> Result<Option<Vec<u8>>> {
    if buf.starts_with(b"NTLMSSP\0") {
        return Ok(Some(buf.to_vec()));
    }
    match spnego::decode(buf).map_err(AuthError::Spnego)? {
        NegotiationToken::Resp(r) => {
            if r.neg_state == Some(NegState::Reject) {
                return Err(AuthError::NtlmRejected.into());
            }
            Ok(r.response_token)
        }
        NegotiationToken::Init(i) => Ok(i.mech_token),
    }
}

async fn negotiate(
    conn: &Connection,
    opts: &ClientOptions,
    host: &str,
) -> Result<(Negotiated, Offered)> {
    let offers_311 = opts.dialects.contains(&Dialect::SMB3_1_1);
    let offers_3 = opts.dialects.iter().any(|&d| d >= Dialect::SMB3_0);
    let mut contexts = Vec::new();
    if offers_311 {
        contexts.push(NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![HASH_SHA512],
            salt: rand::random::<[u8; 32]>().to_vec(),
        });
        if !opts.ciphers.is_empty() {
            contexts.push(NegotiateContext::Encryption {
                ciphers: opts.ciphers.iter().map(|c| c.to_wire()).collect(),
            });
        }
        if !opts.signing_algorithms.is_empty() {
            contexts.push(NegotiateContext::Signing {
                algorithms: opts
                    .signing_algorithms
                    .iter()
                    .map(|a| a.to_wire())
                    .collect(),
            });
        }
        contexts.push(NegotiateContext::NetName(utf16le(host)));
    }
    let req = NegotiateRequest {
        security_mode: SECURITY_SIGNING_ENABLED
            | if opts.signing == Signing::Required {
                SECURITY_SIGNING_REQUIRED
            } else {
                0
            },
        capabilities: if offers_3 {
            CAP_LARGE_MTU
                | CAP_ENCRYPTION
                | if opts.max_channels > 1 {
                    CAP_MULTI_CHANNEL
                } else {
                    0
                }
        } else {
            CAP_LARGE_MTU
        },
        client_guid: opts.client_guid,
        dialects: opts.dialects.clone(),
        contexts,
    };
    let offered = Offered {
        security_mode: req.security_mode,
        capabilities: req.capabilities,
        client_guid: req.client_guid,
        dialects: req.dialects.clone(),
    };
    let (mut v, sent) = conn
        .send(
            vec![Request::new(Command::Negotiate, req.encode(), 0)],
            &Route::default(),
            true,
        )
        .await?;
    let resp = v.pop().ok_or(ProtocolError::NoResponse)?.ok()?;
    let nr = NegotiateResponse::decode(&resp.msg)?;
    if !opts.dialects.contains(&nr.dialect) {
        return Err(ProtocolError::DialectNotOffered(nr.dialect).into());
    }
    let mut preauth = None;
    let mut cipher = None;
    let mut negotiated_alg = None;
    match nr.dialect {
        Dialect::SMB3_1_1 => {
            let mut h = PreauthHash::new();
            h.update(&sent.unwrap_or_default());
            h.update(&resp.msg);
            preauth = Some(h);
            let mut saw_preauth = false;
            for c in &nr.contexts {
                match c {
                    NegotiateContext::PreauthIntegrity {
                        hash_algorithms, ..
                    } => {
                        if hash_algorithms.as_slice() != [HASH_SHA512] {
                            return Err(ProtocolError::UnknownPreauthHash.into());
                        }
                        saw_preauth = true;
                    }
                    NegotiateContext::Encryption { ciphers } => {
                        let id = ciphers.first().copied().unwrap_or(0);
                        if id != 0 {
                            let c = CipherId::from_wire(id)
                                .filter(|c| opts.ciphers.contains(c))
                                .ok_or(ProtocolError::CipherNotOffered(id))?;
                            cipher = Some(c);
                        }
                    }
                    NegotiateContext::Signing { algorithms } => {
                        let id = algorithms.first().copied().unwrap_or(u16::MAX);
                        let a = SigningAlgorithm::from_wire(id)
                            .filter(|a| opts.signing_algorithms.contains(a))
                            .ok_or(ProtocolError::SigningNotOffered(id))?;
                        negotiated_alg = Some(a);
                    }
                    _ => {}
                }
            }
            if !saw_preauth {
                return Err(ProtocolError::NoPreauthContext.into());
            }
        }
        Dialect::SMB3_0 | Dialect::SMB3_0_2 if nr.capabilities & CAP_ENCRYPTION != 0 => {
            cipher = Some(CipherId::Aes128Ccm);
        }
        _ => {}
    }
    let small = nr.dialect == Dialect::SMB2_0_2 || nr.capabilities & CAP_LARGE_MTU == 0;
    let cap = if small {
        65536
    } else {
        opts.max_io_size.max(65536)
    };
    let negotiated = Negotiated {
        dialect: nr.dialect,
        security_mode: nr.security_mode,
        capabilities: nr.capabilities,
        server_guid: nr.server_guid,
        max_read: nr.max_read_size.clamp(4096, cap),
        max_write: nr.max_write_size.clamp(4096, cap),
        max_transact: nr.max_transact_size.clamp(4096, cap),
        cipher,
        signing_algorithm: SigningAlgorithm::for_dialect(nr.dialect, negotiated_alg),
        preauth,
    };
    Ok((negotiated, offered))
}

/// The result of a logon's SESSION_SETUP legs, before keys.
struct Authenticated {
    resp: Response,
    setup: SessionSetupResponse,
    session_id: u64,
    preauth: Option<PreauthHash>,
    session_key: Vec<u8>,
}

/// How a session logged on: what a further channel authenticates with.
#[derive(Clone)]
pub(crate) enum Logon {
    Ntlm {
        user: String,
        password: String,
        domain: String,
    },
    Kerberos,
    Anonymous,
}

pub(crate) struct SessionInner {
    pub client: Client,
    pub id: u64,
    pub flags: u16,
    pub security: Arc<SessionSecurity>,
    /// Every channel, the logon's connection first.
    pub channels: ChannelSet,
    pub logon: Logon,
    /// Set once the server's interfaces were asked for.
    pub discovered: AtomicBool,
    /// The server's RDMA-capable addresses: channels to them are SMB Direct.
    pub rdma_interfaces: crate::dial::RdmaInterfaces,
}

/// An authenticated session. Cheap to clone.
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<SessionInner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &format_args!("{:#x}", self.inner.id))
            .field("flags", &self.inner.flags)
            .field("signed", &self.inner.security.sign)
            .field("encrypted", &self.inner.security.encrypt)
            .finish()
    }
}

impl Session {
    /// The SessionId.
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    /// The client this session belongs to.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }
    /// True if the server logged us on as guest.
    pub fn is_guest(&self) -> bool {
        self.inner.flags & SESSION_FLAG_IS_GUEST != 0
    }
    /// True if requests are signed.
    pub fn is_signed(&self) -> bool {
        self.inner.security.sign && !self.inner.security.encrypt
    }
    /// True if every request of the session is sealed.
    pub fn is_encrypted(&self) -> bool {
        self.inner.security.encrypt
    }

    pub(crate) fn route(&self, encrypt_tree: bool) -> Route {
        Route {
            session_id: self.inner.id,
            security: Some(self.inner.security.clone()),
            encrypt: self.inner.security.encrypt || encrypt_tree,
            force_sign: false,
        }
    }

    /// The route of a request on a channel's connection: signed with the
    /// channel's key.
    pub(crate) fn route_on(&self, link: &Link, encrypt_tree: bool) -> Route {
        Route {
            security: Some(link.security.clone()),
            ..self.route(encrypt_tree)
        }
    }

    /// The channel set (multichannel).
    pub(crate) fn channels(&self) -> &ChannelSet {
        &self.inner.channels
    }

    /// How many channels the session has (1 without multichannel).
    pub fn channel_count(&self) -> usize {
        self.inner.channels.len()
    }

    /// What each channel has carried, the logon's connection first.
    pub fn channel_stats(&self) -> Vec<ChannelStats> {
        self.inner.channels.stats()
    }

    /// The server's network interfaces as FSCTL_QUERY_NETWORK_INTERFACE_INFO on
    /// `tree` reports them ([MS-SMB2] 3.2.4.20.x): addresses, link speed, and the
    /// RSS and RDMA capability flags.
    pub async fn network_interfaces(
        &self,
        tree: &Tree,
    ) -> Result<Vec<smbx_wire::ioctl::NetworkInterface>> {
        let body = IoctlRequest {
            ctl_code: fsctl::QUERY_NETWORK_INTERFACE_INFO,
            file_id: smbx_wire::FileId::NO_FILE,
            input: &[],
            max_input_response: 0,
            output: &[],
            max_output_response: 64 * 1024,
            flags: SMB2_0_IOCTL_IS_FSCTL,
        }
        .encode();
        let resp = self
            .inner
            .client
            .connection()
            .call(
                Request::new(Command::Ioctl, body, tree.id()),
                &self.route(tree.is_encrypted()),
            )
            .await?
            .ok()?;
        let out = IoctlResponse::decode(&resp.msg)?.output;
        Ok(smbx_wire::ioctl::decode_network_interfaces(&out)?)
    }

    /// Multichannel discovery and binding ([MS-SMB2] 3.2.4.20.x, 3.2.5.3.1): asks
    /// the server for its interfaces (FSCTL_QUERY_NETWORK_INTERFACE_INFO on
    /// `tree`), chooses up to `max_channels - 1` further addresses ([`plan`]),
    /// connects to each that answers and binds it. Addresses that do not answer
    /// or refuse the binding are skipped (logged); returns the channels added.
    /// Channels to interfaces flagged RDMA-capable are SMB Direct ([`crate::dial`]).
    ///
    /// [`plan`]: crate::channels::plan
    pub async fn add_channels(&self, tree: &Tree) -> Result<usize> {
        let client = &self.inner.client;
        let opts = &client.inner.options;
        let max = opts.max_channels;
        let have = self.inner.channels.len();
        if max <= have
            || client.dialect() < Dialect::SMB3_0
            || client.negotiated().capabilities & CAP_MULTI_CHANNEL == 0
        {
            return Ok(0);
        }
        let ifs = self.network_interfaces(tree).await?;
        self.inner.rdma_interfaces.learn(&ifs);
        let Some(mut peer) = client.inner.peer.get().copied() else {
            return Ok(0);
        };
        if client.connection().direct().is_some() {
            // Logged on over SMB Direct: the other interfaces' TCP port is 445.
            peer.set_port(crate::options::Transport::Tcp.default_port());
        }
        // The first channel's speed is its interface's, when listed.
        let first = self.inner.channels.first();
        if let Some(ni) = ifs
            .iter()
            .find(|ni| crate::channels::interface_addr(ni, peer.port()).ip() == peer.ip())
        {
            first.set_speed(ni.link_speed);
        }
        // A channel to an address (SMB Direct ones included) uses its interface.
        let used = crate::dial::as_planned(&self.inner.channels.addrs(), peer.port());
        let plan = crate::channels::plan(&ifs, peer.port(), &used, max - have);
        let mut added = 0;
        for (addr, speed) in plan {
            match self.bind_one(addr).await {
                Ok(link) => {
                    // Where it connected: an SMB Direct channel's is its SMB Direct port.
                    let at = link.client.inner.peer.get().copied().unwrap_or(addr);
                    self.inner
                        .channels
                        .push(Channel::new(link, Some(at), speed));
                    added += 1;
                }
                Err(e) => tracing::warn!("multichannel: {addr} not bound: {e}"),
            }
        }
        Ok(added)
    }

    /// Connects to `addr`, negotiates and binds the connection to this session.
    pub(crate) async fn bind_one(&self, addr: SocketAddr) -> Result<Link> {
        let opts = self.inner.client.inner.options.clone();
        let host = self.inner.client.inner.host.clone();
        let direct = crate::dial::use_direct(&self.inner.rdma_interfaces, addr.ip(), &opts);
        let c = crate::dial::connect(addr, direct, &host, opts).await?;
        c.bind(self).await
    }

    /// A live channel's connection (the logon's while it lives): for requests
    /// that are not spread (ECHO, TREE_CONNECT, LOGOFF).
    pub(crate) fn live_link(&self) -> Link {
        self.inner.channels.pick(0).link()
    }

    /// ECHO on this session.
    pub async fn echo(&self) -> Result<()> {
        let link = self.live_link();
        let r = link
            .client
            .connection()
            .call(
                Request::new(Command::Echo, encode_simple(), 0),
                &self.route_on(&link, false),
            )
            .await?
            .ok()?;
        decode_simple(&r.msg)?;
        Ok(())
    }

    /// Connects to a share by name (`\\host\share` is built from the connect address).
    pub async fn tree(&self, share: &str) -> Result<Tree> {
        let client = &self.inner.client.inner;
        let path = format!("\\\\{}\\{}", client.host, share.trim_matches(['\\', '/']));
        let req = TreeConnectRequest { flags: 0, path };
        // 3.1.1 signs every TREE_CONNECT: it protects the negotiation ([MS-SMB2] 3.2.4.1.1).
        // On a live channel: the logon's connection may have failed over.
        let link = self.live_link();
        let mut route = self.route_on(&link, false);
        route.force_sign = client.negotiated.dialect == Dialect::SMB3_1_1;
        let resp = link
            .client
            .connection()
            .call(Request::new(Command::TreeConnect, req.encode(), 0), &route)
            .await?
            .ok()?;
        let tc = TreeConnectResponse::decode(&resp.msg)?;
        let encrypt = tc.share_flags & SHAREFLAG_ENCRYPT_DATA != 0;
        if encrypt && !self.inner.security.keys.can_seal() {
            return Err(ProtocolError::ShareNeedsEncryption(share.to_string()).into());
        }
        let tree = Tree::new(self.clone(), share, resp.header.tree_id, encrypt, tc);
        let d = client.negotiated.dialect;
        if (d == Dialect::SMB3_0 || d == Dialect::SMB3_0_2) && self.inner.security.keys.can_sign() {
            self.validate_negotiate(&tree, &link).await?;
        }
        if client.options.max_channels > 1 && !self.inner.discovered.swap(true, Ordering::AcqRel) {
            if let Err(e) = self.add_channels(&tree).await {
                tracing::warn!("multichannel: no further channels: {e}");
            }
        }
        Ok(tree)
    }

    /// FSCTL_VALIDATE_NEGOTIATE_INFO (3.0 / 3.0.2): asks the server, over a signed
    /// request, what it negotiated, and fails the connection on any difference (a
    /// downgrade by someone in the middle). Asked on `link`, about its connection.
    async fn validate_negotiate(&self, tree: &Tree, link: &Link) -> Result<()> {
        let client = &link.client.inner;
        let o = &client.offered;
        let mut input = Writer::new();
        input
            .u32(o.capabilities)
            .bytes(&o.client_guid)
            .u16(o.security_mode)
            .u16(o.dialects.len() as u16);
        for d in &o.dialects {
            input.u16(d.as_u16());
        }
        let body = IoctlRequest {
            ctl_code: fsctl::VALIDATE_NEGOTIATE_INFO,
            file_id: smbx_wire::FileId::NO_FILE,
            input: input.as_slice(),
            max_input_response: 0,
            output: &[],
            max_output_response: 24,
            flags: SMB2_0_IOCTL_IS_FSCTL,
        }
        .encode();
        let mut route = self.route_on(link, tree.is_encrypted());
        route.force_sign = true;
        let resp = client
            .conn
            .call(Request::new(Command::Ioctl, body, tree.id()), &route)
            .await?;
        if !route.encrypt && !resp.header.is_signed() {
            return Err(SecurityError::ValidateNegotiateUnsigned.into());
        }
        let out = IoctlResponse::decode(&resp.ok()?.msg)?.output;
        let mut r = smbx_wire::Reader::new(&out);
        let n = &client.negotiated;
        let (caps, guid, mode, dialect) = (r.u32()?, r.guid()?, r.u16()?, r.u16()?);
        if caps != n.capabilities
            || guid != n.server_guid
            || mode != n.security_mode
            || dialect != n.dialect.as_u16()
        {
            client.conn.close();
            return Err(SecurityError::Downgrade.into());
        }
        Ok(())
    }

    /// LOGOFF. The session's trees and files become unusable.
    pub async fn logoff(&self) -> Result<()> {
        let link = self.live_link();
        let r = link
            .client
            .connection()
            .call(
                Request::new(Command::Logoff, encode_simple(), 0),
                &self.route_on(&link, false),
            )
            .await;
        for ch in self.inner.channels.all() {
            ch.link().client.connection().remove_session(self.inner.id);
        }
        r?.ok()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_splitting() {
        assert_eq!(split_host("h", 445), ("h".into(), "h:445".into()));
        assert_eq!(split_host("h:1445", 445), ("h".into(), "h:1445".into()));
        assert_eq!(
            split_host("[::1]:99", 445),
            ("::1".into(), "[::1]:99".into())
        );
        assert_eq!(split_host("[::1]", 445), ("::1".into(), "[::1]:445".into()));
        assert_eq!(
            split_host("fe80::1", 445),
            ("fe80::1".into(), "[fe80::1]:445".into())
        );
        assert_eq!(split_host("h", 5445), ("h".into(), "h:5445".into()));
    }
}
