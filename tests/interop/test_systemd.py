"""smbx under systemd: the sd_notify protocol, graceful stop, and log lines.

The tests start the real ``smbx serve`` with ``NOTIFY_SOCKET`` pointing at a
datagram socket they own (as systemd does for ``Type=notify``):

* READY=1 arrives only once every listener (TCP and SMB Direct) accepts: a
  connection made the moment it arrives succeeds;
* STATUS= carries a one-line summary and follows the number of connections;
* SIGTERM with a large READ in flight (its response only partly read by the
  client): STOPPING=1, new connections refused, the READ's response arrives
  whole and correct, the connection is closed, and the exit status is 0;
* log lines of a connection name the client address and the session id; under
  journald (``JOURNAL_STREAM`` naming stderr) lines have a ``<N>`` priority and
  no timestamp or colour; ``log file`` with ``max log size`` rotates to ``.old``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import rawsmb as r
from conftest import USER, PASSWORD, _make_root, free_port, smbx_bin, smbx_conf
from helpers import smbclient

if os.environ.get("SMBX_INTEROP_SERVER", "smbx") == "samba":
    pytest.skip("smbx's own systemd integration", allow_module_level=True)

MIB = 1024 * 1024
READ_SIZE = 8 * MIB  # more than the client's receive buffer and the server's send buffer together
WAIT_S = 30.0


class Smbx:
    """A `smbx serve` started with a notify socket, its stderr in a file."""

    def __init__(self, extra_global: str = "", env: dict | None = None, stderr_path: Path | None = None):
        binary = smbx_bin()
        if not binary.exists():
            pytest.fail(f"smbx binary not found at {binary}: run `cargo build --release -p smbx-cli`")
        self.root = _make_root("smbx-systemd-")
        self.port = free_port()
        self.direct_port = free_port()
        self.conf = self.root / "smb.conf"
        self.host, self.user, self.password = "127.0.0.1", USER, PASSWORD
        extra = f"    smb direct = yes\n    smb direct port = {self.direct_port}\n"
        extra += extra_global.replace("{root}", str(self.root))
        self.conf.write_text(smbx_conf(self.root, self.port, "bad user", extra))
        add = subprocess.run(
            [str(binary), "user", "add", "--config", str(self.conf), "--stdin", USER],
            input=PASSWORD + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert add.returncode == 0, add.stdout + add.stderr
        self.notify_path = self.root / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.stderr_path = stderr_path or (self.root / "stderr.log")
        child_env = dict(os.environ)
        child_env.pop("RUST_LOG", None)
        child_env.pop("JOURNAL_STREAM", None)
        child_env["NOTIFY_SOCKET"] = str(self.notify_path)
        child_env.update(env or {})
        self.stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--config", str(self.conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            env=child_env,
            start_new_session=True,
        )
        self.messages: list[str] = []

    def next_message(self, timeout: float = WAIT_S) -> str:
        """The next datagram on the notify socket."""
        self.notify.settimeout(timeout)
        try:
            data = self.notify.recv(4096)
        except socket.timeout:
            raise AssertionError(
                f"no notification within {timeout} s (got {self.messages}); "
                f"exit status {self.proc.poll()}; stderr:\n{self.log()}"
            )
        msg = data.decode()
        self.messages.append(msg)
        return msg

    def wait_for(self, pred, what: str, timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} notification; got {self.messages}")
            msg = self.next_message(left)
            if pred(msg):
                return msg

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.stderr.close()
        self.notify.close()
        if not os.environ.get("SMBX_KEEP_TMP"):
            shutil.rmtree(self.root, ignore_errors=True)


def fields(msg: str) -> dict:
    return dict(line.split("=", 1) for line in msg.split("\n") if "=" in line)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


@pytest.fixture
def server():
    s = Smbx(extra_global="    log level = 2\n")
    yield s
    s.close()


def test_ready_only_once_listening_then_status(server):
    first = server.next_message()
    f = fields(first)
    assert f.get("READY") == "1", first
    # The very moment READY arrives, both listeners accept.
    connect(server.port).close()
    connect(server.direct_port).close()
    assert f.get("STATUS", "").startswith("serving:"), first
    # STATUS= follows the connection count (refreshed periodically).
    c = r.RawConn("127.0.0.1", server.port)
    try:
        c.negotiate()
        msg = server.wait_for(lambda m: "1 connection," in m, "STATUS with one connection")
        assert msg.startswith("STATUS=serving: 1 connection, "), msg
    finally:
        c.close()
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for(lambda m: fields(m).get("STOPPING") == "1", "STOPPING=1")
    assert server.proc.wait(timeout=WAIT_S) == 0, server.log()


def _small_buffer_conn(port: int) -> r.RawConn:
    """A raw SMB2 connection whose socket receive buffer is tiny, so a large
    response stays in flight on the server until the test reads it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(WAIT_S)
    s.connect(("127.0.0.1", port))
    c = r.RawConn.__new__(r.RawConn)
    c.sock, c.msg_id, c.session_id, c.tree_id = s, 0, 0, 0
    return c


