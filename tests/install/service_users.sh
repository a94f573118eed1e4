#!/bin/sh
# shellcheck disable=SC2015 # "A && B || fail": fail when either fails, as meant
# SPDX-License-Identifier: MIT
# (c) The installed service's user model, for real on this machine: the
# installed sysusers entry makes the retryd user and group
# (systemd-sysusers), the installed daemon runs as retryd in a runtime
# directory made as systemd makes /run/retryd (0750 retryd:retryd), and
#  - two processes of two different users in group retryd attach and share
#    one budget: what the first deposits, the second withdraws;
#  - a process of a user outside the group is refused (it cannot reach the
#    0750 directory) and falls back to a budget of its own: it is not
#    attached, retryd_host_share_status() says not-authorised, and the
#    daemon's statistics show neither it nor its tokens.
# Throwaway users are made with useradd and removed at the end; the retryd
# user and group stay (they are what an install makes).
# usage: service_users.sh <build dir> <test client> <scratch dir>
set -eu
build=$1
client=$2
work=$3
skip() {
    echo "skip: $*" >&2
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    [ -f "$run/daemon.log" ] && sed 's/^/daemon: /' "$run/daemon.log" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root (systemd-sysusers, useradd, setpriv)"
for t in systemd-sysusers useradd userdel setpriv; do
    command -v $t >/dev/null 2>&1 || skip "$t is not installed"
done

rm -rf "$work"
mkdir -p "$work"
dest="$work/dest"
DESTDIR="$dest" cmake --install "$build" --prefix /usr/local >"$work/install.log"
p="$dest/usr/local"
systemd-sysusers "$p/lib/sysusers.d/retryd.conf"
getent passwd retryd >/dev/null && getent group retryd >/dev/null ||
    fail "systemd-sysusers made no retryd user and group"

# Socket paths must be short (sun_path): the runtime part lives in /tmp.
run=$(mktemp -d /tmp/retryd-svc.XXXXXX)
chmod 0755 "$run"
in1="rtdin1-$$"
in2="rtdin2-$$"
out="rtdout-$$"
daemon_pid=""
pids=""
cleanup() {
    rc=$?
    set +e
    if [ -n "$daemon_pid" ]; then
        kill "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    for u in "$in1" "$in2" "$out"; do
        userdel "$u" 2>/dev/null || true
    done
    rm -rf "$run"
    exit $rc
}
trap cleanup EXIT
useradd --system --no-create-home --shell /usr/sbin/nologin -G retryd "$in1"
useradd --system --no-create-home --shell /usr/sbin/nologin -G retryd "$in2"
useradd --system --no-create-home --shell /usr/sbin/nologin "$out"

# as USER CMD...: run as USER with its groups, as a service of it would.
as() {
    u=$1
    shift
    setpriv --reuid="$u" --regid="$u" --init-groups -- "$@"
}
as "$in1" test -x "$client" || skip "$client is not reachable by other users (build directory permissions)"
as retryd test -x "$p/bin/retryd" || skip "the installed daemon is not reachable by retryd"

# The runtime directory as RuntimeDirectory= makes it, the installed
# configuration with only runtime_dir changed.
install -d -o retryd -g retryd -m 0750 "$run/rt"
sed "s#^runtime_dir = .*#runtime_dir = $run/rt#" "$p/etc/retryd/retryd.conf" >"$run/retryd.conf"
chmod 0644 "$run/retryd.conf"
as retryd "$p/bin/retryd" --config "$run/retryd.conf" --check-config >/dev/null ||
    fail "the configuration does not pass --check-config as retryd"
# As much of the unit's sandbox as a plain root shell gives: no new
# privileges, no capabilities, and (where unshare works) its own network
# and IPC namespaces, as PrivateNetwork= and PrivateIPC= make them: the
# clients, in the host's namespaces, still reach its path-named sockets.
# Not through as(): $! must be the daemon itself (unshare and setpriv exec).
sandbox=""
if command -v unshare >/dev/null 2>&1 && unshare --net --ipc true 2>/dev/null; then
    sandbox="unshare --net --ipc --"
fi
$sandbox setpriv --reuid=retryd --regid=retryd --init-groups --no-new-privs \
    --bounding-set=-all --inh-caps=-all -- \
    "$p/bin/retryd" --config "$run/retryd.conf" </dev/null >/dev/null 2>"$run/daemon.log" &
daemon_pid=$!
i=0
until [ -S "$run/rt/control.sock" ] && [ -S "$run/rt/stats.sock" ]; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "the daemon did not start"
    kill -0 "$daemon_pid" 2>/dev/null || fail "the daemon exited"
    sleep 0.1
done
[ "$(stat -c '%U:%G %a' "$run/rt/control.sock")" = "retryd:retryd 660" ] ||
    fail "control socket is $(stat -c '%U:%G %a' "$run/rt/control.sock")"
[ "$(stat -c '%U:%G %a' "$run/rt")" = "retryd:retryd 750" ] ||
    fail "runtime directory is $(stat -c '%U:%G %a' "$run/rt")"

# start NAME USER: a test client of USER reading commands from a fifo.
start() {
    mkfifo "$run/$1.in"
    setpriv --reuid="$2" --regid="$2" --init-groups -- \
        "$client" "$run/rt/control.sock" <"$run/$1.in" >"$run/$1.out" 2>&1 &
    pids="$pids $!"
}
# say NAME COMMAND EXPECTED: send one command, wait for the reply line.
say() {
    n=$(wc -l <"$run/$1.out")
    case $1 in
    a) printf '%s\n' "$2" >&7 ;;
    b) printf '%s\n' "$2" >&8 ;;
    *) printf '%s\n' "$2" >&9 ;;
    esac
    i=0
    while [ "$(wc -l <"$run/$1.out")" -le "$n" ]; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "$1: no reply to '$2'"
        sleep 0.05
    done
    got=$(sed -n "$((n + 1))p" "$run/$1.out")
    [ "$got" = "$3" ] || fail "$1: '$2' answered '$got', not '$3'"
}
start a "$in1"
exec 7>"$run/a.in"
start b "$in2"
exec 8>"$run/b.in"
start c "$out"
exec 9>"$run/c.in"

