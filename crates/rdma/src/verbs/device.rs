//! The RDMA devices the kernel has, read from sysfs (/sys/class/infiniband):
//! name, node type (iWARP, RoCE, InfiniBand), ports with their state and link
//! layer, and the network interfaces they sit on. Works without rdma-core,
//! so `smbx rdma` can say what is missing.

use std::path::{Path, PathBuf};

/// The sysfs directory of RDMA devices.
pub const SYSFS_INFINIBAND: &str = "/sys/class/infiniband";

/// What kind of RDMA transport a device speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// iWARP (RDMA over TCP): Chelsio, Intel E810/X722, the kernel's siw.
    Iwarp,
    /// RoCE (InfiniBand transport over Ethernet/UDP): Mellanox/NVIDIA, the kernel's rxe.
    Roce,
    /// Native InfiniBand.
    Infiniband,
    /// Anything else the kernel reports.
    Other,
}

impl Transport {
    /// The SMB Direct port a server listens on for this transport ([MS-SMBD] 2.1):
    /// 5445 for iWARP, 445 (in the RDMA CM port space) for InfiniBand and RoCE.
    pub fn smb_direct_port(self) -> u16 {
        match self {
            Transport::Iwarp => 5445,
            _ => 445,
        }
    }
    /// A short name: `iWARP`, `RoCE`, `InfiniBand`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Iwarp => "iWARP",
            Transport::Roce => "RoCE",
            Transport::Infiniband => "InfiniBand",
            Transport::Other => "other",
        }
    }
}

/// One port of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Port number (from 1).
    pub number: u32,
    /// State as the kernel names it (`ACTIVE`, `DOWN`, `INIT`, ...).
    pub state: String,
    /// Physical state (`LinkUp`, `Disabled`, ...), when reported.
    pub phys_state: String,
    /// Link layer (`Ethernet`, `InfiniBand`), when reported.
    pub link_layer: String,
}

impl Port {
    /// Whether the port can carry traffic.
    pub fn is_active(&self) -> bool {
        self.state == "ACTIVE"
    }
}

/// One RDMA device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Its name (`siw0`, `rxe0`, `mlx5_0`, `cxgb4_0`).
    pub name: String,
    /// The kernel's node type line (`1: CA`, `4: RNIC`).
    pub node_type: String,
    /// Its transport.
    pub transport: Transport,
    /// Its ports.
    pub ports: Vec<Port>,
    /// The network interfaces it is attached to (`eth0`).
    pub netdevs: Vec<String>,
}

impl Device {
    /// Whether any port is active.
    pub fn is_active(&self) -> bool {
        self.ports.iter().any(Port::is_active)
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The state word of "4: ACTIVE".
fn after_colon(s: &str) -> String {
    match s.split_once(':') {
        Some((_, b)) => b.trim().to_string(),
        None => s.trim().to_string(),
    }
}

/// Every RDMA device in `/sys/class/infiniband` (none when there is no such directory).
pub fn devices() -> Vec<Device> {
    devices_in(Path::new(SYSFS_INFINIBAND), Path::new("/sys/class/net"))
}

/// Devices under `root` (a /sys/class/infiniband), with network interfaces
/// from `net` (a /sys/class/net). For tests.
pub fn devices_in(root: &Path, net: &Path) -> Vec<Device> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.truncate(256);
    names
        .into_iter()
        .map(|name| device_at(&root.join(&name), name, net))
        .collect()
}

fn device_at(dir: &Path, name: String, net: &Path) -> Device {
    let node_type = read(&dir.join("node_type"));
    let mut ports = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir.join("ports")) {
        for e in rd.filter_map(|e| e.ok()).take(64) {
            let Ok(number) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let p = e.path();
            ports.push(Port {
                number,
                state: after_colon(&read(&p.join("state"))),
                phys_state: after_colon(&read(&p.join("phys_state"))),
                link_layer: read(&p.join("link_layer")),
            });
        }
    }
    ports.sort_by_key(|p| p.number);
    let transport = if node_type.contains("RNIC") {
        Transport::Iwarp
    } else if ports.iter().any(|p| p.link_layer == "Ethernet") {
        Transport::Roce
    } else if node_type.contains("CA") {
        Transport::Infiniband
    } else {
        Transport::Other
    };
    let netdevs = netdevs_of(dir, net);
    Device {
        name,
        node_type,
        transport,
        ports,
        netdevs,
    }
}

