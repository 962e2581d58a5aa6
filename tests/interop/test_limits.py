"""Hostile clients against descriptor limits and anonymous access (issue 10,
items 4 and 7), each against a real ``smbx serve``:

* ``max open files``: the 51st open of a session (or of a connection holding
  two sessions) with ``max open files = 50`` gets STATUS_TOO_MANY_OPENED_FILES,
  closing one lets the next succeed, and another user is served meanwhile;
* descriptor exhaustion: under ``prlimit --nofile=64:64`` one client holds as
  many opens as the server can make; the server keeps soft = hard = 64, does
  not spin in its accept loop (CPU time over 5 s of refused connections stays
  small, the failure is logged once per burst, waiting clients are closed
  rather than left hanging), and serves a new client once the opens close;
* ``restrict anonymous`` 0 / 1 / 2 (smbclient -N -L and impacket's srvsvc
  NetShareEnumAll): share paths only for ``admin users``; 1 refuses share
  enumeration to anonymous with ERROR_ACCESS_DENIED but not to alice; 2 refuses
  the anonymous logon with STATUS_ACCESS_DENIED.

An anonymous session staying under ``unauthenticated timeout`` is shown by
test_resource_bounds.py (test_anonymous_logon_stays_under_the_unauthenticated_timeout).

Every loop is bounded in count and time.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

import rawsmb as r
from conftest import PASSWORD, USER, USER2, PASSWORD2, _cleanup, smbx_bin, start_smbx
from helpers import smbclient, smbclient_eventually
from impacket.nt_errors import STATUS_ACCESS_DENIED, STATUS_TOO_MANY_OPENED_FILES

ADMIN = "boss"
ADMIN_PASSWORD = "Boss-Passw0rd!"
LIMIT = 50


def _logon(server, user=USER, password=PASSWORD, conn: r.RawConn | None = None) -> r.RawConn:
    """A session of ``user`` (a new connection, or another session on ``conn``)
    with the tree ``share`` connected."""
    if conn is None:
        conn = r.RawConn(server.host, server.port)
        conn.negotiate((0x0300, 0x0302))
    conn.session_id = 0
    conn.tree_id = 0
    conn.guest_session(user, password)
    conn.tree_connect(server.unc("share"))
    return conn


def _open(conn: r.RawConn, name: str) -> tuple[int, bytes]:
    """CREATE (open-if) ``name``; returns (status, FileId)."""
    status, resp = conn.request(r.CREATE, r.create_body(name, disposition=3, options=0x40))
    return status, resp[64 + 64 : 64 + 80]


def _close(conn: r.RawConn, fid: bytes) -> None:
    status, _ = conn.request(r.CLOSE, r.close_body(fid))
    assert status == r.STATUS_SUCCESS, hex(status)


# ---- max open files ------------------------------------------------------------


@pytest.fixture(scope="module")
def limited():
    s = start_smbx(
        extra_global=f"    max open files = {LIMIT}",
        users=((USER, PASSWORD), (USER2, PASSWORD2)),
    )
    yield s
    _cleanup(s)


def test_open_limit_per_session(limited):
    conn = _logon(limited)
    fids = []
    for i in range(LIMIT):
        status, fid = _open(conn, f"s{i}.txt")
        assert status == r.STATUS_SUCCESS, f"open {i}: {status:#x}"
        fids.append(fid)
    status, _ = _open(conn, "one-too-many.txt")
    assert status == STATUS_TOO_MANY_OPENED_FILES, hex(status)
    # Refused before anything was created.
    assert not (limited.share_dir / "one-too-many.txt").exists()
    # Another user is served meanwhile, opens included.
    other = _logon(limited, USER2, PASSWORD2)
    status, fid = _open(other, "bob.txt")
    assert status == r.STATUS_SUCCESS, hex(status)
    _close(other, fid)
    other.close()
    # Closing one makes room for exactly one more.
    _close(conn, fids.pop())
    status, fid = _open(conn, "one-more.txt")
    assert status == r.STATUS_SUCCESS, hex(status)
    fids.append(fid)
    status, _ = _open(conn, "again-too-many.txt")
    assert status == STATUS_TOO_MANY_OPENED_FILES, hex(status)
    for fid in fids:
        _close(conn, fid)
    conn.close()
    limited.check_healthy()


def test_open_limit_per_connection(limited):
    """Two sessions on one connection share the connection's limit."""
    conn = _logon(limited)
    first = (conn.session_id, conn.tree_id)
    half = LIMIT // 2
    for i in range(half):
        status, _ = _open(conn, f"c1-{i}.txt")
        assert status == r.STATUS_SUCCESS, f"open {i}: {status:#x}"
    _logon(limited, USER2, PASSWORD2, conn=conn)
    for i in range(LIMIT - half):
        status, _ = _open(conn, f"c2-{i}.txt")
        assert status == r.STATUS_SUCCESS, f"open {i}: {status:#x}"
    status, _ = _open(conn, "c2-too-many.txt")
    assert status == STATUS_TOO_MANY_OPENED_FILES, hex(status)
    conn.session_id, conn.tree_id = first
    status, _ = _open(conn, "c1-too-many.txt")
    assert status == STATUS_TOO_MANY_OPENED_FILES, hex(status)
    conn.close()
    # The connection's opens went with it: a new connection opens freely.
    fresh = _logon(limited)
    status, fid = _open(fresh, "fresh.txt")
    assert status == r.STATUS_SUCCESS, hex(status)
    _close(fresh, fid)
    fresh.close()
    limited.check_healthy()


