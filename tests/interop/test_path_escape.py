"""Attempts to reach a file outside the share root.

A file is planted beside the share (``<root>/outside/secret.txt``) and
symlinks pointing out of the share are planted inside it.  Each attempt opens
a crafted name with smbprotocol's low-level Open -- for reading, for
overwriting, for delete-on-close, as a rename target, as a directory to list
-- and the test asserts that the planted file's content never comes back and
that it is never changed (SHA-256, mtime, size) nor removed, and that nothing
new appears outside the share.
"""

from __future__ import annotations

import os
import uuid

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import SMBException, SMBResponseException
from smbprotocol.file_info import FileInformationClass, FileRenameInformation
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    DirectoryAccessMask,
    FileAttributes,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2SetInfoRequest,
    SMB2SetInfoResponse,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from helpers import sha256_bytes

MARKER = b"PLANTED-OUTSIDE-THE-SHARE-7f3a9c"
SECRET_BODY = MARKER + b"\n" + b"do not serve me\n" * 64


def _attempt_names(root):
    """Names that must not resolve to anything outside <root>/share."""
    outside = str(root / "outside")
    rel = "..\\outside\\secret.txt"
    return [
        rel,
        "..\\..\\" + outside.lstrip("/").replace("/", "\\") + "\\secret.txt",
        "sub\\..\\..\\outside\\secret.txt",
        ".\\..\\outside\\secret.txt",
        "\\..\\outside\\secret.txt",
        "..\\outside\\",
        "..",
        "..\\",
        "...\\..\\outside\\secret.txt",
        "../outside/secret.txt",
        "..//outside//secret.txt",
        "sub/../../outside/secret.txt",
        # absolute paths: unix, backslashed unix, drive letter, UNC-in-name
        outside + "/secret.txt",
        outside.replace("/", "\\") + "\\secret.txt",
        "\\\\" + outside.lstrip("/").replace("/", "\\") + "\\secret.txt",
        "C:\\" + outside.lstrip("/").replace("/", "\\") + "\\secret.txt",
        "\\\\127.0.0.1\\share\\..\\outside\\secret.txt",
        "\\??\\" + outside.replace("/", "\\") + "\\secret.txt",
        # symlinks planted inside the share
        "link_dir\\secret.txt",
        "link_dir",
        "link_file",
        "link_abs",
        "link_abs_dir\\secret.txt",
        "sub\\link_up\\outside\\secret.txt",
        "loop",
        "loop\\x",
        "loop_a\\secret.txt",
        # stream-name tricks
        "file.txt:..\\..\\outside\\secret.txt",
        "file.txt:..\\..\\outside\\secret.txt:$DATA",
        "file.txt:../../outside/secret.txt",
        "file.txt::..\\..\\outside\\secret.txt",
        ":..\\outside\\secret.txt",
        "sub:..\\..\\outside\\secret.txt",
        "link_file:$DATA",
        "link_dir:x:$DATA",
        # encodings that must stay literal
        "%2e%2e\\outside\\secret.txt",
        "\uff0e\uff0e\\outside\\secret.txt",
        "..\u0000\\outside\\secret.txt",
        "..\\outside\\secret.txt\u0000",
        " ..\\outside\\secret.txt",
        "..\\outside\\SECRET.TXT",
    ]


