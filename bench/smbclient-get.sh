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
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"
USER_NAME=$BENCH_USER
PASS=$BENCH_PASS
command -v smbd >/dev/null && command -v smbclient >/dev/null || {
  echo "bench: needs Debian samba and smbclient (apt-get install -y samba smbclient)" >&2; exit 2; }

ROOT=$(mktemp -d /tmp/smbx-bench.XXXXXX)
trap bench_cleanup EXIT
bench_setup "$ROOT" "$SIZE_MIB" smbx samba
sync
bench_start_smbx
bench_start_samba
[ -n "${PORT_samba:-}" ] || { echo "bench: smbd did not start" >&2; exit 1; }
SMBX_PORT=$PORT_smbx SMBX_PID=$PID_smbx SAMBA_PORT=$PORT_samba SAMBA_PID=$PID_samba

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
    -c 'get data.bin /dev/null' >/dev/null 2>"$ROOT/err" || { cat "$ROOT/err" >&2; echo "0 0"; return; }
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
