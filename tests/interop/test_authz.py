"""Authorization on rename, hard link and owner changes (issue 10, items 5 and 6),
with two users and an administrator against a real ``smbx serve``, driven by
impacket:

* item 5: bob holds only his own file; alice's file in alice's directory grants
  bob reading and nothing else. bob renaming or hard-linking his file over it
  with ReplaceIfExists gets STATUS_ACCESS_DENIED and alice's file is left as it
  was; a READONLY target, a target open by someone else and a directory are
  refused too; a target bob may delete is replaced.
* item 6: bob may set the owner and group of his file to what they are, but
  giving it to another uid (S-1-22-1-N) or gid (S-1-22-2-N) gets
  STATUS_INVALID_OWNER / STATUS_INVALID_PRIMARY_GROUP and the file keeps its
  owner on disk; an ``admin users`` member does it.
"""

from __future__ import annotations

import struct

import pytest
from impacket.nt_errors import (
    STATUS_ACCESS_DENIED,
    STATUS_INVALID_OWNER,
    STATUS_INVALID_PRIMARY_GROUP,
)
from impacket.smb3 import SessionError
from impacket.smbconnection import SMBConnection

from conftest import PASSWORD, PASSWORD2, USER, USER2, _cleanup, start_smbx

ADMIN = "boss"
ADMIN_PASSWORD = "Boss-Passw0rd!"

# Access rights ([MS-DTYP] 2.4.3) and what CREATE takes ([MS-SMB2] 2.2.13).
READ_DATA, WRITE_DATA, ADD_SUBDIR, READ_EA = 0x1, 0x2, 0x4, 0x8
READ_ATTRIBUTES, WRITE_ATTRIBUTES = 0x80, 0x100
DELETE, READ_CONTROL, WRITE_DAC, WRITE_OWNER = 0x10000, 0x20000, 0x40000, 0x80000
SYNCHRONIZE = 0x100000
FILE_GENERIC_READ = READ_DATA | READ_EA | READ_ATTRIBUTES | READ_CONTROL | SYNCHRONIZE
FILE_ALL = 0x1F01FF
SHARE_ALL = 0x7
DIRECTORY_FILE, NON_DIRECTORY_FILE = 0x1, 0x40
OPEN, CREATE, OPEN_IF = 1, 2, 3
INFO_FILE, INFO_SECURITY = 1, 3
FILE_BASIC_INFO, FILE_RENAME_INFO, FILE_LINK_INFO = 4, 10, 11
OWNER_SECURITY_INFORMATION, GROUP_SECURITY_INFORMATION = 0x1, 0x2
DACL_SECURITY_INFORMATION = 0x4
FILE_ATTRIBUTE_READONLY = 0x1


def sid(authority: int, *subs: int) -> bytes:
    """A binary SID ([MS-DTYP] 2.4.2.2)."""
    return bytes([1, len(subs)]) + authority.to_bytes(6, "big") + b"".join(
        struct.pack("<I", s) for s in subs
    )


EVERYONE = sid(1, 0)


def unix_user(uid: int) -> bytes:
    return sid(22, 1, uid)


def unix_group(gid: int) -> bytes:
    return sid(22, 2, gid)


def dacl_sd(*aces: tuple[bytes, int]) -> bytes:
    """A self-relative descriptor with only a DACL of allow ACEs (sid, mask)."""
    body = b"".join(
        struct.pack("<BBHI", 0, 0, 8 + len(s), mask) + s for s, mask in aces
    )
    acl = struct.pack("<BBHHH", 2, 0, 8 + len(body), len(aces), 0) + body
    # SE_SELF_RELATIVE | SE_DACL_PRESENT; the DACL right after the header.
    return struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 20) + acl


def owner_sd(owner: bytes | None = None, group: bytes | None = None) -> bytes:
    """A self-relative descriptor with an owner and/or a group only."""
    out = b""
    off_owner = off_group = 0
    if owner is not None:
        off_owner = 20
        out += owner
    if group is not None:
        off_group = 20 + len(out)
        out += group
    return struct.pack("<BBHIIII", 1, 0, 0x8000, off_owner, off_group, 0, 0) + out


def rename_info(target: str) -> bytes:
    """FILE_RENAME_INFORMATION / FILE_LINK_INFORMATION with ReplaceIfExists."""
    name = target.encode("utf-16-le")
    return struct.pack("<B7xQI", 1, 0, len(name)) + name


class Session:
    """One user's impacket session on ``share`` with raw CREATE and SET_INFO."""

    def __init__(self, server, user: str, password: str):
        self.conn = SMBConnection(server.host, server.host, sess_port=server.port, timeout=30)
        self.conn.login(user, password)
        self.smb = self.conn.getSMBServer()
        self.tid = self.conn.connectTree("share")

    def create(self, name: str, access: int, disposition: int, directory: bool = False,
               share: int = SHARE_ALL):
        return self.smb.create(
            self.tid,
            name,
            access,
            share,
            DIRECTORY_FILE if directory else NON_DIRECTORY_FILE,
            disposition,
            0x10 if directory else 0x80,
        )

    def set_info(self, fid, info_type: int, klass: int, blob: bytes, additional: int = 0) -> int:
        """The NTSTATUS of a SET_INFO (0 on success)."""
        try:
            self.smb.setInfo(self.tid, fid, blob, info_type, klass, additional)
            return 0
        except SessionError as e:
            return e.get_error_code()

    def close(self, fid) -> None:
        self.smb.close(self.tid, fid)

    def logoff(self) -> None:
        self.conn.logoff()


