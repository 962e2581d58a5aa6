"""A minimal raw SMB2 client over a plain socket, for the hostile-client test.

It builds requests by hand (struct, [MS-SMB2] layouts), can authenticate a
*guest* session (NTLM via pyspnego with an unknown user, mapped to guest by
``map to guest = bad user``; guest sessions are unsigned), tree-connect and
open a file.  That gives the fuzzer valid session, tree and file ids, so the
mutated requests reach the deep command handlers, not just the framing.
"""

from __future__ import annotations

import os
import socket
import struct

SMB2_MAGIC = b"\xfeSMB"
TRANSFORM_MAGIC = b"\xfdSMB"
COMPRESS_MAGIC = b"\xfcSMB"
SMB1_MAGIC = b"\xffSMB"

NEGOTIATE, SESSION_SETUP, LOGOFF, TREE_CONNECT, TREE_DISCONNECT = 0, 1, 2, 3, 4
CREATE, CLOSE, FLUSH, READ, WRITE, LOCK, IOCTL, CANCEL, ECHO = 5, 6, 7, 8, 9, 10, 11, 12, 13
QUERY_DIRECTORY, CHANGE_NOTIFY, QUERY_INFO, SET_INFO, OPLOCK_BREAK = 14, 15, 16, 17, 18

STATUS_SUCCESS = 0
STATUS_MORE_PROCESSING_REQUIRED = 0xC0000016
STATUS_PENDING = 0x00000103

DIALECTS = (0x0202, 0x0210, 0x0300, 0x0302, 0x0311)
FILE_ID_NONE = b"\xff" * 16


def header(cmd, *, msg_id=0, session_id=0, tree_id=0, credits=64, flags=0, next_command=0, credit_charge=1):
    """A 64-byte SMB2 sync request header."""
    return struct.pack(
        "<4sHHIHHIIQIIQ16s",
        SMB2_MAGIC,
        64,
        credit_charge,
        0,  # channel sequence / status
        cmd,
        credits,
        flags,
        next_command,
        msg_id,
        0,  # reserved (process id)
        tree_id,
        session_id,
        b"\0" * 16,
    )


def frame(payload: bytes) -> bytes:
    """Direct-TCP framing: 0x00 + 24-bit big-endian length."""
    return struct.pack(">I", len(payload)) + payload


def negotiate_body(dialects=DIALECTS, with_contexts=True) -> bytes:
    n = len(dialects)
    fixed_len = 36
    dial = struct.pack(f"<{n}H", *dialects)
    ctx_blob = b""
    ctx_off = 0
    count = 0
    if with_contexts and 0x0311 in dialects:
        # preauth integrity (SHA-512, 32-byte salt) and encryption (GCM, CCM)
        pre = struct.pack("<HHH", 1, 32, 1) + struct.pack("<H", 1) + os.urandom(32)
        enc = struct.pack("<H", 2) + struct.pack("<HH", 2, 1)  # AES-128-GCM, AES-128-CCM
        sign = struct.pack("<H", 2) + struct.pack("<HH", 1, 2)  # AES-CMAC, AES-GMAC
        ctxs = [(1, pre), (2, enc), (8, sign)]
        off = 64 + fixed_len + len(dial)
        pad = (-off) % 8
        ctx_off = off + pad
        parts = []
        for i, (ctype, data) in enumerate(ctxs):
            c = struct.pack("<HHI", ctype, len(data), 0) + data
            if i != len(ctxs) - 1:
                c += b"\0" * ((-len(c)) % 8)
            parts.append(c)
        ctx_blob = b"\0" * pad + b"".join(parts)
        count = len(ctxs)
    body = struct.pack(
        "<HHHH16sIHH",
        fixed_len,
        n,
        1,  # signing enabled
        0,
        os.urandom(16),
        0x7F,  # capabilities
        0,
        0,
    )
    # NegotiateContextOffset/Count overlay ClientStartTime for 3.1.1
    body = body[:28] + struct.pack("<IHH", ctx_off, count, 0) + dial + ctx_blob
    return body


def session_setup_body(token: bytes, prev_session=0) -> bytes:
    return struct.pack("<HBBIIHHQ", 25, 0, 1, 0, 0, 64 + 24, len(token), prev_session) + token


def tree_connect_body(path: str) -> bytes:
    p = path.encode("utf-16-le")
    return struct.pack("<HHHH", 9, 0, 64 + 8, len(p)) + p


def create_body(name: str, *, disposition=3, options=0x40, access=0x0012019F, contexts=b"") -> bytes:
    n = name.encode("utf-16-le")
    name_off = 64 + 56
    blob = n + b"\0" * ((-len(n)) % 8) if contexts else n
    ctx_off = name_off + len(blob) if contexts else 0
    body = struct.pack(
        "<HBBIQQIIIIIHHII",
        57,
        0,  # security flags
        0,  # oplock
        2,  # impersonation
        0,
        0,
        access,
        0x80,  # attributes
        7,  # share all
        disposition,
        options,
        name_off,
        len(n),
        ctx_off,
        len(contexts),
    )
    return body + (blob + contexts if (n or contexts) else b"\0")


def create_context(name: bytes, data: bytes) -> bytes:
    name_off = 16
    data_off = (name_off + len(name) + 7) // 8 * 8
    c = struct.pack("<IHHHHI", 0, name_off, len(name), 0, data_off if data else 0, len(data))
    c += name + b"\0" * (data_off - name_off - len(name)) + data
    return c


