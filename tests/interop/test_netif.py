"""FSCTL_QUERY_NETWORK_INTERFACE_INFO with Samba's per-interface options, read by
a real peer (smbprotocol's SMB2NetworkInterfaceInfo), from smbx and from Samba's
smbd given the same ``interfaces`` line.

The line names the two loopback addresses every host has (127.0.0.1 and ::1), each
with its own speed and capabilities, quoted as Samba writes them: both servers must
advertise exactly those (smbx in the order of the line). smbx with SMB Direct on advertises
RDMA_CAPABLE on the addresses its SMB Direct listeners are bound to.
"""

import socket
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.ioctl import (
    CtlCode,
    IfCapability,
    IOCTLFlags,
    SMB2IOCTLRequest,
    SMB2IOCTLResponse,
    SMB2NetworkInterfaceInfo,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import PASSWORD, USER, _cleanup, free_port, start_samba, start_smbx

LINE = '"127.0.0.1;speed=10000000000,capability=RSS" "::1;speed=2500000000,capability=RDMA,capability=RSS"'
RSS = int(IfCapability.RSS_CAPABLE)
RDMA = int(IfCapability.RDMA_CAPABLE)


def query_interfaces(port: int) -> list:
    """(address, link speed, capability bits) of every advertised interface."""
    conn = Connection(uuid.uuid4(), "127.0.0.1", port, require_signing=True)
    conn.connect(timeout=10)
    try:
        session = Session(conn, USER, PASSWORD)
        session.connect()
        tree = TreeConnect(session, r"\\127.0.0.1\share")
        tree.connect()
        req = SMB2IOCTLRequest()
        req["ctl_code"] = CtlCode.FSCTL_QUERY_NETWORK_INTERFACE_INFO
        req["file_id"] = b"\xff" * 16
        req["max_output_response"] = 65536
        req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
        request = conn.send(req, sid=session.session_id, tid=tree.tree_connect_id)
        response = conn.receive(request)
        ioctl = SMB2IOCTLResponse()
        ioctl.unpack(response["data"].get_value())
        out = []
        for info in SMB2NetworkInterfaceInfo.unpack_multiple(ioctl["buffer"].get_value()):
            addr = info["sock_addr_storage"].get_value()
            family = addr["family"].get_value()
            buf = addr["buffer"].get_value()
            if family == 0x2:
                ip = socket.inet_ntop(socket.AF_INET, buf["ipv4_address"].get_value())
            else:
                ip = socket.inet_ntop(socket.AF_INET6, buf["ipv6_address"].get_value())
            out.append((ip, info["link_speed"].get_value(), int(info["capability"].get_value())))
        session.disconnect()
        return out
    finally:
        conn.disconnect()


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


EXPECTED = [
    ("127.0.0.1", 10_000_000_000, RSS),
    ("::1", 2_500_000_000, RSS | RDMA),
]


@pytest.fixture(scope="module", autouse=True)
def _needs_ipv6_loopback():
    if not ipv6_loopback():
        pytest.fail("this host has no ::1 (the test needs both loopback addresses)")


@pytest.mark.parametrize("kind", ["smbx", "samba"])
def test_same_interfaces_line_same_answer(kind):
    server = start_smbx(interfaces=LINE) if kind == "smbx" else start_samba(interfaces=LINE)
    try:
        got = query_interfaces(server.port)
        server.check_healthy()
    finally:
        server.stop()
        _cleanup(server)
    # The same entries; their order is not part of the protocol (smbx keeps the order
    # of the line, Samba 4.17 lists ::1 first).
    assert sorted(got) == sorted(EXPECTED), f"{kind} advertised {got}"
    if kind == "smbx":
        assert got == EXPECTED, got


def test_smbx_smb_direct_listeners_are_rdma_capable():
    # SMB Direct listens on both bound addresses: both are RDMA_CAPABLE, and the
    # configured speeds and RSS stay.
    server = start_smbx(
        interfaces='"127.0.0.1;speed=10000000000,capability=RSS" ::1',
        extra_global=f"    smb direct = yes\n    smb direct port = {free_port()}\n",
    )
    try:
        got = query_interfaces(server.port)
        server.check_healthy()
    finally:
        server.stop()
        _cleanup(server)
    assert got == [
        ("127.0.0.1", 10_000_000_000, RSS | RDMA),
        ("::1", 10_000_000_000, RDMA),
    ], got


def test_smbx_refuses_a_bad_option_naming_the_line(tmp_path):
    import subprocess

    from conftest import smbx_bin, smbx_conf

    conf = tmp_path / "smb.conf"
    conf.write_text(smbx_conf(tmp_path, 4455, interfaces='"127.0.0.1;speed=fast"'))
    line = next(i for i, l in enumerate(conf.read_text().splitlines(), 1) if "interfaces" in l)
    r = subprocess.run(
        [str(smbx_bin()), "serve", "--config", str(conf)], capture_output=True, text=True, timeout=30
    )
    assert r.returncode != 0
    assert f"{conf}:{line}:" in r.stderr + r.stdout, r.stderr + r.stdout
    assert 'speed "fast"' in r.stderr + r.stdout
