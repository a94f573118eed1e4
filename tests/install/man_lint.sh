#!/bin/sh
# SPDX-License-Identifier: MIT
# The manuals are clean roff: groff -t -man -ww -z (every warning, tables
# too) says nothing about any of them, and each names its section as its
# file does.
# usage: man_lint.sh <dir>   (the pages are <dir>/docs/man: the build
# tree's, configured with the version)
set -eu
man=$1/docs/man
command -v groff >/dev/null 2>&1 || {
    echo "skip: groff is not installed" >&2
    exit 77
}
status=0
for page in retryd.8 retrydctl.1 retryd.conf.5 libretryd.3; do
    f="$man/$page"
    [ -f "$f" ] || { echo "FAIL: missing $page" >&2; status=1; continue; }
    out=$(groff -t -man -ww -z "$f" 2>&1)
    if [ -n "$out" ]; then
        echo "FAIL: $page:" >&2
        echo "$out" >&2
        status=1
    fi
    section=${page##*.}
    grep -q "^\.TH [^ ]* $section " "$f" || { echo "FAIL: $page: .TH is not section $section" >&2; status=1; }
done
# The pages made from the headers (deploy/man-from-headers.sh): as clean,
# and one for every function the library exports.
n=0
for f in "$man"/man3/retryd_*.3; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    out=$(groff -t -man -ww -z "$f" 2>&1)
    [ -z "$out" ] || { echo "FAIL: ${f##*/}: $out" >&2; status=1; }
    grep -q '^\.SH SYNOPSIS' "$f" || { echo "FAIL: ${f##*/}: no synopsis" >&2; status=1; }
done
lib=$1/libclient/libretryd.so
if command -v nm >/dev/null 2>&1 && [ -f "$lib" ]; then
    for fn in $(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }'); do
        [ -f "$man/man3/$fn.3" ] || { echo "FAIL: no manual page for $fn" >&2; status=1; }
    done
fi
[ "$n" -gt 0 ] || { echo "FAIL: no page made from the headers" >&2; status=1; }
[ $status = 0 ] && echo "man_lint: 4 pages and $n function pages, no warnings"
exit $status
