#!/usr/bin/env bash
# Every RDMA guest scenario (issue 13), as CI runs them (scripts/test.sh step "guest"):
# the guest kernel (Debian trixie-backports' linux-source-7.3, SMBX_GUEST_LINUX=6.12 for
# trixie's 6.12, built once into /var/cache/smbx-ci/guest by scripts/guest/build-kernel.sh;
# one kernel for every scenario) and the initramfs (cached
# beside it) are made first, then each scenario boots its own qemu guest (TCG):
#   verbs_rxe      smbx server and client on verbs over rxe, cifs.ko mounts, bench, faults
#   siw_interop    smbx on verbs over siw, cifs.ko over siw, and this host's soft-iWARP
#                  against the guest's siw both ways
#   ksmbd_rxe      smbx's client against the kernel's ksmbd over TCP and on verbs over rxe
#   ksmbd_siw      the same on verbs over siw (SMB Direct only), with SMBX_GUEST_KSMBD=1:
#                  the default budget does not hold it
# Needs target/release/smbx; builds the checksum workload (examples/checksum).
# SMBX_GUEST_BUDGET (seconds, default 1500) bounds the scenarios (a cold kernel build
# before them does not count); each scenario gets what is left. Exit status non-zero
# when any scenario failed or ran out of time.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
budget=${SMBX_GUEST_BUDGET:-1500}
# 4 MiB written and 4 MiB read per workload (a few writes and reads of 1 B to 8 MiB) keeps
# the two default guests near 12 minutes under TCG.
export BYTES=${BYTES:-4M}
t0=$SECONDS
smbx=${SMBX_BIN:-$root/target/release/smbx}
[ -x "$smbx" ] || { echo "run-all: $smbx missing (cargo build --release -p smbx-cli)"; exit 1; }
cargo build --release -q -p smbx-client --example checksum || exit 1
kernel=$(scripts/guest/build-kernel.sh) || { echo "run-all: no guest kernel"; exit 1; }
base=$(scripts/guest/initramfs.sh) || { echo "run-all: no initramfs"; exit 1; }
echo "run-all: kernel $kernel, initramfs $base ($((SECONDS - t0)) s)"
t0=$SECONDS

failed=()
scenario() { # name command...
    local name=$1 left=$((budget - (SECONDS - t0)))
    shift
    if [ $left -lt 60 ]; then
        echo "=== guest $name: SKIPPED (time budget spent)"; failed+=("$name"); return
    fi
    echo "=== guest $name"
    local s=$SECONDS
    if SMBX_GUEST_TIMEOUT=$left "$@"; then
        echo "=== guest $name: ok ($((SECONDS - s)) s)"
    else
        echo "=== guest $name: FAILED ($((SECONDS - s)) s)"; failed+=("$name")
    fi
}
guest_rxe() {
    local log
    log=$(mktemp)
    # A second NIC without an RDMA device: the FSCTL_QUERY_NETWORK_INTERFACE_INFO check.
    SMBX_GUEST_NIC2=1 scripts/guest/run.sh tests/guest/verbs_rxe "$smbx" >"$log" 2>&1
    local rc=$?
    tr -d '\r' <"$log" | grep -E "^(PASS|FAIL|KNOWN-FAIL|BENCH|MRs|LIMITS|failures)" || true
    [ $rc = 0 ] || tr -d '\r' <"$log" | grep -v '^\[' | tail -40
    rm -f "$log"
    return $rc
}
guest_ksmbd() { # rxe|siw  "tcp rdma"|rdma
    local log dir rc
    log=$(mktemp); dir=$(mktemp -d)
    cp -a tests/guest/ksmbd/. "$dir/"
    printf 'DEV=%s\nTRANSPORTS="%s"\n' "$1" "$2" >"$dir/dev.env"
    # 1 MiB per workload: 18 workloads (TCP and SMB Direct) in about 4 minutes under TCG.
    BYTES=${KSMBD_BYTES:-1M} scripts/guest/run.sh "$dir" "$smbx" >"$log" 2>&1
    rc=$?
    tr -d '\r' <"$log" | grep -E "^(PASS|FAIL|KNOWN-FAIL|failures)" || true
    [ $rc = 0 ] || tr -d '\r' <"$log" | grep -v '^\[   ' | tail -30
    rm -rf "$log" "$dir"
    return $rc
}
scenario verbs_rxe guest_rxe
scenario siw_interop tests/guest/siw_interop.sh
scenario ksmbd_rxe guest_ksmbd rxe "tcp rdma"
if [ -n "${SMBX_GUEST_KSMBD:-}" ]; then
    scenario ksmbd_siw guest_ksmbd siw rdma
fi
echo "run-all: $((SECONDS - t0)) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "run-all: FAILED: ${failed[*]}"
    exit 1
fi
echo "run-all: every guest scenario passed"
