//! Writes a [`Config`] back as smb.conf text with every effective value.

use std::fmt::Write;

use crate::values::*;
use crate::Config;

/// testparm-style dump: `[global]` first, then each share; every option.
pub fn emit(c: &Config) -> String {
    let g = &c.global;
    let mut o = String::new();
    let kv = |o: &mut String, k: &str, v: &str| {
        let _ = writeln!(o, "\t{k} = {v}");
    };
    o.push_str("# Global parameters\n[global]\n");
    kv(
        &mut o,
        "bind interfaces only",
        fmt_bool(g.bind_interfaces_only),
    );
    if let Some(p) = &g.control_socket {
        kv(&mut o, "control socket", &p.display().to_string());
    }
    kv(&mut o, "deadtime", &(g.deadtime_secs / 60).to_string());
    kv(&mut o, "guest account", &g.guest_account);
    kv(
        &mut o,
        "interfaces",
        &crate::interfaces::fmt_interfaces(&g.interfaces),
    );
    if let Some(f) = &g.log_file {
        kv(&mut o, "log file", &f.display().to_string());
    }
    if let Some(p) = &g.dedicated_keytab_file {
        kv(&mut o, "dedicated keytab file", &p.display().to_string());
    }
    kv(
        &mut o,
        "kerberos method",
        crate::kerberos::fmt_kerberos_method(g.kerberos_method),
    );
    kv(&mut o, "log level", &g.log_level.to_string());
    kv(&mut o, "map to guest", fmt_map_to_guest(g.map_to_guest));
    kv(&mut o, "max connections", &g.max_connections.to_string());
    kv(&mut o, "max log size", &g.max_log_size_kib.to_string());
    kv(&mut o, "max open files", &g.max_open_files.to_string());
    if let Some(a) = g.metrics_listen {
        kv(&mut o, "metrics listen", &a.to_string());
    }
    kv(&mut o, "netbios name", &g.netbios_name);
    kv(
        &mut o,
        "oplock break timeout",
        &g.oplock_break_timeout_ms.to_string(),
    );
    kv(
        &mut o,
        "passdb backend",
        &format!("smbpasswd:{}", g.passdb_backend.display()),
    );
    kv(
        &mut o,
        "server max protocol",
        &fmt_protocol(g.server_max_protocol),
    );
    kv(
        &mut o,
        "server min protocol",
        &fmt_protocol(g.server_min_protocol),
    );
    kv(
        &mut o,
        "server multi channel support",
        fmt_bool(g.server_multi_channel_support),
    );
    kv(
        &mut o,
        "restrict anonymous",
        &g.restrict_anonymous.to_string(),
    );
    if !g.realm.is_empty() {
        kv(&mut o, "realm", &g.realm);
    }
    kv(&mut o, "server signing", fmt_signing(g.server_signing));
    kv(&mut o, "server string", &g.server_string);
    kv(&mut o, "smb direct", fmt_bool(g.smb_direct));
    kv(&mut o, "smb direct port", &g.smb_direct_port.to_string());
    kv(&mut o, "smb direct crc", fmt_bool(g.smb_direct_crc));
    kv(
        &mut o,
        "smb direct large fpdus",
        fmt_bool(g.smb_direct_large_fpdus),
    );
    kv(
        &mut o,
        "smb direct provider",
        crate::direct::fmt_smb_direct_provider(g.smb_direct_provider),
    );
    kv(&mut o, "smb direct poll", fmt_bool(g.smb_direct_poll));
    kv(
        &mut o,
        "smb direct max send size",
        &g.smb_direct_max_send_size.to_string(),
    );
    kv(
        &mut o,
        "smb direct max receive size",
        &g.smb_direct_max_receive_size.to_string(),
    );
    kv(
        &mut o,
        "smb direct max fragmented size",
        &g.smb_direct_max_fragmented_size.to_string(),
    );
    kv(&mut o, "smb direct mss", &g.smb_direct_mss.to_string());
    if !g.socket_options.is_empty() {
        kv(&mut o, "socket options", &g.socket_options);
    }
    let ports: Vec<String> = g.smb_ports.iter().map(u16::to_string).collect();
    kv(&mut o, "smb ports", &ports.join(" "));
    kv(&mut o, "smb2 max credits", &g.smb2_max_credits.to_string());
    kv(&mut o, "smb2 max read", &g.smb2_max_read.to_string());
    kv(&mut o, "smb2 max trans", &g.smb2_max_trans.to_string());
    kv(&mut o, "smb2 max write", &g.smb2_max_write.to_string());
    kv(
        &mut o,
        "unauthenticated timeout",
        &g.unauthenticated_timeout_secs.to_string(),
    );
    if let Some(p) = &g.username_map {
        kv(&mut o, "username map", &p.display().to_string());
    }
    kv(&mut o, "workgroup", &g.workgroup);
    o.push_str("\t# defaults for shares\n");
    kv(&mut o, "browseable", fmt_bool(g.browseable));
    kv(&mut o, "case sensitive", fmt_bool(g.case_sensitive));
    kv(&mut o, "durable handles", fmt_bool(g.durable_handles));
    kv(&mut o, "ea support", fmt_bool(g.ea_support));
    kv(&mut o, "guest ok", fmt_bool(g.guest_ok));
    kv(&mut o, "read only", fmt_bool(g.read_only));
    kv(
        &mut o,
        "server smb encrypt",
        fmt_encrypt(g.server_smb_encrypt),
    );
    kv(
        &mut o,
        "store dos attributes",
        fmt_bool(g.store_dos_attributes),
    );
    kv(&mut o, "valid users", &fmt_list(&g.valid_users));
    kv(&mut o, "admin users", &fmt_list(&g.admin_users));
    kv(&mut o, "vfs objects", &fmt_list(&g.vfs_objects));
    for s in &c.shares {
        let _ = write!(o, "\n[{}]\n", s.name);
        kv(&mut o, "path", &s.path.display().to_string());
        kv(&mut o, "comment", &s.comment);
        kv(&mut o, "browseable", fmt_bool(s.browseable));
        kv(&mut o, "case sensitive", fmt_bool(s.case_sensitive));
        kv(&mut o, "durable handles", fmt_bool(s.durable_handles));
        kv(&mut o, "ea support", fmt_bool(s.ea_support));
        kv(&mut o, "guest ok", fmt_bool(s.guest_ok));
        kv(&mut o, "hide dot files", fmt_bool(s.hide_dot_files));
        if let Some(n) = &s.acl_xattr_name {
            kv(&mut o, "acl_xattr:security_acl_name", n);
        }
        if !s.hide_files.is_empty() {
            kv(
                &mut o,
                "hide files",
                &format!("/{}/", s.hide_files.join("/")),
            );
        }
        kv(&mut o, "read only", fmt_bool(s.read_only));
        if let Some(e) = s.smb_encrypt {
            kv(&mut o, "server smb encrypt", fmt_encrypt(e));
        }
        if let Some(sg) = s.server_signing {
            kv(&mut o, "server signing", fmt_signing(sg));
        }
        kv(
            &mut o,
            "store dos attributes",
            fmt_bool(s.store_dos_attributes),
        );
        kv(&mut o, "valid users", &fmt_list(&s.valid_users));
        kv(&mut o, "admin users", &fmt_list(&s.admin_users));
        kv(&mut o, "vfs objects", &fmt_list(&s.vfs_objects));
    }
    o
}
