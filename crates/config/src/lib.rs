//! smbx-config: the smb.conf parser.
//!
//! Boundaries: owns smb.conf parsing and the typed configuration; imports only smbx-
//! wire (for protocol vocabulary such as dialects), never the server.
//!
//! Samba's syntax: `[section]` headers, `name = value` lines, `;`/`#`
//! comment lines, trailing-`\` continuations, `include = FILE`. Option names
//! match case-insensitively with spaces and underscores ignored. `[global]`
//! holds server options and defaults for shares; every other section is a
//! share. Unknown options become warnings (`file:line: ...` in
//! [`Config::warnings`]); invalid values are a [`ConfigError`] naming the
//! file, line, option and accepted values.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod build;
pub mod direct;
mod emit;
pub mod interfaces;
pub mod kerberos;
mod lexer;
pub mod values;

use std::fmt;
use std::path::{Path, PathBuf};

pub use direct::SmbDirectProvider;
pub use interfaces::{Interface, InterfaceCaps, InterfaceTarget};
pub use kerberos::{KerberosMethod, UsernameMap};
pub use lexer::MAX_INCLUDE_DEPTH;

/// Default password database when `passdb backend` is plain `smbpasswd` or unset.
pub const DEFAULT_PASSDB_PATH: &str = "/var/lib/smbx/smbpasswd";
/// Default configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/smbx/smb.conf";

/// A parsed configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// `[global]` options.
    pub global: Global,
    /// One entry per share section, in file order.
    pub shares: Vec<ShareConfig>,
    /// Warnings (`FILE:LINE: message`): unknown or ignored options and sections.
    pub warnings: Vec<String>,
    /// The file this was read from, if any.
    pub source: Option<PathBuf>,
}

/// A configuration error at a file and line. Line 0 means "the whole file"
/// (for example, it could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File name.
    pub file: String,
    /// 1-based line, or 0 when not tied to a line.
    pub line: usize,
    /// What is wrong and what would be accepted.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// `server signing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SigningSetting {
    /// Sign when the client asks (Samba `auto`, `default`, `if_required`).
    #[default]
    Auto,
    /// Require signing (`mandatory`, `required`).
    Mandatory,
    /// Never offer signing (`disabled`, `no`, `off`).
    Disabled,
}

/// `server smb encrypt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncryptSetting {
    /// Never encrypt; reject clients that require it.
    Off,
    /// Encrypt only when the client requires it (`if_required`, `default`, `auto`).
    #[default]
    IfRequired,
    /// Encrypt when the client supports it.
    Desired,
    /// Require encryption; reject clients that cannot encrypt.
    Required,
}

/// `map to guest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapToGuest {
    /// Unknown users and bad passwords are rejected.
    #[default]
    Never,
    /// Unknown user names are logged on as the guest account.
    BadUser,
}

