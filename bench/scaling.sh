#!/usr/bin/env bash
# Does throughput hold when threads or queue depth grow? smbx bench sweep over -t × -o against
# Samba's smbd, smbx and rocketsmbd on loopback (each on its own copy of one share), then, per
# server and I/O size, the MB/s matrix and the worst loss: the largest drop from the best figure
# seen at a smaller -o (same -t) or a smaller -t (same -o). Each -t thread drives the server through
# its own connection (smbx bench's threads are independent, as fio's jobs); BENCH_FLAGS="--os-threads=1
# --shared-connection" sweeps a kernel client's model instead (every thread's I/O on one connection,
# as diskspd's threads through the Windows redirector). Each sweep's line in
# the log carries the load average it started under: on a loaded machine the matrix is noise.
#
# With ROUNDS=N every sweep runs N times, the servers' order reversed every other round; the
# matrix is then each point's median, and a loss counts only when it is larger than the
# run-to-run spread (the worse point's best round is below the better point's worst round).
# SMBX_BINS="old=/tmp/old/smbx new=target/release/smbx" sweeps one smbx per label instead of
# $SMBX (its own server and its own client, one started at a time), alternated within each
# round, and prints each label's medians against the first label's.
#
#   bench/scaling.sh
#   ROUNDS=2 DURATION=2 SERVERS_WANTED=smbx SMBX_BINS="old=/tmp/old new=target/release/smbx" bench/scaling.sh
#
# Environment: THREADS (1,2,4), DEPTHS (1,2,4,8,16,32), SIZES ("4K:-r 512K:-s": size and
#   access per sweep), DURATION (3), WARMUP (1), FILE_MIB (1024), SERVERS_WANTED ("samba smbx
#   rocketsmbd"), ROUNDS (1), SMBX_BINS (none), BENCH_FLAGS (more smbx bench flags for every
#   point, e.g. --os-threads=4), RESULTS (target/bench-scaling: each sweep's CSV,
#   JSON and charts in SIZE.SERVER, later rounds in SIZE.SERVER.rN), SMBX_BIN, SMBX_CLIENT_BIN,
#   ROCKETSMBD_BIN, KEEP=1, NETNS (1: see below), CLIENT_CPUS and SERVER_CPUS (CPU lists, as
#   in compare.sh: every sweep's `smbx bench` runs with --affinity=CLIENT_CPUS, each server is
#   pinned to SERVER_CPUS as it starts; default unset: not pinned; on this 2-vCPU VM, which
#   packs threads onto one vCPU, CLIENT_CPUS=1 SERVER_CPUS=0 keeps the two apart: every -t then
#   shares the client's one CPU). Needs root, Debian samba, python3, a release build of smbx.
#
# With NETNS=1 (the default, when run as root and unshare(1) is there) the whole run, servers and
# client, is in a network namespace of its own (loopback only), so the TCP counters that each
# point's report carries (retransmitted segments, loss probes, zero-window advertisements,
# receive-queue drops: the kernel's, per namespace) count this run's connections and nothing
# else; after the MB/s matrices come, per server and size, the median retransmitted segments and
# zero-window advertisements per 1000 I/Os. NETNS=0 runs in the caller's namespace.
# TCP_CC=name (e.g. reno) gives that namespace that congestion control: every server, every
# client and the ceiling alike (bench_in_netns in bench/servers.sh; the machine's own bbr is
# left as it is).
#
# Where a loss comes from: per server and size, the medians of the machine's busy CPU (% of
# both cores), of its cycles per byte and of the server's are printed beside the MB/s matrix: a point that
# loses with the same cycles per byte left the CPUs idle (waits), one that loses with more
# cycles per byte did more work per byte (or the same work less well: cache, switches).
# And with CEILING=1 (the default when SIZES has 512K:-s) every round also runs the machine's
# own ceiling for each -t × -o point of 512 KiB reads, without SMB (crates/bench's `ceiling`
# example: -t streams, each its own connection, serving thread and driving thread, -o reads
# in flight each, plain sendfile from the same file the servers share): its matrix, its worst loss, and each smbx's MB/s as a share
# of it. A loss the ceiling shows too is the machine's (two cores, loopback TCP with bbr, the
# page cache), not the server's; what matters for a server is whether its share drops.
# CEILING_CC=name gives the ceiling's connections that congestion control (the ceiling
# example's --cc), e.g. with SMBX_SOCKET_OPTIONS=TCP_CONGESTION=reno (bench/servers.sh: smbx's
# `socket options`): this VM's default, bbr, paces loopback sends and costs CPU per I/O as
# connections are added, the machine's ceiling too.
set -euo pipefail
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"
BENCH_NETNS=${NETNS:-1} bench_in_netns "$0" "$@"

