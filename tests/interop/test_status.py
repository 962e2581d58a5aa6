"""`smbx status` during a real scene: two users, one sealed (smbprotocol with
encryption), one on SMB Direct (the smbx client over soft-iWARP), several opens
with leases, a durable open and a byte-range lock.  Every field of
`smbx status --json` is checked against what the clients did.

The same scene is then played against Samba's smbd (bob over TCP: smbd has no
SMB Direct here) and `smbstatus` is captured.  Both outputs are saved in
$SMBX_STATUS_OUT (default /tmp/smbx-status-compare) for the side-by-side table
of the issue's closing note; only smbx is asserted on."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.create_contexts import (
    CreateContextName,
    LeaseState,
    SMB2CreateContextRequest,
    SMB2CreateDurableHandleRequestV2,
    SMB2CreateRequestLeaseV2,
)
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FileAttributes,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    LockFlags,
    Open,
    RequestedOplockLevel,
    ShareAccess,
    SMB2LockElement,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import (
    PASSWORD,
    PASSWORD2,
    USER,
    USER2,
    _cleanup,
    ensure_unix_user,
    free_port,
    smbx_bin,
    start_samba,
    start_smbx,
)

OUT_DIR = Path(os.environ.get("SMBX_STATUS_OUT", "/tmp/smbx-status-compare"))
CIPHERS = {"AES-128-CCM", "AES-128-GCM", "AES-256-CCM", "AES-256-GCM"}
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
RW = FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE
BOB_DATA = b"bob wrote this over SMB Direct\n"


def _ctx(name, data):
    c = SMB2CreateContextRequest()
    c["buffer_name"] = name
    c["buffer_data"] = data
    return c


def _lease(key: bytes, state: int):
    req = SMB2CreateRequestLeaseV2()
    req["lease_key"] = key
    req["lease_state"] = state
    req["parent_lease_key"] = b"\x00" * 16
    req["epoch"] = b"\x00\x00"
    return _ctx(CreateContextName.SMB2_CREATE_REQUEST_LEASE_V2, req)


def _lock(offset, length, flags):
    e = SMB2LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = flags
    return e


class AliceSealed:
    """alice over TCP, SMB 3.1.1, the whole session encrypted; three opens: a.txt
    (lease RWH, and an exclusive lock on bytes 0-9), b.txt (read-only sharing, lease
    RH), c.txt (durable v2 with a batch oplock)."""

    def __init__(self, server):
        self.conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
        self.conn.connect(dialect=Dialects.SMB_3_1_1, timeout=30)
        self.sess = Session(self.conn, USER, PASSWORD, require_encryption=True)
        self.sess.connect()
        self.tree = TreeConnect(self.sess, server.unc("share"))
        self.tree.connect()
        self.local = self.conn.transport._sock.getsockname()
        self.key_a, self.key_b = os.urandom(16), os.urandom(16)
        rwh = LeaseState.SMB2_LEASE_READ_CACHING | LeaseState.SMB2_LEASE_WRITE_CACHING | LeaseState.SMB2_LEASE_HANDLE_CACHING
        rh = LeaseState.SMB2_LEASE_READ_CACHING | LeaseState.SMB2_LEASE_HANDLE_CACHING
        self.a = self._open("a.txt", RW, SHARE_ALL, [_lease(self.key_a, rwh)], RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE)
        self.a.write(b"0123456789abcdef", 0)
        self.a.lock([_lock(0, 10, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY)])
        self.b = self._open(
            "b.txt",
            FilePipePrinterAccessMask.GENERIC_READ,
            ShareAccess.FILE_SHARE_READ,
            [_lease(self.key_b, rh)],
            RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE,
        )
        dh = SMB2CreateDurableHandleRequestV2()
        dh["timeout"] = 60_000
        dh["create_guid"] = uuid.uuid4()
        self.c = self._open(
            "c.txt",
            RW,
            SHARE_ALL,
            [_ctx(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2, dh)],
            RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH,
        )

    def _open(self, name, access, sharing, contexts, oplock):
        fh = Open(self.tree, name)
        fh.create(
            ImpersonationLevel.Impersonation,
            access,
            FileAttributes.FILE_ATTRIBUTE_NORMAL,
            sharing,
            CreateDisposition.FILE_OVERWRITE_IF,
            CreateOptions.FILE_NON_DIRECTORY_FILE,
            create_contexts=contexts,
            oplock_level=oplock,
        )
        return fh

    def close(self):
        try:
            self.a.lock([_lock(0, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
            for fh in (self.a, self.b, self.c):
                fh.close()
            self.tree.disconnect()
            self.sess.disconnect()
        finally:
            self.conn.disconnect(True)


class BobPut:
    """bob with the smbx client: `smbx put - URL` holds its session and its open
    while it waits for standard input, which the test writes and closes at the end."""

    def __init__(self, port, transport):
        url = f"smb://{USER2}@127.0.0.1:{port}/share/bob.bin"
        env = dict(os.environ, SMBX_PASSWORD=PASSWORD2)
        self.proc = subprocess.Popen(
            [str(smbx_bin()), "put", "--transport", transport, "-", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def finish(self):
        try:
            out, _ = self.proc.communicate(BOB_DATA, timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode, out.decode(errors="replace")


def _wait(what, predicate, within_s=30.0):
    deadline = time.monotonic() + within_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {within_s} s")
        time.sleep(0.1)


def _smbx_status(server, *extra):
    r = subprocess.run(
        [str(smbx_bin()), "status", "--config", str(server.conf), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_status_of_two_users_one_sealed_one_on_smb_direct():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    direct_port = free_port()
    server = start_smbx(
        extra_global=f"    smb direct = yes\n    smb direct port = {direct_port}\n",
        users=((USER, PASSWORD), (USER2, PASSWORD2)),
    )
    alice = bob = None
    try:
        alice = AliceSealed(server)
        bob = BobPut(direct_port, "rdma")

        def both_in():
            st = json.loads(_smbx_status(server, "--json"))
            users = {s["user"] for s in st["sessions"]}
            opened = any(o["path"] == "bob.bin" for o in st["opens"])
            return st if users == {USER, USER2} and opened else None

        st = _wait("alice and bob (with bob.bin open) in smbx status", both_in)
        text = _smbx_status(server)
        (OUT_DIR / "smbx-status.json").write_text(json.dumps(st, indent=2) + "\n")
        (OUT_DIR / "smbx-status.txt").write_text(text)
        print(f"smbx status saved in {OUT_DIR}/smbx-status.json and .txt")

        assert st["server"]["config_file"] == str(server.conf)
        assert st["server"]["pid"] == server.pid
        sessions = {s["user"]: s for s in st["sessions"]}
        a, b = sessions[USER], sessions[USER2]

        # alice: sealed 3.1.1 over TCP, one channel, her own socket's address.
        assert a["dialect"] == "3.1.1"
        assert not a["guest"] and not a["anonymous"]
        assert a["encryption"]["active"] is True
        assert a["encryption"]["cipher"] in CIPHERS
        assert a["signing"]["algorithm"] in {"AES-128-CMAC", "AES-128-GMAC"}
        alice_client = f"{alice.local[0]}:{alice.local[1]}"
        assert a["client"] == alice_client
        assert a["channels"] == [
            {
                "connection_id": a["channels"][0]["connection_id"],
                "transport": "tcp",
                "local": f"127.0.0.1:{server.port}",
                "client": alice_client,
            }
        ]

        # bob: SMB Direct, not sealed.
        assert b["dialect"] in {"3.0", "3.0.2", "3.1.1"}
        assert b["encryption"]["active"] is False
        assert len(b["channels"]) == 1
        ch = b["channels"][0]
        assert ch["transport"] == "smbdirect"
        assert ch["local"] == f"127.0.0.1:{direct_port}"
        assert ch["client"].startswith("127.0.0.1:") and ch["client"] == b["client"]

        # Tree connects: each on [share].
        trees = {(t["session_id"], t["share"]) for t in st["trees"]}
        assert (a["session_id"], "share") in trees
        assert (b["session_id"], "share") in trees
        for t in st["trees"]:
            assert t["share_removed"] is False
            if t["share"] == "share":
                assert t["path"] == str(server.share_dir)

        # Opens.
        opens = {o["path"]: o for o in st["opens"]}
        oa, ob, oc, obob = opens["a.txt"], opens["b.txt"], opens["c.txt"], opens["bob.bin"]
        for o in (oa, ob, oc):
            assert o["session_id"] == a["session_id"]
            assert o["share"] == "share"
            assert o["connection_id"] == a["channels"][0]["connection_id"]
            assert o["directory"] is False
        assert oa["access"] == "RDWR" and oa["share_access"] == "RWD"
        assert oa["oplock"] == "lease"
        assert oa["lease"] == {"key": alice.key_a.hex(), "state": "RWH", "version": 2, "breaking": False}
        assert oa["durable"] is None
        assert ob["access"] == "RDONLY" and ob["share_access"] == "R"
        assert ob["share_access_mask"] == 1
        assert ob["lease"]["key"] == alice.key_b.hex() and ob["lease"]["state"] == "RH"
        assert oc["oplock"] == "batch" and oc["lease"] is None
        assert oc["durable"] == {"version": 2, "timeout_ms": 60_000}
        assert obob["session_id"] == b["session_id"]
        assert obob["connection_id"] == ch["connection_id"]
        assert obob["access"] in {"RDWR", "WRONLY"}
        for o in st["opens"]:
            p, v = o["file_id"].split(":")
            int(p, 16), int(v, 16)

        # The byte-range lock.
        assert st["locks"] == [
            {
                "file_id": oa["file_id"],
                "session_id": a["session_id"],
                "share": "share",
                "path": "a.txt",
                "offset": 0,
                "length": 10,
                "kind": "exclusive",
            }
        ]
        assert st["totals"] == {
            "connections": 2,
            "sessions": 2,
            "channels": 2,
            "trees": 2,
            "opens": 4,
            "disconnected_durable_opens": 0,
            "locks": 1,
        }

        # The human tables say the same.
        for needle in (USER, USER2, "smbdirect", "LEASE(RWH)", "LEASE(RH)", "BATCH", "exclusive", a["encryption"]["cipher"]):
            assert needle in text, f"{needle!r} not in:\n{text}"

        rc, out = bob.finish()
        bob = None
        assert rc == 0, out
        assert (server.share_dir / "bob.bin").read_bytes() == BOB_DATA
        alice.close()
        alice = None
        # Everything they held is gone from the status.
        st = _wait(
            "an empty status after both clients left",
            lambda: (lambda s: s if s["totals"]["sessions"] == 0 else None)(json.loads(_smbx_status(server, "--json"))),
        )
        assert st["opens"] == [] and st["locks"] == [] and st["trees"] == []
        server.check_healthy()
    finally:
        if bob is not None:
            bob.finish()
        if alice is not None:
            try:
                alice.close()
            except Exception:  # noqa: BLE001 - cleanup after a failure
                pass
        _cleanup(server)


def test_same_scene_through_samba_smbstatus():
    """The scene against smbd (bob over TCP), `smbstatus` captured for the
    comparison table; asserted only to the extent that the capture worked."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    server = start_samba()
    alice = bob = None
    try:
        ensure_unix_user(USER2)
        add = subprocess.run(
            ["smbpasswd", "-c", str(server.conf), "-a", "-s", USER2],
            input=f"{PASSWORD2}\n{PASSWORD2}\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert add.returncode == 0, add.stdout + add.stderr
        alice = AliceSealed(server)
        bob = BobPut(server.port, "tcp")

        def smbstatus(*args):
            return subprocess.run(
                ["smbstatus", "-s", str(server.conf), *args], capture_output=True, text=True, timeout=60
            )

        def both_in():
            r = smbstatus("--json")
            if r.returncode != 0:
                return None
            users = {s.get("username") for s in json.loads(r.stdout).get("sessions", {}).values()}
            return r.stdout if {USER, USER2} <= users else None

        js = _wait("alice and bob in smbstatus --json", both_in)
        text = smbstatus("-B").stdout
        (OUT_DIR / "samba-smbstatus.json").write_text(js)
        (OUT_DIR / "samba-smbstatus.txt").write_text(text)
        print(f"smbstatus saved in {OUT_DIR}/samba-smbstatus.json and .txt")
        rc, out = bob.finish()
        bob = None
        assert rc == 0, out
    finally:
        if bob is not None:
            bob.finish()
        if alice is not None:
            try:
                alice.close()
            except Exception:  # noqa: BLE001 - cleanup after a failure
                pass
        _cleanup(server)
