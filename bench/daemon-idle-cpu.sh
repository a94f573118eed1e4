#!/bin/sh
# SPDX-License-Identifier: MIT
# The CPU an idle retryd uses per second of wall time (docs/benchmarks.md,
# "The daemon at rest"): the daemon started with the default capacities
# (4096 upstreams, 1024 processes) in a temporary runtime directory, left
# to settle for 3 s, then its CPU time (every thread, from
# /proc/PID/schedstat) over SECONDS of wall time. Give two binaries to
# compare builds; they take turns, ROUNDS times.
# usage: bench/daemon-idle-cpu.sh [-s SECONDS] [-r ROUNDS] RETRYD [RETRYD...]
set -eu
secs=10
rounds=1
while getopts s:r: o; do
    case $o in
    s) secs=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) exit 64 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-s SECONDS] [-r ROUNDS] RETRYD..." >&2; exit 64; }

measure() {
    dir=$(mktemp -d)
    mkdir "$dir/run"
    printf '[retryd]\nruntime_dir = %s/run\nlog_level = info\n' "$dir" >"$dir/retryd.conf"
    "$1" --config "$dir/retryd.conf" 2>"$dir/log" &
    pid=$!
    sleep 3 # settle: the start-up's work is not the idle cost
    a=$(cut -d' ' -f1 "/proc/$pid/schedstat")
    sleep "$secs"
    b=$(cut -d' ' -f1 "/proc/$pid/schedstat")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    echo "$1: $(((b - a) / secs / 1000)) us of CPU per second"
}

i=0
while [ "$i" -lt "$rounds" ]; do
    for bin in "$@"; do
        measure "$bin"
    done
    i=$((i + 1))
done
