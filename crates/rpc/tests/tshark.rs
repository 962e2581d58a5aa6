//! Independent check: Wireshark's DCE/RPC and srvsvc dissectors must decode our PDUs.
//!
//! The PDUs go into a pcap as ncacn_ip_tcp (same PDU format as on the named pipe) on TCP
//! port 135. Skipped, with a message, only when `tshark` is not installed.
mod common;
use common::*;
use std::process::Command;

fn checksum(data: &[u8], mut sum: u32) -> u16 {
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

struct Pcap {
    out: Vec<u8>,
    seq: [u32; 2],
    t: u32,
}

impl Pcap {
    fn new() -> Self {
        let mut out = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        for v in [0u32, 0, 262_144, 1] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        Pcap {
            out,
            seq: [1000, 5000],
            t: 0,
        }
    }

    /// One TCP segment; `dir` 0 = client to server, 1 = server to client.
    fn segment(&mut self, dir: usize, payload: &[u8]) {
        let (src, dst) = if dir == 0 {
            ([10, 0, 0, 1], [10, 0, 0, 2])
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1])
        };
        let (sport, dport): (u16, u16) = if dir == 0 { (49700, 135) } else { (135, 49700) };
        let mut tcp = Vec::new();
        tcp.extend_from_slice(&sport.to_be_bytes());
        tcp.extend_from_slice(&dport.to_be_bytes());
        tcp.extend_from_slice(&self.seq[dir].to_be_bytes());
        tcp.extend_from_slice(&self.seq[1 - dir].to_be_bytes());
        tcp.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]); // PSH|ACK
        tcp.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(&tcp);
        let c = checksum(&pseudo, 0);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        self.seq[dir] = self.seq[dir].wrapping_add(payload.len() as u32);

        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let c = checksum(&ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());

        let mut frame = vec![
            2,
            0,
            0,
            0,
            0,
            2 - dir as u8,
            2,
            0,
            0,
            0,
            0,
            1 + dir as u8,
            8,
            0,
        ];
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&tcp);
        self.t += 1;
        for v in [self.t, 0, frame.len() as u32, frame.len() as u32] {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self.out.extend_from_slice(&frame);
    }

    /// Sends a client PDU through `pipe` and records it with every response PDU.
    fn exchange(&mut self, pipe: &mut smbx_rpc::Pipe, pdu: &[u8]) -> usize {
        self.segment(0, pdu);
        pipe.write(pdu).unwrap();
        let replies = read_all(pipe);
        for r in &replies {
            self.segment(1, r);
        }
        replies.len()
    }
}

#[test]
fn tshark_decodes_our_pdus() {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("SKIPPED tshark_decodes_our_pdus: tshark is not installed");
        return;
    }
    let shares: Vec<_> = (0..200)
        .map(|i| share(&format!("share-{i:03}"), 0, &format!("comment {i}"), "/srv"))
        .chain([share("IPC$", 0x8000_0003, "IPC Service", "")])
        .collect();
    let mut pipe = smbx_rpc::Pipe::open("srvsvc", ctx_with(shares)).unwrap();
    let mut pcap = Pcap::new();
    let bind = bind_pdu(
        11,
        1,
        4280,
        &[
            (0, SRVSVC, 3, vec![(NDR, 2)]),
            (1, SRVSVC, 3, vec![(NDR64, 1)]),
            (2, SRVSVC, 3, vec![(BTFN, 1)]),
        ],
    );
    assert_eq!(pcap.exchange(&mut pipe, &bind), 1);
    let frags = pcap.exchange(
        &mut pipe,
        &request(2, 0, 15, &share_enum_stub(1, u32::MAX, Some(0))),
    );
    assert!(frags > 1, "want a fragmented response, got {frags}");
    pcap.exchange(
        &mut pipe,
        &request(3, 0, 16, &get_info_stub("share-007", 2)),
    );
    pcap.exchange(&mut pipe, &request(4, 0, 16, &get_info_stub("missing", 1)));
    pcap.exchange(&mut pipe, &request(5, 0, 21, &server_get_info_stub(101)));
    pcap.exchange(
        &mut pipe,
        &request(6, 0, 15, &share_enum_stub(2, u32::MAX, None)),
    );
    pcap.exchange(&mut pipe, &request(7, 0, 99, &[]));

    let dir = std::env::temp_dir().join(format!("smbx-rpc-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("srvsvc.pcap");
    std::fs::write(&path, &pcap.out).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new("tshark")
            .arg("-n")
            .arg("-r")
            .arg(&path)
            .args(args)
            .output()
            .expect("run tshark");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let verbose = run(&["-V"]);
    let experts = run(&["-q", "-z", "expert,note"]);
    let summary = run(&[]);
    let names = run(&[
        "-Y",
        "srvsvc.opnum == 15 && dcerpc.pkt_type == 2",
        "-T",
        "fields",
        "-e",
        "srvsvc.srvsvc_NetShareInfo1.name",
        "-e",
        "srvsvc.srvsvc_NetShareEnumAll.totalentries",
        "-e",
        "srvsvc.werror",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    println!("expert info:\n{experts}");

    println!("{summary}");
    assert!(
        !verbose.contains("Malformed"),
        "malformed packet:\n{verbose}"
    );
    assert!(
        !experts.contains("Malformed")
            && !experts.contains("Error")
            && !experts.contains("Warning"),
        "expert info:\n{experts}"
    );
    // Names of the reassembled NetShareEnumAll level 1 response.
    let line = names
        .lines()
        .find(|l| l.contains("share-000"))
        .unwrap_or_else(|| panic!("no decoded share names:\n{names}\n{verbose}"));
    let cols: Vec<&str> = line.split('\t').collect();
    let decoded: Vec<&str> = cols[0].split(',').collect();
    let mut want: Vec<String> = (0..200).map(|i| format!("share-{i:03}")).collect();
    want.push("IPC$".into());
    assert_eq!(decoded, want);
    assert_eq!(cols[1], "201");
    assert!(summary.contains("Bind_ack"), "{summary}");
    assert!(verbose.contains("NetShareGetInfo"), "{verbose}");
    assert!(verbose.contains("/srv"), "level 2 path decoded");
    assert!(verbose.contains("NetSrvGetInfo"));
    assert!(verbose.contains("nca_op_rng_error"), "fault decoded");
    assert!(
        verbose.contains("Negotiate ACK")
            || verbose.contains("negotiate_ack")
            || verbose.contains("Negotiate"),
        "btfn result decoded"
    );
}
