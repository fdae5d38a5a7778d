#!/bin/sh
# The man pages stay complete and linked:
#   - every exported function (BH_API in include/bulkhead.h or
#     include/bulkhead/*.h, whatever headers exist) has docs/man/NAME.3;
#   - every page names itself in .TH and, for functions, has the sections a
#     reader looks for;
#   - every page a SEE ALSO names exists, when it is one of ours (bh_*,
#     bulkhead*); system pages are only looked up when man(1) can;
#   - every page is installed (its built copy man/NAME.S is in man_MANS,
#     passed as BH_MANS), and every built page carries the version and date
#     configure set (BH_VERSION, BH_MAN_DATE) in its .TH line, while the
#     source leaves them to the build (.TH NAME S "" libbulkhead ...);
#   - groff finds nothing to warn about, when groff is installed;
#   - no words run together: an alternating-font macro (.BR, .IR, ...)
#     joins its arguments without spaces, so one given a sentence prints
#     "name.Withoutdone,the..."; the macro lines are linted, and the page is
#     rendered (when groff is installed) and searched for glued words.
# Run by tests/test_manpages, which make generates with BH_MANS set. It
# first checks a made-up tree with known faults, to prove it can fail.
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# Drop __attribute__((...)), whose parentheses would hide the name.
strip_attributes() {
	awk '{
		out = ""; s = $0
		while ((i = index(s, "__attribute__")) > 0) {
			out = out substr(s, 1, i - 1); s = substr(s, i + 13)
			depth = 0; started = 0
			while (s != "" && !(started && depth == 0)) {
				c = substr(s, 1, 1); s = substr(s, 2)
				if (c == "(") { depth++; started = 1 }
				else if (c == ")") depth--
			}
		}
		print out s
	}'
}

# Declarations of BH_API functions: strip comments and preprocessor lines,
# cut the rest at ; { }, keep the identifier before the first '('.
exported() {
	for h in "$src/include/bulkhead.h" "$src"/include/bulkhead/*.h; do
		[ -f "$h" ] && cat "$h"
	done | awk '
	BEGIN { incomment = 0; cont = 0 }
	{
		line = $0; out = ""
		while (line != "") {
			if (incomment) {
				i = index(line, "*/")
				if (i == 0) { line = ""; break }
				line = substr(line, i + 2); incomment = 0
				continue
			}
			i = index(line, "/*"); j = index(line, "//")
			if (j > 0 && (i == 0 || j < i)) { out = out substr(line, 1, j - 1); break }
			if (i == 0) { out = out line; break }
			out = out substr(line, 1, i - 1) " "
			line = substr(line, i + 2); incomment = 1
		}
		if (cont || out ~ /^[ \t]*#/) { cont = (out ~ /\\[ \t]*$/); next }
		printf "%s ", out
	}' | strip_attributes | tr ';{}' '\n\n\n' | grep 'BH_API' |
		sed -n 's/.*BH_API[^(]*[^A-Za-z0-9_(]\([A-Za-z_][A-Za-z0-9_]*\)[ \t]*(.*/\1/p' | sort -u
}

