#!/usr/bin/env bash
# Run the smbtorture suites against smbx and compare with the expectations.
#
#   smbx-expected/<suite>.txt   subtests smbx is REQUIRED to pass (starts empty,
#                               only ever grows); any of them failing fails the run.
#   samba-passes*/<suite>.txt   what Samba passes with the same configuration
#                               (reference; produced by baseline.sh).
#
# Usage: run.sh [SUITE...]        (default: every suite in both lists)
# Env:   SMBX_BIN (default target/release/smbx), ST_JOBS (default 2),
#        ST_TIMEOUT (per suite, s), ST_STALL (per subtest without output, s),
#        ST_BUDGET (whole run, s; default 1200), ST_WORK (logs; default
#        target/smbtorture/smbx), ST_KEEP_ROOT=1 keeps server directories,
#        ST_ONLY_EXPECTED=1 runs (by default) only suites with a non-empty
#        smbx-expected list (what CI gates on).
#
# Exit status: 0 if every expected subtest passed and smbx never panicked or
# died during a suite; 1 otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "run.sh must run as root (share ownership, unix user)" >&2; exit 2; }
command -v smbtorture >/dev/null || { echo "need smbtorture (apt-get install samba-testsuite)" >&2; exit 2; }

WORK=${ST_WORK:-$REPO_ROOT/target/smbtorture/smbx}
JOBS=${ST_JOBS:-2}
ST_DEADLINE=$(($(date +%s) + ${ST_BUDGET:-1200}))
export ST_DEADLINE
rm -rf "$WORK"
mkdir -p "$WORK" "$ST_DIR/smbx-expected"
st_ensure_unix_user

mapfile -t SERVER_SUITES < <(grep -v '^#' "$ST_DIR/suites.txt" | grep .)
mapfile -t CONF_SUITES < <(grep -v '^#' "$ST_DIR/suites-conformance.txt" | grep .)
if [ $# -gt 0 ]; then
    SUITES=("$@")
else
    mapfile -t SUITES < <(printf '%s\n' "${SERVER_SUITES[@]}" "${CONF_SUITES[@]}" | awk '!seen[$0]++')
    if [ -n "${ST_ONLY_EXPECTED:-}" ]; then
        # CI: only the suites that gate (a non-empty smbx-expected list), so the
        # budget is never spent on suites that cannot fail the run.
        mapfile -t SUITES < <(for s in "${SUITES[@]}"; do
            grep -qv '^#' "$ST_DIR/smbx-expected/$s.txt" 2>/dev/null && echo "$s"; done)
    fi
fi

BIN=$(st_smbx_bin)
[ -x "$BIN" ] || { echo "smbx binary not found at $BIN (cargo build --release -p smbx-cli, or set SMBX_BIN)" >&2; exit 1; }

st_log "smbx=$BIN; ${#SUITES[@]} suites, $JOBS at a time; logs in $WORK"
mapfile -t ORDER < <(st_longest_first "${SUITES[@]}")
st_parallel "$JOBS" smbx "$WORK" "${ORDER[@]}" || true

samba_list() {
    local s=$1
    if [ -f "$ST_DIR/samba-passes/$s.txt" ]; then
        echo "$ST_DIR/samba-passes/$s.txt"
    elif [ -f "$ST_DIR/samba-passes-conformance/$s.txt" ]; then
        echo "$ST_DIR/samba-passes-conformance/$s.txt"
    else
        echo /dev/null
    fi
}

fail=0
printf '\n%-28s %7s %7s %9s %7s  %s\n' suite samba smbx expected secs status | tee "$WORK/summary.txt"
for s in "${SUITES[@]}"; do
    exp="$ST_DIR/smbx-expected/$s.txt"
    [ -f "$exp" ] || : >"$exp"
    got="$WORK/$s.pass"
    rc=$(cat "$WORK/$s.rc" 2>/dev/null || echo 9)
    # Expected subtests that did not pass.
    LC_ALL=C comm -23 <(grep -v '^#' "$exp" | grep . | LC_ALL=C sort -u) <(LC_ALL=C sort -u "$got") >"$WORK/$s.missing"
    status=ok
    if [ -s "$WORK/$s.missing" ]; then
        status="FAIL: $(grep -c . "$WORK/$s.missing") expected subtest(s) failed"
        fail=1
    fi
    case $rc in
    0) ;;
    1) status="FAIL: smbx died or panicked (see $WORK/$s.server.log)"; fail=1 ;;
    2) [ -s "$WORK/$s.missing" ] || status="smbx did not start" ;;
    3) [ -s "$WORK/$s.missing" ] || status="not run (budget)" ;;
    *) status="FAIL: no result"; fail=1 ;;
    esac
    printf '%-28s %7s %7s %9s %7s  %s\n' "$s" "$(st_count "$(samba_list "$s")")" "$(st_count "$got")" \
        "$(grep -v '^#' "$exp" | grep -c . || true)" "$(cat "$WORK/$s.time" 2>/dev/null || echo -)" "$status" |
        tee -a "$WORK/summary.txt"
done

echo
for s in "${SUITES[@]}"; do
    if [ -s "$WORK/$s.missing" ]; then
        echo "== $s: expected but not passed:"
        sed 's/^/   /' "$WORK/$s.missing"
    fi
done

echo
echo "Samba-passing subtests smbx does not pass yet:"
for s in "${SUITES[@]}"; do
    todo=$(LC_ALL=C comm -23 <(LC_ALL=C sort -u "$(samba_list "$s")") <(LC_ALL=C sort -u "$WORK/$s.pass"))
    if [ -n "$todo" ]; then
        echo "== $s ($(printf '%s\n' "$todo" | grep -c .))"
        printf '%s\n' "$todo" | sed 's/^/   /'
    fi
done

# Passing subtests not yet in the expected list: candidates to add.
new=0
for s in "${SUITES[@]}"; do
    extra=$(LC_ALL=C comm -13 <(grep -v '^#' "$ST_DIR/smbx-expected/$s.txt" | grep . | LC_ALL=C sort -u) <(LC_ALL=C sort -u "$WORK/$s.pass"))
    if [ -n "$extra" ]; then
        new=$((new + $(printf '%s\n' "$extra" | grep -c .)))
    fi
done
if [ "$new" -gt 0 ]; then
    echo
    echo "$new subtest(s) pass but are not in smbx-expected/ yet; to lock them in:"
    echo "   for f in $WORK/*.pass; do s=\$(basename \$f .pass); sort -u \$f $ST_DIR/smbx-expected/\$s.txt -o $ST_DIR/smbx-expected/\$s.txt; done"
fi

if [ "$fail" != 0 ]; then
    st_log "FAILED (summary: $WORK/summary.txt)"
    exit 1
fi
st_log "ok (summary: $WORK/summary.txt)"
