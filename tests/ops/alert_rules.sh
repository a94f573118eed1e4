#!/bin/sh
# SPDX-License-Identifier: MIT
# The alerting rules (deploy/prometheus/retryd-alerts.yml): promtool checks
# them and runs their unit tests (retryd-alerts.test.yml). Then, so that a
# test which could never fail cannot hide here, each alert is broken in
# two ways in a scratch copy and the unit tests must fail on both: its
# expression never true (an alert no test sees fire) and always true (an
# alert no test sees stay silent).
# usage: alert_rules.sh PROMTOOL SCRATCH_DIR   (exit 77: no promtool)
set -eu
promtool=${1:-}
scratch=${2:?usage: alert_rules.sh PROMTOOL SCRATCH_DIR}
here=$(cd "$(dirname "$0")/../../deploy/prometheus" && pwd)
if [ -z "$promtool" ] || [ ! -x "$promtool" ]; then
    echo "SKIP: promtool not found (deploy/install-deps.sh puts it in" \
        "/var/cache/retryd/tools)"
    exit 77
fi
rm -rf "$scratch"
mkdir -p "$scratch"

"$promtool" check rules "$here/retryd-alerts.yml"
"$promtool" test rules "$here/retryd-alerts.test.yml"

alerts=$(sed -n 's/^ *- alert: *//p' "$here/retryd-alerts.yml")
[ -n "$alerts" ] || { echo "FAIL: no alert found in the rules" >&2; exit 1; }

# The rules with alert $1's expression (one line or a folded block)
# replaced by $2.
mutate() {
    awk -v name="$1" -v repl="$2" '
        /^ *- alert: / { mine = ($3 == name) }
        skipping {
            match($0, /^ */)
            if (RLENGTH > indent || $0 ~ /^ *$/) next
            skipping = 0
        }
        mine && /^ *expr:/ {
            match($0, /^ */); indent = RLENGTH
            printf "%*sexpr: %s\n", indent, "", repl
            skipping = 1
            next
        }
        { print }' "$here/retryd-alerts.yml"
}

cp "$here/retryd-alerts.test.yml" "$scratch/"
n=0
for a in $alerts; do
    for kind in never always; do
        if [ "$kind" = never ]; then expr='vector(1) == 2'; else expr='vector(1)'; fi
        mutate "$a" "$expr" >"$scratch/retryd-alerts.yml"
        grep -q "expr: $expr\$" "$scratch/retryd-alerts.yml" &&
            "$promtool" check rules "$scratch/retryd-alerts.yml" >/dev/null ||
            { echo "FAIL: could not break $a" >&2; exit 1; }
        if "$promtool" test rules "$scratch/retryd-alerts.test.yml" \
            >"$scratch/out.txt" 2>&1; then
            echo "FAIL: $a made $kind true, and the unit tests still pass:" \
                "it has no test that sees it $( [ $kind = never ] &&
                    echo fire || echo stay silent)" >&2
            exit 1
        fi
        n=$((n + 1))
    done
done
echo "alert rules: $(echo "$alerts" | wc -l) alerts pass their unit tests;" \
    "each of the $n broken copies fails them"
