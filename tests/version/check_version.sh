#!/bin/sh
# SPDX-License-Identifier: MIT
# One version: project(VERSION) in the top CMakeLists.txt. Fails when
# anything that prints or installs a version says another one (the public
# header, retryd --version, retrydctl --version, the .pc file, the CMake
# package, the manuals), or when a source, build or manual file writes the
# version itself instead of taking it from there. First proves the last
# check can fail, on a planted file.
# usage: check_version.sh SOURCE_ROOT BUILD_DIR VERSION RETRYD RETRYDCTL
set -eu
root=$1
build=$2
version=$3
retryd=$4
retrydctl=$5
fail=0
bad() {
    echo "version: FAIL: $*" >&2
    fail=1
}

# Files under $1 that write the version, other than the top CMakeLists.txt:
# code, build files, scripts and manuals (prose in docs may name releases).
written_in() {
    find "$1" \( -name .git -o -name 'build*' \) -prune -o -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.in' -o -name '*.cmake' \
        -o -name CMakeLists.txt -o -name '*.sh' -o -name '*.map' \
        -o -path '*/docs/man/*' \) -print |
        while read -r f; do
            [ "$f" = "$1/CMakeLists.txt" ] && continue
            grep -nF "$version" "$f" /dev/null || true
        done
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/daemon"
printf '#define PLANTED_VERSION "%s"\n' "$version" >"$work/daemon/planted.h"
if [ -z "$(written_in "$work")" ]; then
    bad "a header that writes \"$version\" itself was not found"
fi

hits=$(written_in "$root")
[ -z "$hits" ] || bad "written outside project(VERSION):
$hits"

major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
patch=${rest#*.}
h="$build/include/retryd/version.h"
for part in "MAJOR $major" "MINOR $minor" "PATCH $patch" \
    "STRING \"$version\""; do
    grep -q "^#define RETRYD_VERSION_${part% *} ${part#* }\$" "$h" ||
        bad "$h: no RETRYD_VERSION_${part% *} ${part#* }"
done
out=$("$retryd" --version)
[ "$out" = "retryd $version" ] || bad "retryd --version printed '$out'"
out=$("$retrydctl" --version)
[ "$out" = "retrydctl $version" ] || bad "retrydctl --version printed '$out'"
grep -qx "Version: $version" "$build/retryd.pc" ||
    bad "retryd.pc: no 'Version: $version'"
grep -q "set(PACKAGE_VERSION \"$version\")" "$build/retrydConfigVersion.cmake" ||
    bad "retrydConfigVersion.cmake: not $version"
for page in retryd.8 retrydctl.1 retryd.conf.5 libretryd.3; do
    grep -q "^\.TH .* \"retryd $version\" " "$build/docs/man/$page" ||
        bad "docs/man/$page (as installed): .TH does not say retryd $version"
done
[ "$fail" = 0 ] || exit 1
echo "version: $version everywhere, written only in project(VERSION)"
