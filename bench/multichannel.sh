#!/usr/bin/env bash
# Multichannel aggregation: one client, three shaped links, smbx and Samba in the same run.
#
#   bench/multichannel.sh                 the benchmark (below)
#   bench/multichannel.sh up NS TAG NET   only the topology (used by tests/interop/test_multichannel.py)
#   bench/multichannel.sh down NS TAG     remove it
#   bench/multichannel.sh failover        one link lost mid-transfer (bench/multichannel-failover.sh)
#
# Topology (made by this script, removed on exit): a network namespace NS joined to this one by
# three veth pairs TAGh1-3 (here, NET.N.1/24) <-> TAGn1-3 (in NS, NET.N.2/24); each direction of
# each pair shaped by tc tbf to RATE_MBIT (default 1000 Mbit/s). Private addresses only
# (NET defaults to 10.231); nothing else on the machine is touched.
#
# In NS, smbx and Samba's smbd (`server multi channel support = yes`) each serve their own copy
# of a FILE_MIB random file and advertise the three NS addresses with
# `interfaces = "NET.N.2;speed=RATE,capability=RSS"`. From here, `smbx bench` 512 KiB sequential
# reads and writes (-o$QD, -d$DURATION after -W$WARMUP) with --multichannel 1 and 3 against each.
# Printed: MB/s (10^6 bytes) per run, each channel's share of it (from the report's per-channel
# bytes, warm-up included), and the ratio 3 channels / 1 channel (issue 12's goal: >= 2.6x).
# With DIRECT=1 (the default) a third server, smbxdirect (smbx), also serves link 2 by SMB Direct
# (soft-iWARP on 5445; `capability=RDMA` on that entry puts SMB Direct there alone): the
# session logs on over TCP on link 1 and its channel to link 2 is SMB Direct, the one to
# link 3 Direct TCP; its 3-channel runs are compared with smbx's 1-channel run.
#
# Environment: RATE_MBIT (1000), DURATION (10), WARMUP (2), QD (16), FILE_MIB (512),
#   SERVERS_WANTED ("smbx samba"), DIRECT (1), RESULTS (target/bench-multichannel: JSON reports),
#   SMBX_BIN, KEEP=1 (keep the shares and logs).
# Needs root (namespaces, tc, a unix account for smbd), iproute2, Debian samba, python3.
set -euo pipefail
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"

RATE_MBIT=${RATE_MBIT:-1000}
NET=${NET:-10.231}
LINKS=3

# mc_up NS TAG NET: the namespace and the three shaped veth pairs.
mc_up() {
  local ns=$1 tag=$2 net=$3 n
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  for n in $(seq 1 $LINKS); do
    ip link add "${tag}h$n" type veth peer name "${tag}n$n" netns "$ns"
    ip addr add "$net.$n.1/24" dev "${tag}h$n"
    ip -n "$ns" addr add "$net.$n.2/24" dev "${tag}n$n"
    ip link set "${tag}h$n" up
    ip -n "$ns" link set "${tag}n$n" up
    if [ "${RATE_MBIT:-0}" != 0 ]; then
      # Both directions: reads leave the namespace, writes enter it. The burst holds a few
      # 64 KiB GSO segments, the queue 20 ms at the rate.
      tc qdisc replace dev "${tag}h$n" root tbf rate "${RATE_MBIT}mbit" burst 256kb latency 20ms
      ip netns exec "$ns" tc qdisc replace dev "${tag}n$n" root tbf rate "${RATE_MBIT}mbit" burst 256kb latency 20ms
    fi
  done
}

# mc_down NS TAG: removes what mc_up made (deleting one end of a veth pair deletes both).
mc_down() {
  local ns=$1 tag=$2 n
  for n in $(seq 1 $LINKS); do ip link del "${tag}h$n" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
}

case ${1:-} in
up) shift; mc_up "$@"; exit 0 ;;
down) shift; mc_down "$@"; exit 0 ;;
failover) # its own results; the aggregation's data file is not needed
  MC_MODE=failover RESULTS=${RESULTS:-$BENCH_REPO/target/bench-multichannel-failover} FILE_MIB=${FILE_MIB:-1} ;;
"") ;;
*) echo "usage: $0 [up NS TAG NET | down NS TAG | failover]" >&2; exit 2 ;;
esac

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
QD=${QD:-16}
FILE_MIB=${FILE_MIB:-512}
DIRECT=${DIRECT:-1}
SERVERS_WANTED=${SERVERS_WANTED:-smbx samba}
RESULTS=${RESULTS:-$BENCH_REPO/target/bench-multichannel}
NS=smbxmc$$
TAG=mc$$
TAG=${TAG:0:8}
SPEED=$((RATE_MBIT * 1000000))

