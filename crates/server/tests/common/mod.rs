//! A tiny raw SMB2 test client and a helper that starts a server on 127.0.0.1:0.
//! Handler tests build requests with the smbx-wire encoders and check the bytes
//! that come back.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use smbx_config::Config;
use smbx_server::Server;
use smbx_wire::framing::{decode_frame_header, encode_frame_header};
use smbx_wire::header::FLAGS_RELATED_OPERATIONS;
use smbx_wire::negotiate::*;
use smbx_wire::{Command, Dialect, Header, NtStatus, Writer, HEADER_SIZE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A server running in the test's runtime.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its state tables.
    pub state: Arc<smbx_server::state::ServerState>,
}

/// A configuration that listens on 127.0.0.1:0 with a `share` disk share at `dir`.
pub fn test_config(dir: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.global.interfaces = vec![std::net::Ipv4Addr::LOCALHOST.into()];
    c.global.bind_interfaces_only = true;
    c.global.smb_ports = vec![0];
    c.global.netbios_name = "SMBXTEST".into();
    let mut s = smbx_config::ShareConfig::with_defaults("share", dir.to_path_buf(), &c.global);
    s.read_only = false;
    c.shares.push(s);
    c
}

/// An in-memory credential store: user → NT hash.
pub struct Users(pub Vec<(String, [u8; 16])>);

impl smbx_security::auth::CredentialStore for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.0
            .iter()
            .find(|(u, _)| u.eq_ignore_ascii_case(user))
            .map(|(_, h)| *h)
    }
}

/// Starts a server with `config` and the user `user` / password `pass`.
pub async fn start(config: Config) -> TestServer {
    start_with_users(config, &[("user", "pass")]).await
}

/// Starts a server with `config` and the given users.
pub async fn start_with_users(config: Config, users: &[(&str, &str)]) -> TestServer {
    let store = Users(
        users
            .iter()
            .map(|(u, p)| (u.to_string(), smbx_passdb::nt_hash(p)))
            .collect(),
    );
    let server = Server::bind_with_credentials(Arc::new(config), Arc::new(store))
        .await
        .expect("bind");
    let addr = server.local_addrs()[0];
    let state = server.state();
    tokio::spawn(server.run());
    TestServer { addr, state }
}

/// A received message: its header and the whole message (header first).
#[derive(Debug, Clone)]
pub struct Msg {
    /// Decoded header.
    pub header: Header,
    /// The message bytes starting at the header.
    pub bytes: Vec<u8>,
}

impl Msg {
    /// Status from the header.
    pub fn status(&self) -> NtStatus {
        self.header.status
    }
    /// Body bytes.
    pub fn body(&self) -> &[u8] {
        &self.bytes[HEADER_SIZE..]
    }
}

/// A raw SMB2 client over one TCP connection.
pub struct Client {
    /// The socket.
    pub stream: TcpStream,
    /// Next MessageId to use.
    pub next_message_id: u64,
    /// SessionId put in requests.
    pub session_id: u64,
    /// TreeId put in requests.
    pub tree_id: u32,
    /// Credits to request per message.
    pub credit_request: u16,
    /// Negotiated dialect.
    pub dialect: Dialect,
    /// Signs requests once set (after SESSION_SETUP).
    pub signer: Option<smbx_security::signing::Signer>,
    /// Running preauth hash (3.1.1).
    pub preauth: Option<smbx_security::preauth::PreauthHash>,
    /// Negotiated signing algorithm id (3.1.1).
    pub signing_alg: Option<u16>,
    /// Session keys, server view (client decrypts with `encrypt_s2c`).
    pub keys: Option<smbx_security::keys::SessionKeys>,
    /// ClientGuid sent in NEGOTIATE.
    pub client_guid: [u8; 16],
}

/// Connects to `srv`, negotiates 3.1.1, logs on as `user`/`pass` and connects
/// `share` (the usual start of a handler test).
pub async fn connect_share(srv: &TestServer) -> Client {
    connect_share_as(srv, Dialect::SMB3_1_1).await
}

/// [`connect_share`] with `dialect`.
pub async fn connect_share_as(srv: &TestServer, dialect: Dialect) -> Client {
    let mut c = Client::connect(srv.addr).await;
    c.negotiate(&[dialect]).await;
    assert_eq!(
        c.session_setup("user", "pass").await.status(),
        NtStatus::SUCCESS
    );
    assert_eq!(c.tree_connect("share").await.status(), NtStatus::SUCCESS);
    c
}

