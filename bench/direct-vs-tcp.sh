#!/usr/bin/env bash
# SMB Direct (soft-iWARP) against plain TCP, smbx against itself: one `smbx serve` with both
# transports on loopback, the same `smbx bench` profiles over each, one table with ratios.
#
#   bench/direct-vs-tcp.sh
#
# Profiles (each -d$DURATION after -W$WARMUP, one thread unless noted):
#   4K random read -o1 and -o32, 8K random read -o32, 64K and 512K sequential read and
#   write -o8.
# TCP and SMB Direct alternate profile by profile (drift on a shared machine hits both alike);
# with ROUNDS=N every profile runs N times over each, which transport goes first alternating
# round by round, and each figure is the median of its N runs.
# Columns: IOPS, MB/s, p50/p99 latency (µs), cycles per byte of the machine and of the server
# process. Ratio = SMB Direct / TCP, the median of the rounds' own ratios (each round's pair ran
# back to back); with ROUNDS > 1 a spread line gives their min and max for IOPS and MB/s, which
# says whether a ratio is the transports' or the machine's. The data-path goals are printed last: 64K and 512K reads
# and writes over SMB Direct at >= 1.0x TCP, 4K random read IOPS at -o32 >= 0.9x, and machine
# cycles per byte at 512K no more than TCP's.
#
# The TCP congestion control is printed too: this machine's bbr paces even loopback streams, so
# TCP's large-read figure (the ratios' denominator) moves with it (README, Benchmarks);
# TCP_CC=cubic (or reno) runs the whole bench in a network namespace of its own with that
# congestion control for both transports (bench_in_netns in bench/servers.sh; root needed).
# Environment: DURATION (10), WARMUP (2), ROUNDS (1), FILE_MIB (1024), PROFILES (names below), RDMA_QUERY
#   (extra URL parameters for the SMB Direct target, e.g. "&rdma_threshold=65536"),
#   RESULTS (target/bench-direct: the JSON reports), SMBX_BIN (the server), SMBX_CLIENT_BIN (the
#   `smbx bench` that drives it; default SMBX_BIN), KEEP=1.
# Needs python3 and a release build of smbx (built if missing). No root needed.
set -euo pipefail
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"
bench_in_netns "$0" "$@"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
FILE_MIB=${FILE_MIB:-1024}
ROUNDS=${ROUNDS:-1}
RESULTS=${RESULTS:-$BENCH_REPO/target/bench-direct}
RDMA_QUERY=${RDMA_QUERY:-}

declare -A FLAGS=(
  [rand-read-4K-o1]="-b4K -r -o1"
  [rand-read-4K-o32]="-b4K -r -o32"
  [rand-read-8K-o32]="-b8K -r -o32"
  [seq-read-64K]="-b64K -s -o8"
  [seq-read-512K]="-b512K -s -o8"
  [seq-write-64K]="-b64K -s -w100 -o8"
  [seq-write-512K]="-b512K -s -w100 -o8"
)
ORDER="rand-read-4K-o1 rand-read-4K-o32 rand-read-8K-o32 seq-read-64K seq-read-512K seq-write-64K seq-write-512K"
PROFILES=${PROFILES:-$ORDER}

[ -x "$SMBX" ] || (cd "$BENCH_REPO" && cargo build --release -q -p smbx-cli)
BENCH_ROOT=$(mktemp -d /tmp/smbx-direct-vs-tcp.XXXXXX)
trap bench_cleanup EXIT
mkdir -p "$BENCH_ROOT/smbx/share" "$RESULTS"
bench_log "writing a ${FILE_MIB} MiB random file"
head -c "$((FILE_MIB * 1048576))" /dev/urandom > "$BENCH_ROOT/smbx/share/data.bin"
sync # its writeback would otherwise run during the first measurements
RDMA_PORT=$(bench_free_port)
bench_start_smbx "smb direct = yes" "smb direct port = $RDMA_PORT" || exit 1
TCP_PORT=$PORT_smbx PID=$PID_smbx
bench_wait_port "$RDMA_PORT" "$PID" || { cat "$BENCH_ROOT/smbx/log" >&2; exit 1; }
declare -A URL=(
  [tcp]="smb://$BENCH_USER@127.0.0.1:$TCP_PORT/share/data.bin"
  [rdma]="smb://$BENCH_USER@127.0.0.1:$RDMA_PORT/share/data.bin?transport=rdma$RDMA_QUERY"
)
bench_log "smbx $("$SMBX" --version | awk '{print $2}') pid $PID: TCP port $TCP_PORT, SMB Direct port $RDMA_PORT; ${DURATION}s per point"

