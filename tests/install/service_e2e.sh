#!/bin/sh
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2015 # "A && B || fail": fail when either fails, as meant
# What the README tells an operator to do, end to end, under a real booted
# systemd (run it through ../shared/tools/with-systemd, which boots one in
# an overlay of the filesystem on a private tmpfs: nothing here changes
# the machine). In order:
#  1. ./deploy/install.sh exactly as documented; retryd.service is active.
#  2. A service user added to group retryd shares: `retrydctl doctor` as
#     that user exits 0, and its `retrydctl stats` shows the generation
#     root's shows.
#  3. `systemctl reload retryd` shows the reload in the status text.
#  4. `systemctl restart retryd` keeps the segment generation and the
#     balances (a member's deposits, read back by a new client).
#  5. A SIGSTOPped daemon is restarted by the watchdog (a drop-in with a
#     short WatchdogSec=), with the generation and balances kept.
#  6. The live `systemd-analyze security retryd` scores at most 2.0.
#  7. The install script staged (DESTDIR) touches nothing outside
#     DESTDIR, and with a custom prefix writes no file outside it (no
#     /etc/retryd, no /run/retryd).
# usage: service_e2e.sh <source dir> <test client> <scratch dir>
set -eu
src=$1
client=$2
work=$3
svc="rtde2e-$$"
skip() {
    echo "skip: $*" >&2
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    systemctl status retryd --no-pager >&2 2>/dev/null || true
    journalctl -u retryd --no-pager -n 40 >&2 2>/dev/null || true
    exit 1
}
step() { echo "== service_e2e: $*"; }
[ "$(id -u)" = 0 ] || skip "needs root"
[ "$(ps -o comm= -p 1)" = systemd ] ||
    skip "PID 1 is not systemd (run this through ../shared/tools/with-systemd)"
for f in /usr/local/bin/retryd /etc/retryd /run/retryd; do
    [ ! -e "$f" ] || skip "$f exists: this is not a fresh system"
done

rm -rf "$work"
mkdir -p "$work"
cleanup() {
    rc=$?
    set +e
    userdel "$svc" 2>/dev/null
    rm -rf "$work"
    exit $rc
}
trap cleanup EXIT

# --- 1. the documented install ------------------------------------------
step "./deploy/install.sh"
(cd "$src" && ./deploy/install.sh) >"$work/install.log" 2>&1 || {
    tail -n 30 "$work/install.log" >&2
    fail "deploy/install.sh failed"
}
[ "$(systemctl is-active retryd)" = active ] || fail "retryd is not active after the install"
prop() { systemctl show -P "$1" retryd; }

# generation AS-USER: the segment generation `retrydctl stats` shows.
generation() {
    runuser -u "$1" -- retrydctl stats | sed -n 's/.*generation \([0-9a-f]*\) .*/\1/p'
}
gen=$(generation root)
[ -n "$gen" ] || fail "retrydctl stats shows no generation"

# --- 2. a service user joins -----------------------------------------------
step "a service user in group retryd shares"
useradd --system --no-create-home --shell /usr/sbin/nologin "$svc"
usermod -aG retryd "$svc"
runuser -u "$svc" -- retrydctl doctor >"$work/doctor.txt" 2>&1 || {
    cat "$work/doctor.txt" >&2
    fail "retrydctl doctor as $svc did not say sharing"
}
[ "$(generation "$svc")" = "$gen" ] || fail "$svc sees generation $(generation "$svc"), root $gen"
runuser -u "$svc" -- test -x "$client" || skip "$client is not reachable by other users"

# client COMMANDS...: one test client of the service user, one command a
# line; prints its replies.
client() {
    printf '%s\n' "$@" exit | runuser -u "$svc" -- "$client" /run/retryd/control.sock
}
out=$(client "open e2e 1 0 100" "deposit 10" "balance")
echo "$out" | grep -qx "ok shared=1" || fail "the member's client does not share: $out"
echo "$out" | grep -qx "balance 10.000000" || fail "10 deposits at ratio 1: $out"
balance() { client "open e2e 1 0 100" "balance" | sed -n 's/^balance //p'; }

# --- 3. reload ---------------------------------------------------------------
step "systemctl reload"
systemctl reload retryd || fail "systemctl reload"
i=0
until prop StatusText | grep -q "configuration reloaded"; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "the status never said the reload: $(prop StatusText)"
    sleep 0.1
done

# --- 4. restart keeps the segment ------------------------------------------
step "systemctl restart keeps generation and balances"
main=$(prop MainPID)
systemctl restart retryd || fail "systemctl restart"
[ "$(prop MainPID)" != "$main" ] || fail "restart kept the same daemon"
[ "$(generation root)" = "$gen" ] || fail "generation $(generation root) after restart, was $gen"
[ "$(balance)" = 10.000000 ] || fail "balance $(balance) after restart, was 10"

