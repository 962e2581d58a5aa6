#!/usr/bin/env bash
# Prints the path of a guest kernel with soft-iWARP (siw), soft-RoCE (rxe), cifs with SMB Direct
# and ksmbd with SMB Direct built in, building it when no cached copy exists.
#
# The kernel comes from a Debian linux-source package: SMBX_GUEST_LINUX picks the series,
# 7.3 (the default: trixie-backports' linux-source-7.3, version 7.3.4-1~bpo13+1) or 6.12
# (trixie's linux-source-6.12, version 6.12.117-1, whose ksmbd breaks signed and sealed SMB
# Direct: tests/guest/ksmbd/run.sh); LINUX_SOURCE_SUITE and LINUX_SOURCE_VERSION
# override the suite and the version (when the suite no longer serves that version, its current
# one is taken). Configured from `make tinyconfig` plus kernel.config beside this script (every
# line of it checked in the result) and built with `nice -n 19 make -j2`: 957 CPU seconds cold
# for 7.3 with the download and unpacking (29 minutes niced beside four busy engineers), 711
# for 6.12 (about 6 minutes on 2 idle cores; 44 minutes niced beside six busy engineers). The
# source package comes through a private apt configuration per suite under the cache (the
# host's sources stay as they are; nothing is installed from trixie). Cached as
# $cache/bzImage-<version>-<config hash>; the source tree stays in $cache/linux-<version> so a
# changed kernel.config rebuilds incrementally. $SMBX_GUEST_KERNEL overrides all of it.
# Progress goes to stderr, the path to stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${SMBX_CI_CACHE:-/var/cache/smbx-ci}/guest
series=${SMBX_GUEST_LINUX:-7.3}
case $series in
    6.12) suite=trixie; version_wanted=6.12.117-1 ;;
    7.3) suite=trixie-backports; version_wanted=7.3.4-1~bpo13+1 ;;
    *) suite=trixie-backports; version_wanted= ;;
esac
LINUX_SOURCE_SUITE=${LINUX_SOURCE_SUITE:-$suite}
LINUX_SOURCE_VERSION=${LINUX_SOURCE_VERSION:-$version_wanted}
pkg=linux-source-$series
mkdir -p "$cache"

if [ -n "${SMBX_GUEST_KERNEL:-}" ]; then
    echo "$SMBX_GUEST_KERNEL"
    exit 0
fi
# kernel.config, then kernel-<series>.config where a series needs symbols another lacks
# (6.12's PROC_SYSCTL is 7.3's SYSCTL).
fragments=("$here/kernel.config")
[ -f "$here/kernel-$series.config" ] && fragments+=("$here/kernel-$series.config")
cfg=$( (cat "${fragments[@]}"; sed -n '/^# recipe:/,$p' "$0") | sha256sum | cut -c1-16)
cached() { # the newest cached kernel of this series built from this configuration
    ls -t "$cache"/bzImage-"$series".*-"$cfg" 2>/dev/null | head -1 || true
}
k=$(cached)
if [ -n "$k" ]; then
    echo "$k"
    exit 0
fi
# One build at a time (several engineers and CI share the cache).
exec 9>"$cache/kernel.lock"
flock 9
k=$(cached)
if [ -n "$k" ]; then
    echo "$k"
    exit 0
fi

# recipe: everything below is part of the cache key.
export DEBIAN_FRONTEND=noninteractive
need=()
for p in bc flex bison libelf-dev libssl-dev cpio xz-utils make gcc; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi
# $pkg from $LINUX_SOURCE_SUITE through a private apt configuration: its own sources list and
# package lists under the cache.
tx="$cache/apt-$LINUX_SOURCE_SUITE"
mkdir -p "$tx/lists/partial" "$tx/cache/archives/partial" "$tx/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
    "http://deb.debian.org/debian $LINUX_SOURCE_SUITE main" >"$tx/sources.list"
apt_tx=(-o "Dir::Etc::SourceList=$tx/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$tx/lists" -o "Dir::Cache=$tx/cache")
deb=$(ls "$tx/debs/${pkg}_${LINUX_SOURCE_VERSION:-none}_all.deb" 2>/dev/null || true)
if [ -z "$deb" ]; then
    echo "build-kernel: apt-get download $pkg ($LINUX_SOURCE_SUITE)" >&2
    apt-get "${apt_tx[@]}" update -q >&2
    (cd "$tx/debs" && apt-get "${apt_tx[@]}" download "$pkg=$LINUX_SOURCE_VERSION" >&2) || {
        echo "build-kernel: $LINUX_SOURCE_SUITE has no $pkg $LINUX_SOURCE_VERSION; taking its current one" >&2
        (cd "$tx/debs" && apt-get "${apt_tx[@]}" download "$pkg/$LINUX_SOURCE_SUITE" >&2)
    }
    deb=$(ls -t "$tx"/debs/"${pkg}"_*_all.deb | head -1)
fi
version=$(dpkg-deb -f "$deb" Version)
src="$cache/linux-$version"
if [ ! -d "$src" ]; then
    echo "build-kernel: unpacking $pkg $version" >&2
    rm -rf "$src.tmp"
    mkdir -p "$src.tmp"
    dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/$pkg.tar.xz" \
        | tar -xJ -C "$src.tmp" --strip-components=1
    mv "$src.tmp" "$src"
fi
cd "$src"
make -s tinyconfig >/dev/null
# The fragments: CONFIG_X=y, =n, ="string" or =value, one a line.
while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    o=${line%%=*}; o=${o#CONFIG_}; v=${line#*=}
    case $v in
        y) scripts/config -e "$o" ;;
        n) scripts/config -d "$o" ;;
        \"*\") v=${v#\"}; scripts/config --set-str "$o" "${v%\"}" ;;
        *) scripts/config --set-val "$o" "$v" ;;
    esac
done < <(cat "${fragments[@]}")
make -s olddefconfig >/dev/null
missing=0
while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    case $line in
        *=n) grep -q "^${line%=n}=" .config && { echo "build-kernel: ${line%=n} still set" >&2; missing=1; } ;;
        *) grep -qxF "$line" .config || { echo "build-kernel: $line did not take" >&2; missing=1; } ;;
    esac
done < <(cat "${fragments[@]}")
[ $missing = 0 ] || exit 1
echo "build-kernel: building linux $version (tinyconfig + kernel.config) into $cache; log $cache/kbuild.log" >&2
s=$SECONDS
nice -n 19 make -j2 bzImage >"$cache/kbuild.log" 2>&1 || {
    tail -30 "$cache/kbuild.log" >&2
    exit 1
}
echo "build-kernel: built in $((SECONDS - s)) s" >&2
out="$cache/bzImage-$version-$cfg"
cp arch/x86/boot/bzImage "$out.tmp"
cp .config "$out.config"
mv "$out.tmp" "$out"
echo "$out"
