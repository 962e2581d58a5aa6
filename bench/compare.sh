#!/usr/bin/env bash
# smbx side by side with its peers: Samba's smbd (Debian), smbx and rocketsmbd on loopback, each
# serving its own copy of the same share, driven by the same `smbx bench` profiles, one table.
#
#   bench/compare.sh
#
# Profiles (one thread, buffered, each -d$DURATION after -W$WARMUP):
#   4K random read -o1 and -o32, 8K random 70/30 read/write -o16,
#   64K and 512K sequential read -o$SEQ_O, 512K sequential write -o$SEQ_O,
#   512K sequential read sealed with AES-128-GCM (--seal) and signed with AES-GMAC (--sign).
# For each profile the servers run one after another (interleaved, so drift on a shared machine
# hits all of them alike). Columns: IOPS, MB/s (10^6 bytes), p50/p99 latency (µs), cycles per
# byte of the whole machine and of the server process (--server-pid; smbd with its children).
# Under each profile: the ratios smbx/Samba and smbx/rocketsmbd of every column (IOPS and MB/s:
# higher is better for smbx; latency and cycles: lower is better).
#
# Then the machine's limits: iperf3 one-stream loopback TCP with 1 MiB writes, and the 512 KiB
# read of each server as a share of it; sockperf's TCP ping-pong round trip with 4 KiB messages,
# and each server's 4 KiB QD1 read p50 as a multiple of it; and each server's sealed and signed
# 512 KiB read as a share of its plain one (iperf3 and sockperf installed with apt-get when
# missing), beside the machine's ceiling for each: the ceiling example (smbx-bench) serves
# 512 KiB reads without SMB as cheaply as they can be done, plain (sendfile), sealed and signed,
# and its plain rate bounds every server's 512 KiB read too; when seq-write-512K runs it also
# receives 512 KiB writes without SMB into a FILE_MIB file beside the shares (splice, and
# recv+pwrite; the better one), which bounds every server's 512 KiB write (CEILING=0 skips it).
# Environment: DURATION (10), WARMUP (2), SEQ_O (8), FILE_MIB (1024), PROFILES (names below,
#   space-separated; default all), SERVERS_WANTED ("samba smbx rocketsmbd"),
#   RESULTS (target/bench-compare: the JSON reports), SMBX_BIN, SMBX_CLIENT_BIN (the
#   smbx bench driving every server; default SMBX_BIN), ROCKETSMBD_BIN, KEEP=1 (keep
#   the shares), SMBX_METRICS=1 (smbx runs with `metrics listen` on: compare a run with it
#   against one without to see what the metrics cost; its last scrape is saved as
#   $RESULTS/smbx-metrics.prom), CLIENT_CPUS (a CPU list, e.g. 1 or 2-3: every server's
#   `smbx bench` runs with --affinity=CLIENT_CPUS, its threads pinned there; default unset:
#   not pinned; keeps the client off the server's CPU where the scheduler packs both on
#   one, as this VM's does), SERVER_CPUS (a CPU list: each server pinned there as it starts,
#   taskset -a; pinning the client alone can pull the server onto the client's CPU); iperf3's
#   and sockperf's client and server sides are pinned the same way, so each ratio compares
#   like placements. TCP_CC (a congestion control, e.g. cubic: the whole run, every server,
#   the client, iperf3 and sockperf, in a network namespace of its own whose
#   net.ipv4.tcp_congestion_control is TCP_CC; bench_in_netns in bench/servers.sh; default
#   unset: the machine's namespace and congestion control).
#   rocketsmbd is `cargo install`ed into target/rocketsmbd on first use; if that
#   fails or it does not start, it is skipped with a message.
# Needs root, Debian samba, python3, and a release build of smbx (built if missing).
set -euo pipefail
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"
bench_in_netns "$0" "$@"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
SEQ_O=${SEQ_O:-8}
FILE_MIB=${FILE_MIB:-1024}
RESULTS=${RESULTS:-$BENCH_REPO/target/bench-compare}
SERVERS_WANTED=${SERVERS_WANTED:-samba smbx rocketsmbd}

