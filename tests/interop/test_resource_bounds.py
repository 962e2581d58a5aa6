"""Hostile clients against resource bounds (issue 10, items 1 and 3), each
against a real ``smbx serve``:

* a flood of SESSION_SETUPs with SessionId 0 (new logons that never finish)
  is refused beyond a small number per connection and per server, with
  STATUS_INSUFFICIENT_RESOURCES, and the server's memory stays flat;
* the unauthenticated timeout counts from the connection's start whatever the
  traffic (an ECHO every half second does not keep it open), for anonymous
  logons too;
* a client that sends 1 MiB READs and never reads its socket makes the server
  stop reading it once a bounded amount of responses is queued: resident
  memory stays bounded (it reached 4.2 GB before), another client is served
  meanwhile, and closing the connection gives it back.

Every loop is bounded in count and time.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

import rawsmb as r
from conftest import PASSWORD, USER, _cleanup, start_smbx
from helpers import smbclient, smbclient_eventually
from impacket.nt_errors import STATUS_INSUFFICIENT_RESOURCES

MIB = 1 << 20


def _ntlm_negotiate() -> bytes:
    import spnego

    return spnego.client("x", "y", hostname="127.0.0.1", protocol="ntlm").step()


def _ntlm_anonymous_authenticate() -> bytes:
    """An NTLM AUTHENTICATE for a null session ([MS-NLMP] 3.2.5.1.2): empty user,
    domain and NT response, a single zero byte of LM response."""
    flags = 0x00000001 | 0x00000200 | 0x00000800  # UNICODE | NTLM | ANONYMOUS
    off = 64
    lm = b"\0"
    fields = struct.pack("<HHI", len(lm), len(lm), off)  # LmChallengeResponse
    for _ in range(5):  # NtChallengeResponse, Domain, User, Workstation, session key
        fields += struct.pack("<HHI", 0, 0, off + len(lm))
    return b"NTLMSSP\0" + struct.pack("<I", 3) + fields + struct.pack("<I", flags) + lm


def _wait_closed(conn: r.RawConn, send_echo: bool, limit_s: float) -> float:
    """Sends ECHO every 0.5 s (or nothing) until the server closes the
    connection; returns the seconds it took, or fails after ``limit_s``."""
    t0 = time.monotonic()
    conn.sock.settimeout(0.5)
    while time.monotonic() - t0 < limit_s:
        try:
            if send_echo:
                msg_id = conn.msg_id
                conn.msg_id += 1
                conn.send_raw(r.frame(r.header(r.ECHO, msg_id=msg_id, session_id=conn.session_id, credits=1) + r.echo_body()))
            try:
                data = conn.sock.recv(65536)
                if not data:
                    return time.monotonic() - t0
            except socket.timeout:
                pass
        except (ConnectionError, OSError):
            return time.monotonic() - t0
        time.sleep(0.2 if send_echo else 0)
    pytest.fail(f"the server kept the connection open for {limit_s} s")


@pytest.fixture(scope="module")
def server():
    s = start_smbx(extra_global="    unauthenticated timeout = 4\n    log level = 1")
    yield s
    _cleanup(s)


def _logged_on(server, dialects=(0x0300, 0x0302)) -> r.RawConn:
    c = r.RawConn(server.host, server.port)
    c.negotiate(dialects)
    c.guest_session(USER, PASSWORD)
    return c


def test_logon_flood_is_bounded(server):
    """One connection opening thousands of logons: only a few are kept."""
    idle = server.rss_kib()
    token = _ntlm_negotiate()
    conn = r.RawConn(server.host, server.port)
    conn.negotiate()
    statuses = {}
    # Pipelined in batches of 50 (NEGOTIATE granted 64 credits; every response
    # grants 8 more): 3,000 new logons in well under the timeout.
    for _batch in range(60):
        out = b""
        for _ in range(50):
            out += r.frame(r.header(r.SESSION_SETUP, msg_id=conn.msg_id, credits=8) + r.session_setup_body(token))
            conn.msg_id += 1
        conn.send_raw(out)
        for _ in range(50):
            resp = conn.recv_frame()
            st = struct.unpack_from("<I", resp, 8)[0]
            statuses[st] = statuses.get(st, 0) + 1
    assert statuses.get(r.STATUS_MORE_PROCESSING_REQUIRED) == 16, statuses
    assert statuses.get(STATUS_INSUFFICIENT_RESOURCES) == 3000 - 16, statuses
    grown = server.rss_kib() - idle
    print(f"logon flood: {statuses}, server RSS +{grown} KiB")
    assert grown < 16 * 1024, f"server grew by {grown} KiB during the flood"
    # Someone else still logs on while the flooding connection is open.
    res = smbclient(server, "share", "ls")
    assert res.ok(), res.describe()
    conn.close()


def test_server_wide_logon_bound(server):
    """Logons in progress are bounded server-wide too; closing the
    connections that hold them frees the slots."""
    token = _ntlm_negotiate()
    conns = []
    refused = 0
    try:
        # 70 connections x 16 logons > the server-wide bound of 1024.
        for _ in range(70):
            c = r.RawConn(server.host, server.port)
            c.negotiate()
            out = b""
            for _ in range(16):
                out += r.frame(r.header(r.SESSION_SETUP, msg_id=c.msg_id, credits=8) + r.session_setup_body(token))
                c.msg_id += 1
            c.send_raw(out)
            for _ in range(16):
                st = struct.unpack_from("<I", c.recv_frame(), 8)[0]
                if st == STATUS_INSUFFICIENT_RESOURCES:
                    refused += 1
                else:
                    assert st == r.STATUS_MORE_PROCESSING_REQUIRED, hex(st)
            conns.append(c)
        assert refused == 70 * 16 - 1024, refused
    finally:
        for c in conns:
            c.close()
    # The slots come back once those connections are gone.
    res = smbclient_eventually(server, "share", "ls", within_s=20)
    assert res.ok(), res.describe()


def test_unauthenticated_timeout_counts_from_the_start(server):
    """An ECHO every half second does not keep an unauthenticated connection
    open past `unauthenticated timeout` (4 s here)."""
    conn = r.RawConn(server.host, server.port)
    conn.negotiate()
    took = _wait_closed(conn, send_echo=True, limit_s=30)
    assert took >= 2, f"closed after {took:.1f} s, before the timeout"


def test_anonymous_logon_stays_under_the_unauthenticated_timeout(server):
    """An anonymous session does not lift the connection to the idle limit."""
    conn = r.RawConn(server.host, server.port)
    conn.negotiate()
    status, resp = conn.request(r.SESSION_SETUP, r.session_setup_body(_ntlm_negotiate()))
    assert status == r.STATUS_MORE_PROCESSING_REQUIRED, hex(status)
    conn.session_id = struct.unpack_from("<Q", resp, 40)[0]
    status, resp = conn.request(r.SESSION_SETUP, r.session_setup_body(_ntlm_anonymous_authenticate()))
    assert status == r.STATUS_SUCCESS, hex(status)
    flags = struct.unpack_from("<H", resp, 64 + 2)[0]
    assert flags & 0x0002, "expected SMB2_SESSION_FLAG_IS_NULL"
    took = _wait_closed(conn, send_echo=True, limit_s=30)
    assert took >= 1


def test_user_logon_ends_the_unauthenticated_timeout(server):
    """The other side of the bound: a logged-on connection outlives it."""
    conn = _logged_on(server)
    conn.sock.settimeout(2)
    for _ in range(8):  # 8 s, twice the timeout
        status, _ = conn.request(r.ECHO, r.echo_body())
        assert status == r.STATUS_SUCCESS
        time.sleep(1)
    conn.close()


def _read_pdu(conn: r.RawConn, fid: bytes, msg_id: int, length: int) -> bytes:
    charge = (length + 65535) // 65536
    return r.frame(
        r.header(
            r.READ,
            msg_id=msg_id,
            session_id=conn.session_id,
            tree_id=conn.tree_id,
            credits=charge,
            credit_charge=charge,
        )
        + r.read_body(fid, length, 0)
    )


def test_uncollected_reads_are_bounded(server):
    """2,200 one-MiB READs from a client that never reads its socket."""
    server.share_dir.joinpath("big.bin").write_bytes(b"\x5a" * MIB)
    conn = _logged_on(server)
    # Collect a full window of credits first (the server grants up to 8192):
    # 512 one-MiB READs fit in it without waiting for a single response.
    conn.send_raw(r.frame(r.header(r.ECHO, msg_id=conn.msg_id, session_id=conn.session_id, credits=8000) + r.echo_body()))
    conn.msg_id += 1
    assert struct.unpack_from("<I", conn.recv_frame(), 8)[0] == r.STATUS_SUCCESS
    conn.tree_connect(server.unc("share"))
    status, resp = conn.request(r.CREATE, r.create_body("big.bin", disposition=1, access=0x00120089))
    assert status == r.STATUS_SUCCESS, hex(status)
    fid = resp[64 + 64 : 64 + 80]
    idle = server.rss_kib()

    sent = 0
    peak = idle
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.is_set():
            try:
                peak = max(peak, server.rss_kib())
            except (OSError, RuntimeError):
                return
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    conn.sock.settimeout(5)
    try:
        # 2,200 requests (250 KB) fit in the socket buffers: all are sent.
        for _ in range(2200):
            conn.send_raw(_read_pdu(conn, fid, conn.msg_id, MIB))
            conn.msg_id += 16
            sent += 1
    except (socket.timeout, OSError):
        pass
    # Let the server settle at its bound, then check the others are served.
    time.sleep(1)
    res = smbclient(server, "share", "ls")
    assert res.ok(), res.describe()
    during = server.rss_kib()
    stop.set()
    sampler.join()
    print(f"uncollected READs: {sent} sent, server RSS idle {idle} KiB, peak +{peak - idle} KiB")
    # The connection budget is about 32 MiB of responses (4 maximum PDUs).
    assert peak - idle < 64 * 1024, f"server grew by {(peak - idle) // 1024} MiB with {sent} READs uncollected"
    conn.close()
    # Memory goes back once the connection is gone (the allocator may keep
    # some: at most the budget).
    deadline = time.monotonic() + 10
    while server.rss_kib() - idle > 48 * 1024 and time.monotonic() < deadline:
        time.sleep(0.2)
    after = server.rss_kib()
    assert after - idle <= 48 * 1024, f"after close: {after - idle} KiB above idle (during: {during - idle})"
    res = smbclient(server, "share", "ls")
    assert res.ok(), res.describe()
