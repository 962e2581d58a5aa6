//! FSCTL_QUERY_NETWORK_INTERFACE_INFO over a real socket, decoded with the wire
//! crate's decoder: the addresses `interfaces` selects, each with its configured
//! speed and capabilities, and RDMA_CAPABLE where SMB Direct listens.
//!
//! The server needs several addresses of its own: each test creates a network
//! namespace whose loopback carries 127.0.0.1, 127.0.0.2 and 127.0.0.3 and runs
//! itself again inside it (`ip netns exec`), so nothing outside it changes. It needs
//! root, as the client's multichannel tests.

mod common;

use std::net::Ipv4Addr;
use std::process::Command;

use common::*;
use smbx_server::state::settings::Settings;
use smbx_wire::ioctl::*;
use smbx_wire::{Command as SmbCommand, NtStatus};

/// Set in the copy of the test that runs inside the namespace.
const INNER: &str = "SMBX_NETIF_NETNS";

/// Runs test `name` of this binary in a fresh network namespace with three
/// loopback addresses; true when the caller is that inner run.
fn in_netns(name: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return true;
    }
    let ns = format!("smbxif{}{}", std::process::id(), name.len());
    let ip = |args: &[&str]| {
        let st = Command::new("ip").args(args).status().expect("run ip");
        assert!(st.success(), "ip {args:?} failed");
    };
    ip(&["netns", "add", &ns]);
    let run = std::panic::catch_unwind(|| {
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        ip(&["-n", &ns, "addr", "add", "127.0.0.2/8", "dev", "lo"]);
        ip(&["-n", &ns, "addr", "add", "127.0.0.3/8", "dev", "lo"]);
        Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(INNER, "1")
            .output()
            .expect("run the test in the namespace")
    });
    let _ = Command::new("ip").args(["netns", "del", &ns]).status();
    let out = run.unwrap_or_else(|e| std::panic::resume_unwind(e));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "inside the namespace:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the inner run did not run:\n{text}"
    );
    false
}

/// A server on the addresses of `interfaces` (bind interfaces only), SMB Direct
/// on or off.
fn config(dir: &std::path::Path, interfaces: &str, direct: bool) -> smbx_config::Config {
    let mut c = test_config(dir);
    c.global.interfaces = smbx_config::interfaces::parse_interfaces(interfaces).unwrap();
    c.global.bind_interfaces_only = true;
    c.global.smb_direct = direct;
    c.global.smb_direct_port = 0;
    c
}

/// Asks the server at `srv` for its interfaces: (address, speed, RSS, RDMA, index).
async fn query(srv: &TestServer) -> Vec<(Ipv4Addr, u64, bool, bool, u32)> {
    let mut c = connect_share(srv).await;
    let body = IoctlRequest {
        ctl_code: fsctl::QUERY_NETWORK_INTERFACE_INFO,
        file_id: smbx_wire::FileId {
            persistent: u64::MAX,
            volatile: u64::MAX,
        },
        input: &[],
        max_input_response: 0,
        output: &[],
        max_output_response: 65536,
        flags: SMB2_0_IOCTL_IS_FSCTL,
    }
    .encode();
    let r = c.request(SmbCommand::Ioctl, &body).await;
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = IoctlResponse::decode(&r.bytes)
        .expect("IOCTL response")
        .output;
    decode_network_interfaces(&out)
        .expect("a well-formed NETWORK_INTERFACE_INFO chain")
        .into_iter()
        .map(|n| match n.addr {
            IfAddr::V4(o) => (
                Ipv4Addr::from(o),
                n.link_speed,
                n.capability & NETWORK_IF_RSS_CAPABLE != 0,
                n.capability & NETWORK_IF_RDMA_CAPABLE != 0,
                n.if_index,
            ),
            IfAddr::V6(..) => panic!("no IPv6 address was configured: {n:?}"),
        })
        .collect()
}

const LINE: &str = "\"127.0.0.1;speed=10000000000,capability=RSS\" \
                    \"127.0.0.2;speed=25000000000,capability=RDMA,if_index=42\" 127.0.0.3";

