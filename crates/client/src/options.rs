//! Connection options: dialects, signing, encryption, credits, timeouts.

use std::time::Duration;

use smbx_security::cipher::CipherId;
use smbx_security::signing::SigningAlgorithm;
use smbx_wire::Dialect;

/// Whether to sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Signing {
    /// Sign only when the server requires it (the default).
    #[default]
    IfRequired,
    /// Require signing on every session (refuses guest and anonymous logons).
    Required,
}

/// Whether to encrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encryption {
    /// Encrypt only when the session or the share requires it (the default).
    #[default]
    IfRequired,
    /// Encrypt every message of every session (fails below SMB 3.0).
    Required,
}

/// Whether to log on with Kerberos (smbclient's `--use-kerberos`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kerberos {
    /// NTLM with the URL's user and password (the default).
    #[default]
    Off,
    /// Kerberos with the caller's credential cache (`KRB5CCNAME`) and nothing else
    /// (`-k`, `--use-kerberos=required`).
    Required,
    /// Kerberos, and NTLM with the user and password when Kerberos fails
    /// (`--use-kerberos=desired`).
    Desired,
}

impl Kerberos {
    /// Parses `required`, `desired` or `off` (smbclient's words).
    pub fn parse(s: &str) -> Option<Kerberos> {
        match s.to_ascii_lowercase().as_str() {
            "required" | "yes" | "on" => Some(Kerberos::Required),
            "desired" | "auto" => Some(Kerberos::Desired),
            "off" | "no" | "disabled" => Some(Kerberos::Off),
            _ => None,
        }
    }
}

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Direct TCP (port 445 by default).
    #[default]
    Tcp,
    /// SMB Direct over the userspace soft-iWARP provider (port 5445 by default).
    Rdma,
}

impl Transport {
    /// Parses `tcp` or `rdma`.
    pub fn parse(s: &str) -> Option<Transport> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Some(Transport::Tcp),
            "rdma" | "smbdirect" | "smb-direct" => Some(Transport::Rdma),
            _ => None,
        }
    }

    /// The port used when an address names none.
    pub fn default_port(self) -> u16 {
        match self {
            Transport::Tcp => 445,
            Transport::Rdma => 5445,
        }
    }
}

/// The default of [`ClientOptions::spin_wait`]: 100 µs.
pub const DEFAULT_SPIN_WAIT: Duration = Duration::from_micros(100);

/// Options for [`crate::Client::connect`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Dialects offered, any order (a subset of [`Dialect::ALL`]).
    pub dialects: Vec<Dialect>,
    /// Signing policy.
    pub signing: Signing,
    /// Encryption policy.
    pub encryption: Encryption,
    /// Ciphers offered for SMB 3.1.1, in preference order (3.0/3.0.2 use AES-128-CCM).
    pub ciphers: Vec<CipherId>,
    /// Signing algorithms offered for SMB 3.1.1, in preference order.
    pub signing_algorithms: Vec<SigningAlgorithm>,
    /// The credit window the client asks the server to grant (it never sends beyond
    /// what was actually granted).
    pub max_credits: u16,
    /// Upper bound on the bytes of one READ or WRITE (further capped by the server's
    /// MaxReadSize / MaxWriteSize).
    pub max_io_size: u32,
    /// How long to wait for each response (`None`: forever). Interim STATUS_PENDING
    /// responses do not count as answers.
    pub timeout: Option<Duration>,
    /// The workstation name sent in NTLM AUTHENTICATE.
    pub workstation: String,
    /// The ClientGuid (random by default).
    pub client_guid: [u8; 16],
    /// Direct TCP or SMB Direct.
    pub transport: Transport,
    /// Over SMB Direct, READs and WRITEs larger than this many bytes move their data
    /// by RDMA (the others, and all I/O on sealed sessions, go inline). `None`
    /// (default): the link's own ([`smbx_transport::DirectLink::rdma_threshold`]):
    /// 4 KiB on RDMA NICs; over soft-iWARP 16 KiB for READs, 32 KiB for WRITEs.
    pub rdma_threshold: Option<usize>,
    /// Over SMB Direct, whether a signed session's READs and WRITEs may move their
    /// data by RDMA (true, as Windows does). False keeps them inline, as Linux cifs
    /// always does when signing: for servers that sign RDMA READ responses wrongly
    /// (ksmbd up to at least Linux 6.12). URL `rdma_signed=0`.
    pub rdma_when_signed: bool,
    /// Soft-iWARP options for [`Transport::Rdma`] (MPA revision, CRC, MSS).
    pub iwarp: smbx_transport::soft::Options,
    /// SMB Direct sizes for [`Transport::Rdma`]: `max_send_size` (8704; a server
    /// that sends at most 1364 bytes, as Windows, gets 1364-byte messages),
    /// `max_receive_size` (8704), `max_fragmented_size` (1 MiB), credits.
    pub direct: smbx_transport::DirectConfig,
    /// Kerberos or NTLM for [`crate::SmbUrl::open`] (and the commands built on it).
    pub kerberos: Kerberos,
    /// Most channels (connections) one session may use: 1 (the default) is one
    /// connection; more makes the session multichannel (SMB 3.x, a server with
    /// multichannel support): at the first tree connect the client asks the server
    /// for its interfaces and binds further connections to the session.
    pub max_channels: usize,
    /// Whether further channels to interfaces the server flags RDMA_CAPABLE are
    /// SMB Direct (true, the default, as Windows) or Direct TCP like the rest.
    pub rdma_channels: bool,
    /// The SMB Direct port of such channels: 5445 (iWARP's), or the logon's port
    /// when the session itself logged on over SMB Direct.
    pub direct_port: u16,
    /// Open files with durable v2 handles (and a read+handle lease) so that
    /// they survive the session: when the server drops it, the client logs on
    /// again (PreviousSessionId), reclaims them and replays what was in
    /// flight. On by default when `max_channels > 1`; SMB 3.x only.
    pub durable_handles: bool,
    /// Socket options of every Direct TCP connection (the logon's and each
    /// channel's), as the server's smb.conf `socket options`
    /// ([`smbx_transport::SocketOptions::parse`]): keepalive and
    /// `TCP_USER_TIMEOUT` let a connection whose path died fail by itself even
    /// with no request waiting. Default: the system's.
    pub socket: smbx_transport::SocketOptions,
    /// How long a request (Direct TCP or SMB Direct) keeps the thread checking for its
    /// response instead of sleeping, on a current-thread tokio runtime, while its
    /// connection's requests are all that wait on the thread (one of them spins at a
    /// time) and the last such response came within it (it yields the
    /// CPU and wakes itself at once, so the runtime polls the socket again: one
    /// zero-timeout `epoll_wait` and a `sched_yield` per pass). It trades CPU for
    /// latency: a thread that sleeps for its response costs the round trip a
    /// wake-up (a 4 KiB QD1 READ on loopback, pinned: p50 ~54 -> ~39 µs with it).
    /// A slower response (a large READ, a busy server) is waited for asleep.
    /// [`Duration::ZERO`] turns it off (the thread sleeps until the socket wakes it).
    /// Multi-threaded runtimes never spin. Default [`DEFAULT_SPIN_WAIT`] (100 µs);
    /// `smbx bench --spin-us N`.
    pub spin_wait: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            dialects: Dialect::ALL.to_vec(),
            signing: Signing::default(),
            encryption: Encryption::default(),
            ciphers: vec![
                CipherId::Aes128Gcm,
                CipherId::Aes128Ccm,
                CipherId::Aes256Gcm,
                CipherId::Aes256Ccm,
            ],
            signing_algorithms: vec![
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::HmacSha256,
            ],
            max_credits: 2048,
            max_io_size: 8 * 1024 * 1024,
            timeout: Some(Duration::from_secs(120)),
            workstation: "SMBX".to_string(),
            client_guid: rand::random(),
            transport: Transport::Tcp,
            rdma_threshold: None,
            rdma_when_signed: true,
            iwarp: smbx_transport::soft::Options::default(),
            direct: smbx_transport::DirectConfig::default(),
            kerberos: Kerberos::Off,
            max_channels: 1,
            rdma_channels: true,
            direct_port: Transport::Rdma.default_port(),
            durable_handles: false,
            socket: smbx_transport::SocketOptions::default(),
            spin_wait: DEFAULT_SPIN_WAIT,
        }
    }
}

