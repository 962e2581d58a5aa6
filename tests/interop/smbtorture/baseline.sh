#!/usr/bin/env bash
# Run the smbtorture suites against Samba's smbd on loopback and record which
# subtests pass: samba-passes/<suite>.txt (server suites, suites.txt) and
# samba-passes-conformance/<suite>.txt (suites-conformance.txt), one subtest
# name per line, sorted.  These files are reference data: commit them.
#
# Usage: baseline.sh [SUITE...]      (default: every suite in both lists)
# Env:   ST_JOBS (parallel suites, default 2), ST_TIMEOUT (per suite, s),
#        ST_WORK (logs; default target/smbtorture/baseline), ST_KEEP_ROOT=1.
# Needs root (smbd switches to the test user) and a filesystem with xattrs
# under ${TMPDIR:-/tmp} (acl_xattr, streams_xattr, store dos attributes).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "baseline.sh must run as root (smbd)" >&2; exit 2; }
command -v smbd >/dev/null && command -v smbtorture >/dev/null ||
    { echo "need smbd and smbtorture (apt-get install samba samba-testsuite)" >&2; exit 2; }

WORK=${ST_WORK:-$REPO_ROOT/target/smbtorture/baseline}
JOBS=${ST_JOBS:-2}
mkdir -p "$WORK" "$ST_DIR/samba-passes" "$ST_DIR/samba-passes-conformance"
st_ensure_unix_user

mapfile -t SERVER_SUITES < <(grep -v '^#' "$ST_DIR/suites.txt" | grep .)
mapfile -t CONF_SUITES < <(grep -v '^#' "$ST_DIR/suites-conformance.txt" | grep .)
if [ $# -gt 0 ]; then
    SUITES=("$@")
else
    # Union of both lists, each suite once.
    mapfile -t SUITES < <(printf '%s\n' "${SERVER_SUITES[@]}" "${CONF_SUITES[@]}" | awk '!seen[$0]++')
fi

# Sanity check: user xattrs on the filesystem that will hold the shares.
probe=$(mktemp "${TMPDIR:-/tmp}/xattr-probe.XXXXXX")
if ! setfattr -n user.smbx_probe -v 1 "$probe" 2>/dev/null; then
    st_log "WARNING: no user xattrs on ${TMPDIR:-/tmp}; streams/EA/DOS-attribute tests will fail"
fi
rm -f "$probe"

st_log "running ${#SUITES[@]} suites, $JOBS at a time; logs in $WORK"
t0=$(date +%s)
mapfile -t ORDER < <(st_longest_first "${SUITES[@]}")
st_parallel "$JOBS" smbd "$WORK" "${ORDER[@]}" || st_log "some suite had a server problem (see logs)"

in_list() { local x=$1; shift; printf '%s\n' "$@" | grep -qxF "$x"; }
printf '%-28s %6s %6s\n' suite passes secs | tee "$WORK/summary.txt"
for s in "${SUITES[@]}"; do
    if in_list "$s" "${SERVER_SUITES[@]}"; then cp "$WORK/$s.pass" "$ST_DIR/samba-passes/$s.txt"; fi
    if in_list "$s" "${CONF_SUITES[@]}"; then cp "$WORK/$s.pass" "$ST_DIR/samba-passes-conformance/$s.txt"; fi
    printf '%-28s %6s %6s\n' "$s" "$(st_count "$WORK/$s.pass")" "$(cat "$WORK/$s.time")" | tee -a "$WORK/summary.txt"
done
# Record the wall times (run.sh starts the longest suites first).
times="$ST_DIR/samba-times.txt"
[ -f "$times" ] || echo "# Wall time (s) of each suite against Samba (baseline.sh); run.sh starts the longest first." >"$times"
for s in "${SUITES[@]}"; do
    awk -v s="$s" '$1 != s' "$times" >"$times.tmp"
    echo "$s $(cat "$WORK/$s.time")" >>"$times.tmp"
    mv "$times.tmp" "$times"
done
st_log "total wall time $(( $(date +%s) - t0 )) s"
