#!/usr/bin/env bash
# Fuzzing, as CI runs it: the stable seed replay (every committed seed and
# 20k deterministic mutations per target), then every cargo-fuzz target under
# libFuzzer + AddressSanitizer for a short time, starting from the committed
# corpus. Exit status non-zero if anything failed; a crash prints the target
# and the path of its reproducer.
#
# Env: SMBX_FUZZ_SECS     seconds per target (default 15; e.g. 600 for a long run)
#      SMBX_FUZZ_JOBS     targets run at once (default: the number of CPUs)
#      SMBX_FUZZ_TARGETS  space-separated subset of targets (default: all)
#      SMBX_FUZZ_SANITIZER address (default) or none
#      SMBX_FUZZ_ITERS    mutations per target in the stable replay (default 20000)
#      SMBX_FUZZ_SKIP_REPLAY=1  skip the stable replay
#
# Needs a nightly toolchain (rustup toolchain install nightly); installs
# cargo-fuzz with `cargo +nightly install cargo-fuzz --locked` if missing.
# The checkout is not modified: each target's corpus is copied to a temporary
# directory; reproducers land in fuzz/artifacts/<target>/ (ignored by git).
set -uo pipefail
cd "$(dirname "$0")/../fuzz"
FUZZ=$PWD
SECS=${SMBX_FUZZ_SECS:-15}
JOBS=${SMBX_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
SANITIZER=${SMBX_FUZZ_SANITIZER:-address}
t0=$SECONDS

say() { echo "fuzz.sh: $*"; }

# The main workspace's fmt check does not cover this crate.
cargo fmt --check || { say "FAILED: cargo fmt --check (fuzz crate)"; exit 1; }

if [ -z "${SMBX_FUZZ_SKIP_REPLAY:-}" ]; then
    say "stable seed replay (cargo test --release)"
    cargo test --release -q || { say "FAILED: stable seed replay"; exit 1; }
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
    say "FAILED: no nightly toolchain (rustup toolchain install nightly)"
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz"
    cargo +nightly install cargo-fuzz --locked || { say "FAILED: cargo-fuzz install"; exit 1; }
fi

say "building every target (cargo +nightly fuzz build, sanitizer $SANITIZER)"
cargo +nightly fuzz build -s "$SANITIZER" --features libfuzzer || { say "FAILED: build"; exit 1; }
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bindir=$FUZZ/target/$triple/release

# Targets and their seed directories, from the crate itself; every libFuzzer
# binary must have a target there and the other way round.
mapfile -t lines < <(cargo run -q --release --example targets)
listed=$(printf '%s\n' "${lines[@]}" | cut -d' ' -f1 | sort)
bins=$(cargo +nightly fuzz list | sort)
if [ "$listed" != "$bins" ]; then
    say "FAILED: smbx_fuzz::TARGETS and the [[bin]] targets of fuzz/Cargo.toml differ:"
    diff <(echo "$listed") <(echo "$bins")
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/smbx-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# run_target NAME SEEDDIR...: fuzz NAME for $SECS s from a copy of its seeds.
run_target() {
    local name=$1
    shift
    local corpus=$work/corpus/$name art=$FUZZ/artifacts/$name/
    mkdir -p "$corpus" "$art"
    local d
    for d in "$@"; do
        [ -d "$FUZZ/corpus/$d" ] && cp -n "$FUZZ/corpus/$d"/* "$corpus"/ 2>/dev/null
    done
    local rc=0
    "$bindir/$name" "$corpus" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 \
        -artifact_prefix="$art" -print_final_stats=1 >"$work/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$name.rc"
}

selected=()
for l in "${lines[@]}"; do
    if [ -z "${SMBX_FUZZ_TARGETS:-}" ] || [[ " $SMBX_FUZZ_TARGETS " == *" ${l%% *} "* ]]; then
        selected+=("$l")
    fi
done
say "running ${#selected[@]} targets, ${SECS}s each, $JOBS at a time"
running=0
for l in "${selected[@]}"; do
    read -r -a f <<<"$l"
    run_target "${f[@]}" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

failed=()
for rcf in "$work"/*.rc; do
    [ -e "$rcf" ] || continue
    name=$(basename "$rcf" .rc)
    rc=$(cat "$rcf")
    log=$work/$name.log
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    if [ "$rc" = 0 ]; then
        printf '  %-18s ok      %10s runs  %s\n' "$name" "${runs:-?}" "$cov"
    else
        failed+=("$name")
        printf '  %-18s FAILED  (exit %s)\n' "$name" "$rc"
        grep -E -A1 'panicked' "$log" | head -4 | sed 's/^/      /'
        grep -E 'ERROR: |SUMMARY' "$log" | head -4 | sed 's/^/      /'
        repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        if [ -n "$repro" ]; then
            echo "      reproducer: $repro"
            echo "      replay:     (cd fuzz && cargo +nightly fuzz run --features libfuzzer $name $repro)"
        fi
        echo "      full log:"
        tail -15 "$log" | sed 's/^/        /'
    fi
done

say "done in $((SECONDS - t0)) s"
if [ ${#failed[@]} -ne 0 ]; then
    say "FAILED targets: ${failed[*]}"
    exit 1
fi