say a "open shared 1 0 3" "ok shared=1"
say a "attached" "attached 1"
say a "status" "status shared"
say a "deposit 3" "ok"
say b "open shared 1 0 3" "ok shared=1"
say b "attached" "attached 1"
say b "status" "status shared"
say b "withdraw 5" "granted 3 denied 2"
say c "open shared 1 0 3" "ok shared=0"
say c "attached" "attached 0"
say c "status" "status not-authorised"
say c "deposit 2" "ok"
say c "withdraw 5" "granted 2 denied 3"

# The daemon's view (root reads the stats socket): the two members
# attached, the outsider not; the upstream saw the members' tokens only.
LD_LIBRARY_PATH="$(dirname "$(find "$p" -name 'libretryd.so.*.*' | head -n 1)")" \
    "$p/bin/retrydctl" stats --processes --stats-socket "$run/rt/stats.sock" \
    >"$run/stats.txt" || fail "retrydctl stats"
cat "$run/stats.txt"
uid() { id -u "$1"; }
grep -q "attached processes 2 " "$run/stats.txt" || fail "not exactly two processes attached"
for u in "$in1" "$in2"; do
    awk -v u="$(uid "$u")" '$2 == u { f = 1 } END { exit !f }' "$run/stats.txt" ||
        fail "$u (in group retryd) is not attached"
done
awk -v u="$(uid "$out")" '$2 == u { f = 1 } END { exit !f }' "$run/stats.txt" &&
    fail "$out (outside group retryd) is attached"
awk '$1 == "shared" && $6 == 3 && $7 == 3 { f = 1 } END { exit !f }' "$run/stats.txt" ||
    fail "upstream 'shared' does not show 3 deposits and 3 grants"
exec 7>&- 8>&- 9>&-
# shellcheck disable=SC2086 # a list of pids
wait $pids || true
echo "service_users: members of retryd share the budget; an outsider is refused and goes local: ok${sandbox:+ (daemon in its own network and IPC namespaces)}"
