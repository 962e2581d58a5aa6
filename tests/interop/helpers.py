"""Small helpers shared by the interop tests (no fixtures here)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Dialect names as smbclient (-m / client min protocol) spells them.
SMBCLIENT_DIALECTS = ("SMB2_02", "SMB2_10", "SMB3_00", "SMB3_02", "SMB3_11")
SMB3_DIALECTS = ("SMB3_00", "SMB3_02", "SMB3_11")

MIB = 1024 * 1024


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(MIB)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def random_file(path: Path, size: int) -> str:
    """Write ``size`` random bytes to ``path``; return their SHA-256."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(left, 4 * MIB))
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


@dataclass
class Result:
    """Outcome of one smbclient invocation."""

    args: list
    returncode: int
    output: str  # stdout + stderr

    def ok(self) -> bool:
        return self.returncode == 0 and "NT_STATUS_" not in self.output

    def describe(self) -> str:
        return f"$ {' '.join(self.args)}\nexit {self.returncode}\n{self.output}"


def smbclient(
    server,
    share: str | None,
    commands: str | None = None,
    *,
    dialect: str | None = None,
    protection: str | None = None,
    user: str | None = None,
    password: str | None = None,
    extra: list | None = None,
    list_shares: bool = False,
    cwd: Path | None = None,
    timeout: float = 300,
) -> Result:
    """Run Samba's smbclient against ``server`` and capture its output.

    ``dialect`` pins both the minimum and maximum protocol, so the session
    uses exactly that dialect.  ``protection`` is passed as
    --client-protection (sign / encrypt / off).
    """
    user = server.user if user is None else user
    password = server.password if password is None else password
    args = ["smbclient"]
    if list_shares:
        args += ["-L", f"//{server.host}"]
    else:
        args += [f"//{server.host}/{share}"]
    args += ["-p", str(server.port), "-U", f"{user}%{password}", "-n", "interop-client", "-t", "120"]
    if dialect:
        args += ["-m", dialect, f"--option=client min protocol={dialect}"]
    if protection:
        args += [f"--client-protection={protection}"]
    if extra:
        args += list(extra)
    if commands is not None:
        args += ["-c", commands]
    proc = subprocess.run(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        cwd=cwd,
        timeout=timeout,
    )
    return Result(args, proc.returncode, proc.stdout)


def smbclient_eventually(server, share: str, commands: str, within_s: float) -> Result:
    """Runs ``smbclient`` until it succeeds or ``within_s`` seconds have passed
    (a server that freed what an attack held does so asynchronously); the last
    result."""
    import time

    deadline = time.monotonic() + within_s
    while True:
        res = smbclient(server, share, commands)
        if res.ok() or time.monotonic() > deadline:
            return res
        time.sleep(0.5)
