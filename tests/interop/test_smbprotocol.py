"""Python smbprotocol against the server: high-level smbclient API and the
low-level Connection/Session/TreeConnect/Open API with each dialect."""

from __future__ import annotations

import os
import uuid

import pytest
import smbclient
from smbprotocol.connection import Connection, Dialects
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

from helpers import MIB, sha256_bytes

LOW_LEVEL_DIALECTS = {
    "2.0.2": Dialects.SMB_2_0_2,
    "2.1.0": Dialects.SMB_2_1_0,
    "3.0.0": Dialects.SMB_3_0_0,
    "3.0.2": Dialects.SMB_3_0_2,
    "3.1.1": Dialects.SMB_3_1_1,
}
SMB3 = {"3.0.0", "3.0.2", "3.1.1"}

# Larger than any max read/write size a server advertises (8 MiB is usual),
# and not a multiple of anything, so the transfer spans several requests
# with a short tail.
PAYLOAD_SIZE = 9 * MIB + 12345


@pytest.fixture(scope="module")
def payload():
    return os.urandom(PAYLOAD_SIZE)


# ---------------------------------------------------------------- high level


@pytest.mark.parametrize(
    "encrypt,require_signing",
    [(None, True), (False, True), (True, True)],
    ids=["default", "signed-not-encrypted", "encrypted"],
)
def test_high_level_round_trip(smbx, payload, encrypt, require_signing):
    cache = {}
    smbclient.register_session(
        smbx.host,
        username=smbx.user,
        password=smbx.password,
        port=smbx.port,
        encrypt=encrypt,
        require_signing=require_signing,
        connection_cache=cache,
    )
    kw = dict(port=smbx.port, connection_cache=cache)
    try:
        d = smbx.unc("share", f"hl_{encrypt}_{require_signing}")
        smbclient.mkdir(d, **kw)
        assert (smbx.share_dir / f"hl_{encrypt}_{require_signing}").is_dir()
        f = d + "\\data.bin"
        with smbclient.open_file(f, mode="wb", **kw) as fh:
            fh.write(payload)
        on_disk = smbx.share_dir / f"hl_{encrypt}_{require_signing}" / "data.bin"
        assert sha256_bytes(on_disk.read_bytes()) == sha256_bytes(payload)
        with smbclient.open_file(f, mode="rb", **kw) as fh:
            back = fh.read()
        assert len(back) == len(payload)
        assert sha256_bytes(back) == sha256_bytes(payload)
        st = smbclient.stat(f, **kw)
        assert st.st_size == PAYLOAD_SIZE
        assert sorted(smbclient.listdir(d, **kw)) == ["data.bin"]
        smbclient.rename(f, d + "\\moved.bin", **kw)
        assert not on_disk.exists()
        assert on_disk.with_name("moved.bin").is_file()
        smbclient.remove(d + "\\moved.bin", **kw)
        smbclient.rmdir(d, **kw)
        assert not on_disk.parent.exists()
    finally:
        smbclient.reset_connection_cache(connection_cache=cache)


def test_high_level_encrypted_share(smbx):
    cache = {}
    smbclient.register_session(
        smbx.host, username=smbx.user, password=smbx.password, port=smbx.port, connection_cache=cache
    )
    try:
        f = smbx.unc("secret", "hl.txt")
        with smbclient.open_file(f, mode="wb", port=smbx.port, connection_cache=cache) as fh:
            fh.write(b"sealed by the share\n")
        assert (smbx.path_of("secret") / "hl.txt").read_bytes() == b"sealed by the share\n"
    finally:
        smbclient.reset_connection_cache(connection_cache=cache)


# ----------------------------------------------------------------- low level


def _connect(server, dialect, *, require_signing=False, encrypt=False):
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=require_signing)
    conn.connect(dialect=dialect, timeout=30)
    sess = Session(conn, server.user, server.password, require_encryption=encrypt)
    sess.connect()
    return conn, sess


