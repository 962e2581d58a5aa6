#!/usr/bin/env bash
# THE test command: dependencies, format, lint, unit tests, release build,
# interop tests against real peers, smbtorture.  Exit status non-zero on any
# failure.  Every step runs even if an earlier test step failed (so one run
# shows everything), except that nothing runs after a failed build.
#
# Env: SMBX_SKIP_DEPS=1 (don't install packages), SMBX_SKIP_TORTURE=1, SMBX_SKIP_DEB=1,
#      SMBX_SKIP_GUEST=1 (the RDMA guest tests),
#      PYTEST_ARGS (extra pytest arguments), ST_* (see tests/interop/smbtorture).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

failed=()
step() {
    local name=$1
    shift
    echo
    echo "=== $name: $*"
    local t0=$SECONDS
    if "$@"; then
        echo "=== $name: ok ($((SECONDS - t0)) s)"
        return 0
    fi
    echo "=== $name: FAILED ($((SECONDS - t0)) s)"
    failed+=("$name")
    return 1
}

finish() {
    echo
    if [ ${#failed[@]} -eq 0 ]; then
        echo "test.sh: all steps passed"
        exit 0
    fi
    echo "test.sh: FAILED steps: ${failed[*]}"
    exit 1
}

if [ -z "${SMBX_SKIP_DEPS:-}" ]; then
    step deps scripts/install-deps.sh || finish
fi
command -v cargo >/dev/null || { echo "cargo not found: install a Rust toolchain (rustup, >= 1.85)"; exit 1; }

step fmt cargo fmt --all -- --check
step clippy cargo clippy --workspace --all-targets -- -D warnings
step unit cargo test --workspace
# The fuzz crate (its own workspace): seed replay, then every target under
# cargo-fuzz for a short time (scripts/fuzz.sh; SMBX_FUZZ_SECS per target).
if [ -z "${SMBX_SKIP_FUZZ:-}" ]; then
    step fuzz scripts/fuzz.sh
fi
step build cargo build --release -p smbx-cli || finish

export SMBX_BIN=${SMBX_BIN:-$ROOT/target/release/smbx}
# shellcheck disable=SC2086
step interop python3 -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} tests/interop
# The Debian package: built from that binary, installed with dpkg -i into a clean
# bookworm chroot (debootstrap tarball cached in /var/cache/smbx-ci: a few
# minutes the first time, about 15 s after), serving a file to smbclient.
if [ -z "${SMBX_SKIP_DEB:-}" ]; then
    step deb scripts/test-deb.sh
fi
if [ -z "${SMBX_SKIP_TORTURE:-}" ]; then
    step smbtorture tests/interop/smbtorture/run.sh
fi
# SMB Direct against the Linux kernel's RDMA stack in a qemu guest (TCG): soft-RoCE,
# soft-iWARP, cifs.ko, ksmbd (tests/guest/run-all.sh; the guest kernel is cached in
# /var/cache/smbx-ci/guest, about 20 minutes to build the first time; SMBX_GUEST_BUDGET).
if [ -z "${SMBX_SKIP_GUEST:-}" ]; then
    step guest tests/guest/run-all.sh
fi
finish