def test_sigterm_finishes_the_read_in_flight_and_exits_0(server):
    assert fields(server.next_message()).get("READY") == "1"
    data = os.urandom(READ_SIZE)
    (server.root / "public" / "big.bin").write_bytes(data)

    c = _small_buffer_conn(server.port)
    c.negotiate(dialects=(0x0210,))
    c.guest_session()
    c.tree_connect(r"\\127.0.0.1\public")
    fid = c.create("big.bin", disposition=1, access=0x00120089, options=0x40)
    charge = READ_SIZE // 65536
    pdu = r.header(
        r.READ,
        msg_id=c.msg_id,
        session_id=c.session_id,
        tree_id=c.tree_id,
        credit_charge=charge,
        credits=charge,
    ) + r.read_body(fid, length=READ_SIZE)
    c.msg_id += charge
    c.send_raw(r.frame(pdu))
    # The response has begun (so the server took the request) ...
    length = struct.unpack(">I", c._recv_exact(4))[0] & 0x00FFFFFF
    hdr = c._recv_exact(64)
    assert struct.unpack_from("<I", hdr, 8)[0] == r.STATUS_SUCCESS
    assert struct.unpack_from("<H", hdr, 12)[0] == r.READ
    assert length > READ_SIZE
    # ... and most of it cannot have left the server: SIGTERM now.
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for(lambda m: fields(m).get("STOPPING") == "1", "STOPPING=1")

    # No new connections, while the server is still finishing the READ.
    deadline = time.monotonic() + WAIT_S
    refused = False
    while time.monotonic() < deadline:
        try:
            connect(server.port).close()
        except ConnectionRefusedError:
            refused = True
            break
        time.sleep(0.05)
    assert refused, "still accepting connections after SIGTERM"
    assert server.proc.poll() is None, "exited with a request in flight:\n" + server.log()

    # The whole READ response arrives, and is right.
    body = c._recv_exact(length - 64)
    data_offset = body[2]
    data_len = struct.unpack_from("<I", body, 4)[0]
    assert data_len == READ_SIZE
    got = body[data_offset - 64 : data_offset - 64 + data_len]
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()
    # Then the server closes the connection and exits 0.
    c.sock.settimeout(WAIT_S)
    assert c.sock.recv(1) == b"", "connection left open"
    c.close()
    assert server.proc.wait(timeout=WAIT_S) == 0, server.log()

    log = server.log()
    assert "panicked" not in log
    # Lines of the connection name its client address, and its session once there is one.
    closing = [l for l in log.splitlines() if "connection closing" in l]
    assert closing, log
    assert any(re.search(r"client=127\.0\.0\.1:\d+", l) and re.search(r"sid=0x[0-9a-f]+", l) for l in closing), closing
    assert "\x1b[" not in log, "colours in a log that is not a terminal"


def test_journald_format():
    # JOURNAL_STREAM names the child's stderr: systemd's way of saying "the journal".
    root = Path(os.environ.get("TMPDIR", "/tmp"))
    stderr_path = root / f"smbx-journal-{os.getpid()}.log"
    stderr_path.write_bytes(b"")
    st = os.stat(stderr_path)
    s = Smbx(
        extra_global="    log level = 2\n",
        env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"},
        stderr_path=stderr_path,
    )
    try:
        assert fields(s.next_message()).get("READY") == "1"
        res = smbclient(s, "share", "ls", user=USER, password=PASSWORD)
        assert res.ok(), res.describe()
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=WAIT_S) == 0
        lines = [l for l in s.log().splitlines() if l.strip()]
        assert lines
        for l in lines:
            assert re.match(r"<[3-7]>", l), l
            assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", l), f"timestamp under journald: {l}"
            assert "\x1b[" not in l
        per_conn = [l for l in lines if "conn{" in l]
        assert per_conn and all(re.search(r"client=127\.0\.0\.1:\d+", l) for l in per_conn), per_conn
    finally:
        s.close()
        stderr_path.unlink(missing_ok=True)


def test_log_file_rotates_at_max_log_size():
    s = Smbx(extra_global="    log level = 3\n    log file = {root}/log/smbx.log\n    max log size = 2\n")
    log_path = s.root / "log" / "smbx.log"
    old = s.root / "log" / "smbx.log.old"
    try:
        assert fields(s.next_message()).get("READY") == "1"
        for _ in range(5):
            res = smbclient(s, "share", "ls")
            assert res.ok(), res.describe()
            if old.exists():
                break
        assert old.exists(), "no rotation: " + log_path.read_text(errors="replace")[-2000:]
        assert old.stat().st_size <= 2048
        assert log_path.stat().st_size <= 2048
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=WAIT_S) == 0
        text = old.read_text() + log_path.read_text()
        # Whole lines, each starting with its timestamp (a file is not the journal).
        assert all(re.match(r"\d{4}-\d\d-\d\dT", l) for l in text.splitlines() if l), text
        assert re.search(r"client=127\.0\.0\.1:\d+", text), text
        assert "\x1b[" not in text
        # The log went to the file, not to stderr.
        assert "client=" not in s.log()
    finally:
        s.close()
