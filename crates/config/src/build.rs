//! Applies lexed parameters to [`Global`] and [`ShareConfig`]: option names,
//! synonyms, value parsing, warnings and errors.

use std::path::PathBuf;

use crate::lexer::{normalize, Item, Loc};
use crate::values::*;
use crate::{Config, ConfigError, EncryptSetting, Global, MapToGuest, ShareConfig, SigningSetting};

/// A parsed option value, before it is applied to global or share settings.
enum Setting {
    // Server-wide only.
    Interfaces(Vec<crate::Interface>),
    BindInterfacesOnly(bool),
    SmbPorts(Vec<u16>),
    MinProtocol(smbx_wire::Dialect),
    MaxProtocol(smbx_wire::Dialect),
    PassdbBackend(PathBuf),
    MapToGuest(MapToGuest),
    GuestAccount(String),
    LogLevel(u32),
    LogFile(PathBuf),
    ControlSocket(PathBuf),
    MaxLogSize(u32),
    MaxConnections(u32),
    NetbiosName(String),
    Workgroup(String),
    ServerString(String),
    MaxCredits(u16),
    MaxRead(u32),
    MaxWrite(u32),
    MaxTrans(u32),
    MultiChannel(bool),
    SmbDirect(bool),
    SmbDirectPort(u16),
    SmbDirectCrc(bool),
    SmbDirectLargeFpdus(bool),
    SmbDirectProvider(crate::SmbDirectProvider),
    SmbDirectPoll(bool),
    SmbDirectMaxSend(u32),
    SmbDirectMaxReceive(u32),
    SmbDirectMaxFragmented(u32),
    SmbDirectMss(u32),
    MetricsListen(Option<std::net::SocketAddr>),
    Deadtime(u32),
    SocketOptions(String),
    UnauthTimeout(u32),
    MaxOpenFiles(u32),
    OplockBreakTimeout(u32),
    RestrictAnonymous(u8),
    KerberosMethod(crate::KerberosMethod),
    DedicatedKeytab(PathBuf),
    Realm(String),
    UsernameMap(PathBuf),
    // In [global]: server-wide value and share default. In a share: that share.
    Signing(SigningSetting),
    Encrypt(EncryptSetting),
    EaSupport(bool),
    StoreDos(bool),
    HideDotFiles(bool),
    HideFiles(Vec<String>),
    AclXattrName(String),
    Durable(bool),
    ReadOnly(bool),
    GuestOk(bool),
    Browseable(bool),
    CaseSensitive(bool),
    VfsObjects(Vec<String>),
    ValidUsers(Vec<String>),
    AdminUsers(Vec<String>),
    // Share only.
    Path(PathBuf),
    Comment(String),
    /// A Samba option smbx accepts and ignores, with no message.
    Silent,
    /// A Samba option smbx does not implement: warn and ignore.
    Unsupported,
    /// Not an option we know.
    Unknown,
}

/// Samba options commonly found in smb.conf files that smbx does not implement.
const UNSUPPORTED: &[&str] = &[
    "server role",
    "logging",
    "obey pam restrictions",
    "unix password sync",
    "passwd program",
    "passwd chat",
    "pam password change",
    "create mask",
    "create mode",
    "directory mask",
    "directory mode",
    "force user",
    "force group",
    "printable",
    "load printers",
    "printing",
    "printcap name",
    "disable spoolss",
    "dns proxy",
    "usershare allow guests",
    "panic action",
    "map archive",
    "map hidden",
    "map system",
    "os level",
    "wins support",
    "local master",
    "domain master",
    "preferred master",
    "kernel oplocks",
    "oplocks",
    "level2 oplocks",
    "oplock break wait time",
    "strict locking",
    "hosts allow",
    "hosts deny",
    "veto files",
    "inherit permissions",
    "inherit acls",
    "nt acl support",
    "server services",
    "smb1 unix extensions",
    "unix extensions",
    "follow symlinks",
    "wide links",
    "aio read size",
    "aio write size",
    "use sendfile",
    "min receivefile size",
    "server smb transports",
];

