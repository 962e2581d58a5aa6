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
# is read back and its SHA-256 compared. Printed per server: whether the digests match, write and
# read MB/s, and per channel the requests, replayed requests and re-establishments; then the
# smbx/Samba ratio of the whole transfer time. JSON results in $RESULTS/failover.<server>.json.
#
# Environment (besides bench/multichannel.sh's): FAILOVER_MIB (1024), TIMEOUT (5), DOWN_LINK (2).
set -euo pipefail

if [ "${MC_MODE:-}" != failover ]; then
  exec "$(dirname "$0")/multichannel.sh" failover
fi

FAILOVER_MIB=${FAILOVER_MIB:-1024}
TIMEOUT=${TIMEOUT:-5}
DOWN_LINK=${DOWN_LINK:-2}
FAILOVER_BIN=$BENCH_REPO/target/release/examples/failover
if [ ! -x "$FAILOVER_BIN" ] || [ -n "${REBUILD:-}" ]; then
  bench_log "building the failover client (cargo build --release -p smbx-client --example failover)"
  (cd "$BENCH_REPO" && cargo build -q --release -p smbx-client --example failover)
fi

link_dev="${TAG}h$DOWN_LINK"
for s in "${SERVERS[@]}"; do
  urlv="URL_$s"
  url="${!urlv%/*}/failover.bin?multichannel=3"
  bench_log "$s: ${FAILOVER_MIB} MiB write and read over 3 channels, $link_dev down at 1/4 of the writes"
  if ! SMBX_PASSWORD=$BENCH_PASS "$FAILOVER_BIN" "$url" --mib "$FAILOVER_MIB" --timeout "$TIMEOUT" \
      --down "ip link set $link_dev down" --up "ip link set $link_dev up" \
      >"$RESULTS/failover.$s.json" 2>"$RESULTS/failover.$s.err"; then
    bench_log "$s: the failover transfer failed: $(tail -c 400 "$RESULTS/failover.$s.json")"
  fi
  ip link set "$link_dev" up 2>/dev/null || true
done

python3 - "$RESULTS" "${SERVERS[@]}" <<'PY'
import json, os, sys
res, servers = sys.argv[1], sys.argv[2:]
def load(s):
    p = os.path.join(res, f"failover.{s}.json")
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
print("\nmultichannel failover: checksummed write then read over 3 channels, one link down and back")
print(f"  {'server':<7} {'result':<8} {'GiB':>5} {'write MB/s':>10} {'read MB/s':>9} {'replayed':>8} {'reconnects':>10}")
for s in servers:
    r = load(s)
    if r is None or "bytes" not in r:
        print(f"  {s:<7} {'FAILED':<8} {(r or {}).get('error', 'no result')}")
        continue
    ch = r["channels"]
    print(f"  {s:<7} {'ok' if r['ok'] else 'MISMATCH':<8} {r['bytes'] / 2**30:>5.2f} "
          f"{r['bytes'] / r['write_s'] / 1e6:>10.1f} {r['bytes'] / r['read_s'] / 1e6:>9.1f} "
          f"{sum(c['replayed'] for c in ch):>8} {sum(c['reconnects'] for c in ch):>10}")
    for i, c in enumerate(ch):
        print(f"      channel {i} {c['address'] or '?':<22} {c['requests']:>6} requests "
              f"{c['bytes'] / 1e6:>8.0f} MB  {c['replayed']:>4} replayed  {c['reconnects']} reconnects"
              f"{'' if c['live'] else '  (down)'}")
    print(f"      sha256 {r['sha256_read']}{'' if r['ok'] else ' != ' + r['sha256_written']}")
a, b = load("smbx"), load("samba")
if a and b and "bytes" in a and "bytes" in b:
    ta, tb = a["write_s"] + a["read_s"], b["write_s"] + b["read_s"]
    print(f"  smbx/Samba transfer time with a link lost: {ta / tb:.2f}")
PY
