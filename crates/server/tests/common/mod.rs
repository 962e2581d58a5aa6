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
use smbx_wire::{Command, Header, NtStatus, Writer, HEADER_SIZE};
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
    c.global.interfaces = vec!["127.0.0.1".into()];
    c.global.bind_interfaces_only = true;
    c.global.smb_ports = vec![0];
    c.global.netbios_name = "SMBXTEST".into();
    let mut s = smbx_config::ShareConfig::with_defaults("share", dir.to_path_buf(), &c.global);
    s.read_only = false;
    c.shares.push(s);
    c
}

/// Starts a server with `config`.
pub async fn start(config: Config) -> TestServer {
    let server = Server::bind(Arc::new(config)).await.expect("bind");
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
    pub async fn negotiate(&mut self, dialects: &[u16]) -> (Msg, Option<NegotiateResponse>) {
        let mut req = NegotiateRequest {
            security_mode: SECURITY_SIGNING_ENABLED,
            capabilities: CAP_LARGE_MTU | CAP_LEASING | CAP_ENCRYPTION,
            client_guid: [0x11; 16],
            dialects: dialects.to_vec(),
            contexts: Vec::new(),
        };
        if dialects.contains(&DIALECT_311) {
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
        let m = self.request(Command::Negotiate, &req.encode()).await;
        let parsed = NegotiateResponse::decode(&m.bytes).ok();
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
