use std::path::{Path, PathBuf};

use smbx_config::{Config, EncryptSetting, MapToGuest, SigningSetting};
use smbx_wire::Dialect;

const REALISTIC: &str = r#"
# smb.conf for a small office
; Samba-style comment
[global]
   workgroup = OFFICE
   server string = Files %h
   netbios name = filesrv
   security = user
   server role = standalone server
   interfaces = lo eth0 \
                192.168.1.10/24
   bind interfaces only = yes
   smb ports = 445 4445
   Server_Min_Protocol = SMB3
   server max protocol = SMB3_11
   server signing = mandatory
   server smb encrypt = desired
   passdb backend = smbpasswd:/srv/smbx/smbpasswd
   map to guest = Bad User
   guest account = guest
   log level = 2
   max connections = 100
   smb2 max credits = 1024
   smb2 max read = 4M
   smb2 max write = 1048576
   server multi channel support = no
   smb direct = yes
   deadtime = 15
   socket options = SO_KEEPALIVE   TCP_KEEPIDLE=30	TCP_USER_TIMEOUT=20000
   read only = no
   vfs objects = acl_xattr streams_xattr
   frobnicate = 7

[homes]
   browseable = no

[Public]
   comment = Public files
   path = /srv/public
   guest ok = yes
   writable = no
   case sensitive = auto

[projects]
   path = /srv/projects
   valid users = alice, bob "carol smith" @staff
   browsable = no
   server smb encrypt = required
   ea support = no
   store dos attributes = False
   durable handles = 0
"#;

#[test]
fn parses_realistic_config() {
    let c = Config::parse_str(REALISTIC, "office.conf").unwrap();
    let g = &c.global;
    assert_eq!(g.workgroup, "OFFICE");
    assert_eq!(g.netbios_name, "FILESRV");
    let interfaces: Vec<String> = g.interfaces.iter().map(|i| i.to_string()).collect();
    assert_eq!(interfaces, vec!["lo", "eth0", "192.168.1.10/24"]);
    assert!(g.bind_interfaces_only);
    assert_eq!(g.smb_ports, vec![445, 4445]);
    assert_eq!(g.server_min_protocol, Dialect::SMB3_1_1);
    assert_eq!(g.server_max_protocol, Dialect::SMB3_1_1);
    assert_eq!(g.server_signing, SigningSetting::Mandatory);
    assert_eq!(g.server_smb_encrypt, EncryptSetting::Desired);
    assert_eq!(g.passdb_backend, PathBuf::from("/srv/smbx/smbpasswd"));
    assert_eq!(g.map_to_guest, MapToGuest::BadUser);
    assert_eq!(g.guest_account, "guest");
    assert_eq!(g.log_level, 2);
    assert_eq!(g.max_connections, 100);
    assert_eq!(g.smb2_max_credits, 1024);
    assert_eq!(g.smb2_max_read, 4 << 20);
    assert_eq!(g.smb2_max_write, 1 << 20);
    assert_eq!(g.smb2_max_trans, 8 << 20);
    assert!(!g.server_multi_channel_support);
    assert!(g.smb_direct);
    assert_eq!(g.smb_direct_port, 5445);
    assert_eq!(g.deadtime_secs, 15 * 60);
    assert_eq!(
        g.socket_options,
        "SO_KEEPALIVE TCP_KEEPIDLE=30 TCP_USER_TIMEOUT=20000"
    );

    assert_eq!(c.shares.len(), 2, "[homes] is ignored");
    let public = c.share("public").expect("case-insensitive lookup");
    assert_eq!(public.name, "Public");
    assert_eq!(public.path, Path::new("/srv/public"));
    assert_eq!(public.comment, "Public files");
    assert!(public.guest_ok);
    assert!(
        public.read_only,
        "writable = no overrides global read only = no"
    );
    assert!(!public.case_sensitive);
    assert!(public.browseable);
    assert_eq!(public.vfs_objects, vec!["acl_xattr", "streams_xattr"]);
    assert_eq!(public.smb_encrypt, None);
    assert_eq!(public.effective_encrypt(g), EncryptSetting::Desired);

    let p = c.share("PROJECTS").unwrap();
    assert!(!p.read_only, "global read only = no is the default");
    assert_eq!(p.valid_users, vec!["alice", "bob", "carol smith", "@staff"]);
    assert!(!p.browseable);
    assert_eq!(p.smb_encrypt, Some(EncryptSetting::Required));
    assert!(!p.ea_support && !p.store_dos_attributes && !p.durable_handles);

    let joined = c.warnings.join("\n");
    assert!(
        joined.contains("office.conf:32: unknown option \"frobnicate\""),
        "{joined}"
    );
    assert!(
        joined.contains("office.conf:34:") && joined.contains("[homes]"),
        "{joined}"
    );
    assert!(
        joined.contains("office.conf:9:") && joined.contains("server role"),
        "{joined}"
    );
    assert!(c.share("homes").is_none());
}

