#!/usr/bin/env bash
# Prints the path of the guest's base initramfs, building it when absent: busybox, rdma-core's
# libibverbs and librdmacm with the rxe and siw providers, iproute2's rdma(8) and ip(8), the
# C library, all unpacked from Debian packages (apt-get download, cached under
# $SMBX_CI_CACHE/guest/debs), plus /init (init.sh beside this script). The smbx binary and the
# test to run are not in it: run.sh appends them as a second cpio archive.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${SMBX_CI_CACHE:-/var/cache/smbx-ci}/guest
PACKAGES=(busybox-static libc6 libgcc-s1 libibverbs1 librdmacm1 ibverbs-providers libnl-3-200
    libnl-route-3-200 iproute2 libmnl0 libbsd0 libmd0 libcap2 libelf1 zlib1g libbpf1 libtirpc3
    libdb5.3 libselinux1 libpcre2-8-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libcom-err2
    libkrb5support0 libkeyutils1 libssl3 ibverbs-utils rdmacm-utils libglib2.0-0
    libffi8 libmount1 libblkid1 libnl-genl-3-200 libzstd1 liblzma5 libcap-ng0 libaudit1)
# From bookworm-backports: bookworm's ksmbd-tools 3.4.7 leaves the share config response's
# payload_sz at 0, which the 6.1 guest kernel's ksmbd (6.1.192) rejects, so every tree connect
# fails (BAD_NETWORK_NAME unsigned, ACCESS_DENIED signed, for cifs.ko, smbclient and smbx
# alike); 3.5.2 fills it and links against the same bookworm libraries.
BACKPORTS=(ksmbd-tools)
key=$( (printf '%s\n' "${PACKAGES[@]}" "${BACKPORTS[@]}"; cat "$here/init.sh" "$0") | sha256sum | cut -c1-16)
out="$cache/base-$key.cpio.gz"
if [ -f "$out" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$cache/debs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(
    cd "$cache/debs"
    missing=()
    for p in "${PACKAGES[@]}"; do
        ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "initramfs: apt-get download ${missing[*]}" >&2
        apt-get download "${missing[@]}" >&2 || {
            apt-get update -q >&2
            apt-get download "${missing[@]}" >&2
        }
    fi
    # bookworm-backports through a private apt configuration (the host's sources stay as
    # they are): its own sources list and package lists under the cache.
    missing=()
    for p in "${BACKPORTS[@]}"; do
        ls "${p}"_*~bpo12*.deb >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        bpo="$cache/apt-bpo"
        mkdir -p "$bpo/lists/partial" "$bpo/cache/archives/partial"
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
            "http://deb.debian.org/debian bookworm-backports main" >"$bpo/sources.list"
        apt_bpo=(-o "Dir::Etc::SourceList=$bpo/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=$bpo/lists" -o "Dir::Cache=$bpo/cache")
        echo "initramfs: apt-get download ${missing[*]} (bookworm-backports)" >&2
        apt-get "${apt_bpo[@]}" update -q >&2
        for p in "${missing[@]}"; do
            apt-get "${apt_bpo[@]}" download "$p/bookworm-backports" >&2
        done
    fi
)
root="$work/root"
mkdir -p "$root"
# Only the packages named above: the cache may also hold bookworm's ksmbd-tools.
for p in "${PACKAGES[@]}"; do
    for d in "$cache/debs/${p}"_*.deb; do
        case $d in *~bpo*) ;; *) dpkg-deb -x "$d" "$root" ;; esac
    done
done
for p in "${BACKPORTS[@]}"; do
    for d in "$cache/debs/${p}"_*~bpo*.deb; do
        dpkg-deb -x "$d" "$root"
    done
done
# A merged /usr as in bookworm: /bin, /sbin, /lib and /lib64 point into /usr.
for d in bin sbin lib lib64; do
    if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
        mkdir -p "$root/usr/$d"
        cp -a "$root/$d/." "$root/usr/$d/"
        rm -rf "${root:?}/$d"
    fi
    mkdir -p "$root/usr/$d"
    ln -sfn "usr/$d" "$root/$d"
done
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/locale" "$root/usr/share/zoneinfo"
# busybox applets for everything iproute2 and the others do not provide.
for a in $("$root/usr/bin/busybox" --list); do
    [ -e "$root/usr/bin/$a" ] || [ -e "$root/usr/sbin/$a" ] || ln -s busybox "$root/usr/bin/$a"
done
mkdir -p "$root"/{proc,sys,dev,tmp,run,mnt,etc,root,var/run}
install -m 0755 "$here/init.sh" "$root/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
echo "127.0.0.1 localhost" >"$root/etc/hosts"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
