# Shared helpers for bench/compare.sh and bench/client-checks.sh: start Samba's smbd, smbx and
# rocketsmbd on loopback, each on its own copy of one share, as user alice. Sourced, not run.
#
# After bench_setup ROOT FILE_MIB and bench_start_{samba,smbx,rocketsmbd}:
#   PORT_<name>, PID_<name>   listening port and server pid (smbd: the parent; smbx bench
#                             --server-pid follows its per-client children)
#   URL_<name>                smb://alice@127.0.0.1:PORT/share/data.bin
#   SERVERS                   names of the servers that started, in order
# Needs root (a unix account for smbd, chown of the shares).

BENCH_USER=alice
BENCH_PASS='Bench-Passw0rd!'
export SMBX_PASSWORD=$BENCH_PASS
BENCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SMBX=${SMBX_BIN:-$BENCH_REPO/target/release/smbx}
# The `smbx bench` that drives every server (default: the same binary as the smbx server);
# set it to compare two smbx servers, or two clients, with everything else unchanged.
SMBX_CLIENT=${SMBX_CLIENT_BIN:-$SMBX}
ROCKETSMBD=${ROCKETSMBD_BIN:-$BENCH_REPO/target/rocketsmbd/bin/rocketsmbd}
SERVERS=()
BENCH_PIDS=()

bench_log() { echo "bench: $*" >&2; }

bench_cleanup() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BENCH_PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  [ -n "${BENCH_ROOT:-}" ] && [ -z "${KEEP:-}" ] && rm -rf "$BENCH_ROOT"
  return 0
}

bench_need() { # command package -> 0 once the command exists (apt-get install when missing)
  command -v "$1" >/dev/null 2>&1 && return 0
  bench_log "installing $2 (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null 2>&1; } || true
  command -v "$1" >/dev/null 2>&1
}

bench_free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

