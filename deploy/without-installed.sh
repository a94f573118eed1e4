#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs COMMAND with every installed copy of retryd out of sight, so that a
# build or a test sees what a fresh machine sees: a header, library,
# pkg-config or CMake file, or binary that a `cmake --install` left under
# /usr/local (or /usr) cannot stand in for the tree's own. CI runs inside it
# (.ci/run); tests/install/fresh_guard.sh proves it with a planted header.
#
# How: COMMAND runs in a private mount namespace (unshare --mount, so
# nothing outside this process tree changes) where an empty tmpfs is
# mounted over /usr/local/include, /usr/local/lib/pkgconfig,
# /usr/local/lib/cmake and /usr/local/share/pkgconfig (the directories
# that the compiler, pkg-config and find_package() search by default and
# that only locally built software fills), and /dev/null over each retryd
# file found elsewhere: libretryd* in the linker's default directories,
# the binaries in /usr/local/bin and /usr/bin, and the headers, .pc and
# CMake files in /usr.
#
# Where no mount namespace can be had (not root, no unshare) it cannot
# hide anything: it then runs COMMAND only if there is nothing to hide,
# and otherwise fails, naming what it found.
# usage: deploy/without-installed.sh COMMAND [ARG...]
set -eu
[ $# -gt 0 ] || { echo "usage: without-installed.sh COMMAND [ARG...]" >&2; exit 64; }

# Directories that hold only locally installed software: hidden whole.
DIRS="/usr/local/include /usr/local/lib/pkgconfig /usr/local/lib/cmake
/usr/local/share/pkgconfig"

# Installed retryd files elsewhere, one a line (none is fine).
found() {
    for d in /usr/local/lib /usr/local/lib64 /usr/lib /usr/lib64 \
        /usr/lib/x86_64-linux-gnu /usr/local/lib/x86_64-linux-gnu; do
        [ -d "$d" ] && find "$d" -maxdepth 1 -name 'libretryd*' 2>/dev/null
    done
    for f in /usr/local/bin/retryd /usr/local/bin/retrydctl /usr/local/sbin/retryd \
        /usr/bin/retryd /usr/bin/retrydctl /usr/sbin/retryd \
        /usr/include/retryd /usr/lib/pkgconfig/retryd.pc /usr/share/pkgconfig/retryd.pc \
        /usr/lib/cmake/retryd /usr/lib/x86_64-linux-gnu/pkgconfig/retryd.pc \
        /usr/lib/x86_64-linux-gnu/cmake/retryd; do
        [ -e "$f" ] && echo "$f"
    done
    return 0
}

if [ "${RETRYD_WITHOUT_INSTALLED:-}" = inside ]; then
    # In the new namespace: mounts stay private to this process tree.
    mount --make-rprivate / 2>/dev/null || true
    for d in $DIRS; do
        [ -d "$d" ] && mount -t tmpfs -o size=1m,mode=0755 tmpfs "$d"
    done
    found | while read -r f; do
        if [ -d "$f" ]; then
            mount -t tmpfs -o size=1m,mode=0755 tmpfs "$f"
        else
            mount --bind /dev/null "$f"
        fi
    done
    unset RETRYD_WITHOUT_INSTALLED
    exec "$@"
fi

if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
    unshare --mount true 2>/dev/null; then
    RETRYD_WITHOUT_INSTALLED=inside exec unshare --mount -- "$0" "$@"
fi

# No namespace: nothing may be there to hide.
left=$(found)
for d in $DIRS; do
    for f in "$d/retryd" "$d/retryd.pc"; do
        [ -e "$f" ] && left="$left $f"
    done
done
if [ -n "$(echo "$left" | tr -d ' \n')" ]; then
    echo "without-installed: cannot hide the installed retryd here (needs root and" \
        "unshare --mount), and it would stand in for the tree's own:" $left >&2
    echo "without-installed: remove it, or run as root" >&2
    exit 1
fi
echo "without-installed: no mount namespace here; no installed retryd found, so" \
    "nothing to hide" >&2
exec "$@"