#[test]
fn defaults() {
    let c = Config::parse_str("[s]\npath = /x\n", "d.conf").unwrap();
    let g = &c.global;
    assert_eq!(g.smb_ports, vec![445]);
    assert_eq!(g.server_min_protocol, Dialect::SMB2_0_2);
    assert_eq!(g.server_max_protocol, Dialect::SMB3_1_1);
    assert_eq!(g.workgroup, "WORKGROUP");
    assert_eq!(g.smb2_max_credits, 8192);
    assert_eq!(g.max_open_files, 16384);
    assert_eq!(g.restrict_anonymous, 0);
    assert!(g.admin_users.is_empty());
    assert_eq!(
        (g.smb2_max_read, g.smb2_max_write, g.smb2_max_trans),
        (8 << 20, 8 << 20, 8 << 20)
    );
    assert_eq!(g.passdb_backend, PathBuf::from("/var/lib/smbx/smbpasswd"));
    assert!(!g.netbios_name.is_empty());
    assert_eq!(g.netbios_name, g.netbios_name.to_uppercase());
    let s = &c.shares[0];
    assert!(s.read_only && !s.guest_ok && s.browseable && !s.case_sensitive);
    assert!(c.warnings.is_empty());
}

#[test]
fn protocol_names_as_samba() {
    let c = Config::parse_str(
        "[global]\nserver min protocol = SMB2\nserver max protocol = SMB3_02\n",
        "p",
    )
    .unwrap();
    assert_eq!(c.global.server_min_protocol, Dialect::SMB2_1);
    assert_eq!(c.global.server_max_protocol, Dialect::SMB3_0_2);
    let c = Config::parse_str("[global]\nmax protocol = smb3_00\n", "p").unwrap();
    assert_eq!(c.global.server_max_protocol, Dialect::SMB3_0);
}

fn err(text: &str) -> smbx_config::ConfigError {
    Config::parse_str(text, "bad.conf").unwrap_err()
}

#[test]
fn errors_name_file_line_option_and_accepted_values() {
    let e = err("[global]\n\nserver signing = sometimes\n");
    assert_eq!((e.file.as_str(), e.line), ("bad.conf", 3));
    let s = e.to_string();
    assert!(s.starts_with("bad.conf:3: "), "{s}");
    assert!(
        s.contains("server signing") && s.contains("mandatory") && s.contains("sometimes"),
        "{s}"
    );

    let e = err("[global]\nserver min protocol = NT1\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("SMB1 is not supported"), "{e}");

    let e = err("[global]\npassdb backend = tdbsam\n");
    assert_eq!(e.line, 2);
    assert!(
        e.message.contains("tdbsam") && e.message.contains("smbpasswd"),
        "{e}"
    );

    let e = err("[a]\npath = /a\nread only = perhaps\n");
    assert_eq!(e.line, 3);
    assert!(
        e.message.contains("read only") && e.message.contains("yes, no"),
        "{e}"
    );

    let e = err("[global]\nsmb ports = 445 99999\n");
    assert_eq!(e.line, 2);

    let e = err("[global]\nsmb2 max read = lots\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("smb2 max read"), "{e}");

    let e = err("[global]\nmap to guest = bad password\n");
    assert_eq!(e.line, 2);

    let e = err("[global]\nserver smb encrypt = maybe\n");
    assert!(e.message.contains("if_required"), "{e}");

    let e = err("[global]\nlog level = loud\n");
    assert_eq!(e.line, 2);

    let e = err("[global]\nserver min protocol = SMB3_11\nserver max protocol = SMB2_02\n");
    assert_eq!(e.line, 3);
    assert!(e.message.contains("higher"), "{e}");
}

#[test]
fn share_without_path_names_the_header() {
    let e = err("[global]\nworkgroup = X\n\n[data]\ncomment = no path\n");
    assert_eq!(e.line, 4);
    assert!(
        e.message.contains("[data]") && e.message.contains("path"),
        "{e}"
    );
}

#[test]
fn syntax_errors_name_the_line() {
    let e = err("[global]\nworkgroup = X\nthis is not an option\n");
    assert_eq!(e.line, 3);
    let e = err("[global\n");
    assert_eq!(e.line, 1);
    let e = err("[bad/name]\npath = /x\n");
    assert_eq!(e.line, 1);
}

#[test]
fn round_trip() {
    let c = Config::parse_str(REALISTIC, "office.conf").unwrap();
    let text = c.to_smb_conf();
    let c2 = Config::parse_str(&text, "dump.conf").unwrap();
    assert!(c2.warnings.is_empty(), "{:?}\n{text}", c2.warnings);
    let mut c1 = c.clone();
    c1.warnings.clear();
    assert_eq!(c1, c2, "{text}");
    // and the dump is stable
    assert_eq!(c2.to_smb_conf(), text);
}

#[test]
fn round_trip_defaults() {
    let c = Config::parse_str("[x]\npath=/x\nserver signing = disabled\n", "d").unwrap();
    let c2 = Config::parse_str(&c.to_smb_conf(), "d2").unwrap();
    assert_eq!(c, c2);
    assert_eq!(c2.shares[0].server_signing, Some(SigningSetting::Disabled));
}

#[test]
fn includes_and_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("shares.conf"),
        "[inc]\npath = /inc\nbogus = 1\n",
    )
    .unwrap();
    let main = dir.path().join("smb.conf");
    std::fs::write(&main, "[global]\nworkgroup = W\ninclude = shares.conf\n").unwrap();
    let c = Config::parse_file(&main).unwrap();
    assert_eq!(c.source.as_deref(), Some(main.as_path()));
    assert_eq!(c.share("inc").unwrap().path, Path::new("/inc"));
    assert!(
        c.warnings.iter().any(|w| w.contains("shares.conf:3:")),
        "{:?}",
        c.warnings
    );

    let looped = dir.path().join("loop.conf");
    std::fs::write(&looped, "include = loop.conf\n").unwrap();
    let e = Config::parse_file(&looped).unwrap_err();
    assert!(e.message.contains("nesting"), "{e}");
    assert_eq!(e.line, 1);

    let missing = dir.path().join("m.conf");
    std::fs::write(&missing, "\n[global]\ninclude = nope.conf\n").unwrap();
    let e = Config::parse_file(&missing).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.file.ends_with("m.conf"));
}

