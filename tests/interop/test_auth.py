"""Authentication failures and guest mapping, seen by three different clients.

* wrong password for a known user -> STATUS_LOGON_FAILURE (always; a known
  user with a bad password is never mapped to guest);
* unknown user with ``map to guest = never`` -> STATUS_LOGON_FAILURE;
* unknown user with ``map to guest = bad user`` -> a guest session, which may
  use [public] (guest ok) but is refused [share] with ACCESS_DENIED.
"""

from __future__ import annotations

import io
import uuid

import pytest
from impacket.nt_errors import STATUS_ACCESS_DENIED, STATUS_LOGON_FAILURE
from impacket.smb3structs import SMB2_DIALECT_21
from impacket.smbconnection import SessionError, SMBConnection
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import AccessDenied, LogonFailure
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import NETBIOS_NAME
from helpers import SMBCLIENT_DIALECTS, smbclient

STATUS_LOGON_FAILURE_CODE = 0xC000006D
UNKNOWN_USER = "mallory"


def _smbprotocol_session(server, user, password, dialect=Dialects.SMB_3_1_1):
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=False)
    conn.connect(dialect=dialect, timeout=30)
    sess = Session(conn, user, password, require_encryption=False, auth_protocol="ntlm")
    return conn, sess


# ------------------------------------------------------------ wrong password


@pytest.mark.parametrize("dialect", [Dialects.SMB_2_0_2, Dialects.SMB_2_1_0, Dialects.SMB_3_1_1], ids=hex)
def test_wrong_password_smbprotocol(smbx, dialect):
    conn, sess = _smbprotocol_session(smbx, smbx.user, "not-the-password", dialect)
    try:
        with pytest.raises(LogonFailure) as ei:
            sess.connect()
        assert ei.value.status == STATUS_LOGON_FAILURE_CODE
    finally:
        conn.disconnect(True)


def test_wrong_password_impacket(smbx):
    conn = SMBConnection(NETBIOS_NAME, smbx.host, sess_port=smbx.port, timeout=60)
    try:
        with pytest.raises(SessionError) as ei:
            conn.login(smbx.user, "not-the-password")
        assert ei.value.getErrorCode() == STATUS_LOGON_FAILURE
    finally:
        conn.close()


@pytest.mark.parametrize("dialect", SMBCLIENT_DIALECTS)
def test_wrong_password_smbclient(smbx, dialect):
    res = smbclient(smbx, "share", "ls", password="not-the-password", dialect=dialect)
    assert res.returncode != 0, res.describe()
    assert "NT_STATUS_LOGON_FAILURE" in res.output, res.describe()


def test_wrong_password_not_mapped_to_guest(smbx):
    """map to guest = bad user maps unknown users only, never bad passwords."""
    res = smbclient(smbx, "public", "ls", password="not-the-password")
    assert "NT_STATUS_LOGON_FAILURE" in res.output, res.describe()


def test_right_password_still_works_after_failures(smbx):
    for _ in range(3):
        smbclient(smbx, "share", "ls", password="wrong")
    res = smbclient(smbx, "share", "ls")
    assert res.ok(), res.describe()


# --------------------------------------------- unknown user, no guest mapping


def test_unknown_user_smbprotocol(smbx_noguest):
    conn, sess = _smbprotocol_session(smbx_noguest, UNKNOWN_USER, "whatever")
    try:
        with pytest.raises(LogonFailure) as ei:
            sess.connect()
        assert ei.value.status == STATUS_LOGON_FAILURE_CODE
    finally:
        conn.disconnect(True)


def test_unknown_user_impacket(smbx_noguest):
    conn = SMBConnection(NETBIOS_NAME, smbx_noguest.host, sess_port=smbx_noguest.port, timeout=60)
    try:
        with pytest.raises(SessionError) as ei:
            conn.login(UNKNOWN_USER, "whatever")
        assert ei.value.getErrorCode() == STATUS_LOGON_FAILURE
    finally:
        conn.close()


@pytest.mark.parametrize("share", ["share", "public"])
def test_unknown_user_smbclient(smbx_noguest, share):
    res = smbclient(smbx_noguest, share, "ls", user=UNKNOWN_USER, password="whatever")
    assert res.returncode != 0, res.describe()
    assert "NT_STATUS_LOGON_FAILURE" in res.output, res.describe()


def test_known_user_works_without_guest_mapping(smbx_noguest):
    res = smbclient(smbx_noguest, "share", "ls")
    assert res.ok(), res.describe()


# ------------------------------------------- unknown user mapped to guest


def test_unknown_user_becomes_guest_smbprotocol(smbx):
    conn, sess = _smbprotocol_session(smbx, UNKNOWN_USER, "whatever", Dialects.SMB_3_0_2)
    try:
        # smbprotocol raises if it required signing/encryption of a guest
        # session; neither is required here, so a guest session connects.
        sess.connect()
        # guest ok = yes share: allowed
        # (a guest has no signing key, so no secure-negotiate validation)
        TreeConnect(sess, smbx.unc("public")).connect(require_secure_negotiate=False)
        # share without guest ok: refused
        with pytest.raises(AccessDenied):
            TreeConnect(sess, smbx.unc("share")).connect(require_secure_negotiate=False)
    finally:
        conn.disconnect(True)


def test_unknown_user_becomes_guest_impacket(smbx):
    # SMB 2.1: impacket 0.13 signs 3.1.1 guest requests with a key it cannot
    # have, which any correct server rejects.
    conn = SMBConnection(
        NETBIOS_NAME, smbx.host, sess_port=smbx.port, timeout=60, preferredDialect=SMB2_DIALECT_21
    )
    try:
        conn.login(UNKNOWN_USER, "whatever")
        assert conn.isGuestSession()
        conn.putFile("public", "guest.txt", io.BytesIO(b"from a guest\n").read)
        assert (smbx.path_of("public") / "guest.txt").read_bytes() == b"from a guest\n"
        with pytest.raises(SessionError) as ei:
            conn.putFile("share", "guest.txt", io.BytesIO(b"no\n").read)
        assert ei.value.getErrorCode() == STATUS_ACCESS_DENIED
        assert not (smbx.share_dir / "guest.txt").exists()
        conn.deleteFile("public", "guest.txt")
    finally:
        conn.close()


@pytest.mark.parametrize("dialect", ["SMB2_10", "SMB3_02"])
def test_unknown_user_becomes_guest_smbclient(smbx, dialect):
    res = smbclient(smbx, "public", "ls", user=UNKNOWN_USER, password="whatever", dialect=dialect)
    assert res.ok(), res.describe()
    res = smbclient(smbx, "share", "ls", user=UNKNOWN_USER, password="whatever", dialect=dialect)
    assert res.returncode != 0, res.describe()
    assert "NT_STATUS_ACCESS_DENIED" in res.output, res.describe()
