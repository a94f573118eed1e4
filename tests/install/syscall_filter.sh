#!/bin/sh
# SPDX-License-Identifier: MIT
# Applies a unit's SystemCallFilter= lines in order, as systemd does (the
# first line an allow list: later plain lines add to it, later ~ lines take
# away), with every @group expanded by `systemd-analyze syscall-filter`,
# and checks that each system call retryd makes stays allowed: those listed
# below, and those named in TRACED (one a line: what unit_security.sh saw
# the installed daemon do).
# usage: syscall_filter.sh UNIT_FILE [TRACED]
# exit 0 all allowed, 1 some denied (named), 77 no systemd-analyze.
set -eu
unit=$1
traced=${2:-}
command -v systemd-analyze >/dev/null 2>&1 || {
    echo "skip: systemd-analyze is not installed" >&2
    exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# What the daemon and its segment keeper call: traced with strace -f over a
# start, an attach, a stats read, a drain, a reload, a stop and a restart
# (glibc's and liburcu's calls included), plus what the design relies on;
# and with the fleet tier on (docs/fleet.md), syncing with a Redis named
# by a host name: uname (gethostname, for the default host_id; the
# resolver), the rest (socket, connect, poll, sendto, recvfrom) already
# here.
NEEDED="
uname
accept4 access arch_prctl bind brk chmod chown clock_nanosleep clone clone3
close close_range connect dup2 epoll_create1 epoll_ctl epoll_pwait epoll_wait
eventfd2 execve exit exit_group fallocate fchmod fchown fcntl flock fstat
ftruncate futex getegid geteuid getgid getpid getrandom getsockopt getuid
listen lseek madvise membarrier memfd_create mkdir mmap mprotect munmap
newfstatat openat pidfd_open pipe2 poll ppoll prctl pread64 prlimit64 read
readlink recvfrom recvmsg rename rseq rt_sigaction rt_sigprocmask sendmsg
sendto set_robust_list set_tid_address setsid setsockopt signalfd4 socket
statx symlink timerfd_create timerfd_settime umask unlink wait4 write
"

# expand NAME: one system call per line; @groups recursively.
expand() {
    case "$1" in
    @*)
        systemd-analyze syscall-filter "$1" |
            sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' |
            sed -n '2,$p' | grep -v '^$' | while read -r item; do
                expand "$item"
            done
        ;;
    *) echo "$1" ;;
    esac
}

: >"$tmp/allowed"
first=1
grep -E '^[[:space:]]*SystemCallFilter=' "$unit" | sed 's/^[^=]*=//' >"$tmp/lines"
[ -s "$tmp/lines" ] || {
    echo "$unit has no SystemCallFilter=" >&2
    exit 1
}
while IFS= read -r line; do
    deny=0
    case "$line" in "~"*) deny=1 line=${line#\~} ;; esac
    if [ $first = 1 ] && [ $deny = 1 ]; then
        echo "the first SystemCallFilter= of $unit is a deny list: not checked" >&2
        exit 1
    fi
    first=0
    : >"$tmp/set"
    for item in $line; do
        expand "$item" >>"$tmp/set"
    done
    sort -u "$tmp/set" -o "$tmp/set"
    if [ $deny = 1 ]; then
        comm -23 "$tmp/allowed" "$tmp/set" >"$tmp/next"
    else
        sort -u "$tmp/allowed" "$tmp/set" >"$tmp/next"
    fi
    mv "$tmp/next" "$tmp/allowed"
done <"$tmp/lines"

if [ -n "$traced" ]; then
    NEEDED="$NEEDED $(cat "$traced")"
fi
NEEDED=$(echo "$NEEDED" | tr ' ' '\n' | grep -v '^$' | sort -u)
denied=""
for s in $NEEDED; do
    grep -qx "$s" "$tmp/allowed" || denied="$denied $s"
done
if [ -n "$denied" ]; then
    echo "SystemCallFilter of $unit denies what retryd needs:$denied" >&2
    exit 1
fi
echo "SystemCallFilter of $unit: all $(echo "$NEEDED" | wc -w) system calls retryd makes are allowed ($(wc -l <"$tmp/allowed") allowed in all)"
