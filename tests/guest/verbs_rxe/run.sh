# In the RDMA test guest (scripts/guest/run.sh): smbx server and client both on
# rdma-core verbs over the kernel's soft-RoCE (rxe) on eth0: SMB Direct negotiate,
# a logon, files written and read back (checksums compared) at every dialect from
# 3.0, signed and sealed. Prints "PASS name" / "FAIL name" lines; exits non-zero on
# any failure.
set -u
. /test/lib/verbs.sh
# A second NIC without an RDMA device (run.sh's SMBX_GUEST_NIC2=1): eth1 on 10.0.3.15.
if ip link show eth1 >/dev/null 2>&1; then
    ip link set eth1 up && ip addr add 10.0.3.15/24 dev eth1
fi
verbs_server rxe
smbx rdma && pass "smbx rdma lists" || fail "smbx rdma lists"
smbx rdma | grep -q "rxe0.*RoCE" && pass "smbx rdma names rxe0 RoCE" || fail "smbx rdma names rxe0 RoCE"
# The limits in use: the device's, what an SMB Direct queue pair gets there, and the
# pools smbx sizes from them.
smbx rdma | grep "^rxe0 \(limits\|queue pair\|pools\)" | sed 's/^/LIMITS /'
smbx rdma | grep -q "^rxe0 limits: max_qp_wr [1-9][0-9]*, max_sge [1-9]" \
    && smbx rdma | grep -q "^rxe0 queue pair: [1-9][0-9]* send and [1-9][0-9]* receive work requests.*max_inline_data [0-9]" \
    && smbx rdma | grep -q "^rxe0 pools per connection: [1-9][0-9]* receive credits" \
    && smbx rdma --json | grep -q '"rdma_work_requests":[1-9]' \
    && pass "smbx rdma shows rxe0's limits and pools" || fail "smbx rdma shows rxe0's limits and pools"
cat /tmp/server.log
grep -q "listening for SMB Direct.*verbs (rxe0, RoCE)" /tmp/server.log \
    && pass "server listens through verbs on rxe0" || fail "server listens through verbs on rxe0"
grep "listening for SMB Direct" /tmp/server.log | grep -q ":445" \
    && pass "RoCE listener on 445" || fail "RoCE listener on 445"