#[tokio::test]
async fn configured_speeds_and_capabilities_per_address() {
    if !in_netns("configured_speeds_and_capabilities_per_address") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = start(config(dir.path(), LINE, false)).await;
    let ifs = query(&srv).await;
    let lo = ifs[0].4;
    assert!(lo > 0);
    assert_eq!(
        ifs,
        vec![
            (Ipv4Addr::new(127, 0, 0, 1), 10_000_000_000, true, false, lo),
            (Ipv4Addr::new(127, 0, 0, 2), 25_000_000_000, false, true, 42),
            // No options: loopback's default speed, no RSS (one queue), no RDMA.
            (
                Ipv4Addr::new(127, 0, 0, 3),
                10_000_000_000,
                false,
                false,
                lo
            ),
        ]
    );
}

#[tokio::test]
async fn smb_direct_listeners_are_advertised_rdma_capable() {
    if !in_netns("smb_direct_listeners_are_advertised_rdma_capable") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SMB Direct listens on the two addresses bound; 127.0.0.3 is advertised only.
    let mut c = config(
        dir.path(),
        "\"127.0.0.1;speed=10000000000,capability=RSS\" 127.0.0.2",
        true,
    );
    let users: std::sync::Arc<dyn smbx_security::auth::CredentialStore> =
        std::sync::Arc::new(Users(vec![("user".into(), smbx_passdb::nt_hash("pass"))]));
    let server =
        smbx_server::Server::bind_with_credentials(std::sync::Arc::new(c.clone()), users.clone())
            .await
            .expect("bind");
    let direct: Vec<std::net::IpAddr> = server.direct_addrs().iter().map(|a| a.ip()).collect();
    let tcp: Vec<std::net::IpAddr> = server.local_addrs().iter().map(|a| a.ip()).collect();
    assert_eq!(tcp, direct, "TCP and SMB Direct on the same addresses");
    assert_eq!(
        direct,
        [
            "127.0.0.1".parse::<std::net::IpAddr>().unwrap(),
            "127.0.0.2".parse().unwrap()
        ]
    );
    // Advertise a third address SMB Direct does not listen on: a new connection
    // answers from the configuration in force (a reload's way to change it).
    c.global.interfaces.push("127.0.0.3".parse().unwrap());
    let state = server.state();
    let settings = Settings::build(
        std::sync::Arc::new(c),
        users,
        None,
        Some(&state.settings.current()),
    );
    state.settings.replace(settings);
    let addr = server.local_addrs()[0];
    tokio::spawn(server.run());
    let srv = TestServer { addr, state };
    let got: Vec<(Ipv4Addr, u64, bool, bool)> = query(&srv)
        .await
        .into_iter()
        .map(|(a, s, rss, rdma, _)| (a, s, rss, rdma))
        .collect();
    assert_eq!(
        got,
        vec![
            (Ipv4Addr::new(127, 0, 0, 1), 10_000_000_000, true, true),
            (Ipv4Addr::new(127, 0, 0, 2), 10_000_000_000, false, true),
            (Ipv4Addr::new(127, 0, 0, 3), 10_000_000_000, false, false),
        ]
    );
}

#[tokio::test]
async fn capability_rdma_entries_choose_where_smb_direct_listens() {
    if !in_netns("capability_rdma_entries_choose_where_smb_direct_listens") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Three addresses bound for TCP; only the one marked capability=RDMA gets SMB
    // Direct, and only it is advertised RDMA_CAPABLE.
    let c = config(
        dir.path(),
        "\"127.0.0.1;capability=RSS\" \"127.0.0.2;capability=RSS,capability=RDMA\" 127.0.0.3",
        true,
    );
    let users: std::sync::Arc<dyn smbx_security::auth::CredentialStore> =
        std::sync::Arc::new(Users(vec![("user".into(), smbx_passdb::nt_hash("pass"))]));
    let server = smbx_server::Server::bind_with_credentials(std::sync::Arc::new(c), users)
        .await
        .expect("bind");
    let direct: Vec<std::net::IpAddr> = server.direct_addrs().iter().map(|a| a.ip()).collect();
    assert_eq!(direct, ["127.0.0.2".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(server.local_addrs().len(), 3, "TCP on all three");
    let addr = server.local_addrs()[0];
    let state = server.state();
    tokio::spawn(server.run());
    let srv = TestServer { addr, state };
    let rdma: Vec<(Ipv4Addr, bool)> = query(&srv)
        .await
        .into_iter()
        .map(|(a, _, _, rdma, _)| (a, rdma))
        .collect();
    assert_eq!(
        rdma,
        vec![
            (Ipv4Addr::new(127, 0, 0, 1), false),
            (Ipv4Addr::new(127, 0, 0, 2), true),
            (Ipv4Addr::new(127, 0, 0, 3), false),
        ]
    );
}
