#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the whole test suite: installs missing packages, builds with warnings
# as errors, runs ctest. With --sanitizers it then does the same for an
# address+undefined build and a thread build (what CI runs).
# usage: deploy/test.sh [--sanitizers]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

run_suite() {
    dir=$1
    shift
    echo "== retryd tests: ${dir##*/} $*" >&2
    "$root/deploy/build.sh" "$dir" "$@"
    ctest --test-dir "$dir" --output-on-failure -j 2
}

run_suite "$root/build"
if [ "${1:-}" = "--sanitizers" ]; then
    run_suite "$root/build-asan" -DRETRYD_SANITIZE=address,undefined \
        -DRETRYD_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
    run_suite "$root/build-tsan" -DRETRYD_SANITIZE=thread \
        -DRETRYD_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
fi
