#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs missing Debian packages, then configures and builds retryd with
# warnings as errors.
# usage: deploy/build.sh [build-dir] [extra cmake arguments...]
# environment: RETRYD_BUILD_TARGETS builds only those targets (the demo
# builds the daemon and the CLI alone); RETRYD_BUILD_SAY=1 prints a line
# per step.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
say() { [ "${RETRYD_BUILD_SAY:-0}" = 1 ] && echo "build: $*" >&2 || true; }
say "checking the Debian packages (deploy/install-deps.sh)"
"$root/deploy/install-deps.sh"

dir=${1:-"$root/build"}
[ $# -gt 0 ] && shift
say "configuring $dir (cmake)"
cmake -S "$root" -B "$dir" -DRETRYD_WERROR=ON "$@" >/dev/null
targets=""
for t in ${RETRYD_BUILD_TARGETS:-}; do
    targets="$targets --target $t"
done
say "compiling ${RETRYD_BUILD_TARGETS:-everything} on $(nproc) cores"
# shellcheck disable=SC2086 # one word per target option
cmake --build "$dir" -j "$(nproc)" $targets >/dev/null
say "built"