# The text of section $2 of page $1 (.SH to the next .SH).
section() {
	awk -v want="$2" '
	/^\.SH/ { s = $0; sub(/^\.SH[ \t]*/, "", s); gsub(/"/, "", s); on = (s == want); next }
	on' "$1"
}

# name(section) references in a piece of roff: drop font escapes, macro
# names, quotes, and the space .BR puts between a name and its section.
references() {
	sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/^\.[A-Z][A-Z]*[ \t]*//' -e 's/"//g' \
		-e 's/[ \t]*(\([0-9]\)/(\1/g' |
		grep -o '[A-Za-z_][A-Za-z0-9_.-]*([0-9][a-z]*)'
}

# Lines of page $1 where an alternating-font macro glues two words: an
# argument ending in a letter, digit, ')' or punctuation followed by one
# starting with a letter ('.BR bh_x . Next' prints "bh_x.Next"). Quoted
# arguments count as one; font escapes are ignored.
glued_arguments() {
	awk '
	function next_arg(   a, c) {
		sub(/^[ \t]+/, "", rest)
		a = ""
		if (substr(rest, 1, 1) == "\"") {
			rest = substr(rest, 2)
			while (rest != "") {
				c = substr(rest, 1, 1)
				if (c == "\"" && substr(rest, 2, 1) == "\"") { a = a c; rest = substr(rest, 3); continue }
				rest = substr(rest, 2)
				if (c == "\"") break
				a = a c
			}
			return a
		}
		while (rest != "" && (c = substr(rest, 1, 1)) != " " && c != "\t") {
			n = (c == "\\") ? 2 : 1
			a = a substr(rest, 1, n); rest = substr(rest, n + 1)
		}
		return a
	}
	/^\.(BR|BI|IB|IR|RB|RI)([ \t]|$)/ {
		rest = substr($0, 4); prev = ""; first = 1
		while (rest ~ /[^ \t]/) {
			arg = next_arg(); plain = arg
			gsub(/\\f[BIRP]/, "", plain)
			if (!first && prev ~ /[A-Za-z0-9.,;:!?)]$/ && plain ~ /^[A-Za-z]/) {
				printf "line %d: %s glues \"%s\" to \"%s\"\n", FNR, substr($0, 1, 3), prev, plain
				next
			}
			prev = plain; first = 0
		}
	}' "$1"
}

# Words that page $1 renders run together: lower-case text with a comma,
# semicolon, colon or '!?' and no space after it, or a full stop followed
# by a capitalised word. Rendered wide and unhyphenated, so a run is one
# token; tokens with a '"' (JSON, quoted strings), URLs and store keys
# (with '://', '@' or '{') are skipped.
glued_words() {
	groff -man -Tutf8 -rLL=1000n -rHY=0 -P-cbou "$1" 2>/dev/null | tr -s ' \t' '\n\n' |
		grep -v -e '"' -e '://' -e '@' -e '{' | grep -E '[a-z)][,;:!?][A-Za-z(]|[a-z][a-z]\.[A-Z][a-z]' | head -n 3 | tr '\n' ' '
}

ours() {
	case $1 in bh_* | bulkhead*) return 0 ;; *) return 1 ;; esac
}

# True for a page of an optional header this build does not install
# (BH_HEADERS: what make install installs): bh_uring_* without liburing,
# bh_cluster_* without hiredis.
not_built() {
	case $1 in
	bh_uring_*) case " $BH_HEADERS " in *" include/bulkhead/uring.h "*) return 1 ;; esac ;;
	bh_cluster_*) case " $BH_HEADERS " in *" include/bulkhead/cluster.h "*) return 1 ;; esac ;;
	*) return 1 ;;
	esac
}

# The page make built from a source, which make install installs: the
# version and date of this build in its .TH line.
check_built() {
	want="$(grep -m 1 '^\.TH' "$page" | awk '{ print $1, $2, $3 }') $BH_MAN_DATE \"libbulkhead $BH_VERSION\" \"libbulkhead Manual\""
	got=$(grep -m 1 '^\.TH' "$1" 2>/dev/null)
	[ "$got" = "$want" ] || fail "built $base: .TH is '$got', want '$want'"
}

# check_tree SRC: count the faults of the tree at SRC in $fails.
check_tree() {
	src=$1
	man="$src/docs/man"
	funcs=$(exported)
	[ -n "$funcs" ] || fail "found no BH_API function in $src/include"
	for f in $funcs; do
		[ -f "$man/$f.3" ] || fail "$f is exported but has no page docs/man/$f.3"
	done
	check_pages
}

