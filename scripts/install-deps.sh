#!/usr/bin/env bash
# Install what the tests need: Samba (smbd, smbclient, smbtorture), tshark,
# fio, attr (Debian), smbprotocol, impacket and pytest (PyPI).
# Skips apt / pip when everything is already there.  Needs root for apt.
set -euo pipefail

APT_PACKAGES=(samba smbclient samba-testsuite tshark fio attr)
PY_PACKAGES=(smbprotocol impacket pytest)

have_all_tools() {
    local t
    for t in smbd smbclient smbtorture smbpasswd tshark fio setfattr; do
        command -v "$t" >/dev/null 2>&1 || return 1
    done
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

if python3 -c 'import smbprotocol, smbclient, impacket, pytest, spnego' 2>/dev/null; then
    echo "install-deps: python packages already present"
else
    echo "install-deps: pip install ${PY_PACKAGES[*]}"
    python3 -m pip --version >/dev/null 2>&1 || apt-get install -y -q python3-pip
    # Debian's system python is "externally managed" (PEP 668).
    python3 -m pip install -q "${PY_PACKAGES[@]}" ||
        python3 -m pip install -q --break-system-packages "${PY_PACKAGES[@]}"
fi
