#!/usr/bin/env bash
# The Debian package test: build the .deb (scripts/build-deb.sh), install it with
# `dpkg -i` into a clean Debian bookworm chroot, start smbx there with the
# documented foreground command (systemd does not run in a chroot), and fetch a
# file from it with the host's smbclient over loopback (the chroot shares the
# host's network).
#
# The chroot comes from debootstrap (--variant=minbase) with the mirror apt uses
# on this machine; its tarball is cached OUTSIDE the checkout, in
# $SMBX_CI_CACHE (default /var/cache/smbx-ci), so later runs only unpack it.
#
#   scripts/test-deb.sh              build, install, serve, fetch, check
#   scripts/test-deb.sh --prepare    only make sure the chroot tarball is cached
#
# Env: SMBX_DEB (use this .deb instead of building one), SMBX_CI_CACHE,
#      SMBX_DEB_MIRROR (default: the first Debian mirror in /etc/apt/sources.list*).
# Needs root (debootstrap, chroot, mount).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CACHE=${SMBX_CI_CACHE:-/var/cache/smbx-ci}
SUITE=bookworm
TARBALL=$CACHE/$SUITE-minbase.tar.gz
PORT=${SMBX_DEB_PORT:-14445}
USER_NAME=debtest
PASSWORD='Deb-Passw0rd!'

log() { echo "test-deb: $*"; }
die() { echo "test-deb: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"

# The Debian mirror apt uses here (deb822 URIs: or one-line deb entries).
mirror() {
    if [ -n "${SMBX_DEB_MIRROR:-}" ]; then
        echo "$SMBX_DEB_MIRROR"
        return
    fi
    local m
    m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
        grep -Eo '(URIs:[[:space:]]*|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)https?://[^[:space:]]+/debian/?([[:space:]]|$)' |
        grep -Eo 'https?://[^[:space:]]+' | grep -v -- '-security' | head -n1)
    echo "${m:-http://deb.debian.org/debian}"
}

prepare() {
    if [ -s "$TARBALL" ]; then
        log "chroot tarball cached: $TARBALL"
        return
    fi
    command -v debootstrap >/dev/null || die "debootstrap missing (scripts/install-deps.sh installs it)"
    mkdir -p "$CACHE"
    local dir
    dir=$(mktemp -d "$CACHE/build.XXXXXX")
    local m
    m=$(mirror)
    log "debootstrap --variant=minbase $SUITE from $m (once; cached in $TARBALL)"
    debootstrap --variant=minbase "$SUITE" "$dir/root" "$m" >"$dir/debootstrap.log" 2>&1 ||
        { tail -n 30 "$dir/debootstrap.log" >&2; rm -rf "$dir"; die "debootstrap failed"; }
    rm -rf "$dir/root/var/cache/apt/archives/"*.deb
    tar -C "$dir/root" -czf "$dir/root.tar.gz" .
    mv "$dir/root.tar.gz" "$TARBALL"
    rm -rf "$dir"
    log "cached $TARBALL ($(du -h "$TARBALL" | cut -f1))"
}

prepare
[ "${1:-}" = "--prepare" ] && exit 0

command -v smbclient >/dev/null || die "smbclient missing (scripts/install-deps.sh installs it)"

DEB=${SMBX_DEB:-}
if [ -z "$DEB" ]; then
    DEB=$(scripts/build-deb.sh | tail -n1)
fi
[ -f "$DEB" ] || die "no package at $DEB"
log "package: $DEB"

WORK=$(mktemp -d /tmp/smbx-deb-test.XXXXXX)
CH=$WORK/root
SERVER_PID=
cleanup() {
    set +e
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -KILL "$SERVER_PID"
    fi
    mountpoint -q "$CH/proc" && umount "$CH/proc"
    mountpoint -q "$CH/dev" && umount "$CH/dev"
    if [ -z "${SMBX_KEEP_TMP:-}" ]; then rm -rf "$WORK"; else log "kept $WORK"; fi
}
trap cleanup EXIT

