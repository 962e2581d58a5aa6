# Sourced by run.sh (busybox sh; needs pass/fail, $srv, $want, /tmp/src, /tmp/long, mrs and
# $base): the device removed mid-transfer with `rdma link delete rxe0`, then added again.
# 7.x's rxe disassociates its users (drivers/infiniband/sw/rxe/rxe_verbs.c:243): the kernel
# frees their queue pairs, CQs, PDs and registrations itself, the delete does not wait for
# them, and every RDMA CM id on the device gets DEVICE_REMOVAL. The server closes its
# connections on rxe0 and its listener there; librdmacm then closes the device's context, so
# no descriptor of the removed device (/dev/infiniband/uverbsN "(deleted)") stays open in the
# server. The server serves TCP meanwhile, listens again once `rdma link add` brings rxe0
# back, and serves the next SMB Direct client. A 6.x kernel's rxe (and siw on 7.3 too) cannot
# disassociate: the delete waits, uninterruptibly, until every process has closed the
# device, so the scenario is skipped there. librdmacm notices a removed device only while
# some other device is left (sync_devices_list in librdmacm/cma.c gives up on an empty
# device list): a second device, rxe1 on eth1 (SMBX_GUEST_NIC2=1), stays meanwhile; without
# eth1 the descriptor check is skipped (the context is then closed once a device is back).
# Run once per guest (rxe1 stays).
uverbs_fds() { ls -l /proc/$srv/fd 2>/dev/null | grep -c "/dev/infiniband/uverbs"; }
stale_uverbs() { ls -l /proc/$srv/fd 2>/dev/null | grep -c "/dev/infiniband/uverbs.*(deleted)"; }
case $(uname -r) in
6.* | 5.*)
    echo "SKIP rdma link delete: the $(uname -r) kernel's rxe cannot disassociate its users (the delete would wait for the server)"
    ;;
*)
    again0=$(grep -c "listening for SMB Direct again" /tmp/server.log)
    other=
    ip link show eth1 >/dev/null 2>&1 && rdma link add rxe1 type rxe netdev eth1 && other=rxe1
    smbx put --transport rdma /tmp/long smb://alice@10.0.2.15/share/big3 >/tmp/linkdel.log 2>&1 &
    cl=$!
    i=0
    while [ "$(mrs)" -le "$base" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
    during=$(mrs)
    open=$(uverbs_fds)
    # In the background, bounded: a delete that waits for its users cannot be interrupted.
    s=$(date +%s)
    rdma link delete rxe0 &
    dp=$!
    i=0
    while kill -0 $dp 2>/dev/null && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.2; done
    if kill -0 $dp 2>/dev/null; then
        del=
        echo "rdma link delete rxe0: still waiting after 60 s"
    else
        wait $dp && del="finished in $(($(date +%s) - s)) s" || del=
    fi
    i=0
    while kill -0 $cl 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.2; done
    kill -0 $cl 2>/dev/null && { echo "link delete: the client still runs after 20 s; killing it"; kill -9 $cl; }
    wait $cl
    crc=$?
    echo "link delete: client exit $crc ($(tail -c 300 /tmp/linkdel.log | tr '\r' '\n' | tail -1))"
    i=0
    while [ "$(stale_uverbs)" -gt 0 ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.2; done
    stale=$(stale_uverbs)
    echo "link delete: the server's uverbs descriptors: $open during the transfer, $stale of the removed device after it"
    ls -l /proc/$srv/fd | grep infiniband
    grep -i "device was removed\|listener was removed\|listening for SMB Direct again" /tmp/server.log | tail -4
    # Mid-transfer: the put had registrations on rxe0 when sampled, or the delete cut it.
    echo "link delete: regions on rxe0 idle $base, sampled during the put ${during:-none}"
    [ -n "$del" ] && { [ "${during:-0}" -gt "$base" ] || [ "$crc" -ne 0 ]; } \
        && pass "rdma link delete mid-transfer: the delete $del" \
        || fail "rdma link delete mid-transfer: the delete finished (${del:-not finished}; client exit $crc)"
    if [ -n "$other" ]; then
        [ "$open" -gt 0 ] && [ "$stale" -eq 0 ] \
            && pass "rdma link delete: the server closed its connection and listener on rxe0 and holds no descriptor of it" \
            || fail "rdma link delete: the server holds no descriptor of rxe0 (uverbs open $open, stale $stale)"
    else
        echo "SKIP rdma link delete: the server holds no descriptor of rxe0 (no second RDMA device added: it needs eth1, SMBX_GUEST_NIC2=1)"
    fi
    kill -0 $srv && timeout 60 smbx ls smb://alice@127.0.0.1:4445/share/ >/dev/null \
        && pass "rdma link delete: the server lives and serves TCP without rxe0" \
        || fail "rdma link delete: the server lives and serves TCP without rxe0"
    if [ -n "$del" ]; then
        rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0 again"
        i=0
        while ! rdma link show rxe0/1 2>/dev/null | grep -q "state ACTIVE" && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.2; done
        i=0
        while [ "$(grep -c "listening for SMB Direct again" /tmp/server.log)" -le "$again0" ] && [ $i -lt 100 ]; do
            i=$((i + 1)); sleep 0.2
        done
        grep "listening for SMB Direct again" /tmp/server.log | tail -1
        [ "$(grep -c "listening for SMB Direct again" /tmp/server.log)" -gt "$again0" ] \
            && pass "rdma link add: the server listens on rxe0 again" \
            || fail "rdma link add: the server listens on rxe0 again"
        rm -f /tmp/back
        if timeout 60 smbx put --transport rdma /tmp/src smb://alice@10.0.2.15/share/next3 \
            && timeout 60 smbx get --transport rdma smb://alice@10.0.2.15/share/next3 /tmp/back \
            && [ "$(sha256sum /tmp/back | cut -d' ' -f1)" = "$want" ]; then
            pass "rdma link delete and add: the next SMB Direct client is served"
        else
            fail "rdma link delete and add: the next SMB Direct client is served"
        fi
        base=$(mrs)
    fi
    # rxe1 stays: the server has no CM id on it, so no DEVICE_REMOVAL would make librdmacm
    # look again and close the context of it opened when the server listed the devices.
    ;;
esac