[ "$(id -u)" = 0 ] || { echo "multichannel: needs root (network namespace, tc)" >&2; exit 2; }

mc_cleanup() {
  bench_cleanup
  mc_down "$NS" "$TAG"
}
trap mc_cleanup EXIT

mc_up "$NS" "$TAG" "$NET"
bench_log "namespace $NS: links $NET.{1,2,3}.2 at ${RATE_MBIT} Mbit/s each way"
root=$(mktemp -d /tmp/smbx-multichannel.XXXXXX)
bench_setup "$root" "$FILE_MIB" smbx samba smbxdirect
rm -rf "$RESULTS"
mkdir -p "$RESULTS"

# The interfaces line: each link's NS address with its speed and RSS (and RDMA on link
# $1 if given).
mc_interfaces() {
  local n line="" caps
  for n in $(seq 1 $LINKS); do
    caps="capability=RSS"
    [ "$n" = "${1:-}" ] && caps="$caps,capability=RDMA"
    line="$line \"$NET.$n.2;speed=$SPEED,$caps\""
  done
  echo "${line# }"
}

# mc_start_smbx NAME [LINE...]: smbx in NS on $BENCH_ROOT/NAME/share; LINEs go to [global].
mc_start_smbx() {
  local name=$1 S=$BENCH_ROOT/$1 port=4451 pid extra=""
  shift
  [ "$name" = smbx ] || port=4453
  if [ $# -gt 0 ]; then extra=$(printf '  %s\n' "$@"); fi
  cat >"$S/smb.conf" <<CONF
[global]
  smb ports = $port
  bind interfaces only = yes
  server multi channel support = yes
  passdb backend = smbpasswd:$S/smbpasswd
$extra
[share]
  path = $S/share
  read only = no
CONF
  printf '%s\n' "$BENCH_PASS" | "$SMBX" user add --config "$S/smb.conf" --stdin "$BENCH_USER" >/dev/null
  ip netns exec "$NS" setsid "$SMBX" serve --config "$S/smb.conf" >"$S/log" 2>&1 </dev/null &
  pid=$!
  BENCH_PIDS+=("$pid")
  if bench_wait_port "$port" "$pid" "$NET.1.2"; then  # link 1
    printf -v "URL_$name" '%s' "smb://$BENCH_USER@$NET.1.2:$port/share/data.bin"
    SERVERS+=("$name")
  else
    bench_log "$name did not start (see $S/log)"
    cat "$S/log" >&2
  fi
}

mc_start_samba() {
  command -v smbd >/dev/null || { bench_log "no smbd (apt-get install -y samba): Samba skipped"; return 0; }
  local S=$BENCH_ROOT/samba port=4452 pid extra="server multi channel support = yes"
  if [ -n "${SOCKET_OPTIONS:-}" ]; then
    # smbd grants durable handles only without kernel share modes and POSIX locking;
    # it has no TCP_USER_TIMEOUT (logs it unknown): the namespace's retransmission
    # limit bounds how long it keeps a connection with data unacknowledged.
    extra="$extra
  socket options = $SOCKET_OPTIONS
  durable handles = yes
  kernel share modes = no
  posix locking = no
  smb2 leases = yes"
    ip netns exec "$NS" sysctl -qw net.ipv4.tcp_retries2=5
  fi
  bench_samba_setup "$S" "$port" "$(mc_interfaces)" "$extra"
  ip netns exec "$NS" setsid smbd --foreground --no-process-group -s "$S/smb.conf" >"$S/log/stdout" 2>&1 </dev/null &
  pid=$!
  BENCH_PIDS+=("$pid")
  if bench_wait_port "$port" "$pid" "$NET.1.2"; then  # link 1
    printf -v "URL_samba" '%s' "smb://$BENCH_USER@$NET.1.2:$port/share/data.bin"
    SERVERS+=(samba)
  else
    bench_log "smbd did not start (see $S/log): Samba skipped"
  fi
}

# Failover: the servers give up a client whose links all went down within seconds (TCP
# keepalive and user timeout), so that outage ends in a durable reconnect.
if [ "${MC_MODE:-}" = failover ]; then
  SOCKET_OPTIONS=${SOCKET_OPTIONS-SO_KEEPALIVE TCP_KEEPIDLE=2 TCP_KEEPINTVL=1 TCP_KEEPCNT=2 TCP_USER_TIMEOUT=4000}
fi
for s in $SERVERS_WANTED; do
  case $s in
  smbx) mc_start_smbx smbx "interfaces = $(mc_interfaces)" ${SOCKET_OPTIONS:+"socket options = $SOCKET_OPTIONS"} ;;
  samba) mc_start_samba ;;
  esac
