#!/usr/bin/env bash
# Stand-in for the smbx binary, backed by Samba, to self-test the harness:
#   SMBX_BIN=tests/interop/smbtorture/samba-shim.sh tests/interop/smbtorture/run.sh smb2.read
# Supports the two invocations the harness makes:
#   samba-shim.sh user add --config CONF --stdin USER   (password on stdin)
#   samba-shim.sh serve --config CONF
set -euo pipefail
case "${1:-} ${2:-}" in
"user add")
    [ "$3" = --config ] && [ "$5" = --stdin ] || { echo "usage: user add --config CONF --stdin USER" >&2; exit 2; }
    conf=$4 user=$6
    IFS= read -r pass
    printf '%s\n%s\n' "$pass" "$pass" | smbpasswd -c "$conf" -a -s "$user" >/dev/null
    ;;
"serve --config")
    exec smbd --foreground --no-process-group --debug-stdout -s "$3"
    ;;
*)
    echo "samba-shim: unsupported arguments: $*" >&2
    exit 2
    ;;
esac