# --- 5. the watchdog ---------------------------------------------------------
# A stopped process cannot act on the watchdog's SIGABRT, so the abort
# timeout's SIGKILL ends it; both short here so the test is.
step "a SIGSTOPped daemon is restarted by the watchdog"
mkdir -p /run/systemd/system/retryd.service.d
printf '[Service]\nWatchdogSec=2s\nTimeoutAbortSec=2s\nRestartSec=100ms\n' \
    >/run/systemd/system/retryd.service.d/watchdog.conf
systemctl daemon-reload
systemctl restart retryd || fail "restart with the watchdog drop-in"
[ "$(prop WatchdogUSec)" = 2s ] || fail "the drop-in did not apply: $(prop WatchdogUSec)"
restarts=$(prop NRestarts)
main=$(prop MainPID)
kill -STOP "$main"
i=0
until [ "$(prop NRestarts)" -gt "$restarts" ] && [ "$(prop ActiveState)" = active ] &&
    [ "$(prop MainPID)" != "$main" ] && [ "$(prop MainPID)" != 0 ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || fail "not restarted within 30 s ($(prop ActiveState), pid $(prop MainPID), $(prop NRestarts) restarts)"
    sleep 0.1
done
kill -0 "$main" 2>/dev/null && fail "the stopped daemon $main is still there"
i=0
until retrydctl stats >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "the restarted daemon does not answer"
    sleep 0.1
done
[ "$(generation root)" = "$gen" ] || fail "generation $(generation root) after the watchdog, was $gen"
[ "$(balance)" = 10.000000 ] || fail "balance $(balance) after the watchdog, was 10"
rm /run/systemd/system/retryd.service.d/watchdog.conf
systemctl daemon-reload

# --- 6. the live hardening score ---------------------------------------------
step "systemd-analyze security retryd"
line=$(systemd-analyze security --no-pager retryd 2>&1 | grep 'Overall exposure level') ||
    fail "no exposure level from systemd-analyze security"
score=$(echo "$line" | sed -n 's/.*: \([0-9][0-9.]*\) .*/\1/p')
echo "$line"
awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 2.0) }' || fail "exposure '$score' is above 2.0"

# --- 7. DESTDIR and a custom prefix --------------------------------------------
# changed_since MARK: files outside the scratch directory, in the places an
# install could write, changed since MARK (the journal and systemd's own
# state excepted).
changed_since() {
    find /etc /usr /opt /var/lib /run -xdev -newer "$1" \
        -not -path '/run/systemd/*' -not -path '/run/log/*' \
        -not -path '/var/lib/systemd/*' -not -path '/run/user/*' \
        -not -path "$work/*" -not -path "$work" 2>/dev/null |
        grep -v "^$2" || true
}
# The booted systemd also started the machine's own enabled services (a
# database, say), whose writes would read as the install's: inside this
# throwaway system, everything but systemd's own units stops first.
quiet_system() {
    systemctl list-units --type=service --state=running --no-legend --plain |
        awk '{ print $1 }' |
        grep -v -E '^(systemd-|dbus|retryd)' |
        while read -r unit; do
            systemctl stop "$unit" 2>/dev/null || true
        done
}
step "DESTDIR=... ./deploy/install.sh"
quiet_system
touch "$work/mark"
sleep 0.01 # a later mtime than the mark, on any filesystem
(cd "$src" && DESTDIR="$work/stage" ./deploy/install.sh) >"$work/stage.log" 2>&1 || {
    tail -n 30 "$work/stage.log" >&2
    fail "the staged install failed"
}
[ -x "$work/stage/usr/local/bin/retryd" ] || fail "nothing staged in DESTDIR"
[ -f "$work/stage/etc/retryd/retryd.conf" ] || fail "no configuration staged in DESTDIR"
left=$(changed_since "$work/mark" "$src")
[ -z "$left" ] || fail "the staged install changed, outside DESTDIR: $left"

step "./deploy/install.sh /opt/retryd-e2e"
systemctl stop retryd
rm -rf /etc/retryd /run/retryd
touch "$work/mark"
sleep 0.01
(cd "$src" && ./deploy/install.sh /opt/retryd-e2e) >"$work/opt.log" 2>&1 || {
    tail -n 30 "$work/opt.log" >&2
    fail "the install into /opt/retryd-e2e failed"
}
[ -x /opt/retryd-e2e/bin/retryd ] || fail "no /opt/retryd-e2e/bin/retryd"
[ -f /opt/retryd-e2e/etc/retryd/retryd.conf ] || fail "no configuration below the prefix"
[ ! -e /etc/retryd ] || fail "a custom prefix made /etc/retryd"
[ ! -e /run/retryd ] || fail "a custom prefix made /run/retryd"
left=$(changed_since "$work/mark" "$src" | grep -v -e '^/opt/retryd-e2e' -e '^/opt$' || true)
[ -z "$left" ] || fail "the install into /opt/retryd-e2e changed, outside it: $left"
echo "service_e2e: ok (install, a member shares, reload, restart and watchdog keep generation $gen and balance 10, exposure $score, DESTDIR and prefix stay inside)"