declare -A FLAGS=(
  [rand-read-4K-o1]="-b4K -r -o1"
  [rand-read-4K-o32]="-b4K -r -o32"
  [rand-rw70-8K-o16]="-b8K -r -w30 -o16"
  [seq-read-64K]="-b64K -s -o$SEQ_O"
  [seq-read-512K]="-b512K -s -o$SEQ_O"
  [seq-write-512K]="-b512K -s -w100 -o$SEQ_O"
  [seq-read-512K-gcm]="-b512K -s -o$SEQ_O --seal=aes-128-gcm"
  [seq-read-512K-gmac]="-b512K -s -o$SEQ_O --sign=gmac"
)
ORDER=(rand-read-4K-o1 rand-read-4K-o32 rand-rw70-8K-o16 seq-read-64K seq-read-512K seq-write-512K
  seq-read-512K-gcm seq-read-512K-gmac)
read -r -a PROFILES <<<"${PROFILES:-${ORDER[*]}}"
for p in "${PROFILES[@]}"; do
  [ -n "${FLAGS[$p]:-}" ] || { echo "compare: unknown profile $p (one of: ${ORDER[*]})" >&2; exit 2; }
done

bench_check_cpus compare

bench_begin compare "$FILE_MIB"

for p in "${PROFILES[@]}"; do
  for s in "${SERVERS[@]}"; do
    bench_log "$p against $s (-d$DURATION -W$WARMUP)"
    # shellcheck disable=SC2086
    bench_json "$RESULTS/$p.$s.json" "$s" ${FLAGS[$p]} -t1 -d"$DURATION" -W"$WARMUP" || true
  done
done

bench_scrape_smbx "$RESULTS/smbx-metrics.prom"

# The machine's limit: one-stream loopback TCP with 1 MiB writes (iperf3 -l 1M), in the same
# run; the 512 KiB read is printed as a share of it.
IPERF_JSON=$RESULTS/iperf3.json
if [[ " ${PROFILES[*]} " == *" seq-read-512K "* ]]; then
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
  bench_need iperf3 iperf3 || bench_log "no iperf3: no TCP throughput line"
  if command -v iperf3 >/dev/null 2>&1; then
    IPORT=$(bench_free_port)
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} iperf3 -s -1 -p "$IPORT" >/dev/null 2>&1 &
    IPERF_PID=$!
    bench_pin_server iperf3 "$IPERF_PID"
    sleep 0.5
    bench_log "iperf3 -c 127.0.0.1 -l 1M -t $DURATION (the machine's one-stream loopback TCP)"
    bench_as_client iperf3 -c 127.0.0.1 -p "$IPORT" -l 1M -t "$DURATION" -J >"$IPERF_JSON" 2>/dev/null || rm -f "$IPERF_JSON"
    wait "$IPERF_PID" 2>/dev/null || true
  fi
fi

# The machine's round trip: sockperf TCP ping-pong with 4 KiB messages (a 4 KiB READ's size),
# in the same run; the 4 KiB QD1 read p50 is printed as a multiple of its p50.
SOCKPERF_OUT=$RESULTS/sockperf.txt
if [[ " ${PROFILES[*]} " == *" rand-read-4K-o1 "* ]]; then
  bench_need sockperf sockperf || bench_log "no sockperf: no round-trip line"
  if command -v sockperf >/dev/null 2>&1; then
    SPORT=$(bench_free_port)
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} sockperf server -i 127.0.0.1 -p "$SPORT" --tcp >/dev/null 2>&1 &
    SOCKPERF_PID=$!
    bench_pin_server sockperf "$SOCKPERF_PID"
    sleep 0.5
    bench_log "sockperf ping-pong --tcp -m 4096 --full-rtt -t $DURATION (the machine's loopback TCP round trip)"
    bench_as_client sockperf ping-pong -i 127.0.0.1 -p "$SPORT" --tcp -m 4096 --full-rtt -t "$DURATION" >"$SOCKPERF_OUT" 2>&1 ||
      rm -f "$SOCKPERF_OUT"
    kill "$SOCKPERF_PID" 2>/dev/null || true
    wait "$SOCKPERF_PID" 2>/dev/null || true
  fi
