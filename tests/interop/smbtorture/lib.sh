# Shared helpers for baseline.sh (Samba smbd) and run.sh (smbx).  Sourced, not run.
#
# Every suite gets its own server instance: its own temporary root, its own
# loopback port, its own share directory.  That keeps suites independent so
# they can run in parallel, and keeps one suite's leftovers out of the next.

ST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$ST_DIR/../../.." && pwd)

# Test account (the same one tests/interop/conftest.py uses).
ST_USER=${ST_USER:-alice}
ST_PASS=${ST_PASS:-Alice-Passw0rd!}

# Per-suite wall-clock limit in seconds, enforced with timeout(1) and passed
# to smbtorture as --maximum-runtime.
ST_TIMEOUT=${ST_TIMEOUT:-1200}

# smbtorture options that shorten waits without changing what is checked:
#  sharedelay / writetimeupdatedelay: the same values Samba's own selftest uses
#    (source3/selftest/tests.py); they scale the sleeps in the sharemode and
#    timestamp tests.
#  maxopenfiles: smb2.maxfid opens files until the server refuses or this
#    limit is reached (default 0x11000 = 69632); the single subtest passes
#    either way.  5000 is still well above a default RLIMIT_NOFILE of 1024.
ST_TORTURE_OPTS=(
    --fullname
    --option=torture:sharedelay=100000
    --option=torture:writetimeupdatedelay=500000
    --option=torture:maxopenfiles=5000
    --option=torture:progress=no
)

st_log() { printf '[smbtorture %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# Ask the kernel for a free loopback TCP port.
st_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Make sure the unix account exists (smbd maps the SMB user onto it; files
# created over SMB are owned by it, and the share directories belong to it).
st_ensure_unix_user() {
    if ! id "$ST_USER" >/dev/null 2>&1; then
        useradd -M -s /usr/sbin/nologin "$ST_USER"
    fi
}

# st_make_root ROOT PORT [SUITE]: directory tree and smb.conf for one server
# instance (with SUITE's lines from suite-share-options.txt added to [share]).
st_make_root() {
    local root=$1 port=$2 suite=${3:-}
    mkdir -p "$root"/{private,lock,state,cache,pid,ncalrpc,log,share,public,secret,ro}
    chmod 755 "$root"
    chmod 700 "$root/private"
    chown "$ST_USER" "$root"/share "$root"/public "$root"/secret
    chmod 777 "$root/public"
    sed -e "s|@PORT@|$port|g" -e "s|@ROOT@|$root|g" "$ST_DIR/smb.conf.in" >"$root/smb.conf"
    if [ -n "$suite" ]; then
        awk -v s="$suite" -v u="$ST_USER" '
            FILENAME == ARGV[1] { if ($1 == s) { $1 = ""; sub(/^ /, ""); gsub(/@ST_USER@/, u); extra = extra "    " $0 "\n" } next }
            { print }
            /^\[share\]$/ { printf "%s", extra }
        ' "$ST_DIR/suite-share-options.txt" "$root/smb.conf" >"$root/smb.conf.tmp"
        mv "$root/smb.conf.tmp" "$root/smb.conf"
    fi
}

# st_wait_port PORT PID: wait (at most 30 s) until PORT accepts; fail if PID dies.
st_wait_port() {
    local port=$1 pid=$2 i
    for i in $(seq 1 300); do
        if ! kill -0 "$pid" 2>/dev/null; then
            st_log "server pid $pid exited before listening on $port"
            return 1
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    st_log "port $port not accepting after 30 s"
    return 1
}

# st_start_smbd ROOT PORT [SUITE]: start Samba's smbd in the foreground; prints its pid.
st_start_smbd() {
    local root=$1 port=$2 suite=${3:-}
    st_make_root "$root" "$port" "$suite"
    printf '%s\n%s\n' "$ST_PASS" "$ST_PASS" |
        smbpasswd -c "$root/smb.conf" -a -s "$ST_USER" >"$root/smbpasswd.out" 2>&1
    # Own session: on SIGTERM, smbd signals its whole process group.
    setsid smbd --foreground --no-process-group --debug-stdout -s "$root/smb.conf" \
        >"$root/server.out" 2>&1 </dev/null &
    local pid=$!
    st_wait_port "$port" "$pid" || { cat "$root/server.out" >&2; return 1; }
    echo "$pid"
}

# st_smbx_bin: the smbx binary under test.
st_smbx_bin() {
    echo "${SMBX_BIN:-$REPO_ROOT/target/release/smbx}"
}

# st_start_smbx ROOT PORT [SUITE]: start smbx with the same smb.conf; prints its pid.
st_start_smbx() {
    local root=$1 port=$2 suite=${3:-} bin
    bin=$(st_smbx_bin)
    st_make_root "$root" "$port" "$suite"
    printf '%s\n' "$ST_PASS" |
        "$bin" user add --config "$root/smb.conf" --stdin "$ST_USER" >"$root/useradd.out" 2>&1 ||
        { st_log "smbx user add failed: $(cat "$root/useradd.out")"; return 1; }
    setsid "$bin" serve --config "$root/smb.conf" >"$root/server.out" 2>&1 </dev/null &
    local pid=$!
    st_wait_port "$port" "$pid" || { cat "$root/server.out" >&2; return 1; }
    echo "$pid"
}

# st_stop PID: stop a server we started (its pid only).
st_stop() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# A subtest that prints nothing for this many seconds is declared stalled:
# smbtorture is stopped, the subtest recorded as a failure, and the suite
# resumed after it (--load-list).  Oplock/lease tests legitimately wait ~35 s.
ST_STALL=${ST_STALL:-150}

# st_list PORT SUITE: the subtest names of SUITE, as smbtorture reports results.
# (--list prints "suite.tcase.test"; a test alone in its tcase is reported as
# "suite.tcase".)
st_list() {
    local port=$1 suite=$2
    smbtorture "//127.0.0.1/share" -p "$port" -U "$ST_USER%$ST_PASS" --list "$suite" 2>/dev/null |
        grep -F "$suite." |
        awk -F. 'BEGIN { OFS = "." } { if (NF > 2 && $NF == $(NF - 1)) NF--; print }'
}

# st_reported LOGFILE: names that already have a result line.
st_reported() {
    sed -n -E 's/^(success|failure|error|skip|xfail|uxsuccess|todo): ([^[]*[^[ ]).*$/\2/p' "$1" | LC_ALL=C sort -u
}

# st_suite_opts SUITE: extra smbtorture arguments from suite-options.txt.
st_suite_opts() {
    awk -v s="$1" '$1 == s { for (i = 2; i <= NF; i++) print $i }' "$ST_DIR/suite-options.txt"
}

# st_prepare_share SUITE SHAREDIR: files some suites expect to exist.
st_prepare_share() {
    local suite=$1 dir=$2
    case $suite in
    smb2.set-sparse-ioctl)
        head -c 65536 /dev/urandom >"$dir/sparse-test.dat"
        chown "$ST_USER" "$dir/sparse-test.dat"
        ;;
    smb2.zero-data-ioctl)
        head -c 131072 /dev/urandom >"$dir/zero-data-test.dat"
        chown "$ST_USER" "$dir/zero-data-test.dat"
        ;;
    esac
}

