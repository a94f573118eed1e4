#!/bin/bash
# SPDX-License-Identifier: MIT
# The main job on an embedded default: a retryd daemon, a local upstream
# (nginx on loopback) that is failing, and four client processes (each a
# shell loop of `retrydctl request`) calling it at once. Every process pays
# its retries from the one host budget, so the failing upstream sees a
# bounded number of retries, not four times the fleet's appetite. Every
# number printed is read from this run (nginx's access log, the daemon's
# counters) and explained where it is shown; the summary at the end adds
# them up.
#
# RETRYD_BUILD_DIR picks the build (default build/); RETRYD_DEMO_NO_BUILD=1
# uses it as it is, without installing or building (the test that checks
# the summary runs the demo that way).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RETRYD_BUILD_DIR:-"$root/build"}
if [ "${RETRYD_DEMO_NO_BUILD:-0}" != 1 ]; then
    # Only what the demo runs: the daemon and the CLI (the tests,
    # benchmarks and examples are deploy/test.sh's).
    echo "demo: building the daemon and retrydctl in $build (a line per step)" >&2
    RETRYD_BUILD_SAY=1 RETRYD_BUILD_TARGETS="retryd_daemon retrydctl" \
        "$root/deploy/build.sh" "$build"
    echo "demo: starting the daemon, nginx and four client processes" >&2
fi
ctl="$build/retrydctl/retrydctl"
retryd="$build/daemon/retryd"

work=$(mktemp -d /tmp/retryd-demo-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A loopback port nobody listens on (a refused connect proves it), below
# Linux's default ephemeral range (32768-60999), where the source ports of
# outgoing connections are bound without listening.
free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    return 1
}

listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# prom NAME [LABEL]: the value of one inventory series in $work/prom.
prom() {
    awk -v n="$1" -v l="${2:-}" '
        index($1, n "{upstream=\"inventory\"") == 1 &&
        (l == "" || index($1, l) > 0) { print $2; exit }' "$work/prom"
}

# table_column N: column N of the inventory row in $work/table.
table_column() {
    awk -v c="$1" '$1 == "inventory" { print $c; exit }' "$work/table"
}

# json_number KEY: the first "KEY": number in $work/json (the inventory
# upstream's, the only one).
json_number() {
    grep -o "\"$1\":[0-9.]*" "$work/json" | head -n 1 | cut -d: -f2
}

# why REASON: what a denial for REASON means, in words.
why() {
    case $1 in
    budget_exhausted) echo "the retry found less than one token in the bucket" ;;
    max_attempts) echo "the call had used all its attempts" ;;
    deadline) echo "too little time was left before the call's deadline" ;;
    *) echo "see docs/decision.md" ;;
    esac
}

# --- the daemon: one budget for "inventory" -----------------------------
ratio=0.1
floor=0.1
cap=5
cat >"$work/retryd.conf" <<CONF
[retryd]
runtime_dir = $work/run
[upstream inventory]
ratio = $ratio              ; each first attempt earns a tenth of a retry
min_retries_per_sec = $floor  ; a floor for quiet times
cap = $cap                  ; the largest burst of retries
CONF
mkfifo "$work/ready"
"$retryd" --config "$work/retryd.conf" --notify-fd 3 3>"$work/ready" \
    2>"$work/retryd.log" &
pids+=($!)
read -r _ <"$work/ready"
export RETRYD_CONTROL_SOCKET="$work/run/control.sock"
export RETRYD_STATS_SOCKET="$work/run/stats.sock"

