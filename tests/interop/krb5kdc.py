"""A throw-away MIT Kerberos realm on loopback for the Kerberos interop tests.

:class:`Realm` creates a KDC database in a temporary directory (``kdb5_util
create -s``), adds principals and keytabs with ``kadmin.local``, and runs
``krb5kdc`` in the foreground on a free 127.0.0.1 port.  Its own ``krb5.conf``
(``KRB5_CONFIG``) and ``kdc.conf`` (``KRB5_KDC_PROFILE``) name only that KDC,
with ``rdns = false`` and ``dns_canonicalize_hostname = false`` and no DNS
lookups, so nothing outside the machine is contacted.  :meth:`Realm.env`
gives the environment a client or server process needs (``KRB5_CONFIG``,
``KRB5CCNAME``, ``KRB5RCACHEDIR``).

Needs Debian's krb5-kdc, krb5-admin-server and krb5-user
(scripts/install-deps.sh installs them).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REALM = "SMBX.TEST"
MASTER_PASSWORD = "kdc-master-Passw0rd"
KDC_START_TIMEOUT_S = 20.0
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "kvno", "klist")


def missing_tools() -> list:
    """The MIT Kerberos programs that are not installed."""
    found = []
    for t in TOOLS:
        if shutil.which(t) is None and not Path("/usr/sbin", t).exists():
            found.append(t)
    return found


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Realm:
    """A running KDC for realm ``REALM`` in its own directory."""

    def __init__(self, clockskew_s: int = 300) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="smbx-krb5-"))
        self.dir.chmod(0o755)
        self.realm = REALM
        self.port = _free_port()
        self.krb5_conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self.ccache = self.dir / "ccache"
        self.rcache_dir = self.dir / "rcache"
        self.rcache_dir.mkdir()
        self.log = self.dir / "kdc.log"
        self.proc: subprocess.Popen | None = None
        self.krb5_conf.write_text(
            f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    ignore_acceptor_hostname = false
    udp_preference_limit = 1
    clockskew = {clockskew_s}
    default_ccache_name = FILE:{self.ccache}

[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{self.port}
    }}

[domain_realm]
    localhost = {REALM}
    .smbx.test = {REALM}
    smbx.test = {REALM}
"""
        )
        self.kdc_conf.write_text(
            f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}

[realms]
    {REALM} = {{
        database_name = {self.dir}/principal
        key_stash_file = {self.dir}/stash
        acl_file = {self.dir}/kadm5.acl
        max_life = 10h 0m 0s
        max_renewable_life = 0
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.log}
    default = FILE:{self.log}
"""
        )
        (self.dir / "kadm5.acl").write_text("")
        self._run([_tool("kdb5_util"), "create", "-s", "-r", REALM, "-P", MASTER_PASSWORD])

    # -- environment ---------------------------------------------------------

    def env(self, ccache: Path | None = None) -> dict:
        """os.environ plus this realm's configuration (and ``ccache``)."""
        env = dict(os.environ)
        env.update(
            KRB5_CONFIG=str(self.krb5_conf),
            KRB5_KDC_PROFILE=str(self.kdc_conf),
            KRB5CCNAME=f"FILE:{ccache or self.ccache}",
            KRB5RCACHEDIR=str(self.rcache_dir),
        )
        env.pop("KRB5_KTNAME", None)
        env.pop("KRB5_CLIENT_KTNAME", None)
        return env

    def _run(self, args: list, input: str | None = None, env: dict | None = None) -> str:
        r = subprocess.run(
            args,
            input=input,
            capture_output=True,
            text=True,
            env=env or self.env(),
            timeout=60,
        )
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stdout}{r.stderr}")
        return r.stdout + r.stderr

    def kadmin(self, query: str) -> str:
        """Runs one ``kadmin.local`` query."""
        return self._run([_tool("kadmin.local"), "-r", REALM, "-q", query])

    # -- principals ------------------------------------------------------------

    def add_user(self, name: str, password: str, maxlife: str | None = None) -> str:
        life = f" -maxlife \"{maxlife}\"" if maxlife else ""
        self.kadmin(f"addprinc -pw {password}{life} {name}")
        return f"{name}@{REALM}"

    def add_service(self, spn: str, keytab: Path) -> str:
        """Adds ``spn`` with a random key and writes its keys to ``keytab``.

        Its tickets carry no PAC (``+no_auth_data_required``): MIT's KDC adds one by
        default since 1.20, and Samba's smbd as a standalone server refuses tickets
        with a PAC (NT_STATUS_BAD_TOKEN_TYPE); smbx ignores it either way."""
        self.kadmin(f"addprinc -randkey +no_auth_data_required {spn}")
        self.kadmin(f"ktadd -k {keytab} {spn}")
        keytab.chmod(0o600)
        return f"{spn}@{REALM}"

    def kinit(self, principal: str, password: str, ccache: Path | None = None, lifetime: str | None = None) -> Path:
        """``kinit`` into ``ccache`` (the realm's default one if None)."""
        cc = ccache or self.ccache
        args = [_tool("kinit")]
        if lifetime:
            args += ["-l", lifetime]
        args += ["-c", f"FILE:{cc}", principal]
        self._run(args, input=password + "\n", env=self.env(cc))
        return cc

    def kvno(self, spn: str, ccache: Path | None = None) -> str:
        """Gets a service ticket for ``spn`` into the cache."""
        return self._run([_tool("kvno"), spn], env=self.env(ccache))

    # -- the KDC ------------------------------------------------------------------

    def start(self) -> "Realm":
        log = open(self.dir / "krb5kdc.out", "wb")
        self.proc = subprocess.Popen(
            [_tool("krb5kdc"), "-n", "-r", REALM],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(),
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + KDC_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = (self.dir / "krb5kdc.out").read_text(errors="replace")
                raise RuntimeError(f"krb5kdc exited ({self.proc.returncode}): {out}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"krb5kdc did not listen on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def cleanup(self) -> None:
        self.stop()
        if not os.environ.get("SMBX_KEEP_TMP"):
            shutil.rmtree(self.dir, ignore_errors=True)