/// Server-wide options from `[global]`. The share-level fields (`read_only`,
/// `guest_ok`, ... ) are the defaults every share starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Global {
    /// `interfaces`: the interfaces, addresses and networks to bind (with
    /// `bind interfaces only`) and to advertise to multichannel clients, each with
    /// Samba's `;speed=...,capability=...` options ([`interfaces`]).
    pub interfaces: Vec<Interface>,
    /// `bind interfaces only`.
    pub bind_interfaces_only: bool,
    /// `smb ports` (default 445).
    pub smb_ports: Vec<u16>,
    /// `server min protocol` (default SMB2_02).
    pub server_min_protocol: smbx_wire::Dialect,
    /// `server max protocol` (default SMB3_11).
    pub server_max_protocol: smbx_wire::Dialect,
    /// `server signing`.
    pub server_signing: SigningSetting,
    /// `server smb encrypt` (also the default for shares).
    pub server_smb_encrypt: EncryptSetting,
    /// Path of the smbpasswd file from `passdb backend = smbpasswd:PATH`.
    pub passdb_backend: PathBuf,
    /// `map to guest`.
    pub map_to_guest: MapToGuest,
    /// `guest account` (default `nobody`).
    pub guest_account: String,
    /// `log level` (0 = errors and warnings ... 4+ = trace).
    pub log_level: u32,
    /// `log file`: where `smbx serve` writes its log instead of standard error
    /// (`--log-file` overrides it).
    pub log_file: Option<PathBuf>,
    /// `max log size` in KiB (default 5000, as Samba; 0 = no limit): a `log file`
    /// that grows past it is renamed to `<name>.old` and a new one started.
    pub max_log_size_kib: u32,
    /// `control socket` (smbx): the Unix socket `smbx status` and `smbx reload` talk
    /// to the running server through. Unset: derived from the configuration file
    /// (`/run/smbx/smbx.sock` for the default one; see smbx-server's `control`).
    pub control_socket: Option<PathBuf>,
    /// `max connections` (0 = unlimited).
    pub max_connections: u32,
    /// `netbios name` (default: host name, upper case).
    pub netbios_name: String,
    /// `workgroup` (default WORKGROUP).
    pub workgroup: String,
    /// `server string`.
    pub server_string: String,
    /// `smb2 max credits` (default 8192, as Samba and Windows).
    pub smb2_max_credits: u16,
    /// `smb2 max read` in bytes (default 8 MiB).
    pub smb2_max_read: u32,
    /// `smb2 max write` in bytes (default 8 MiB).
    pub smb2_max_write: u32,
    /// `smb2 max trans` in bytes (default 8 MiB).
    pub smb2_max_trans: u32,
    /// `ea support` (also the default for shares).
    pub ea_support: bool,
    /// `store dos attributes` (also the default for shares).
    pub store_dos_attributes: bool,
    /// `hide dot files` (also the default for shares; default no, Samba's is yes).
    pub hide_dot_files: bool,
    /// `hide files` (`/pattern/pattern/`; also the default for shares).
    pub hide_files: Vec<String>,
    /// `acl_xattr:security_acl_name` (also the default for shares).
    pub acl_xattr_name: Option<String>,
    /// `durable handles` (also the default for shares).
    pub durable_handles: bool,
    /// `server multi channel support`.
    pub server_multi_channel_support: bool,
    /// `smb direct`: listen for SMB Direct (RDMA).
    pub smb_direct: bool,
    /// `smb direct port` (default 5445).
    pub smb_direct_port: u16,
    /// `smb direct crc` (smbx; default no): ask for MPA CRC-32C on SMB Direct
    /// connections. With `no` the server follows the initiator (CRC only when it
    /// asks, as MPA requires).
    pub smb_direct_crc: bool,
    /// `smb direct large fpdus` (smbx; default yes): over soft-iWARP, take an smbx
    /// client's offer of smbx's large FPDUs (RDMA Writes and Read Responses in
    /// FPDUs of up to 512 KiB instead of MPA's 64 KiB). Standard peers never
    /// offer them; `no` keeps every connection on standard MPA framing (e.g. for
    /// packet captures that tshark must decode).
    pub smb_direct_large_fpdus: bool,
    /// `smb direct provider` (smbx; default auto): rdma-core verbs where an
    /// address has an RDMA device, soft-iWARP elsewhere; or one of them only.
    pub smb_direct_provider: SmbDirectProvider,
    /// `smb direct poll` (smbx; default no): on rdma-core verbs, poll the
    /// completion queues instead of sleeping on the completion channel's
    /// descriptor (lowest latency, one core busy per connection).
    pub smb_direct_poll: bool,
    /// `smb direct max send size` (smbx; default 8704, 8 KiB and 512 bytes, so
    /// that an 8 KiB READ response is one message to an smbx client): the
    /// largest SMB Direct message the server sends. A client that itself sends
    /// at most 1364 bytes (Windows, Linux) gets 1364-byte messages whatever this
    /// says.
    pub smb_direct_max_send_size: u32,
    /// `smb direct max receive size` (smbx; default 8704, so that an 8 KiB WRITE
    /// request is one message): the largest SMB Direct message the server
    /// receives (the size of each posted receive).
    pub smb_direct_max_receive_size: u32,
    /// `smb direct max fragmented size` (smbx; default 1 MiB): the largest SMB2
    /// message the server reassembles from SMB Direct fragments.
    pub smb_direct_max_fragmented_size: u32,
    /// `smb direct mss` (smbx; default 0): the TCP segment size soft-iWARP sizes
    /// its FPDUs for; 0 is each connection's own (TCP_MAXSEG).
    pub smb_direct_mss: u32,
    /// `metrics listen` (smbx; default unset = off): the address of the Prometheus
    /// endpoint (`http://ADDR/metrics`), such as `127.0.0.1:9445`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `deadtime` (written in minutes, as in Samba), in seconds; 0 = never.
    pub deadtime_secs: u32,
    /// `socket options` (Samba's syntax, `SO_KEEPALIVE TCP_KEEPIDLE=30 ...`; default
    /// empty), as written: set on every accepted TCP connection after the server's
    /// own SO_KEEPALIVE (smbx_transport::SocketOptions parses and applies it).
    pub socket_options: String,
    /// `unauthenticated timeout` in seconds: how long a connection may stay
    /// without completing session setup.
    pub unauthenticated_timeout_secs: u32,
    /// `max open files`: opens one session (and one connection) may hold at once;
    /// more are refused with STATUS_TOO_MANY_OPENED_FILES (default 16384).
    pub max_open_files: u32,
    /// `oplock break timeout` (smbx; milliseconds, default 35000): how long an open,
    /// a rename or a write waits for a client to acknowledge an oplock or lease break
    /// before the server breaks it unilaterally ([MS-SMB2] 3.3.2.1, 3.3.2.2). Samba's
    /// `oplock break wait time` is another thing (a delay before sending a break).
    pub oplock_break_timeout_ms: u32,
    /// `restrict anonymous` (Samba's): 0 = anonymous sessions allowed, 1 = allowed
    /// but refused share enumeration, 2 = anonymous sessions refused (default 0).
    pub restrict_anonymous: u8,
    /// `kerberos method`: `dedicated keytab` or `system keytab` turn Kerberos on
    /// (default `secrets only`: NTLM only).
    pub kerberos_method: KerberosMethod,
    /// `dedicated keytab file`: the keytab with the `cifs/<host>` keys, for
    /// `kerberos method = dedicated keytab`.
    pub dedicated_keytab_file: Option<PathBuf>,
    /// `realm`: the server's Kerberos realm; `user@REALM` logs in as `user`. Empty:
    /// the realm of the service principal the client's ticket is for.
    pub realm: String,
    /// `username map`: a file mapping client names (Kerberos principals) to local users.
    pub username_map: Option<PathBuf>,
    /// Default `read only` for shares.
    pub read_only: bool,
    /// Default `guest ok` for shares.
    pub guest_ok: bool,
    /// Default `browseable` for shares.
    pub browseable: bool,
    /// Default `case sensitive` for shares.
    pub case_sensitive: bool,
    /// Default `vfs objects` for shares.
    pub vfs_objects: Vec<String>,
    /// Default `valid users` for shares.
    pub valid_users: Vec<String>,
    /// Default `admin users` for shares.
    pub admin_users: Vec<String>,
}