@pytest.fixture(scope="module")
def server():
    s = start_smbx(
        extra_global=f"    admin users = {ADMIN}",
        users=((USER, PASSWORD), (USER2, PASSWORD2), (ADMIN, ADMIN_PASSWORD)),
    )
    yield s
    _cleanup(s)


def test_replacing_a_file_needs_the_right_to_delete_it(server):
    alice = Session(server, USER, PASSWORD)
    bob = Session(server, USER2, PASSWORD2)
    root = server.share_dir

    # alice's directory lets everyone list and add, not delete children; her
    # file in it grants everyone reading only.
    d = alice.create("d", READ_CONTROL | WRITE_DAC, CREATE, directory=True)
    victim = alice.create("d\\victim", FILE_ALL, CREATE)
    alice.smb.writeFile(alice.tid, victim, b"alice's data")
    assert alice.set_info(victim, INFO_SECURITY, 0, dacl_sd((EVERYONE, FILE_GENERIC_READ)),
                          DACL_SECURITY_INFORMATION) == 0
    alice.close(victim)
    dir_rights = READ_DATA | WRITE_DATA | ADD_SUBDIR | READ_ATTRIBUTES | READ_CONTROL | SYNCHRONIZE
    assert alice.set_info(d, INFO_SECURITY, 0, dacl_sd((EVERYONE, dir_rights)),
                          DACL_SECURITY_INFORMATION) == 0
    alice.close(d)

    # bob's own file, opened with DELETE (all a rename needs on the source).
    src = bob.create("d\\bobs", DELETE | READ_ATTRIBUTES | SYNCHRONIZE, CREATE)
    for klass in (FILE_RENAME_INFO, FILE_LINK_INFO):
        status = bob.set_info(src, INFO_FILE, klass, rename_info("d\\victim"))
        assert status == STATUS_ACCESS_DENIED, f"class {klass}: {status:#x}"
    assert (root / "d" / "victim").read_bytes() == b"alice's data"
    assert (root / "d" / "bobs").exists()

    # A READONLY target, one open by alice and a directory are refused, whatever
    # their descriptors allow.
    ro = alice.create("ro", FILE_ALL, CREATE)
    alice.smb.writeFile(alice.tid, ro, b"keep")
    basic = struct.pack("<qqqqI4x", 0, 0, 0, 0, FILE_ATTRIBUTE_READONLY)
    assert alice.set_info(ro, INFO_FILE, FILE_BASIC_INFO, basic) == 0
    alice.close(ro)
    held = alice.create("held", READ_DATA, CREATE)
    adir = alice.create("adir", READ_CONTROL, CREATE, directory=True)
    alice.close(adir)
    for target in ("ro", "held", "adir"):
        for klass in (FILE_RENAME_INFO, FILE_LINK_INFO):
            status = bob.set_info(src, INFO_FILE, klass, rename_info(target))
            assert status == STATUS_ACCESS_DENIED, f"{target} class {klass}: {status:#x}"
    assert (root / "ro").read_bytes() == b"keep"
    assert (root / "adir").is_dir()
    alice.close(held)

    # A target bob may delete (its descriptor grants everyone everything) is
    # replaced by the rename.
    ok = alice.create("d\\replaceable", FILE_ALL, CREATE)
    assert alice.set_info(ok, INFO_SECURITY, 0, dacl_sd((EVERYONE, FILE_ALL)),
                          DACL_SECURITY_INFORMATION) == 0
    alice.close(ok)
    assert bob.set_info(src, INFO_FILE, FILE_RENAME_INFO, rename_info("d\\replaceable")) == 0
    assert not (root / "d" / "bobs").exists()
    assert (root / "d" / "replaceable").exists()
    bob.close(src)
    alice.logoff()
    bob.logoff()
    server.check_healthy()


def test_giving_a_file_away_needs_admin(server):
    root = server.share_dir
    bob = Session(server, USER2, PASSWORD2)
    fid = bob.create("bobs-own", READ_CONTROL | WRITE_OWNER | FILE_ALL, CREATE)
    st = (root / "bobs-own").stat()
    # Setting what is already there is allowed.
    assert bob.set_info(fid, INFO_SECURITY, 0, owner_sd(unix_user(st.st_uid)),
                        OWNER_SECURITY_INFORMATION) == 0
    # Another uid or gid is not.
    other = owner_sd(unix_user(12345), unix_group(23456))
    status = bob.set_info(fid, INFO_SECURITY, 0, other, OWNER_SECURITY_INFORMATION)
    assert status == STATUS_INVALID_OWNER, hex(status)
    status = bob.set_info(fid, INFO_SECURITY, 0, other, GROUP_SECURITY_INFORMATION)
    assert status == STATUS_INVALID_PRIMARY_GROUP, hex(status)
    after = (root / "bobs-own").stat()
    assert (after.st_uid, after.st_gid) == (st.st_uid, st.st_gid)
    bob.close(fid)
    bob.logoff()

    # An administrator may.
    boss = Session(server, ADMIN, ADMIN_PASSWORD)
    fid = boss.create("bobs-own", READ_CONTROL | WRITE_OWNER, OPEN)
    assert boss.set_info(fid, INFO_SECURITY, 0, other,
                         OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION) == 0
    boss.close(fid)
    boss.logoff()
    after = (root / "bobs-own").stat()
    assert (after.st_uid, after.st_gid) == (12345, 23456)
    server.check_healthy()