done
if [ "$DIRECT" = 1 ] && [ "${MC_MODE:-}" != failover ] && [[ " $SERVERS_WANTED " == *" smbx "* ]]; then
  mc_start_smbx smbxdirect "interfaces = $(mc_interfaces 2)" "smb direct = yes" "smb direct port = 5445"
fi
[ "${#SERVERS[@]}" -gt 0 ] || { echo "multichannel: no server started" >&2; exit 1; }
if [ "${MC_MODE:-}" = failover ]; then
  # shellcheck source=bench/multichannel-failover.sh
  . "$(dirname "$0")/multichannel-failover.sh"
  exit 0
fi

# mc_run OUT NAME CHANNELS FLAGS...: one smbx bench run, JSON into OUT.
mc_run() {
  local out=$1 name=$2 ch=$3 urlv="URL_$2"
  shift 3
  if ! "$SMBX" bench "$@" -b512K -s -o"$QD" -t1 -d"$DURATION" -W"$WARMUP" --multichannel "$ch" \
      -Rjson "${!urlv}" >"$out" 2>"$out.err"; then
    bench_log "smbx bench $* --multichannel $ch against $name failed: $(tail -2 "$out.err" | tr '\n' ' ')"
    rm -f "$out"
  fi
}

for op in read write; do
  w=0
  [ "$op" = write ] && w=100
  for s in "${SERVERS[@]}"; do
    for ch in 1 3; do
      [ "$s" = smbxdirect ] && [ "$ch" = 1 ] && continue
      bench_log "512K sequential $op against $s, $ch channel(s)"
      mc_run "$RESULTS/$op.$s.$ch.json" "$s" "$ch" -w"$w"
    done
  done
done

python3 - "$RESULTS" "$RATE_MBIT" "${SERVERS[@]}" <<'PY'
import json, os, sys
res, rate, servers = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
link = rate * 1e6 / 8 / 1e6  # one link's rate in MB/s
def load(op, s, ch):
    p = os.path.join(res, f"{op}.{s}.{ch}.json")
    return json.load(open(p)) if os.path.exists(p) else None
print(f"\nmultichannel: 512 KiB sequential, three links of {rate:.0f} Mbit/s ({link:.0f} MB/s each)")
for op in ("read", "write"):
    print(f"\n{op}:")
    print(f"  {'server':<10} {'channels':>8} {'MB/s':>8} {'x link':>7}  per channel (MB/s, share of bytes)")
    for s in servers:
        base = load(op, "smbx" if s == "smbxdirect" else s, 1)
        for ch in (1, 3):
            if s == "smbxdirect" and ch == 1:
                continue
            r = load(op, s, ch)
            if r is None:
                print(f"  {s:<10} {ch:>8} {'failed':>8}")
                continue
            mbs = r["bytes_per_sec"] / 1e6
            t = r["targets"][0]
            chans = t.get("channels", [])
            total = sum(c["bytes"] for c in chans) or 1
            per = "  ".join(f"{c.get('address') or '?'} {mbs * c['bytes'] / total:.0f} ({100 * c['bytes'] / total:.0f}%)" for c in chans)
            line = f"  {s:<10} {ch:>8} {mbs:>8.1f} {mbs / link:>7.2f}  {per}"
            if ch == 3 and base is not None:
                b = base["bytes_per_sec"] / 1e6
                line += f"   3ch/1ch = {mbs / b:.2f}x"
            print(line)
    d = load(op, "smbxdirect", 3)
    if d is not None:
        kinds = ["SMB Direct" if (c.get("address") or "").endswith(":5445") else "TCP" for c in d["targets"][0].get("channels", [])]
        print(f"  smbxdirect channels: {', '.join(kinds)}")
    a, b = load(op, "smbx", 3), load(op, "samba", 3)
    if a is not None and b is not None:
        print(f"  smbx/Samba with 3 channels: {a['bytes_per_sec'] / b['bytes_per_sec']:.2f}")
PY
