#!/bin/sh
# The ABI gate: a shared library against its committed baseline.
#
#   abi-gate.sh dump LIB HEADERS_DIR...            the ABI of LIB (abixml) on stdout
#   abi-gate.sh check BASELINE LIB HEADERS_DIR...  0 compatible, 1 broken, 77 cannot say
#
# HEADERS_DIR are the directories of the public headers (and of abi/compat,
# the frozen layouts compat symbols use): types defined elsewhere are the
# library's private business and are left out, so changing an opaque
# struct is no ABI change.
#
# check fails on any change a program linked against the baseline would
# notice:
#   - a symbol@version of the baseline is gone;
#   - a symbol was added to a version node the baseline has (released nodes
#     are closed: a program needing the new symbol would load an older
#     library of the same node and fail at the first call instead of at
#     load time) or to no node;
#   - what an old program binds to changed: each baseline symbol@version is
#     compared, with abidiff, to the function or variable that now carries
#     that symbol@version, default or not. So a struct that grows is
#     compatible only when the old symbol version keeps the old layout and
#     the new layout comes with a new version of the symbol (abi/README.md).
# Additions in new version nodes are compatible. A new soname says the
# release is incompatible on purpose: check then says so and exits 77 (the
# baseline must be regenerated). So does a library built for another
# architecture than the baseline, or without debug information.
#
# Needs abidw and abidiff (Debian: abigail-tools); exits 77 without them.
set -u

usage() {
	echo "usage: $0 dump LIB HEADERS_DIR... | check BASELINE LIB HEADERS_DIR..." >&2
	exit 2
}

# dump LIB HEADERS_DIR...: no paths, no line numbers' directories, ids
# from type names, so the committed baseline does not depend on where or
# in which order it was built.
dump() {
	lib=$1
	shift
	set -- $(for d in "$@"; do [ -d "$d" ] && printf ' --headers-dir %s' "$d"; done)
	abidw "$@" --drop-private-types --no-corpus-path --no-comp-dir-path --no-elf-needed --short-locs \
		--type-id-style hash "$lib"
}

attr() { # attr NAME < xml: the first value of NAME='...'
	sed -n "s/.*[ <]$1='\([^']*\)'.*/\1/p" | head -n 1
}

# The awk helper both use: get(NAME) is the value of NAME='...' on the line.
AWK_GET='
function get(name,    re) {
	re = " " name "=" q "[^" q "]*" q
	if (!match($0, re)) return ""
	return substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 4)
}
function set(name, value) {
	sub(" " name "=" q "[^" q "]*" q, " " name "=" q value q)
}'

# symbols XML: "name@version default" per exported symbol.
symbols() {
	awk -v q="'" "$AWK_GET"'
	/<elf-symbol / {
		def = get("is-default-version")
		print get("name") "@" get("version"), (def == "" ? "yes" : def)
	}' "$1" | sort -u
}

# view BASELINE_SYMBOLS NEW_XML: NEW_XML as a program linked against the
# baseline sees it. Only the baseline's symbol@versions are kept, each
# marked default or not as in the baseline, and every declaration bound to
# another symbol is dropped (added symbols are judged by their node, above).
view() {
	awk -v q="'" -v symfile="$1" "$AWK_GET"'
	BEGIN {
		while ((getline line < symfile) > 0) {
			split(line, f, " ")
			keep[f[1]] = f[2]
		}
	}
	function canon(key, def,    at, name, ver) {
		at = index(key, "@"); name = substr(key, 1, at - 1); ver = substr(key, at + 1)
		if (ver == "") return name
		return name (def == "yes" ? "@@" : "@") ver
	}
	skipping != "" {
		if (index($0, "</" skipping ">")) skipping = ""
		next
	}
	/<elf-symbol / {
		k = get("name") "@" get("version")
		if (!(k in keep)) next
		set("is-default-version", keep[k])
		print
		next
	}
	/ elf-symbol-id=/ {
		id = get("elf-symbol-id")
		if (index(id, "@@")) k = substr(id, 1, index(id, "@@") - 1) "@" substr(id, index(id, "@@") + 2)
		else if (index(id, "@")) k = id
		else k = id "@"
		if (k in keep) {
			set("elf-symbol-id", canon(k, keep[k]))
			print
			next
		}
		if ($0 !~ /\/>[ \t]*$/) {
			match($0, /<[a-z-]+/)
			skipping = substr($0, RSTART + 1, RLENGTH - 1)
		}
		next
	}
	{ print }' "$2"
}

