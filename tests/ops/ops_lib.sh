# SPDX-License-Identifier: MIT
# What the operators' kit tests share (sourced): a free loopback port, a
# bounded wait for a condition, a real retryd with its metrics listener on
# loopback, client processes that keep it busy, and headless Chromium.
# Every process started here is stopped by ops_cleanup, by its pid.

OPS_PIDS=""

# ops_skip REASON: the test cannot run here (ctest's SKIP_RETURN_CODE).
ops_skip() {
    echo "SKIP: $*"
    exit 77
}

ops_fail() {
    echo "FAIL: $*" >&2
    [ -n "${OPS_DIR:-}" ] && [ -f "$OPS_DIR/retryd.log" ] &&
        { echo "--- retryd's log:" >&2; tail -n 30 "$OPS_DIR/retryd.log" >&2; }
    exit 1
}

ops_cleanup() {
    [ -n "${OPS_DIR:-}" ] && : >"$OPS_DIR/stop" && : >"$OPS_DIR/end"
    for p in $OPS_PIDS; do
        kill "$p" 2>/dev/null || true
    done
    for p in $OPS_PIDS; do
        wait "$p" 2>/dev/null || true
    done
    OPS_PIDS=""
}

# ops_wait SECONDS COMMAND...: run COMMAND every 0.1 s until it succeeds;
# fail after SECONDS. A bound, not a hope: the condition is checked.
ops_wait() {
    deadline=$(($(date +%s) + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# A loopback TCP port nothing listens on now.
ops_free_port() {
    while :; do
        p=$(($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 30000 + 20000))
        ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
    done
}

# ops_start_retryd RETRYD DIR: a daemon in DIR (its runtime directory
# DIR/run) with metrics_listen on a free port (OPS_METRICS_PORT) and three
# upstreams: payments, small enough for its clients to empty; search,
# large enough never to be; flaky, with the host throttle on
# (docs/health.md), which its client reports rejecting most attempts. Its
# window is an hour, so that none of a test's evidence leaves it: at rest
# the throttle's probability stands still, and a page can be held against
# the stats socket's answers.
# ops_begin RETRYD SCRATCH: what every query and page test does first:
# skip without curl, jq or ss; a fresh scratch directory, emptied at exit;
# a retryd started in it (ops_start_retryd).
ops_begin() {
    for tool in curl jq ss; do
        command -v "$tool" >/dev/null ||
            ops_skip "$tool not found (deploy/install-deps.sh)"
    done
    rm -rf "$2"
    mkdir -p "$2"
    trap ops_cleanup EXIT
    trap 'exit 1' INT TERM
    ops_start_retryd "$1" "$2"
}

ops_start_retryd() {
    OPS_DIR=$2
    OPS_METRICS_PORT=$(ops_free_port)
    mkdir -p "$OPS_DIR/run"
    chmod 0750 "$OPS_DIR/run"
    cat >"$OPS_DIR/retryd.conf" <<CONF
[retryd]
runtime_dir = $OPS_DIR/run
metrics_listen = 127.0.0.1:$OPS_METRICS_PORT
metrics_per_process = program
log_level = info
[upstream payments]
ratio = 0.1
min_retries_per_sec = 0.5
cap = 5
[upstream search]
ratio = 0.5
min_retries_per_sec = 20
cap = 200
[upstream flaky]
adaptive_throttle = on
throttle_window = 1h
pushback_max = 2s
CONF
    "$1" --config "$OPS_DIR/retryd.conf" >"$OPS_DIR/retryd.log" 2>&1 &
    OPS_RETRYD_PID=$!
    OPS_PIDS="$OPS_PIDS $OPS_RETRYD_PID"
    ops_wait 10 ops_serving_or_gone
    if ! kill -0 "$OPS_RETRYD_PID" 2>/dev/null &&
        grep -q "cannot listen" "$OPS_DIR/retryd.log" &&
        [ "${OPS_TRIES:-0}" -lt 3 ]; then
        # Another test took the port between the pick and the bind.
        OPS_TRIES=$((${OPS_TRIES:-0} + 1))
        ops_start_retryd "$1" "$2"
        return
    fi
    ops_wait 1 curl -sf -o /dev/null \
        "http://127.0.0.1:$OPS_METRICS_PORT/metrics" ||
        ops_fail "retryd did not serve its metrics listener"
}

# The daemon's own word that it serves (a curl could be answered by
# whoever else holds the port), or its exit.
ops_serving_or_gone() {
    grep -q "metrics: serving http://127.0.0.1:$OPS_METRICS_PORT/" \
        "$OPS_DIR/retryd.log" || ! kill -0 "$OPS_RETRYD_PID" 2>/dev/null
}

# ops_stop_retryd: the clients let go, the daemon stopped with SIGTERM; it
# must exit 0 (under the sanitizers, a report or a leak would make it not).
ops_stop_retryd() {
    : >"$OPS_DIR/stop"
    : >"$OPS_DIR/end"
    kill -TERM "$OPS_RETRYD_PID"
    rc=0
    wait "$OPS_RETRYD_PID" || rc=$?
    OPS_PIDS=$(echo "$OPS_PIDS" | sed "s/ $OPS_RETRYD_PID\b//")
    [ "$rc" -eq 0 ] || ops_fail "retryd exited $rc after SIGTERM"
}

# ops_client TEST_CLIENT PROGRAM UPSTREAM DEPOSITS WITHDRAWALS [LINES]: a
# client process named PROGRAM (a symlink: the kernel names a process after
# the file it ran) that deposits and withdraws on UPSTREAM every 50 ms, and
# sends the commands LINES (retryd-test-client's) too, until DIR/stop
# exists, then stays attached, idle, until DIR/end exists.
ops_client() {
    ln -sf "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" "$OPS_DIR/$2"
    (
        echo "open $3"
        while [ ! -e "$OPS_DIR/stop" ]; do
            echo "deposit $4"
            echo "withdraw $5"
            [ -z "${6:-}" ] || printf '%s\n' "$6"
            sleep 0.05
        done
        while [ ! -e "$OPS_DIR/end" ]; do
            sleep 0.1
        done
        echo exit
    ) | "$OPS_DIR/$2" "$OPS_DIR/run/control.sock" >"$OPS_DIR/$2.$$.out" &
    OPS_PIDS="$OPS_PIDS $!"
}

# The load of both tests: two programs on payments (which they empty),
# one on search, one on flaky: each round a first attempt asks the host
# throttle, the upstream answers two in three with a 503 (one with a
# Retry-After of 1 s: a host pushback), and a retry asks the pushback; so
# the throttle engages, throttles and holds.
ops_load() {
    ops_client "$1" rd-checkout payments 10 3
    ops_client "$1" rd-checkout payments 10 3
    ops_client "$1" rd-refunds payments 5 2
    ops_client "$1" rd-search search 20 4
    ops_client "$1" rd-flaky flaky 1 0 "admit first
observe 503 1000
observe 503
observe 200
admit retry"
}

# ops_chromium: the browser's path, or nothing.
ops_chromium() {
    for c in "${RETRYD_CHROMIUM:-}" chromium chromium-browser; do
        [ -n "$c" ] && command -v "$c" 2>/dev/null && return 0
    done
    return 0
}

# ops_browse CHROMIUM WHAT ARGS... URL: headless, its own profile in the
# scratch directory, bounded at 60 s. WHAT: screenshot=FILE or dump-dom.
# The sandbox needs user namespaces a container or root may not have; the
# page is our own, on loopback.
ops_browse() {
    browser=$1
    what=$2
    shift 2
    case "$what" in
        dump-dom) set -- --dump-dom "$@" ;;
        screenshot=*) set -- "--$what" "$@" ;;
    esac
    timeout 60 "$browser" --headless --no-sandbox --disable-gpu \
        --disable-dev-shm-usage --hide-scrollbars --no-first-run \
        --user-data-dir="$OPS_DIR/chromium" "$@" 2>>"$OPS_DIR/chromium.log"
}
