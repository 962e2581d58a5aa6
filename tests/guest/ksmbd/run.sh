# In the RDMA test guest (scripts/guest/run.sh): the kernel's SMB server (ksmbd, with
# SMB Direct built in) on the soft RDMA device named in /test/dev.env (DEV=rxe|siw),
# smbx's client on rdma-core verbs against it, running the checksum workload
# (examples/checksum) at every SMB3 dialect, plain, signed and sealed. Userspace is
# Debian bookworm's ksmbd-tools. Prints PASS/FAIL lines; non-zero on any failure.
set -u
[ -f /test/knobs.env ] && . /test/knobs.env
DEV=rxe
[ -f /test/dev.env ] && . /test/dev.env
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

rdma link add ${DEV}0 type $DEV netdev eth0 || { echo "FAIL rdma link add"; exit 1; }
mkdir -p /srv/k /etc/ksmbd /run /var/run
cat >/etc/ksmbd/ksmbd.conf <<CONF
[global]
    server signing = auto
[share]
    path = /srv/k
    read only = no
    writeable = yes
    valid users = alice
CONF
ksmbd.adduser -a alice -p secret >/dev/null || fail "ksmbd.adduser"
ksmbd.mountd -v -n >/tmp/mountd.log 2>&1 &
i=0
while [ ! -e /sys/class/ksmbd-control/kill_server ] && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.2; done
sleep 2
dmesg | grep -i "ksmbd\|smb_direct" | tail -10
cat /tmp/mountd.log | tail -5
export SMBX_PASSWORD=secret SMBX_RDMA_PROVIDER=verbs
if out=$(smbx ls smb://alice@10.0.2.15/share/ 2>&1); then pass "smbx client -> ksmbd over TCP"
else fail "smbx client -> ksmbd over TCP: $out"; tail -20 /tmp/mountd.log; fi
for d in 3.0 3.0.2 3.1.1; do
    for mode in "" --sign --seal; do
        name="smbx verbs client -> ksmbd over $DEV $d ${mode:-plain}"
        if out=$(checksum "smb://alice@10.0.2.15/share?transport=rdma" --dialect $d $mode \
            --bytes ${BYTES:-8M} --span 8M 2>&1); then
            pass "$name: ${out#checksum: }"
        else
            fail "$name: $out"
            dmesg | grep -i "ksmbd\|smb_direct" | tail -8
        fi
    done
done
ksmbd.control --shutdown >/dev/null 2>&1
echo "failures: $fails"
[ $fails -eq 0 ]
