#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the libFuzzer fuzzers (tests/fuzz) with clang, ASan and UBSan, and
# runs each briefly over its seed corpus (what CI runs). Inputs a fuzzer
# finds stay in the build tree's corpus copy; a crash fails the run and
# leaves fuzz_<name>-crash-* in the build tree's tests/fuzz. Only the fuzzers
# and what they link are built in that tree.
# usage: deploy/fuzz.sh [build-dir] [extra cmake arguments...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"

dir=${1:-"$root/build-fuzz"}
[ $# -gt 0 ] && shift
CC=clang cmake -S "$root" -B "$dir" -DRETRYD_FUZZ=ON \
    -DRETRYD_BUILD_TESTS=OFF -DRETRYD_BUILD_BENCH=OFF -DRETRYD_WERROR=ON \
    "$@" >/dev/null
cmake --build "$dir" --target fuzzers -j "$(nproc)" >/dev/null
ctest --test-dir "$dir" -L fuzz --output-on-failure
