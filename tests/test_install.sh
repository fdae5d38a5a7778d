#!/bin/sh
# `make install` (into a temporary DESTDIR) installs what the README and
# the man pages tell a user to run and read:
#   - the commands, bulkhead-size and bulkhead-demo, and they run;
#   - every page of docs/man/ (the bh_uring_* and bh_cluster_* pages exactly
#     when <bulkhead/uring.h>, <bulkhead/cluster.h> are installed), each with
#     this version in its .TH;
#   - docs/*.md in the documentation directory, including every docs/*.md
#     the README or a man page names.
# What is expected comes from the source tree, not from the Makefile's
# lists. Run by tests/test_install, which make generates with the install
# directories and $(MAKE) set.
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

stage=$(mktemp -d) || exit 99
trap 'rm -rf "$stage"' EXIT
# A fresh make: the one running the tests passes a jobserver it does not
# share with this one.
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $MAKE -C "$top_builddir" install \
	DESTDIR="$stage/root" >"$stage/install.log" 2>&1; then
	cat "$stage/install.log"
	echo "FAIL: make install DESTDIR=... failed"
	exit 1
fi
root="$stage/root"

for p in bulkhead-size bulkhead-demo; do
	if [ ! -x "$root$bindir/$p" ]; then
		fail "$p is not installed in $bindir"
	elif ! LD_LIBRARY_PATH="$root$libdir" "$root$bindir/$p" --help >/dev/null 2>&1; then
		fail "the installed $p --help fails"
	fi
done

uring=no
[ -f "$root$includedir/bulkhead/uring.h" ] && uring=yes
cluster=no
[ -f "$root$includedir/bulkhead/cluster.h" ] && cluster=yes
pages=0
for src in "$top_srcdir"/docs/man/*.[1-9]; do
	base=$(basename "$src")
	page="$root$mandir/man${base##*.}/$base"
	case $base:$uring:$cluster in
	bh_uring_*:no:*)
		[ ! -e "$page" ] || fail "$base is installed without <bulkhead/uring.h>"
		continue ;;
	bh_cluster_*:*:no)
		[ ! -e "$page" ] || fail "$base is installed without <bulkhead/cluster.h>"
		continue ;;
	esac
	pages=$((pages + 1))
	if [ ! -f "$page" ]; then
		fail "$base is not installed in $mandir/man${base##*.}"
	elif ! grep -q "^\.TH [^ ]* [^ ]* [0-9-]* \"libbulkhead $VERSION\" " "$page"; then
		fail "installed $base does not say libbulkhead $VERSION: $(grep -m 1 '^\.TH' "$page")"
	fi
done

docs=0
for src in "$top_srcdir"/docs/*.md; do
	docs=$((docs + 1))
	[ -f "$root$docdir/$(basename "$src")" ] || fail "docs/$(basename "$src") is not installed in $docdir"
done
for named in $(cat "$top_srcdir/README.md" "$top_srcdir"/docs/man/*.[1-9] |
		grep -o 'docs/[A-Za-z0-9_.-]*\.md' | sort -u); do
	[ -f "$top_srcdir/$named" ] || fail "$named is named in the README or a man page but does not exist"
done

[ "$fails" -eq 0 ] || exit 1
echo "ok: 2 commands, $pages man pages (io_uring: $uring, cluster: $cluster) and $docs documents installed; pages say libbulkhead $VERSION"
