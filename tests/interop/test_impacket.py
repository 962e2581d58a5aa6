"""impacket's SMBConnection against the server."""

from __future__ import annotations

import io
import os

import pytest
from impacket.smb3structs import SMB2_DIALECT_002, SMB2_DIALECT_21, SMB2_DIALECT_30, SMB2_DIALECT_311
from impacket.smbconnection import SMBConnection

from conftest import NETBIOS_NAME
from helpers import sha256_bytes

DIALECTS = {
    "2.0.2": SMB2_DIALECT_002,
    "2.1": SMB2_DIALECT_21,
    "3.0": SMB2_DIALECT_30,
    "3.1.1": SMB2_DIALECT_311,
}


def _connect(server, dialect=None) -> SMBConnection:
    conn = SMBConnection(
        NETBIOS_NAME, server.host, sess_port=server.port, preferredDialect=dialect, timeout=60
    )
    conn.login(server.user, server.password)
    return conn


@pytest.mark.parametrize("dialect", [None] + list(DIALECTS), ids=lambda d: d or "default")
def test_round_trip(smbx, dialect):
    conn = _connect(smbx, DIALECTS.get(dialect))
    try:
        if dialect is not None:
            assert conn.getDialect() == DIALECTS[dialect]
        names = {s["shi1_netname"][:-1] for s in conn.listShares()}
        assert {"share", "public", "secret", "ro", "IPC$"} <= names, names

        data = os.urandom(3 * 1024 * 1024 + 17)
        name = f"imp_{dialect or 'default'}.bin"
        conn.putFile("share", name, io.BytesIO(data).read)
        assert sha256_bytes((smbx.share_dir / name).read_bytes()) == sha256_bytes(data)

        out = io.BytesIO()
        conn.getFile("share", name, out.write)
        assert sha256_bytes(out.getvalue()) == sha256_bytes(data)

        listing = {f.get_longname(): f.get_filesize() for f in conn.listPath("share", "*")}
        assert listing.get(name) == len(data)

        conn.createDirectory("share", f"impdir_{dialect or 'default'}")
        assert (smbx.share_dir / f"impdir_{dialect or 'default'}").is_dir()
        conn.deleteDirectory("share", f"impdir_{dialect or 'default'}")
        assert not (smbx.share_dir / f"impdir_{dialect or 'default'}").exists()

        conn.deleteFile("share", name)
        assert not (smbx.share_dir / name).exists()
    finally:
        conn.close()


def test_get_missing_file_is_object_name_not_found(smbx):
    from impacket.nt_errors import STATUS_OBJECT_NAME_NOT_FOUND
    from impacket.smbconnection import SessionError

    conn = _connect(smbx)
    try:
        with pytest.raises(SessionError) as ei:
            conn.getFile("share", "does-not-exist.bin", io.BytesIO().write)
        assert ei.value.getErrorCode() == STATUS_OBJECT_NAME_NOT_FOUND
    finally:
        conn.close()