fi

# The machine's ceiling for plain, sealed and signed 512 KiB reads and for plain 512 KiB writes
# without SMB (one thread serving, one driving at QD8, modes alternated; writes into a FILE_MIB
# file on the shares' filesystem): what no server and client pair can beat here.
CEILING_OUT=$RESULTS/ceiling.txt
rm -f "$CEILING_OUT"
CEILING_ARGS=()
[[ " ${PROFILES[*]} " == *" seq-read-512K"* ]] || CEILING_ARGS+=(--writes)
[[ " ${PROFILES[*]} " == *" seq-write-512K "* ]] || CEILING_ARGS+=(--reads)
if [ "${CEILING:-1}" = 1 ] && [ "${#CEILING_ARGS[@]}" -lt 2 ]; then
  if (cd "$BENCH_REPO" && cargo build --release -q -p smbx-bench --example ceiling); then
    # Pinned as the servers and clients are when each is one CPU (else not pinned).
    if [[ ${SERVER_CPUS:-} =~ ^[0-9]+$ && ${CLIENT_CPUS:-} =~ ^[0-9]+$ ]]; then
      CEILING_ARGS+=(--pin="$SERVER_CPUS,$CLIENT_CPUS")
    fi
    CEILING_ARGS+=(--dir "$BENCH_ROOT" --file-mib "$FILE_MIB" "$DURATION" 3)
    bench_log "ceiling ${CEILING_ARGS[*]} (512 KiB reads and/or writes without SMB)"
    "$BENCH_REPO/target/release/examples/ceiling" "${CEILING_ARGS[@]}" >"$CEILING_OUT" 2>&1 ||
      rm -f "$CEILING_OUT"
  else
    bench_log "the ceiling example did not build: no ceiling lines"
  fi
fi