#[test]
fn unreadable_file_is_an_error() {
    let e = Config::parse_file(Path::new("/nonexistent/smb.conf")).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/smb.conf: "), "{e}");
}

#[test]
fn duplicate_sections_merge() {
    let c =
        Config::parse_str("[a]\npath=/a\n[global]\nworkgroup=W\n[A]\ncomment=x\n", "m").unwrap();
    assert_eq!(c.shares.len(), 1);
    assert_eq!(c.shares[0].comment, "x");
    assert_eq!(c.global.workgroup, "W");
}

#[test]
fn global_option_in_share_warns() {
    let c = Config::parse_str("[a]\npath=/a\nworkgroup = W\nvfs objects = fruit\n", "w").unwrap();
    assert!(
        c.warnings.iter().any(|w| w.starts_with("w:3:")),
        "{:?}",
        c.warnings
    );
    assert!(c
        .warnings
        .iter()
        .any(|w| w.starts_with("w:4:") && w.contains("fruit")));
    assert_eq!(c.shares[0].vfs_objects, vec!["fruit"]);
}

#[test]
fn hide_files_and_dot_files() {
    let c = Config::parse_str(
        "[global]\n hide dot files = yes\n[a]\n path = /a\n hide files = /hidefile/*.tmp/ /x?y/\n[b]\n path = /b\n hide dot files = no\n",
        "t.conf",
    )
    .unwrap();
    let a = c.share("a").unwrap();
    assert!(a.hide_dot_files);
    assert_eq!(a.hide_files, vec!["hidefile", "*.tmp", "x?y"]);
    let b = c.share("b").unwrap();
    assert!(!b.hide_dot_files);
    assert!(b.hide_files.is_empty());
    assert_eq!(a.acl_xattr_name, None);
    let c = Config::parse_str(
        "[global]\n acl_xattr:security_acl_name = user.hackme\n[a]\n path = /a\n",
        "t.conf",
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        c.share("a").unwrap().acl_xattr_name.as_deref(),
        Some("user.hackme")
    );
}

#[test]
fn smb_direct_crc_defaults_off_and_can_be_turned_on() {
    let c = Config::parse_str("[global]\n smb direct = yes\n", "a.conf").unwrap();
    assert!(!c.global.smb_direct_crc);
    let c = Config::parse_str("[global]\n smb direct crc = yes\n", "b.conf").unwrap();
    assert!(c.global.smb_direct_crc);
}

