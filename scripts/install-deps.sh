#!/usr/bin/env bash
# Install what the tests need: Samba (smbd, smbclient, smbtorture), tshark,
# fio, attr (Debian), Go and the go-smb2 test's modules, smbprotocol, impacket
# and pytest (PyPI).
# Skips apt / pip when everything is already there.  Needs root for apt.
set -euo pipefail

APT_PACKAGES=(samba smbclient samba-testsuite tshark fio attr)
# The Debian package: built with dpkg-deb/dpkg-shlibdeps (dpkg-dev) and objcopy
# (binutils), tested in a bookworm chroot made by debootstrap (scripts/test-deb.sh).
APT_PACKAGES+=(dpkg-dev binutils debootstrap)
PY_PACKAGES=(smbprotocol impacket pytest prometheus_client)
# Kerberos interop (tests/interop/test_kerberos.py): an MIT KDC and its tools
# (krb5kdc, kdb5_util, kadmin.local, kinit, kvno), and libkrb5-dev (krb5-config,
# headers) to build the gssapi Python package, which makes the tests' AP-REQs.
APT_PACKAGES+=(krb5-kdc krb5-admin-server krb5-user libkrb5-dev)
PY_PACKAGES+=(gssapi)
# Samba's VFS modules: the interop fixtures' smbd loads streams_xattr, without which
# every tree connect to smbd fails (BAD_NETWORK_NAME); a Recommends of samba, so
# --no-install-recommends leaves it out.
APT_PACKAGES+=(samba-vfs-modules)
# SMB Direct through rdma-core (tests/guest, scripts/guest): qemu boots the guest kernel
# with siw/rxe (TCG), cpio packs its initramfs (whose packages scripts/guest/initramfs.sh
# fetches with apt-get download), rdma-core's libraries for smbx on the host.
APT_PACKAGES+=(qemu-system-x86 cpio libibverbs1 librdmacm1 ibverbs-providers)
# Network namespaces, veth pairs and tc shaping (tests/interop/test_multichannel.py and
# bench/multichannel.sh: three shaped links; the client's multichannel tests).
APT_PACKAGES+=(iproute2)
# A test that sees the server hang reports its threads' backtraces (tests/interop
# conftest.thread_dump; /proc's kernel stacks without gdb).
APT_PACKAGES+=(gdb)

have_all_tools() {
    local t
    for t in smbd smbclient smbtorture smbpasswd tshark fio setfattr dpkg-shlibdeps objcopy debootstrap \
        krb5kdc kdb5_util kadmin.local kinit kvno krb5-config qemu-system-x86_64 cpio ip tc gdb; do
        command -v "$t" >/dev/null 2>&1 || return 1
    done
    dpkg -s samba-vfs-modules >/dev/null 2>&1 || return 1
    dpkg -s ibverbs-providers librdmacm1 >/dev/null 2>&1 || return 1
}

if have_all_tools; then
    echo "install-deps: system packages already present"
else
    echo "install-deps: apt-get install ${APT_PACKAGES[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # tshark asks whether non-root users may capture: keep the default (no).
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
    apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"
fi

# Go, for the go-smb2 interop test (tests/interop/gosmb2): /usr/local/go when
# present, else Debian's golang-go.  Its modules are downloaded now through
# Go's default proxy ($GOPROXY) into the cache the test builds from, so the
# test itself needs no network.
find_go() {
    local g
    for g in "${SMBX_GO:-}" "$(command -v go 2>/dev/null)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
        if [ -n "$g" ] && [ -x "$g" ]; then
            echo "$g"
            return 0
        fi
    done
    return 1
}
if GO=$(find_go); then
    echo "install-deps: go already present ($GO)"
else
    echo "install-deps: apt-get install golang-go"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends golang-go
    GO=$(find_go) || { echo "install-deps: golang-go installed but no go binary found" >&2; exit 1; }
fi
GOSMB2_CACHE=${SMBX_GOSMB2_CACHE:-/var/cache/smbx/gosmb2}
GOSMB2_SRC="$(cd "$(dirname "$0")/.." && pwd)/tests/interop/gosmb2"
if mkdir -p "$GOSMB2_CACHE" 2>/dev/null &&
    (cd "$GOSMB2_SRC" && GOPATH="$GOSMB2_CACHE/gopath" GOCACHE="$GOSMB2_CACHE/gocache" \
        GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local "$GO" mod download); then
    echo "install-deps: go-smb2 test modules in $GOSMB2_CACHE/gopath"
else
    echo "install-deps: WARNING: 'go mod download' for $GOSMB2_SRC failed" \
        "(GOPROXY=${GOPROXY:-default}); tests/interop/test_gosmb2.py will fail" >&2
fi

if python3 -c 'import smbprotocol, smbclient, impacket, pytest, spnego, prometheus_client, gssapi' 2>/dev/null; then
    echo "install-deps: python packages already present"
else
    echo "install-deps: pip install ${PY_PACKAGES[*]}"
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y -q python3-pip
    # Debian's system python is "externally managed" (PEP 668).
    python3 -m pip install -q "${PY_PACKAGES[@]}" ||
        python3 -m pip install -q --break-system-packages "${PY_PACKAGES[@]}"
fi
