#!/usr/bin/env bash
# Boots the RDMA test guest (qemu TCG, no KVM needed) and runs a test inside it.
#
#   scripts/guest/run.sh TESTDIR [SMBX_BIN]
#
# TESTDIR holds run.sh (the guest runs `sh /test/run.sh` with TESTDIR's files in /test);
# SMBX_BIN (default target/release/smbx) is put at /usr/bin/smbx, and the programs named in
# $SMBX_GUEST_BINS (default: target/release/examples/checksum) beside it. The guest's console goes to
# stdout; the exit status is the guest test's ("GUEST-EXIT n" on the console), 124 when the guest
# did not finish within $SMBX_GUEST_TIMEOUT seconds (default 600). $SMBX_GUEST_HOSTFWD adds qemu
# user-network forwards (e.g. "tcp:127.0.0.1:15445-:5445"). $SMBX_GUEST_NIC2=1 adds a second
# virtio NIC (guest eth1, user network 10.0.3.0/24, left for the test to configure). BYTES, CIFS_MODES, BENCH_SECS and STRICT_LINK,
# when set, reach the guest's test in /test/knobs.env.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
testdir=${1:?usage: run.sh TESTDIR [SMBX_BIN]}
smbx=${2:-${SMBX_BIN:-$root/target/release/smbx}}
kernel=$("$here/build-kernel.sh")
base=$("$here/initramfs.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/o/test" "$work/o/usr/bin"
cp -a "$testdir/." "$work/o/test/"
# Helpers every guest test may source (tests/guest/lib: the checksum workload for mounts).
cp -a "$root/tests/guest/lib" "$work/o/test/lib"
# Knobs handed to the guest's test as /test/knobs.env (sourced by the tests).
for v in BYTES CIFS_MODES BENCH_SECS STRICT_LINK; do
    [ -n "${!v:-}" ] && echo "$v='${!v}'" >>"$work/o/test/knobs.env"
done
cp "$smbx" "$work/o/usr/bin/smbx"
# More programs for /usr/bin: $SMBX_GUEST_BINS, by default the checksum workload
# (cargo build --release -p smbx-client --example checksum) when it was built.
bins=${SMBX_GUEST_BINS-$root/target/release/examples/checksum}
for b in $bins; do
    [ -f "$b" ] && cp "$b" "$work/o/usr/bin/"
done
(cd "$work/o" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/overlay.cpio.gz"
cat "$base" "$work/overlay.cpio.gz" >"$work/initrd.cpio.gz"
net="user,id=n0"
if [ -n "${SMBX_GUEST_HOSTFWD:-}" ]; then
    for f in $SMBX_GUEST_HOSTFWD; do net="$net,hostfwd=$f"; done
fi
nics=(-netdev "$net" -device virtio-net-pci,netdev=n0)
if [ -n "${SMBX_GUEST_NIC2:-}" ]; then
    nics+=(-netdev "user,id=n1,net=10.0.3.0/24" -device virtio-net-pci,netdev=n1)
fi
log="$work/console.log"
set +e
timeout --foreground -k 5 "${SMBX_GUEST_TIMEOUT:-600}" qemu-system-x86_64 \
    -machine q35 -cpu max -smp "${SMBX_GUEST_CPUS:-2}" -m "${SMBX_GUEST_MEM:-1536}" \
    -kernel "$kernel" -initrd "$work/initrd.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init" \
    -nographic -no-reboot "${nics[@]}" </dev/null | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 124 ]; then
    echo "run.sh: the guest did not finish in ${SMBX_GUEST_TIMEOUT:-600} s" >&2
    exit 124
fi
status=$(tr -d '\r' <"$log" | sed -n 's/^GUEST-EXIT \([0-9]*\)$/\1/p' | tail -1)
if [ -z "$status" ]; then
    echo "run.sh: the guest stopped without reporting (qemu exit $rc)" >&2
    exit 125
fi
exit "$status"
