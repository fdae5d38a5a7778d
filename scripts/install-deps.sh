#!/bin/sh
# Installs what building and testing libbulkhead needs on Debian/Ubuntu.
# Skips apt entirely when everything is already there.
set -e
pkgs="build-essential autoconf automake libtool autoconf-archive pkg-config groff-base
      libcmocka-dev liburing-dev clang curl prometheus libhiredis-dev redis-server
      spin"
# The ABI gate in make check (abidw, abidiff).
pkgs="$pkgs abigail-tools"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing:$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
