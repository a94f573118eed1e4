#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs a test script inside a real booted systemd through with-systemd
# (tests/install/CMakeLists.txt, RETRYD_WITH_SYSTEMD), or skips (77) saying
# why it cannot: no with-systemd beside the checkout, or not root. A 77
# from with-systemd itself (no systemd can be booted here) passes through.
# usage: under_systemd.sh <with-systemd> <script> [ARG...]
set -eu
with=$1
shift
if [ ! -x "$with" ]; then
    echo "skip: with-systemd not found at $with (set RETRYD_WITH_SYSTEMD)" >&2
    exit 77
fi
[ "$(id -u)" = 0 ] || { echo "skip: with-systemd needs root" >&2; exit 77; }
exec "$with" "$@"
