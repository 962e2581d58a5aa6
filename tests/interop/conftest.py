"""Fixtures that start real SMB servers on loopback for the interop tests.

* ``smbx`` -- the server under test: ``smbx serve --config <tmp>/smb.conf``
  (binary: $SMBX_BIN or target/release/smbx), user ``alice`` added with
  ``smbx user add --config ... --stdin alice``.
* ``smbx_noguest`` -- the same with ``map to guest = never``.
* ``samba`` -- Samba's smbd with an equivalent configuration, for
  side-by-side use and as a baseline.

Set SMBX_INTEROP_SERVER=samba to run every test against Samba instead of
smbx: that is how the tests themselves are checked to be correct.

Each server fixture checks at teardown that the server is still running and
that its stderr contains no Rust panic.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
USER = "alice"
PASSWORD = "Alice-Passw0rd!"
# A second user, for tests where one user must not reach another's files.
USER2 = "bob"
PASSWORD2 = "Bob-Passw0rd!"
NETBIOS_NAME = "SMBXTEST"
SHARES = ("share", "public", "secret", "ro")
START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def smbx_bin() -> Path:
    """Path of the smbx binary under test."""
    return Path(os.environ.get("SMBX_BIN", REPO_ROOT / "target" / "release" / "smbx"))


def ensure_unix_user(name: str = USER) -> None:
    """Samba maps SMB users onto unix accounts; create ``name`` if missing."""
    try:
        subprocess.run(["id", name], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True)


def vm_rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def smbx_conf(
    root: Path, port: int, map_to_guest: str = "bad user", extra_global: str = "", interfaces: str = "127.0.0.1"
) -> str:
    """smb.conf for smbx: only the options the product spec names, plus
    ``extra_global`` (lines for [global]); ``interfaces``: that option's value."""
    return f"""[global]
{extra_global}
    netbios name = {NETBIOS_NAME}
    smb ports = {port}
    interfaces = {interfaces}
    bind interfaces only = yes
    passdb backend = smbpasswd:{root}/smbpasswd
    map to guest = {map_to_guest}

[share]
    path = {root}/share
    read only = no

[public]
    path = {root}/public
    guest ok = yes
    read only = no

[secret]
    path = {root}/secret
    read only = no
    server smb encrypt = required

[ro]
    path = {root}/ro
    read only = yes
"""


