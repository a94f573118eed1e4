#!/bin/sh
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2015 # "A && B || fail": fail when either fails, as meant
# (d) The notify protocol under a real systemd, where this machine runs
# one (PID 1 is systemd and we are root; otherwise it skips, saying which
# is missing: tests/daemon/test_notify.c checks the same protocol against
# a socket playing systemd everywhere). The built daemon runs as a
# transient unit with the installed unit's notify settings (Type=notify,
# NotifyAccess=main, a WatchdogSec= of 2 s so the test is short) and a
# configuration of its own, and
#  - systemd-run returns only once the unit is active (READY=1 arrived),
#    whose status text says it is serving;
#  - SIGHUP (systemctl kill -s HUP, as ExecReload= sends it) leaves it
#    active with the status "configuration reloaded";
#  - it stays active, never restarted by the watchdog, over three
#    watchdog intervals;
#  - systemctl stop ends it cleanly (inactive, not failed).
# usage: service_notify.sh <retryd binary> <scratch dir>
set -eu
retryd=$1
work=$2
unit="retryd-notify-test-$$"
skip() {
    echo "skip: $*" >&2
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    journalctl -u "$unit" --no-pager -n 50 >&2 2>/dev/null || true
    exit 1
}
[ -d /run/systemd/system ] || skip "systemd is not running here (PID 1 is $(ps -o comm= -p 1))"
[ "$(id -u)" = 0 ] || skip "needs root to start a system unit"
command -v systemd-run >/dev/null 2>&1 || skip "systemd-run is not installed"

rm -rf "$work"
mkdir -p "$work"
cleanup() {
    systemctl stop "$unit" >/dev/null 2>&1 || true
    systemctl reset-failed "$unit" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
printf '[retryd]\nruntime_dir = %s/run\n' "$work" >"$work/retryd.conf"

# Bounded by TimeoutStartSec: a daemon that never says READY=1 fails here.
systemd-run --unit="$unit" -p Type=notify -p NotifyAccess=main \
    -p WatchdogSec=2s -p TimeoutStartSec=10s -p KillMode=process \
    "$retryd" --config "$work/retryd.conf" >/dev/null 2>&1 ||
    fail "the unit did not start (no READY=1 within 10 s?)"
prop() { systemctl show -P "$1" "$unit"; }
[ "$(prop ActiveState)" = active ] || fail "not active after start"
case $(prop StatusText) in *serving*) ;; *) fail "status: $(prop StatusText)" ;; esac
main=$(prop MainPID)

# wait_status TEXT: the unit's status text contains TEXT within 5 s.
wait_status() {
    i=0
    until prop StatusText | grep -q "$1"; do
        i=$((i + 1))
        [ $i -lt 50 ] || fail "status never said '$1': $(prop StatusText)"
        sleep 0.1
    done
}
systemctl kill -s HUP --kill-who=main "$unit"
wait_status "configuration reloaded"
[ "$(prop ActiveState)" = active ] || fail "not active after the reload"

# Watched over three watchdog intervals (6 s, looked at every 0.5 s): a
# daemon that stopped pinging would be killed (another MainPID, or failed).
i=0
while [ $i -lt 12 ]; do
    [ "$(prop ActiveState)" = active ] && [ "$(prop MainPID)" = "$main" ] ||
        fail "the watchdog ended the daemon ($(prop ActiveState), pid $(prop MainPID))"
    sleep 0.5
    i=$((i + 1))
done
[ "$(prop NRestarts)" = 0 ] || fail "restarted $(prop NRestarts) times"

systemctl stop "$unit" || fail "systemctl stop"
state=$(prop ActiveState)
[ "$state" = inactive ] || fail "after stop: $state"
echo "service_notify: ok (ready, reloaded, watched 6 s, stopped)"
