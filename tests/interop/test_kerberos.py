"""Kerberos against a real MIT KDC (issue 15 item 1).

The module starts its own realm (krb5kdc on a free 127.0.0.1 port, its own
krb5.conf and kdc.conf in a temporary directory: ``krb5kdc.py``), with the
user ``alice``, the service ``cifs/localhost`` (keytab for smbx and Samba) and
two principals a ticket must not be good for: ``host/localhost`` (in the same
keytab) and ``cifs/elsewhere`` (not in it).  smbx serves with ``kerberos
method = dedicated keytab``.

* smbclient ``--use-kerberos=required`` and the smbx client (``-k``) log in to
  smbx at SMB 2.1 (signed), 3.0.2 and 3.1.1 (sealed) and move a file whose
  SHA-256 is checked on both ends.
* The smbx client with ``-k`` logs in to Samba's smbd configured with the
  same keytab (``kerberos method = dedicated keytab``).
* Bad tickets over raw SMB2 (``rawsmb.py``, AP-REQs from pyspnego/gssapi and
  impacket): tampered, replayed, for another service (in and not in the
  keytab) and expired each get STATUS_LOGON_FAILURE, a log line saying why,
  and no session; the server stays up.

Nothing outside the machine is contacted: every name resolves to 127.0.0.1.
"""

from __future__ import annotations

import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

import rawsmb
from conftest import USER, _cleanup, smbx_bin, start_samba, start_smbx
from helpers import random_file, sha256_file
from krb5kdc import REALM, Realm, missing_tools

HOST = "localhost"
# smbclient will not use Kerberos towards "localhost" or an IP address: it names
# the server smbx.test and connects to 127.0.0.1 (-I), with a ticket for
# cifs/smbx.test.
SMBCLIENT_HOST = "smbx.test"
KRB_PASSWORD = "Alice-Krb5-Passw0rd"
STATUS_LOGON_FAILURE = 0xC000006D
# The server and the KDC accept clocks this many seconds apart; the expired-ticket
# case waits a ticket's (short) lifetime plus this before it uses the ticket.
CLOCKSKEW_S = 3
SHORT_LIFE_S = 4

