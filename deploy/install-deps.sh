#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian packages retryd needs to build, test and benchmark,
# and those of the gates (pmccabe: deploy/check-complexity.sh; abigail-tools:
# tests/abi). libsystemd-dev: the daemon's sd_notify (readiness, reload,
# watchdog) under retryd.service; systemd and groff-base: the install tests
# (systemd-analyze security, systemd-sysusers; groff -man -ww on the manuals;
# strace: the system calls the installed daemon makes, against its filter).
# libncurses-dev: retrydctl top's live screen.
# libmicrohttpd-dev: the daemon's /metrics endpoint. libhiredis-dev: the
# daemon's fleet tier (docs/fleet.md), which formats and parses the Redis
# protocol with it; redis-server also runs the fleet tests' Redis and the
# budget benchmark's baseline. curl, jq, iproute2 (ss): the
# operators' kit tests (deploy/prometheus/, tests/ops/) ask Prometheus's
# HTTP API and read the dashboard's JSON. gnuplot-nox: the storm pictures
# of docs/storms.md, drawn from retryd-sim's JSON (sim/plot.sh, which
# reads it with jq). promtool and prometheus: see install_prometheus
# below; chromium: see install_chromium.
# Idempotent: when every package is already installed (and promtool and
# prometheus are in their cache, chromium on PATH) it runs no apt-get at all.
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
libhiredis-dev
curl jq iproute2
gnuplot-nox
"

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi

# promtool checks the live /metrics body and the alert rules in the test
# suite (tests/daemon/stats/test_metrics.c, tests/ops/); the prometheus server
# evaluates the dashboard's queries over a real scrape (tests/ops/). Debian
# ships both only in the prometheus package, whose installation also
# installs, enables and starts a Prometheus server on the build machine; so
# the package is downloaded, not installed, and only usr/bin/promtool and
# usr/bin/prometheus are taken out of it into a cache directory the tests
# look in (RETRYD_TOOLS_DIR, default /var/cache/retryd/tools). A failure
# here is not fatal: those tests then skip, saying why.
TOOLS_DIR=${RETRYD_TOOLS_DIR:-/var/cache/retryd/tools}
install_prometheus() {
    [ -x "$TOOLS_DIR/promtool" ] && [ -x "$TOOLS_DIR/prometheus" ] && return 0
    tmp=$(mktemp -d)
    chmod 0755 "$tmp" # apt's download user writes into it
    if (cd "$tmp" && $SUDO apt-get download -qq prometheus) &&
        dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" &&
        $SUDO install -D -m 0755 "$tmp/x/usr/bin/promtool" \
            "$TOOLS_DIR/promtool" &&
        $SUDO install -D -m 0755 "$tmp/x/usr/bin/prometheus" \
            "$TOOLS_DIR/prometheus"; then
        echo "install-deps: promtool and prometheus in $TOOLS_DIR" >&2
    else
        echo "install-deps: prometheus not available; the metrics format," \
            "alert rule and dashboard query tests will skip" >&2
    fi
    rm -rf "$tmp"
}

# Debian's chromium (a browser: it starts nothing) renders the status page
# in tests/ops/. It is large and not every mirror has it, so a failure to
# install it is not fatal either: the browser test then skips, saying why.
install_chromium() {
    command -v chromium >/dev/null 2>&1 && return 0
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y -qq --no-install-recommends chromium; then
        $SUDO apt-get update -qq &&
            $SUDO apt-get install -y -qq --no-install-recommends chromium ||
            echo "install-deps: chromium not available; the status page" \
                "browser test will skip" >&2
    fi
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
    install_prometheus
    install_chromium
    exit 0
fi

echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -qq --no-install-recommends $missing
install_prometheus
install_chromium