def read_body(file_id, length=4096, offset=0) -> bytes:
    return struct.pack("<HBBIQ16sIIIHH", 49, 0x50, 0, length, offset, file_id, 0, 0, 0, 0, 0) + b"\0"


def write_body(file_id, data: bytes, offset=0) -> bytes:
    return struct.pack("<HHIQ16sIIHHI", 49, 64 + 48, len(data), offset, file_id, 0, 0, 0, 0, 0) + data


def close_body(file_id) -> bytes:
    return struct.pack("<HHI16s", 24, 1, 0, file_id)


def flush_body(file_id) -> bytes:
    return struct.pack("<HHI16s", 24, 0, 0, file_id)


def query_directory_body(file_id, pattern="*", cls=37) -> bytes:
    p = pattern.encode("utf-16-le")
    return struct.pack("<HBBI16sHHI", 33, cls, 0, 0, file_id, 64 + 32, len(p), 65536) + p


def query_info_body(file_id, info_type=1, cls=18, out_len=65536, input_data=b"") -> bytes:
    in_off = 64 + 40 if input_data else 0
    return (
        struct.pack("<HBBIHHIII16s", 41, info_type, cls, out_len, in_off, 0, len(input_data), 0, 0, file_id)
        + (input_data or b"\0")
    )


def set_info_body(file_id, info_type=1, cls=4, data=b"\0" * 40) -> bytes:
    return struct.pack("<HBBIHHI16s", 33, info_type, cls, len(data), 64 + 32, 0, 0, file_id) + data


def lock_body(file_id, offset=0, length=1, flags=2) -> bytes:
    return struct.pack("<HHI16s", 48, 1, 0, file_id) + struct.pack("<QQII", offset, length, flags, 0)


def ioctl_body(file_id, ctl=0x00140204, data=b"", max_out=65536) -> bytes:
    in_off = 64 + 56 if data else 0
    return struct.pack(
        "<HHI16sIIIIIIII", 57, 0, ctl, file_id, in_off, len(data), 0, 0, 0, max_out, 1, 0
    ) + (data or b"")


def change_notify_body(file_id) -> bytes:
    return struct.pack("<HHI16sII", 32, 0, 65536, file_id, 0xFFF, 0)


def echo_body() -> bytes:
    return struct.pack("<HH", 4, 0)


def oplock_break_body(file_id) -> bytes:
    return struct.pack("<HBBI16s", 24, 0, 0, 0, file_id)


def logoff_body() -> bytes:
    return struct.pack("<HH", 4, 0)


def tree_disconnect_body() -> bytes:
    return struct.pack("<HH", 4, 0)


def cancel_body() -> bytes:
    return struct.pack("<HH", 4, 0)


class RawConn:
    """One TCP connection speaking raw SMB2 frames."""

    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.msg_id = 0
        self.session_id = 0
        self.tree_id = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        hdr = self._recv_exact(4)
        length = struct.unpack(">I", hdr)[0] & 0x00FFFFFF
        return self._recv_exact(length)

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        return buf

    def request(self, cmd, body, *, tree_id=None):
        """Send one request; return (status, response header+body), skipping interim responses."""
        msg_id = self.msg_id
        self.msg_id += 1
        pdu = header(
            cmd,
            msg_id=msg_id,
            session_id=self.session_id,
            tree_id=self.tree_id if tree_id is None else tree_id,
        ) + body
        self.send_raw(frame(pdu))
        while True:
            resp = self.recv_frame()
            status = struct.unpack_from("<I", resp, 8)[0]
            if status == STATUS_PENDING and struct.unpack_from("<I", resp, 16)[0] & 0x2:
                continue  # async interim response
            return status, resp

    # ---- a guest session, enough to get real ids for the fuzzer

    def negotiate(self, dialects=(0x0202, 0x0210, 0x0300, 0x0302)):
        status, resp = self.request(NEGOTIATE, negotiate_body(dialects, with_contexts=False))
        if status != STATUS_SUCCESS:
            raise ConnectionError(f"NEGOTIATE failed: 0x{status:08x}")
        return resp

    def guest_session(self, user="fuzz-guest", password="x"):
        import spnego

        ctx = spnego.client(user, password, hostname="127.0.0.1", service="cifs", protocol="ntlm")
        token = ctx.step()
        while True:
            status, resp = self.request(SESSION_SETUP, session_setup_body(token))
            self.session_id = struct.unpack_from("<Q", resp, 40)[0]
            if status == STATUS_SUCCESS:
                return struct.unpack_from("<H", resp, 64 + 2)[0]  # session flags
            if status != STATUS_MORE_PROCESSING_REQUIRED:
                raise ConnectionError(f"SESSION_SETUP failed: 0x{status:08x}")
            off, length = struct.unpack_from("<HH", resp, 64 + 4)
            token = ctx.step(resp[off : off + length])

    def tree_connect(self, unc):
        status, resp = self.request(TREE_CONNECT, tree_connect_body(unc), tree_id=0)
        if status != STATUS_SUCCESS:
            raise ConnectionError(f"TREE_CONNECT failed: 0x{status:08x}")
        self.tree_id = struct.unpack_from("<I", resp, 36)[0]
        return self.tree_id

    def create(self, name, **kw):
        status, resp = self.request(CREATE, create_body(name, **kw))
        if status != STATUS_SUCCESS:
            raise ConnectionError(f"CREATE {name!r} failed: 0x{status:08x}")
        return resp[64 + 64 : 64 + 80]