check_pages() {
	for page in "$man"/*.[1-9]; do
		[ -f "$page" ] || continue
		base=$(basename "$page")
		name=${base%.*}
		sec=${base##*.}
		if head -n 1 "$page" | grep -q '^\.so '; then
			target=$(head -n 1 "$page" | sed 's/^\.so[ \t]*//')
			[ -f "$man/$(basename "$target")" ] || fail "$base: .so to missing $target"
			continue
		fi
		th=$(grep -m 1 '^\.TH' "$page" | awk '{ print $2, $3 }' | sed 's/\\-/-/g')
		upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
		[ "$th" = "$upper $sec" ] || fail "$base: .TH says '$th', want '$upper $sec'"
		grep -m 1 '^\.TH' "$page" | grep -q '^\.TH [^ ]* [^ ]* "" libbulkhead "libbulkhead Manual"$' ||
			fail "$base: .TH must leave date and version to the build: .TH $upper $sec \"\" libbulkhead \"libbulkhead Manual\""
		required="NAME SYNOPSIS DESCRIPTION SEE_ALSO"
		[ "$sec" = 3 ] && required="NAME SYNOPSIS DESCRIPTION RETURN_VALUE ERRORS NOTES SEE_ALSO"
		for s in $required; do
			grep -q "^\.SH \"*$(echo "$s" | tr _ ' ')\"*\$" "$page" ||
				fail "$base: no $(echo "$s" | tr _ ' ') section"
		done
		if [ "$sec" = 3 ]; then
			section "$page" SYNOPSIS | grep -q "$name" || fail "$base: SYNOPSIS does not show $name"
		fi
		for ref in $(section "$page" "SEE ALSO" | references); do
			rname=${ref%%(*}
			rsec=${ref#*(}
			rsec=${rsec%)}
			if ours "$rname"; then
				[ -f "$man/$rname.$rsec" ] || fail "$base: SEE ALSO $ref, but docs/man/$rname.$rsec does not exist"
			elif command -v man >/dev/null 2>&1 && ! man -w "$rsec" "$rname" >/dev/null 2>&1; then
				echo "note: $base: SEE ALSO $ref is not installed on this machine"
			fi
		done
		if [ -n "${BH_MANS+set}" ]; then
			case " $BH_MANS " in
			*" man/$base "*) check_built "$BH_MAN_BUILT/$base" ;;
			*) not_built "$base" || fail "$base is not in BH_MAN_PAGES: make install would skip it" ;;
			esac
		fi
		if command -v groff >/dev/null 2>&1; then
			warn=$(groff -man -ww -z "$page" 2>&1)
			[ -z "$warn" ] || fail "$base: groff: $warn"
			run=$(glued_words "$page")
			[ -z "$run" ] || fail "$base: renders words without spaces: $run"
		fi
		glued=$(glued_arguments "$page")
		[ -z "$glued" ] || fail "$base: $glued (quote the phrase, or use .B/.I for running text)"
	done
	check_overview
}

