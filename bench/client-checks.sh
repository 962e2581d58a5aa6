#!/usr/bin/env bash
# "The client must not be the bottleneck": the three checks of the bench issue, in one run.
#
#   bench/client-checks.sh
#
# 1. smbclient: `smbx bench -b1M -s -o4 -t1` against a file vs `smbclient get` of the same file
#    from the same server (Samba and smbx), MB/s and the ratio bench/smbclient (want >= 1).
# 2. CPU per I/O: 4 KiB random reads at -o32 against Samba (and smbx), CPU seconds of the bench
#    process and of the server (--server-pid, smbd with its children) per I/O, and the ratio
#    bench/server (want < 1).
# 3. fio: the same profiles on the local file with `smbx bench` and fio (same engine, block size,
#    depth and threads; buffered, page cache warm), IOPS, p50 and the ratio bench/fio (want
#    within 0.85..1.15). fio's buffers are aligned to 4 KiB as the bench's are (--iomem_align=4k):
#    with fio's default, barely aligned malloc buffers, the kernel's copy into them runs up to
#    3x slower for 1 MiB page-cache reads on this machine, which would compare buffer
#    placement rather than the tools. With io_uring, fio batches submissions and completions up
#    to the depth (--iodepth_batch_submit/--iodepth_batch_complete_max), as the bench does; by
#    default fio enters the kernel once per I/O and reaches about 2/3 of the IOPS at 4K -o32.
#    fio's completion latency then excludes the batch wait, so p50s are shown, not compared.
#    IOPS/core (bench/core, fio/core) divides by the CPU each tool got (bench: getrusage; fio:
#    usr+sys per job x jobs): on a machine shared with other work, raw IOPS mostly say which
#    tool was scheduled more.
#
# Environment: DURATION (10), WARMUP (2), FILE_MIB (1024), GET_ROUNDS (3), CHECKS ("smbclient
#   cpu fio"), SERVERS_WANTED ("samba smbx"), RESULTS (target/bench-client-checks), SMBX_BIN,
#   KEEP=1. Needs root, Debian samba and smbclient, fio, python3.
set -euo pipefail
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
FILE_MIB=${FILE_MIB:-1024}
GET_ROUNDS=${GET_ROUNDS:-3}
CHECKS=${CHECKS:-smbclient cpu fio}
SERVERS_WANTED=${SERVERS_WANTED:-samba smbx}
RESULTS=${RESULTS:-$BENCH_REPO/target/bench-client-checks}

ROOT=$(mktemp -d /tmp/smbx-checks.XXXXXX)
trap bench_cleanup EXIT
bench_setup "$ROOT" "$FILE_MIB"
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
want() { [[ " $CHECKS " == *" $1 "* ]]; }
if want smbclient || want cpu; then
  for s in $SERVERS_WANTED; do "bench_start_$s"; done
fi
jq_num() { jq -r "$1 // empty" "$2" 2>/dev/null; }

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END { print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2 }'; }

if want smbclient; then
  command -v smbclient >/dev/null || { bench_log "no smbclient: check 1 skipped"; CHECKS=${CHECKS/smbclient/}; }
fi
if want smbclient; then
  echo "== 1. 1 MiB sequential reads at -o4 vs smbclient get (${FILE_MIB} MiB file, same server) =="
  printf '%-12s %14s %16s %18s\n' server "bench MB/s" "smbclient MB/s" "bench/smbclient"
  for s in "${SERVERS[@]}"; do
    port_v="PORT_$s"; gets=()
    for r in $(seq 1 "$GET_ROUNDS"); do
      t0=$(date +%s.%N)
      if smbclient "//127.0.0.1/share" -p "${!port_v}" -U "$BENCH_USER%$BENCH_PASS" -m SMB3_11 \
           -c 'get data.bin /dev/null' >/dev/null 2>"$RESULTS/smbclient.$s.err"; then
        t1=$(date +%s.%N)
        gets+=("$(awk -v a="$t0" -v b="$t1" -v m="$FILE_MIB" 'BEGIN { printf "%.1f", m*1.048576/(b-a) }')")
      else
        bench_log "smbclient get from $s failed: $(tail -1 "$RESULTS/smbclient.$s.err")"
      fi
    done
    out="$RESULTS/seq1M-o4.$s.json"
    b="-"
    bench_json "$out" "$s" -b1M -s -o4 -t1 -d"$DURATION" -W"$WARMUP" &&
      b=$(jq_num '.bytes_per_sec / 1e6 * 10 | floor / 10' "$out")
    g=$([ "${#gets[@]}" -gt 0 ] && median "${gets[@]}" || echo -)
    ratio=$(awk -v b="$b" -v g="$g" 'BEGIN { if (g+0 > 0 && b+0 > 0) printf "%.2f", b/g; else print "-" }')
    printf '%-12s %14s %16s %18s\n' "$s" "$b" "$g (med of ${#gets[@]})" "$ratio"
  done
  echo
fi

