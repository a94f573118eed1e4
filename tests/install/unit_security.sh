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

# What the daemon needs stays possible.
"$src/tests/install/syscall_filter.sh" "$unit"
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
