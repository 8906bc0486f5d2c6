#!/usr/bin/env bash
# Make sure the Debian packages named as arguments are installed: as root with apt-get, they
# are installed (a fresh Debian 12 machine has none of podman, runc, mmdebstrap, prometheus);
# otherwise the missing ones are printed and the status is 1, so the caller can skip.
set -u
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure-tools: installing ${missing[*]} (apt-get)"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/tritium-ensure-tools.log 2>&1 \
        || { apt-get update -q >>/tmp/tritium-ensure-tools.log 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/tritium-ensure-tools.log 2>&1; }; then
        exit 0
    fi
    echo "ensure-tools: apt-get could not install ${missing[*]} (log: /tmp/tritium-ensure-tools.log)"
    exit 1
fi
echo "ensure-tools: missing ${missing[*]} (not root or no apt-get: install them to run this)"
exit 1