if want cpu; then
  echo "== 2. CPU per I/O at 4 KiB random read -o32 (bench process vs server, --server-pid) =="
  printf '%-12s %10s %16s %17s %14s\n' server IOPS "bench µs CPU/IO" "server µs CPU/IO" "bench/server"
  for s in "${SERVERS[@]}"; do
    out="$RESULTS/rand4K-o32.$s.json"
    if bench_json "$out" "$s" -b4K -r -o32 -t1 -d"$DURATION" -W"$WARMUP"; then
      jq -r --arg s "$s" '
        (.cpu.process.cpu_seconds / .io_count * 1e6) as $b |
        (.cpu.server.cpu_seconds / .io_count * 1e6) as $v |
        [$s, (.iops | floor), ($b * 100 | round / 100), ($v * 100 | round / 100),
         (if $v > 0 then ($b / $v * 100 | round / 100) else "-" end)] | @tsv' "$out" |
        awk -F'\t' '{ printf "%-12s %10s %16s %17s %14s\n", $1, $2, $3, $4, $5 }'
    else
      printf '%-12s %10s\n' "$s" failed
    fi
  done
  echo
fi

if want fio; then
  command -v fio >/dev/null || { bench_log "no fio (apt-get install -y fio): check 3 skipped"; exit 0; }
  F=$ROOT/data/data.bin
  cat "$F" >/dev/null # page cache warm for both tools
  echo "== 3. local file (${FILE_MIB} MiB, buffered, page cache warm): smbx bench vs fio =="
  printf '%-28s %10s %10s %6s %10s %10s %6s %10s %10s\n' profile "bench IOPS" "fio IOPS" "b/f" \
    "bench/core" "fio/core" "b/f" "bench p50" "fio p50"
  # name | bench flags | fio flags
  while IFS='|' read -r name bflags fflags; do
    [ -n "$name" ] || continue
    # shellcheck disable=SC2086
    if ! "$SMBX" bench $bflags -d"$DURATION" -W"$WARMUP" -Rjson "$F" >"$RESULTS/local.$name.json" 2>"$RESULTS/local.$name.err"; then
      bench_log "smbx bench $bflags $F failed: $(tail -1 "$RESULTS/local.$name.err")"; continue
    fi
    # shellcheck disable=SC2086
    if ! fio --name="$name" --filename="$F" --size="${FILE_MIB}M" --direct=0 --invalidate=0 \
         --time_based --runtime="$DURATION" --ramp_time="$WARMUP" --norandommap --randrepeat=0 \
         --iomem_align=4k --group_reporting --output-format=json $fflags >"$RESULTS/fio.$name.json" 2>"$RESULTS/fio.$name.err"; then
      bench_log "fio $fflags failed: $(tail -1 "$RESULTS/fio.$name.err")"; continue
    fi
    bi=$(jq -r '.iops' "$RESULTS/local.$name.json")
    bp=$(jq -r '.latency_us.p50' "$RESULTS/local.$name.json")
    fi_=$(jq -r '.jobs[0].read.iops + .jobs[0].write.iops' "$RESULTS/fio.$name.json")
    fp=$(jq -r '(.jobs[0].read.clat_ns.percentile["50.000000"] // .jobs[0].write.clat_ns.percentile["50.000000"]) / 1000' "$RESULTS/fio.$name.json")
    # CPU each tool got, in cores: bench from its getrusage; fio's usr/sys are per job.
    bc=$(jq -r '.cpu.process.core_percent / 100' "$RESULTS/local.$name.json")
    jobs=$(sed -n 's/.*--numjobs=\([0-9]*\).*/\1/p' <<<"$fflags"); jobs=${jobs:-1}
    fc=$(jq -r --argjson j "$jobs" '(.jobs[0].usr_cpu + .jobs[0].sys_cpu) / 100 * $j' "$RESULTS/fio.$name.json")
    awk -v n="$name" -v bi="$bi" -v fi="$fi_" -v bp="$bp" -v fp="$fp" -v bc="$bc" -v fc="$fc" 'BEGIN {
      bn = (bc > 0 ? bi / bc : 0); fn = (fc > 0 ? fi / fc : 0)
      printf "%-28s %10.0f %10.0f %6.2f %10.0f %10.0f %6.2f %10.2f %10.2f\n", n, bi, fi,
        (fi > 0 ? bi / fi : 0), bn, fn, (fn > 0 ? bn / fn : 0), bp, fp }'
  done <<EOF
4K-randread-psync-t1|--engine psync -b4K -r -o1 -t1|--ioengine=psync --rw=randread --bs=4k --iodepth=1 --numjobs=1
4K-randread-psync-t2|--engine psync -b4K -r -o1 -t2|--ioengine=psync --rw=randread --bs=4k --iodepth=1 --numjobs=2
4K-randread-io_uring-o32-t1|--engine uring -b4K -r -o32 -t1|--ioengine=io_uring --rw=randread --bs=4k --iodepth=32 --iodepth_batch_submit=32 --iodepth_batch_complete_max=32 --numjobs=1
64K-seqread-psync-t1|--engine psync -b64K -s -o1 -t1|--ioengine=psync --rw=read --bs=64k --iodepth=1 --numjobs=1
1M-seqread-io_uring-o4-t1|--engine uring -b1M -s -o4 -t1|--ioengine=io_uring --rw=read --bs=1m --iodepth=4 --iodepth_batch_submit=4 --iodepth_batch_complete_max=4 --numjobs=1
EOF
  echo "(fio $(fio --version); p50: fio completion latency, bench submission-to-completion, not comparable with batched io_uring)"
fi
echo "(JSON reports in $RESULTS)"