# st_torture PORT SUITE LOGFILE: run one suite; output (plain format) to LOGFILE.
# Bounded: ST_TIMEOUT for the whole suite, ST_STALL without output per subtest.
st_torture() {
    local port=$1 suite=$2 log=$3
    local list=$log.list remaining=$log.remaining part=$log.part
    local -a extra=()
    mapfile -t extra < <(st_suite_opts "$suite")
    local deadline=$(($(date +%s) + ST_TIMEOUT)) round=0 pid size last_size now last_change stalled crashed cur
    # ST_DEADLINE (epoch seconds), if set, bounds every suite of a whole run.
    if [ -n "${ST_DEADLINE:-}" ] && [ "$ST_DEADLINE" -lt "$deadline" ]; then deadline=$ST_DEADLINE; fi
    st_list "$port" "$suite" >"$list" || true
    : >"$log"
    cp "$list" "$remaining"
    while [ "$round" -lt 100 ]; do
        round=$((round + 1))
        local -a sel=()
        if [ -s "$list" ]; then sel=(--load-list="$remaining"); fi
        smbtorture "//127.0.0.1/share" -p "$port" -U "$ST_USER%$ST_PASS" \
            "${ST_TORTURE_OPTS[@]}" "${extra[@]}" --maximum-runtime="$ST_TIMEOUT" "${sel[@]}" \
            "$suite" >"$part" 2>&1 </dev/null &
        pid=$!
        stalled=0 last_size=-1 last_change=$(date +%s)
        while kill -0 "$pid" 2>/dev/null; do
            sleep 1
            now=$(date +%s)
            size=$(stat -c %s "$part" 2>/dev/null || echo 0)
            if [ "$size" != "$last_size" ]; then last_size=$size last_change=$now; fi
            if [ $((now - last_change)) -ge "$ST_STALL" ] || [ "$now" -ge "$deadline" ]; then
                stalled=1
                kill -TERM "$pid" 2>/dev/null || true
                sleep 2
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
        done
        wait "$pid" 2>/dev/null || true
        cat "$part" >>"$log"
        # smbtorture itself crashing in one subtest (e.g. smb2.replay.dhv2-pending2*
        # against a server without multichannel binding) must not cost the rest of
        # the suite: resume after it like after a stall.
        crashed=0
        if [ "$stalled" = 0 ] && grep -q '^INTERNAL ERROR: Signal' "$part"; then crashed=1; fi
        [ "$stalled" = 1 ] || [ "$crashed" = 1 ] || break
        # The subtest that was running when we stopped smbtorture (or it crashed).
        cur=$(sed -n 's/^test: //p' "$part" | tail -n 1)
        if [ -n "$cur" ] && ! st_reported "$part" | grep -qxF "$cur"; then
            if [ "$crashed" = 1 ]; then
                echo "failure: $cur [ smbtorture crashed ]" >>"$log"
            else
                echo "failure: $cur [ stalled: no output for $ST_STALL s or suite time limit reached ]" >>"$log"
            fi
        fi
        [ "$(date +%s)" -lt "$deadline" ] || { echo "suite time limit ($ST_TIMEOUT s) reached" >>"$log"; break; }
        [ -s "$list" ] || break
        LC_ALL=C sort -u "$list" | LC_ALL=C comm -23 - <(st_reported "$log") >"$remaining"
        [ -s "$remaining" ] || break
    done
    rm -f "$part"
}