/// A server sharing `dir` and a client connected to it ([`connect_share`]).
pub async fn start_with_client(dir: &std::path::Path) -> (TestServer, Client) {
    let srv = start(test_config(dir)).await;
    let c = connect_share(&srv).await;
    (srv, c)
}

/// A CREATE body for `name`: full access, all sharing, FILE_OPEN_IF, asking for
/// oplock level `oplock`.
pub fn create_body(name: &str, oplock: smbx_wire::oplock::OplockLevel) -> Vec<u8> {
    create_with(name, oplock, 3)
}

/// [`create_body`] with CreateDisposition `disposition`.
pub fn create_with(
    name: &str,
    oplock: smbx_wire::oplock::OplockLevel,
    disposition: u32,
) -> Vec<u8> {
    smbx_wire::create::CreateRequestBuilder {
        oplock_level: oplock,
        impersonation_level: 2,
        desired_access: smbx_wire::AccessMask(0x001F_01FF),
        file_attributes: smbx_wire::FileAttributes(0x80),
        share_access: smbx_wire::ShareAccess(7),
        create_disposition: disposition,
        name: name.into(),
        ..Default::default()
    }
    .encode()
}

/// The FileId of a CREATE response, as requests carry it.
pub fn file_id_of(r: &smbx_wire::create::CreateResponse) -> smbx_wire::FileId {
    r.file_id
}

/// The body of a successful CREATE response.
pub fn created(m: &Msg) -> smbx_wire::create::CreateResponse {
    assert_eq!(m.status(), NtStatus::SUCCESS);
    let mut b = vec![0u8; HEADER_SIZE];
    b.extend_from_slice(m.body());
    smbx_wire::create::CreateResponse::decode(&b).unwrap()
}