@pytest.fixture
def planted(smbx):
    root = smbx.root
    outside = root / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "secret.txt"
    secret.write_bytes(SECRET_BODY)
    os.utime(secret, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    share = smbx.share_dir
    (share / "sub").mkdir(exist_ok=True)
    (share / "file.txt").write_bytes(b"inside\n")
    links = {
        "link_dir": "../outside",
        "link_file": "../outside/secret.txt",
        "link_abs": str(secret),
        "link_abs_dir": str(outside),
        "loop": "loop",
        "loop_a": "loop_b",
        "loop_b": "loop_a",
        "sub/link_up": "../..",
    }
    for name, target in links.items():
        p = share / name
        if p.is_symlink() or p.exists():
            p.unlink()
        os.symlink(target, p)
    before = _snapshot(outside)
    yield smbx
    after = _snapshot(outside)
    assert after == before, f"files outside the share changed:\nbefore={before}\nafter={after}"
    for name in links:
        (share / name).unlink()


def _snapshot(outside):
    """Names, sizes, mtimes and hashes of everything in <root>/outside."""
    snap = {}
    for p in sorted(outside.rglob("*")):
        st = p.lstat()
        digest = sha256_bytes(p.read_bytes()) if p.is_file() and not p.is_symlink() else None
        snap[str(p.relative_to(outside))] = (st.st_size, st.st_mtime_ns, digest)
    return snap


@pytest.fixture
def tree(planted):
    server = planted
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    conn.connect(dialect=Dialects.SMB_3_1_1, timeout=30)
    sess = Session(conn, server.user, server.password, require_encryption=False)
    sess.connect()
    t = TreeConnect(sess, server.unc("share"))
    t.connect()
    yield t
    conn.disconnect(True)


def _try_open(tree, name, access, disposition, options=0, attrs=FileAttributes.FILE_ATTRIBUTE_NORMAL):
    fh = Open(tree, name)
    try:
        fh.create(
            ImpersonationLevel.Impersonation,
            access,
            attrs,
            ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
            disposition,
            options,
        )
    except (SMBResponseException, SMBException, ValueError):
        return None
    return fh


def _close(fh):
    try:
        fh.close(get_attributes=False)
    except (SMBResponseException, SMBException):
        pass


def _read_all(fh, limit=1 << 20):
    data = b""
    try:
        while len(data) < limit:
            chunk = fh.read(len(data), 65536)
            if not chunk:
                break
            data += chunk
    except (SMBResponseException, SMBException):
        pass
    return data


@pytest.mark.parametrize("idx", range(41))
def test_escape_attempt(tree, planted, idx):
    names = _attempt_names(planted.root)
    assert len(names) == 41  # keep the parametrize range in step with the list
    name = names[idx]
    read = FilePipePrinterAccessMask.GENERIC_READ

    # 1. open for reading: whatever opens must not be the planted file
    fh = _try_open(tree, name, read, CreateDisposition.FILE_OPEN)
    if fh is not None:
        data = _read_all(fh)
        assert MARKER not in data, f"{name!r} returned the planted file"
        _close(fh)

    # 2. open as a directory and list it: the outside dir must not be listed
    fh = _try_open(
        tree,
        name,
        DirectoryAccessMask.FILE_LIST_DIRECTORY | DirectoryAccessMask.FILE_READ_ATTRIBUTES,
        CreateDisposition.FILE_OPEN,
        CreateOptions.FILE_DIRECTORY_FILE,
        FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
    )
    if fh is not None:
        try:
            entries = fh.query_directory("*", FileInformationClass.FILE_NAMES_INFORMATION)
            listed = {e["file_name"].get_value().decode("utf-16-le") for e in entries}
        except (SMBResponseException, SMBException):
            listed = set()
        assert "secret.txt" not in listed, f"{name!r} listed the outside directory: {listed}"
        _close(fh)

    # 3. overwrite / create through the name
    fh = _try_open(
        tree,
        name,
        FilePipePrinterAccessMask.GENERIC_WRITE | FilePipePrinterAccessMask.GENERIC_READ,
        CreateDisposition.FILE_OVERWRITE_IF,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    if fh is not None:
        try:
            fh.write(b"OVERWRITTEN", 0)
        except (SMBResponseException, SMBException):
            pass
        _close(fh)

    # 4. delete-on-close through the name
    fh = _try_open(
        tree,
        name,
        FilePipePrinterAccessMask.DELETE,
        CreateDisposition.FILE_OPEN,
        CreateOptions.FILE_DELETE_ON_CLOSE | CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    if fh is not None:
        _close(fh)

    # 5. rename a share file onto the name, replacing what is there
    victim = f"victim_{idx}.txt"
    (planted.share_dir / victim).write_bytes(b"victim\n")
    fh = _try_open(tree, victim, FilePipePrinterAccessMask.DELETE, CreateDisposition.FILE_OPEN)
    assert fh is not None, "cannot open an ordinary file inside the share"
    info = FileRenameInformation()
    info["replace_if_exists"] = True
    info["file_name"] = name
    req = SMB2SetInfoRequest()
    req["info_type"] = info.INFO_TYPE
    req["file_info_class"] = info.INFO_CLASS
    req["file_id"] = fh.file_id
    req["buffer"] = info
    try:
        conn = tree.session.connection
        resp = conn.receive(conn.send(req, sid=tree.session.session_id, tid=tree.tree_connect_id))
        SMB2SetInfoResponse().unpack(resp["data"].get_value())
    except (SMBResponseException, SMBException, ValueError):
        pass
    _close(fh)
    # The planted fixture checks, at teardown, that nothing outside changed.


def test_create_outside_is_refused(tree, planted):
    for name in ("..\\outside\\new.txt", "link_dir\\new.txt", "link_abs_dir\\new.txt", "sub\\link_up\\new.txt"):
        fh = _try_open(
            tree,
            name,
            FilePipePrinterAccessMask.GENERIC_WRITE,
            CreateDisposition.FILE_CREATE,
            CreateOptions.FILE_NON_DIRECTORY_FILE,
        )
        if fh is not None:
            _close(fh)
    assert not (planted.root / "outside" / "new.txt").exists()
    assert not (planted.root / "new.txt").exists()


def test_share_root_parent_not_listable(tree, planted):
    """Listing "" must show the share's own entries, never the parent's."""
    fh = _try_open(
        tree,
        "",
        DirectoryAccessMask.FILE_LIST_DIRECTORY | DirectoryAccessMask.FILE_READ_ATTRIBUTES,
        CreateDisposition.FILE_OPEN,
        CreateOptions.FILE_DIRECTORY_FILE,
        FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
    )
    assert fh is not None, "cannot open the share root"
    entries = fh.query_directory("*", FileInformationClass.FILE_NAMES_INFORMATION)
    listed = {e["file_name"].get_value().decode("utf-16-le") for e in entries}
    _close(fh)
    assert "file.txt" in listed
    assert "outside" not in listed and "smb.conf" not in listed and "secret" not in listed
