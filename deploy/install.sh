#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs retryd as a host service: the Debian packages it needs, a
# release build, `cmake --install` into PREFIX (default /usr/local), the
# retryd user and group (systemd-sysusers, else groupadd and useradd),
# /run/retryd (systemd-tmpfiles, else install -d); then, where PID 1 is
# systemd, enables and starts retryd.service, and elsewhere says how to
# start the daemon by hand. Idempotent: a second run changes nothing but
# the installed binaries, and never an edited retryd.conf.
#
# Where things go:
#  - PREFIX /usr/local or /usr (a host install): the configuration in
#    /etc/retryd, the unit where systemd reads it, the service started.
#  - any other PREFIX (e.g. /opt/retryd): every file below PREFIX, the
#    configuration in PREFIX/etc/retryd; the user and group are made
#    (the daemon runs as retryd), but nothing else outside PREFIX is
#    touched: no /etc/retryd, no /run/retryd (the unit's RuntimeDirectory=
#    makes it when the service starts), and the unit is not enabled (the
#    script prints the `systemctl link` that would).
#  - DESTDIR set (a staged install, for a package or an image): the files
#    below DESTDIR and nothing else at all: no user, no directories, no
#    ldconfig, no service; the script prints what the target must do.
# usage: deploy/install.sh [PREFIX]
# environment: DESTDIR (staged install), RETRYD_BUILD_DIR (default
# build-install), RETRYD_SYSCONFDIR (where retryd/retryd.conf goes; default
# as above).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-/usr/local}
case "$prefix" in
/*) ;;
*) echo "install: PREFIX must be absolute, not '$prefix'" >&2; exit 64 ;;
esac
build=${RETRYD_BUILD_DIR:-"$root/build-install"}
case "$prefix" in
/usr | /usr/ | /usr/local | /usr/local/) host_prefix=1 default_sysconfdir=/etc ;;
*) host_prefix=0 default_sysconfdir="$prefix/etc" ;;
esac
sysconfdir=${RETRYD_SYSCONFDIR:-$default_sysconfdir}
destdir=${DESTDIR:-}
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

# 2. The files (docs/daemon.md lists them). cmake --install honours DESTDIR.
say "installing into $destdir$prefix"
$SUDO env DESTDIR="$destdir" cmake --install "$build" --prefix "$prefix" |
    grep -v 'Up-to-date' >&2 || true
if [ -n "$destdir" ]; then
    cat >&2 <<MSG
install: staged below $destdir, and nothing else was changed. On the target:
install:     systemd-sysusers $prefix/lib/sysusers.d/retryd.conf
install:     systemd-tmpfiles --create $prefix/lib/tmpfiles.d/retryd.conf
install:     systemctl daemon-reload && systemctl enable --now retryd.service
MSG
    exit 0
fi
if [ "$host_prefix" = 1 ] && command -v ldconfig >/dev/null 2>&1; then
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

# 4. The runtime directory (0750 retryd:retryd), for a host install only.
tmpfiles="$prefix/lib/tmpfiles.d/retryd.conf"
if [ "$host_prefix" = 0 ]; then
    :
elif command -v systemd-tmpfiles >/dev/null 2>&1; then
    $SUDO systemd-tmpfiles --create "$tmpfiles"
else
    $SUDO install -d -o retryd -g retryd -m 0750 /run/retryd
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
unit="$prefix/lib/systemd/system/retryd.service"
if [ "$host_prefix" = 0 ]; then
    cat >&2 <<MSG
install: installed below $prefix only. To run it as the service:
install:     systemctl link $unit && systemctl enable --now retryd.service
install: or by hand, as the retryd user (make its runtime directory first):
    install -d -o retryd -g retryd -m 0750 /run/retryd
    runuser -u retryd -- $retryd --config $conf &
MSG
elif [ -d /run/systemd/system ] && [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ]; then
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
