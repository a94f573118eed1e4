#!/bin/sh
# SPDX-License-Identifier: MIT
# Per request of each bench_health_hot row, counted by callgrind on the row's
# loop alone: the instructions, and the atomic read-modify-write
# instructions (x86 lock-prefixed ones and xchg with memory, found with
# objdump in the benchmark's own binary, which links the library
# statically) with how often each ran. Deterministic, so one more atomic
# write on the hot path shows; run it after touching that path
# (docs/benchmarks.md, "Upstream health on the hot path").
# usage: bench/callgrind-health-hot.sh [build-dir] [requests-per-thread]
set -eu
build=${1:-build}
n=${2:-100000}
bin="$build/bench/bench_health_hot"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Address and text of every atomic read-modify-write instruction.
objdump -d --no-show-raw-insn "$bin" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn) }
    /^ +[0-9a-f]+:\t/ {
        addr = $1; sub(":", "", addr)
        text = $0; sub(/^ +[0-9a-f]+:\t/, "", text)
        if (text ~ /^lock / || (text ~ /^xchg/ && text ~ /\(/))
            printf "%s %s %s\n", addr, fn, text
    }' >"$work/locked"
# The rows, and the loop function each one runs (bench_health_hot.c).
for row in decide:loop_decide admit-off:loop_admit admit-on:loop_admit \
    admit-engaged:loop_admit off:loop_health on:loop_health \
    engaged:loop_engaged; do
    name=${row%%:*}
    fn=${row#*:}
    valgrind --tool=callgrind --dump-instr=yes --dump-line=no \
        --compress-pos=no --compress-strings=no --collect-atstart=no \
        --toggle-collect="$fn" --callgrind-out-file="$work/cg.$name" \
        "$bin" "$n" 1 "$name" >/dev/null 2>&1
    # One thread, then two: 3 n requests.
    awk -v requests=$((3 * n)) -v row="$name" '
        FNR == NR { locked[$1] = 1; what[$1] = $2; next }
        /^calls=/ { skip = 1; next }
        /^summary:/ { total = $2 }
        /^0x[0-9a-f]+ [0-9]+/ {
            a = substr($1, 3); sub(/^0+/, "", a)
            if (!skip && (a in locked)) hits[a] += $2
            skip = 0; next
        }
        { skip = 0 }
        END {
            sum = 0; list = ""
            for (a in hits) {
                sum += hits[a]
                if (hits[a] >= requests / 1000)
                    list = list sprintf(" %s %.3f;", what[a], hits[a] / requests)
            }
            printf "%-13s %6.1f instructions, %.3f atomic read-modify-writes per request:%s\n",
                   row, total / requests, sum / requests, list
        }' "$work/locked" "$work/cg.$name"
done
