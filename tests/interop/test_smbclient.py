"""Samba's smbclient against the server: every dialect, plain, signed and sealed.

Each case runs the full round trip -- list shares, mkdir, put a 64 MiB random
file, get it back, rename, allinfo, ls, rm, rmdir -- one smbclient process per
step, and checks smbclient's exit status and output and the files on the
server's disk.
"""

from __future__ import annotations

import re

import pytest

from helpers import MIB, SMB3_DIALECTS, SMBCLIENT_DIALECTS, random_file, sha256_file, smbclient

BIG_SIZE = 64 * MIB

CASES = [(d, None) for d in SMBCLIENT_DIALECTS]
CASES += [(d, "sign") for d in SMBCLIENT_DIALECTS]
CASES += [(d, "encrypt") for d in SMB3_DIALECTS]
CASES += [(None, None)]  # no dialect pinned: whatever smbclient negotiates


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """A 64 MiB random file and its SHA-256."""
    path = tmp_path_factory.mktemp("smbclient-src") / "big.bin"
    digest = random_file(path, BIG_SIZE)
    return path, digest


def _step(server, commands, **kw):
    res = smbclient(server, "share", commands, **kw)
    assert res.ok(), res.describe()
    return res


@pytest.mark.parametrize("dialect,protection", CASES, ids=lambda v: v or "default")
def test_round_trip(smbx, big_file, tmp_path, dialect, protection):
    src, digest = big_file
    kw = dict(dialect=dialect, protection=protection)
    tag = f"{dialect or 'any'}_{protection or 'plain'}"
    dname = f"dir_{tag}"
    disk_dir = smbx.share_dir / dname

    # -L: the share list comes back over the srvsvc pipe.
    res = smbclient(smbx, None, list_shares=True, **kw)
    assert res.returncode == 0, res.describe()
    for share in ("share", "public", "secret", "ro"):
        assert re.search(rf"^\s+{share}\s+Disk", res.output, re.M), res.describe()

    # mkdir
    _step(smbx, f"mkdir {dname}", **kw)
    assert disk_dir.is_dir()

    # put 64 MiB; check the bytes on the server's disk
    _step(smbx, f'put "{src}" {dname}\\big.bin', **kw)
    on_disk = disk_dir / "big.bin"
    assert on_disk.stat().st_size == BIG_SIZE
    assert sha256_file(on_disk) == digest

    # get it back; compare
    dst = tmp_path / "back.bin"
    _step(smbx, f'get {dname}\\big.bin "{dst}"', **kw)
    assert dst.stat().st_size == BIG_SIZE
    assert sha256_file(dst) == digest

    # rename
    _step(smbx, f"rename {dname}\\big.bin {dname}\\renamed.bin", **kw)
    assert not on_disk.exists()
    assert (disk_dir / "renamed.bin").is_file()

    # allinfo shows the size of the unnamed data stream
    res = _step(smbx, f"allinfo {dname}\\renamed.bin", **kw)
    assert re.search(rf"stream: \[::\$DATA\], {BIG_SIZE} bytes", res.output), res.describe()
    assert re.search(r"^attributes: .*A", res.output, re.M), res.describe()

    # ls lists it with its size
    res = _step(smbx, f"ls {dname}\\*", **kw)
    assert re.search(rf"^\s+renamed\.bin\s+A\s+{BIG_SIZE}\s", res.output, re.M), res.describe()

    # rm, rmdir
    _step(smbx, f"rm {dname}\\renamed.bin", **kw)
    assert not (disk_dir / "renamed.bin").exists()
    _step(smbx, f"rmdir {dname}", **kw)
    assert not disk_dir.exists()


@pytest.mark.parametrize("dialect", SMBCLIENT_DIALECTS)
def test_small_file_contents_match_disk(smbx, tmp_path, dialect):
    """Bytes written by the server land on disk unchanged, and vice versa."""
    payload = bytes(range(256)) * 37 + b"tail"
    src = tmp_path / "small.bin"
    src.write_bytes(payload)
    name = f"small_{dialect}.bin"
    _step(smbx, f'put "{src}" {name}', dialect=dialect)
    assert (smbx.share_dir / name).read_bytes() == payload
    # Change it on disk; the client must see the new bytes.
    (smbx.share_dir / name).write_bytes(payload[::-1])
    dst = tmp_path / "back.bin"
    _step(smbx, f'get {name} "{dst}"', dialect=dialect)
    assert dst.read_bytes() == payload[::-1]
    _step(smbx, f"rm {name}", dialect=dialect)
    assert not (smbx.share_dir / name).exists()


@pytest.mark.parametrize("dialect", ("SMB2_02", "SMB2_10"))
def test_encrypted_share_refuses_smb2(smbx, dialect):
    """[secret] has server smb encrypt = required: SMB 2.x cannot connect."""
    res = smbclient(smbx, "secret", "ls", dialect=dialect)
    assert res.returncode != 0, res.describe()
    assert "NT_STATUS_ACCESS_DENIED" in res.output, res.describe()


@pytest.mark.parametrize("dialect", SMB3_DIALECTS)
def test_encrypted_share_works_with_smb3(smbx, tmp_path, dialect):
    src = tmp_path / "s.txt"
    src.write_bytes(b"sealed\n")
    res = smbclient(smbx, "secret", f'put "{src}" s_{dialect}.txt; ls', dialect=dialect)
    assert res.ok(), res.describe()
    assert (smbx.path_of("secret") / f"s_{dialect}.txt").read_bytes() == b"sealed\n"


def test_read_only_share_refuses_writes(smbx, tmp_path):
    (smbx.path_of("ro") / "existing.txt").write_bytes(b"ro data\n")
    src = tmp_path / "w.txt"
    src.write_bytes(b"nope\n")
    res = smbclient(smbx, "ro", f'put "{src}" new.txt')
    assert "NT_STATUS_ACCESS_DENIED" in res.output, res.describe()
    assert not (smbx.path_of("ro") / "new.txt").exists()
    res = smbclient(smbx, "ro", "mkdir newdir")
    assert "NT_STATUS_ACCESS_DENIED" in res.output, res.describe()
    assert not (smbx.path_of("ro") / "newdir").exists()
    res = smbclient(smbx, "ro", "rm existing.txt")
    assert "NT_STATUS_ACCESS_DENIED" in res.output, res.describe()
    assert (smbx.path_of("ro") / "existing.txt").read_bytes() == b"ro data\n"
    # Reading works.
    dst = tmp_path / "r.txt"
    res = smbclient(smbx, "ro", f'get existing.txt "{dst}"')
    assert res.ok(), res.describe()
    assert dst.read_bytes() == b"ro data\n"
