"""Live reload (`smbx reload`, SIGHUP) against real clients (smbprotocol).

A client keeps a file open and reads it in a loop while smb.conf gains a share,
loses another and tightens a global option, and alice's password changes: the
loop never fails, the new share answers, the removed share refuses new tree
connects while a tree already connected to it keeps working, the global option
applies to new connections only, and the old password stops working for new
logons.  Then a broken smb.conf is refused as a whole: the error (output and
log) names the file and line, and everything stays as it was."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import BadNetworkName, LogonFailure
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

from conftest import PASSWORD, USER, _cleanup, smbx_bin, start_smbx

NEW_PASSWORD = "Alice-N3w-Passw0rd!"
DATA = bytes(range(256)) * 256  # 64 KiB
MAX_READS = 100_000  # the read loop's bound (it stops much earlier, when told to)
SIGNING_REQUIRED = 0x2


def connect(server, password=PASSWORD):
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    conn.connect(dialect=Dialects.SMB_3_1_1, timeout=30)
    sess = Session(conn, USER, password)
    try:
        sess.connect()
    except Exception:
        conn.disconnect(True)
        raise
    return conn, sess


def tree(sess, server, share):
    t = TreeConnect(sess, server.unc(share))
    t.connect()
    return t


def open_file(t, name, disposition=CreateDisposition.FILE_OPEN):
    fh = Open(t, name)
    fh.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        FileAttributes.FILE_ATTRIBUTE_NORMAL,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
        disposition,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    return fh


class Reader(threading.Thread):
    """Reads the open file again and again until stopped (bounded by MAX_READS);
    every read must return the file's bytes."""

    def __init__(self, fh):
        super().__init__(daemon=True)
        self.fh = fh
        self.stop = threading.Event()
        self.reads = 0
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set() and self.reads < MAX_READS:
                got = self.fh.read(0, len(DATA))
                if got != DATA:
                    raise AssertionError(f"read {self.reads} returned {len(got)} different bytes")
                self.reads += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def reads_more(self, within_s=30.0):
        """Waits until the loop has read again (it is alive and working)."""
        start = self.reads
        for _ in range(int(within_s * 20)):
            if self.reads > start or self.error is not None or not self.is_alive():
                break
            time.sleep(0.05)
        assert self.error is None, f"the read loop failed: {self.error!r}"
        assert self.reads > start, "the read loop made no progress"


def smbx(*args, password=None):
    return subprocess.run(
        [str(smbx_bin()), *args],
        input=None if password is None else password + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )


def reload(server):
    return smbx("reload", "--config", str(server.conf))


