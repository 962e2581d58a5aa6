"""A hostile client: at least 10,000 malformed requests over raw sockets.

Templates are valid requests built by hand (rawsmb.py) -- NEGOTIATE, SESSION_SETUP,
TREE_CONNECT, CREATE (with contexts), READ, WRITE, QUERY_DIRECTORY, QUERY_INFO,
SET_INFO, LOCK, IOCTL, CHANGE_NOTIFY, FLUSH, OPLOCK_BREAK, CLOSE, ECHO, CANCEL,
LOGOFF, TREE_DISCONNECT -- carrying the real session, tree and file ids of a
guest session on [public], so mutations reach the command handlers.  Each is
then mutated: bit flips, truncation, extension, length/offset fields set to
extreme values, random NextCommand and compound chains, bogus header fields,
huge or short frame lengths, SMB1 / transform / compression headers with
garbage.

Bounded: SMBX_FUZZ_COUNT messages (default 10000) and SMBX_FUZZ_SECONDS
(default 300) of wall time, whichever comes first; deterministic for a given
SMBX_FUZZ_SEED.  Afterwards the server must still be alive, serve a normal
smbclient session, and its RSS must have grown by less than 64 MiB.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time

import rawsmb as r
from helpers import smbclient

COUNT = int(os.environ.get("SMBX_FUZZ_COUNT", "10000"))
SECONDS = float(os.environ.get("SMBX_FUZZ_SECONDS", "300"))
SEED = int(os.environ.get("SMBX_FUZZ_SEED", "20240229"))
PER_CONN = 24
RSS_LIMIT_KIB = 64 * 1024

U16_EXTREMES = (0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF)
U32_EXTREMES = (0, 1, 0x40, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x00FFFFFF, 0x01000000)


def _ntlm_negotiate() -> bytes:
    import spnego

    return spnego.client("fuzz", "fuzz", hostname="127.0.0.1", protocol="ntlm").step()


_NTLM_NEGOTIATE = _ntlm_negotiate()


def templates(fid, dir_fid, share_unc):
    """(command, body) pairs: valid requests with real ids."""
    lease_ctx = r.create_context(b"RqLs", os.urandom(16) + struct.pack("<IIQ", 7, 0, 0))
    dh_ctx = r.create_context(b"DH2Q", struct.pack("<II8s16s", 0, 0, b"\0" * 8, os.urandom(16)))
    ea_ctx = r.create_context(b"ExtA", struct.pack("<IBBH", 0, 0, 2, 3) + b"ab\0xyz")
    sd_ctx = r.create_context(b"SecD", struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 0))
    mx_ctx = r.create_context(b"MxAc", b"")
    return [
        (r.NEGOTIATE, r.negotiate_body()),
        (r.NEGOTIATE, r.negotiate_body((0x0202, 0x0210), with_contexts=False)),
        (r.SESSION_SETUP, r.session_setup_body(b"NTLMSSP\0" + struct.pack("<I", 1) + os.urandom(24))),
        (r.SESSION_SETUP, r.session_setup_body(_NTLM_NEGOTIATE)),
        (r.TREE_CONNECT, r.tree_connect_body(share_unc)),
        (r.TREE_CONNECT, r.tree_connect_body("\\\\127.0.0.1\\IPC$")),
        (r.CREATE, r.create_body("fuzz\\a.txt", disposition=3)),
        (r.CREATE, r.create_body("fz.bin", disposition=3, contexts=lease_ctx)),
        (r.CREATE, r.create_body("fz2.bin", disposition=5, contexts=dh_ctx)),
        (r.CREATE, r.create_body("fz3.bin", disposition=2, contexts=ea_ctx)),
        (r.CREATE, r.create_body("fz4.bin:stream", disposition=3, contexts=sd_ctx)),
        (r.CREATE, r.create_body("", options=1, access=0x00100081, contexts=mx_ctx)),
        (r.CREATE, r.create_body("srvsvc", disposition=1, options=0)),
        (r.READ, r.read_body(fid, 4096, 0)),
        (r.READ, r.read_body(fid, 65536, 1 << 40)),
        (r.WRITE, r.write_body(fid, os.urandom(512), 0)),
        (r.WRITE, r.write_body(fid, b"x" * 64, (1 << 62))),
        (r.QUERY_DIRECTORY, r.query_directory_body(dir_fid, "*", 37)),
        (r.QUERY_DIRECTORY, r.query_directory_body(dir_fid, "f*.bin", 3)),
        (r.QUERY_INFO, r.query_info_body(fid, 1, 18)),
        (r.QUERY_INFO, r.query_info_body(fid, 1, 15, input_data=struct.pack("<IBBH", 0, 0, 2, 0) + b"ab\0")),
        (r.QUERY_INFO, r.query_info_body(fid, 2, 1)),
        (r.QUERY_INFO, r.query_info_body(fid, 3, 0, out_len=4096)),
        (r.SET_INFO, r.set_info_body(fid, 1, 4, b"\0" * 36 + struct.pack("<I", 0x80))),
        (r.SET_INFO, r.set_info_body(fid, 1, 20, struct.pack("<Q", 1 << 20))),
        (r.SET_INFO, r.set_info_body(fid, 1, 10, struct.pack("<BxxxxxxxQI", 1, 0, 12) + "..\\x".encode("utf-16-le"))),
        (r.SET_INFO, r.set_info_body(fid, 1, 15, struct.pack("<IBBH", 0, 0, 2, 3) + b"ab\0xyz")),
        (r.SET_INFO, r.set_info_body(fid, 3, 0, struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 0))),
        (r.LOCK, r.lock_body(fid, 0, 10, 2)),
        (r.LOCK, r.lock_body(fid, 0xFFFFFFFFFFFFFFF0, 0x20, 1)),
        (r.IOCTL, r.ioctl_body(fid, 0x00140204, struct.pack("<I16sHH", 0x7F, os.urandom(16), 1, 2) + struct.pack("<HH", 0x0210, 0x0302))),
        (r.IOCTL, r.ioctl_body(fid, 0x001440F2, struct.pack("<QQ", 0, 1 << 30))),
        (r.IOCTL, r.ioctl_body(fid, 0x00144064, b"")),
        (r.IOCTL, r.ioctl_body(fid, 0x000900C0, b"")),
        (r.IOCTL, r.ioctl_body(r.FILE_ID_NONE, 0x001401FC, b"")),
        (r.CHANGE_NOTIFY, r.change_notify_body(dir_fid)),
        (r.FLUSH, r.flush_body(fid)),
        (r.OPLOCK_BREAK, r.oplock_break_body(fid)),
        (r.ECHO, r.echo_body()),
        (r.CANCEL, r.cancel_body()),
        (r.CLOSE, r.close_body(r.FILE_ID_NONE)),
        (r.TREE_DISCONNECT, r.tree_disconnect_body()),
        (r.LOGOFF, r.logoff_body()),
    ]


class Mutator:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def pdu(self, conn, cmd, body):
        return (
            r.header(
                cmd,
                msg_id=conn.msg_id,
                session_id=conn.session_id,
                tree_id=conn.tree_id,
                credit_charge=1,
            )
            + body
        )

    def mutate(self, data: bytes) -> bytes:
        rng = self.rng
        b = bytearray(data)
        choice = rng.randrange(10)
        if choice == 0:  # bit flips
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
        elif choice == 1:  # truncation
            b = b[: rng.randrange(len(b))]
        elif choice == 2:  # extension with junk
            b += os.urandom(rng.randint(1, 600))
        elif choice in (3, 4):  # a 16-bit field in the body to an extreme
            if len(b) > 66:
                i = rng.randrange(64, len(b) - 1)
                struct.pack_into("<H", b, i, rng.choice(U16_EXTREMES + (len(b), len(b) - 64)))
        elif choice == 5:  # a 32-bit field in the body to an extreme
            if len(b) > 68:
                i = rng.randrange(64, len(b) - 3)
                struct.pack_into("<I", b, i, rng.choice(U32_EXTREMES + (len(b), len(b) + 1)))
        elif choice == 6:  # header fields
            field = rng.choice(
                [(2, "<H"), (6, "<H"), (8, "<I"), (12, "<H"), (14, "<H"), (16, "<I"), (20, "<I"), (24, "<Q"), (36, "<I"), (40, "<Q")]
            )
            off, fmt = field
            size = struct.calcsize(fmt)
            struct.pack_into(fmt, b, off, rng.getrandbits(8 * size) if rng.random() < 0.5 else (1 << (8 * size)) - 1)
        elif choice == 7:  # structure size
            struct.pack_into("<H", b, 64, rng.choice(U16_EXTREMES))
        elif choice == 8:  # random NextCommand (not a multiple of 8, past the end, ...)
            struct.pack_into("<I", b, 20, rng.choice((1, 8, 64, 65, len(b), len(b) + 8, 0xFFFFFFF8, rng.getrandbits(32))))
        else:  # random bytes overwrite a window
            i = rng.randrange(len(b))
            n = min(len(b) - i, rng.randint(1, 16))
            b[i : i + n] = os.urandom(n)
        return bytes(b)

    def framed(self, pdu: bytes) -> bytes:
        rng = self.rng
        c = rng.randrange(20)
        if c == 0:  # frame longer than what follows (the server must not wait forever / allocate 16 MiB)
            return struct.pack(">I", 0x00FFFFFF) + pdu
        if c == 1:  # frame shorter than the PDU
            return struct.pack(">I", max(0, len(pdu) - rng.randint(1, 64))) + pdu
        if c == 2:  # non-zero NetBIOS message type / huge length
            return struct.pack(">I", rng.choice((0x81000044, 0xFFFFFFFF, 0x85000000, 0x01000000))) + pdu
        if c == 3:  # zero-length frame
            return struct.pack(">I", 0)
        return r.frame(pdu)


def special_frames(rng: random.Random):
    """Whole frames that are not SMB2 requests at all."""
    smb1 = r.SMB1_MAGIC + bytes([0x72]) + os.urandom(27) + b"\x00\x0c\x00\x02NT LM 0.12\x00"
    transform = r.TRANSFORM_MAGIC + os.urandom(16) + os.urandom(16) + struct.pack("<IHHQ", rng.choice((0, 16, 0xFFFFFFFF, 100)), 0, 1, rng.getrandbits(64)) + os.urandom(rng.randint(0, 200))
    compress = r.COMPRESS_MAGIC + struct.pack("<IHHI", rng.choice((0, 0xFFFFFFFF, 1 << 30)), rng.randrange(6), rng.randrange(2), rng.getrandbits(32)) + os.urandom(rng.randint(0, 200))
    garbage = os.urandom(rng.randint(1, 300))
    chain = b""
    for _ in range(rng.randint(2, 5)):
        part = r.header(r.ECHO, msg_id=rng.getrandbits(16), flags=4, next_command=rng.choice((0, 72, 80, 8, 0xFFFF))) + r.echo_body()
        chain += part + b"\0" * ((-len(part)) % 8)
    return [r.frame(smb1), r.frame(transform), r.frame(compress), r.frame(garbage), r.frame(chain)]


def _drain(sock):
    """Read whatever responses are waiting, without blocking.

    Returns False once the server has closed the connection."""
    sock.setblocking(False)
    try:
        while True:
            if not sock.recv(1 << 16):
                return False
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(5)


def _setup(server, rng, n):
    """A connection with a guest session, a tree on [public] and two open handles.

    NEGOTIATE, SESSION_SETUP and TREE_CONNECT must always work.  The opens may
    legitimately fail once earlier mutated SET_INFOs changed attributes or
    security descriptors on [public]; then the fuzzer uses the null file id."""
    conn = r.RawConn(server.host, server.port, timeout=5)
    conn.negotiate(rng.choice(((0x0202, 0x0210, 0x0300, 0x0302), (0x0210,), (0x0300, 0x0302))))
    conn.guest_session()
    conn.tree_connect(server.unc("public"))
    try:
        fid = conn.create(f"fuzz-{n}.bin", disposition=5)
    except ConnectionError:
        fid = r.FILE_ID_NONE
    try:
        dir_fid = conn.create("", options=1, access=0x00100081)
    except ConnectionError:
        dir_fid = r.FILE_ID_NONE
    return conn, fid, dir_fid


def test_hostile_client(smbx):
    rng = random.Random(SEED)
    mut = Mutator(rng)
    print(f"hostile client: seed={SEED} count={COUNT} time limit={SECONDS}s")

    # Warm up with a normal session, then take the baseline RSS.
    res = smbclient(smbx, "share", "ls")
    assert res.ok(), res.describe()
    conn, fid, dir_fid = _setup(smbx, rng, 0)
    assert fid != r.FILE_ID_NONE and dir_fid != r.FILE_ID_NONE, "cannot open files on [public] as guest"
    conn.close()
    rss_before = smbx.rss_kib()

    sent = connections = closed_by_server = 0
    deadline = time.monotonic() + SECONDS
    while sent < COUNT and time.monotonic() < deadline:
        connections += 1
        assert smbx.alive(), f"server died after {sent} malformed messages (seed {SEED})"
        kind = rng.randrange(10)
        try:
            if kind < 7:
                conn, fid, dir_fid = _setup(smbx, rng, connections)
                tpl = templates(fid, dir_fid, smbx.unc("public"))
                frames = []
                for _ in range(PER_CONN):
                    cmd, body = rng.choice(tpl)
                    pdu = mut.mutate(mut.pdu(conn, cmd, body))
                    conn.msg_id += 1
                    frames.append(mut.framed(pdu))
            else:
                # pre-authentication: mutated NEGOTIATE / SESSION_SETUP / raw junk
                conn = r.RawConn(smbx.host, smbx.port, timeout=5)
                frames = []
                for _ in range(PER_CONN):
                    if rng.random() < 0.3:
                        frames.append(rng.choice(special_frames(rng)))
                    else:
                        cmd, body = rng.choice(templates(r.FILE_ID_NONE, r.FILE_ID_NONE, smbx.unc("public"))[:6])
                        frames.append(mut.framed(mut.mutate(mut.pdu(conn, cmd, body))))
                        conn.msg_id += 1
        except (ConnectionError, OSError) as e:
            # The setup itself uses only valid requests: it must work.
            raise AssertionError(f"valid setup failed after {sent} malformed messages: {e}") from e
        try:
            for f in frames:
                conn.send_raw(f)
                sent += 1
                if not _drain(conn.sock):
                    closed_by_server += 1
                    break
        except (OSError, ConnectionError):
            closed_by_server += 1
        finally:
            conn.close()

    print(f"sent {sent} malformed messages over {connections} connections; server closed {closed_by_server}")
    assert sent >= min(COUNT, 1000), f"only {sent} messages sent before the time limit"

    # The server still works for a normal client...
    assert smbx.alive(), "server died"
    res = smbclient(smbx, "share", "ls")
    assert res.ok(), res.describe()
    res = smbclient(smbx, "public", "ls", dialect="SMB3_11")
    assert res.ok(), res.describe()
    # ...and did not keep what the hostile client made it allocate.
    rss_after = smbx.rss_kib()
    grown = rss_after - rss_before
    print(f"RSS before {rss_before} KiB, after {rss_after} KiB, grown {grown} KiB")
    assert grown < RSS_LIMIT_KIB, f"RSS grew by {grown} KiB (limit {RSS_LIMIT_KIB} KiB)"
