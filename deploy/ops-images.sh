#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerates the pictures of docs/operating.md from the tests' own
# tooling: runs the dashboard query test and the status page browser test
# (tests/ops/) in a build tree, then copies the screenshots Chromium took
# in their scratch directories to docs/images/.
# usage: deploy/ops-images.sh [build-dir]   (default: build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
ctest --test-dir "$build" -R '^ops_(dashboard_queries|status_page)$' \
    --output-on-failure
work="$build/tests/ops"
for pair in dashboard-work/dashboard.png:dashboard.png \
    status-page-work/status.png:status-page.png; do
    src="$work/${pair%%:*}"
    [ -s "$src" ] || { echo "ops-images: no $src (did a test skip?)" >&2; exit 1; }
    install -D -m 0644 "$src" "$root/docs/images/${pair#*:}"
    echo "ops-images: docs/images/${pair#*:}"
done
