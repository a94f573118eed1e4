#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the build into a scratch prefix, then builds and runs a consumer
# against it the two ways users do: find_package(retryd) and pkg-config, each
# with the shared and the static library.
# usage: run.sh <retryd build dir> <scratch dir> <C compiler>
set -eu
build=$1
work=$2
cc=$3
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

# The version the build was made as (project(VERSION)), and the SONAME's
# suffix the library gets from it (libclient/CMakeLists.txt: the minor too
# before 1.0).
cache_var() { sed -n "s/^CMAKE_PROJECT_VERSION_$1:STATIC=//p" "$build/CMakeCache.txt"; }
major=$(cache_var MAJOR)
minor=$(cache_var MINOR)
if [ "$major" = 0 ]; then so_version="$major.$minor"; else so_version=$major; fi

# The sanitizer builds' libraries need the sanitizer runtime at link time.
extra_flags=$(sed -n 's/^RETRYD_SANITIZE:STRING=\(..*\)$/-fsanitize=\1/p' "$build/CMakeCache.txt")

expect_ambiguous() {
    out=$("$@")
    [ "$out" = "ambiguous sent_no_response_not_idempotent" ] || {
        echo "consumer printed '$out'" >&2
        exit 1
    }
}

# 1. CMake package.
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DRETRYD_WANT_VERSION="$major.$minor" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$extra_flags" \
      -DCMAKE_EXE_LINKER_FLAGS="$extra_flags" >/dev/null
cmake --build "$work/cmake" >/dev/null
expect_ambiguous "$work/cmake/consumer_shared"
expect_ambiguous "$work/cmake/consumer_static"
# The shared consumer really uses the installed shared library.
ldd "$work/cmake/consumer_shared" | grep -q "$prefix/.*libretryd.so.$so_version" || {
    echo "consumer_shared does not load the installed libretryd.so.$so_version" >&2
    exit 1
}

# 2. pkg-config.
libdir=$(find "$prefix" -name retryd.pc -exec dirname {} \;)
export PKG_CONFIG_PATH="$libdir"
# shellcheck disable=SC2046,SC2086 # flags are meant to split
$cc $extra_flags -o "$work/pc_shared" "$here/consumer.c" $(pkg-config --cflags --libs retryd) \
    -Wl,-rpath,"$(pkg-config --variable=libdir retryd)"
expect_ambiguous "$work/pc_shared"
# libretryd.a, with the system libraries it requires (Requires.private)
# linked as shared libraries: Debian ships no static libcurl chain.
# shellcheck disable=SC2046,SC2086
$cc $extra_flags -o "$work/pc_static" "$here/consumer.c" \
    $(pkg-config --cflags retryd) "$(pkg-config --variable=libdir retryd)/libretryd.a" \
    $(pkg-config --libs $(pkg-config --print-requires-private retryd)) -pthread -lm
expect_ambiguous "$work/pc_static"
echo "consumer: find_package and pkg-config, shared and static: ok"
