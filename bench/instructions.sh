#!/usr/bin/env bash
# bench/instructions.sh OLD_SMBX NEW_SMBX: the smbx server's CPU cost as instructions per
# request, counted by valgrind's callgrind, for two server binaries driven by one client.
# Unlike cycles per byte from compare.sh, instruction counts do not move with the machine's
# load, so a server-side regression of a few percent shows on a busy machine. Builds nothing.
#
# For each server and each profile the server runs under callgrind twice, once for IOS_A and
# once for IOS_B requests (`smbx bench --ios`, -W0, one thread, the client outside valgrind);
# instructions per request = (Ir(IOS_B) - Ir(IOS_A)) / (IOS_B - IOS_A), so start-up, logon,
# CREATE/CLOSE and shutdown cancel out (the timing-driven seeding of aws-lc's entropy source
# at start-up is left out of each count: it moves by millions between runs). Prints one row per profile: old, new, new/old, and
# instructions per byte; with TOP=N also the N functions whose self cost per request changed
# most (callgrind_annotate, per request).
#
# Knobs (environment):
#   SMBX_CLIENT_BIN  the `smbx bench` that drives both servers (default: NEW_SMBX); it needs
#                    --ios (commit 'bench: --ios', issue 14)
#   PROFILES         names from the list below (default: rand-read-4K-o32 seq-read-512K
#                    seq-write-512K)
#   IOS_A, IOS_B     request counts of the two runs (default 500 and 2500; 512K profiles use
#                    a fifth of each)
#   FILE_MIB         size of the file read and written (default 64)
#   TOP              functions to list per profile (default 15; 0 = none)
#   REPEAT           pairs of runs per server and profile, alternating old and new; the
#                    median is printed (default 3: how many 4 KiB requests arrive in one
#                    read, and so how many wake-ups they take, moves a run by a few percent)
#   KEEP=1           keep the callgrind files (their directory is printed)
#   TRANSPORT        tcp (default) or rdma: the requests go over SMB Direct (soft-iWARP on
#                    loopback; the server's share of the provider is counted with it)
#   VALGRIND         the valgrind to run (default: valgrind on PATH). It must know openat2(2),
#                    which the share root is opened with: 3.21 or later (Debian bookworm's 3.19
#                    answers ENOSYS and the server refuses the share). An unpacked newer
#                    package works: VALGRIND=DIR/usr/bin/valgrind.bin
#                    VALGRIND_LIB=DIR/usr/libexec/valgrind.
# Needs root (the bench account), valgrind. A 4 KiB request costs ~50x its native time under
# callgrind: the default counts take about a minute per server and profile.
set -euo pipefail

[ $# -eq 2 ] || { sed -n '2,30p' "$0" >&2; exit 2; }
OLD=$(realpath "$1")
NEW=$(realpath "$2")
SMBX_BIN=$NEW
export SMBX_BIN
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"
CLIENT=${SMBX_CLIENT_BIN:-$NEW}
PROFILES=${PROFILES:-"rand-read-4K-o32 seq-read-512K seq-write-512K"}
IOS_A=${IOS_A:-500}
IOS_B=${IOS_B:-2500}
FILE_MIB=${FILE_MIB:-64}
TOP=${TOP:-15}
REPEAT=${REPEAT:-3}
VALGRIND=${VALGRIND:-valgrind}
TRANSPORT=${TRANSPORT:-tcp}
case $TRANSPORT in tcp | rdma) ;; *) echo "instructions.sh: TRANSPORT is tcp or rdma" >&2; exit 2 ;; esac
command -v "$VALGRIND" >/dev/null || { echo "instructions.sh: $VALGRIND is not installed" >&2; exit 1; }
"$CLIENT" bench --help 2>&1 | grep -q -- '--ios' ||
  { echo "instructions.sh: $CLIENT bench has no --ios (set SMBX_CLIENT_BIN)" >&2; exit 1; }

