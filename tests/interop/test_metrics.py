"""The Prometheus endpoint (`metrics listen`), scraped with a real Prometheus
text-format parser (prometheus_client's ``text_string_to_metric_families``):

* the exact requests an smbprotocol client sends are counted by command and
  status, with their bytes and latencies;
* scraped during ``smbx bench`` runs over TCP and over SMB Direct, the counters
  agree with the I/O counts of the bench's JSON report, and the SMB Direct
  gauges (queue pairs, registered memory, channels) show the connection while
  it lasts;
* malformed HTTP gets an error status or a close, never a hang;
* without the option no port is bound; a bad value or a busy port is refused
  at start with a message naming it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import EndOfFile, SMBOSError, SMBResponseException
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FileAttributes,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import USER, _cleanup, free_port, smbx_bin, start_smbx, wait_for_port

pytestmark = pytest.mark.skipif(
    os.environ.get("SMBX_INTEROP_SERVER", "smbx") == "samba",
    reason="the metrics endpoint is smbx's",
)

BLOCK = 64 * 1024
BENCH_FILE_MIB = 16
# Bound on any wait here (the tests assert behaviour, not speed).
BOUND_S = 60.0


class Scrape(dict):
    """One scrape: (sample name, frozenset of labels) -> value; ``types`` maps
    each family to its declared type."""

    types: dict

    def get(self, name: str, **labels) -> float:
        return self[(name, frozenset(labels.items()))]

    def value(self, name: str, **labels) -> float:
        """The sample's value, 0 when absent (a status not seen yet)."""
        return super().get((name, frozenset(labels.items())), 0.0)


def scrape(url: str) -> Scrape:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = r.read().decode()
    out = Scrape()
    out.types = {}
    for family in text_string_to_metric_families(text):
        out.types[family.name] = family.type
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


@pytest.fixture(scope="module")
def metered():
    """smbx with `metrics listen` and SMB Direct; yields (server, url, direct port)."""
    mport, dport = free_port(), free_port()
    server = start_smbx(
        extra_global=(
            f"    metrics listen = 127.0.0.1:{mport}\n"
            f"    smb direct = yes\n"
            f"    smb direct port = {dport}\n"
        )
    )
    try:
        wait_for_port(mport, server.proc)
        wait_for_port(dport, server.proc)
        data = server.share_dir / "bench.bin"
        data.write_bytes(os.urandom(BENCH_FILE_MIB * 1024 * 1024))
        shutil.chown(data, user=USER)
        yield server, f"http://127.0.0.1:{mport}/metrics", dport
        server.check_healthy()
    finally:
        _cleanup(server)


def _open(tree, name, disposition):
    fh = Open(tree, name)
    fh.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        FileAttributes.FILE_ATTRIBUTE_NORMAL,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
        disposition,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    return fh


def _delta(after: Scrape, before: Scrape, name: str, **labels) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


def test_families_and_types(metered):
    _, url, _ = metered
    m = scrape(url)
    want = {
        # prometheus_client names counter families without "_total".
        "smbx_requests": "counter",
        "smbx_request_duration_seconds": "histogram",
        "smbx_bytes": "counter",
        "smbx_network_bytes": "counter",
        "smbx_credits_granted": "counter",
        "smbx_connections": "gauge",
        "smbx_sessions": "gauge",
        "smbx_channels": "gauge",
        "smbx_opens": "gauge",
        "smbx_direct_queue_pairs": "gauge",
        "smbx_direct_memory_regions": "gauge",
        "smbx_direct_registered_bytes": "gauge",
        "smbx_direct_rdma_operations": "counter",
        "smbx_direct_rdma_bytes": "counter",
    }
    for family, kind in want.items():
        assert m.types.get(family) == kind, (family, m.types.get(family))
    # Bytes by direction and transport, every combination present from the start.
    for d in ("read", "write"):
        for t in ("tcp", "smbdirect"):
            assert ("smbx_bytes_total", frozenset({("direction", d), ("transport", t)})) in m


