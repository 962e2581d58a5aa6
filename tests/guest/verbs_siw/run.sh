# In the RDMA test guest, driven by tests/guest/siw_interop.sh on the host:
# smbx on rdma-core verbs over the kernel's soft-iWARP (siw) on eth0.
#  1. server (verbs, siw0) and client (verbs) in the guest (3.1.1);
#  2. the host's smbx client on smbx's soft-iWARP reaches this server through a
#     forwarded port (kernel siw <-> smbx soft-iWARP on the wire);
#  3. this guest's verbs client puts and gets to the host's smbx server on
#     soft-iWARP (10.0.2.2, port in host.env).
set -u
. /test/lib/verbs.sh
. /test/host.env
verbs_server siw
smbx rdma | grep -q "siw0.*iWARP.*5445" && pass "smbx rdma names siw0 iWARP 5445" || fail "smbx rdma names siw0"
grep "listening" /tmp/server.log
grep -q "SMB Direct addr=10.0.2.15:5445 provider=verbs (siw0, iWARP)" /tmp/server.log \
    && pass "server listens through verbs on siw0:5445" || fail "server listens through verbs on siw0:5445"

export SMBX_PASSWORD=secret SMBX_RDMA_PROVIDER=verbs
# The checksum workload (examples/checksum: random offsets, 1 B to 8 MiB, SHA-256,
# rename, delete) at every SMB3 dialect, plain, signed and sealed.
BYTES=${BYTES:-8M}
workload() { # name url
    if out=$(checksum "$2" $3 --bytes $BYTES --span 8M 2>&1); then
        pass "$1: ${out#checksum: }"
    else
        fail "$1: $out"
    fi
}
# Both ends in this guest at 3.1.1 only: every dialect runs across the wire below (host
# soft-iWARP against this siw, both ways) and in verbs_rxe (both ends on verbs), and the
# guest step must fit CI's time.
for mode in "" --sign --seal; do
    workload "verbs/siw guest client -> guest server 3.1.1 ${mode:-plain}" \
        "smb://alice@10.0.2.15/share?transport=rdma" "--dialect 3.1.1 $mode"
done
dd if=/dev/urandom of=/tmp/src bs=1k count=2500 2>/dev/null
want=$(sha256sum /tmp/src | cut -d' ' -f1)

# 2. the host's turn: it writes from-host and from-host.sha256, then host-done.
echo "READY-FOR-HOST"
i=0
while [ ! -e /srv/share/host-done ]; do
    i=$((i + 1)); [ $i -gt 600 ] && break; sleep 0.5
done
if [ -e /srv/share/host-done ] && [ "$(sha256sum /srv/share/from-host | cut -d' ' -f1)" = "$(cat /srv/share/from-host.sha256)" ]; then
    pass "host soft-iWARP client -> guest verbs/siw server (file on disk)"
else
    fail "host soft-iWARP client -> guest verbs/siw server (file on disk)"
fi

# 3. guest verbs/siw client -> host smbx server on soft-iWARP.
for d in 3.0 3.0.2 3.1.1; do
    for mode in "" --sign --seal; do
        workload "verbs/siw guest client -> host soft-iWARP server $d ${mode:-plain}" \
            "smb://alice@10.0.2.2:$HOST_DIRECT_PORT/share?transport=rdma" "--dialect $d $mode"
    done
done
smbx put --transport rdma /tmp/src "smb://alice@10.0.2.2:$HOST_DIRECT_PORT/share/from-guest-3.1.1" \
    && pass "verbs/siw guest client -> host soft-iWARP server: smbx put" \
    || fail "verbs/siw guest client -> host soft-iWARP server: smbx put"
# The kernel's SMB Direct client (cifs.ko) over siw mounting the verbs server, the
# workload through the mount.
cifs_mounts "over siw"

echo "$want" >/tmp/want
grep -i "panic" /tmp/server.log | head
echo "failures: $fails"
[ $fails -eq 0 ]
