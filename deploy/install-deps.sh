#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages retryd needs to build, test and benchmark,
# and those of the gates (pmccabe: deploy/check-complexity.sh; abigail-tools:
# tests/abi). libsystemd-dev: the daemon's sd_notify (readiness, reload,
# watchdog) under retryd.service; systemd and groff-base: the install tests
# (systemd-analyze security, systemd-sysusers; groff -man -ww on the manuals;
# strace: the system calls the installed daemon makes, against its filter).
# libncurses-dev: retrydctl top's live screen.
# Idempotent: when every package is already installed it runs no apt-get at all.
set -eu

PACKAGES="
build-essential cmake pkg-config
liburcu-dev
libprotobuf-c-dev protobuf-c-compiler
libcurl4-openssl-dev
libcriterion-dev
libinih-dev
uuid-dev
libnghttp2-dev libssl-dev
clang libclang-rt-14-dev
nginx redis-server
libsystemd-dev systemd groff-base strace
pmccabe abigail-tools
libuv1-dev
libncurses-dev
"

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    exit 0
fi

echo "install-deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -qq --no-install-recommends $missing