def test_counts_exactly_the_requests_sent(metered):
    server, url, _ = metered
    before = scrape(url)
    payload = os.urandom(5 * BLOCK)
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=False)
    conn.connect(dialect=Dialects.SMB_3_1_1, timeout=30)
    try:
        sess = Session(conn, server.user, server.password)
        sess.connect()
        tree = TreeConnect(sess, server.unc("share"))
        tree.connect()
        with pytest.raises((SMBOSError, SMBResponseException)):
            _open(tree, "metrics-missing.bin", CreateDisposition.FILE_OPEN)
        fh = _open(tree, "metrics-exact.bin", CreateDisposition.FILE_OVERWRITE_IF)
        for i in range(5):
            assert fh.write(payload[i * BLOCK : (i + 1) * BLOCK], i * BLOCK) == BLOCK
        back = b"".join(fh.read(i * BLOCK, BLOCK) for i in range(3))
        assert back == payload[: 3 * BLOCK]
        with pytest.raises(EndOfFile):
            fh.read(len(payload), BLOCK)
        during = scrape(url)
        assert during.get("smbx_sessions") == 1
        assert during.get("smbx_opens") == 1
        assert during.get("smbx_connections", transport="tcp") == 1
        assert during.get("smbx_channels", transport="tcp") == 1
        fh.close()
        tree.disconnect()
        sess.disconnect()
    finally:
        conn.disconnect(True)

    after = scrape(url)
    req = "smbx_requests_total"

    def d(command, status):
        return _delta(after, before, req, command=command, status=status)

    assert d("NEGOTIATE", "STATUS_SUCCESS") == 1
    assert d("SESSION_SETUP", "STATUS_MORE_PROCESSING_REQUIRED") == 1
    assert d("SESSION_SETUP", "STATUS_SUCCESS") == 1
    assert d("TREE_CONNECT", "STATUS_SUCCESS") == 1
    assert d("CREATE", "STATUS_OBJECT_NAME_NOT_FOUND") == 1
    assert d("CREATE", "STATUS_SUCCESS") == 1
    assert d("WRITE", "STATUS_SUCCESS") == 5
    assert d("READ", "STATUS_SUCCESS") == 3
    assert d("READ", "STATUS_END_OF_FILE") == 1
    assert d("CLOSE", "STATUS_SUCCESS") == 1
    assert d("TREE_DISCONNECT", "STATUS_SUCCESS") == 1
    assert d("LOGOFF", "STATUS_SUCCESS") == 1
    assert _delta(after, before, "smbx_bytes_total", direction="write", transport="tcp") == 5 * BLOCK
    assert _delta(after, before, "smbx_bytes_total", direction="read", transport="tcp") == 3 * BLOCK
    for command, n in (("WRITE", 5), ("READ", 4)):
        assert _delta(after, before, "smbx_request_duration_seconds_count", command=command) == n
        assert (
            _delta(after, before, "smbx_request_duration_seconds_bucket", command=command, le="+Inf")
            == n
        )
    received = _delta(after, before, "smbx_network_bytes_total", direction="received", transport="tcp")
    assert received > 5 * BLOCK
    assert _delta(after, before, "smbx_credits_granted_total") >= 14
    assert after.get("smbx_sessions") == 0
    assert after.get("smbx_opens") == 0


def _bench(server, url: str, target: str, *flags: str):
    """Runs a bounded `smbx bench` (64 KiB sequential reads unless ``flags`` say
    otherwise, -o4, 3 s) and scrapes the endpoint while it runs; returns (report,
    scrapes during the run)."""
    cmd = [
        str(smbx_bin()), "bench", "-b64K", "-s", "-o4", "-t1", "-d3", "-W0", "-C0",
        "-Rjson", *flags, target,
    ]
    env = dict(os.environ, SMBX_PASSWORD=server.password)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    during = []
    stop = threading.Event()

    def poll():
        while not stop.is_set() and len(during) < 200:
            during.append(scrape(url))
            stop.wait(0.2)

    t = threading.Thread(target=poll)
    t.start()
    try:
        out, err = proc.communicate(timeout=BOUND_S)
    finally:
        stop.set()
        t.join(BOUND_S)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"smbx bench failed: {err}"
    return json.loads(out), during