impl ClientOptions {
    /// Offers exactly one dialect.
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialects = vec![dialect];
        self
    }
    /// Connects over `transport` (see [`ClientOptions::transport`]).
    pub fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }
    /// Sets the signing policy.
    pub fn with_signing(mut self, signing: Signing) -> Self {
        self.signing = signing;
        self
    }
    /// Sets the encryption policy.
    pub fn with_encryption(mut self, encryption: Encryption) -> Self {
        self.encryption = encryption;
        self
    }
    /// Offers exactly these ciphers (3.1.1).
    pub fn with_ciphers(mut self, ciphers: &[CipherId]) -> Self {
        self.ciphers = ciphers.to_vec();
        self
    }
    /// Opens files durably (see [`ClientOptions::durable_handles`]).
    pub fn with_durable_handles(mut self, yes: bool) -> Self {
        self.durable_handles = yes;
        self
    }
    /// Lets a session use up to `n` channels (see [`ClientOptions::max_channels`]).
    pub fn with_max_channels(mut self, n: usize) -> Self {
        self.max_channels = n.max(1);
        self
    }
    /// Sets how long a lone request spins for its response
    /// (see [`ClientOptions::spin_wait`]; zero: never).
    pub fn with_spin_wait(mut self, spin: Duration) -> Self {
        self.spin_wait = spin;
        self
    }
    /// Offers exactly these signing algorithms (3.1.1).
    pub fn with_signing_algorithms(mut self, algs: &[SigningAlgorithm]) -> Self {
        self.signing_algorithms = algs.to_vec();
        self
    }
}

/// Parses "2.0.2", "2.1", "3.0", "3.0.2", "3.1.1" (also "202", "0x0311" forms).
pub fn parse_dialect(s: &str) -> Option<Dialect> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "2.0.2" | "202" | "0x0202" | "smb2_02" => Dialect::SMB2_0_2,
        "2.1" | "2.1.0" | "210" | "0x0210" | "smb2_10" => Dialect::SMB2_1,
        "3.0" | "3.0.0" | "300" | "0x0300" | "smb3_00" => Dialect::SMB3_0,
        "3.0.2" | "302" | "0x0302" | "smb3_02" => Dialect::SMB3_0_2,
        "3.1.1" | "311" | "0x0311" | "smb3_11" => Dialect::SMB3_1_1,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_names_round_trip() {
        for d in Dialect::ALL {
            assert_eq!(parse_dialect(d.name()), Some(d));
        }
        assert_eq!(parse_dialect("SMB3_11"), Some(Dialect::SMB3_1_1));
        assert_eq!(parse_dialect("1.0"), None);
    }
}