impl Client {
    /// Connects.
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.expect("connect"),
            next_message_id: 0,
            session_id: 0,
            tree_id: 0,
            credit_request: 64,
            dialect: Dialect::NONE,
            signer: None,
            preauth: None,
            signing_alg: None,
            keys: None,
            client_guid: [0x11; 16],
        }
    }

    /// A request header for `cmd` with the next MessageId.
    pub fn header(&mut self, cmd: Command) -> Header {
        let h = Header {
            credit_charge: 1,
            command: cmd as u16,
            credits: self.credit_request,
            message_id: self.next_message_id,
            tree_id: self.tree_id,
            session_id: self.session_id,
            ..Default::default()
        };
        self.next_message_id += 1;
        h
    }

    /// Encodes a header + body.
    pub fn message(h: &Header, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::with_capacity(HEADER_SIZE + body.len());
        h.encode(&mut w);
        w.bytes(body);
        w.into_vec()
    }

    /// Sends a signed (when a signer is set) single request and returns the final
    /// response.
    pub async fn request_signed(&mut self, cmd: Command, body: &[u8]) -> Msg {
        let mut h = self.header(cmd);
        if self.signer.is_some() {
            h.flags |= smbx_wire::header::FLAGS_SIGNED;
        }
        let mut m = Self::message(&h, body);
        if let Some(s) = &self.signer {
            s.sign(&mut m);
        }
        self.send_raw(&m).await;
        loop {
            let r = self.recv().await.expect("connection closed").remove(0);
            if r.header.status == NtStatus::PENDING && r.header.is_async() {
                continue;
            }
            return r;
        }
    }

    /// NTLM (raw NTLMSSP) SESSION_SETUP as `user`/`pass` (anonymous if `user` is
    /// empty); derives keys and starts signing. Returns the final response.
    pub async fn session_setup(&mut self, user: &str, pass: &str) -> Msg {
        self.session_setup_flags(user, pass, 0, None).await
    }

    /// Binds this connection as a channel of session `session_id` ([MS-SMB2]
    /// 3.2.4.1.7): SESSION_SETUP with the BINDING flag, each leg signed with the
    /// session's signer. On success `signer` is the channel's own.
    pub async fn bind_session(
        &mut self,
        session_id: u64,
        session_signer: &smbx_security::signing::Signer,
        user: &str,
        pass: &str,
    ) -> Msg {
        self.session_id = session_id;
        self.session_setup_flags(
            user,
            pass,
            smbx_wire::session::SESSION_FLAG_BINDING,
            Some(session_signer),
        )
        .await
    }

    /// SESSION_SETUP legs with `flags`, signed with `sign_with` if given.
    pub async fn session_setup_flags(
        &mut self,
        user: &str,
        pass: &str,
        flags: u8,
        sign_with: Option<&smbx_security::signing::Signer>,
    ) -> Msg {
        use smbx_security::ntlm::Initiator;
        use smbx_wire::session::{SessionSetupRequest, SessionSetupResponse};
        let mut init = if user.is_empty() {
            Initiator::anonymous()
        } else {
            Initiator::new(user, pass, "")
        };
        let mut pre = self.preauth;
        let mut token = init.negotiate();
        let mut key = [0u8; 16];
        loop {
            let req = SessionSetupRequest {
                flags,
                security_mode: 1,
                security_buffer: token.clone(),
                ..Default::default()
            };
            let mut h = self.header(Command::SessionSetup);
            if sign_with.is_some() {
                h.flags |= smbx_wire::header::FLAGS_SIGNED;
            }
            let mut m = Self::message(&h, &req.encode());
            if let Some(s) = sign_with {
                s.sign(&mut m);
            }
            if let Some(p) = pre.as_mut() {
                p.update(&m);
            }
            self.send_raw(&m).await;
            let r = self.recv().await.expect("closed").remove(0);
            if r.status() != NtStatus::MORE_PROCESSING_REQUIRED {
                if r.status() == NtStatus::SUCCESS {
                    self.session_id = r.header.session_id;
                    let session_flags = SessionSetupResponse::decode(&r.bytes)
                        .unwrap()
                        .session_flags;
                    if !user.is_empty() && session_flags & 3 == 0 {
                        let cipher = if self.dialect >= Dialect::SMB3_0 {
                            Some(smbx_security::cipher::CipherId::Aes128Ccm)
                        } else {
                            None
                        };
                        let k = smbx_security::keys::derive(
                            self.dialect,
                            &key,
                            pre.as_ref().map(|p| p.value()),
                            cipher,
                        );
                        let alg = if self.dialect < Dialect::SMB3_0 {
                            smbx_security::signing::SigningAlgorithm::HmacSha256
                        } else {
                            self.signing_alg
                                .and_then(smbx_security::signing::SigningAlgorithm::from_wire)
                                .unwrap_or(smbx_security::signing::SigningAlgorithm::AesCmac)
                        };
                        self.signer = Some(smbx_security::signing::Signer::new(alg, &k.signing));
                        self.keys = Some(k);
                    }
                }
                return r;
            }
            if let Some(p) = pre.as_mut() {
                p.update(&r.bytes);
            }
            self.session_id = r.header.session_id;
            let challenge = SessionSetupResponse::decode(&r.bytes)
                .unwrap()
                .security_buffer;
            let (auth, k) = init.authenticate(&challenge).expect("authenticate");
            key = k;
            token = auth;
        }
    }

    /// TREE_CONNECT to `\\srv\share`; sets `tree_id` on success.
    pub async fn tree_connect(&mut self, share: &str) -> Msg {
        let req = smbx_wire::tree::TreeConnectRequest {
            flags: 0,
            path: format!("\\\\127.0.0.1\\{share}"),
        };
        let r = self
            .request_signed(Command::TreeConnect, &req.encode())
            .await;
        if r.status() == NtStatus::SUCCESS {
            self.tree_id = r.header.tree_id;
        }
        r
    }

    /// Sends one framed message (a single request, a compound, or anything raw).
    pub async fn send_raw(&mut self, msg: &[u8]) {
        let hdr = encode_frame_header(msg.len()).unwrap();
        self.stream.write_all(&hdr).await.unwrap();
        self.stream.write_all(msg).await.unwrap();
    }

    /// Receives one frame; None if the server closed the connection.
    pub async fn recv_frame(&mut self) -> Option<Vec<u8>> {
        let mut hdr = [0u8; 4];
        self.stream.read_exact(&mut hdr).await.ok()?;
        let len = decode_frame_header(hdr, 1 << 24).ok()?;
        let mut buf = vec![0u8; len];
        self.stream.read_exact(&mut buf).await.ok()?;
        Some(buf)
    }

    /// Receives one frame and splits it into compound members.
    pub async fn recv(&mut self) -> Option<Vec<Msg>> {
        let buf = self.recv_frame().await?;
        Some(split(&buf))
    }

    /// Sends `cmd` with `body` and returns the final response (interim STATUS_PENDING
    /// responses are skipped).
    pub async fn request(&mut self, cmd: Command, body: &[u8]) -> Msg {
        let h = self.header(cmd);
        self.send_raw(&Self::message(&h, body)).await;
        loop {
            let mut m = self.recv().await.expect("connection closed");
            let r = m.remove(0);
            if r.header.status == NtStatus::PENDING && r.header.is_async() {
                continue;
            }
            return r;
        }
    }

    /// Sends a compound of `(cmd, body, related)` members, 8-byte aligned.
    pub async fn send_compound(&mut self, members: &[(Command, Vec<u8>, bool)]) -> Vec<u64> {
        let mut out = Vec::new();
        let mut ids = Vec::new();
        for (i, (cmd, body, related)) in members.iter().enumerate() {
            let mut h = self.header(*cmd);
            ids.push(h.message_id);
            if *related {
                h.flags |= FLAGS_RELATED_OPERATIONS;
            }
            let mut m = Self::message(&h, body);
            if i + 1 < members.len() {
                let padded = m.len().next_multiple_of(8);
                m.resize(padded, 0);
                m[20..24].copy_from_slice(&(padded as u32).to_le_bytes());
            }
            out.extend(m);
        }
        self.send_raw(&out).await;
        ids
    }

    /// NEGOTIATE offering `dialects` (3.1.1 adds preauth, encryption and signing contexts).
    pub async fn negotiate(&mut self, dialects: &[Dialect]) -> (Msg, Option<NegotiateResponse>) {
        let mut req = NegotiateRequest {
            security_mode: SECURITY_SIGNING_ENABLED,
            capabilities: CAP_LARGE_MTU | CAP_LEASING | CAP_ENCRYPTION,
            client_guid: self.client_guid,
            dialects: dialects.to_vec(),
            contexts: Vec::new(),
        };
        if dialects.contains(&Dialect::SMB3_1_1) {
            req.contexts = vec![
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms: vec![HASH_SHA512],
                    salt: vec![0x42; 32],
                },
                NegotiateContext::Encryption {
                    ciphers: vec![CIPHER_AES128_GCM, CIPHER_AES128_CCM],
                },
                NegotiateContext::Signing {
                    algorithms: vec![SIGNING_AES_GMAC, SIGNING_AES_CMAC],
                },
            ];
        }
        let h = self.header(Command::Negotiate);
        let raw = Self::message(&h, &req.encode());
        self.send_raw(&raw).await;
        let m = self.recv().await.expect("closed").remove(0);
        let parsed = NegotiateResponse::decode(&m.bytes).ok();
        if let Some(p) = &parsed {
            self.dialect = p.dialect;
            if p.dialect == Dialect::SMB3_1_1 {
                let mut h = smbx_security::preauth::PreauthHash::new();
                h.update(&raw);
                h.update(&m.bytes);
                self.preauth = Some(h);
                for c in &p.contexts {
                    if let NegotiateContext::Signing { algorithms } = c {
                        self.signing_alg = algorithms.first().copied();
                    }
                }
            }
        }
        (m, parsed)
    }
}

