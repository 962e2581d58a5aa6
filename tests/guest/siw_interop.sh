#!/usr/bin/env bash
# Host side of tests/guest/verbs_siw: smbx's soft-iWARP against the Linux kernel's
# siw, both directions, plus smbx on verbs over siw inside the guest.
#
# Starts an smbx server on this host (soft-iWARP, 127.0.0.1, the guest reaches it as
# 10.0.2.2), boots the guest with a forwarded port to its SMB Direct port 5445, and when
# the guest says READY-FOR-HOST, puts and gets a file there with this host's smbx client
# on soft-iWARP. Exit status: the guest's (every PASS/FAIL line is printed).
# SMBX_GUEST_CONSOLE_COPY=FILE keeps the guest console there when something failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
smbx=${SMBX_BIN:-$root/target/release/smbx}
checksum=${SMBX_CHECKSUM_BIN:-$root/target/release/examples/checksum}
work=$(mktemp -d)
cleanup() {
    [ -n "${srv:-}" ] && kill "$srv" 2>/dev/null || true
    [ -n "${guest:-}" ] && kill "$guest" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tcp_port=$(free_port); direct_port=$(free_port); fwd_port=${SMBX_GUEST_FWD_PORT:-$(free_port)}
mkdir -p "$work/share"
cat >"$work/smb.conf" <<CONF
[global]
    smb ports = $tcp_port
    interfaces = 127.0.0.1
    bind interfaces only = yes
    smb direct = yes
    smb direct port = $direct_port
    smb direct provider = soft
    passdb backend = smbpasswd:$work/smbpasswd
    map to guest = never
    control socket = $work/ctl.sock
[share]
    path = $work/share
    read only = no
CONF
echo secret | "$smbx" user add --config "$work/smb.conf" --stdin alice >/dev/null
"$smbx" serve --config "$work/smb.conf" >"$work/server.log" 2>&1 &
srv=$!
cp -a "$here/verbs_siw" "$work/t"
echo "HOST_DIRECT_PORT=$direct_port" >"$work/t/host.env"
SMBX_GUEST_HOSTFWD="tcp:127.0.0.1:$fwd_port-10.0.2.15:5445" \
    "$root/scripts/guest/run.sh" "$work/t" "$smbx" >"$work/console.log" 2>&1 &
guest=$!
for _ in $(seq 1 1200); do
    grep -q READY-FOR-HOST "$work/console.log" && break
    kill -0 "$guest" 2>/dev/null || break
    sleep 0.5
done
export SMBX_PASSWORD=secret SMBX_RDMA_PROVIDER=soft
host_fail=0
if grep -q READY-FOR-HOST "$work/console.log"; then
    head -c 3000000 /dev/urandom >"$work/src"
    sha256sum "$work/src" | cut -d' ' -f1 >"$work/src.sha256"
    url="smb://alice@127.0.0.1:$fwd_port/share"
    # The checksum workload (examples/checksum) at every SMB3 dialect, plain, signed, sealed.
    for d in 3.0 3.0.2 3.1.1; do
        for mode in "" --sign --seal; do
            name="host soft-iWARP client -> guest verbs/siw server $d ${mode:-plain}"
            if out=$("$checksum" "$url?transport=rdma" --dialect $d $mode --bytes "${BYTES:-8M}" \
                --span 8M 2>&1); then
                echo "PASS $name: ${out#checksum: }"
            else
                echo "FAIL $name: $out"; host_fail=1
            fi
        done
    done
    "$smbx" put --transport rdma "$work/src" "$url/from-host" || host_fail=1
    "$smbx" put --transport rdma "$work/src.sha256" "$url/from-host.sha256" || host_fail=1
else
    echo "FAIL the guest never became ready"; host_fail=1
fi
: >"$work/empty"
"$smbx" put --transport rdma "$work/empty" "smb://alice@127.0.0.1:$fwd_port/share/host-done" || true
set +e
wait "$guest"
rc=$?
set -e
tr -d '\r' <"$work/console.log" | grep -E "^(PASS|FAIL|failures|GUEST-EXIT)" || true
# What the guest's verbs client wrote here, over soft-iWARP.
for f in "$work"/share/from-guest-*; do
    [ -e "$f" ] || { echo "FAIL nothing arrived from the guest"; host_fail=1; break; }
    cmp -s "$f" "$work/share/from-guest-3.1.1" || { echo "FAIL $f differs"; host_fail=1; }
done
if [ "$rc" != 0 ] || [ "$host_fail" != 0 ]; then
    echo "--- console ---"; tr -d '\r' <"$work/console.log" | grep -v '^\[' | tail -80
    cp "$work/console.log" "${SMBX_GUEST_CONSOLE_COPY:-/dev/null}" 2>/dev/null || true
    echo "--- host server ---"; tail -30 "$work/server.log"
    exit 1
fi
echo "siw interop: all passed"