profile_flags() { # name -> smbx bench flags, and the block size in bytes
  case $1 in
    rand-read-4K-o32) echo "-b4K -r -o32 4096" ;;
    rand-read-4K-o1) echo "-b4K -r -o1 4096" ;;
    rand-rw-8K-o16) echo "-b8K -r -w30 -o16 8192" ;;
    seq-read-64K) echo "-b64K -o8 65536" ;;
    seq-read-512K) echo "-b512K -o8 524288" ;;
    seq-write-512K) echo "-b512K -w100 -o8 524288" ;;
    seq-read-512K-gcm) echo "-b512K -o8 --seal=aes-128-gcm 524288" ;;
    seq-read-512K-gmac) echo "-b512K -o8 --sign=gmac 524288" ;;
    seq-write-512K-gmac) echo "-b512K -w100 -o8 --sign=gmac 524288" ;;
    *) echo "instructions.sh: unknown profile $1" >&2; return 1 ;;
  esac
}

root=$(mktemp -d /tmp/smbx-instructions.XXXXXX)
trap bench_cleanup EXIT
bench_setup "$root" "$FILE_MIB" smbx
OUT=$root/callgrind
mkdir -p "$OUT"
[ -n "${KEEP:-}" ] && bench_log "callgrind files in $OUT"

# run_one BIN TAG IOS FLAGS...: a fresh server under callgrind, IOS requests, its total Ir.
run_one() {
  local bin=$1 tag=$2 ios=$3 S=$BENCH_ROOT/smbx port pid url rport
  shift 3
  port=$(bench_free_port)
  url="smb://$BENCH_USER@127.0.0.1:$port/share/data.bin"
  if [ "$TRANSPORT" = rdma ]; then
    rport=$(bench_free_port)
    bench_smbx_conf "$bin" "$port" "smb direct = yes" "smb direct port = $rport"
    url="smb://$BENCH_USER@127.0.0.1:$rport/share/data.bin?transport=rdma"
  else
    bench_smbx_conf "$bin" "$port"
  fi
  setsid "$VALGRIND" --tool=callgrind --callgrind-out-file="$OUT/$tag.out" \
    "$bin" serve --config "$S/smb.conf" >"$OUT/$tag.log" 2>&1 </dev/null &
  pid=$!; BENCH_PIDS+=("$pid")
  bench_wait_port "$port" "$pid" || { bench_log "server did not start: $OUT/$tag.log"; return 1; }
  if [ "$TRANSPORT" = rdma ]; then
    bench_wait_port "$rport" "$pid" || { bench_log "no SMB Direct listener: $OUT/$tag.log"; return 1; }
  fi
  "$CLIENT" bench "$@" -W0 -d600 --ios "$ios" -Rjson \
    "$url" >"$OUT/$tag.json" 2>"$OUT/$tag.err" ||
    { bench_log "bench failed: $(tail -2 "$OUT/$tag.err")"; kill "$pid"; return 1; }
  kill -TERM "$pid"
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  ir_of "$OUT/$tag.out"
}

# ir_of CALLGRIND_OUT: its Ir without the seeding of aws-lc's entropy source (jitterentropy,
# once per process: timing-driven, so its count moves by millions between runs); writes
# the self Ir of each function to CALLGRIND_OUT.fns (JSON).
ir_of() {
  python3 - "$1" <<'PY'
import json, re, subprocess, sys
out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no",
                      sys.argv[1]], capture_output=True, text=True).stdout
total, entropy, fns = 0, 0, {}
for line in out.splitlines():
    if "=>" in line:
        continue
    m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)(?:\s+\[[^\]]*\])?$", line)
    if not m:
        continue
    ir, what = int(m.group(1).replace(",", "")), m.group(2)
    if what.startswith("PROGRAM TOTALS"):
        total = ir
    elif ":" in what:
        path, name = what.split(":", 1)
        if "jitterentropy" in path:
            entropy += ir
            continue
        # One row per function: no call counts, no recursion-depth suffixes.
        name = re.sub(r"'\d+", "", re.sub(r"\s+\([\d,]+x\)$", "", name))
        fns[name] = fns.get(name, 0) + ir