def _wait_until(url, pred) -> Scrape:
    deadline = time.monotonic() + BOUND_S
    while True:
        m = scrape(url)
        if pred(m) or time.monotonic() > deadline:
            return m
        time.sleep(0.05)


def _check_agree(report, before, after, transport, op="read"):
    """The server's count of successful READs (or WRITEs) against the report's."""
    other_op = "write" if op == "read" else "read"
    # The totals are at the top level of the JSON report.
    ios = report[f"{op}_count"]
    assert ios > 0 and report[f"{other_op}_count"] == 0
    assert report[f"{op}_bytes"] == ios * BLOCK
    command = op.upper()
    served = _delta(after, before, "smbx_requests_total", command=command, status="STATUS_SUCCESS")
    # The report counts the I/Os completed in the measured phase; the server also
    # answered the few issued around its edges (at most a queue depth at each end
    # and what completed while the bench switched phases).
    print(f"{transport}: bench report {ios} {command}s in the measured phase, server counted {served}")
    assert ios <= served <= ios * 1.1 + 16, (ios, served)
    assert _delta(after, before, "smbx_bytes_total", direction=op, transport=transport) == served * BLOCK
    other = "smbdirect" if transport == "tcp" else "tcp"
    assert _delta(after, before, "smbx_bytes_total", direction=op, transport=other) == 0
    assert _delta(after, before, "smbx_bytes_total", direction=other_op, transport=transport) == 0
    assert _delta(after, before, "smbx_request_duration_seconds_count", command=command) == served
    return served


def test_scraped_during_a_bench_over_tcp(metered):
    server, url, _ = metered
    before = scrape(url)
    target = f"smb://{server.user}@127.0.0.1:{server.port}/share/bench.bin"
    report, during = _bench(server, url, target)
    after = _wait_until(url, lambda m: m.get("smbx_connections", transport="tcp") == 0)
    served = _check_agree(report, before, after, "tcp")
    # The bench's connection shows in the scrapes taken while it ran, and the
    # counters never go backwards between them.
    assert during, "no scrape while the bench ran"
    assert max(m.get("smbx_connections", transport="tcp") for m in during) >= 1
    assert max(m.get("smbx_channels", transport="tcp") for m in during) >= 1
    reads = [m.value("smbx_requests_total", command="READ", status="STATUS_SUCCESS") for m in during]
    assert reads == sorted(reads)
    assert reads[-1] <= before.value("smbx_requests_total", command="READ", status="STATUS_SUCCESS") + served
    assert after.get("smbx_sessions") == 0


def test_scraped_during_a_bench_over_smb_direct(metered):
    server, url, dport = metered
    before = scrape(url)
    target = f"smb://{server.user}@127.0.0.1:{dport}/share/bench.bin?transport=rdma"
    report, during = _bench(server, url, target)
    after = _wait_until(
        url,
        lambda m: m.get("smbx_connections", transport="smbdirect") == 0
        and m.get("smbx_direct_queue_pairs") == before.get("smbx_direct_queue_pairs"),
    )
    served = _check_agree(report, before, after, "smbdirect")
    # Every 64 KiB READ went by one RDMA Write of its data into the client's buffer.
    assert _delta(after, before, "smbx_direct_rdma_operations_total", op="write") == served
    assert _delta(after, before, "smbx_direct_rdma_bytes_total", op="write") == served * BLOCK
    assert _delta(after, before, "smbx_direct_rdma_operations_total", op="read") == 0
    assert during, "no scrape while the bench ran"
    assert max(m.get("smbx_connections", transport="smbdirect") for m in during) >= 1
    assert max(m.get("smbx_channels", transport="smbdirect") for m in during) >= 1
    assert max(m.get("smbx_direct_queue_pairs") for m in during) >= 1
    assert max(m.get("smbx_direct_registered_bytes") for m in during) > 0
    # Once the connection is gone its queue pair and receive buffers are too.
    assert after.get("smbx_connections", transport="smbdirect") == 0
    assert after.get("smbx_direct_queue_pairs") == before.get("smbx_direct_queue_pairs")
    assert after.get("smbx_direct_registered_bytes") == before.get("smbx_direct_registered_bytes")

    # Writes: every 64 KiB WRITE's data pulled by one RDMA Read.
    before = after
    report, _ = _bench(server, url, target, "-w100")
    after = _wait_until(url, lambda m: m.get("smbx_connections", transport="smbdirect") == 0)
    written = _check_agree(report, before, after, "smbdirect", op="write")
    assert _delta(after, before, "smbx_direct_rdma_operations_total", op="read") == written
    assert _delta(after, before, "smbx_direct_rdma_bytes_total", op="read") == written * BLOCK
    assert _delta(after, before, "smbx_direct_rdma_operations_total", op="write") == 0