/// The network interfaces under a device: its `parent` (rxe), its PCI
/// function's `net/` (hardware RNICs), the RoCE GID table's interfaces, else
/// the interface whose MAC its node GUID was made from (siw).
fn netdevs_of(dir: &Path, net: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    fn add(out: &mut Vec<String>, s: String) {
        if !s.is_empty() && !out.contains(&s) && out.len() < 32 {
            out.push(s);
        }
    }
    add(&mut out, read(&dir.join("parent")));
    for sub in [dir.join("device").join("net")] {
        if let Ok(rd) = std::fs::read_dir(sub) {
            for e in rd.filter_map(|e| e.ok()).take(32) {
                add(&mut out, e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir.join("ports")) {
        for p in rd.filter_map(|e| e.ok()).take(64) {
            let ndevs: PathBuf = p.path().join("gid_attrs").join("ndevs");
            for i in 0..16 {
                add(&mut out, read(&ndevs.join(i.to_string())));
            }
        }
    }
    if out.is_empty() {
        let guid = read(&dir.join("node_guid"));
        if let Some(mac) = mac_from_guid(&guid) {
            if let Ok(rd) = std::fs::read_dir(net) {
                let mut names: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                for n in names.into_iter().take(256) {
                    if read(&net.join(&n).join("address")).eq_ignore_ascii_case(&mac) {
                        add(&mut out, n);
                    }
                }
            }
        }
    }
    out
}

/// The MAC address an EUI-64 node GUID (`5054:00ff:fe12:3456`) was made from
/// (`52:54:00:12:34:56`): the middle `ff:fe` removed and the universal/local
/// bit flipped back.
pub fn mac_from_guid(guid: &str) -> Option<String> {
    let hex: String = guid.chars().filter(|c| *c != ':').collect();
    if hex.len() != 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let b: Vec<u8> = (0..8)
        .map(|i| u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).ok())
        .collect::<Option<_>>()?;
    if b[3] != 0xff || b[4] != 0xfe {
        return None;
    }
    Some(format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0] ^ 2,
        b[1],
        b[2],
        b[5],
        b[6],
        b[7]
    ))
}

/// Whether rdma-core's libraries can be loaded, or why not.
pub fn rdma_core_status() -> Result<(), String> {
    super::ffi::lib().map(|_| ()).map_err(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_to_mac() {
        assert_eq!(
            mac_from_guid("5054:00ff:fe12:3456").as_deref(),
            Some("52:54:00:12:34:56")
        );
        assert_eq!(
            mac_from_guid("0200:00ff:fe00:0000").as_deref(),
            Some("00:00:00:00:00:00")
        );
        assert_eq!(mac_from_guid("0200:0000:0000:0000"), None);
        assert_eq!(mac_from_guid("zz"), None);
    }

    #[test]
    fn reads_a_sysfs_tree() {
        let t = tempfile::tempdir().unwrap();
        let ib = t.path().join("infiniband");
        let net = t.path().join("net");
        let siw = ib.join("siw0");
        std::fs::create_dir_all(siw.join("ports/1")).unwrap();
        std::fs::write(siw.join("node_type"), "4: RNIC\n").unwrap();
        std::fs::write(siw.join("node_guid"), "5054:00ff:fe12:3456\n").unwrap();
        std::fs::write(siw.join("ports/1/state"), "4: ACTIVE\n").unwrap();
        std::fs::write(siw.join("ports/1/phys_state"), "5: LinkUp\n").unwrap();
        let rxe = ib.join("rxe0");
        std::fs::create_dir_all(rxe.join("ports/1")).unwrap();
        std::fs::write(rxe.join("node_type"), "1: CA\n").unwrap();
        std::fs::write(rxe.join("parent"), "eth1\n").unwrap();
        std::fs::write(rxe.join("ports/1/state"), "1: DOWN\n").unwrap();
        std::fs::write(rxe.join("ports/1/link_layer"), "Ethernet\n").unwrap();
        std::fs::create_dir_all(net.join("eth0")).unwrap();
        std::fs::write(net.join("eth0/address"), "52:54:00:12:34:56\n").unwrap();
        let d = devices_in(&ib, &net);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "rxe0");
        assert_eq!(d[0].transport, Transport::Roce);
        assert_eq!(d[0].netdevs, vec!["eth1".to_string()]);
        assert!(!d[0].is_active());
        assert_eq!(d[0].transport.smb_direct_port(), 445);
        assert_eq!(d[1].name, "siw0");
        assert_eq!(d[1].transport, Transport::Iwarp);
        assert_eq!(d[1].netdevs, vec!["eth0".to_string()]);
        assert!(d[1].is_active());
        assert_eq!(d[1].ports[0].phys_state, "LinkUp");
        assert_eq!(d[1].transport.smb_direct_port(), 5445);
    }

    #[test]
    fn no_sysfs_directory_is_no_devices() {
        let t = tempfile::tempdir().unwrap();
        assert!(devices_in(&t.path().join("none"), t.path()).is_empty());
    }
}