impl Default for Global {
    fn default() -> Self {
        Global {
            interfaces: Vec::new(),
            bind_interfaces_only: false,
            smb_ports: vec![445],
            server_min_protocol: smbx_wire::Dialect::SMB2_0_2,
            server_max_protocol: smbx_wire::Dialect::SMB3_1_1,
            server_signing: SigningSetting::Auto,
            server_smb_encrypt: EncryptSetting::IfRequired,
            passdb_backend: PathBuf::from(DEFAULT_PASSDB_PATH),
            map_to_guest: MapToGuest::Never,
            guest_account: "nobody".into(),
            log_level: 0,
            log_file: None,
            max_log_size_kib: 5000,
            control_socket: None,
            max_connections: 0,
            netbios_name: default_netbios_name(),
            workgroup: "WORKGROUP".into(),
            server_string: "smbx".into(),
            smb2_max_credits: 8192,
            smb2_max_read: 8 << 20,
            smb2_max_write: 8 << 20,
            smb2_max_trans: 8 << 20,
            ea_support: true,
            store_dos_attributes: true,
            hide_dot_files: false,
            hide_files: Vec::new(),
            acl_xattr_name: None,
            durable_handles: true,
            server_multi_channel_support: true,
            smb_direct: false,
            smb_direct_port: 5445,
            smb_direct_crc: false,
            smb_direct_large_fpdus: true,
            smb_direct_provider: SmbDirectProvider::Auto,
            smb_direct_poll: false,
            smb_direct_max_send_size: 8704,
            smb_direct_max_receive_size: 8704,
            smb_direct_max_fragmented_size: 1 << 20,
            smb_direct_mss: 0,
            metrics_listen: None,
            deadtime_secs: 10080 * 60,
            socket_options: String::new(),
            unauthenticated_timeout_secs: 60,
            max_open_files: 16384,
            oplock_break_timeout_ms: 35_000,
            restrict_anonymous: 0,
            kerberos_method: KerberosMethod::SecretsOnly,
            dedicated_keytab_file: None,
            realm: String::new(),
            username_map: None,
            read_only: true,
            guest_ok: false,
            browseable: true,
            case_sensitive: false,
            vfs_objects: Vec::new(),
            valid_users: Vec::new(),
            admin_users: Vec::new(),
        }
    }
}

/// The host name (first label), upper case, at most 15 characters.
fn default_netbios_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = host
        .trim()
        .split('.')
        .next()
        .unwrap_or("")
        .chars()
        .take(15)
        .collect::<String>()
        .to_uppercase();
    if name.is_empty() {
        "SMBX".into()
    } else {
        name
    }
}

