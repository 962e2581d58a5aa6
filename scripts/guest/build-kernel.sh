#!/usr/bin/env bash
# Prints the path of a guest kernel with soft-iWARP (siw), soft-RoCE (rxe), cifs with SMB Direct
# and ksmbd with SMB Direct built in, building it when no cached copy exists.
#
# Order: $SMBX_GUEST_KERNEL; ../shared/guest/bzImage-rdma-6.1 beside the checkout (a prebuilt
# cache of this same recipe, checked against its sha256); $cache/bzImage-rdma; else build it from
# Debian's linux-source-6.1 (defconfig + kvm_guest.config + the options below; about 15-25
# minutes on 2 cores) into $cache. Progress goes to stderr, the path to stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${SMBX_CI_CACHE:-/var/cache/smbx-ci}/guest
mkdir -p "$cache"

if [ -n "${SMBX_GUEST_KERNEL:-}" ]; then
    echo "$SMBX_GUEST_KERNEL"
    exit 0
fi
for shared in "$root/../shared/guest" /work/shared/guest; do
    k="$shared/bzImage-rdma-6.1"
    if [ -f "$k" ] && [ -f "$k.sha256" ]; then
        want=$(awk '{print $1}' "$k.sha256")
        have=$(sha256sum "$k" | awk '{print $1}')
        if [ "$want" = "$have" ]; then
            echo "$k"
            exit 0
        fi
        echo "build-kernel: $k does not match its sha256; ignoring it" >&2
    fi
done
if [ -f "$cache/bzImage-rdma" ]; then
    echo "$cache/bzImage-rdma"
    exit 0
fi

echo "build-kernel: building the guest kernel into $cache (15-25 minutes)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends linux-source-6.1 bc flex bison libelf-dev libssl-dev \
    cpio xz-utils make gcc >&2
cd "$cache"
if [ ! -d linux-src ]; then
    mkdir linux-src.tmp
    tar -xf /usr/src/linux-source-6.1.tar.xz -C linux-src.tmp --strip-components=1
    mv linux-src.tmp linux-src
fi
cd linux-src
make -s defconfig >/dev/null
make -s kvm_guest.config >/dev/null
for o in INFINIBAND INFINIBAND_USER_ACCESS INFINIBAND_ADDR_TRANS RDMA_SIW RDMA_RXE CIFS CIFS_SMB_DIRECT \
    SMB_SERVER SMB_SERVER_SMBDIRECT CRYPTO_CMAC CRYPTO_CCM CRYPTO_GCM CRYPTO_SHA512 CRYPTO_ECB CRYPTO_MD4 \
    CRYPTO_MD5 CRYPTO_HMAC CRYPTO_ARC4 CRYPTO_DES NLS_UTF8 VIRTIO_NET VIRTIO_PCI DEVTMPFS TMPFS \
    IPV6 NET_UDP_TUNNEL KEYS DNS_RESOLVER FSCACHE NETFS_SUPPORT; do
    scripts/config -e "$o"
done
scripts/config -d CIFS_DEBUG2 -d DEBUG_INFO -d DEBUG_INFO_DWARF5 -d DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT -d DEBUG_INFO_BTF
make -s olddefconfig >/dev/null
for o in RDMA_SIW RDMA_RXE CIFS_SMB_DIRECT SMB_SERVER_SMBDIRECT; do
    grep -q "^CONFIG_$o=y" .config || { echo "build-kernel: CONFIG_$o not set" >&2; exit 1; }
done
make -s -j"$(nproc)" bzImage >"$cache/kbuild.log" 2>&1
cp arch/x86/boot/bzImage "$cache/bzImage-rdma.tmp"
mv "$cache/bzImage-rdma.tmp" "$cache/bzImage-rdma"
echo "$cache/bzImage-rdma"