case $ROUNDS in '' | *[!0-9]* | 0) bench_log "ROUNDS must be a positive number"; exit 2 ;; esac
for p in $PROFILES; do
  [ -n "${FLAGS[$p]:-}" ] || { bench_log "unknown profile $p"; exit 2; }
done
rm -f "$RESULTS"/*.json
for r in $(seq 1 "$ROUNDS"); do
  for p in $PROFILES; do
    order="tcp rdma"
    [ $((r % 2)) -eq 0 ] && order="rdma tcp"
    for t in $order; do
      bench_log "$p over $t (round $r of $ROUNDS)"
      out=$RESULTS/$p.$t.$r
      bench_settle
      # shellcheck disable=SC2086
      "$SMBX_CLIENT" bench ${FLAGS[$p]} -d"$DURATION" -W"$WARMUP" -Rjson --server-pid "$PID" "${URL[$t]}" \
        >"$out.json" 2>"$out.err" ||
        { bench_log "failed: $(tail -2 "$out.err" | tr '\n' ' ')"; rm -f "$out.json"; }
    done
  done
done

python3 - "$RESULTS" "$ROUNDS" $PROFILES <<'PY'
import json, os, statistics, sys
res, rounds, profiles = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load1(p, t, r):
    try:
        with open(os.path.join(res, f"{p}.{t}.{r}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
def load(p, t):
    """The median of each figure over the rounds that ran (None if none did)."""
    runs = [fig(j) for j in (load1(p, t, r) for r in range(1, rounds + 1)) if j]
    return [med(col) for col in zip(*runs)] if runs else None
def round_ratios(p):
    """Per round with both transports: SMB Direct / TCP of each figure."""
    out = []
    for r in range(1, rounds + 1):
        a, b = load1(p, "rdma", r), load1(p, "tcp", r)
        if a and b:
            out.append([None if (x is None or not y) else x / y for x, y in zip(fig(a), fig(b))])
    return out
def fig(j):
    lat = j.get("latency_us") or {}
    cyc = j.get("cycles") or {}
    return [j["iops"], j["bytes_per_sec"] / 1e6, lat.get("p50"), lat.get("p99"),
            cyc.get("machine"), cyc.get("server")]
cols = ["IOPS", "MB/s", "p50 us", "p99 us", "cyc/B", "srv cyc/B"]
print(f"\n{'profile':<18} {'transport':<10} " + " ".join(f"{c:>10}" for c in cols))
ratios = {}
for p in profiles:
    rows = {t: load(p, t) for t in ("tcp", "rdma")}
    for t, name in (("tcp", "TCP"), ("rdma", "SMB Direct")):
        f = rows[t]
        cells = ["failed"] * 6 if f is None else [("-" if v is None else f"{v:10.1f}") for v in f]
        print(f"{p:<18} {name:<10} " + " ".join(f"{c:>10}" for c in cells))
    per_round = round_ratios(p)
    if per_round:
        cols = list(zip(*per_round))
        r = [med(c) for c in cols]
        ratios[p] = r
        print(f"{'':<18} {'ratio':<10} " + " ".join(f"{'-' if v is None else f'{v:10.2f}':>10}" for v in r))
        if len(per_round) > 1:
            spread = [f"{min(c):.2f}-{max(c):.2f}" if None not in c else "-" for c in cols[:2]]
            print(f"{'':<18} {'spread':<10} " + " ".join(f"{c:>10}" for c in spread)
                  + f"   (min-max of {len(per_round)} rounds)")
print("\nratio = SMB Direct / TCP (IOPS, MB/s: higher is better; latency, cycles: lower is better)")
for p, what, i, goal, higher in (
        ("seq-read-64K", "64K sequential read MB/s", 1, 1.0, True),
        ("seq-read-512K", "512K sequential read MB/s", 1, 1.0, True),
        ("seq-write-64K", "64K sequential write MB/s", 1, 1.0, True),
        ("seq-write-512K", "512K sequential write MB/s", 1, 1.0, True),
        ("rand-read-4K-o32", "4K random read IOPS (-o32)", 0, 0.9, True),
        ("seq-read-512K", "512K read machine cycles/byte", 4, 1.0, False)):
    if p in ratios:
        r = ratios[p][i]
        if r is None:
            continue
        met = r >= goal if higher else r <= goal
        sign = ">=" if higher else "<="
        print(f"goal: {what} over SMB Direct {sign} {goal:.1f}x TCP: {r:.2f}x {'met' if met else 'NOT met'}")
if rounds > 1:
    print(f"(figures: medians of {rounds} rounds; ratios: medians of the rounds' own ratios)")
PY
echo "(TCP congestion control: $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown))"
