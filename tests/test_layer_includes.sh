#!/bin/sh
# What an optional layer may include (docs/design.md): the public headers,
# src/lib/, the core's layer interface (src/core/layer.h, and
# src/core/sample_hook.h, built on it alone), its own folder's headers and
# another layer's interface header (src/shm/role.h). The core's private
# header (struct bulkhead, the word, the slots) and the other folders'
# private headers stay out, directly or through another header. The layers:
# adaptive, cluster, metrics, pool and uring. The host-wide layer (src/shm/),
# which the core dispatches to, may also include the core's backend
# interface (src/core/backend.h), and nothing else of the core beyond those.
# It follows every quoted #include from each layer source, paths made
# canonical (so "../core/internal.h" is the core's too), and first checks
# made-up layers that reach internal.h through a header and through "..",
# to prove it can fail.
src=$(cd "${top_srcdir:-.}/src" && pwd -P) || exit 99
allowed_other='core/layer.h core/sample_hook.h shm/role.h'

# resolve FROM_DIR NAME: the file a quoted include names, canonical, or
# nothing.
resolve() {
	for base in "$1" "$src" "${top_srcdir:-.}/include" "${top_builddir:-.}/include"; do
		if [ -f "$base/$2" ]; then
			d=$(cd "$(dirname "$base/$2")" && pwd -P) && echo "$d/${2##*/}"
			return
		fi
	done
}

# check LAYER_DIR FILE...: print "FILE: HEADER" for every header out of bounds.
check() {
	layer=$1
	shift
	seen=
	todo=$*
	while [ -n "$todo" ]; do
		set -- $todo
		f=$1
		shift
		todo=$*
		case " $seen " in *" $f "*) continue ;; esac
		seen="$seen $f"
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
			h=$(resolve "$(dirname "$f")" "$inc")
			[ -n "$h" ] || continue # generated (lease_lua.h) or a system header
			rel=${h#"$src"/}
			case $h in
			*/include/bulkhead/* | */include/bulkhead.h | "$src"/lib/*) ;;
			"$layer"/*) ;;
			*)
				ok=no
				for a in $allowed_other; do [ "$rel" = "$a" ] && ok=yes; done
				[ $ok = yes ] || echo "$f: $rel"
				;;
			esac
			todo="$todo $h"
		done
	done
}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/fake" "$tmp/src/core"
echo '#include "core/internal.h"' >"$tmp/src/fake/priv.h"
echo '#include "priv.h"' >"$tmp/src/fake/fake.c"
echo '#include "../core/internal.h"' >"$tmp/src/fake/rel.c"
: >"$tmp/src/core/internal.h"
fake=$(cd "$tmp/src" && pwd -P) || exit 99
[ "$(src=$fake check "$fake/fake" "$fake/fake/fake.c" | wc -l)" -eq 1 ] ||
	{ echo "the check missed internal.h reached through a header"; exit 1; }
[ "$(src=$fake check "$fake/fake" "$fake/fake/rel.c" | wc -l)" -eq 1 ] ||
	{ echo "the check missed internal.h reached through \"..\""; exit 1; }
shm_allowed='core/backend.h core/layer.h core/sample_hook.h'
[ "$(src=$fake allowed_other=$shm_allowed check "$fake/fake" "$fake/fake/fake.c" |
	wc -l)" -eq 1 ] || { echo "the shm check missed internal.h reached through a header"; exit 1; }

bad=
for layer in adaptive cluster metrics pool uring; do
	out=$(check "$src/$layer" "$src/$layer"/*.c)
	[ -z "$out" ] || bad="$bad$out
"
done
out=$(allowed_other=$shm_allowed check "$src/shm" "$src/shm"/*.c)
[ -z "$out" ] || bad="$bad$out
"
if [ -n "$bad" ]; then
	echo "layers include private headers of the core or of other folders:"
	printf '%s' "$bad"
	exit 1
fi
exit 0