#[test]
fn smb_direct_large_fpdus_default_on_and_can_be_turned_off() {
    let c = Config::parse_str("[global]\n smb direct = yes\n", "a.conf").unwrap();
    assert!(c.global.smb_direct_large_fpdus);
    let c = Config::parse_str("[global]\n smb direct large fpdus = no\n", "b.conf").unwrap();
    assert!(!c.global.smb_direct_large_fpdus);
    assert!(Config::parse_str("[global]\n smb direct large fpdus = huge\n", "c.conf").is_err());
}

#[test]
fn smb_direct_poll_defaults_off_and_can_be_turned_on() {
    let c = Config::parse_str("[global]\n smb direct = yes\n", "a.conf").unwrap();
    assert!(!c.global.smb_direct_poll);
    let c = Config::parse_str("[global]\n smb direct poll = yes\n", "b.conf").unwrap();
    assert!(c.global.smb_direct_poll);
    assert!(Config::parse_str("[global]\n smb direct poll = often\n", "c.conf").is_err());
}

#[test]
fn smb_direct_sizes_default_and_bounds() {
    let g = Config::parse_str("[global]\n smb direct = yes\n", "a.conf")
        .unwrap()
        .global;
    assert_eq!(
        (
            g.smb_direct_max_send_size,
            g.smb_direct_max_receive_size,
            g.smb_direct_max_fragmented_size,
            g.smb_direct_mss
        ),
        (8704, 8704, 1 << 20, 0)
    );
    let g = Config::parse_str(
        "[global]\n smb direct max send size = 1364\n smb direct max receive size = 4K\n \
         smb direct max fragmented size = 2M\n smb direct mss = 1448\n",
        "b.conf",
    )
    .unwrap()
    .global;
    assert_eq!(
        (
            g.smb_direct_max_send_size,
            g.smb_direct_max_receive_size,
            g.smb_direct_max_fragmented_size,
            g.smb_direct_mss
        ),
        (1364, 4096, 2 << 20, 1448)
    );
    for bad in [
        "smb direct max send size = 127",
        "smb direct max send size = 65537",
        "smb direct max receive size = 100K",
        "smb direct max fragmented size = 131071",
        "smb direct max fragmented size = 17M",
        "smb direct mss = 535",
        "smb direct mss = 65537",
    ] {
        let e = Config::parse_str(&format!("[global]\n{bad}\n"), "c.conf").unwrap_err();
        assert_eq!(e.line, 2, "{bad}");
    }
}

#[test]
fn hardening_options() {
    let c = Config::parse_str(
        "[global]\nrestrict anonymous = 2\nmax open files = 100\nadmin users = root\n\
         [s]\npath = /x\nadmin users = alice\n[t]\npath = /y\n",
        "h.conf",
    )
    .unwrap();
    assert_eq!(c.global.restrict_anonymous, 2);
    assert_eq!(c.global.max_open_files, 100);
    assert_eq!(c.share("s").unwrap().admin_users, vec!["alice"]);
    assert_eq!(c.share("t").unwrap().admin_users, vec!["root"]);
    let e = Config::parse_str("[global]\nrestrict anonymous = 3\n", "h.conf").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("restrict anonymous"), "{}", e.message);
    let text = c.to_smb_conf();
    assert!(text.contains("restrict anonymous = 2"), "{text}");
    assert!(text.contains("max open files = 100"), "{text}");
}

#[test]
fn metrics_listen_is_off_by_default_and_takes_an_address() {
    let c = Config::parse_str("[global]\n smb ports = 445\n", "a.conf").unwrap();
    assert_eq!(c.global.metrics_listen, None);
    let c = Config::parse_str("[global]\n metrics listen = 127.0.0.1:9445\n", "b.conf").unwrap();
    assert_eq!(
        c.global.metrics_listen,
        Some("127.0.0.1:9445".parse().unwrap())
    );
    let again = Config::parse_str(&c.to_smb_conf(), "c.conf").unwrap();
    assert_eq!(again.global.metrics_listen, c.global.metrics_listen);
    let c = Config::parse_str("[global]\n metrics_listen = [::1]:9\n", "d.conf").unwrap();
    assert_eq!(c.global.metrics_listen, Some("[::1]:9".parse().unwrap()));
    let c = Config::parse_str("[global]\n metrics listen = no\n", "e.conf").unwrap();
    assert_eq!(c.global.metrics_listen, None);
    let e = Config::parse_str("[global]\n\n metrics listen = localhost\n", "f.conf").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("f.conf", 3));
    assert!(e.message.contains("metrics listen"), "{e}");
}

