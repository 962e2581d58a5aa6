# What the verbs guest tests (verbs_rxe, verbs_siw) share, for busy-box sh in the RDMA test
# guest: the knobs, PASS/FAIL counting, an smbx server on rdma-core verbs over a software RDMA
# device on eth0, and cifs.ko mounting it with the checksum workload.
#
#   . /test/lib/verbs.sh
#   verbs_server rxe|siw        # rxe0/siw0 on eth0, smbx serve (verbs) on it; $srv is its pid
#   cifs_mounts "over rxe"      # cifs.ko rdma mounts at 3.0, 3.0.2, 3.1.1 x $CIFS_MODES
#   echo "failures: $fails"; [ $fails -eq 0 ]

[ -f /test/knobs.env ] && . /test/knobs.env
# cifs.ko's mounts: plain, signed (`sign`) and sealed (`seal`); CIFS_MODES=plain runs fewer.
CIFS_MODES=${CIFS_MODES:-plain sign seal}
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# verbs_server TYPE: adds the device TYPE0 on eth0, writes /srv/smb.conf (TCP on 4445, SMB
# Direct through verbs, share /srv/share, user alice with password "secret"), starts
# `smbx serve` logging to /tmp/server.log and waits until it listens for SMB Direct.
verbs_server() {
    rdma link add "${1}0" type "$1" netdev eth0 || { echo "FAIL rdma link add"; exit 1; }
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
    RUST_LOG=info smbx serve --config /srv/smb.conf >/tmp/server.log 2>&1 &
    srv=$!
    _i=0
    while ! grep -q "listening for SMB Direct" /tmp/server.log; do
        _i=$((_i + 1)); [ $_i -gt 100 ] && break; sleep 0.2
    done
}

# cifs_mounts LABEL: the kernel's SMB Direct client (cifs.ko) mounts the verbs server at 3.0,
# 3.0.2 and 3.1.1 in each of $CIFS_MODES (plain, sign, seal) and runs the checksum workload
# through the mount (tests/guest/lib/checksum.sh); it dials 5445, then 445 where RoCE listens.
cifs_mounts() {
    . /test/lib/checksum.sh
    mkdir -p /mnt/c
    for v in 3.0 3.0.2 3.1.1; do
        for m in $CIFS_MODES; do
            mode=${m#plain}
            name="cifs.ko rdma vers=$v $m $1"
            # Sealed, cifs.ko (6.12) sizes its I/O from MaxReadWriteSize alone (1 MiB): it
            # subtracts the header and TRANSFORM_HEADER only when it also signs
            # (smb3_negotiate_wsize/rsize, fs/smb/client/smb2ops.c:521 and 572), so
            # a sealed 1 MiB WRITE is more than the server's MaxFragmentedSize and cifs
            # refuses to send it ("smbd_send: payload size 1048740 > max size 1048576"),
            # and a sealed 1 MiB READ response more than its own 173910 bytes. 128 KiB fits.
            [ "$m" = seal ] && mode="$mode,rsize=131072,wsize=131072"
            dmesg -c >/dev/null
            if mount -t cifs //10.0.2.15/share /mnt/c \
                -o rdma,vers=$v,ip=10.0.2.15,username=alice,password=secret,cache=none,noserverino${mode:+,$mode}; then
                if out=$(checksum_fs /mnt/c $(size_bytes ${BYTES:-8M}) 8388608); then pass "$name: ${out#checksum: }"
                else fail "$name: $out"; tail -5 /tmp/server.log; fi
                umount /mnt/c
            else
                fail "$name (mount)"
            fi
            dmesg | grep -i "smbd\|cifs\|rdma" | tail -8
        done
    done
}