# The overview leads to every function and command page: each is named,
# as name(section), somewhere in bulkhead(7).
check_overview() {
	[ -f "$man/bulkhead.7" ] || { fail "no overview docs/man/bulkhead.7"; return; }
	named=" $(references <"$man/bulkhead.7" | tr '\n' ' ') "
	for page in "$man"/*.[13]; do
		[ -f "$page" ] || continue
		base=$(basename "$page")
		ref="${base%.*}(${base##*.})"
		case $named in
		*" $ref "*) ;;
		*) fail "$base is not reachable from bulkhead(7): name $ref there" ;;
		esac
	done
}

# A made-up tree: two pages missing (a declaration split over lines with a
# function-pointer parameter, one with an attribute before its type), one
# dangling SEE ALSO, a sentence given to .BR (its words print glued), a
# source page with its own version, a built page with a stale one, a page
# neither installed nor named by bulkhead(7), and BH_API in a comment and
# in a multi-line macro (neither is a declaration).
fixture() {
	t=$1
	mkdir -p "$t/include/bulkhead" "$t/docs/man" "$t/man"
	cat >"$t/docs/man/bulkhead.7" <<'P'
.TH BULKHEAD 7 "" libbulkhead "libbulkhead Manual"
.SH NAME
bulkhead \- x
.SH SYNOPSIS
.SH DESCRIPTION
.SH SEE ALSO
.BR bh_documented (3)
P
	sed 's/^\.TH .*/.TH BULKHEAD 7 2030-01-01 "libbulkhead 9.9.9" "libbulkhead Manual"/' \
		"$t/docs/man/bulkhead.7" >"$t/man/bulkhead.7"
	cat >"$t/docs/man/bh_orphan.3" <<'P'
.TH BH_ORPHAN 3 "" libbulkhead "libbulkhead Manual"
P
	cat >"$t/include/bulkhead.h" <<'H'
#define BH_API __attribute__((visibility("default")))
#define BH_TWICE(x) \
	BH_API int bh_not_a_function(x)
/* BH_API int bh_in_a_comment(void); */
BH_API int bh_documented(int n);
H
	cat >"$t/include/bulkhead/extra.h" <<'H'
BH_API int
bh_split_decl(void (*cb)(int),
	      int n);
BH_API __attribute__((warn_unused_result)) int bh_attributed(int n);
H
	cat >"$t/docs/man/bh_documented.3" <<'P'
.TH BH_DOCUMENTED 3
.SH NAME
bh_documented \- x
.SH SYNOPSIS
.BI "int bh_documented(int " n );
.SH DESCRIPTION
Its type is
.BR bh_documented_fn . Without \fIn\fP, the call fails.
.SH RETURN VALUE
.SH ERRORS
.SH NOTES
.SH SEE ALSO
.BR bh_missing (3),
.BR bh_documented (3)
P
	sed 's/^\.TH .*/.TH BH_DOCUMENTED 3 2030-01-01 "libbulkhead 0.1" "libbulkhead Manual"/' \
		"$t/docs/man/bh_documented.3" >"$t/man/bh_documented.3"
	sed 's/DOCUMENTED/URING_X/; s/bh_documented/bh_uring_x/g' "$t/docs/man/bh_documented.3" \
		>"$t/docs/man/bh_uring_x.3"
}

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fixture "$tmp"
(
	BH_MANS="man/bh_documented.3 man/bulkhead.7" BH_MAN_BUILT="$tmp/man"
	BH_VERSION=9.9.9 BH_MAN_DATE=2030-01-01 BH_HEADERS="include/bulkhead.h"
	check_tree "$tmp"
	echo "faults: $fails"
) >"$tmp/out"
(
	BH_MANS="man/bulkhead.7" BH_MAN_BUILT="$tmp/man" BH_HEADERS="include/bulkhead/uring.h"
	check_tree "$tmp"
) >"$tmp/out-uring"
expect_fault() {
	grep -q "$1" "$tmp/out" || { echo "the check missed: $1"; cat "$tmp/out"; exit 1; }
}
expect_fault "bh_split_decl is exported but has no page"
expect_fault "bh_attributed is exported but has no page"
expect_fault "SEE ALSO bh_missing(3), but docs/man/bh_missing.3 does not exist"
expect_fault 'line 8: .BR glues "." to "Without"'
expect_fault 'bh_documented.3: .TH must leave date and version to the build'
expect_fault 'built bh_documented.3: .TH is .* "libbulkhead 0.1" .*, want .* "libbulkhead 9.9.9"'
expect_fault "bh_orphan.3 is not in BH_MAN_PAGES"
! grep -q "bh_uring_x.3 is not in" "$tmp/out" ||
	{ echo "the check wants bh_uring_* pages installed without <bulkhead/uring.h>"; exit 1; }
grep -q "bh_uring_x.3 is not in BH_MAN_PAGES" "$tmp/out-uring" ||
	{ echo "the check missed an uninstalled bh_uring_* page"; cat "$tmp/out-uring"; exit 1; }
expect_fault "bh_orphan.3 is not reachable from bulkhead(7)"
for ok in "bulkhead.7: .TH" "built bulkhead.7" "bh_documented.3 is not reachable" "bh_documented.3 is not in"; do
	! grep -q "$ok" "$tmp/out" || { echo "the check wrongly reported: $ok"; cat "$tmp/out"; exit 1; }
done
if command -v groff >/dev/null 2>&1; then
	expect_fault "renders words without spaces: bh_documented_fn.Withoutn,thecallfails."
fi
for f in bh_not_a_function bh_in_a_comment __attribute__; do
	! grep -q "$f" "$tmp/out" || { echo "the check took $f for a declaration"; exit 1; }
done

check_tree "${top_srcdir:-.}"
[ "$fails" -eq 0 ] || exit 1
echo "ok: $(echo "$funcs" | wc -w) exported functions, each with its page; every SEE ALSO resolves;" \
	"bulkhead(7) names every page; every installed page says libbulkhead $BH_VERSION"
