#!/bin/sh
# SPDX-License-Identifier: MIT
# Fails when a tracked C file differs from .clang-format's layout, or when a
# tracked source, script or build file lacks its SPDX licence line.
# usage: deploy/check-format.sh [--fix]
set -eu
cd "$(dirname "$0")/.."
# Tracked files that exist (a file deleted but not yet committed is skipped).
files=$(git ls-files '*.c' '*.h' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
if [ "${1:-}" = "--fix" ]; then
    # shellcheck disable=SC2086
    clang-format -i $files
    exit 0
fi
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files
missing=$(git ls-files '*.c' '*.h' '*.sh' '*.proto' '*.in' 'CMakeLists.txt' \
    '*.cmake' | while read -r f; do
    if [ -f "$f" ] && ! grep -q 'SPDX-License-Identifier:' "$f"; then
        echo "$f"
    fi
done)
if [ -n "$missing" ]; then
    echo "check-format: no SPDX-License-Identifier line in:" >&2
    echo "$missing" >&2
    exit 1
fi
