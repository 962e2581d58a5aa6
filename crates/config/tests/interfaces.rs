//! `interfaces` with Samba's per-interface options, through the whole parser:
//! good lines become typed entries, bad ones are refused naming file and line.

use smbx_config::{Config, InterfaceCaps, InterfaceTarget};

#[test]
fn samba_per_interface_options() {
    let text = "[global]\n\
        \tinterfaces = \"eth0;speed=10000000000,capability=RSS,capability=RDMA\" \\\n\
        \t\t\"192.168.1.10/24;speed=1000000000\" lo \"fd00::2;capability=RSS,if_index=9\"\n\
        \tbind interfaces only = yes\n";
    let c = Config::parse_str(text, "smb.conf").unwrap();
    let i = &c.global.interfaces;
    assert_eq!(i.len(), 4, "{i:?}");
    assert_eq!(i[0].target, InterfaceTarget::Name("eth0".into()));
    assert_eq!(i[0].speed, Some(10_000_000_000));
    assert_eq!(
        i[0].capability,
        Some(InterfaceCaps {
            rss: true,
            rdma: true
        })
    );
    assert_eq!(
        i[1].target,
        InterfaceTarget::Network {
            addr: "192.168.1.10".parse().unwrap(),
            prefix: 24
        }
    );
    assert_eq!((i[1].speed, i[1].capability), (Some(1_000_000_000), None));
    assert_eq!(i[2].target, InterfaceTarget::Name("lo".into()));
    assert_eq!(
        (i[2].speed, i[2].capability, i[2].if_index),
        (None, None, None)
    );
    assert_eq!(i[3].if_index, Some(9));
    assert!(c.global.bind_interfaces_only);
    // testparm-style output gives the same entries back.
    let again = Config::parse_str(&c.to_smb_conf(), "emitted").unwrap();
    assert_eq!(again.global.interfaces, c.global.interfaces);
}

#[test]
fn bad_options_name_file_and_line() {
    for (line, says) in [
        ("interfaces = \"eth0;speed=fast\"", "speed \"fast\""),
        (
            "interfaces = lo \"eth0;capability=TURBO\"",
            "capability \"TURBO\"",
        ),
        (
            "interfaces = \"eth0;duplex=full\"",
            "unknown option \"duplex\"",
        ),
        // Unquoted, the comma splits the entry in two.
        (
            "interfaces = eth0;speed=1000,capability=RSS",
            "inside the same quotes",
        ),
        ("interfaces = 10.0.0.1/40", "prefix \"40\""),
    ] {
        let text = format!("[global]\n  workgroup = X\n  {line}\n");
        let e = Config::parse_str(&text, "/etc/smbx/smb.conf").unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line),
            ("/etc/smbx/smb.conf", 3),
            "{line}: {e}"
        );
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/smbx/smb.conf:3: "), "{msg}");
        assert!(msg.contains("\"interfaces\""), "{msg}");
        assert!(msg.contains(says), "{line}: {msg}");
    }
}
