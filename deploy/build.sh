#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs missing Debian packages, then configures and builds retryd with
# warnings as errors.
# usage: deploy/build.sh [build-dir] [extra cmake arguments...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"

dir=${1:-"$root/build"}
[ $# -gt 0 ] && shift
cmake -S "$root" -B "$dir" -DRETRYD_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)" >/dev/null
