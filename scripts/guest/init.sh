#!/bin/sh
# /init of the RDMA test guest: mounts, brings up eth0 (qemu user networking: 10.0.2.15/24,
# the host is 10.0.2.2), runs /test/run.sh from the overlay archive, prints its exit status
# as "GUEST-EXIT <n>" and powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
ulimit -l unlimited
cd /test
sh /test/run.sh
rc=$?
echo "GUEST-EXIT $rc"
sync
poweroff -f