# --- the upstream: nginx, failing with 503 on /inventory ----------------
# start_nginx: nginx on a free port ($port); false when that port was
# taken after all (nginx exits: another process bound it meanwhile).
start_nginx() {
    local ngx
    port=$(free_port)
    cat >"$work/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 256; }
http {
    access_log $work/nginx/logs/access.log;
    server {
        listen 127.0.0.1:$port;
        location /inventory { return 503 "busy\n"; }
        location /ok { return 200 "ok\n"; }
    }
}
CONF
    /usr/sbin/nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" \
        -e "$work/nginx/logs/error.log" 2>>"$work/nginx/logs/start.log" &
    ngx=$!
    pids+=("$ngx")
    for _ in $(seq 200); do
        listening "$port" && return 0
        kill -0 "$ngx" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
mkdir -p "$work/nginx/logs"
started=0
for _ in 1 2 3; do
    if start_nginx; then
        started=1
        break
    fi
done
[ "$started" = 1 ] || {
    cat "$work/nginx/logs/start.log" >&2
    echo "nginx did not start" >&2
    exit 1
}

services=4
reads_each=25
attempts=4
reads=$((services * reads_each))
echo "retryd demo: a retryd daemon, and nginx on 127.0.0.1:$port answering"
echo "503 (busy) to every request under /inventory."
echo "The budget \"inventory\": each first attempt deposits $ratio token, the floor"
echo "adds $floor token per second, the bucket holds at most $cap; a retry costs 1 token."
echo
echo "### $services services call the failing upstream at once, $reads_each idempotent reads"
echo "### each, up to $attempts attempts per read. Without a budget each read could"
echo "### use all $attempts attempts (each meets 503): up to $((reads * attempts)) requests."
service() {
    local n=$1
    for _ in $(seq "$reads_each"); do
        "$ctl" request --idempotent --max-attempts "$attempts" --deadline 5s \
            --upstream inventory "http://127.0.0.1:$port/inventory?svc=$n" \
            >/dev/null 2>>"$work/service-$n.log" || true
    done
}
svc_pids=()
for n in $(seq "$services"); do
    service "$n" &
    svc_pids+=($!)
done
wait "${svc_pids[@]}"
received=$(wc -l <"$work/nginx/logs/access.log")
# The payment right away, while the budget is as the reads left it (the
# floor refills it by $floor token a second); its answer is shown below.
set +e
"$ctl" request --non-idempotent -d amount=10 --upstream inventory \
    "http://127.0.0.1:$port/inventory/pay" >/dev/null 2>"$work/pay.err"
pay_exit=$?
set -e
echo "nginx logged $received requests for the $reads reads: $reads first attempts and"
echo "$((received - reads)) retries, each paid from the one shared budget."
echo
echo "### Then a payment (a non-idempotent POST) meets the same 503:"
echo "\$ retrydctl request --non-idempotent -d amount=10 http://127.0.0.1:$port/inventory/pay"
cat "$work/pay.err"
case $pay_exit in
0) pay_word=response ;;
1) pay_word=failure ;;
2) pay_word=ambiguous ;;
*) pay_word="an error" ;;
esac
echo "(exit $pay_exit: $pay_word)"
if grep -q 'no retry: budget_exhausted' "$work/pay.err"; then
    pay_reason=budget_exhausted
    echo "It was not retried because the budget was empty: the reads had spent it"
    echo "down to less than one token, and the budget rule (rule 2, budget_empty)"
    echo "is checked before the status rules."
else
    pay_reason=""
    echo "The budget held a token again (the floor refills it), so it was not the"
    echo "budget that stopped the retry this time: it was rule 9, a gateway error"
    echo "on a non-idempotent request is not retried, whatever the budget holds."
fi
echo "The answer is ambiguous, not a plain failure: a 503 comes from a gateway,"
echo "the origin may have run the payment, and for a non-idempotent request"
echo "nothing tells whether it did; the caller must reconcile before any replay."
echo "The same facts decided offline, with an empty budget and with 5 tokens:"
echo "\$ retrydctl decide --evidence response_received --status 503 --idempotency non_idempotent --budget 0"
"$ctl" decide --evidence response_received --status 503 \
    --idempotency non_idempotent --budget 0 | grep -E '^(verdict|rule):'
echo "\$ ... --budget 5"
"$ctl" decide --evidence response_received --status 503 \
    --idempotency non_idempotent --budget 5 | grep -E '^(verdict|rule):'
echo "Either way no retry; with an empty budget the budget rule is the one named."
echo

