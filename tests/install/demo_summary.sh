#!/bin/sh
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2015 # "A && B || fail": fail when either fails, as meant
# The demo (deploy/demo.sh, the README's first command) on the built tree:
# its summary adds up and its words match what happened.
#  - requests sent (nginx's access log) = first attempts + retries paid
#    (the daemon's counters: two independent sources);
#  - sent is at most the requests possible without a budget;
#  - the denials by reason (Prometheus) sum to the denied total (the
#    table);
#  - the payment is the one ambiguous answer, exit 2;
#  - it says "not retried because the budget was empty" exactly when
#    retrydctl's verdict names budget_exhausted;
#  - the top view is shown, or one line says it needs a newer retrydctl.
# usage: demo_summary.sh <source dir> <build dir>
set -eu
src=$1
build=$2
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
[ -x /usr/sbin/nginx ] || {
    echo "skip: nginx is not installed (the demo's upstream)" >&2
    exit 77
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RETRYD_BUILD_DIR=$build RETRYD_DEMO_NO_BUILD=1 "$src/deploy/demo.sh" >"$out" 2>&1 ||
    {
        cat "$out" >&2
        fail "the demo failed"
    }
cat "$out"
# field LABEL: the first number after LABEL at the start of a summary line.
field() {
    sed -n "s/^$1  *\([0-9][0-9]*\).*/\1/p" "$out" | head -n 1
}
sent=$(field "requests sent")
possible=$(sed -n 's/^requests sent  *[0-9]* of up to \([0-9]*\) .*/\1/p' "$out")
first=$(field "  first attempts")
paid=$(field "  retries paid")
denied=$(field "denied in all")
ambiguous=$(field "ambiguous")
reasons=$(sed -n 's/^denied, by reason  *//p' "$out")
for v in "$sent" "$possible" "$first" "$paid" "$denied" "$ambiguous"; do
    [ -n "$v" ] || fail "the summary lacks a figure"
done
echo "summary: sent $sent of $possible, first $first, paid $paid, denied $denied ($reasons), ambiguous $ambiguous"
[ "$sent" -eq $((first + paid)) ] || fail "sent $sent != first attempts $first + retries $paid"
[ "$sent" -le "$possible" ] || fail "sent $sent > possible $possible"
sum=0
for r in $reasons; do
    [ "$r" = none ] && continue
    sum=$((sum + ${r#*=}))
done
[ "$sum" -eq "$denied" ] || fail "denied by reason sum to $sum, not $denied"
[ "$ambiguous" -eq 1 ] || fail "ambiguous $ambiguous, the payment alone expected"
grep -q '^(exit 2: ambiguous)$' "$out" || fail "the payment's exit is not 2"
if grep -q 'no retry: budget_exhausted' "$out"; then
    grep -q 'not retried because the budget was empty' "$out" ||
        fail "the budget stopped the payment, and the demo does not say so"
else
    grep -q 'not retried because the budget was empty' "$out" &&
        fail "the demo blames the budget, retrydctl does not" || true
fi
grep -q 'never retried' "$out" && fail "'never retried' is back" || true
grep -q -A1 '^### retrydctl top' "$out" || fail "no top section"
echo "demo_summary: ok"
