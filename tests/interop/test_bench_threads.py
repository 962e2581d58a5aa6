"""`smbx bench -t N` against the server under test: each thread drives the file through
its own connection (its own session and open), and the report's totals are the sum of its
threads, however many OS threads run them (--os-threads). Bounded by --ios and -d; no
timing assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from conftest import smbx_bin

BOUND_S = 60


def _bench(server, *flags: str) -> dict:
    target = f"smb://{server.user}@127.0.0.1:{server.port}/share/bench-threads.bin"
    cmd = [str(smbx_bin()), "bench", "-Rjson", *flags, target]
    env = dict(os.environ, SMBX_PASSWORD=server.password)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=BOUND_S)
    assert proc.returncode == 0, f"smbx bench failed: {proc.stderr}"
    return json.loads(proc.stdout)


def _each_thread_has_its_own_connection(smbx, *flags: str):
    ios = 300
    r = _bench(
        smbx, "-b4K", "-r", "-o4", "-t3", "-d20", "-W0", "-C0", f"--ios={ios}", "-c2M", *flags
    )
    threads = r["threads"]
    assert len(threads) == 3
    total = r["io_count"]
    assert total > 0
    assert sum(t["io_count"] for t in threads) == total
    assert all(t["io_count"] <= ios for t in threads)
    assert r["bytes"] == total * 4096
    (target,) = r["targets"]
    assert target["io_count"] == total
    assert target["threads"] == [0, 1, 2]
    # One channel per thread's connection, each of which carried that thread's --ios
    # reads (warm-up included) besides its CREATE and CLOSE.
    channels = target["channels"]
    assert len(channels) == 3, channels
    for c in channels:
        assert c["ios"] >= ios, channels
        assert c["live"]


def test_each_thread_has_its_own_connection(smbx):
    _each_thread_has_its_own_connection(smbx)


def test_threads_on_one_os_thread_keep_their_own_connections(smbx):
    # Three threads' connections on one OS thread's runtime: each still carries its own
    # thread's --ios, and none waits forever for another's responses.
    _each_thread_has_its_own_connection(smbx, "--os-threads=1")


def test_one_thread_one_connection(smbx):
    r = _bench(smbx, "-b64K", "-s", "-o2", "-t1", "-d20", "-W0", "-C0", "--ios=50", "-c2M")
    (target,) = r["targets"]
    assert len(target["channels"]) == 1
    assert target["channels"][0]["ios"] >= 50
    assert r["threads"][0]["io_count"] == r["io_count"]


def test_large_blocks_one_or_two_at_a_time_complete(smbx):
    # 512 KiB reads and writes at -o1 and -o2: each response is large enough that the
    # client's reader yields after it (YIELD_AFTER, 256 KiB); a yield whose wake-up was
    # deferred left the next request waiting for ever (the bench timed out at its second
    # READ). Every --ios I/O completes, warm-up included, and all bytes are counted.
    for depth in ("-o1", "-o2"):
        for mode in ((), ("-w100",)):
            r = _bench(
                smbx, "-b512K", "-s", depth, *mode, "-t1", "-d20", "-W0", "-C0", "--ios=40",
                "-c8M",
            )
            assert r["io_count"] >= 40, (depth, mode, r["io_count"])
            assert r["bytes"] == r["io_count"] * 512 * 1024


def _server_connections(port: int) -> int:
    """Established TCP connections whose server end is on `port` (loopback)."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, timeout=10,
    ).stdout
    return len([line for line in out.splitlines() if line.strip()])


def _threads_share_one_connection(server):
    # -t3 on one OS thread with --shared-connection: one connection (one session, one
    # tree) carries every thread's I/O, each thread with its own open; the server sees
    # one connection while they run (without the flag it sees three).
    target = f"smb://{server.user}@127.0.0.1:{server.port}/share/bench-shared.bin"
    env = dict(os.environ, SMBX_PASSWORD=server.password)
    seen = {}
    for flags in (("--shared-connection",), ()):
        cmd = [str(smbx_bin()), "bench", "-Rjson", "-b4K", "-r", "-o2", "-t3", "-d3", "-W1",
               "-C0", "-c2M", "--os-threads=1", *flags, target]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        most = 0
        for _ in range(60):  # at most ~6 s of looking, while the bench runs
            if proc.poll() is not None:
                break
            most = max(most, _server_connections(server.port))
            time.sleep(0.1)
        out, err = proc.communicate(timeout=BOUND_S)
        assert proc.returncode == 0, f"smbx bench failed: {err}"
        r = json.loads(out)
        threads = r["threads"]
        assert len(threads) == 3 and all(t["io_count"] > 0 for t in threads), threads
        seen[flags] = (most, r)
    most, r = seen[("--shared-connection",)]
    assert most == 1, f"the server saw {most} connections at once"
    (target,) = r["targets"]
    (channel,) = target["channels"]
    # The one channel carried all three threads' I/Os (warm-up included).
    assert channel["ios"] >= r["io_count"], (channel, r["io_count"])
    most, r = seen[()]
    assert most == 3, f"without --shared-connection the server saw {most} connections at once"
    assert len(r["targets"][0]["channels"]) == 3


def test_threads_share_one_connection(smbx):
    _threads_share_one_connection(smbx)


def test_threads_share_one_connection_to_samba(samba):
    _threads_share_one_connection(samba)
