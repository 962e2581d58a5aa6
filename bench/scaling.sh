#!/usr/bin/env bash
# Does throughput hold when threads or queue depth grow? smbx bench sweep over -t × -o against
# Samba's smbd, smbx and rocketsmbd on loopback (each on its own copy of one share), then, per
# server and I/O size, the MB/s matrix and the worst loss: the largest drop from the best figure
# seen at a smaller -o (same -t) or a smaller -t (same -o). Each -t thread drives the server through
# its own connection (smbx bench's threads are independent, as fio's jobs). Each sweep's line in
# the log carries the load average it started under: on a loaded machine the matrix is noise.
#
#   bench/scaling.sh
#
# Environment: THREADS (1,2,4), DEPTHS (1,2,4,8,16,32), SIZES ("4K:-r 512K:-s": size and
#   access per sweep), DURATION (3), WARMUP (1), FILE_MIB (1024), SERVERS_WANTED ("samba smbx
#   rocketsmbd"), RESULTS (target/bench-scaling: each sweep's CSV, JSON and charts), SMBX_BIN,
#   ROCKETSMBD_BIN, KEEP=1. Needs root, Debian samba, python3, a release build of smbx.
set -euo pipefail
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"

THREADS=${THREADS:-1,2,4}
DEPTHS=${DEPTHS:-1,2,4,8,16,32}
SIZES=${SIZES:-4K:-r 512K:-s}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
FILE_MIB=${FILE_MIB:-1024}
RESULTS=${RESULTS:-$BENCH_REPO/target/bench-scaling}
SERVERS_WANTED=${SERVERS_WANTED:-samba smbx rocketsmbd}

bench_begin scaling "$FILE_MIB"

for spec in $SIZES; do
  size=${spec%%:*} access=${spec#*:}
  for s in "${SERVERS[@]}"; do
    pidv="PID_$s" urlv="URL_$s"
    out="$RESULTS/$size.$s"
    bench_log "sweep $size $access -t$THREADS -o$DEPTHS against $s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$SMBX" bench sweep -b"$size" "$access" -t"$THREADS" -o"$DEPTHS" -d"$DURATION" -W"$WARMUP" \
      --server-pid "${!pidv}" --labels "$s" --out "$out" "${!urlv}" >"$out.log" 2>&1 ||
      bench_log "sweep $size against $s failed: $(tail -2 "$out.log" | tr '\n' ' ')"
  done
done

python3 - "$RESULTS" "${SERVERS[*]}" "$SIZES" <<'PY'
import csv, os, sys
res, servers, sizes = sys.argv[1], sys.argv[2].split(), [s.split(":")[0] for s in sys.argv[3].split()]
def rows(size, server):
    path = os.path.join(res, f"{size}.{server}", "results.csv")
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []
def col(r, *names):
    for n in names:
        if n in r and r[n] != "":
            return float(r[n])
    return None
for size in sizes:
    for s in servers:
        got = {}
        for r in rows(size, s):
            t, o = int(r["threads"]), int(r["outstanding"])
            mbs = col(r, "mb_per_sec", "MB/s", "mbps")
            if mbs is None:
                b = col(r, "bytes_per_sec")
                mbs = None if b is None else b / 1e6
            got[(t, o)] = mbs
        if not got:
            print(f"\n{size} {s}: no results")
            continue
        ts = sorted({t for t, _ in got})
        os_ = sorted({o for _, o in got})
        print(f"\n{size} against {s}: MB/s (rows -t, columns -o)")
        print("      " + "".join(f"{'-o' + str(o):>9}" for o in os_))
        for t in ts:
            print(f"{'-t' + str(t):>6}" + "".join(
                f"{got[(t, o)]:9.1f}" if got.get((t, o)) is not None else f"{'-':>9}" for o in os_))
        worst, where = 0.0, "none"
        for (t, o), v in got.items():
            if v is None:
                continue
            before = [w for (t2, o2), w in got.items() if w is not None and
                      ((t2 == t and o2 < o) or (o2 == o and t2 < t))]
            if before and max(before) > 0:
                loss = 1 - v / max(before)
                if loss > worst:
                    worst, where = loss, f"-t{t} -o{o}"
        print(f"  worst loss against a smaller -t or -o: {worst * 100:.1f}% ({where})")
PY
echo "(per-point reports and charts in $RESULTS)"
