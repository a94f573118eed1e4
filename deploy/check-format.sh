#!/bin/sh
# SPDX-License-Identifier: MIT
# Fails when a tracked C file differs from .clang-format's layout.
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