bench_wait_port() { # port pid [host] -> 0 once the port accepts, 1 if the process died or 30 s passed
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/${3:-127.0.0.1}/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# bench_setup ROOT FILE_MIB [SERVER...]: the account, the share directories and one random
# data.bin per share, for the servers named (default: samba smbx rocketsmbd).
bench_setup() {
  BENCH_ROOT=$1
  local mib=$2 s
  shift 2
  local servers=("$@")
  [ ${#servers[@]} -gt 0 ] || servers=(samba smbx rocketsmbd)
  chmod 755 "$BENCH_ROOT"
  id "$BENCH_USER" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$BENCH_USER"
  [ -x "$SMBX" ] || (cd "$BENCH_REPO" && cargo build --release -q -p smbx-cli)
  mkdir -p "$BENCH_ROOT/data"
  bench_log "writing a ${mib} MiB random file and copying it into each share"
  head -c "$((mib * 1048576))" /dev/urandom > "$BENCH_ROOT/data/data.bin"
  for s in "${servers[@]}"; do
    mkdir -p "$BENCH_ROOT/$s/share"
    cp "$BENCH_ROOT/data/data.bin" "$BENCH_ROOT/$s/share/data.bin"
    chown -R "$BENCH_USER" "$BENCH_ROOT/$s/share"
  done
  # The copies' writeback would otherwise run during the first measurements (the first
  # profile, or the first row of a sweep, ran slower while it did).
  bench_log "flushing the copies to disk (sync)"
  sync
}

# bench_begin TAG FILE_MIB: a fresh share tree (removed on exit), the servers named in
# $SERVERS_WANTED started on it (exit 1 if none did), and an empty $RESULTS directory.
bench_begin() {
  local root s
  root=$(mktemp -d "/tmp/smbx-$1.XXXXXX")
  trap bench_cleanup EXIT
  bench_setup "$root" "$2"
  for s in $SERVERS_WANTED; do "bench_start_$s"; done
  [ "${#SERVERS[@]}" -gt 0 ] || { echo "$1: no server started" >&2; exit 1; }
  rm -rf "$RESULTS"; mkdir -p "$RESULTS"
}

# bench_check_cpus SCRIPT: exits 2 (naming SCRIPT) when CLIENT_CPUS or SERVER_CPUS is set but is
# not a CPU list (1, 0,1, 2-5, 3,0-1).
bench_check_cpus() {
  local v
  for v in CLIENT_CPUS SERVER_CPUS; do
    if [ -n "${!v:-}" ] && ! [[ ${!v} =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]]; then
      echo "$1: $v=${!v} is not a CPU list (e.g. 1, 0,1, 2-5)" >&2
      exit 2
    fi
  done
}

# bench_say_cpus: one line each on how the client (CLIENT_CPUS) and the servers (SERVER_CPUS)
# are pinned, for the top of a report.
bench_say_cpus() {
  if [ -n "${CLIENT_CPUS:-}" ]; then
    echo "client: smbx bench --affinity=$CLIENT_CPUS (CLIENT_CPUS) against every server"
  else
    echo "client: smbx bench not pinned (CLIENT_CPUS unset)"
  fi
  if [ -n "${SERVER_CPUS:-}" ]; then
    echo "servers: pinned to CPUs $SERVER_CPUS (SERVER_CPUS, taskset -a)"
  fi
}

# bench_as_client CMD...: runs CMD in the foreground on CLIENT_CPUS (taskset -c; as it is when
# unset), placed as the bench is: the client sides of the machine's own figures (iperf3, sockperf).
bench_as_client() {
  if [ -n "${CLIENT_CPUS:-}" ]; then taskset -c "$CLIENT_CPUS" "$@"; else "$@"; fi
}

# bench_pin_server NAME PID: pins a started server (every thread it has; its later threads and
# children inherit it) to SERVER_CPUS when that is set; says so when it cannot.
bench_pin_server() {
  if [ -n "${SERVER_CPUS:-}" ] && ! taskset -a -p -c "$SERVER_CPUS" "$2" >/dev/null; then
    bench_log "$1: cannot pin to CPUs $SERVER_CPUS (SERVER_CPUS): not pinned"
  fi
}

# SERVER_CPUS=<cpu list> pins each server as it starts: it is started on those CPUs
# (`setsid ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} CMD`), so it sizes itself (worker
# threads) to them from its first instruction, as under systemd's CPUAffinity= or a cpuset,
# and bench_pin_server then pins every thread it has (taskset -a; its later threads and
# children, smbd's per-client processes too, inherit it; unset: not pinned). Pinned only
# after start, a server sized for every CPU runs more worker threads than it has CPUs.
bench_started() { # name port pid
  bench_pin_server "$1" "$3"
  printf -v "PORT_$1" '%s' "$2"
  printf -v "PID_$1" '%s' "$3"
  printf -v "URL_$1" '%s' "smb://$BENCH_USER@127.0.0.1:$2/share/data.bin"
  SERVERS+=("$1")
}

# bench_samba_setup DIR PORT INTERFACES [GLOBAL_LINE]: a standalone smbd's
# directories, smb.conf (one share, DIR/share, bound to INTERFACES, GLOBAL_LINE added
# to [global]) and the bench user's password, all under DIR.
bench_samba_setup() {
  local S=$1 port=$2 ifs=$3 extra=${4:-}
  mkdir -p "$S"/{private,lock,state,cache,pid,ncalrpc,log}
  cat > "$S/smb.conf" <<CONF
[global]
  server role = standalone server
  smb ports = $port
  interfaces = $ifs
  bind interfaces only = yes
  $extra
  disable netbios = yes
  server min protocol = SMB2_02
  passdb backend = smbpasswd:$S/smbpasswd
  private dir = $S/private
  lock directory = $S/lock
  state directory = $S/state
  cache directory = $S/cache
  pid directory = $S/pid
  ncalrpc dir = $S/ncalrpc
  log file = $S/log/log.%m
  load printers = no
  printcap name = /dev/null
  disable spoolss = yes
[share]
  path = $S/share
  read only = no
CONF
  printf '%s\n%s\n' "$BENCH_PASS" "$BENCH_PASS" | smbpasswd -c "$S/smb.conf" -a -s "$BENCH_USER" >/dev/null 2>&1
}

bench_start_samba() {
  command -v smbd >/dev/null || { bench_log "no smbd (apt-get install -y samba): Samba skipped"; return 0; }
  local S=$BENCH_ROOT/samba port pid
  port=$(bench_free_port)
  bench_samba_setup "$S" "$port" 127.0.0.1
  # Own session: on SIGTERM, smbd signals its whole process group.
  setsid ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} smbd --foreground --no-process-group -s "$S/smb.conf" >"$S/log/stdout" 2>&1 </dev/null &
  pid=$!; BENCH_PIDS+=("$pid")
  if bench_wait_port "$port" "$pid"; then
    bench_started samba "$port" "$pid"
  else
    bench_log "smbd did not start (see $S/log): Samba skipped"
  fi
}

# bench_smbx_conf BIN PORT [LINE...]: $BENCH_ROOT/smbx/smb.conf serving $BENCH_ROOT/smbx/share
# on 127.0.0.1:PORT (each LINE added to [global]) and the bench user in its password database,
# added with BIN.
bench_smbx_conf() {
  local bin=$1 port=$2 S=$BENCH_ROOT/smbx extra=""
  shift 2
  if [ $# -gt 0 ]; then extra=$(printf '  %s\n' "$@"); fi
  cat > "$S/smb.conf" <<CONF
[global]
  smb ports = $port
  interfaces = 127.0.0.1
  bind interfaces only = yes
  passdb backend = smbpasswd:$S/smbpasswd
$extra
[share]
  path = $S/share
  read only = no
CONF
  printf '%s\n' "$BENCH_PASS" | "$bin" user add --config "$S/smb.conf" --stdin "$BENCH_USER" >/dev/null
}

# bench_start_smbx [LINE...]: smbx on $BENCH_ROOT/smbx/share; each LINE is added to [global].
# SMBX_METRICS=1 adds `metrics listen` on a free loopback port: METRICS_URL_smbx is its
# http://127.0.0.1:PORT/metrics (bench_scrape_smbx saves a scrape). SMBX_SOCKET_OPTIONS adds
# `socket options = $SMBX_SOCKET_OPTIONS` (e.g. TCP_CONGESTION=reno: no bbr pacing on loopback).
bench_start_smbx() {
  local S=$BENCH_ROOT/smbx port pid mport
  [ -z "${SMBX_SOCKET_OPTIONS:-}" ] || set -- "$@" "socket options = $SMBX_SOCKET_OPTIONS"
  if [ "${SMBX_METRICS:-0}" = 1 ]; then
    mport=$(bench_free_port)
    set -- "$@" "metrics listen = 127.0.0.1:$mport"
    METRICS_URL_smbx=http://127.0.0.1:$mport/metrics
    bench_log "smbx serves Prometheus metrics at $METRICS_URL_smbx (SMBX_METRICS=1)"
  fi
  port=$(bench_free_port)
  bench_smbx_conf "$SMBX" "$port" "$@"
  setsid ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$SMBX" serve --config "$S/smb.conf" >"$S/log" 2>&1 </dev/null &
  pid=$!; BENCH_PIDS+=("$pid")
  if bench_wait_port "$port" "$pid"; then
    bench_started smbx "$port" "$pid"
  else
    bench_log "smbx did not start (see $S/log)"; cat "$S/log" >&2; return 1
  fi
}

# bench_scrape_smbx FILE: with SMBX_METRICS=1, smbx's /metrics into FILE (a note if it fails).
bench_scrape_smbx() {
  [ -n "${METRICS_URL_smbx:-}" ] || return 0
  if python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
      "$METRICS_URL_smbx" >"$1" 2>/dev/null; then
    bench_log "smbx metrics scraped into $1"
  else
    bench_log "could not scrape $METRICS_URL_smbx"; rm -f "$1"
  fi
}

# rocketsmbd: `cargo install rocketsmbd` into target/rocketsmbd once; skipped with a message if
# it cannot be built or does not start.
bench_start_rocketsmbd() {
  local S=$BENCH_ROOT/rocketsmbd port pid
  if [ ! -x "$ROCKETSMBD" ] && [ -z "${ROCKETSMBD_BIN:-}" ]; then
    bench_log "building rocketsmbd (cargo install rocketsmbd --root target/rocketsmbd)"
    cargo install rocketsmbd --version 1.4.0 --root "$BENCH_REPO/target/rocketsmbd" \
      >"$BENCH_ROOT/rocketsmbd-install.log" 2>&1 ||
      { bench_log "rocketsmbd could not be built (see cargo install output): skipped"; tail -5 "$BENCH_ROOT/rocketsmbd-install.log" >&2; return 0; }
  fi
  [ -x "$ROCKETSMBD" ] || { bench_log "no rocketsmbd binary at $ROCKETSMBD: skipped"; return 0; }
  port=$(bench_free_port)
  cat > "$S/rocketsmbd.toml" <<CONF
listen = "127.0.0.1:$port"
workers = 0
server_name = "ROCKETSMBD"
log_level = 0

[[share]]
name = "share"
path = "$S/share"
read_only = false

[[user]]
name = "$BENCH_USER"
password = "$BENCH_PASS"
CONF
  setsid ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$ROCKETSMBD" --config "$S/rocketsmbd.toml" >"$S/log" 2>&1 </dev/null &
  pid=$!; BENCH_PIDS+=("$pid")
  if bench_wait_port "$port" "$pid"; then
    bench_started rocketsmbd "$port" "$pid"
  else
    bench_log "rocketsmbd did not start: skipped ($(tail -3 "$S/log" | tr '\n' ' '))"
  fi
}

# bench_settle: what earlier runs wrote goes to disk now (sync), so no measured run pays for
# another's writeback (dirty pages are written back ~30 s after they were dirtied, which can
# land in the middle of the next server's run); cheap when nothing is dirty.
bench_settle() {
  sync
}

# bench_json OUT SERVER FLAGS...: smbx bench with --server-pid against SERVER's data.bin, JSON
# report into OUT; prints nothing; returns non-zero (and logs) when the run fails.
# Every run starts settled (bench_settle).
# CLIENT_CPUS=<cpu list> (e.g. 1, 0,1, 2-5) adds --affinity=<list> to every server's run alike:
# the bench's OS threads pinned round-robin over those CPUs (unset: not pinned).
bench_json() {
  local out=$1 name=$2 pidv="PID_$2" urlv="URL_$2"
  shift 2
  bench_settle
  if ! "$SMBX_CLIENT" bench "$@" ${CLIENT_CPUS:+"--affinity=$CLIENT_CPUS"} -Rjson --server-pid "${!pidv}" "${!urlv}" \
    >"$out" 2>"$out.err"; then
    bench_log "smbx bench $* against $name failed: $(tail -2 "$out.err" | tr '\n' ' ')"
    rm -f "$out"
    return 1
  fi
}

# bench_in_netns SCRIPT ARGS...: re-executes SCRIPT in a network namespace of its own (loopback
# only; root, unshare(1) and ip(8) needed) when TCP_CC=<name> is set or the caller asks with
# BENCH_NETNS=1. With TCP_CC (a TCP congestion control the kernel has:
# /proc/sys/net/ipv4/tcp_available_congestion_control) the namespace's
# net.ipv4.tcp_congestion_control is TCP_CC, so that every connection of the run (each server's
# and the client's, over TCP and soft-iWARP alike) uses it while the machine's own setting is
# left as it is; without root, unshare or ip that is an error. BENCH_NETNS=1 alone enters a
# namespace when it can (its TCP counters count only the run's connections) and otherwise goes
# on in the caller's. Call it first thing after sourcing this file: `bench_in_netns "$0" "$@"`.
# Why TCP_CC: this VM's default is bbr, which paces even loopback sends (README, Benchmarks);
# with TCP_CC=cubic or TCP_CC=reno a run shows the servers without that pacing, all alike.
bench_in_netns() {
  local script=$1 can=1
  shift
  [ -z "${BENCH_IN_NETNS:-}" ] || return 0
  [ -n "${TCP_CC:-}" ] || [ "${BENCH_NETNS:-0}" = 1 ] || return 0
  if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
    can=0
  fi
  if [ -z "${TCP_CC:-}" ]; then
    [ "$can" = 1 ] || return 0
  elif [ "$can" = 0 ]; then
    bench_log "TCP_CC=$TCP_CC needs root, unshare(1) and ip(8) (a network namespace of its own)"
    exit 1
  elif ! grep -qw -- "$TCP_CC" /proc/sys/net/ipv4/tcp_available_congestion_control; then
    bench_log "TCP_CC=$TCP_CC: not one of $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"
    exit 1
  fi
  exec unshare --net env BENCH_IN_NETNS=1 bash -c \
    'ip link set lo up && { [ -z "${TCP_CC:-}" ] || echo "$TCP_CC" >/proc/sys/net/ipv4/tcp_congestion_control; } && exec bash "$@"' \
    bench "$script" "$@"
}