#[test]
fn log_file_and_max_log_size() {
    let c = Config::parse_str("[global]\n smb ports = 445\n", "a.conf").unwrap();
    assert_eq!(c.global.log_file, None);
    assert_eq!(c.global.max_log_size_kib, 5000);
    let c = Config::parse_str(
        "[global]\n log file = /var/log/smbx/smbx.log\n max log size = 1000\n",
        "b.conf",
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        c.global.log_file.as_deref(),
        Some(std::path::Path::new("/var/log/smbx/smbx.log"))
    );
    assert_eq!(c.global.max_log_size_kib, 1000);
    let again = Config::parse_str(&c.to_smb_conf(), "c.conf").unwrap();
    assert_eq!(again.global.log_file, c.global.log_file);
    assert_eq!(again.global.max_log_size_kib, 1000);
    let c = Config::parse_str("[global]\n max log size = 0\n", "d.conf").unwrap();
    assert_eq!(c.global.max_log_size_kib, 0);
    let e = Config::parse_str("[global]\n\n max log size = big\n", "e.conf").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("e.conf", 3));
    assert!(e.message.contains("max log size"), "{e}");
}

#[test]
fn control_socket() {
    let c = Config::parse_str("[global]\n smb ports = 445\n", "a.conf").unwrap();
    assert_eq!(c.global.control_socket, None);
    let c = Config::parse_str("[global]\n control socket = /run/x/smbx.sock\n", "b.conf").unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        c.global.control_socket.as_deref(),
        Some(std::path::Path::new("/run/x/smbx.sock"))
    );
    let again = Config::parse_str(&c.to_smb_conf(), "c.conf").unwrap();
    assert_eq!(again.global.control_socket, c.global.control_socket);
    let e =
        Config::parse_str("[global]\n\n control socket = run/smbx.sock\n", "d.conf").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("d.conf", 3));
    assert!(e.message.contains("control socket"), "{e}");
}

#[test]
fn oplock_break_timeout() {
    let c = Config::parse_str("[global]\n smb ports = 445\n", "a.conf").unwrap();
    assert_eq!(c.global.oplock_break_timeout_ms, 35_000);
    let c = Config::parse_str("[global]\n oplock break timeout = 1500\n", "b.conf").unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.global.oplock_break_timeout_ms, 1500);
    assert!(c.to_smb_conf().contains("oplock break timeout = 1500"));
    let again = Config::parse_str(&c.to_smb_conf(), "c.conf").unwrap();
    assert_eq!(again.global, c.global);
    let e = Config::parse_str("[global]\n\n oplock break timeout = 0\n", "d.conf").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("d.conf", 3));
    assert!(e.message.contains("milliseconds"), "{e}");
    // Samba's option of a similar name means something else: warned, not taken.
    let c = Config::parse_str("[global]\n oplock break wait time = 10\n", "e.conf").unwrap();
    assert_eq!(c.global.oplock_break_timeout_ms, 35_000);
    assert!(
        c.warnings.iter().any(|w| w.contains("not supported")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn kerberos_options() {
    use smbx_config::KerberosMethod;
    let c = Config::parse_str("[global]\n smb ports = 445\n", "a.conf").unwrap();
    assert_eq!(c.global.kerberos_method, KerberosMethod::SecretsOnly);
    assert!(!c.global.kerberos_method.enabled());
    let text = "[global]\n kerberos method = dedicated keytab\n dedicated keytab file = FILE:/etc/smbx/smbx.keytab\n realm = example.test\n username map = /etc/smbx/users.map\n";
    let c = Config::parse_str(text, "b.conf").unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let g = &c.global;
    assert_eq!(g.kerberos_method, KerberosMethod::DedicatedKeytab);
    assert_eq!(
        g.dedicated_keytab_file.as_deref(),
        Some(std::path::Path::new("/etc/smbx/smbx.keytab"))
    );
    assert_eq!(g.realm, "EXAMPLE.TEST");
    assert_eq!(
        g.username_map.as_deref(),
        Some(std::path::Path::new("/etc/smbx/users.map"))
    );
    let again = Config::parse_str(&c.to_smb_conf(), "c.conf").unwrap();
    assert_eq!(again.global, c.global);
    // A dedicated keytab without its file is refused at the method's line.
    let e = Config::parse_str(
        "[global]\n\n kerberos method = dedicated keytab\n",
        "d.conf",
    )
    .unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("d.conf", 3));
    assert!(e.message.contains("dedicated keytab file"), "{e}");
    let e = Config::parse_str("[global]\n kerberos method = magic\n", "e.conf").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("dedicated keytab"), "{e}");
    let e = Config::parse_str(
        "[global]\n dedicated keytab file = relative.keytab\n",
        "f.conf",
    )
    .unwrap_err();
    assert_eq!(e.line, 2);
}