check() {
	base=$1
	lib=$2
	shift 2
	for tool in abidw abidiff; do
		command -v $tool >/dev/null 2>&1 || { echo "no $tool (Debian: abigail-tools): skip"; exit 77; }
	done
	[ -f "$base" ] || { echo "no baseline $base"; exit 1; }
	[ -f "$lib" ] || { echo "no library $lib"; exit 1; }
	if ! LC_ALL=C readelf -S "$lib" 2>/dev/null | grep -q '\.debug_info'; then
		echo "$lib has no debug information (build with -g): skip"
		exit 77
	fi
	tmp=$(mktemp -d) || exit 99
	trap 'rm -rf "$tmp"' EXIT
	dump "$lib" "$@" >"$tmp/new.abi" || { echo "abidw failed on $lib"; exit 1; }

	b_arch=$(head -n 3 "$base" | attr architecture)
	n_arch=$(head -n 3 "$tmp/new.abi" | attr architecture)
	if [ "$b_arch" != "$n_arch" ]; then
		echo "the baseline is for $b_arch, this library for $n_arch: skip"
		exit 77
	fi
	b_so=$(head -n 3 "$base" | attr soname)
	n_so=$(head -n 3 "$tmp/new.abi" | attr soname)
	if [ "$b_so" != "$n_so" ]; then
		echo "the soname changed from $b_so to $n_so: an incompatible release, on purpose."
		echo "Regenerate the baseline (make abi-baseline) and commit it: skip"
		exit 77
	fi

	symbols "$base" >"$tmp/base.syms"
	symbols "$tmp/new.abi" >"$tmp/new.syms"
	cut -d' ' -f1 "$tmp/base.syms" >"$tmp/base.keys"
	cut -d' ' -f1 "$tmp/new.syms" | sort -u >"$tmp/new.keys"
	sed -n 's/^[^@]*@\([^ ]*\) .*/\1/p' "$tmp/base.syms" | sort -u >"$tmp/base.nodes"
	fails=0
	for k in $(comm -23 "$tmp/base.keys" "$tmp/new.keys"); do
		echo "FAIL: $k was removed"
		fails=$((fails + 1))
	done
	added=""
	for k in $(comm -13 "$tmp/base.keys" "$tmp/new.keys"); do
		node=${k#*@}
		if [ -z "$node" ]; then
			echo "FAIL: ${k%@*} was added without a version node"
			fails=$((fails + 1))
		elif grep -qx "$node" "$tmp/base.nodes"; then
			echo "FAIL: ${k%@*} was added to $node, a node the baseline has: give it a new node"
			fails=$((fails + 1))
		else
			added="$added $k"
		fi
	done

	view "$tmp/base.syms" "$tmp/new.abi" >"$tmp/view.abi"
	abidiff --no-added-syms "$base" "$tmp/view.abi" >"$tmp/diff" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ]; then
		[ $((rc & 3)) -ne 0 ] && echo "FAIL: abidiff could not compare (exit $rc)"
		[ $((rc & 12)) -ne 0 ] && echo "FAIL: what programs linked against the baseline use changed (abidiff exit $rc):"
		cat "$tmp/diff"
		fails=$((fails + 1))
	fi
	if [ "$fails" -ne 0 ]; then
		echo "The ABI of $b_so broke. Keep it (abi/README.md says how things grow), or make"
		echo "the break explicit: bump the soname (libtool current:revision:age in configure.ac)."
		exit 1
	fi
	echo "ok: $(wc -l <"$tmp/base.keys") symbols of $b_so as in the baseline;" \
		"added in new version nodes:${added:- none}"
	exit 0
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
dump) [ $# -ge 2 ] || usage; dump "$@" ;;
check) [ $# -ge 3 ] || usage; check "$@" ;;
*) usage ;;
esac