# st_passes LOGFILE: sorted, unique names of subtests that passed.
# smbtorture prints "success: NAME" at the start of a line for each pass
# (and "failure:", "error:", "skip:", "xfail:" for the rest).
st_passes() {
    sed -n 's/^success: \(.*\)$/\1/p' "$1" | sed 's/[[:space:]]*$//' | LC_ALL=C sort -u
}

# st_count FILE: number of non-empty lines.
st_count() {
    if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi
}

# st_run_one KIND SUITE OUTDIR: start a server of KIND (smbd|smbx), run SUITE
# against it, write OUTDIR/SUITE.log (full output), OUTDIR/SUITE.pass (passing
# subtests) and OUTDIR/SUITE.time (seconds), stop the server.  Returns 0, or
# 1 if the server died or panicked during the suite, 2 if it did not start.
st_run_one() {
    local kind=$1 suite=$2 outdir=$3 root port pid start end rc=0
    root=$(mktemp -d "${TMPDIR:-/tmp}/smbtorture-$kind-$suite.XXXXXX")
    port=$(st_free_port)
    start=$(date +%s)
    if ! pid=$(st_start_"$kind" "$root" "$port" "$suite"); then
        st_log "$suite: could not start $kind"
        : >"$outdir/$suite.pass"
        echo "server did not start" >"$outdir/$suite.log"
        echo 0 >"$outdir/$suite.time"
        [ -n "${ST_KEEP_ROOT:-}" ] || rm -rf "$root"
        return 2
    fi
    st_prepare_share "$suite" "$root/share"
    st_torture "$port" "$suite" "$outdir/$suite.log" || true
    end=$(date +%s)
    if ! kill -0 "$pid" 2>/dev/null; then
        st_log "$suite: $kind (pid $pid) is gone after the suite"
        rc=1
    fi
    st_stop "$pid"
    cp "$root/server.out" "$outdir/$suite.server.log" 2>/dev/null || true
    if grep -q panicked "$outdir/$suite.server.log" 2>/dev/null; then
        st_log "$suite: $kind panicked (see $outdir/$suite.server.log)"
        rc=1
    fi
    st_passes "$outdir/$suite.log" >"$outdir/$suite.pass"
    echo $((end - start)) >"$outdir/$suite.time"
    st_log "$suite: $(st_count "$outdir/$suite.pass") passed in $((end - start)) s ($kind)"
    [ -n "${ST_KEEP_ROOT:-}" ] || rm -rf "$root"
    return $rc
}

# st_parallel JOBS KIND OUTDIR SUITE...: st_run_one for each suite, at most
# JOBS at a time.  Returns non-zero if any st_run_one did (its status is
# recorded in OUTDIR/SUITE.rc).
st_parallel() {
    local jobs=$1 kind=$2 outdir=$3 rc=0 suite
    shift 3
    for suite in "$@"; do
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
            wait -n || true
        done
        if [ -n "${ST_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$ST_DEADLINE" ]; then
            st_log "$suite: not run (run time budget exhausted)"
            : >"$outdir/$suite.pass"
            echo "not run: run time budget exhausted" >"$outdir/$suite.log"
            echo 0 >"$outdir/$suite.time"
            echo 3 >"$outdir/$suite.rc"
            continue
        fi
        (
            st_run_one "$kind" "$suite" "$outdir"
            echo $? >"$outdir/$suite.rc"
        ) &
    done
    wait
    for suite in "$@"; do
        [ "$(cat "$outdir/$suite.rc" 2>/dev/null)" = 0 ] || rc=1
    done
    return $rc
}

# st_longest_first SUITE...: the suites, longest first by samba-times.txt
# (unknown ones last, in their given order), so parallel runs pack well.
st_longest_first() {
    local i=0 s t
    for s in "$@"; do
        t=$(awk -v s="$s" '$1 == s { print $2 }' "$ST_DIR/samba-times.txt" 2>/dev/null)
        printf '%s %05d %s\n' "${t:--1}" "$i" "$s"
        i=$((i + 1))
    done | sort -k1,1nr -k2,2n | awk '{ print $3 }'
}