/// A Samba name list (`hide files`, `veto files`): `/pattern/pattern/`, patterns may
/// hold `*` and `?`.
fn parse_name_list(v: &str) -> Vec<String> {
    v.split('/')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// `vfs objects` that mean something to smbx.
const KNOWN_VFS: &[&str] = &["acl_xattr", "streams_xattr"];

fn bool_or_auto(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "auto" | "default" => Ok(false),
        _ => parse_bool(v).map_err(|a| format!("{a}, auto")),
    }
}

fn port(v: &str) -> Result<u16, String> {
    parse_u32(v, 1, 65535).map(|p| p as u16)
}

fn passdb(v: &str) -> Result<PathBuf, String> {
    const ACCEPTED: &str = "smbpasswd, smbpasswd:PATH (tdbsam and ldapsam are not supported)";
    let v = v.trim();
    let (backend, arg) = match v.split_once(':') {
        Some((b, a)) => (b.trim(), Some(a.trim())),
        None => (v, None),
    };
    if !backend.eq_ignore_ascii_case("smbpasswd") {
        return Err(format!(
            "passdb backend {backend:?} is not supported; accepted values: {ACCEPTED}"
        ));
    }
    match arg {
        Some(a) if !a.is_empty() => Ok(PathBuf::from(a)),
        _ => Ok(PathBuf::from(crate::DEFAULT_PASSDB_PATH)),
    }
}

