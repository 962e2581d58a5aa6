#!/usr/bin/env bash
# First throughput figure for the server: `smbclient get` of one large file from smbx and from
# Samba's smbd, both on loopback in the same run, alternating, with the ratio smbx/Samba.
#
#   bench/smbclient-get.sh [SIZE_MIB=1024] [ROUNDS=3] [PROTOCOL=SMB3_11] [extra smbclient args…]
#
# Prints MB/s per round for each server, the median, and the CPU seconds each server process
# used (utime+stime from /proc) per GiB moved. Needs: samba, smbclient, a release build of smbx.
set -euo pipefail
SIZE_MIB=${1:-1024}
ROUNDS=${2:-3}
PROTO=${3:-SMB3_11}
shift $(( $# > 3 ? 3 : $# )) || true
EXTRA=("$@")
REPO=$(cd "$(dirname "$0")/.." && pwd)
SMBX=${SMBX_BIN:-$REPO/target/release/smbx}
USER_NAME=alice
PASS='Bench-Passw0rd!'
[ -x "$SMBX" ] || (cd "$REPO" && cargo build --release -q -p smbx-cli)
command -v smbd >/dev/null && command -v smbclient >/dev/null || {
  echo "bench: needs Debian samba and smbclient (apt-get install -y samba smbclient)" >&2; exit 2; }

ROOT=$(mktemp -d /tmp/smbx-bench.XXXXXX)
chmod 755 "$ROOT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$ROOT"; }
trap cleanup EXIT
id "$USER_NAME" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$USER_NAME"
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

mkdir -p "$ROOT"/{smbx,samba}/share "$ROOT"/samba/{private,lock,state,cache,pid,ncalrpc,log}
chown "$USER_NAME" "$ROOT"/smbx/share "$ROOT"/samba/share
echo "bench: writing a ${SIZE_MIB} MiB random file into both shares" >&2
head -c "$((SIZE_MIB * 1048576))" /dev/urandom > "$ROOT/smbx/share/big.bin"
cp "$ROOT/smbx/share/big.bin" "$ROOT/samba/share/big.bin"
sync

SMBX_PORT=$(free_port)
cat > "$ROOT/smbx/smb.conf" <<CONF
[global]
  smb ports = $SMBX_PORT
  interfaces = 127.0.0.1
  bind interfaces only = yes
  passdb backend = smbpasswd:$ROOT/smbx/smbpasswd
[share]
  path = $ROOT/smbx/share
  read only = no
CONF
printf '%s\n' "$PASS" | "$SMBX" user add --config "$ROOT/smbx/smb.conf" --stdin "$USER_NAME" >/dev/null
"$SMBX" serve --config "$ROOT/smbx/smb.conf" >"$ROOT/smbx/log" 2>&1 &
SMBX_PID=$!; PIDS+=("$SMBX_PID")

SAMBA_PORT=$(free_port)
S=$ROOT/samba
cat > "$S/smb.conf" <<CONF
[global]
  server role = standalone server
  smb ports = $SAMBA_PORT
  interfaces = 127.0.0.1
  bind interfaces only = yes
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
printf '%s\n%s\n' "$PASS" "$PASS" | smbpasswd -c "$S/smb.conf" -a -s "$USER_NAME" >/dev/null 2>&1
smbd --foreground --no-process-group -s "$S/smb.conf" >"$S/log/stdout" 2>&1 &
SAMBA_PID=$!; PIDS+=("$SAMBA_PID")
wait_port "$SMBX_PORT"; wait_port "$SAMBA_PORT"

# CPU seconds (user+system) of a process and all its children that were reaped or still live.
cpu_of() { # pid -> seconds of the process tree rooted at pid (smbd forks one child per client)
  local total=0 p
  for p in $(pgrep -P "$1") "$1"; do
    [ -r "/proc/$p/stat" ] || continue
    total=$(awk -v t="$total" -v hz="$(getconf CLK_TCK)" '{ $0=substr($0, index($0,")")+2); split($0,f," "); print t + (f[12]+f[13]+f[14]+f[15])/hz }' "/proc/$p/stat")
  done
  echo "$total"
}

run_get() { # port pid -> "MB/s cpu_seconds"
  local port=$1 pid=$2 t0 t1 c0 c1
  c0=$(cpu_of "$pid"); t0=$(date +%s.%N)
  smbclient "//127.0.0.1/share" -p "$port" -U "$USER_NAME%$PASS" -m "$PROTO" "${EXTRA[@]}" \
    -c 'get big.bin /dev/null' >/dev/null 2>"$ROOT/err" || { cat "$ROOT/err" >&2; echo "0 0"; return; }
  t1=$(date +%s.%N); sleep 0.5; c1=$(cpu_of "$pid")
  awk -v a="$t0" -v b="$t1" -v s="$SIZE_MIB" -v c0="$c0" -v c1="$c1" 'BEGIN { printf "%.1f %.3f\n", s*1.048576/(b-a), c1-c0 }'
}

declare -a X Y XC YC
for r in $(seq 1 "$ROUNDS"); do
  read -r a ac < <(run_get "$SMBX_PORT" "$SMBX_PID"); X+=("$a"); XC+=("$ac")
  read -r b bc < <(run_get "$SAMBA_PORT" "$SAMBA_PID"); Y+=("$b"); YC+=("$bc")
  echo "round $r: smbx ${a} MB/s (server cpu ${ac}s)   samba ${b} MB/s (server cpu ${bc}s)" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END { print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2 }'; }
MX=$(median "${X[@]}"); MY=$(median "${Y[@]}")
CX=$(median "${XC[@]}"); CY=$(median "${YC[@]}")
echo
printf '%-8s %12s %22s\n' server "MB/s (med)" "server CPU s per GiB"
printf '%-8s %12s %22s\n' smbx "$MX" "$(awk -v c="$CX" -v s="$SIZE_MIB" 'BEGIN{printf "%.2f", c*1024/s}')"
printf '%-8s %12s %22s\n' samba "$MY" "$(awk -v c="$CY" -v s="$SIZE_MIB" 'BEGIN{printf "%.2f", c*1024/s}')"
awk -v x="$MX" -v y="$MY" 'BEGIN { if (y > 0) printf "ratio smbx/samba throughput: %.2f\n", x/y }'
echo "($SIZE_MIB MiB file, $ROUNDS rounds, $PROTO ${EXTRA[*]}, smbclient $(smbclient --version | awk "{print \$2}"), loopback, $(nproc) cores)"
