#!/bin/sh
# SPDX-License-Identifier: MIT
# The complexity gate (docs/gates.md): fails when a function of the
# production C code (libclient/, daemon/, prom/, retrydctl/ and sim/; not
# the tests, the benchmarks or generated code) is over 80 lines or over 20 in
# modified McCabe complexity, and lists each offender.
#
# The numbers are pmccabe's: column 1, the modified cyclomatic complexity,
# counts a switch once however many cases it has (the usual reading for a
# dispatch table, where each case is one flat choice, not a new path to
# reason about); column 5 is the number of lines the function spans.
# usage: deploy/check-complexity.sh [file.c...]   (default: all of them)
set -eu

MAX_LINES=80
MAX_COMPLEXITY=20

command -v pmccabe >/dev/null ||
    { echo "check-complexity: pmccabe is missing (deploy/install-deps.sh)" >&2; exit 2; }

if [ $# -gt 0 ]; then
    for f in "$@"; do
        [ -f "$f" ] || { echo "check-complexity: no file $f" >&2; exit 2; }
    done
    files="$*"
else
    cd "$(dirname "$0")/.."
    # Files on disk, tracked or not, so that new code is held too; the
    # protoc-c output lives in the build tree, but is named here in case.
    files=$(find libclient daemon prom retrydctl sim -type f \( -name '*.c' -o -name '*.h' \) \
        ! -name '*.pb-c.[ch]' | sort)
fi

# pmccabe: complexity, traditional complexity, statements, first line,
# lines, "file(line): function".
# shellcheck disable=SC2086 # one word per file
report=$(pmccabe $files | awk -v ml="$MAX_LINES" -v mc="$MAX_COMPLEXITY" '
    $1 > mc || $5 > ml {
        where = $6; sub(/\(/, ":", where); sub(/\):$/, "", where)
        fn = $7; for (i = 8; i <= NF; i++) fn = fn " " $i
        printf "%s: %s: %d lines%s, complexity %d%s\n", where, fn,
               $5, ($5 > ml ? " (> " ml ")" : ""),
               $1, ($1 > mc ? " (> " mc ")" : "")
    }')

n=$(echo "$files" | wc -w)
if [ -n "$report" ]; then
    echo "$report"
    echo "check-complexity: $(echo "$report" | wc -l) function(s) over" \
        "$MAX_LINES lines or complexity $MAX_COMPLEXITY in $n files;" \
        "split them (docs/gates.md)" >&2
    exit 1
fi
echo "check-complexity: $n files, every function within $MAX_LINES lines" \
    "and complexity $MAX_COMPLEXITY"
