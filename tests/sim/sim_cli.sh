#!/bin/sh
# SPDX-License-Identifier: MIT
# retryd-sim's command line: the JSON of each scenario has the fields the
# issue and the scripts read, the same seed prints the same bytes, and bad
# input is refused with a message that names it (exit 64), nothing run.
# usage: sim_cli.sh RETRYD_SIM WORKDIR
set -eu
sim=$1
work=$2
rm -rf "$work"
mkdir -p "$work"

fail() {
    echo "sim_cli: FAIL $*" >&2
    exit 1
}

command -v jq >/dev/null || { echo "SKIP: jq is missing (deploy/install-deps.sh)"; exit 77; }

# One JSON object with a policy: the issue's fields at the top level.
"$sim" outage --policy retryd --layers 2 --attempts 3 --rate 200 \
    --duration 20 --measure-from 10 --json >"$work/one.json"
for key in deepest_load_ratio retries_per_s expected_ratio; do
    jq -e "has(\"$key\") and (.$key | type == \"number\")" "$work/one.json" \
        >/dev/null || fail "outage --json has no number $key: $(cat "$work/one.json")"
done
[ "$(jq -r .policy "$work/one.json")" = retryd ] || fail "policy field"
echo "sim_cli: outage --policy retryd --json: $(jq -c '{deepest_load_ratio, retries_per_s}' "$work/one.json")"

# Every policy: one row each, in the order 'policies' lists them.
"$sim" outage --layers 1 --rate 100 --duration 20 --measure-from 10 --json \
    >"$work/all.json"
jq -r '.rows[].policy' "$work/all.json" >"$work/rows"
"$sim" policies | awk '{print $1}' >"$work/names"
cmp -s "$work/rows" "$work/names" || fail "rows $(tr '\n' ' ' <"$work/rows") against policies $(tr '\n' ' ' <"$work/names")"
for p in naive finagle grpc aws aws-2026 envoy retryd retryd-adaptive \
    retryd-local retryd-fleet; do
    grep -qx "$p" "$work/names" || fail "no policy $p"
done

# The other scenarios' JSON parses and has its figures.
"$sim" floors --policy retryd --max-processes 4 --json >"$work/floors.json"
jq -e '.rows[0].retries_per_s | length == 3' "$work/floors.json" >/dev/null ||
    fail "floors: $(cat "$work/floors.json")"
# The count a table varies is its array, once: not also the run's 1.
"$sim" hosts --policy retryd-fleet --max-hosts 10 --json >"$work/hosts.json"
jq -e '(.hosts == [1, 10]) and (.rows[0].retries_per_s | length == 2)' \
    "$work/hosts.json" >/dev/null || fail "hosts: $(cat "$work/hosts.json")"
[ "$(grep -o '"hosts":' "$work/hosts.json" | wc -l)" = 1 ] ||
    fail "hosts: the key hosts twice: $(cat "$work/hosts.json")"
"$sim" metastable --policy naive --before 10 --trigger 10 --after 10 --json \
    >"$work/meta.json"
jq -e '(.goodput | length == 30) and (.recovery_s == null or (.recovery_s | type == "number"))' \
    "$work/meta.json" >/dev/null || fail "metastable: $(head -c 400 "$work/meta.json")"
"$sim" restart --policy grpc --duration 30 --measure-from 10 --json \
    >"$work/restart.json"
jq -e '.extra_per_restart | type == "number"' "$work/restart.json" >/dev/null ||
    fail "restart: $(cat "$work/restart.json")"

# The same seed prints the same bytes; another seed, others.
"$sim" metastable --policy retryd --before 10 --trigger 10 --after 10 \
    --seed 7 --json >"$work/a.json"
"$sim" metastable --policy retryd --before 10 --trigger 10 --after 10 \
    --seed 7 --json >"$work/b.json"
"$sim" metastable --policy retryd --before 10 --trigger 10 --after 10 \
    --seed 8 --json >"$work/c.json"
cmp -s "$work/a.json" "$work/b.json" || fail "seed 7 printed two outputs"
cmp -s "$work/a.json" "$work/c.json" && fail "seeds 7 and 8 printed one output"
echo "sim_cli: the same seed, the same bytes ($(wc -c <"$work/a.json") of them)"

# Bad input: exit 64, a message naming it, nothing on standard output.
refuse() {
    want=$1
    shift
    rc=0
    "$sim" "$@" >"$work/out" 2>"$work/err" || rc=$?
    [ "$rc" = 64 ] || fail "$* exited $rc, not 64"
    grep -qF -- "$want" "$work/err" || fail "$*: no '$want' in: $(cat "$work/err")"
    [ ! -s "$work/out" ] || fail "$*: printed $(cat "$work/out")"
    echo "sim_cli: refused: $*: $(head -n 1 "$work/err")"
}
refuse "unknown policy 'bogus'" outage --policy bogus
refuse "--layers: bad value '6'" outage --layers 6
refuse "--layers: bad value 'two'" outage --layers two
refuse "--rate: bad value '-5'" outage --rate -5
refuse "--workers is not an option of outage" outage --workers 4
refuse "--layers needs a value" outage --layers
refuse "unknown scenario 'storm'" storm
refuse "--measure-from must be below --duration" outage --duration 10 --measure-from 10
refuse "more than 4000000 processes" outage --hosts 10000 --processes 1000
refuse "--hosts: bad value '100000'" outage --hosts 100000
refuse "--hosts is not an option of hosts" hosts --hosts 10
refuse "--failure: expected 503 or timeout" restart --failure 500
echo "sim_cli: ok"