THREADS=${THREADS:-1,2,4}
DEPTHS=${DEPTHS:-1,2,4,8,16,32}
SIZES=${SIZES:-4K:-r 512K:-s}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
FILE_MIB=${FILE_MIB:-1024}
ROUNDS=${ROUNDS:-1}
SMBX_BINS=${SMBX_BINS:-}
BENCH_FLAGS=${BENCH_FLAGS:-}
RESULTS=${RESULTS:-$BENCH_REPO/target/bench-scaling}
SERVERS_WANTED=${SERVERS_WANTED:-samba smbx rocketsmbd}
CEILING=${CEILING:-$([[ " $SIZES " == *" 512K:-s "* ]] && echo 1 || echo 0)}
bench_check_cpus scaling
LABELS=()
for lb in $SMBX_BINS; do
  [ -x "${lb#*=}" ] || { echo "scaling: SMBX_BINS: ${lb#*=} is not an executable" >&2; exit 1; }
  LABELS+=("${lb%%=*}")
done
# With SMBX_BINS the labelled binaries stand in for $SMBX.
[ ${#LABELS[@]} -eq 0 ] || SERVERS_WANTED=$(printf '%s\n' $SERVERS_WANTED | grep -vx smbx | tr '\n' ' ' || true)
if [ -n "${SERVERS_WANTED// /}" ]; then
  bench_begin scaling "$FILE_MIB"
else
  # Only SMBX_BINS: their share, no server yet (each label's starts when its turn comes).
  trap bench_cleanup EXIT
  bench_setup "$(mktemp -d /tmp/smbx-scaling.XXXXXX)" "$FILE_MIB" smbx
  rm -rf "$RESULTS"; mkdir -p "$RESULTS"
fi

# sweep NAME CLIENT URL PID ROUND: every size's sweep against one server.
sweep() {
  local name=$1 client=$2 url=$3 pid=$4 round=$5 spec size access out
  for spec in $SIZES; do
    size=${spec%%:*} access=${spec#*:}
    out="$RESULTS/$size.$name"
    [ "$round" -eq 1 ] || out="$out.r$round"
    bench_log "round $round: sweep $size $access -t$THREADS -o$DEPTHS against $name (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    # shellcheck disable=SC2086 # BENCH_FLAGS: any number of flags
    "$client" bench sweep -b"$size" "$access" -t"$THREADS" -o"$DEPTHS" -d"$DURATION" -W"$WARMUP" \
      $BENCH_FLAGS ${CLIENT_CPUS:+"--affinity=$CLIENT_CPUS"} --server-pid "$pid" --labels "$name" --out "$out" "$url" >"$out.log" 2>&1 ||
      bench_log "sweep $size against $name failed: $(tail -2 "$out.log" | tr '\n' ' ')"
  done
}

# sweep_label LABEL=BIN ROUND: that binary's smbx started, swept with its own client, stopped.
sweep_label() {
  local label=${1%%=*} bin=${1#*=} round=$2 saved=("${SERVERS[@]}")
  SMBX=$bin bench_start_smbx
  sweep "$label" "$bin" "$URL_smbx" "$PID_smbx" "$round"
  kill "$PID_smbx" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$PID_smbx" 2>/dev/null || break; sleep 0.1; done
  SERVERS=("${saved[@]}")
}

# ceiling_sweep ROUND: the ceiling example at every -t × -o point (512 KiB plain reads), one
# "threads,outstanding,MB/s" line each in $RESULTS/ceiling.rROUND.csv.
CEILING_BIN=$BENCH_REPO/target/release/examples/ceiling
if [ "$CEILING" = 1 ] && ! (cd "$BENCH_REPO" && cargo build --release -q -p smbx-bench --example ceiling); then
  bench_log "the ceiling example did not build: no ceiling matrix"
  CEILING=0
fi
ceiling_sweep() {
  local round=$1 t o out="$RESULTS/ceiling.r$1.csv" pin=() line
  [ -n "${SERVER_CPUS:-}" ] && [ -n "${CLIENT_CPUS:-}" ] && pin=(--pin="$SERVER_CPUS,$CLIENT_CPUS")
  bench_log "round $round: ceiling (512 KiB plain reads without SMB) -t$THREADS -o$DEPTHS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  : >"$out"
  for t in ${THREADS//,/ }; do
    for o in ${DEPTHS//,/ }; do
      line=$("$CEILING_BIN" --plain --streams "$t" --depth "$o" ${CEILING_CC:+--cc "$CEILING_CC"} --read-file "$BENCH_ROOT/data/data.bin" "${pin[@]}" "$DURATION" 1 2>&1 | grep '^Plain: median' || true)
      [[ $line =~ median\ ([0-9.]+)\ MB/s ]] && echo "$t,$o,${BASH_REMATCH[1]}" >>"$out"
    done
  done
}

NAMES=("${SERVERS[@]}")
for lb in $SMBX_BINS; do NAMES+=("=$lb"); done
[ "$CEILING" != 1 ] || NAMES+=("+ceiling")
for round in $(seq 1 "$ROUNDS"); do
  order=("${NAMES[@]}")
  if [ $((round % 2)) -eq 0 ]; then
    order=(); for ((i = ${#NAMES[@]} - 1; i >= 0; i--)); do order+=("${NAMES[i]}"); done
  fi
  for n in "${order[@]}"; do
    if [ "$n" = "+ceiling" ]; then
      ceiling_sweep "$round"
    elif [ "${n:0:1}" = "=" ]; then
      sweep_label "${n:1}" "$round"
    else
      pidv="PID_$n" urlv="URL_$n"
      sweep "$n" "$SMBX_CLIENT" "${!urlv}" "${!pidv}" "$round"
    fi
  done
done

bench_say_cpus
python3 - "$RESULTS" "${SERVERS[*]} ${LABELS[*]}" "$SIZES" "$ROUNDS" "${LABELS[*]}" "$CEILING" <<'PY'
import csv, os, statistics, sys
res, names, sizes = sys.argv[1], sys.argv[2].split(), [s.split(":")[0] for s in sys.argv[3].split()]
rounds, labels, with_ceiling = int(sys.argv[4]), sys.argv[5].split(), sys.argv[6] == "1"
def col(r, *names):
    for n in names:
        if n in r and r[n] != "":
            return float(r[n])
    return None
def rows(size, name):
    """Every round's CSV rows of one sweep (rounds without results left out)."""
    for k in range(1, rounds + 1):
        d = os.path.join(res, f"{size}.{name}" + ("" if k == 1 else f".r{k}"), "results.csv")
        try:
            with open(d) as f:
                yield from csv.DictReader(f)
        except OSError:
            continue
def points(size, name):
    """(t, o) -> MB/s of every round that has the point."""
    got = {}
    for r in rows(size, name):
        mbs = col(r, "mb_per_sec", "MB/s", "mbps")
        if mbs is None:
            b = col(r, "bytes_per_sec")
            mbs = None if b is None else b / 1e6
        if mbs is not None:
            got.setdefault((int(r["threads"]), int(r["outstanding"])), []).append(mbs)
    return got
def matrix(title, cells, fmt):
    ts = sorted({t for t, _ in cells})
    os_ = sorted({o for _, o in cells})
    print(title)
    print("      " + "".join(f"{'-o' + str(o):>9}" for o in os_))
    for t in ts:
        print(f"{'-t' + str(t):>6}" + "".join(
            fmt(cells[(t, o)]) if (t, o) in cells else f"{'-':>9}" for o in os_))
def worst_loss(got, med):
    """The largest drop from a point at a smaller -t (same -o) or a smaller -o (same -t)."""
    worst, where, real = 0.0, "none", None
    for (t, o), v in med.items():
        for (t2, o2), w in med.items():
            if w > 0 and ((t2 == t and o2 < o) or (o2 == o and t2 < t)) and 1 - v / w > worst:
                worst, where = 1 - v / w, f"-t{t} -o{o} against -t{t2} -o{o2}"
                # Beyond the spread: even this point's best round is below the
                # other's worst.
                real = max(got[(t, o)]) < min(got[(t2, o2)])
    n = max(len(v) for v in got.values())
    note = ""
    if n > 1 and real is not None:
        note = ": beyond the run-to-run spread" if real else ": within the run-to-run spread"
    print(f"  worst loss against a smaller -t or -o: {worst * 100:.1f}% ({where}){note}")
def column_medians(size, name, column, per_kio=False):
    """(t, o) -> median of a CSV column over the rounds, or of it per 1000 I/Os with
    per_kio (points without it left out)."""
    got = {}
    for r in rows(size, name):
        v, n = col(r, column), (col(r, "io_count") if per_kio else 1)
        if v is not None and n:
            got.setdefault((int(r["threads"]), int(r["outstanding"])), []).append(
                1000 * v / n if per_kio else v)
    return {k: statistics.median(v) for k, v in got.items()}
medians = {}
for size in sizes:
    for s in names:
        got = points(size, s)
        if not got:
            print(f"\n{size} {s}: no results")
            continue
        med = {k: statistics.median(v) for k, v in got.items()}
        medians[(size, s)] = med
        n = max(len(v) for v in got.values())
        what = "MB/s" if n == 1 else f"median MB/s of {n} rounds"
        matrix(f"\n{size} against {s}: {what} (rows -t, columns -o)", med, lambda v: f"{v:9.1f}")
        if n > 1:
            matrix("  spread (max-min)/median, %", {k: 100 * (max(v) - min(v)) / med[k]
                   for k, v in got.items() if med[k] > 0}, lambda v: f"{v:9.1f}")
        worst_loss(got, med)
        for column, what in (("system_cpu_percent", "the machine's busy CPU, % of all cores"),
                             ("cycles_per_byte", "the machine's cycles per byte"),
                             ("server_cycles_per_byte", "the server's cycles per byte")):
            m = column_medians(size, s, column)
            if m:
                matrix(f"  {what} (median)", m, lambda v: f"{v:9.2f}")
# The machine's own ceiling at each point (512 KiB plain reads without SMB), and each
# server's share of it.
ceiling = {}
if with_ceiling:
    for k in range(1, rounds + 1):
        try:
            with open(os.path.join(res, f"ceiling.r{k}.csv")) as f:
                for line in f:
                    t, o, mbs = line.strip().split(",")
                    ceiling.setdefault((int(t), int(o)), []).append(float(mbs))
        except (OSError, ValueError):
            continue
if ceiling:
    cmed = {k: statistics.median(v) for k, v in ceiling.items()}
    n = max(len(v) for v in ceiling.values())
    what = "MB/s" if n == 1 else f"median MB/s of {n} rounds"
    matrix(f"\nthe machine's ceiling, 512 KiB plain reads without SMB (-t streams, each its own "
           f"connection and threads; -o in flight each): {what}", cmed, lambda v: f"{v:9.1f}")
    worst_loss(ceiling, cmed)
    for s in names:
        m = medians.get(("512K", s))
        if m:
            r = {k: m[k] / cmed[k] for k in m if cmed.get(k)}
            matrix(f"\n512K against {s}: share of the machine's ceiling (medians)", r,
                   lambda v: f"{v:9.2f}")
for size in sizes:
    for s in names:
        for column, what in (("tcp_retrans_segs", "retransmitted segments"),
                             ("tcp_zero_window_adv", "zero-window advertisements")):
            m = column_medians(size, s, column, per_kio=True)
            if m:
                matrix(f"\n{size} against {s}: TCP {what} per 1000 I/Os (median; every socket "
                       "of the bench's network namespace)", m, lambda v: f"{v:9.1f}")
for size in sizes:
    base = medians.get((size, labels[0])) if labels else None
    for s in labels[1:]:
        m = medians.get((size, s))
        if base and m:
            r = {k: m[k] / base[k] for k in m if k in base and base[k] > 0}
            matrix(f"\n{size}: {s} / {labels[0]} (medians)", r, lambda v: f"{v:9.2f}")
PY
echo "(per-point reports and charts in $RESULTS)"