mkdir -p "$CH"
tar -C "$CH" -xzf "$TARBALL"
mount -t proc proc "$CH/proc"
mount --bind /dev "$CH/dev"
cp "$DEB" "$CH/tmp/smbx.deb"

log "dpkg -i in a clean $SUITE chroot"
cp /etc/resolv.conf "$CH/etc/resolv.conf"
if ! chroot "$CH" dpkg -i /tmp/smbx.deb; then
    # What an administrator does next: apt installs the libraries the package
    # depends on (so a dependency missing from Depends would show below).
    log "dpkg -i left dependencies to install: apt-get -f install"
    chroot "$CH" apt-get update -q >/dev/null || die "apt-get update failed in the chroot"
    DEBIAN_FRONTEND=noninteractive chroot "$CH" apt-get install -y -q -f --no-install-recommends >/dev/null ||
        die "apt-get -f install failed"
fi
chroot "$CH" dpkg-query -W -f='${Status}\n' smbx | grep -q "install ok installed" || die "smbx not installed"
for f in /usr/bin/smbx /etc/smbx/smb.conf /lib/systemd/system/smbx.service /usr/share/man/man1/smbx.1.gz; do
    [ -e "$CH$f" ] || die "$f not installed"
done
grep -qx /etc/smbx/smb.conf "$CH/var/lib/dpkg/info/smbx.conffiles" || die "/etc/smbx/smb.conf is not a conffile"
chroot "$CH" smbx --version
chroot "$CH" smbx testparm /etc/smbx/smb.conf >"$WORK/testparm.out" 2>&1 || { cat "$WORK/testparm.out"; die "testparm refused the packaged smb.conf"; }
if grep -qi warn "$WORK/testparm.out"; then cat "$WORK/testparm.out"; die "the packaged smb.conf has warnings"; fi

# What the README tells an administrator to do, where systemd is not running.
log "smbx user add; a file in the default share; the foreground command"
printf '%s\n' "$PASSWORD" | chroot "$CH" smbx user add --stdin "$USER_NAME" || die "smbx user add failed"
SHARE_DIR=$(awk -F= '/^[[:space:]]*path[[:space:]]*=/{gsub(/[[:space:]]/,"",$2); print $2; exit}' "$CH/etc/smbx/smb.conf")
[ -n "$SHARE_DIR" ] && [ -d "$CH$SHARE_DIR" ] || die "default share directory $SHARE_DIR missing"
head -c 3145728 /dev/urandom >"$CH$SHARE_DIR/hello.bin"
WANT=$(sha256sum <"$CH$SHARE_DIR/hello.bin" | cut -d' ' -f1)

chroot "$CH" smbx serve --config /etc/smbx/smb.conf --port "$PORT" --listen 127.0.0.1 \
    >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/serve.log"; die "smbx serve exited"; }
    sleep 0.1
done

log "smbclient get from the chroot's smbx"
smbclient "//127.0.0.1/share" -p "$PORT" -U "$USER_NAME%$PASSWORD" \
    -c "get hello.bin $WORK/got.bin" >"$WORK/smbclient.log" 2>&1 ||
    { cat "$WORK/smbclient.log" "$WORK/serve.log"; die "smbclient get failed"; }
GOT=$(sha256sum <"$WORK/got.bin" | cut -d' ' -f1)
[ "$GOT" = "$WANT" ] || die "checksum mismatch: got $GOT, want $WANT"

kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=
[ "$status" = 0 ] || { cat "$WORK/serve.log"; die "smbx serve exited with $status after SIGTERM"; }
if grep -q panicked "$WORK/serve.log"; then cat "$WORK/serve.log"; die "panic"; fi

log "dpkg -r and --purge"
chroot "$CH" dpkg --purge smbx >/dev/null || die "dpkg --purge failed"
[ ! -e "$CH/usr/bin/smbx" ] || die "binary left after purge"
[ ! -e "$CH/etc/smbx/smb.conf" ] || die "conffile left after purge"

log "ok: installed in a clean $SUITE chroot, served $SHARE_DIR/hello.bin (sha256 $WANT) to smbclient, stopped with status 0, purged"
