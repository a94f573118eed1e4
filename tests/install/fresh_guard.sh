#!/bin/sh
# SPDX-License-Identifier: MIT
# The fresh-machine guard (deploy/without-installed.sh) holds: in a mount
# namespace of this test's own (nothing on the machine changes), a copy of
# retryd "installed" under /usr/local that breaks whatever uses it: a
# public header that is an #error, a retryd.pc and a CMake package that
# point at it. Then
#  1. without the guard, a compiler that is given no include path finds
#     the planted header (so the plant is real and the test can fail);
#  2. under the guard it finds none, and pkg-config and find_package()
#     find no retryd;
#  3. the tree configures and builds in a scratch directory with the
#     plant in plain view and no guard: no target reaches for an include
#     path it does not link (the header would #error), which is what the
#     guard exists to make CI notice.
# usage: fresh_guard.sh <source dir> <scratch dir> <C compiler>
set -eu
src=$1
work=$2
cc=$3
skip() {
    echo "skip: $*" >&2
    exit 77
}
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root for a private mount namespace"
command -v unshare >/dev/null 2>&1 || skip "unshare is not installed"
unshare --mount true 2>/dev/null || skip "no mount namespace can be made here"

if [ "${FRESH_GUARD_INSIDE:-}" != 1 ]; then
    rm -rf "$work"
    mkdir -p "$work"
    FRESH_GUARD_INSIDE=1 exec unshare --mount -- "$0" "$@"
fi
mount --make-rprivate /
for d in /usr/local/include /usr/local/lib/pkgconfig /usr/local/lib/cmake; do
    mkdir -p "$d" 2>/dev/null || fail "cannot make $d"
    mount -t tmpfs -o size=1m,mode=0755 tmpfs "$d"
done
mkdir -p /usr/local/include/retryd /usr/local/lib/cmake/retryd
echo '#error installed copy' >/usr/local/include/retryd/retryd.h
cat >/usr/local/lib/pkgconfig/retryd.pc <<'PC'
Name: retryd
Description: a planted installed copy
Version: 0.0.0
Cflags: -I/usr/local/include -DPLANTED_INSTALLED_COPY
Libs: -lretryd
PC
echo 'message(FATAL_ERROR "installed copy")' >/usr/local/lib/cmake/retryd/retrydConfig.cmake

probe() {
    printf '#include <retryd/retryd.h>\n' | "$cc" -E -o /dev/null - 2>&1 || true
}

# 1. The plant is in sight without the guard.
probe | grep -q 'installed copy' || fail "the planted header is not found without the guard: $(probe)"

# 2. Under the guard it is gone, for the compiler, pkg-config and CMake.
guard="$src/deploy/without-installed.sh"
out=$("$guard" sh -c "printf '#include <retryd/retryd.h>\n' | '$cc' -E -o /dev/null - 2>&1" || true)
echo "$out" | grep -q 'installed copy' && fail "the guard let the planted header through"
echo "$out" | grep -q 'No such file' || fail "under the guard: $out"
"$guard" sh -c 'pkg-config --exists retryd' && fail "the guard let the planted retryd.pc through"
mkdir -p "$work/findpkg"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(p C)\nfind_package(retryd QUIET)\nif(retryd_FOUND OR retryd_DIR)\n  message(FATAL_ERROR "found ${retryd_DIR}")\nendif()\n' \
    >"$work/findpkg/CMakeLists.txt"
"$guard" cmake -S "$work/findpkg" -B "$work/findpkg/build" >"$work/findpkg.log" 2>&1 || {
    cat "$work/findpkg.log" >&2
    fail "the guard let find_package(retryd) find the planted package"
}

# 3. The whole tree, with the plant in plain view.
echo "fresh_guard: building the tree beside a planted /usr/local/include/retryd/retryd.h"
cmake -S "$src" -B "$work/build" -DRETRYD_WERROR=ON >"$work/configure.log" 2>&1 || {
    tail -n 20 "$work/configure.log" >&2
    fail "configure failed beside the planted copy"
}
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 || {
    grep -B2 -A2 'installed copy\|error' "$work/build.log" | head -n 40 >&2
    fail "the tree does not build beside a planted installed copy: a target uses an include path it does not link"
}
rm -rf "$work"
echo "fresh_guard: ok (the guard hides the plant; the tree builds without it)"