def generation(server):
    r = smbx("status", "--config", str(server.conf), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["server"]["config_generation"]


@pytest.fixture
def server():
    s = start_smbx()
    (s.root / "added").mkdir()
    (s.root / "added").chmod(0o777)
    yield s
    _cleanup(s)


def test_reload_keeps_connections_and_applies_to_new_ones(server):
    (server.share_dir / "data.bin").write_bytes(DATA)
    (server.path_of("public") / "keep.txt").write_bytes(b"on a share about to go\n")

    # Before: the reader's connection, a tree on [public], signing not required.
    conn, sess = connect(server)
    assert not conn.server_security_mode & SIGNING_REQUIRED
    share_tree = tree(sess, server, "share")
    public_tree = tree(sess, server, "public")
    fh = open_file(share_tree, "data.bin")
    reader = Reader(fh)
    reader.start()
    try:
        reader.reads_more()

        # The change: [added] appears, [public] goes, signing becomes mandatory,
        # alice gets a new password.
        conf = server.conf.read_text()
        conf = re.sub(r"\[public\]\n(    .*\n)+", "", conf)
        assert "[public]" not in conf
        conf = conf.replace("[global]\n", "[global]\n    server signing = mandatory\n", 1)
        conf += f"\n[added]\n    path = {server.root}/added\n    read only = no\n"
        server.conf.write_text(conf)
        r = smbx("user", "add", "--config", str(server.conf), "--stdin", USER, password=NEW_PASSWORD)
        assert r.returncode == 0, r.stderr
        reader.reads_more()

        r = reload(server)
        assert r.returncode == 0, r.stderr
        assert "shares added: added" in r.stdout, r.stdout
        assert "shares removed: public" in r.stdout, r.stdout
        assert "server signing" in r.stdout, r.stdout
        reader.reads_more()

        # The old connection: its tree on the removed share still works ...
        old = open_file(public_tree, "keep.txt")
        assert old.read(0, 100) == b"on a share about to go\n"
        old.close()
        new_here = open_file(public_tree, "written-after-removal.txt", CreateDisposition.FILE_CREATE)
        new_here.write(b"still served\n", 0)
        new_here.close()
        assert (server.path_of("public") / "written-after-removal.txt").read_bytes() == b"still served\n"
        # ... but a new tree connect to it is refused, on this session too.
        with pytest.raises(BadNetworkName):
            tree(sess, server, "public")
        # The new share answers on the old session.
        added = tree(sess, server, "added")
        f = open_file(added, "from-old-session.txt", CreateDisposition.FILE_CREATE)
        f.write(b"hello\n", 0)
        f.close()
        assert (server.root / "added" / "from-old-session.txt").read_bytes() == b"hello\n"
        reader.reads_more()

        # New logons: the old password is refused, the new one works, and the new
        # connection is told that signing is required (the old one was not).
        with pytest.raises(LogonFailure):
            connect(server, PASSWORD)
        conn2, sess2 = connect(server, NEW_PASSWORD)
        try:
            assert conn2.server_security_mode & SIGNING_REQUIRED
            with pytest.raises(BadNetworkName):
                tree(sess2, server, "public")
            t2 = tree(sess2, server, "added")
            f = open_file(t2, "from-new-session.txt", CreateDisposition.FILE_CREATE)
            f.write(b"new\n", 0)
            f.close()
            assert (server.root / "added" / "from-new-session.txt").read_bytes() == b"new\n"
        finally:
            conn2.disconnect(True)
        reader.reads_more()
        assert generation(server) == 1

        # A broken file is refused as a whole, naming the file and line.
        good = server.conf.read_text()
        lines = good.splitlines()
        bad_line = lines.index("[added]") + 2
        lines.insert(bad_line - 1, "    read only = sometimes")
        # Also a share that would appear, and a password that would change: neither may.
        lines.append("[never]\n    path = /tmp")
        server.conf.write_text("\n".join(lines) + "\n")
        r = reload(server)
        assert r.returncode == 1, r.stdout + r.stderr
        where = f"{server.conf}:{bad_line}:"
        assert where in r.stderr and "read only" in r.stderr, r.stderr
        assert where in server.log_text(), server.log_text()[-2000:]
        assert generation(server) == 1
        reader.reads_more()
        with pytest.raises(BadNetworkName):
            tree(sess, server, "never")
        with pytest.raises(BadNetworkName):
            tree(sess, server, "public")
        tree(sess, server, "added").disconnect()
        with pytest.raises(LogonFailure):
            connect(server, PASSWORD)
        conn3, _ = connect(server, NEW_PASSWORD)
        conn3.disconnect(True)
        reader.reads_more()
    finally:
        reader.stop.set()
        reader.join(timeout=30)
    assert reader.error is None, f"the read loop failed: {reader.error!r}"
    assert not reader.is_alive()
    print(f"the read loop read the file {reader.reads} times through the reloads")
    fh.close()
    public_tree.disconnect()
    conn.disconnect(True)
    server.check_healthy()


def test_removed_share_status_marks_its_trees(server):
    """`smbx status` shows a tree of a removed share as such."""
    conn, sess = connect(server)
    try:
        tree(sess, server, "public")
        conf = re.sub(r"\[public\]\n(    .*\n)+", "", server.conf.read_text())
        server.conf.write_text(conf)
        assert reload(server).returncode == 0
        r = smbx("status", "--config", str(server.conf), "--json")
        st = json.loads(r.stdout)
        t = [t for t in st["trees"] if t["share"] == "public"]
        assert len(t) == 1 and t[0]["share_removed"] is True
        r = smbx("status", "--config", str(server.conf))
        assert "public (removed)" in r.stdout, r.stdout
    finally:
        conn.disconnect(True)
