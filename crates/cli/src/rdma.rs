//! `smbx rdma`: the RDMA devices smbx sees (as `rdma link` and `ibv_devices`
//! show them), whether rdma-core is installed, and where SMB Direct would listen.

use std::process::ExitCode;

use smbx_client::channels::interface_addr;
use smbx_client::url::SmbUrl;
use smbx_client::{
    ClientOptions, NetworkInterface, NETWORK_IF_RDMA_CAPABLE, NETWORK_IF_RSS_CAPABLE,
};
use smbx_transport::verbs::{device_use, rdma_addresses, DeviceUse, RdmaAddress};
use smbx_transport::DirectConfig;

/// Runs `smbx rdma [--json]`.
pub fn main(args: &[String]) -> ExitCode {
    let mut json = false;
    let mut server = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json = true,
            "--server" => match it.next() {
                Some(u) => server = Some(u.clone()),
                None => {
                    eprintln!("smbx rdma: --server needs an smb://user@host/share URL");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!(
                    "Usage: smbx rdma [--json] [--server smb://user@host/share]\n\nLists the RDMA devices (name, node type iWARP/RoCE/InfiniBand, ports, \
                     link state, network interfaces and addresses), whether rdma-core (libibverbs, librdmacm) \
                     is installed, and the SMB Direct port each device is served on (5445 iWARP, 445 RoCE/IB); \
                     with rdma-core, each device's limits (max_qp_wr, max_sge, max_mr_size, inline data), what an \
                     SMB Direct connection's queue pair gets there, and the pools smbx sizes from that (receive \
                     credits, send buffers, RDMA Read/Write work requests), for smb.conf's default SMB Direct sizes. \
                     With --server, the interfaces that server reports (FSCTL_QUERY_NETWORK_INTERFACE_INFO: \
                     address, link speed, RSS and RDMA capable), logged on as the URL's user (password in the \
                     URL or SMBX_PASSWORD)."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("smbx rdma: unexpected argument {other:?} (try --help)");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(url) = server {
        return match server_interfaces(&url) {
            Ok(ifs) if json => {
                println!("{}", interfaces_json(&ifs));
                ExitCode::SUCCESS
            }
            Ok(ifs) => {
                print!("{}", interfaces_text(&ifs));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("smbx rdma: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let devices = smbx_rdma::verbs::devices();
    let addrs = rdma_addresses();
    let core = smbx_rdma::verbs::Verbs::available();
    let uses = if core.is_ok() {
        let config = DirectConfig::default();
        let opts = smbx_transport::verbs::Options::default();
        devices
            .iter()
            .map(|d| {
                let u = device_use(&d.name, &config, &opts).map_err(|e| e.to_string());
                (d.name.clone(), u)
            })
            .collect()
    } else {
        Vec::new()
    };
    if json {
        println!("{}", to_json(&devices, &addrs, &core, &uses));
    } else {
        print!("{}", to_text(&devices, &addrs, &core, &uses));
    }
    ExitCode::SUCCESS
}

/// Logs on to the share `url` names and asks the server for its interfaces.
fn server_interfaces(url: &str) -> Result<Vec<NetworkInterface>, String> {
    let u = SmbUrl::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let pw = u
        .password
        .clone()
        .or_else(|| std::env::var("SMBX_PASSWORD").ok());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let (tree, _) = u
            .open(pw.as_deref(), ClientOptions::default())
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        tree.session()
            .network_interfaces(&tree)
            .await
            .map_err(|e| format!("FSCTL_QUERY_NETWORK_INTERFACE_INFO: {e}"))
    })
}

/// The capability words of one interface: `RSS`, `RDMA`, or `-`.
fn capabilities(ni: &NetworkInterface) -> String {
    let mut c = Vec::new();
    if ni.capability & NETWORK_IF_RSS_CAPABLE != 0 {
        c.push("RSS");
    }
    if ni.capability & NETWORK_IF_RDMA_CAPABLE != 0 {
        c.push("RDMA");
    }
    if c.is_empty() {
        "-".into()
    } else {
        c.join(",")
    }
}

fn interfaces_text(ifs: &[NetworkInterface]) -> String {
    let mut o = format!(
        "{:<40} {:<8} {:>12} CAPABILITY\n",
        "SERVER INTERFACE", "IFINDEX", "MBIT/S"
    );
    for ni in ifs {
        o.push_str(&format!(
            "{:<40} {:<8} {:>12} {}\n",
            interface_addr(ni, 0).ip(),
            ni.if_index,
            ni.link_speed / 1_000_000,
            capabilities(ni)
        ));
    }
    o
}

fn interfaces_json(ifs: &[NetworkInterface]) -> serde_json::Value {
    serde_json::json!({
        "interfaces": ifs.iter().map(|ni| serde_json::json!({
            "address": interface_addr(ni, 0).ip().to_string(),
            "if_index": ni.if_index,
            "link_speed": ni.link_speed,
            "rss_capable": ni.capability & NETWORK_IF_RSS_CAPABLE != 0,
            "rdma_capable": ni.capability & NETWORK_IF_RDMA_CAPABLE != 0,
        })).collect::<Vec<_>>(),
    })
}

fn addrs_of<'a>(addrs: &'a [RdmaAddress], dev: &str) -> Vec<&'a RdmaAddress> {
    addrs.iter().filter(|a| a.device == dev).collect()
}

/// What SMB Direct uses on each device (by name), or why it could not be probed.
type Uses = [(String, Result<DeviceUse, String>)];

/// The limits in use on one device, three lines.
fn use_text(name: &str, u: &Result<DeviceUse, String>) -> String {
    let u = match u {
        Ok(u) => u,
        Err(e) => return format!("{name}: limits unknown: {e}\n"),
    };
    let l = &u.probe.limits;
    let g = &u.probe.granted;
    let mut o = format!(
        "{name} limits: max_qp_wr {}, max_sge {}, max_mr_size {}, max_cqe {}, max_qp_rd_atom {}, max_qp_init_rd_atom {}, max_mw {}\n",
        l.max_qp_wr, l.max_sge, l.max_mr_size, l.max_cqe, l.max_qp_rd_atom, l.max_qp_init_rd_atom, l.max_mw
    );
    o.push_str(&format!(
        "{name} queue pair: {} send and {} receive work requests, {} send and {} receive scatter entries, max_inline_data {}\n",
        g.caps.max_send_wr, g.caps.max_recv_wr, g.caps.max_send_sge, g.caps.max_recv_sge, g.max_inline
    ));
    let c = DirectConfig::default();
    match &u.pools {
        Ok(p) => o.push_str(&format!(
            "{name} pools per connection: {} receive credits ({} receives of {} bytes), {} send buffers of {} bytes, \
             {} RDMA Read/Write work requests in flight, sends up to {} bytes inline\n",
            p.receive_credit_max, p.recv_slots, c.max_receive_size, p.send_slots, c.max_send_size,
            p.rdma_window, p.max_inline
        )),
        Err(e) => o.push_str(&format!("{name} pools per connection: none fits: {e}\n")),
    }
    o
}

fn to_text(
    devices: &[smbx_rdma::verbs::Device],
    addrs: &[RdmaAddress],
    core: &Result<(), String>,
    uses: &Uses,
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
    for (name, u) in uses {
        o.push_str(&use_text(name, u));
    }
    o
}

/// The limits in use on one device as JSON.
fn use_json(u: &Result<DeviceUse, String>) -> serde_json::Value {
    let u = match u {
        Ok(u) => u,
        Err(e) => return serde_json::json!({ "error": e }),
    };
    let l = &u.probe.limits;
    let g = &u.probe.granted;
    serde_json::json!({
        "device": {
            "max_qp_wr": l.max_qp_wr, "max_sge": l.max_sge, "max_mr_size": l.max_mr_size,
            "max_cqe": l.max_cqe, "max_qp_rd_atom": l.max_qp_rd_atom,
            "max_qp_init_rd_atom": l.max_qp_init_rd_atom, "max_mw": l.max_mw,
        },
        "queue_pair": {
            "max_send_wr": g.caps.max_send_wr, "max_recv_wr": g.caps.max_recv_wr,
            "max_send_sge": g.caps.max_send_sge, "max_recv_sge": g.caps.max_recv_sge,
            "max_inline_data": g.max_inline,
        },
        "pools": match &u.pools {
            Ok(p) => serde_json::json!({
                "receive_credits": p.receive_credit_max, "receives": p.recv_slots,
                "send_buffers": p.send_slots, "rdma_work_requests": p.rdma_window,
                "max_inline": p.max_inline,
            }),
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        },
    })
}

fn to_json(
    devices: &[smbx_rdma::verbs::Device],
    addrs: &[RdmaAddress],
    core: &Result<(), String>,
    uses: &Uses,
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
            "limits": uses.iter().find(|(n, _)| n == &d.name).map(|(_, u)| use_json(u)),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_devices_says_what_to_do() {
        let t = to_text(&[], &[], &Err("librdmacm.so.1 not found".into()), &[]);
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
        let t = to_text(
            std::slice::from_ref(&d),
            std::slice::from_ref(&a),
            &Ok(()),
            &[],
        );
        let row = t.lines().find(|l| l.starts_with("siw0")).expect(&t);
        for w in ["iWARP", "ACTIVE", "LinkUp", "eth0", "5445", "10.0.2.15"] {
            assert!(row.contains(w), "{row}");
        }
        let j = to_json(&[d], &[a], &Ok(()), &[]);
        assert_eq!(j["devices"][0]["transport"], "iWARP");
        assert_eq!(j["devices"][0]["addresses"][0], "10.0.2.15");
        assert_eq!(j["rdma_core_installed"], true);
    }
    /// With rdma-core, each device's limits, its queue pair's grant and the pools
    /// sized from them are shown (text and JSON); a device that could not be probed
    /// says why.
    #[test]
    fn the_limits_in_use() {
        use smbx_transport::verbs::{DeviceLimits, Pools, Probe};
        let limits = DeviceLimits {
            max_mr_size: 1 << 40,
            max_qp_wr: 1_048_576,
            max_sge: 32,
            max_cqe: 4_194_303,
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            max_mw: 0,
            cap_flags: 0,
        };
        let granted = smbx_rdma::Granted {
            caps: smbx_rdma::QpCaps {
                max_send_wr: 336,
                max_recv_wr: 256,
                max_send_sge: 1,
                max_recv_sge: 1,
            },
            max_inline: 256,
            max_mr_size: 1 << 40,
        };
        let pools = smbx_transport::verbs::Pools {
            send_slots: 256,
            recv_slots: 256,
            rdma_window: 64,
            receive_credit_max: 255,
            max_inline: 256,
        };
        let u = DeviceUse {
            probe: Probe { limits, granted },
            pools: Ok::<Pools, _>(pools),
        };
        let uses = vec![
            ("rxe0".to_string(), Ok(u)),
            (
                "mlx5_0".to_string(),
                Err("ibv_open_device: EPERM".to_string()),
            ),
        ];
        let dev = smbx_rdma::verbs::Device {
            name: "rxe0".into(),
            node_type: "1: CA".into(),
            transport: smbx_rdma::verbs::Transport::Roce,
            ports: vec![],
            netdevs: vec!["eth0".into()],
        };
        let t = to_text(std::slice::from_ref(&dev), &[], &Ok(()), &uses);
        for w in [
            "rxe0 limits: max_qp_wr 1048576, max_sge 32, max_mr_size 1099511627776",
            "rxe0 queue pair: 336 send and 256 receive work requests",
            "max_inline_data 256",
            "rxe0 pools per connection: 255 receive credits (256 receives",
            "256 send buffers",
            "64 RDMA Read/Write work requests",
            "mlx5_0: limits unknown: ibv_open_device: EPERM",
        ] {
            assert!(t.contains(w), "{w:?} missing in {t}");
        }
        let all = to_json(&[dev], &[], &Ok(()), &uses);
        assert_eq!(all["devices"][0]["limits"]["pools"]["send_buffers"], 256);
        let j = use_json(&uses[0].1);
        assert_eq!(j["device"]["max_sge"], 32);
        assert_eq!(j["queue_pair"]["max_inline_data"], 256);
        assert_eq!(j["pools"]["receive_credits"], 255);
        assert_eq!(j["pools"]["rdma_work_requests"], 64);
        assert!(use_json(&uses[1].1)["error"].is_string());
    }
    /// The server's interfaces: the RDMA-capable one says RDMA, the other not.
    #[test]
    fn server_interfaces_show_the_rdma_flag() {
        let ifs = [
            NetworkInterface {
                if_index: 2,
                capability: NETWORK_IF_RDMA_CAPABLE,
                link_speed: 1_000_000_000,
                addr: smbx_client::IfAddr::V4([10, 0, 2, 15]),
            },
            NetworkInterface {
                if_index: 3,
                capability: 0,
                link_speed: 10_000_000_000,
                addr: smbx_client::IfAddr::V4([10, 0, 3, 15]),
            },
        ];
        let t = interfaces_text(&ifs);
        let row = |ip: &str| t.lines().find(|l| l.starts_with(ip)).expect(&t).to_string();
        assert!(row("10.0.2.15").ends_with(" RDMA"), "{t}");
        assert!(row("10.0.2.15").contains(" 1000 "), "{t}");
        assert!(row("10.0.3.15").ends_with(" -"), "{t}");
        let j = interfaces_json(&ifs);
        assert_eq!(j["interfaces"][0]["rdma_capable"], true);
        assert_eq!(j["interfaces"][1]["rdma_capable"], false);
        assert_eq!(j["interfaces"][1]["address"], "10.0.3.15");
    }
}