/// Parses one option. `Err` holds the accepted values.
fn parse_setting(
    key: &str,
    v: &str,
    loc: &Loc,
    warnings: &mut Vec<String>,
) -> Result<Setting, String> {
    use Setting::*;
    Ok(match key {
        "interfaces" => Interfaces(crate::interfaces::parse_interfaces(v)?),
        "bindinterfacesonly" => BindInterfacesOnly(parse_bool(v)?),
        "smbports" => {
            let ports = parse_list(v)
                .iter()
                .map(|p| port(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| "one or more port numbers from 1 to 65535".to_string())?;
            if ports.is_empty() {
                return Err("one or more port numbers from 1 to 65535".into());
            }
            SmbPorts(ports)
        }
        "serverminprotocol" | "minprotocol" => {
            MinProtocol(parse_protocol(v, smbx_wire::Dialect::SMB2_0_2)?)
        }
        "servermaxprotocol" | "maxprotocol" | "protocol" => {
            MaxProtocol(parse_protocol(v, smbx_wire::Dialect::SMB3_1_1)?)
        }
        "passdbbackend" => PassdbBackend(passdb(v)?),
        "maptoguest" => MapToGuest(parse_map_to_guest(v)?),
        "guestaccount" => {
            if v.is_empty() || v.contains(':') {
                return Err("a user name".into());
            }
            GuestAccount(v.to_string())
        }
        "loglevel" | "debuglevel" => {
            let mut parts = v.split_whitespace();
            let first = parts.next().unwrap_or("");
            let level = parse_u32(first, 0, 10)?;
            if parts.next().is_some() {
                warnings.push(loc.warning(format!(
                    "log level {v:?}: per-class levels are not supported; using {level}"
                )));
            }
            LogLevel(level)
        }
        "logfile" => {
            if v.is_empty() {
                return Err("a file path".into());
            }
            LogFile(PathBuf::from(v))
        }
        "maxlogsize" => MaxLogSize(
            parse_u32(v, 0, u32::MAX / 1024).map_err(|a| format!("{a} (KiB; 0 = no limit)"))?,
        ),
        "maxconnections" => MaxConnections(parse_u32(v, 0, u32::MAX)?),
        "netbiosname" => {
            if v.is_empty() || v.chars().count() > 15 {
                return Err("a name of 1 to 15 characters".into());
            }
            NetbiosName(v.to_uppercase())
        }
        "workgroup" => {
            if v.is_empty() || v.chars().count() > 15 {
                return Err("a name of 1 to 15 characters".into());
            }
            Workgroup(v.to_uppercase())
        }
        "serverstring" => ServerString(v.to_string()),
        "smb2maxcredits" => MaxCredits(parse_u32(v, 1, 8192)? as u16),
        "smb2maxread" => MaxRead(parse_bytes(v, 65536, 16 << 20)?),
        "smb2maxwrite" => MaxWrite(parse_bytes(v, 65536, 16 << 20)?),
        "smb2maxtrans" => MaxTrans(parse_bytes(v, 65536, 16 << 20)?),
        "servermultichannelsupport" => MultiChannel(parse_bool(v)?),
        "smbdirect" => SmbDirect(parse_bool(v)?),
        "smbdirectport" => SmbDirectPort(port(v)?),
        "smbdirectcrc" => SmbDirectCrc(parse_bool(v)?),
        "smbdirectlargefpdus" => SmbDirectLargeFpdus(parse_bool(v)?),
        "smbdirectprovider" => SmbDirectProvider(crate::direct::parse_smb_direct_provider(v)?),
        "smbdirectpoll" => SmbDirectPoll(parse_bool(v)?),
        "smbdirectmaxsendsize" => SmbDirectMaxSend(parse_bytes(v, 128, 65536)?),
        "smbdirectmaxreceivesize" => SmbDirectMaxReceive(parse_bytes(v, 128, 65536)?),
        "smbdirectmaxfragmentedsize" => SmbDirectMaxFragmented(parse_bytes(v, 131_072, 16 << 20)?),
        "smbdirectmss" => match parse_u32(v, 0, 65536)? {
            n @ (0 | 536..) => SmbDirectMss(n),
            _ => return Err("0 (each connection's own MSS) or 536 to 65536".into()),
        },
        "metricslisten" => MetricsListen(parse_listen(v)?),
        "controlsocket" => {
            let p = PathBuf::from(v);
            if !p.is_absolute() || v.len() > 100 {
                return Err("an absolute path of at most 100 bytes (a Unix socket)".into());
            }
            ControlSocket(p)
        }
        "socketoptions" => SocketOptions(v.split_whitespace().collect::<Vec<_>>().join(" ")),
        "deadtime" => Deadtime(
            parse_u32(v, 0, u32::MAX / 60).map_err(|a| format!("{a} (minutes; 0 = never)"))? * 60,
        ),
        "unauthenticatedtimeout" => UnauthTimeout(parse_u32(v, 1, 3600)?),
        "maxopenfiles" => MaxOpenFiles(parse_u32(v, 1, u32::MAX)?),
        "oplockbreaktimeout" => OplockBreakTimeout(
            parse_u32(v, 1, 3_600_000).map_err(|a| format!("{a} (milliseconds)"))?,
        ),
        "restrictanonymous" => RestrictAnonymous(parse_u32(v, 0, 2)? as u8),
        "kerberosmethod" => KerberosMethod(crate::kerberos::parse_kerberos_method(v)?),
        "dedicatedkeytabfile" => {
            let p = v.strip_prefix("FILE:").unwrap_or(v);
            if !p.starts_with('/') {
                return Err("an absolute keytab path (FILE:/path or /path)".into());
            }
            DedicatedKeytab(PathBuf::from(p))
        }
        "realm" => {
            if v.contains(char::is_whitespace) || v.contains('@') {
                return Err("a Kerberos realm name (no spaces, no '@')".into());
            }
            Realm(v.to_uppercase())
        }
        "usernamemap" => UsernameMap(crate::kerberos::username_map_path(v)?),
        "serversigning" => Signing(parse_signing(v)?),
        "serversmbencrypt" | "smbencrypt" => Encrypt(parse_encrypt(v)?),
        "easupport" => EaSupport(parse_bool(v)?),
        "storedosattributes" => StoreDos(parse_bool(v)?),
        "hidedotfiles" => HideDotFiles(parse_bool(v)?),
        "hidefiles" => HideFiles(parse_name_list(v)),
        "aclxattr:securityaclname" => AclXattrName(v.to_string()),
        "durablehandles" => Durable(parse_bool(v)?),
        "readonly" => ReadOnly(parse_bool(v)?),
        "writeable" | "writable" | "writeok" => ReadOnly(!parse_bool(v)?),
        "guestok" | "public" => GuestOk(parse_bool(v)?),
        "browseable" | "browsable" => Browseable(parse_bool(v)?),
        "casesensitive" => CaseSensitive(bool_or_auto(v)?),
        "vfsobjects" | "vfsobject" => VfsObjects(parse_list(v)),
        "validusers" => ValidUsers(parse_list(v)),
        "adminusers" => AdminUsers(parse_list(v)),
        "path" | "directory" => {
            if v.is_empty() {
                return Err("a directory path".into());
            }
            Path(PathBuf::from(v))
        }
        "comment" => Comment(v.to_string()),
        "security" => match v.to_ascii_lowercase().as_str() {
            "user" | "auto" => Silent,
            _ => return Err("user (ads and domain security are not supported)".into()),
        },
        "encryptpasswords" => match parse_bool(v)? {
            true => Silent,
            false => return Err("yes (plain-text passwords are not supported)".into()),
        },
        k if UNSUPPORTED.iter().any(|u| normalize(u) == k) => Unsupported,
        _ => Unknown,
    })
}

fn invalid(loc: &Loc, name: &str, value: &str, accepted: String) -> ConfigError {
    let tail = if accepted.contains("accepted values") {
        accepted
    } else {
        format!("accepted values: {accepted}")
    };
    loc.error(format!(
        "invalid value {value:?} for option \"{name}\": {tail}"
    ))
}

fn warn_vfs(list: &[String], loc: &Loc, warnings: &mut Vec<String>) {
    for v in list {
        if !KNOWN_VFS.contains(&v.as_str()) {
            warnings.push(loc.warning(format!(
                "vfs object {v:?} is not implemented by smbx; recorded but ignored"
            )));
        }
    }
}

/// Applies a setting found in `[global]`.
fn apply_global(
    g: &mut Global,
    s: Setting,
    name: &str,
    loc: &Loc,
    w: &mut Vec<String>,
    proto_loc: &mut Option<Loc>,
) {
    use Setting::*;
    match s {
        Interfaces(v) => g.interfaces = v,
        BindInterfacesOnly(v) => g.bind_interfaces_only = v,
        SmbPorts(v) => g.smb_ports = v,
        MinProtocol(v) => {
            g.server_min_protocol = v;
            *proto_loc = Some(loc.clone());
        }
        MaxProtocol(v) => {
            g.server_max_protocol = v;
            *proto_loc = Some(loc.clone());
        }
        PassdbBackend(v) => g.passdb_backend = v,
        MapToGuest(v) => g.map_to_guest = v,
        GuestAccount(v) => g.guest_account = v,
        LogLevel(v) => g.log_level = v,
        LogFile(v) => g.log_file = Some(v),
        ControlSocket(v) => g.control_socket = Some(v),
        MaxLogSize(v) => g.max_log_size_kib = v,
        MaxConnections(v) => g.max_connections = v,
        NetbiosName(v) => g.netbios_name = v,
        Workgroup(v) => g.workgroup = v,
        ServerString(v) => g.server_string = v,
        MaxCredits(v) => g.smb2_max_credits = v,
        MaxRead(v) => g.smb2_max_read = v,
        MaxWrite(v) => g.smb2_max_write = v,
        MaxTrans(v) => g.smb2_max_trans = v,
        MultiChannel(v) => g.server_multi_channel_support = v,
        SmbDirect(v) => g.smb_direct = v,
        SmbDirectPort(v) => g.smb_direct_port = v,
        SmbDirectCrc(v) => g.smb_direct_crc = v,
        SmbDirectLargeFpdus(v) => g.smb_direct_large_fpdus = v,
        SmbDirectProvider(v) => g.smb_direct_provider = v,
        SmbDirectPoll(v) => g.smb_direct_poll = v,
        SmbDirectMaxSend(v) => g.smb_direct_max_send_size = v,
        SmbDirectMaxReceive(v) => g.smb_direct_max_receive_size = v,
        SmbDirectMaxFragmented(v) => g.smb_direct_max_fragmented_size = v,
        SmbDirectMss(v) => g.smb_direct_mss = v,
        MetricsListen(v) => g.metrics_listen = v,
        Deadtime(v) => g.deadtime_secs = v,
        SocketOptions(v) => g.socket_options = v,
        UnauthTimeout(v) => g.unauthenticated_timeout_secs = v,
        MaxOpenFiles(v) => g.max_open_files = v,
        OplockBreakTimeout(v) => g.oplock_break_timeout_ms = v,
        RestrictAnonymous(v) => g.restrict_anonymous = v,
        KerberosMethod(v) => g.kerberos_method = v,
        DedicatedKeytab(v) => g.dedicated_keytab_file = Some(v),
        Realm(v) => g.realm = v,
        UsernameMap(v) => g.username_map = Some(v),
        Signing(v) => g.server_signing = v,
        Encrypt(v) => g.server_smb_encrypt = v,
        EaSupport(v) => g.ea_support = v,
        StoreDos(v) => g.store_dos_attributes = v,
        HideDotFiles(v) => g.hide_dot_files = v,
        HideFiles(v) => g.hide_files = v,
        AclXattrName(v) => g.acl_xattr_name = Some(v),
        Durable(v) => g.durable_handles = v,
        ReadOnly(v) => g.read_only = v,
        GuestOk(v) => g.guest_ok = v,
        Browseable(v) => g.browseable = v,
        CaseSensitive(v) => g.case_sensitive = v,
        VfsObjects(v) => {
            warn_vfs(&v, loc, w);
            g.vfs_objects = v;
        }
        ValidUsers(v) => g.valid_users = v,
        AdminUsers(v) => g.admin_users = v,
        Path(_) | Comment(_) => w.push(loc.warning(format!(
            "share option \"{name}\" has no meaning in [global]; ignored"
        ))),
        Silent => {}
        Unsupported => w.push(loc.warning(format!(
            "option \"{name}\" is not supported by smbx; ignored"
        ))),
        Unknown => w.push(loc.warning(format!("unknown option \"{name}\"; ignored"))),
    }
}

/// Applies a setting found in a share section.
fn apply_share(sh: &mut ShareConfig, s: Setting, name: &str, loc: &Loc, w: &mut Vec<String>) {
    use Setting::*;
    match s {
        Signing(v) => sh.server_signing = Some(v),
        Encrypt(v) => sh.smb_encrypt = Some(v),
        EaSupport(v) => sh.ea_support = v,
        StoreDos(v) => sh.store_dos_attributes = v,
        HideDotFiles(v) => sh.hide_dot_files = v,
        HideFiles(v) => sh.hide_files = v,
        AclXattrName(v) => sh.acl_xattr_name = Some(v),
        Durable(v) => sh.durable_handles = v,
        ReadOnly(v) => sh.read_only = v,
        GuestOk(v) => sh.guest_ok = v,
        Browseable(v) => sh.browseable = v,
        CaseSensitive(v) => sh.case_sensitive = v,
        VfsObjects(v) => {
            warn_vfs(&v, loc, w);
            sh.vfs_objects = v;
        }
        ValidUsers(v) => sh.valid_users = v,
        AdminUsers(v) => sh.admin_users = v,
        Path(v) => sh.path = v,
        Comment(v) => sh.comment = v,
        Silent => {}
        Unsupported => w.push(loc.warning(format!(
            "option \"{name}\" is not supported by smbx; ignored"
        ))),
        Unknown => w.push(loc.warning(format!("unknown option \"{name}\"; ignored"))),
        _ => w.push(loc.warning(format!(
            "global option \"{name}\" in share [{}] ignored; set it in [global]",
            sh.name
        ))),
    }
}

/// Characters Samba does not allow in share names.
const BAD_SHARE_CHARS: &str = "%<>*?|/\\+=;:\",[]";

struct RawShare {
    name: String,
    loc: Loc,
    params: Vec<(String, String, Loc)>,
}

enum Current {
    Global,
    Share(usize),
    Ignored,
}

/// Builds a [`Config`] from lexed items.
pub fn build(items: Vec<Item>, _name: &str) -> Result<Config, ConfigError> {
    let mut warnings = Vec::new();
    let mut global_params = Vec::new();
    let mut shares: Vec<RawShare> = Vec::new();
    let mut cur = Current::Global;
    for item in items {
        match item {
            Item::Section { name, loc } => {
                let lower = name.to_lowercase();
                cur = match lower.as_str() {
                    "global" => Current::Global,
                    "homes" | "printers" | "print$" | "ipc$" => {
                        warnings.push(loc.warning(format!(
                            "section [{name}] is not supported by smbx; ignored"
                        )));
                        Current::Ignored
                    }
                    _ => {
                        if name.chars().count() > 80
                            || name
                                .chars()
                                .any(|c| c.is_control() || BAD_SHARE_CHARS.contains(c))
                        {
                            return Err(loc.error(format!(
                                "invalid share name [{name}]: at most 80 characters, none of {BAD_SHARE_CHARS}"
                            )));
                        }
                        match shares.iter().position(|s| s.name.to_lowercase() == lower) {
                            Some(i) => Current::Share(i),
                            None => {
                                shares.push(RawShare {
                                    name,
                                    loc,
                                    params: Vec::new(),
                                });
                                Current::Share(shares.len() - 1)
                            }
                        }
                    }
                };
            }
            Item::Param { name, value, loc } => match cur {
                Current::Global => global_params.push((name, value, loc)),
                Current::Share(i) => shares[i].params.push((name, value, loc)),
                Current::Ignored => {}
            },
        }
    }

    let mut global = Global::default();
    let mut proto_loc = None;
    for (name, value, loc) in &global_params {
        let key = normalize(name);
        let s = parse_setting(&key, value, loc, &mut warnings)
            .map_err(|a| invalid(loc, name, value, a))?;
        apply_global(&mut global, s, name, loc, &mut warnings, &mut proto_loc);
    }
    if global.kerberos_method == crate::KerberosMethod::DedicatedKeytab
        && global.dedicated_keytab_file.is_none()
    {
        let loc = global_params
            .iter()
            .rev()
            .find(|(n, _, _)| normalize(n) == "kerberosmethod")
            .map(|(_, _, l)| l.clone())
            .unwrap_or(Loc {
                file: _name.to_string(),
                line: 0,
            });
        return Err(loc.error(
            "kerberos method = dedicated keytab needs \"dedicated keytab file = /path/to/keytab\""
                .to_string(),
        ));
    }
    if global.server_min_protocol > global.server_max_protocol {
        let loc = proto_loc.unwrap_or(Loc {
            file: _name.to_string(),
            line: 0,
        });
        return Err(loc.error(format!(
            "server min protocol ({}) is higher than server max protocol ({})",
            fmt_protocol(global.server_min_protocol),
            fmt_protocol(global.server_max_protocol)
        )));
    }

    let mut out = Vec::with_capacity(shares.len());
    for raw in shares {
        let mut share = ShareConfig::with_defaults(&raw.name, PathBuf::new(), &global);
        for (name, value, loc) in &raw.params {
            let key = normalize(name);
            let s = parse_setting(&key, value, loc, &mut warnings)
                .map_err(|a| invalid(loc, name, value, a))?;
            apply_share(&mut share, s, name, loc, &mut warnings);
        }
        if share.path.as_os_str().is_empty() {
            return Err(raw.loc.error(format!(
                "share [{}] has no \"path\"; add \"path = /some/directory\"",
                raw.name
            )));
        }
        out.push(share);
    }
    Ok(Config {
        global,
        shares: out,
        warnings,
        source: None,
    })
}
