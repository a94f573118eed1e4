#!/bin/sh
# SPDX-License-Identifier: MIT
# The ABI gate. usage: check_abi.sh LIBRETRYD_SO SOURCE_ROOT [--update]
#  1. every RETRYD_EXPORT declaration in include/retryd is in
#     libclient/libretryd.map and the other way round, and the built library
#     exports exactly that list;
#  2. abidiff finds no change against libclient/abi/libretryd.abi other than
#     added symbols and fields appended to a struct that begins with its
#     size (libclient/abi/suppressions.ini). --update rewrites the baseline
#     (only when a release means to change the ABI: docs/abi.md). The
#     baseline holds the exported interfaces alone (no internal function,
#     which would go stale with any internal change) and no path of the
#     machine that wrote it (file names only, no lines); both are checked.
#        check_abi.sh --selftest SOURCE_ROOT
#  proves the abidiff step can fail: a field inserted in the middle of a
#  retryd_ struct must be reported, one appended at its end must not.
# Exit 0 pass, 1 fail, 77 skip (abigail-tools missing).
set -eu

# What abidw records: the exported interfaces and the types they reach,
# file names without directories or lines, so that the baseline is the
# same whoever builds it, wherever.
ABIDW_OPTS="--no-corpus-path --no-comp-dir-path --exported-interfaces-only
    --no-show-locs --short-locs"

if [ "$1" = "--selftest" ]; then
    command -v abidw >/dev/null && command -v abidiff >/dev/null || {
        echo "abi: SKIP: abidw/abidiff not installed (Debian: abigail-tools)" >&2
        exit 77
    }
    supp="$2/libclient/abi/suppressions.ini"
    t=$(mktemp -d)
    trap 'rm -rf "$t"' EXIT
    # One exported function taking a growable struct, in three versions.
    for v in "v1:int a; int b;" "inserted:int x; int a; int b;" \
             "appended:int a; int b; long c;"; do
        name=${v%%:*}
        mkdir -p "$t/$name"
        printf '#include <stddef.h>\nstruct retryd_s { size_t sz; %s };\n' \
            "${v#*:}" >"$t/$name/s.h"
        printf '#include "s.h"\nint retryd_f(struct retryd_s *s) { return (int)s->sz; }\n' \
            >"$t/$name/s.c"
        cc -g -shared -fPIC -o "$t/$name/lib.so" "$t/$name/s.c"
        # shellcheck disable=SC2086 # one word per option
        abidw $ABIDW_OPTS --headers-dir "$t/$name" \
            --out-file "$t/$name.abi" "$t/$name/lib.so"
    done
    if abidiff --suppressions "$supp" "$t/v1.abi" "$t/inserted.abi" >/dev/null; then
        echo "abi selftest: a field inserted mid-struct was not reported" >&2
        exit 1
    fi
    if ! abidiff --suppressions "$supp" "$t/v1.abi" "$t/appended.abi" \
        >"$t/report"; then
        echo "abi selftest: a field appended at the end was reported:" >&2
        cat "$t/report" >&2
        exit 1
    fi
    echo "abi selftest: an insertion fails the gate, an appended field passes"
    exit 0
fi

so=$1
root=$2
map="$root/libclient/libretryd.map"
baseline="$root/libclient/abi/libretryd.abi"
supp="$root/libclient/abi/suppressions.ini"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- 1. headers, version script and library agree ------------------------
# A declaration's name is the identifier before its "(" (functions) or its
# ";" (variables), read from the text after RETRYD_EXPORT up to the ";".
awk '
    /RETRYD_EXPORT/ && !/#define/ { grab = 1; buf = "" }
    grab { buf = buf " " $0; if ($0 ~ /;/) { print buf; grab = 0 } }
' "$root"/include/retryd/*.h |
    sed -E 's/\(.*//; s/;.*//; s/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*) *$/\1/' |
    sort -u >"$work/headers"
sed -n 's/^ *\(retryd_[A-Za-z0-9_]*\);$/\1/p' "$map" | sort -u >"$work/map"
nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' |
    grep '^retryd_' | sort -u >"$work/lib"
fail=0
if ! diff -u "$work/headers" "$work/map" >"$work/d1"; then
    echo "abi: include/retryd (RETRYD_EXPORT, -) and libretryd.map (+) differ:" >&2
    cat "$work/d1" >&2
    fail=1
fi
if ! diff -u "$work/map" "$work/lib" >"$work/d2"; then
    echo "abi: libretryd.map (-) and the built library's exports (+) differ:" >&2
    cat "$work/d2" >&2
    fail=1
fi
echo "abi: $(wc -l <"$work/map") symbols exported, headers and map agree"
[ "$fail" = 0 ] || exit 1

# --- 2. abidiff against the baseline --------------------------------------
if ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
    echo "abi: SKIP: abidw/abidiff not installed (Debian: abigail-tools)" >&2
    exit 77
fi
# shellcheck disable=SC2086 # one word per option
abidw $ABIDW_OPTS --headers-dir "$root/include/retryd" \
    --out-file "$work/current.abi" "$so"
if [ "${3:-}" = "--update" ]; then
    mkdir -p "$(dirname "$baseline")"
    cp "$work/current.abi" "$baseline"
    echo "abi: baseline written to libclient/abi/libretryd.abi"
    exit 0
fi
if [ ! -f "$baseline" ]; then
    echo "abi: no baseline at libclient/abi/libretryd.abi" >&2
    exit 1
fi
# A path of the machine that wrote it, or an internal (retryd__) function,
# means the baseline was written some other way than --update.
if grep -n "path='/\|name='retryd__" "$baseline" | head -5 >"$work/stale" &&
    [ -s "$work/stale" ]; then
    echo "abi: libclient/abi/libretryd.abi holds absolute paths or internal" \
        "functions (rewrite it with --update):" >&2
    cat "$work/stale" >&2
    exit 1
fi
set +e
abidiff --no-added-syms --suppressions "$supp" "$baseline" "$work/current.abi" \
    >"$work/report" 2>&1
rc=$?
set -e
# abidiff's exit status is a bit set: 1 error, 2 usage, 4 an ABI change,
# 8 an incompatible change. Anything but 0 fails the gate.
if [ "$rc" != 0 ]; then
    echo "abi: libretryd's ABI changed against the baseline (abidiff $rc):" >&2
    cat "$work/report" >&2
    exit 1
fi
echo "abi: no ABI change against the baseline"
