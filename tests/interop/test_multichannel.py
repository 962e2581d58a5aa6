"""Multichannel over three real links: the topology of bench/multichannel.sh (a network
namespace joined by three veth pairs, each shaped with tc), the server in the namespace
advertising its three addresses (``interfaces`` with speed and RSS), and ``smbx bench
--multichannel 3`` from outside reading and writing 512 KiB blocks.

Asserted, against smbx and against Samba's smbd given the same ``interfaces`` line: the
session has three channels, one to each address (so each over its own veth pair), and every
one of them carried at least 4 MiB. Never a rate: the benchmark script prints those. With
SMB Direct on one link (smbx), that link's channel is SMB Direct and the others TCP. And the
client commands' ``--multichannel 3``: put and get bind two further channels each.
Needs root (namespaces, tc); the namespace and links are removed afterwards.
"""

import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT, USER, _cleanup, smbx_bin, start_samba, start_smbx

SCRIPT = REPO_ROOT / "bench" / "multichannel.sh"
NET = "10.232"  # bench/multichannel.sh uses 10.231: both may run at once
ADDRS = [f"{NET}.{n}.2" for n in (1, 2, 3)]
SPEED = 200_000_000
LINE = " ".join(f'"{a};speed={SPEED},capability=RSS"' for a in ADDRS)
MIB = 1 << 20
BOUND_S = 120


@pytest.fixture(scope="module")
def links():
    """The namespace and its three shaped links (200 Mbit/s each way)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace, tc)")
    ns, tag = f"smbxmct{os.getpid()}", f"t{os.getpid() % 100000}"
    env = dict(os.environ, RATE_MBIT=str(SPEED // 1_000_000))
    up = subprocess.run(
        ["bash", str(SCRIPT), "up", ns, tag, NET], env=env, capture_output=True, text=True, timeout=BOUND_S
    )
    try:
        assert up.returncode == 0, f"topology: {up.stdout}{up.stderr}"
        yield ns
    finally:
        subprocess.run(["bash", str(SCRIPT), "down", ns, tag], capture_output=True, timeout=BOUND_S)


def bench(port: int, password: str, write: bool) -> dict:
    """One ``smbx bench`` run with three channels against data.bin; its JSON target."""
    url = f"smb://{USER}@{ADDRS[0]}:{port}/share/data.bin"
    cmd = [str(smbx_bin()), "bench", "-b512K", "-s", "-o8", "-t1", "-d2", "-W0", "-C0"]
    cmd += ["-w100"] if write else []
    cmd += ["--multichannel", "3", "-Rjson", url]
    env = dict(os.environ, SMBX_PASSWORD=password)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BOUND_S)
    assert r.returncode == 0, f"smbx bench: {r.stderr}"
    return json.loads(r.stdout)["targets"][0]


def check_three_channels(target: dict, port: int) -> None:
    chans = target["channels"]
    addrs = sorted(c["address"] for c in chans)
    assert addrs == sorted(f"{a}:{port}" for a in ADDRS), chans
    for c in chans:
        assert c["live"], c
        assert c["bytes"] >= 4 * MIB, f"channel {c['address']} carried only {c['bytes']} bytes: {chans}"
        assert c["link_speed"] == SPEED, c


@pytest.mark.parametrize("kind", ["smbx", "samba"])
def test_three_links_all_carry_data(links, kind):
    if kind == "smbx":
        server = start_smbx(interfaces=LINE, netns=links, wait_host=ADDRS[0])
    else:
        server = start_samba(interfaces=LINE, netns=links, wait_host=ADDRS[0])
    try:
        data = server.share_dir / "data.bin"
        data.write_bytes(os.urandom(64 * MIB))
        os.chown(data, *_uid_gid(USER))
        for write in (False, True):
            check_three_channels(bench(server.port, server.password, write), server.port)
        server.check_healthy()
    finally:
        _cleanup(server)


def test_one_link_by_smb_direct(links):
    """smbx with SMB Direct on link 2 alone (its entry marked capability=RDMA): the TCP
    logon on link 1 binds an SMB Direct channel to link 2 and a TCP one to link 3, and all
    three carry reads and writes."""
    line = " ".join(
        f'"{a};speed={SPEED},capability=RSS{",capability=RDMA" if i == 1 else ""}"' for i, a in enumerate(ADDRS)
    )
    server = start_smbx(
        interfaces=line, netns=links, wait_host=ADDRS[0], extra_global="    smb direct = yes\n    smb direct port = 5445\n"
    )
    try:
        data = server.share_dir / "data.bin"
        data.write_bytes(os.urandom(64 * MIB))
        os.chown(data, *_uid_gid(USER))
        for write in (False, True):
            chans = bench(server.port, server.password, write)["channels"]
            addrs = sorted(c["address"] for c in chans)
            want = [f"{ADDRS[0]}:{server.port}", f"{ADDRS[1]}:5445", f"{ADDRS[2]}:{server.port}"]
            assert addrs == sorted(want), chans
            for c in chans:
                assert c["live"] and c["bytes"] >= 4 * MIB, chans
        server.check_healthy()
    finally:
        _cleanup(server)


def test_client_commands_take_multichannel(links, tmp_path):
    """`smbx put` and `smbx get` with --multichannel 3: each session binds a channel to
    each of the two other addresses (the server logs every binding at log level 1), the
    bytes survive."""
    server = start_smbx(interfaces=LINE, netns=links, wait_host=ADDRS[0], extra_global="    log level = 1\n")
    try:
        src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
        src.write_bytes(os.urandom(16 * MIB))
        url = f"smb://{USER}@{ADDRS[0]}:{server.port}/share/cli.bin"
        env = dict(os.environ, SMBX_PASSWORD=server.password)
        for args in (["put", str(src), url], ["get", url, str(dst)]):
            r = subprocess.run(
                [str(smbx_bin()), args[0], "--multichannel", "3", *args[1:]], env=env, capture_output=True, text=True, timeout=BOUND_S
            )
            assert r.returncode == 0, f"smbx {args[0]}: {r.stderr}"
        assert dst.read_bytes() == src.read_bytes()
        assert (server.share_dir / "cli.bin").read_bytes() == src.read_bytes()
        assert server.log_text().count("channel bound to session") == 4, server.log_text()[-3000:]
        server.check_healthy()
    finally:
        _cleanup(server)


def _uid_gid(user: str) -> tuple:
    import pwd

    p = pwd.getpwnam(user)
    return p.pw_uid, p.pw_gid