def samba_conf(root: Path, port: int, map_to_guest: str = "bad user", interfaces: str = "127.0.0.1") -> str:
    """An smb.conf for Samba's smbd equivalent to :func:`smbx_conf`."""
    return f"""[global]
    netbios name = {NETBIOS_NAME}
    workgroup = WORKGROUP
    server role = standalone server
    smb ports = {port}
    interfaces = {interfaces}
    bind interfaces only = yes
    disable netbios = yes
    server min protocol = SMB2_02
    passdb backend = smbpasswd:{root}/smbpasswd
    private dir = {root}/private
    lock directory = {root}/lock
    state directory = {root}/state
    cache directory = {root}/cache
    pid directory = {root}/pid
    ncalrpc dir = {root}/ncalrpc
    log file = {root}/log/log.%m
    map to guest = {map_to_guest}
    load printers = no
    printcap name = /dev/null
    disable spoolss = yes
    ea support = yes
    store dos attributes = yes
    vfs objects = streams_xattr
    kernel oplocks = no
    create mask = 0666
    directory mask = 0777
{os.environ.get("SMBX_SAMBA_EXTRA_GLOBAL", "").replace(";", chr(10))}

[share]
    path = {root}/share
    read only = no

[public]
    path = {root}/public
    guest ok = yes
    read only = no

[secret]
    path = {root}/secret
    read only = no
    server smb encrypt = required

[ro]
    path = {root}/ro
    read only = yes
"""


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = START_TIMEOUT_S, host: str = "127.0.0.1") -> None:
    """Return once host:port (default 127.0.0.1) accepts; fail if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {port} within {timeout} s")


def thread_dump(pid: int, timeout: float = 60) -> str:
    """Process `pid`'s threads as they are now, for a report on a hang: gdb's
    backtraces when gdb is installed, each thread's kernel wait channel and
    stack from /proc otherwise (or as well, when gdb fails)."""
    out = []
    if shutil.which("gdb"):
        try:
            res = subprocess.run(
                ["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 16"],
                capture_output=True,
                timeout=timeout,
                text=True,
                errors="replace",
            )
            # Only the backtraces, one short line per frame: gdb's loading chatter
            # and Rust's generic parameters are long.
            bt = [_short_frame(ln) for ln in res.stdout.splitlines() if ln.startswith(("Thread ", "#"))]
            if bt:
                return "\n".join(bt)
            out.append(f"gdb gave no backtrace: {res.stderr.strip()[-500:]}")
        except (subprocess.TimeoutExpired, OSError) as e:
            out.append(f"gdb failed: {e}")
    try:
        tasks = sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda p: int(p.name))
    except OSError as e:
        return f"process {pid}: {e}"
    for task in tasks:
        try:
            comm = (task / "comm").read_text().strip()
            wchan = (task / "wchan").read_text().strip()
            stack = (task / "stack").read_text().strip().replace("\n", " | ")
        except OSError as e:
            comm, wchan, stack = "?", "?", str(e)
        out.append(f"{task.name} {comm} wchan={wchan}: {stack}")
    return "\n".join(out)


def _short_frame(line: str, width: int = 150) -> str:
    """One gdb backtrace line, shortened: no address, no generic parameters or
    arguments, the source file without its directories."""
    line = re.sub(r" 0x[0-9a-f]+ in ", " ", line)
    while True:
        shorter = re.sub(r"<[^<>]*>", "", line)
        if shorter == line:
            break
        line = shorter
    line = re.sub(r" \([^()]*\) at \S*/", " at ", line)
    return line[:width]


@dataclass
class Server:
    """A running SMB server on 127.0.0.1."""

    kind: str  # "smbx" or "samba"
    root: Path
    port: int
    conf: Path
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    user: str = USER
    password: str = PASSWORD
    env: dict = field(default_factory=dict)

    # Convenience paths.
    @property
    def share_dir(self) -> Path:
        return self.root / "share"

    def path_of(self, share: str) -> Path:
        return self.root / share

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        if self.log_path and self.log_path.exists():
            return self.log_path.read_text(errors="replace")
        return ""

    def rss_kib(self) -> int:
        return vm_rss_kib(self.pid)

    def unc(self, share: str, path: str = "") -> str:
        base = f"\\\\{self.host}\\{share}"
        return base + ("\\" + path if path else "")

    def thread_dump(self) -> str:
        """The server's threads as they are now (see [`thread_dump`])."""
        if not self.alive():
            return f"{self.kind} is not running"
        return thread_dump(self.pid)

    def check_healthy(self) -> None:
        """Raise AssertionError if the server died or panicked."""
        problems = []
        if not self.alive():
            code = self.proc.returncode if self.proc else None
            problems.append(f"{self.kind} is not running (exit status {code})")
        log = self.log_text()
        if "panicked" in log:
            problems.append(f"{self.kind} panicked")
        if problems:
            tail = "\n".join(log.splitlines()[-40:])
            raise AssertionError("; ".join(problems) + f"\n--- server output (tail) ---\n{tail}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _make_root(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    # smbd switches to the user's uid: every parent must be traversable.
    root.chmod(0o755)
    for d in SHARES + ("private", "lock", "state", "cache", "pid", "ncalrpc", "log", "outside"):
        (root / d).mkdir()
    (root / "private").chmod(0o700)
    ensure_unix_user()
    for share in SHARES:
        shutil.chown(root / share, user=USER)
        (root / share).chmod(0o777)
    return root


def start_smbx(
    map_to_guest: str = "bad user",
    extra_global: str = "",
    users: tuple = ((USER, PASSWORD),),
    interfaces: str = "127.0.0.1",
    netns: str | None = None,
    wait_host: str = "127.0.0.1",
) -> Server:
    """Start ``smbx serve`` with its own smb.conf (``extra_global``: more [global]
    lines) and user database (``users``: (name, password) pairs); ``netns``: run it
    in that network namespace (``ip netns exec``), reached on ``wait_host``."""
    binary = smbx_bin()
    if not binary.exists():
        pytest.fail(f"smbx binary not found at {binary}: run `cargo build --release -p smbx-cli` or set SMBX_BIN")
    root = _make_root("smbx-interop-")
    port = free_port()
    conf = root / "smb.conf"
    conf.write_text(smbx_conf(root, port, map_to_guest, extra_global, interfaces))
    for name, password in users:
        add = subprocess.run(
            [str(binary), "user", "add", "--config", str(conf), "--stdin", name],
            input=password + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        if add.returncode != 0:
            shutil.rmtree(root, ignore_errors=True)
            pytest.fail(f"smbx user add failed ({add.returncode}): {add.stdout}{add.stderr}")
    log_path = root / "server.log"
    log = open(log_path, "wb")
    env = dict(os.environ)
    env.setdefault("RUST_BACKTRACE", "1")
    proc = subprocess.Popen(
        (["ip", "netns", "exec", netns] if netns else []) + [str(binary), "serve", "--config", str(conf)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    log.close()
    server = Server("smbx", root, port, conf, proc, log_path)
    try:
        wait_for_port(port, proc, host=wait_host)
    except RuntimeError as e:
        server.stop()
        out = server.log_text()
        _cleanup(server)
        pytest.fail(f"{e}\n--- smbx output ---\n{out}")
    return server


def start_samba(
    map_to_guest: str = "bad user", interfaces: str = "127.0.0.1", netns: str | None = None, wait_host: str = "127.0.0.1"
) -> Server:
    """Start Samba's smbd with an equivalent smb.conf (``netns``, ``wait_host``: as
    :func:`start_smbx`)."""
    if shutil.which("smbd") is None:
        pytest.fail("smbd not installed (apt-get install samba)")
    root = _make_root("samba-interop-")
    port = free_port()
    conf = root / "smb.conf"
    conf.write_text(samba_conf(root, port, map_to_guest, interfaces))
    add = subprocess.run(
        ["smbpasswd", "-c", str(conf), "-a", "-s", USER],
        input=f"{PASSWORD}\n{PASSWORD}\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    if add.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"smbpasswd -a failed: {add.stdout}{add.stderr}")
    log_path = root / "server.log"
    log = open(log_path, "wb")
    # Own session: on SIGTERM smbd signals its whole process group.
    proc = subprocess.Popen(
        (["ip", "netns", "exec", netns] if netns else [])
        + ["smbd", "--foreground", "--no-process-group", "--debug-stdout", "-s", str(conf)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    server = Server("samba", root, port, conf, proc, log_path)
    try:
        wait_for_port(port, proc, host=wait_host)
    except RuntimeError as e:
        server.stop()
        out = server.log_text()
        _cleanup(server)
        pytest.fail(f"{e}\n--- smbd output ---\n{out}")
    return server


def start_under_test(map_to_guest: str = "bad user") -> Server:
    """The server the tests target: smbx, or Samba if SMBX_INTEROP_SERVER=samba."""
    if os.environ.get("SMBX_INTEROP_SERVER", "smbx") == "samba":
        return start_samba(map_to_guest)
    return start_smbx(map_to_guest)


def _cleanup(server: Server) -> None:
    server.stop()
    if not os.environ.get("SMBX_KEEP_TMP"):
        shutil.rmtree(server.root, ignore_errors=True)


class _Holder:
    """Keeps one server per module, restarting it if a test killed it.

    If the server cannot be started at all, the remaining tests of the module
    fail at once with the same message instead of each waiting again."""

    def __init__(self, factory):
        self.factory = factory
        self.server: Server | None = None
        self.start_failure: str | None = None

    def get(self) -> Server:
        if self.start_failure is not None:
            pytest.fail(f"(earlier in this module) {self.start_failure}")
        if self.server is None or not self.server.alive():
            if self.server is not None:
                _cleanup(self.server)
                self.server = None
            try:
                self.server = self.factory()
            except pytest.fail.Exception as e:
                self.start_failure = str(e)
                raise
        return self.server

    def close(self) -> None:
        if self.server is not None:
            _cleanup(self.server)


@pytest.fixture(scope="module")
def _smbx_holder():
    holder = _Holder(lambda: start_under_test("bad user"))
    yield holder
    holder.close()


@pytest.fixture(scope="module")
def _smbx_noguest_holder():
    holder = _Holder(lambda: start_under_test("never"))
    yield holder
    holder.close()


@pytest.fixture(scope="module")
def _samba_holder():
    holder = _Holder(lambda: start_samba("bad user"))
    yield holder
    holder.close()


# ------------------------------------------------------------------ bounds
#
# Every test is bounded in time (SIGALRM; the smbprotocol and socket waits
# are interruptible), and so is the whole session: once SMBX_PYTEST_BUDGET
# seconds have passed, the remaining tests fail at once.  These bound the
# run against a server that hangs; they are not assertions about speed.

TEST_TIMEOUT_S = float(os.environ.get("SMBX_TEST_TIMEOUT", "600"))
SESSION_BUDGET_S = float(os.environ.get("SMBX_PYTEST_BUDGET", "0"))  # 0: unbounded
_SESSION_START = time.monotonic()


class TestTimeout(Exception):
    """Raised inside a test that ran longer than SMBX_TEST_TIMEOUT."""


def _on_alarm(signum, frame):
    raise TestTimeout(f"test exceeded SMBX_TEST_TIMEOUT={TEST_TIMEOUT_S:g} s (server hung?)")


@pytest.fixture(autouse=True)
def _bounded():
    if SESSION_BUDGET_S and time.monotonic() - _SESSION_START > SESSION_BUDGET_S:
        pytest.fail(f"SMBX_PYTEST_BUDGET={SESSION_BUDGET_S:g} s exhausted; not run")
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _checked(holder: _Holder):
    server = holder.get()
    yield server
    # Teardown of every test: the server must have survived it.
    try:
        server.check_healthy()
    finally:
        if not server.alive():
            holder.server = None
            _cleanup(server)


@pytest.fixture
def smbx(_smbx_holder) -> Server:
    """The server under test (map to guest = bad user); checked after each test."""
    yield from _checked(_smbx_holder)


@pytest.fixture
def smbx_noguest(_smbx_noguest_holder) -> Server:
    """The server under test with map to guest = never."""
    yield from _checked(_smbx_noguest_holder)


@pytest.fixture
def samba(_samba_holder) -> Server:
    """Samba's smbd with an equivalent configuration."""
    yield from _checked(_samba_holder)
