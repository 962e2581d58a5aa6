//! A real client stack against the pipe, over ncacn_ip_tcp (the same PDUs as on the SMB
//! named pipe): impacket's DCE/RPC runtime and its srvsvc/wkssvc NDR code, the code behind
//! impacket's `listShares()`. Skipped, with a message, when impacket is not installed.
//! (Samba's rpcclient cannot be used this way: over ncacn_ip_tcp it always asks the
//! endpoint mapper on port 135 first.)
mod common;
use common::*;
use smbx_rpc::Pipe;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

/// Serves `pipe_name` on a 127.0.0.1 port, one `Pipe` per connection.
fn serve(pipe_name: &'static str, ctx: smbx_rpc::PipeContext) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { return };
            let ctx = ctx.clone();
            std::thread::spawn(move || handle(conn, Pipe::open(pipe_name, ctx).unwrap()));
        }
    });
    port
}

fn handle(mut s: TcpStream, mut p: Pipe) {
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut buf = [0u8; 8192];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if p.write(&buf[..n]).is_err() {
            return;
        }
        while p.pending() > 0 {
            let (b, _) = p.read(usize::MAX);
            if s.write_all(&b).is_err() {
                return;
            }
        }
    }
}

fn shares() -> smbx_rpc::PipeContext {
    let mut v: Vec<_> = (0..150)
        .map(|i| {
            share(
                &format!("share-{i:03}"),
                0,
                &format!("comment {i}"),
                "/srv/x",
            )
        })
        .collect();
    v.push(share("IPC$", 0x8000_0003, "IPC Service", ""));
    ctx_with(v)
}

const IMPACKET_SCRIPT: &str = r#"
import sys
from impacket.dcerpc.v5 import transport, srvs, wkst
port = int(sys.argv[1])
which = sys.argv[2]
t = transport.DCERPCTransportFactory('ncacn_ip_tcp:127.0.0.1[%d]' % port)
dce = t.get_dce_rpc()
dce.connect()
if which == 'srvsvc':
    dce.bind(srvs.MSRPC_UUID_SRVS)
    r = srvs.hNetrShareEnum(dce, 1)
    c = r['InfoStruct']['ShareInfo']['Level1']
    print('ENUM1', r['TotalEntries'], c['EntriesRead'], r['ErrorCode'])
    for e in c['Buffer']:
        print('SHARE', e['shi1_netname'][:-1], hex(e['shi1_type']), e['shi1_remark'][:-1])
    r = srvs.hNetrShareEnum(dce, 2)
    print('ENUM2', r['InfoStruct']['ShareInfo']['Level2']['Buffer'][0]['shi2_path'][:-1])
    r = srvs.hNetrShareGetInfo(dce, 'share-005', 2)
    print('GET2', r['InfoStruct']['ShareInfo2']['shi2_netname'][:-1], r['InfoStruct']['ShareInfo2']['shi2_path'][:-1])
    r = srvs.hNetrShareGetInfo(dce, 'IPC$', 501)
    print('GET501', r['InfoStruct']['ShareInfo501']['shi501_netname'][:-1])
    r = srvs.hNetrShareGetInfo(dce, 'IPC$', 1005)
    print('GET1005', r['InfoStruct']['ShareInfo1005']['shi1005_flags'])
    try:
        srvs.hNetrShareGetInfo(dce, 'nothere', 1)
        print('GETMISSING ok?!')
    except Exception as e:
        print('GETMISSING', e.get_error_code() if hasattr(e, 'get_error_code') else e)
    r = srvs.hNetrServerGetInfo(dce, 101)
    i = r['InfoStruct']['ServerInfo101']
    print('SRV101', i['sv101_name'][:-1], i['sv101_platform_id'], i['sv101_version_major'], hex(i['sv101_type']))
else:
    dce.bind(wkst.MSRPC_UUID_WKST)
    r = wkst.hNetrWkstaGetInfo(dce, 100)
    i = r['WkstaInfo']['WkstaInfo100']
    print('WKSTA100', i['wki100_computername'][:-1], i['wki100_langroup'][:-1])
dce.disconnect()
"#;

fn have_impacket() -> bool {
    Command::new("python3")
        .args(["-c", "import impacket.dcerpc.v5.srvs"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn impacket(port: u16, which: &str) -> String {
    let o = Command::new("python3")
        .args(["-c", IMPACKET_SCRIPT, &port.to_string(), which])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "impacket failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn impacket_srvsvc_and_wkssvc() {
    if !have_impacket() {
        eprintln!("SKIPPED impacket_srvsvc_and_wkssvc: python3 impacket is not installed");
        return;
    }
    let port = serve("srvsvc", shares());
    let out = impacket(port, "srvsvc");
    println!("{out}");
    assert!(out.contains("ENUM1 151 151 0"), "{out}");
    let names: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("SHARE "))
        .collect();
    assert_eq!(names.len(), 151);
    assert_eq!(names[0], "share-000 0x0 comment 0");
    assert_eq!(names[150], "IPC$ 0x80000003 IPC Service");
    assert!(out.contains("ENUM2 /srv/x"));
    assert!(out.contains("GET2 share-005 /srv/x"));
    assert!(out.contains("GET501 IPC$"));
    assert!(out.contains("GET1005 0"));
    assert!(out.contains("GETMISSING 2310"), "{out}");
    assert!(out.contains("SRV101 SMBX 500 10 0x9003"));

    let port = serve("wkssvc", shares());
    let out = impacket(port, "wkssvc");
    assert!(out.contains("WKSTA100 SMBX WORKGROUP"), "{out}");
}