/// Splits a response frame into compound members.
pub fn split(buf: &[u8]) -> Vec<Msg> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let header = Header::decode(&buf[pos..]).expect("response header");
        let end = if header.next_command == 0 {
            buf.len()
        } else {
            pos + header.next_command as usize
        };
        let next = header.next_command;
        out.push(Msg {
            header,
            bytes: buf[pos..end].to_vec(),
        });
        if next == 0 {
            return out;
        }
        pos = end;
    }
}

/// QUERY_INFO of `class` on `fid`: the status and the output buffer (or, on an
/// error, its error data, such as a security descriptor's required size).
pub async fn query_info(
    c: &mut Client,
    fid: smbx_wire::FileId,
    info_type: u8,
    class: u8,
    addl: u32,
    max: u32,
) -> (NtStatus, Vec<u8>) {
    let q = smbx_wire::query_info::QueryInfoRequest {
        info_type,
        info_class: class,
        output_buffer_length: max,
        input: &[],
        additional_information: addl,
        flags: 0,
        file_id: fid,
    };
    let r = c.request(Command::QueryInfo, &q.encode()).await;
    let data = if r.status().is_error() {
        let b = r.body();
        let n = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
        b[8..8 + n].to_vec()
    } else {
        smbx_wire::query_directory::decode_output_response(&r.bytes)
            .unwrap()
            .to_vec()
    };
    (r.status(), data)
}