def _open(tree, name, disposition, *, directory=False, access=None):
    fh = Open(tree, name)
    if access is None:
        access = (
            FilePipePrinterAccessMask.GENERIC_READ
            | FilePipePrinterAccessMask.GENERIC_WRITE
            | FilePipePrinterAccessMask.DELETE
        )
    fh.create(
        ImpersonationLevel.Impersonation,
        access,
        FileAttributes.FILE_ATTRIBUTE_DIRECTORY if directory else FileAttributes.FILE_ATTRIBUTE_NORMAL,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
        disposition,
        CreateOptions.FILE_DIRECTORY_FILE if directory else CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    return fh


def _low_level_round_trip(server, dialect_name, payload, *, require_signing=False, encrypt=False):
    conn, sess = _connect(
        server, LOW_LEVEL_DIALECTS[dialect_name], require_signing=require_signing, encrypt=encrypt
    )
    try:
        assert conn.dialect == LOW_LEVEL_DIALECTS[dialect_name]
        tree = TreeConnect(sess, server.unc("share"))
        tree.connect()
        name = f"ll_{dialect_name}_{int(require_signing)}{int(encrypt)}.bin"
        fh = _open(tree, name, CreateDisposition.FILE_CREATE)
        # smbprotocol grants itself few credits: keep each request <= 1 MiB.
        step = min(conn.max_write_size, MIB)
        for off in range(0, len(payload), step):
            written = fh.write(payload[off : off + step], off)
            assert written == len(payload[off : off + step])
        fh.close()
        assert sha256_bytes((server.share_dir / name).read_bytes()) == sha256_bytes(payload)

        fh = _open(tree, name, CreateDisposition.FILE_OPEN)
        assert fh.end_of_file == len(payload)
        back = bytearray()
        step = min(conn.max_read_size, MIB)
        while len(back) < len(payload):
            chunk = fh.read(len(back), min(step, len(payload) - len(back)))
            assert chunk, "empty read before end of file"
            back += chunk
        assert sha256_bytes(bytes(back)) == sha256_bytes(payload)
        fh.close(get_attributes=False)

        # Delete through delete-on-close.
        fh = Open(tree, name)
        fh.create(
            ImpersonationLevel.Impersonation,
            FilePipePrinterAccessMask.DELETE | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES,
            FileAttributes.FILE_ATTRIBUTE_NORMAL,
            ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
            CreateDisposition.FILE_OPEN,
            CreateOptions.FILE_NON_DIRECTORY_FILE | CreateOptions.FILE_DELETE_ON_CLOSE,
        )
        fh.close()
        assert not (server.share_dir / name).exists()
        tree.disconnect()
    finally:
        conn.disconnect(True)


@pytest.mark.parametrize("dialect", [d for d in LOW_LEVEL_DIALECTS if d != "3.1.1"])
def test_low_level_round_trip_unsigned(smbx, payload, dialect):
    """Signing not required by the client: unsigned requests are accepted."""
    _low_level_round_trip(smbx, dialect, payload)


def test_low_level_311_unsigned_tree_connect_refused(smbx):
    """[MS-SMB2] 3.3.5.7: with dialect 3.1.1, a TREE_CONNECT of an
    authenticated (non-guest, non-anonymous) session that is neither signed
    nor encrypted makes the server disconnect.  Samba answers ACCESS_DENIED
    instead; either way the tree connect must not succeed."""
    from smbprotocol.exceptions import AccessDenied, SMBConnectionClosed, SMBException

    conn, sess = _connect(smbx, Dialects.SMB_3_1_1)
    try:
        tree = TreeConnect(sess, smbx.unc("share"))
        with pytest.raises((AccessDenied, SMBConnectionClosed, SMBException, OSError)):
            tree.connect()
    finally:
        try:
            conn.disconnect(True)
        except (SMBException, OSError):
            pass


@pytest.mark.parametrize("dialect", list(LOW_LEVEL_DIALECTS))
def test_low_level_signing_required(smbx, payload, dialect):
    _low_level_round_trip(smbx, dialect, payload, require_signing=True)


@pytest.mark.parametrize("dialect", sorted(SMB3))
def test_low_level_encrypted(smbx, payload, dialect):
    _low_level_round_trip(smbx, dialect, payload, encrypt=True)


@pytest.mark.parametrize("dialect", ["2.0.2", "2.1.0"])
def test_low_level_encrypted_share_refused_for_smb2(smbx, dialect):
    from smbprotocol.exceptions import AccessDenied

    conn, sess = _connect(smbx, LOW_LEVEL_DIALECTS[dialect])
    try:
        tree = TreeConnect(sess, smbx.unc("secret"))
        with pytest.raises(AccessDenied):
            tree.connect()
    finally:
        conn.disconnect(True)


@pytest.mark.parametrize("dialect", sorted(SMB3))
def test_low_level_negotiated_dialect_is_highest_common(smbx, dialect):
    """Offering only one dialect yields exactly that dialect."""
    conn = Connection(uuid.uuid4(), smbx.host, smbx.port, require_signing=False)
    conn.connect(dialect=LOW_LEVEL_DIALECTS[dialect], timeout=30)
    try:
        assert conn.dialect == LOW_LEVEL_DIALECTS[dialect]
        assert conn.max_read_size >= 65536
        assert conn.max_write_size >= 65536
    finally:
        conn.disconnect(True)