@pytest.fixture(scope="module")
def realm():
    if missing_tools():
        pytest.fail(f"MIT Kerberos tools missing: {missing_tools()} (run scripts/install-deps.sh)")
    r = Realm(clockskew_s=CLOCKSKEW_S).start()
    saved = {k: os.environ.get(k) for k in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHEDIR", "KRB5_KTNAME")}
    # This process (pyspnego/gssapi, impacket) and the servers it starts use the realm.
    env = r.env()
    for k in ("KRB5_CONFIG", "KRB5CCNAME", "KRB5RCACHEDIR"):
        os.environ[k] = env[k]
    os.environ.pop("KRB5_KTNAME", None)
    try:
        r.add_user(USER, KRB_PASSWORD)
        r.keytab = r.dir / "smbx.keytab"
        r.add_service(f"cifs/{HOST}", r.keytab)
        r.add_service(f"cifs/{SMBCLIENT_HOST}", r.keytab)
        r.add_service(f"host/{HOST}", r.keytab)
        r.add_service("cifs/elsewhere", r.dir / "other.keytab")
        r.kinit(USER, KRB_PASSWORD)
        yield r
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        r.cleanup()


def kerberos_global(r: Realm) -> str:
    return (
        "    kerberos method = dedicated keytab\n"
        f"    dedicated keytab file = {r.keytab}\n"
        f"    realm = {REALM}\n"
        "    server smb encrypt = if_required\n"
        "    log level = 1\n"
    )


@pytest.fixture(scope="module")
def kserver(realm):
    server = start_smbx(extra_global=kerberos_global(realm))
    yield server
    server.check_healthy()
    server.stop()
    _cleanup(server)


def run(args, env=None, timeout=120, cwd=None):
    return subprocess.run(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env or dict(os.environ),
        timeout=timeout,
        cwd=cwd,
    )


# ---------------------------------------------------------------------------------
# Good logons and file transfers

SMBCLIENT_CASES = [
    ("SMB2_10", "sign"),
    ("SMB3_02", "encrypt"),
    ("SMB3_11", "encrypt"),
]


@pytest.mark.parametrize("dialect,protection", SMBCLIENT_CASES)
def test_smbclient_kerberos_put_get(kserver, realm, tmp_path, dialect, protection):
    src = tmp_path / "src.bin"
    digest = random_file(src, 3 * 1024 * 1024 + 17)
    name = f"krb-{dialect}.bin"
    back = tmp_path / "back.bin"
    r = run(
        [
            "smbclient",
            f"//{SMBCLIENT_HOST}/share",
            "-I",
            "127.0.0.1",
            "-p",
            str(kserver.port),
            "--use-kerberos=required",
            "-N",
            "-m",
            dialect,
            f"--option=client min protocol={dialect}",
            f"--client-protection={protection}",
            "-c",
            f"put {src} {name}; get {name} {back}",
        ]
    )
    assert r.returncode == 0 and "NT_STATUS_" not in r.stdout, r.stdout
    assert sha256_file(kserver.share_dir / name) == digest
    assert sha256_file(back) == digest
    log = kserver.log_text()
    assert f"principal={USER}@{REALM}" in log and "Kerberos ticket accepted" in log, log[-2000:]


SMBX_CASES = [("2.1", "--sign"), ("3.0.2", "--encrypt"), ("3.1.1", "--encrypt")]


def smbx_put_get(server_port: int, tmp_path: Path, dialect: str, protection: str, share_dir: Path):
    src = tmp_path / "src.bin"
    digest = random_file(src, 2 * 1024 * 1024 + 5)
    name = f"smbx-krb-{dialect}.bin"
    url = f"smb://{HOST}:{server_port}/share/{name}"
    common = ["--dialect", dialect, protection, "-k"]
    put = run([str(smbx_bin()), "put", str(src), url] + common)
    assert put.returncode == 0, put.stdout
    back = tmp_path / "back.bin"
    get = run([str(smbx_bin()), "get", url, str(back)] + common)
    assert get.returncode == 0, get.stdout
    assert sha256_file(back) == digest
    assert sha256_file(share_dir / name) == digest


@pytest.mark.parametrize("dialect,protection", SMBX_CASES)
def test_smbx_client_kerberos_put_get(kserver, realm, tmp_path, dialect, protection):
    smbx_put_get(kserver.port, tmp_path, dialect, protection, kserver.share_dir)


def test_smbx_client_without_a_ticket_fails_cleanly(kserver, realm, tmp_path):
    empty = tmp_path / "no-ccache"
    env = realm.env(empty)
    r = run([str(smbx_bin()), "ls", "-k", f"smb://{HOST}:{kserver.port}/share/"], env=env)
    assert r.returncode != 0
    assert "Kerberos" in r.stdout, r.stdout
    assert "panicked" not in r.stdout


def test_smbx_client_kerberos_against_samba(realm, tmp_path):
    extra = ";".join(
        [
            "kerberos method = dedicated keytab",
            f"dedicated keytab file = {realm.keytab}",
            f"realm = {REALM}",
            # The fixture's streams_xattr is in samba-vfs-modules, which a
            # --no-install-recommends install of samba leaves out; this test needs
            # no streams.
            "vfs objects =",
        ]
    )
    saved = os.environ.get("SMBX_SAMBA_EXTRA_GLOBAL")
    os.environ["SMBX_SAMBA_EXTRA_GLOBAL"] = extra
    try:
        samba = start_samba()
    finally:
        if saved is None:
            os.environ.pop("SMBX_SAMBA_EXTRA_GLOBAL", None)
        else:
            os.environ["SMBX_SAMBA_EXTRA_GLOBAL"] = saved
    try:
        for dialect, protection in SMBX_CASES:
            smbx_put_get(samba.port, tmp_path, dialect, protection, samba.share_dir)
    finally:
        samba.stop()
        _cleanup(samba)


# ---------------------------------------------------------------------------------
# Bad tickets, over raw SMB2

def der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + length + content


OID_SPNEGO = bytes.fromhex("2b0601050502")
OID_KRB5 = bytes.fromhex("2a864886f712010202")


def spnego_token(spn_host: str, service: str = "cifs") -> bytes:
    """A SPNEGO NegTokenInit (RFC 4178) offering Kerberos 5 with a fresh AP-REQ from
    MIT's GSSAPI (python-gssapi), mutual authentication asked for."""
    import gssapi

    name = gssapi.Name(f"{service}@{spn_host}", gssapi.NameType.hostbased_service)
    ctx = gssapi.SecurityContext(
        name=name,
        usage="initiate",
        mech=gssapi.MechType.kerberos,
        flags=gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity,
    )
    ap_req = ctx.step()
    mech_types = der(0xA0, der(0x30, der(0x06, OID_KRB5)))
    mech_token = der(0xA2, der(0x04, ap_req))
    init = der(0xA0, der(0x30, mech_types + mech_token))
    return der(0x60, der(0x06, OID_SPNEGO) + init)


def raw_session_setup(port: int, token: bytes, dialects=(0x0202, 0x0210, 0x0300, 0x0302)) -> tuple:
    c = rawsmb.RawConn("127.0.0.1", port)
    try:
        c.negotiate(dialects)
        status, resp = c.request(rawsmb.SESSION_SETUP, rawsmb.session_setup_body(token))
        return status, resp
    finally:
        c.close()


def log_after(server, mark: int) -> str:
    return server.log_text()[mark:]


def assert_refused(server, token: bytes, why: str) -> str:
    mark = len(server.log_text())
    status, resp = raw_session_setup(server.port, token)
    assert status == STATUS_LOGON_FAILURE, f"0x{status:08x}"
    # No session: the response carries no session the client could use.
    deadline = time.monotonic() + 5
    text = log_after(server, mark)
    while "logon failed" not in text and time.monotonic() < deadline:
        time.sleep(0.05)
        text = log_after(server, mark)
    assert "logon failed" in text and why.lower() in text.lower(), text
    assert "session established" not in text, text
    server.check_healthy()
    return text


def test_raw_valid_ticket_is_accepted_once(kserver, realm):
    token = spnego_token(HOST)
    status, resp = raw_session_setup(kserver.port, token)
    assert status == rawsmb.STATUS_SUCCESS, f"0x{status:08x}"
    # Mutual authentication: the response carries the AP-REP inside a NegTokenResp.
    off, length = struct.unpack_from("<HH", resp, 64 + 4)
    blob = resp[off : off + length]
    assert blob[:1] == b"\xa1" and len(blob) > 40, blob.hex()
    # The same AP-REQ again is a replay.
    assert_refused(kserver, token, "replay")


def test_raw_tampered_ticket_is_refused(kserver, realm):
    token = bytearray(spnego_token(HOST))
    # The AP-REQ's authenticator is the last thing in the token: flip bits inside it.
    token[-12] ^= 0x5A
    token[-30] ^= 0x01
    assert_refused(kserver, bytes(token), "Kerberos ticket refused")


def test_raw_ticket_for_another_service_in_the_keytab_is_refused(kserver, realm):
    token = spnego_token(HOST, service="host")
    assert_refused(kserver, token, f"host/{HOST}@{REALM}, not a cifs/")


def test_raw_ticket_for_a_service_not_in_the_keytab_is_refused(kserver, realm):
    token = spnego_token("elsewhere")
    assert_refused(kserver, token, "Kerberos ticket refused")


def test_expired_ticket_is_refused(kserver, realm, tmp_path):
    """A ticket that has expired, sent with a fresh authenticator: impacket builds
    the AP-REQ from the cache without checking the ticket's end time (MIT's own
    client refuses to use an expired ticket)."""
    from impacket.smbconnection import SessionError, SMBConnection

    cc = tmp_path / "short.ccache"
    realm.kinit(USER, KRB_PASSWORD, ccache=cc, lifetime=f"{SHORT_LIFE_S}s")
    realm.kvno(f"cifs/{HOST}", ccache=cc)
    # Past the ticket's end and the accepted clock skew (bounded: a few seconds).
    time.sleep(SHORT_LIFE_S + CLOCKSKEW_S + 2)
    mark = len(kserver.log_text())
    saved = os.environ.get("KRB5CCNAME")
    os.environ["KRB5CCNAME"] = str(cc)
    try:
        conn = SMBConnection(HOST, "127.0.0.1", sess_port=kserver.port)
        with pytest.raises(SessionError) as err:
            conn.kerberosLogin(USER, "", REALM, useCache=True, kdcHost="127.0.0.1")
        assert err.value.getErrorCode() == STATUS_LOGON_FAILURE, err.value
        conn.close()
    finally:
        os.environ["KRB5CCNAME"] = saved or ""
    text = log_after(kserver, mark)
    assert "logon failed" in text and "expired" in text.lower(), text
    kserver.check_healthy()


def test_smbx_client_kerberos_binds_a_further_channel(realm, tmp_path):
    """A Kerberos session binds a further channel (issue 12): smbx listens on
    127.0.0.1 and ::1; ``smbx put -k --multichannel 2`` binds a
    connection to the second address with a fresh AP-REQ, the server logs the
    binding, and the file arrives whole."""
    server = start_smbx(
        extra_global=kerberos_global(realm) + "    server multi channel support = yes\n",
        interfaces="127.0.0.1 ::1",
    )
    try:
        src = tmp_path / "src.bin"
        digest = random_file(src, 8 * 1024 * 1024 + 3)
        url = f"smb://{HOST}:{server.port}/share/krb-mc.bin"
        put = run([str(smbx_bin()), "put", "-k", "--multichannel", "2", str(src), url])
        assert put.returncode == 0, put.stdout
        log = server.log_text()
        assert log.count("channel bound to session") == 1, put.stdout + log[-3000:]
        assert sha256_file(server.share_dir / "krb-mc.bin") == digest
        server.check_healthy()
    finally:
        server.stop()
        _cleanup(server)
