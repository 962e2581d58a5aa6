//! `smbx rdma`: the RDMA devices smbx sees (as `rdma link` and `ibv_devices`
//! show them), whether rdma-core is installed, and where SMB Direct would listen.

use std::process::ExitCode;

use smbx_transport::verbs::{rdma_addresses, RdmaAddress};

/// Runs `smbx rdma [--json]`.
pub fn main(args: &[String]) -> ExitCode {
    let mut json = false;
    for a in args {
        match a.as_str() {
            "--json" => json = true,
            "-h" | "--help" => {
                println!(
                    "Usage: smbx rdma [--json]\n\nLists the RDMA devices (name, node type iWARP/RoCE/InfiniBand, ports, \
                     link state, network interfaces and addresses), whether rdma-core (libibverbs, librdmacm) \
                     is installed, and the SMB Direct port each device is served on (5445 iWARP, 445 RoCE/IB)."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("smbx rdma: unexpected argument {other:?} (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    let devices = smbx_rdma::verbs::devices();
    let addrs = rdma_addresses();
    let core = smbx_rdma::verbs::Verbs::available();
    if json {
        println!("{}", to_json(&devices, &addrs, &core));
    } else {
        print!("{}", to_text(&devices, &addrs, &core));
    }
    ExitCode::SUCCESS
}

fn addrs_of<'a>(addrs: &'a [RdmaAddress], dev: &str) -> Vec<&'a RdmaAddress> {
    addrs.iter().filter(|a| a.device == dev).collect()
}

fn to_text(
    devices: &[smbx_rdma::verbs::Device],
    addrs: &[RdmaAddress],
    core: &Result<(), String>,
) -> String {
    let mut o = String::new();
    match core {
        Ok(()) => o.push_str("rdma-core: installed (libibverbs.so.1, librdmacm.so.1)\n"),
        Err(e) => o.push_str(&format!("rdma-core: missing: {e}\n")),
    }
    if devices.is_empty() {
        o.push_str(
            "no RDMA devices (none in /sys/class/infiniband): SMB Direct uses soft-iWARP.\n\
             To use a plain NIC through the kernel: rdma link add siw0 type siw netdev eth0 \
             (or type rxe for soft-RoCE)\n",
        );
        return o;
    }
    o.push_str(&format!(
        "{:<12} {:<11} {:<5} {:<8} {:<10} {:<10} {:<10} {:<6} ADDRESSES\n",
        "DEVICE", "TRANSPORT", "PORT", "STATE", "PHYS", "LINK", "NETDEV", "SMBD"
    ));
    for d in devices {
        let ips: Vec<String> = addrs_of(addrs, &d.name)
            .iter()
            .map(|a| a.ip.to_string())
            .collect();
        let netdev = if d.netdevs.is_empty() {
            "-".to_string()
        } else {
            d.netdevs.join(",")
        };
        for p in &d.ports {
            o.push_str(&format!(
                "{:<12} {:<11} {:<5} {:<8} {:<10} {:<10} {:<10} {:<6} {}\n",
                d.name,
                d.transport.name(),
                p.number,
                p.state,
                if p.phys_state.is_empty() {
                    "-"
                } else {
                    &p.phys_state
                },
                if p.link_layer.is_empty() {
                    "-"
                } else {
                    &p.link_layer
                },
                netdev,
                d.transport.smb_direct_port(),
                if ips.is_empty() {
                    "-".to_string()
                } else {
                    ips.join(" ")
                },
            ));
        }
    }
    o
}

fn to_json(
    devices: &[smbx_rdma::verbs::Device],
    addrs: &[RdmaAddress],
    core: &Result<(), String>,
) -> serde_json::Value {
    serde_json::json!({
        "rdma_core": match core { Ok(()) => serde_json::Value::Null, Err(e) => e.clone().into() },
        "rdma_core_installed": core.is_ok(),
        "devices": devices.iter().map(|d| serde_json::json!({
            "name": d.name,
            "node_type": d.node_type,
            "transport": d.transport.name(),
            "smb_direct_port": d.transport.smb_direct_port(),
            "netdevs": d.netdevs,
            "addresses": addrs_of(addrs, &d.name).iter().map(|a| a.ip.to_string()).collect::<Vec<_>>(),
            "ports": d.ports.iter().map(|p| serde_json::json!({
                "port": p.number, "state": p.state, "phys_state": p.phys_state, "link_layer": p.link_layer,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_devices_says_what_to_do() {
        let t = to_text(&[], &[], &Err("librdmacm.so.1 not found".into()));
        assert!(
            t.contains("rdma-core: missing: librdmacm.so.1 not found"),
            "{t}"
        );
        assert!(t.contains("rdma link add siw0 type siw"), "{t}");
    }

    #[test]
    fn a_device_row() {
        let d = smbx_rdma::verbs::Device {
            name: "siw0".into(),
            node_type: "4: RNIC".into(),
            transport: smbx_rdma::verbs::Transport::Iwarp,
            ports: vec![smbx_rdma::verbs::Port {
                number: 1,
                state: "ACTIVE".into(),
                phys_state: "LinkUp".into(),
                link_layer: String::new(),
            }],
            netdevs: vec!["eth0".into()],
        };
        let a = RdmaAddress {
            ip: "10.0.2.15".parse().unwrap(),
            netdev: "eth0".into(),
            device: "siw0".into(),
            transport: smbx_rdma::verbs::Transport::Iwarp,
            active: true,
        };
        let t = to_text(std::slice::from_ref(&d), std::slice::from_ref(&a), &Ok(()));
        let row = t.lines().find(|l| l.starts_with("siw0")).expect(&t);
        for w in ["iWARP", "ACTIVE", "LinkUp", "eth0", "5445", "10.0.2.15"] {
            assert!(row.contains(w), "{row}");
        }
        let j = to_json(&[d], &[a], &Ok(()));
        assert_eq!(j["devices"][0]["transport"], "iWARP");
        assert_eq!(j["devices"][0]["addresses"][0], "10.0.2.15");
        assert_eq!(j["rdma_core_installed"], true);
    }
}
