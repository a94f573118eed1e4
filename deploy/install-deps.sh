#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages retryd needs to build, test and benchmark,
# and those of the gates (pmccabe: deploy/check-complexity.sh; abigail-tools:
# tests/abi). libsystemd-dev: the daemon's sd_notify (readiness, reload,
# watchdog) under retryd.service; systemd and groff-base: the install tests
# (systemd-analyze security, systemd-sysusers; groff -man -ww on the manuals;
# strace: the system calls the installed daemon makes, against its filter).
# libncurses-dev: retrydctl top's live screen.
# libmicrohttpd-dev: the daemon's /metrics endpoint. promtool: see
# install_promtool below.
# Idempotent: when every package is already installed (and promtool is in
# its cache) it runs no apt-get at all.
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
libmicrohttpd-dev
"

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi

# promtool checks the live /metrics body in the test suite
# (tests/daemon/stats/test_metrics.c). Debian ships it only in the prometheus
# package, whose installation also installs, enables and starts a
# Prometheus server; so the package is downloaded, not installed, and only
# usr/bin/promtool is taken out of it into a cache directory the tests
# look in (RETRYD_TOOLS_DIR, default /var/cache/retryd/tools). A failure
# here is not fatal: the test then skips, saying why.
TOOLS_DIR=${RETRYD_TOOLS_DIR:-/var/cache/retryd/tools}
install_promtool() {
    [ -x "$TOOLS_DIR/promtool" ] && return 0
    command -v promtool >/dev/null 2>&1 && return 0
    tmp=$(mktemp -d)
    chmod 0755 "$tmp" # apt's download user writes into it
    if (cd "$tmp" && $SUDO apt-get download -qq prometheus) &&
        dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" &&
        $SUDO install -D -m 0755 "$tmp/x/usr/bin/promtool" \
            "$TOOLS_DIR/promtool"; then
        echo "install-deps: promtool in $TOOLS_DIR" >&2
    else
        echo "install-deps: promtool not available; the metrics format" \
            "test will skip" >&2
    fi
    rm -rf "$tmp"
}

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    install_promtool
    exit 0
fi

echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -qq --no-install-recommends $missing
install_promtool