# ---- descriptor exhaustion -----------------------------------------------------

NOFILE = 64


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _nofile_limits(pid: int) -> tuple[str, str]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return soft, hard
    raise AssertionError("no 'Max open files' line")


@pytest.fixture()
def starved(tmp_path, monkeypatch):
    """smbx under ``prlimit --nofile=64:64`` (a wrapper named as SMBX_BIN, so
    ``user add`` and ``serve`` both run through it; prlimit execs smbx, so the
    server keeps the pid)."""
    wrapper = tmp_path / "smbx-prlimit"
    wrapper.write_text(f'#!/bin/sh\nexec prlimit --nofile={NOFILE}:{NOFILE} "{smbx_bin()}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SMBX_BIN", str(wrapper))
    s = start_smbx(extra_global="    log level = 1")
    yield s
    _cleanup(s)


def _closed_by_server(sock: socket.socket, wait_s: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) within ``wait_s``."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_descriptor_exhaustion(starved):
    pid = starved.pid
    assert _nofile_limits(pid) == (str(NOFILE), str(NOFILE))
    holder = _logon(starved)
    fids = []
    refused = 0
    for i in range(4 * NOFILE):  # bounded: the server cannot hold more than NOFILE
        status, fid = _open(holder, f"h{i}.txt")
        if status == r.STATUS_SUCCESS:
            fids.append(fid)
            continue
        assert status == STATUS_TOO_MANY_OPENED_FILES, f"open {i}: {status:#x}"
        refused += 1
        if refused >= 3:
            break
    assert refused >= 3, "the server never ran out of descriptors"
    assert len(fids) > NOFILE // 2
    assert _fd_count(pid) <= NOFILE

    # Out of descriptors: new connections come and go; the accept loop neither
    # spins nor leaves them hanging, and logs the burst once.
    cpu0 = _cpu_seconds(pid)
    t0 = time.monotonic()
    waiting = []
    closed = 0
    while time.monotonic() - t0 < 5.0 and len(waiting) < 40:
        s = socket.create_connection((starved.host, starved.port), timeout=5)
        if _closed_by_server(s, 0.5):
            closed += 1
            s.close()
        else:
            waiting.append(s)  # a descriptor was free for it: it is served
    elapsed = time.monotonic() - t0
    if elapsed < 5.0:
        time.sleep(5.0 - elapsed)
    cpu = _cpu_seconds(pid) - cpu0
    assert cpu < 2.0, f"the server used {cpu:.2f} s of CPU in 5 s while out of descriptors"
    assert closed >= 1, "no waiting connection was closed while out of descriptors"
    assert _fd_count(pid) <= NOFILE
    log = starved.log_text()
    bursts = log.count("accept failed")
    assert 1 <= bursts <= 3, f"{bursts} 'accept failed' lines (one per burst expected)"
    for s in waiting:
        s.close()

    # The holder lets go: a new client is served.
    for fid in fids:
        _close(holder, fid)
    holder.close()
    res = smbclient_eventually(starved, "share", "ls", within_s=10)
    assert res.ok(), res.describe()
    assert "h0.txt" in res.output
    starved.check_healthy()


# ---- restrict anonymous and share paths ----------------------------------------


def _anon_smbclient_list(server) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["smbclient", "-N", "-L", f"//{server.host}", "-p", str(server.port), "-t", "30"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _share_enum(server, user: str, password: str, level: int = 2):
    """impacket srvsvc NetrShareEnum (NetShareEnumAll) at ``level``: a list of
    (name, path) for level 2, or the DCERPCException raised."""
    from impacket.dcerpc.v5 import srvs, transport
    from impacket.smbconnection import SMBConnection

    c = SMBConnection(server.host, server.host, sess_port=server.port)
    c.login(user, password)
    try:
        t = transport.SMBTransport(server.host, server.port, r"\srvsvc", smb_connection=c)
        d = t.get_dce_rpc()
        d.connect()
        d.bind(srvs.MSRPC_UUID_SRVS)
        try:
            resp = srvs.hNetrShareEnum(d, level)
        except Exception as e:  # DCERPCSessionError carries the WERROR
            return e
        if level != 2:
            return resp
        rows = resp["InfoStruct"]["ShareInfo"]["Level2"]["Buffer"]
        return [(row["shi2_netname"].rstrip("\0"), row["shi2_path"].rstrip("\0")) for row in rows]
    finally:
        c.logoff()


def _anon_server(restrict: int):
    return start_smbx(
        extra_global=f"    restrict anonymous = {restrict}\n    admin users = {ADMIN}",
        users=((USER, PASSWORD), (ADMIN, ADMIN_PASSWORD)),
    )


def test_share_paths_only_for_admins():
    server = _anon_server(0)
    try:
        res = _anon_smbclient_list(server)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "share" in res.stdout and "public" in res.stdout

        for user, password in (("", ""), (USER, PASSWORD)):
            rows = _share_enum(server, user, password)
            assert isinstance(rows, list), rows
            names = {n for n, _ in rows}
            assert {"share", "public", "IPC$"} <= names
            assert all(p == "" for _, p in rows), f"{user or 'anonymous'} saw paths: {rows}"

        rows = _share_enum(server, ADMIN, ADMIN_PASSWORD)
        assert isinstance(rows, list), rows
        paths = dict(rows)
        assert paths["share"] == str(server.share_dir), rows
        server.check_healthy()
    finally:
        _cleanup(server)


def test_restrict_anonymous_1_refuses_enumeration():
    server = _anon_server(1)
    try:
        err = _share_enum(server, "", "")
        assert not isinstance(err, list), f"anonymous enumerated shares: {err}"
        assert getattr(err, "error_code", None) == 5, repr(err)  # ERROR_ACCESS_DENIED
        res = _anon_smbclient_list(server)
        assert "public" not in res.stdout, res.stdout
        # A real user still may.
        rows = _share_enum(server, USER, PASSWORD)
        assert isinstance(rows, list) and {"share", "public"} <= {n for n, _ in rows}, rows
        res = smbclient(server, None, list_shares=True)
        assert "public" in res.output, res.describe()
        server.check_healthy()
    finally:
        _cleanup(server)


def test_restrict_anonymous_2_refuses_anonymous_logons():
    from impacket.smbconnection import SessionError, SMBConnection

    server = _anon_server(2)
    try:
        c = SMBConnection(server.host, server.host, sess_port=server.port)
        with pytest.raises(SessionError) as e:
            c.login("", "")
        assert e.value.getErrorCode() == STATUS_ACCESS_DENIED, hex(e.value.getErrorCode())
        res = _anon_smbclient_list(server)
        assert res.returncode != 0
        assert "NT_STATUS_ACCESS_DENIED" in res.stdout + res.stderr, res.stdout + res.stderr
        # Users log on as before.
        res = smbclient(server, "share", "ls")
        assert res.ok(), res.describe()
        server.check_healthy()
    finally:
        _cleanup(server)
