# In the RDMA test guest (scripts/guest/run.sh): smbx server and client both on
# rdma-core verbs over the kernel's soft-RoCE (rxe) on eth0: SMB Direct negotiate,
# a logon, files written and read back (checksums compared) at every dialect from
# 3.0, signed and sealed. Prints "PASS name" / "FAIL name" lines; exits non-zero on
# any failure.
set -u
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

rdma link add rxe0 type rxe netdev eth0 || { echo "FAIL rdma link add"; exit 1; }
mkdir -p /srv/share
cat >/srv/smb.conf <<CONF
[global]
    smb ports = 4445
    smb direct = yes
    smb direct provider = verbs
    passdb backend = smbpasswd:/srv/smbpasswd
    map to guest = never
[share]
    path = /srv/share
    read only = no
CONF
echo secret | smbx user add --config /srv/smb.conf --stdin alice >/dev/null || fail "user add"
smbx rdma && pass "smbx rdma lists" || fail "smbx rdma lists"
smbx rdma | grep -q "rxe0.*RoCE" && pass "smbx rdma names rxe0 RoCE" || fail "smbx rdma names rxe0 RoCE"
RUST_LOG=info smbx serve --config /srv/smb.conf >/tmp/server.log 2>&1 &
srv=$!
i=0
while ! grep -q "listening for SMB Direct" /tmp/server.log; do
    i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.2
done
cat /tmp/server.log
grep -q "listening for SMB Direct.*verbs (rxe0, RoCE)" /tmp/server.log \
    && pass "server listens through verbs on rxe0" || fail "server listens through verbs on rxe0"
grep "listening for SMB Direct" /tmp/server.log | grep -q ":445" \
    && pass "RoCE listener on 445" || fail "RoCE listener on 445"

export SMBX_PASSWORD=secret SMBX_RDMA_PROVIDER=verbs
dd if=/dev/urandom of=/tmp/src bs=1k count=3000 2>/dev/null
want=$(sha256sum /tmp/src | cut -d' ' -f1)
for d in 3.0 3.0.2 3.1.1; do
    for mode in "" --sign --encrypt; do
        name="verbs/rxe $d ${mode:-plain}"
        rm -f /tmp/back
        if smbx put --transport rdma --dialect $d $mode /tmp/src "smb://alice@10.0.2.15/share/f-$d$mode" \
            && smbx get --transport rdma --dialect $d $mode "smb://alice@10.0.2.15/share/f-$d$mode" /tmp/back \
            && [ "$(sha256sum /tmp/back | cut -d' ' -f1)" = "$want" ]; then
            pass "$name"
        else
            fail "$name"
        fi
    done
done
# The kernel's SMB Direct client (cifs.ko, FRMR registrations, RDMA_V1_INVALIDATE)
# against the verbs server; it dials 5445, then 445 where RoCE listens.
mkdir -p /mnt/c
for v in 3.0 3.1.1; do
    name="cifs.ko rdma vers=$v over rxe"
    if mount -t cifs //10.0.2.15/share /mnt/c \
        -o rdma,vers=$v,ip=10.0.2.15,username=alice,password=secret,cache=none,noserverino; then
        cp /tmp/src /mnt/c/cifs-$v && cp /mnt/c/cifs-$v /tmp/cifs-back && cp /mnt/c/f-3.0 /tmp/cifs-b2 \
            && [ "$(sha256sum /tmp/cifs-back | cut -d' ' -f1)" = "$want" ] \
            && [ "$(sha256sum /tmp/cifs-b2 | cut -d' ' -f1)" = "$want" ] \
            && [ "$(sha256sum /srv/share/cifs-$v | cut -d' ' -f1)" = "$want" ] \
            && mv /mnt/c/cifs-$v /mnt/c/cifs-$v.moved && rm /mnt/c/cifs-$v.moved \
            && [ ! -e /srv/share/cifs-$v.moved ] && pass "$name" || fail "$name"
        umount /mnt/c
    else
        fail "$name (mount)"
        dmesg | grep -i "cifs\|smbd" | tail -10
    fi
done
# The server saw the files through SMB Direct: compare on disk too.
[ "$(sha256sum /srv/share/f-3.1.1--encrypt | cut -d' ' -f1)" = "$want" ] \
    && pass "file on the server's disk" || fail "file on the server's disk"
# Faults: the client killed mid-transfer. (Removing the device with `rdma link delete`
# is not tested: rxe and siw cannot take a device from processes that have it open, so
# the kernel waits until every process using it exits.)
# Memory regions on the device (`rdma resource show`: "... mr N ..."), all processes.
mrs() { rdma resource show 2>/dev/null | sed -n 's/.* mr \([0-9]*\).*/\1/p' | head -1; }
base=$(mrs)
dd if=/dev/urandom of=/tmp/big bs=1M count=48 2>/dev/null
smbx put --transport rdma /tmp/big smb://alice@10.0.2.15/share/big >/dev/null 2>&1 &
cl=$!
i=0
while [ "$(mrs)" -le "$base" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
during=$(mrs)
sleep 1
kill -9 $cl 2>/dev/null
wait $cl 2>/dev/null
i=0
while [ "$(mrs)" -gt "$base" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.2; done
after=$(mrs)
echo "MRs on rxe0: idle $base, during a transfer $during, after the client was killed $after"
[ "$during" -gt "$base" ] && [ "$after" -eq "$base" ] \
    && pass "killed client: the server released its registrations" || fail "killed client: the server released its registrations"
rm -f /tmp/back
smbx put --transport rdma /tmp/src smb://alice@10.0.2.15/share/next && smbx get --transport rdma smb://alice@10.0.2.15/share/next /tmp/back \
    && [ "$(sha256sum /tmp/back | cut -d' ' -f1)" = "$want" ] \
    && pass "killed client: the next client is served" || fail "killed client: the next client is served"
kill -0 $srv && smbx ls smb://alice@127.0.0.1:4445/share/ >/dev/null \
    && pass "the server lives and serves TCP" || fail "the server lives and serves TCP"
grep -i "error\|panic\|warn" /tmp/server.log | head -20
kill $srv
echo "failures: $fails"
[ $fails -eq 0 ]