def _raw(port: int, data: bytes, *, close_write: bool = False) -> bytes:
    """Sends ``data`` and reads until the endpoint closes (bounded)."""
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as s:
        try:
            s.sendall(data)
            if close_write:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # closed on us already: fine
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return out
            if not chunk:
                return out
            out += chunk


def test_malformed_http_gets_an_error_or_a_close(metered):
    server, url, _ = metered
    port = int(url.split(":")[2].split("/")[0])
    cases = [
        (b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 404 "),
        (b"GET /metrics.txt HTTP/1.1\r\n\r\n", b"HTTP/1.1 404 "),
        (b"PUT /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"HTTP/1.1 405 "),
        (b"GET /metrics HTTP/3\r\n\r\n", b"HTTP/1.1 400 "),
        (b"GET /metrics\r\n\r\n", b"HTTP/1.1 400 "),
        (b"\x00\xff\x13garbage\r\n\r\n", b"HTTP/1.1 400 "),
        (os.urandom(512) + b"\r\n\r\n", b"HTTP/1.1 400 "),
    ]
    for req, want in cases:
        got = _raw(port, req)
        assert got.startswith(want), (req[:40], got[:80])
    # A head larger than the endpoint reads: refused or closed, and not read on.
    got = _raw(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (1 << 20))
    assert got == b"" or got.startswith(b"HTTP/1.1 431 "), got[:80]
    # Half a request, then nothing (or the write side closed): closed, not held open.
    for req, close_write in ((b"GET /metr", False), (b"", False), (b"GET /metrics HTTP/1.1\r\n", True)):
        assert _raw(port, req, close_write=close_write) == b""
    # More silent connections than the endpoint serves at once: those beyond the
    # limit are closed at once, the others when their time to send a head is up.
    socks = [socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) for _ in range(20)]
    try:
        for s in socks:
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in socks:
            s.close()
    # Still serving, and the SMB side never noticed.
    m = scrape(url)
    assert m.get("smbx_sessions") == 0
    server.check_healthy()


def _listening_ports(pid: int) -> set[int]:
    """TCP ports ``pid`` listens on (its socket inodes matched in /proc/net/tcp{,6})."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def test_off_by_default():
    server = start_smbx()
    try:
        assert _listening_ports(server.pid) == {server.port}
        assert "metrics" not in server.log_text().lower()
    finally:
        _cleanup(server)


def test_bad_value_and_busy_port_are_refused_at_start(tmp_path):
    conf = tmp_path / "smb.conf"
    conf.write_text(
        "[global]\n"
        f"    smb ports = {free_port()}\n"
        "    interfaces = 127.0.0.1\n"
        "    bind interfaces only = yes\n"
        f"    passdb backend = smbpasswd:{tmp_path}/smbpasswd\n"
        "    metrics listen = localhost\n"
    )
    r = subprocess.run(
        [str(smbx_bin()), "serve", "--config", str(conf)], capture_output=True, text=True, timeout=BOUND_S
    )
    assert r.returncode != 0
    assert f"{conf}:6" in r.stderr and "metrics listen" in r.stderr, r.stderr

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        conf.write_text(conf.read_text().replace("localhost", f"127.0.0.1:{port}"))
        (tmp_path / "smbpasswd").touch()
        r = subprocess.run(
            [str(smbx_bin()), "serve", "--config", str(conf)],
            capture_output=True,
            text=True,
            timeout=BOUND_S,
        )
    assert r.returncode != 0
    assert f"metrics listen = 127.0.0.1:{port}" in r.stderr, r.stderr