# FSCTL_QUERY_NETWORK_INTERFACE_INFO flags the interface with an RDMA device (eth0, rxe0)
# RDMA-capable and the one without (eth1) not, as the smbx client reads it.
if ip link show eth1 >/dev/null 2>&1; then
    ifs=$(SMBX_PASSWORD=secret smbx rdma --server smb://alice@10.0.2.15:4445/share 2>&1)
    echo "$ifs"
    echo "$ifs" | grep -q "^10\.0\.2\.15 .*RDMA$" && echo "$ifs" | grep "^10\.0\.3\.15 " | grep -qv "RDMA$" \
        && pass "FSCTL_QUERY_NETWORK_INTERFACE_INFO: eth0 (rxe0) RDMA-capable, eth1 not" \
        || fail "FSCTL_QUERY_NETWORK_INTERFACE_INFO: eth0 (rxe0) RDMA-capable, eth1 not"
else
    echo "SKIP FSCTL_QUERY_NETWORK_INTERFACE_INFO check: no eth1 (SMBX_GUEST_NIC2=1)"
fi

export SMBX_PASSWORD=secret SMBX_RDMA_PROVIDER=verbs
dd if=/dev/urandom of=/tmp/src bs=1k count=3000 2>/dev/null
want=$(sha256sum /tmp/src | cut -d' ' -f1)
# The checksum workload (examples/checksum: random offsets, 1 B to 8 MiB, SHA-256,
# rename, delete) at every SMB3 dialect, plain, signed and sealed.
BYTES=${BYTES:-16M}
for d in 3.0 3.0.2 3.1.1; do
    for mode in "" --sign --seal; do
        name="verbs/rxe smbx client -> smbx server $d ${mode:-plain}"
        if out=$(checksum "smb://alice@10.0.2.15/share?transport=rdma" --dialect $d $mode \
            --bytes $BYTES --span 12M 2>&1); then
            pass "$name: ${out#checksum: }"
        else
            fail "$name: $out"
        fi
    done
done
smbx put --transport rdma /tmp/src smb://alice@10.0.2.15/share/f-3.0 \
    && smbx get --transport rdma smb://alice@10.0.2.15/share/f-3.0 /tmp/back \
    && [ "$(sha256sum /tmp/back | cut -d' ' -f1)" = "$want" ] \
    && pass "verbs/rxe smbx put and get" || fail "verbs/rxe smbx put and get"
# The kernel's SMB Direct client (cifs.ko, FRMR registrations, RDMA_V1_INVALIDATE)
# against the verbs server, the same workload through the mount.
cifs_mounts "over rxe"
# The server saw the files through SMB Direct: compare on disk too.
[ "$(sha256sum /srv/share/f-3.0 | cut -d' ' -f1)" = "$want" ] \
    && pass "file on the server's disk" || fail "file on the server's disk"
# smbx bench at 4 KiB (random reads, 4 outstanding) and 512 KiB (sequential reads and
# writes, 4 outstanding), TCP and SMB Direct on verbs over rxe, in this guest and this run
# (TCG: the figures only indicate; rxe is software RoCE on the same emulated CPUs).
dd if=/dev/urandom of=/srv/share/bench bs=1M count=32 2>/dev/null
bench() { # transport flags -> "MiB/s IOPS avg-ms"
    if [ "$1" = rdma ]; then url="smb://alice@10.0.2.15/share/bench"; t="--transport rdma"
    else url="smb://alice@10.0.2.15:4445/share/bench"; t=""; fi
    smbx bench $2 -d${BENCH_SECS:-5} -W1 $t "$url" 2>/dev/null \
        | awk -F'|' '/^total:/ { gsub(/ /, ""); print $4, $5, $6; exit }'
}
for spec in "4K reads:-b4K -o4 -r -w0" "512K reads:-b512K -o4 -s -w0" "512K writes:-b512K -o4 -s -w100"; do
    what=${spec%%:*}; flags=${spec#*:}
    tcp=$(bench tcp "$flags"); rdma=$(bench rdma "$flags")
    set -- $tcp; tm=${1:-0}; ti=${2:-0}; tl=${3:-0}
    set -- $rdma; rm_=${1:-0}; ri=${2:-0}; rl=${3:-0}
    ratio=$(awk -v a="$rm_" -v b="$tm" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
    echo "BENCH $what: TCP $tm MiB/s $ti IOPS ${tl} ms avg | SMB Direct (verbs/rxe) $rm_ MiB/s $ri IOPS ${rl} ms avg | SMB Direct/TCP $ratio"
    [ "$tm" != 0 ] && [ "$rm_" != 0 ] && pass "bench $what over TCP and verbs/rxe" || fail "bench $what over TCP and verbs/rxe"
done
# No registration per I/O in steady state: the server's memory regions on rxe0 (its
# registered payload pool, receive and send buffers) are the same ones at two moments
# of a 512 KiB read and write load over SMB Direct (the client registers each buffer it
# exposes, so only the server's are compared: rdma names the thread that registered).
srv_mrs() {
    tids=" $(ls /proc/$srv/task | tr '\n' ' ')"
    rdma resource show mr 2>/dev/null | while read -r l; do
        p=$(echo "$l" | sed -n 's/.* pid \([0-9]*\) .*/\1/p')
        case "$tids" in *" $p "*) echo "$l" | sed -n 's/.*mrn \([0-9]*\).*/\1/p' ;; esac
    done | sort -n | tr '\n' ' '
}
# Memory regions on rxe0 (`rdma resource show`: "N: rxe0: ... mr N ..."), all processes
# (linkdel.sh adds rxe1).
mrs() { rdma resource show 2>/dev/null | sed -n 's/.* rxe0: .* mr \([0-9]*\).*/\1/p' | head -1; }
idle0=$(mrs)
smbx bench -b512K -o4 -s -w50 -d60 -W0 --transport rdma smb://alice@10.0.2.15/share/bench >/dev/null 2>&1 &
bl=$!
i=0
while [ -z "$(srv_mrs)" ] && [ $i -lt 60 ]; do i=$((i + 1)); sleep 0.5; done
sleep 3; m1=$(srv_mrs); sleep 3; m2=$(srv_mrs)
kill $bl 2>/dev/null; wait $bl 2>/dev/null
# The killed bench's registrations (its own and the server's for its connection) go
# away before the fault tests take their idle count (a count taken while they drain
# made the fault tests compare against a region that was already going).
i=0
while [ "$(mrs)" -gt "$idle0" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.2; done
echo "MRs of the server under a 512K read/write load: [$m1] then [$m2]"
[ -n "$m1" ] && [ "$m1" = "$m2" ] \
    && pass "steady state: the server registers nothing per I/O" \
    || { rdma resource show mr | head -20; fail "steady state: the server registers nothing per I/O"; }

# Faults: the client killed mid-transfer; the device removed mid-transfer (linkdel.sh);
# the link under the device down mid-transfer.
base=$(mrs)
[ "$base" -le "$idle0" ] && pass "stopped bench: its registrations were released" \
    || fail "stopped bench: its registrations were released ($base regions, $idle0 before it)"
# A sparse 1 GiB source (no guest memory), as for the link-down fault below: a 48 MiB
# one could come and go between two looks at the regions once SMB Direct got faster
# (CI on 9b29158: "during a transfer 0").
dd if=/dev/zero of=/tmp/long bs=1M count=0 seek=1024 2>/dev/null
smbx put --transport rdma /tmp/long smb://alice@10.0.2.15/share/big >/tmp/killed.log 2>&1 &
cl=$!
i=0
while [ "$(mrs)" -le "$base" ] && kill -0 $cl 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
during=$(mrs)
kill -0 $cl 2>/dev/null || echo "killed client: the put had already ended ($(tail -1 /tmp/killed.log))"
sleep 1
kill -9 $cl 2>/dev/null
wait $cl 2>/dev/null
i=0
while [ "$(mrs)" -gt "$base" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.2; done
after=$(mrs)
echo "MRs on rxe0: idle $base, during a transfer $during, after the client was killed $after"
# At or below the idle count: the bench killed just before may still have had a
# connection closing when the idle count was read (CI on 7.3: idle 1, after 0).
[ "$during" -gt "$base" ] && [ "$after" -le "$base" ] \
    && pass "killed client: the server released its registrations" || fail "killed client: the server released its registrations"
rm -f /tmp/back
smbx put --transport rdma /tmp/src smb://alice@10.0.2.15/share/next && smbx get --transport rdma smb://alice@10.0.2.15/share/next /tmp/back \
    && [ "$(sha256sum /tmp/back | cut -d' ' -f1)" = "$want" ] \
    && pass "killed client: the next client is served" || fail "killed client: the next client is served"
# `rdma link delete rxe0` mid-transfer, then `rdma link add rxe0` (7.x guest kernels).
. /test/linkdel.sh
# Faults: the link under rxe0 goes down mid-transfer (the netdev taken down, rxe0 left),
# then up again.
rm -f /tmp/back
# The sparse 1 GiB source: still moving when the link goes down 2 s in.
smbx put --transport rdma /tmp/long smb://alice@10.0.2.15/share/big2 >/tmp/linkdown.log 2>&1 &
cl=$!
i=0
while [ "$(mrs)" -le "$base" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
# Past the SMB Direct negotiation (a first region appears while it runs; a link cut
# there leaves the server a connection not yet negotiated, which it may keep longer).
sleep 2
during=$(mrs)
ip link set eth0 down
i=0
while kill -0 $cl 2>/dev/null && [ $i -lt 150 ]; do i=$((i + 1)); sleep 0.2; done
# The client's own SMB Direct keepalive (after 10 s of silence, answered within 5 s)
# finds the server gone: the put fails by itself, with an error, well within 30 s.
if kill -0 $cl 2>/dev/null; then
    kill -9 $cl
    wait $cl
    fail "link down: the client gave up by itself within 30 s (it still ran; killed)"
else
    wait $cl
    rc=$?
    echo "link down: client exit $rc after about $((i / 5)) s ($(tail -1 /tmp/linkdown.log))"
    [ $rc -ne 0 ] && pass "link down: the client gave up by itself within 30 s" \
        || fail "link down: the client gave up by itself within 30 s (it exited 0)"
fi
ip link set eth0 up
i=0
while [ "$(mrs)" -gt "$base" ] && [ $i -lt 150 ]; do i=$((i + 1)); sleep 0.2; done
after=$(mrs)
echo "MRs on rxe0: idle $base, during a transfer $during, after the link went down $after"
# rxe leaves the queue pairs of a downed port connected: the server's SMB Direct
# keepalive (after 10 s of silence, answered within 5 s) finds the client gone.
[ "$during" -gt "$base" ] && [ "$after" -le "$base" ] \
    && pass "link down: the server released the registrations" \
    || fail "link down: the server released the registrations"
i=0
while ! rdma link show rxe0/1 | grep -q "state ACTIVE" && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.2; done
ip route add default via 10.0.2.2 2>/dev/null
# rdma-core's rping is the control: after eth0 went down and up under rxe0, this guest
# kernel (6.1, 6.12.117 and 7.3.4 too) connects no RDMA CM client over rxe0, not even to a listener made after
# the link came back; the next smbx client then counts as a failure only when rping
# connects (or with STRICT_LINK=1).
rping -s -a 10.0.2.15 -p 9999 >/dev/null 2>&1 &
rp=$!
sleep 1
if timeout 20 rping -c -a 10.0.2.15 -p 9999 -C 1 >/dev/null 2>&1; then rping_ok=yes; else rping_ok=; fi
kill $rp 2>/dev/null
echo "link down and up: rping over rxe0 ${rping_ok:+connects}${rping_ok:-does not connect}"
if timeout 60 smbx put --transport rdma /tmp/src smb://alice@10.0.2.15/share/next2 \
    && timeout 60 smbx get --transport rdma smb://alice@10.0.2.15/share/next2 /tmp/back \
    && [ "$(sha256sum /tmp/back | cut -d' ' -f1)" = "$want" ]; then
    pass "link down and up: the next client is served"
elif [ -z "$rping_ok" ] && [ -z "${STRICT_LINK:-}" ]; then
    echo "KNOWN-FAIL link down and up: the next client is served (rping cannot connect over rxe0 either: the guest kernel; STRICT_LINK=1 counts it)"
else
    fail "link down and up: the next client is served"
fi
kill -0 $srv && timeout 60 smbx ls smb://alice@127.0.0.1:4445/share/ >/dev/null \
    && pass "the server lives and serves TCP" || fail "the server lives and serves TCP"
grep -i "error\|panic\|warn" /tmp/server.log | head -20
kill $srv
echo "failures: $fails"
[ $fails -eq 0 ]