/// One share section.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareConfig {
    /// Share name as written in the section header.
    pub name: String,
    /// `path` (required).
    pub path: PathBuf,
    /// `comment`.
    pub comment: String,
    /// `read only` (default yes; `writable`/`writeable`/`write ok` are inverse synonyms).
    pub read_only: bool,
    /// `guest ok` (`public`).
    pub guest_ok: bool,
    /// `valid users` (empty = everyone).
    pub valid_users: Vec<String>,
    /// `admin users`: users treated as administrators on this share (they may set
    /// any owner, and see share paths in share enumeration).
    pub admin_users: Vec<String>,
    /// `browseable` (`browsable`).
    pub browseable: bool,
    /// `server smb encrypt` set in this share; `None` = use [`Global::server_smb_encrypt`].
    pub smb_encrypt: Option<EncryptSetting>,
    /// `server signing` set in this share; `None` = use [`Global::server_signing`].
    pub server_signing: Option<SigningSetting>,
    /// `case sensitive` (`auto` = no).
    pub case_sensitive: bool,
    /// `ea support`.
    pub ea_support: bool,
    /// `store dos attributes`.
    pub store_dos_attributes: bool,
    /// `hide dot files`: names starting with '.' show FILE_ATTRIBUTE_HIDDEN.
    pub hide_dot_files: bool,
    /// `hide files`: names matching these patterns show FILE_ATTRIBUTE_HIDDEN.
    pub hide_files: Vec<String>,
    /// `acl_xattr:security_acl_name`: the xattr Samba's acl_xattr keeps NT ACLs in. A
    /// `user.` name is private to the server: the EA of that name (Samba maps EA `x`
    /// to xattr `user.x`) can be neither listed nor set.
    pub acl_xattr_name: Option<String>,
    /// `vfs objects` (recorded; only `acl_xattr` and `streams_xattr` have meaning).
    pub vfs_objects: Vec<String>,
    /// `durable handles`.
    pub durable_handles: bool,
}

impl ShareConfig {
    /// A share named `name` at `path` with the defaults from `global`.
    pub fn with_defaults(name: &str, path: PathBuf, global: &Global) -> ShareConfig {
        ShareConfig {
            name: name.to_string(),
            path,
            comment: String::new(),
            read_only: global.read_only,
            guest_ok: global.guest_ok,
            valid_users: global.valid_users.clone(),
            admin_users: global.admin_users.clone(),
            browseable: global.browseable,
            smb_encrypt: None,
            server_signing: None,
            case_sensitive: global.case_sensitive,
            ea_support: global.ea_support,
            store_dos_attributes: global.store_dos_attributes,
            hide_dot_files: global.hide_dot_files,
            hide_files: global.hide_files.clone(),
            acl_xattr_name: global.acl_xattr_name.clone(),
            vfs_objects: global.vfs_objects.clone(),
            durable_handles: global.durable_handles,
        }
    }

    /// The encryption setting in force for this share.
    pub fn effective_encrypt(&self, global: &Global) -> EncryptSetting {
        self.smb_encrypt.unwrap_or(global.server_smb_encrypt)
    }

    /// The signing setting in force for this share.
    pub fn effective_signing(&self, global: &Global) -> SigningSetting {
        self.server_signing.unwrap_or(global.server_signing)
    }
}

impl Config {
    /// Reads and parses `path` (relative includes resolve against its directory).
    pub fn parse_file(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: name.clone(),
            line: 0,
            message: format!("cannot read configuration: {e}"),
        })?;
        let mut items = Vec::new();
        lexer::lex(&text, &name, path.parent(), 0, &mut items)?;
        let mut config = build::build(items, &name)?;
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    /// Parses `text`; `name` is used as the file name in messages.
    /// Relative includes resolve against the current directory.
    pub fn parse_str(text: &str, name: &str) -> Result<Config, ConfigError> {
        let mut items = Vec::new();
        lexer::lex(text, name, None, 0, &mut items)?;
        build::build(items, name)
    }

    /// The share called `name` (case-insensitive).
    pub fn share(&self, name: &str) -> Option<&ShareConfig> {
        let name = name.to_lowercase();
        self.shares.iter().find(|s| s.name.to_lowercase() == name)
    }

    /// The effective configuration in smb.conf syntax, testparm-style: every
    /// option with its effective value. Parsing it gives back this `Config`
    /// (without warnings and source).
    pub fn to_smb_conf(&self) -> String {
        emit::emit(self)
    }
}
