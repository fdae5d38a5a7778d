#!/bin/sh
# The Debian packages, as a user on a fresh Debian 12 gets them: build them
# from a clean clone of this repository's HEAD (dpkg-buildpackage -us -uc
# -b, which runs make check), check them with lintian (errors fail), install
# them, build and run examples/ against the installed packages only (C and
# C++, pkg-config --cflags --libs bulkhead: debian/tests/build-examples),
# then remove them. Uses sudo for apt-get and dpkg when not root. Prints how
# long each step took.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt() {
	DEBIAN_FRONTEND=noninteractive $sudo apt-get -y -qq "$@" >/dev/null
}
pkgs="libbulkhead0 libbulkhead-dev bulkhead-tools"
tmp=$(mktemp -d)
installed=no
cleanup() {
	[ "$installed" = yes ] && apt purge $pkgs
	rm -rf "$tmp"
}
trap cleanup EXIT
t0=$(date +%s)
step() { # step NAME: how long since the last step
	now=$(date +%s)
	echo "== packages: $1 ($((now - t0)) s)"
	t0=$now
}

for p in $pkgs; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		echo "$p is installed already: this test installs and removes it; remove it first"
		exit 1
	fi
done

git clone -q --no-local "$top" "$tmp/src"
apt install dpkg-dev lintian
(cd "$tmp/src" && $sudo apt-get build-dep -y -qq ./ >/dev/null)
step "build dependencies"

if ! (cd "$tmp/src" && DEB_BUILD_OPTIONS="parallel=$(nproc)" \
	dpkg-buildpackage -us -uc -b >"$tmp/build.log" 2>&1); then
	tail -n 120 "$tmp/build.log"
	echo "== packages: dpkg-buildpackage FAILED"
	exit 1
fi
grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' "$tmp/build.log" | tr '\n' ' '
echo
# New symbols the symbols file does not list yet (dpkg-gensymbols' diff).
sed -n '/^dpkg-gensymbols: warning/,/^[^-+@ ]/p' "$tmp/build.log" | head -n 40
step "dpkg-buildpackage -us -uc -b (build and make check)"

# What each package must hold: the library, the headers and development
# files, and every page and document of the source tree (new layers' pages
# included), each in exactly one package.
for deb in "$tmp"/*.deb; do dpkg-deb -c "$deb"; done | awk '{ print $6 }' >"$tmp/contents"
missing=0
want() {
	grep -q -- "$1" "$tmp/contents" || { echo "no package holds $1"; missing=$((missing + 1)); }
}
want '/libbulkhead\.so\.0$'
want '/libbulkhead\.so$'
want '/libbulkhead\.a$'
want '/pkgconfig/bulkhead\.pc$'
want '^\./usr/include/bulkhead\.h$'
want '^\./usr/include/bulkhead\.hpp$'
want '^\./usr/include/bulkhead/version\.h$'
want '^\./usr/bin/bulkhead-size$'
want '^\./usr/bin/bulkhead-demo$'
for h in "$tmp"/src/include/bulkhead/*.h; do
	want "^\./usr/include/bulkhead/$(basename "$h")\$"
done
for page in "$tmp"/src/docs/man/*.[1-9]; do
	b=$(basename "$page")
	case $b in bh_uring_*) [ -f "$tmp/src/include/bulkhead/uring.h" ] || continue ;; esac
	want "/man${b##*.}/$b\.gz\$"
done
for doc in "$tmp"/src/docs/*.md; do
	want "/usr/share/doc/libbulkhead/$(basename "$doc")"
done
[ "$missing" -eq 0 ] || { echo "== packages: $missing files missing"; exit 1; }
dups=$(sort "$tmp/contents" | grep -v '/$' | uniq -d)
[ -z "$dups" ] || { echo "in two packages:"; echo "$dups"; exit 1; }
echo "contents: $(grep -c -v '/$' "$tmp/contents") files, each page, header and document of the tree included"

changes=$(ls "$tmp"/libbulkhead_*.changes)
lintian --fail-on error --display-info --tag-display-limit 0 "$changes" >"$tmp/lintian.out" 2>&1 ||
	{ cat "$tmp/lintian.out"; echo "== packages: lintian found errors"; exit 1; }
if [ -s "$tmp/lintian.out" ]; then cat "$tmp/lintian.out"; else echo "lintian: nothing to report"; fi
step "lintian"

installed=yes
# shellcheck disable=SC2046
apt install $(for p in $pkgs; do ls "$tmp/${p}_"*.deb; done)
step "install"

(cd "$tmp/src" && AUTOPKGTEST_TMP="$tmp/examples" && mkdir -p "$AUTOPKGTEST_TMP" &&
	export AUTOPKGTEST_TMP && sh debian/tests/build-examples)
step "examples against the installed packages"

apt purge $pkgs
installed=no
for f in /usr/include/bulkhead.h /usr/include/bulkhead.hpp /usr/bin/bulkhead-size; do
	[ ! -e "$f" ] || { echo "$f is still there after the packages were removed"; exit 1; }
done
step "remove"
echo "== packages: ok"
