#!/bin/bash
# SPDX-License-Identifier: MIT
# The main job on an embedded default: a retryd daemon, a local upstream
# (nginx on loopback) that is failing, and four client processes (each a
# shell loop of `retrydctl request`) calling it at once. Every process pays
# its retries from the one host budget, so the failing upstream sees a
# bounded number of retries, not four times the fleet's appetite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RETRYD_BUILD_DIR:-"$root/build"}
"$root/deploy/build.sh" "$build" >&2
ctl="$build/daemon/ctl/retrydctl"
retryd="$build/daemon/retryd"

work=$(mktemp -d /tmp/retryd-demo-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A loopback port nobody listens on (a refused connect proves it).
free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 40000))
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

# --- the daemon: one budget for "inventory" -----------------------------
cat > "$work/retryd.conf" <<CONF
[retryd]
runtime_dir = $work/run
[upstream inventory]
ratio = 0.1              ; each first attempt earns a tenth of a retry
min_retries_per_sec = 1  ; a floor for quiet times
cap = 5                  ; the largest burst of retries
CONF
mkfifo "$work/ready"
"$retryd" --config "$work/retryd.conf" --notify-fd 3 3>"$work/ready" \
    2>"$work/retryd.log" &
pids+=($!)
read -r _ <"$work/ready"
export RETRYD_CONTROL_SOCKET="$work/run/control.sock"
export RETRYD_STATS_SOCKET="$work/run/stats.sock"

# --- the upstream: nginx, failing with 503 on /inventory ----------------
port=$(free_port)
mkdir -p "$work/nginx/logs"
cat > "$work/nginx/nginx.conf" <<CONF
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
    -e "$work/nginx/logs/error.log" &
pids+=($!)
for _ in $(seq 200); do
    listening "$port" && break
    sleep 0.05
done
listening "$port" || { echo "nginx did not start" >&2; exit 1; }

echo "retryd demo: daemon and upstream on 127.0.0.1:$port are up."
echo
echo "### Four services call a failing upstream, 25 idempotent reads each,"
echo "### up to 4 attempts per read (without a budget: up to 400 requests)."
service() {
    local n=$1 i
    for i in $(seq 25); do
        "$ctl" request --idempotent --max-attempts 4 --deadline 5s \
            --upstream inventory "http://127.0.0.1:$port/inventory?svc=$n" \
            >/dev/null 2>>"$work/service-$n.log" || true
    done
}
svc_pids=()
for n in 1 2 3 4; do service "$n" & svc_pids+=($!); done
wait "${svc_pids[@]}"
received=$(wc -l <"$work/nginx/logs/access.log")
echo "The upstream received $received requests for 100 reads:"
echo "$((received - 100)) retries in all, paid from one shared budget."
echo
"$ctl" stats
echo
echo "### A payment (non-idempotent POST) meets the same 503:"
echo "\$ retrydctl request -d amount=10 http://127.0.0.1:$port/inventory/pay"
set +e
"$ctl" request -d amount=10 --upstream inventory \
    "http://127.0.0.1:$port/inventory/pay" >/dev/null
echo "(exit $?: ambiguous; a gateway error on a payment is never retried"
echo " and never reported as a plain failure)"
set -e
echo
echo "### The same counters for Prometheus (excerpt):"
"$ctl" stats --prometheus | grep -E '^retryd_upstream_(retries_granted|deposits|ambiguous)_total|reason="budget_exhausted"'