# One look at the counters, in three formats, after every request.
"$ctl" stats >"$work/table"
"$ctl" stats --json >"$work/json"
"$ctl" stats --prometheus >"$work/prom"
deposits=$(table_column 6)
granted=$(table_column 7)
denied_total=$(table_column 8)
ambiguous=$(table_column 9)
sent=$(wc -l <"$work/nginx/logs/access.log")
refilled=$(json_number refilled_tokens)
discarded=$(json_number discarded_tokens)
# NOT_SENT/SENT_NO_RESP/RESP/PARTIAL: attempts by evidence.
responses=$(table_column 10 | cut -d/ -f3)
attached=$(sed -n 's/.*attached processes \([0-9]*\).*/\1/p' "$work/table")
checks=$(sed -n 's/^segment checks \([0-9]*\).*/\1/p' "$work/table")
draining=$(sed -n 's/.*draining \([a-z]*\).*/\1/p' "$work/table")
echo "### The daemon's counters for \"inventory\", after the reads and the payment:"
cat "$work/table"
echo
echo "The header: the daemon's version, the segment's generation (its identity),"
echo "the daemon's uptime, $attached processes attached now (each retrydctl attached for its"
echo "one call and has left), host-wide draining: $draining. Segment checks $checks: the"
echo "heartbeats so far (one a second) that looked for damage in the shared segment."
echo "CAP, RATIO and FLOOR/s are the configuration above."
echo "DEPOSITS $deposits: first attempts, the $reads reads and the payment (each deposits $ratio token)."
echo "GRANTED $granted: retries paid a token; all were the reads' ($((received - reads)) in nginx's log)."
echo "Why $granted: the bucket started with $floor token (a new budget gets one second of"
echo "floor), the first attempts deposited $(awk -v d="$deposits" -v r="$ratio" 'BEGIN { printf "%.1f", d * r }') and the floor had added $(printf %.2f "$refilled") by"
echo "the last claim (the cap turned away $(printf %.2f "$discarded")): $(awk -v a="$floor" -v d="$deposits" -v r="$ratio" -v f="$refilled" -v x="$discarded" 'BEGIN { printf "%.2f", a + d * r + f - x }') tokens, $granted of them spent."
echo "BALANCE is what is left, with the floor's refill up to the moment it was read."
echo "DENIED $denied_total: retries refused, by reason on the line below the row:"
awk '/^retryd_upstream_retries_denied_total\{upstream="inventory"/ && $2 > 0 {
        sub(/.*reason="/, "", $1); sub(/".*/, "", $1); print $1, $2 }' "$work/prom" >"$work/reasons"
while read -r reason n; do
    if [ "$reason" = "$pay_reason" ]; then
        echo "  $reason $n: $(why "$reason"):"
        echo "    $((n - 1)) reads cut short, and the payment"
    else
        echo "  $reason $n: $(why "$reason")"
    fi
done <"$work/reasons"
echo "AMBIG $ambiguous: the payment. An ambiguous answer whose retry a rule had already"
echo "refused counts under that rule's reason too:"
if [ -n "$pay_reason" ]; then
    echo "the payment is also one of the DENIED, under $pay_reason."
else
    echo "rule 9 refuses nothing of that kind, so the payment is not in DENIED."
fi
echo "The last column counts attempts by what is proven about each: $responses got"
echo "a response, of the $sent requests nginx logged."
echo
echo "### The same counters for Prometheus (excerpt; read right after the table,"
echo "### no request ran in between, so every count is the table's):"
grep -E '^retryd_upstream_(retries_granted|deposits|ambiguous)_total|^retryd_upstream_retries_denied_total.* [1-9]' "$work/prom"
echo

# --- the summary, from this run's figures ----------------------------------
possible=$((reads * attempts + 1))
by_reason=$(awk '{ printf "%s%s=%s", s, $1, $2; s = " " }' "$work/reasons")
echo "### Summary"
echo "requests sent       $sent of up to $possible without a budget ($reads reads x $attempts attempts + the payment)"
echo "  first attempts    $deposits ($reads reads + 1 payment)"
echo "  retries paid      $granted (from the one shared budget)"
echo "denied, by reason   ${by_reason:-none}"
echo "denied in all       $denied_total"
echo "ambiguous           $ambiguous (the payment: reconcile before replaying)"
echo
echo "### retrydctl top --batch --iterations 2 --delay 1"
if "$ctl" top --help >/dev/null 2>&1; then
    echo "(two frames a second apart, after the run: the totals are the ones above;"
    echo " the first frame has no rates yet, and in the second every rate is 0"
    echo " because no request runs any more)"
    "$ctl" top --batch --iterations 2 --delay 1
else
    echo "(the top view needs a newer retrydctl: this one has no 'top' command)"
fi
