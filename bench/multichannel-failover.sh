#!/usr/bin/env bash
# Multichannel failover: a 1 GiB checksummed write and read over three channels while one link
# goes down and comes back, against smbx and Samba in the same run.
#
#   bench/multichannel-failover.sh        (the same as: bench/multichannel.sh failover)
#
# The topology and the servers are bench/multichannel.sh's (three veth pairs into a namespace,
# each shaped to RATE_MBIT, smbx and smbd advertising the three addresses); this file is the
# `failover` mode it runs instead of the aggregation runs. Per server, the client
# (crates/client/examples/failover.rs, --multichannel 3, request timeout TIMEOUT s) writes
# FAILOVER_MIB MiB in 1 MiB pieces, 32 at a time; once a quarter is written link 2 goes down
# (`ip link set <client end> down`), once every write has completed it comes back up, and the file
# is read back and its SHA-256 compared. Then the same with every link down for OUTAGE seconds
# (from a quarter of the writes): longer than the servers' TCP keepalive and user timeout
# (SOCKET_OPTIONS, their smb.conf `socket options` and the client's), so the servers drop
# the session (keeping its durable opens) and the client logs on again, reclaims the opens
# and replays what was in flight (`session` column: re-established). SOCKET_OPTIONS= (empty)
# leaves the sockets alone: then the servers keep the session through the outage and the
# client's channels come back to it.
# Printed per server and case: whether the digests match, write and read MB/s, and per channel
# the requests, replayed requests and re-establishments; then the smbx/Samba ratio of the whole
# transfer time. JSON results in $RESULTS/failover.<case>.<server>.json.
#
# Environment (besides bench/multichannel.sh's): FAILOVER_MIB (1024), TIMEOUT (5), DOWN_LINK (2),
#   SOCKET_OPTIONS (SO_KEEPALIVE TCP_KEEPIDLE=2 TCP_KEEPINTVL=1 TCP_KEEPCNT=2 TCP_USER_TIMEOUT=4000;
#   smbd ignores the last, so its namespace gets net.ipv4.tcp_retries2=5),
#   OUTAGE (15: longer than the request timeout and the ECHO probe after it, so that the client
#   gives every channel up; a shorter outage may be bridged by TCP alone).
set -euo pipefail

if [ "${MC_MODE:-}" != failover ]; then
  exec "$(dirname "$0")/multichannel.sh" failover
fi

FAILOVER_MIB=${FAILOVER_MIB:-1024}
TIMEOUT=${TIMEOUT:-5}
DOWN_LINK=${DOWN_LINK:-2}
OUTAGE=${OUTAGE:-15}
FAILOVER_BIN=$BENCH_REPO/target/release/examples/failover
if [ ! -x "$FAILOVER_BIN" ] || [ -n "${REBUILD:-}" ]; then
  bench_log "building the failover client (cargo build --release -p smbx-client --example failover)"
  (cd "$BENCH_REPO" && cargo build -q --release -p smbx-client --example failover)
fi

link_dev="${TAG}h$DOWN_LINK"
all_down="for n in 1 2 3; do ip link set ${TAG}h\$n down; done; (sleep $OUTAGE; for n in 1 2 3; do ip link set ${TAG}h\$n up; done) >/dev/null 2>&1 &"
# run CASE SERVER DOWN-CMD UP-CMD
run() {
  local case=$1 s=$2 urlv="URL_$2" url out
  url="${!urlv%/*}/failover.bin?multichannel=3"
  out=$RESULTS/failover.$case.$s
  if ! SMBX_PASSWORD=$BENCH_PASS "$FAILOVER_BIN" "$url" --mib "$FAILOVER_MIB" --timeout "$TIMEOUT" \
      --down "$3" --up "$4" --socket-options "${SOCKET_OPTIONS:-}" >"$out.json" 2>"$out.err"; then
    bench_log "$s: the failover transfer ($case) failed: $(tail -c 400 "$out.json")"
  fi
  for n in 1 2 3; do ip link set "${TAG}h$n" up 2>/dev/null || true; done
}
for s in "${SERVERS[@]}"; do
  bench_log "$s: ${FAILOVER_MIB} MiB write and read over 3 channels, $link_dev down at 1/4 of the writes"
  run one "$s" "ip link set $link_dev down" "ip link set $link_dev up"
  bench_log "$s: the same with every link down for ${OUTAGE} s"
  run all "$s" "$all_down" "true"
done

python3 - "$RESULTS" "$OUTAGE" "${SERVERS[@]}" <<'PY'
import json, os, sys
res, outage, servers = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(case, s):
    p = os.path.join(res, f"failover.{case}.{s}.json")
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
for case, title in (("one", "one link down and back"), ("all", f"every link down for {outage} s")):
    print(f"\nmultichannel failover: checksummed write then read over 3 channels, {title}")
    print(f"  {'server':<7} {'result':<8} {'GiB':>5} {'write MB/s':>10} {'read MB/s':>9} {'replayed':>8} {'reconnects':>10}  session")
    for s in servers:
        r = load(case, s)
        if r is None or "bytes" not in r:
            print(f"  {s:<7} {'FAILED':<8} {(r or {}).get('error', 'no result')}")
            continue
        ch = r["channels"]
        print(f"  {s:<7} {'ok' if r['ok'] else 'MISMATCH':<8} {r['bytes'] / 2**30:>5.2f} "
              f"{r['bytes'] / r['write_s'] / 1e6:>10.1f} {r['bytes'] / r['read_s'] / 1e6:>9.1f} "
              f"{sum(c['replayed'] for c in ch):>8} {sum(c['reconnects'] for c in ch):>10}  "
              f"{'re-established' if r.get('reestablished') else 'kept'}")
        for i, c in enumerate(ch):
            print(f"      channel {i} {c['address'] or '?':<22} {c['requests']:>6} requests "
                  f"{c['bytes'] / 1e6:>8.0f} MB  {c['replayed']:>4} replayed  {c['reconnects']} reconnects"
                  f"{'' if c['live'] else '  (down)'}")
        print(f"      sha256 {r['sha256_read']}{'' if r['ok'] else ' != ' + r['sha256_written']}")
    a, b = load(case, "smbx"), load(case, "samba")
    if a and b and "bytes" in a and "bytes" in b:
        ta, tb = a["write_s"] + a["read_s"], b["write_s"] + b["read_s"]
        print(f"  smbx/Samba transfer time: {ta / tb:.2f}")
PY
