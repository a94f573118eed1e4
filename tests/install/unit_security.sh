#!/bin/sh
# shellcheck disable=SC2015 # "A && B || fail": fail when either fails, as meant
# SPDX-License-Identifier: MIT
# (b) The installed unit is least-privilege: its offline exposure score
# (systemd-analyze security --offline=true) is at most 2.0, every system
# call the daemon makes survives its SystemCallFilter=, it keeps what the
# daemon needs (no PrivateUsers=, default ProtectProc=, AF_UNIX), and
# systemd-analyze verify accepts it.
# usage: unit_security.sh <build dir> <source dir> <scratch dir>
set -eu
build=$1
src=$2
work=$3
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
command -v systemd-analyze >/dev/null 2>&1 || {
    echo "skip: systemd-analyze is not installed" >&2
    exit 77
}
rm -rf "$work"
mkdir -p "$work"
dest="$work/dest"
DESTDIR="$dest" cmake --install "$build" --prefix /usr/local >"$work/install.log"
unit="$dest/usr/local/lib/systemd/system/retryd.service"

# The score. Recorded in docs/daemon.md ("Running as a service").
systemd-analyze security --offline=true --no-pager "$unit" >"$work/security.txt" 2>&1 || true
line=$(grep 'Overall exposure level for retryd.service' "$work/security.txt") || {
    cat "$work/security.txt" >&2
    fail "no overall exposure level in systemd-analyze's output"
}
score=$(echo "$line" | sed -n 's/.*retryd\.service: \([0-9][0-9.]*\) .*/\1/p')
[ -n "$score" ] || fail "cannot read the score in: $line"
echo "systemd-analyze security --offline=true: $line"
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || {
    grep '✗' "$work/security.txt" >&2 || true
    fail "exposure $score is above 2.0"
}

# What the daemon needs stays possible. Where strace is installed, the
# installed daemon (and its segment keeper) is traced through a start, an
# attachment (retrydctl request attaches before it fails to connect), the
# statistics, a drain, a reload, a stop and a restart that adopts the
# segment, so a system call new code makes is checked too. It runs with
# NOTIFY_SOCKET and WATCHDOG_USEC set, as under the unit, so its
# sd_notify calls are traced (nobody listens there: the sends fail, the
# system calls are made all the same).
traced=""
if command -v strace >/dev/null 2>&1; then
    rt=$(mktemp -d /tmp/retryd-trace.XXXXXX)
    trap 'rm -rf "$rt"' EXIT
    printf '[retryd]\nruntime_dir = %s/run\n' "$rt" >"$rt/retryd.conf"
    libdir=$(dirname "$(find "$dest" -name 'libretryd.so.*.*' | head -n 1)")
    ctl() { LD_LIBRARY_PATH="$libdir" "$dest/usr/local/bin/retrydctl" "$@"; }
    # trace N: run the daemon under strace into trace.N, return when serving.
    trace() {
        rm -f "$rt/run/stats.sock"
        NOTIFY_SOCKET="$rt/notify.sock" WATCHDOG_USEC=3000000 \
            strace -f -qq -o "$work/trace.$1" "$dest/usr/local/bin/retryd" \
            --config "$rt/retryd.conf" </dev/null >/dev/null 2>>"$work/traced.log" &
        strace_pid=$!
        i=0
        until [ -S "$rt/run/stats.sock" ]; do
            i=$((i + 1))
            [ $i -lt 100 ] || fail "the traced daemon did not start"
            sleep 0.1
        done
        daemon_pid=$(ps -o pid= --ppid "$strace_pid" | head -n 1 | tr -d ' ')
        [ -n "$daemon_pid" ] || fail "no traced daemon"
    }
    # stop: the daemon only; its keeper (traced too) keeps the segment for
    # the next one, and goes when the runtime directory is removed.
    stop() {
        kill -TERM "$daemon_pid"
        i=0
        while kill -0 "$daemon_pid" 2>/dev/null; do
            i=$((i + 1))
            [ $i -lt 100 ] || fail "the traced daemon did not stop"
            sleep 0.1
        done
        strace_pids="$strace_pids $strace_pid"
    }
    strace_pids=""
    trace 1
    ctl request --control-socket "$rt/run/control.sock" --max-attempts 1 -s \
        http://127.0.0.1:9/ >/dev/null 2>&1 || true
    ctl stats --processes --stats-socket "$rt/run/stats.sock" >/dev/null
    ctl drain on --control-socket "$rt/run/control.sock" >/dev/null
    kill -HUP "$daemon_pid"
    i=0
    until grep -q 'configuration reloaded' "$work/traced.log"; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "the traced daemon did not reload"
        sleep 0.1
    done
    stop
    trace 2
    stop
    rm -rf "$rt" # the keeper exits, and with it the tracers
    # shellcheck disable=SC2086 # a list of pids
    wait $strace_pids || true
    grep -q 'adopted segment' "$work/traced.log" || fail "the restart did not adopt the segment"
    cat "$work"/trace.* | sed -E 's/^[0-9]+ +//; s/^<\.\.\. ([a-z0-9_]+) resumed.*/\1(/' |
        grep -oE '^[a-z0-9_]+\(' | tr -d '(' | sort -u >"$work/traced.txt"
    traced="$work/traced.txt"
    echo "traced: $(wc -l <"$traced") distinct system calls"
fi
# shellcheck disable=SC2086 # no argument when nothing was traced
"$src/tests/install/syscall_filter.sh" "$unit" $traced
grep -q '^PrivateUsers=' "$unit" && fail "PrivateUsers= hides peers' uids from SO_PEERCRED"
grep -q '^ProtectProc=' "$unit" && fail "ProtectProc= would hide clients' /proc/<pid>/stat"
grep -q '^RestrictAddressFamilies=.*AF_UNIX' "$unit" || fail "AF_UNIX not allowed"
grep -q '^ProtectSystem=strict$' "$unit" || fail "ProtectSystem= is not strict"
grep -q '^RuntimeDirectory=retryd$' "$unit" && grep -q '^RuntimeDirectoryMode=0750$' "$unit" &&
    grep -q '^RuntimeDirectoryPreserve=yes$' "$unit" ||
    fail "/run/retryd is not a 0750 runtime directory kept across restarts"
grep -q '^KillMode=process$' "$unit" || fail "a stop would kill the segment's keeper"
grep -q '^Type=notify$' "$unit" && grep -q '^NotifyAccess=main$' "$unit" &&
    grep -q '^WatchdogSec=' "$unit" || fail "not Type=notify with a watchdog"

# systemd's own check, on a copy that runs the DESTDIR's binary.
sed "s#=/usr/local/bin/#=$dest/usr/local/bin/#" "$unit" >"$work/retryd.service"
systemd-analyze verify --man=no "$work/retryd.service" || fail "systemd-analyze verify"
echo "unit_security: ok (exposure $score)"
