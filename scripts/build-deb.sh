#!/usr/bin/env bash
# Builds the Debian package of smbx from this workspace with Debian's own tools
# (dpkg-deb; dpkg-shlibdeps for the library dependencies), no cargo-deb needed:
#
#   /usr/bin/smbx                        the binary (cargo build --release -p smbx-cli)
#   /lib/systemd/system/smbx.service     dist/systemd/smbx.service
#   /etc/smbx/smb.conf                   dist/smb.conf, a commented default (conffile)
#   /usr/share/man/man1/smbx.1.gz        dist/smbx.1
#   /srv/smbx                            the default share (made by postinst)
#
# Prints the path of the .deb as its last line (target/debian/smbx_VERSION_ARCH.deb).
# Env: SMBX_BIN (package this binary instead of building one).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

die() { echo "build-deb: $*" >&2; exit 1; }
for t in dpkg-deb dpkg-shlibdeps objcopy gzip; do
    command -v "$t" >/dev/null || die "$t missing (apt-get install dpkg-dev binutils; scripts/install-deps.sh does)"
done

BIN=${SMBX_BIN:-}
if [ -z "$BIN" ]; then
    cargo build --release -p smbx-cli >&2
    BIN=$ROOT/target/release/smbx
fi
[ -x "$BIN" ] || die "no binary at $BIN"

VERSION=$("$BIN" --version | awk '{print $2}')
[ -n "$VERSION" ] || die "cannot read the version from $BIN --version"
ARCH=$(dpkg --print-architecture)
OUT=$ROOT/target/debian
PKG=$OUT/smbx_${VERSION}_${ARCH}
rm -rf "$PKG"
mkdir -p "$PKG/DEBIAN" "$PKG/usr/bin" "$PKG/lib/systemd/system" "$PKG/etc/smbx" \
    "$PKG/usr/share/man/man1" "$PKG/usr/share/doc/smbx"

# The binary without its debug sections (the release profile keeps line tables).
objcopy --strip-debug "$BIN" "$PKG/usr/bin/smbx"
chmod 0755 "$PKG/usr/bin/smbx"
install -m 0644 dist/systemd/smbx.service "$PKG/lib/systemd/system/smbx.service"
install -m 0644 dist/smb.conf "$PKG/etc/smbx/smb.conf"
gzip -9n <dist/smbx.1 >"$PKG/usr/share/man/man1/smbx.1.gz"
chmod 0644 "$PKG/usr/share/man/man1/smbx.1.gz"
cat >"$PKG/usr/share/doc/smbx/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: smbx

Files: *
License: Apache-2.0
 On Debian systems the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF

# Library dependencies of the binary, as Debian computes them.
SHLIBS=$(
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/debian"
    printf 'Source: smbx\n\nPackage: smbx\nArchitecture: any\n' >"$tmp/debian/control"
    cd "$tmp" && dpkg-shlibdeps -O -e"$PKG/usr/bin/smbx" 2>/dev/null | sed -n 's/^shlibs:Depends=//p'
)
[ -n "$SHLIBS" ] || die "dpkg-shlibdeps found no dependencies for $BIN"

# Kerberos: the GSSAPI library is loaded at run time when not linked.
RECOMMENDS=
case "$SHLIBS" in *libgssapi-krb5-2*) ;; *) RECOMMENDS="Recommends: libgssapi-krb5-2" ;; esac

SIZE=$(du -sk --exclude=DEBIAN "$PKG" | cut -f1)
cat >"$PKG/DEBIAN/control" <<EOF
Package: smbx
Version: $VERSION
Architecture: $ARCH
Maintainer: smbx maintainers <smbx@localhost>
Installed-Size: $SIZE
Depends: $SHLIBS
${RECOMMENDS:+$RECOMMENDS
}Suggests: smbclient
Section: net
Priority: optional
Homepage: https://github.com/smbx/smbx
Description: SMB 2/3 file server, client and benchmark with SMB Direct
 smbx serves files over SMB 2.0.2 to 3.1.1 (signing, encryption, leases,
 durable handles, multichannel) and SMB Direct over soft-iWARP, configured
 with an smb.conf in Samba's syntax.  The same binary is an SMB client
 (smbx ls/get/put ...) and a diskspd-style load generator (smbx bench).
 .
 This package runs it as the systemd service smbx.service (Type=notify).
 Add a user with "smbx user add NAME", then "systemctl enable --now smbx".
EOF
echo /etc/smbx/smb.conf >"$PKG/DEBIAN/conffiles"

cat >"$PKG/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    # The password database and the default share.
    install -d -m 0700 /var/lib/smbx
    [ -d /srv/smbx ] || install -d -m 0755 /srv/smbx
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload >/dev/null || true
        # A service already running picks up the new binary.
        if systemctl is-active --quiet smbx.service; then
            systemctl restart smbx.service || true
        fi
    fi
fi
exit 0
EOF
cat >"$PKG/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    systemctl stop smbx.service >/dev/null 2>&1 || true
    systemctl disable smbx.service >/dev/null 2>&1 || true
fi
exit 0
EOF
cat >"$PKG/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
    # The password database goes with the package; shares (/srv/smbx) stay.
    rm -rf /var/lib/smbx
    rmdir /etc/smbx 2>/dev/null || true
fi
exit 0
EOF
chmod 0755 "$PKG/DEBIAN/postinst" "$PKG/DEBIAN/prerm" "$PKG/DEBIAN/postrm"

DEB=$OUT/smbx_${VERSION}_${ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$PKG" "$DEB" >&2
echo "$DEB"
