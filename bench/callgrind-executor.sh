#!/bin/sh
# SPDX-License-Identifier: MIT
# Instructions per executor request outside libcurl, counted by callgrind:
# retryd_execute's inclusive count minus what curl_easy_perform cost when
# called from retryd's transfer, divided by the requests. Deterministic, so
# a change of a few instructions on the per-request path shows; run it
# after touching that path (docs/benchmarks.md).
# usage: bench/callgrind-executor.sh [build-dir] [requests]
set -eu
build=${1:-build}
n=${2:-3000}
out=$(mktemp)
trap 'rm -f "$out" "$out.txt"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$build/bench/bench_executor" "$n" 1 >/dev/null 2>&1
callgrind_annotate --tree=caller --inclusive=yes "$out" >"$out.txt"
awk '
    # "<count> (pct)  *  file:function [object]" opens a function block;
    # "<count> (pct)  < file:caller (Nx) [object]" lines, just before it,
    # list its callers.
    / \*  / && /:retryd_execute \[/ && !exec { exec = $1; gsub(",", "", exec) }
    / \*  / { fn = $0 }
    /  < / && /:retryd__transfer_perform / { held = $1; line = $0 }
    / \*  / && /:curl_easy_perform / && held != "" && !perf {
        perf = held; gsub(",", "", perf)
        calls = line
        sub(/.*\(/, "", calls); sub(/x\).*/, "", calls); gsub(",", "", calls)
    }
    / \*  / { held = "" }
    END {
        if (!exec || !perf || !calls) { print "callgrind-executor: counts not found" > "/dev/stderr"; exit 1 }
        printf "retryd_execute: %.1f instructions per request, %.1f outside curl_easy_perform (%d requests)\n",
               exec / calls, (exec - perf) / calls, calls
    }' "$out.txt"