json.dump(fns, open(sys.argv[1] + ".fns", "w"))
print(total - entropy)
PY
}

# per_fn TAG_A TAG_B IOS: "function self-Ir-per-request" lines from two runs' difference.
per_fn() {
  python3 - "$OUT/$1.out.fns" "$OUT/$2.out.fns" "$3" <<'PY'
import json, sys
a, b, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
for k in set(a) | set(b):
    v = (b.get(k, 0) - a.get(k, 0)) / n
    if abs(v) >= 1:
        print(f"{v:.1f}\t{k}")
PY
}

declare -A IR RUNS
for prof in $PROFILES; do
  read -r -a f <<<"$(profile_flags "$prof")"
  bs=${f[-1]}; unset 'f[-1]'
  a=$IOS_A; b=$IOS_B
  if [ "$bs" -ge 524288 ]; then a=$((IOS_A / 5)); b=$((IOS_B / 5)); fi
  for r in $(seq 1 "$REPEAT"); do
    # Alternating old and new, so a change of the machine's state hits both.
    for which in old new; do
      bin=$OLD; [ $which = new ] && bin=$NEW
      ia=$(run_one "$bin" "$which-$prof-a" "$a" "${f[@]}")
      ib=$(run_one "$bin" "$which-$prof-b" "$b" "${f[@]}")
      per=$(( (ib - ia) / (b - a) ))
      RUNS[$which-$prof]="${RUNS[$which-$prof]:-} $per"
      bench_log "$which $prof: $ia Ir for $a requests, $ib Ir for $b -> $per per request"
      if [ "$TOP" -gt 0 ]; then per_fn "$which-$prof-a" "$which-$prof-b" "$((b - a))" >"$OUT/$which-$prof.fns"; fi
    done
  done
  for which in old new; do
    # The median of the repetitions (scheduling moves a run by a few percent).
    IR[$which-$prof]=$(tr ' ' '\n' <<<"${RUNS[$which-$prof]}" | grep . | sort -n |
      awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2)}')
  done
done

echo "load: $(uptime)"
echo "old: $OLD"
echo "new: $NEW"
echo "client: $CLIENT"
echo "transport: $TRANSPORT"
printf '%-18s %14s %14s %8s %10s %10s  %s\n' profile "old Ir/req" "new Ir/req" new/old "old Ir/B" "new Ir/B" "runs old | new"
for prof in $PROFILES; do
  read -r -a f <<<"$(profile_flags "$prof")"
  bs=${f[-1]}
  o=${IR[old-$prof]} n=${IR[new-$prof]}
  awk -v p="$prof" -v o="$o" -v n="$n" -v bs="$bs" \
    -v ro="${RUNS[old-$prof]}" -v rn="${RUNS[new-$prof]}" \
    'BEGIN {printf "%-18s %14d %14d %8.3f %10.3f %10.3f  %s |%s\n", p, o, n, n/o, o/bs, n/bs, ro, rn}'
done
if [ "$TOP" -gt 0 ]; then
  for prof in $PROFILES; do
    echo
    echo "$prof: self Ir per request, the $TOP largest changes (new - old, old, new, function)"
    python3 - "$OUT/old-$prof.fns" "$OUT/new-$prof.fns" "$TOP" <<'PY'
import sys
def load(p):
    d = {}
    for line in open(p):
        v, k = line.rstrip("\n").split("\t", 1)
        d[k] = float(v)
    return d
o, n, top = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
rows = sorted(((n.get(k, 0) - o.get(k, 0), o.get(k, 0), n.get(k, 0), k) for k in set(o) | set(n)),
              key=lambda r: -abs(r[0]))[:top]
for d, a, b, k in rows:
    print(f"{d:+9.0f} {a:9.0f} {b:9.0f}  {k[:110]}")
PY
  done
fi