bench_say_cpus
python3 - "$RESULTS" "${SERVERS[*]}" "${PROFILES[*]}" "$IPERF_JSON" "$SOCKPERF_OUT" "$CEILING_OUT" <<'PY'
import json, os, re, sys
res, servers, profiles = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
iperf_path, sockperf_path, ceiling_path = sys.argv[4], sys.argv[5], sys.argv[6]
ceiling, wceil = {}, None
try:
    text = open(ceiling_path).read()
    for m in re.finditer(r"^(Plain|Sealed|Signed): median ([0-9.]+) MB/s.*?([0-9.]+)x plain$", text, re.M):
        ceiling[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    m = re.search(r"^Write ceiling: ([0-9.]+) MB/s, p50 ([0-9.]+) µs, p99 ([0-9.]+) µs \((\w+)\)", text, re.M)
    if m:
        wceil = (float(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4).lower())
except OSError:
    pass
def load(p, s):
    try:
        return json.load(open(os.path.join(res, f"{p}.{s}.json")))
    except (OSError, ValueError):
        return None
def figs(r):
    if r is None:
        return None
    lat = r.get("latency_us") or {}
    cyc = r.get("cycles") or {}
    return [r["iops"], r["bytes_per_sec"] / 1e6, lat.get("p50"), lat.get("p99"),
            cyc.get("machine"), cyc.get("server")]
def cell(v, fmt):
    return "-" if v is None else format(v, fmt)
head = ("profile", "server", "IOPS", "MB/s", "p50 µs", "p99 µs", "cyc/B", "srv cyc/B")
fmts = (".0f", ".1f", ".1f", ".1f", ".2f", ".2f")
w = (18, 18, 10, 9, 9, 9, 7, 9)
line = lambda cols: " ".join(str(c).rjust(n) if i > 1 else str(c).ljust(n) for i, (c, n) in enumerate(zip(cols, w)))
print(line(head))
for p in profiles:
    rows = {s: figs(load(p, s)) for s in servers}
    for s in servers:
        f = rows[s]
        print(line([p, s] + (["failed"] + [""] * 5 if f is None else [cell(v, t) for v, t in zip(f, fmts)])))
    base = rows.get("smbx")
    for peer in ("samba", "rocketsmbd"):
        other = rows.get(peer)
        if base is None or other is None:
            continue
        ratio = [None if a is None or b in (None, 0) else a / b for a, b in zip(base, other)]
        print(line(["", f"smbx/{peer}"] + [cell(v, ".2f") for v in ratio]))
try:
    tcp = json.load(open(iperf_path))["end"]["sum_received"]["bits_per_second"] / 8 / 1e6
except (OSError, ValueError, KeyError):
    tcp = None
if tcp:
    print(f"\nmachine limit: one-stream loopback TCP (iperf3 -l 1M) {tcp:.1f} MB/s")
    for s in servers:
        f = figs(load("seq-read-512K", s))
        if f:
            print(f"  seq-read-512K {s}: {f[1]:.1f} MB/s = {f[1] / tcp:.2f} of it")
if "Plain" in ceiling and "seq-read-512K" in profiles:
    top = ceiling["Plain"][0]
    print(f"\nmachine ceiling: 512 KiB reads without SMB (ceiling example, sendfile) {top:.1f} MB/s")
    for s in servers:
        f = figs(load("seq-read-512K", s))
        if f:
            print(f"  seq-read-512K {s}: {f[1]:.1f} MB/s = {f[1] / top:.2f} of it")
if wceil and "seq-write-512K" in profiles:
    top, p50, p99, how = wceil
    print(f"\nmachine ceiling: 512 KiB writes without SMB (ceiling example, {how}) {top:.1f} MB/s, "
          f"p50 {p50:.0f} µs, p99 {p99:.0f} µs")
    for s in servers:
        f = figs(load("seq-write-512K", s))
        if f:
            tail = f", p99 {f[3]:.0f} µs = {f[3] / p99:.2f}x its p99" if f[3] and p99 else ""
            print(f"  seq-write-512K {s}: {f[1]:.1f} MB/s = {f[1] / top:.2f} of it{tail}")
try:
    m = re.search(r"percentile 50\.000 =\s*([0-9.]+)", open(sockperf_path).read())
    rtt = float(m.group(1)) if m else None
except OSError:
    rtt = None
if rtt:
    print(f"\nmachine round trip: sockperf TCP ping-pong, 4 KiB messages, p50 {rtt:.1f} µs")
    for s in servers:
        f = figs(load("rand-read-4K-o1", s))
        if f and f[2]:
            print(f"  rand-read-4K-o1 {s}: p50 {f[2]:.1f} µs = {f[2] / rtt:.2f}x of it")
for prof, what, mode in (("seq-read-512K-gcm", "sealed AES-128-GCM", "Sealed"),
                         ("seq-read-512K-gmac", "signed AES-GMAC", "Signed")):
    if prof not in profiles:
        continue
    print(f"\n{what} 512 KiB read as a share of the same server's plain one:")
    if mode in ceiling:
        print(f"  machine ceiling (ceiling example): {ceiling[mode][1]:.2f}")
    for s in servers:
        f, plain = figs(load(prof, s)), figs(load("seq-read-512K", s))
        if f and plain and plain[1]:
            print(f"  {s}: {f[1]:.1f} MB/s = {f[1] / plain[1]:.2f} of {plain[1]:.1f}")
        else:
            print(f"  {s}: no figure (the server refused or the run failed)")
first = next((load(p, s) for p in profiles for s in servers if load(p, s)), None)
if first:
    sysinfo = first["system"]
    print(f"\n({sysinfo['cpus']} CPUs at {sysinfo.get('cpu_mhz')} MHz, kernel {sysinfo['kernel']}, "
          f"loopback, 1 thread, -d{first['profile']['duration_s']} -W{first['profile']['warmup_s']}; "
          f"cyc/B = machine busy cycles per byte, srv cyc/B = the server process's)")
PY
# The congestion control shapes loopback throughput (bbr paces even loopback streams:
# iperf3 -l 1M ran ~1.6x faster with cubic on the machine of README's figures).
echo "(TCP congestion control: $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown))"
echo "(JSON reports in $RESULTS; smbd $(smbd --version 2>/dev/null | awk '{print $2}'), $([ -x "$ROCKETSMBD" ] && "$ROCKETSMBD" --version 2>/dev/null | head -1 || echo "rocketsmbd absent"))"
