#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs retryd as a host service: the Debian packages it needs, a
# release build, `cmake --install` into PREFIX (default /usr/local; the
# configuration always goes to /etc/retryd, where the daemon and retrydctl
# look), the retryd user and group (systemd-sysusers, else groupadd and
# useradd), /run/retryd (systemd-tmpfiles, else install -d); then, where PID
# 1 is systemd, enables and starts retryd.service, and elsewhere says how to
# start the daemon by hand. Idempotent: a second run changes nothing but
# the installed binaries, and never an edited /etc/retryd/retryd.conf.
# usage: deploy/install.sh [PREFIX]
# environment: RETRYD_BUILD_DIR (default build-install), RETRYD_SYSCONFDIR
# (default /etc; for trying the script out without touching /etc).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-/usr/local}
case "$prefix" in
/*) ;;
*) echo "install: PREFIX must be absolute, not '$prefix'" >&2; exit 64 ;;
esac
build=${RETRYD_BUILD_DIR:-"$root/build-install"}
sysconfdir=${RETRYD_SYSCONFDIR:-/etc}
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
say() { echo "install: $*" >&2; }

# 1. Packages and a build (deploy/build.sh runs deploy/install-deps.sh).
say "building in $build"
"$root/deploy/build.sh" "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_SYSCONFDIR="$sysconfdir" \
    -DRETRYD_BUILD_TESTS=OFF -DRETRYD_BUILD_BENCH=OFF -DRETRYD_BUILD_EXAMPLES=OFF

# 2. The files (docs/daemon.md lists them).
say "installing into $prefix"
$SUDO cmake --install "$build" --prefix "$prefix" | grep -v 'Up-to-date' >&2 || true
if command -v ldconfig >/dev/null 2>&1; then
    $SUDO ldconfig
fi

# 3. The retryd user and group.
sysusers="$prefix/lib/sysusers.d/retryd.conf"
if command -v systemd-sysusers >/dev/null 2>&1; then
    $SUDO systemd-sysusers "$sysusers"
else
    getent group retryd >/dev/null || $SUDO groupadd --system retryd
    getent passwd retryd >/dev/null ||
        $SUDO useradd --system --gid retryd --no-create-home --home-dir / \
            --shell /usr/sbin/nologin --comment "retryd host retry budgets" retryd
fi

# 4. The runtime directory (0750 retryd:retryd) and /etc/retryd.
tmpfiles="$prefix/lib/tmpfiles.d/retryd.conf"
if command -v systemd-tmpfiles >/dev/null 2>&1; then
    $SUDO systemd-tmpfiles --create "$tmpfiles"
else
    $SUDO install -d -o retryd -g retryd -m 0750 /run/retryd
    $SUDO install -d -m 0755 /etc/retryd
fi

conf="$sysconfdir/retryd/retryd.conf"
retryd="$prefix/bin/retryd"
# As the daemon will read it: as retryd.
if command -v runuser >/dev/null 2>&1; then
    $SUDO runuser -u retryd -- "$retryd" --config "$conf" --check-config >&2
else
    $SUDO "$retryd" --config "$conf" --check-config >&2
fi

# 5. The service.
if [ -d /run/systemd/system ] && [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ]; then
    if ! ldd "$retryd" 2>/dev/null | grep -q libsystemd; then
        say "warning: this retryd does not speak sd_notify yet, and the unit"
        say "is Type=notify: systemctl start waits for READY=1 and times out"
    fi
    $SUDO systemctl daemon-reload
    $SUDO systemctl enable --now retryd.service
    say "retryd.service is $(systemctl is-active retryd.service || true)."
    say "check it with: retrydctl stats; journalctl -u retryd"
    say "a running retryd keeps its old binary until: systemctl restart retryd"
    say "(the balances survive a restart)"
else
    cat >&2 <<MSG
install: PID 1 is not systemd, so nothing was started. Start the daemon as
install: the retryd user, e.g.:
    runuser -u retryd -- $retryd --config $conf &
install: (/run/retryd is ready, 0750 retryd:retryd; after a reboot make it
install: again with: systemd-tmpfiles --create $tmpfiles)
install: then check it with: retrydctl stats
MSG
fi
say "a service joins by adding its user to group retryd:"
say "    usermod -aG retryd SERVICE-USER   (then restart that service)"
