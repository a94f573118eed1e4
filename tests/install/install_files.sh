#!/bin/sh
# shellcheck disable=SC2015 # "A && B || fail": fail when either fails, as meant
# SPDX-License-Identifier: MIT
# (a) `cmake --install` into a DESTDIR lays out the whole host service: the
# daemon, the CLI, the library, headers, the unit, sysusers and tmpfiles
# entries, the default configuration (never overwriting an edited one),
# manuals, completion, licence and documentation, each with a sane mode;
# the unit runs the installed daemon on the installed configuration, and
# that configuration passes the installed `retryd --check-config` once the
# retryd group exists.
# usage: install_files.sh <build dir> <scratch dir>
set -eu
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

dest="$work/dest"
DESTDIR="$dest" cmake --install "$build" --prefix /usr/local >"$work/install.log"
p="$dest/usr/local"

# path mode: each file exists with that mode (no write bit for others).
check() {
    [ -f "$1" ] || fail "not installed: ${1#"$dest"}"
    m=$(stat -c %a "$1")
    [ "$m" = "$2" ] || fail "${1#"$dest"} has mode $m, not $2"
}
check "$p/bin/retryd" 755
check "$p/bin/retrydctl" 755
lib=$(find "$p" -name 'libretryd.so.*.*' | head -n 1)
[ -n "$lib" ] || fail "libretryd.so not installed"
check "$p/include/retryd/retryd.h" 644
check "$p/lib/systemd/system/retryd.service" 644
check "$p/lib/sysusers.d/retryd.conf" 644
check "$p/lib/tmpfiles.d/retryd.conf" 644
check "$p/etc/retryd/retryd.conf" 644
check "$p/share/man/man1/retrydctl.1" 644
check "$p/share/man/man3/libretryd.3" 644
check "$p/share/man/man5/retryd.conf.5" 644
check "$p/share/man/man8/retryd.8" 644
check "$p/share/man/man3/retryd_decide.3" 644
check "$p/share/man/man3/retryd_upstream_admit.3" 644
check "$p/share/bash-completion/completions/retrydctl" 644
for f in LICENSE README.md retryd.conf docs/images/dashboard.png \
    docs/images/status-page.png; do
    check "$p/share/doc/retryd/$f" 644
done
# Every note the installed README links to is installed where the link
# points, and every image a note shows.
links=$(grep -o '(docs/[a-z_-]*\.md)' "$p/share/doc/retryd/README.md" |
    tr -d '()' | sort -u)
[ -n "$links" ] || fail "the installed README links to no note"
for f in $links; do
    check "$p/share/doc/retryd/$f" 644
done
for f in $(grep -oh '(images/[a-z_-]*\.png)' "$p"/share/doc/retryd/docs/*.md |
    tr -d '()' | sort -u); do
    check "$p/share/doc/retryd/docs/$f" 644
done
for f in retryd-alerts.yml retryd-alerts.test.yml retryd-dashboard.json; do
    check "$p/share/retryd/prometheus/$f" 644
done
grep -q '^u retryd ' "$p/lib/sysusers.d/retryd.conf" || fail "sysusers: no retryd user"
grep -q '^d /run/retryd 0750 retryd retryd' "$p/lib/tmpfiles.d/retryd.conf" ||
    fail "tmpfiles: no /run/retryd 0750 retryd:retryd"

# The unit runs what was installed, on the installed configuration.
unit="$p/lib/systemd/system/retryd.service"
grep -q '@[A-Z_]*@' "$unit" && fail "unconfigured @VAR@ left in the unit"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
# shellcheck disable=SC2086 # split into words on purpose
set -- $exec_start
[ "$1" = /usr/local/bin/retryd ] || fail "ExecStart runs $1, not /usr/local/bin/retryd"
[ -x "$dest$1" ] || fail "ExecStart's $1 is not installed"
[ "$2" = --config ] && [ "$3" = /usr/local/etc/retryd/retryd.conf ] ||
    fail "ExecStart does not name the installed configuration: $exec_start"
[ -f "$dest$3" ] || fail "the unit's configuration $3 is not installed"
grep -q '^User=retryd$' "$unit" && grep -q '^Group=retryd$' "$unit" ||
    fail "the unit does not run as retryd:retryd"
doc=$(sed -n 's/^Documentation=file://p' "$unit")
[ -f "$dest$doc" ] || fail "the unit's Documentation= $doc is not installed"

# An edited configuration survives a second install.
echo "; edited by the administrator" >>"$p/etc/retryd/retryd.conf"
DESTDIR="$dest" cmake --install "$build" --prefix /usr/local >"$work/install2.log"
grep -q 'edited by the administrator' "$p/etc/retryd/retryd.conf" ||
    fail "a second install overwrote the configuration"

# With --prefix /usr the configuration goes to /etc, as GNUInstallDirs says,
# and the unit follows it.
DESTDIR="$work/dest-usr" cmake --install "$build" --prefix /usr >"$work/install3.log"
[ -f "$work/dest-usr/etc/retryd/retryd.conf" ] || fail "--prefix /usr: no /etc/retryd/retryd.conf"
grep -q '^ExecStart=/usr/bin/retryd --config /etc/retryd/retryd.conf$' \
    "$work/dest-usr/usr/lib/systemd/system/retryd.service" ||
    fail "--prefix /usr: the unit does not run /usr/bin/retryd on /etc/retryd/retryd.conf"

# The installed configuration against the installed daemon. It names the
# group retryd, which only an install makes: this test makes none (no test
# changes the machine's users; tests/install/service_e2e.sh checks the
# file as retryd inside a booted systemd), so where the group is missing
# the same file with the group of root in its place must pass, and the file
# itself must fail on exactly the group.
conf="$p/etc/retryd/retryd.conf"
if ! getent group retryd >/dev/null; then
    out=$("$p/bin/retryd" --config "$conf" --check-config 2>&1) && fail "passed without a retryd group"
    echo "$out" | grep -q "unknown group 'retryd'" || fail "check-config: $out"
    sed "s/^group = retryd\$/group = $(id -gn)/" "$conf" >"$work/retryd-root.conf"
    grep -q "^group = $(id -gn)\$" "$work/retryd-root.conf" || fail "no 'group = retryd' line in $conf"
    conf="$work/retryd-root.conf"
fi
"$p/bin/retryd" --config "$conf" --check-config || fail "the installed configuration does not pass --check-config"
echo "install_files: ok"
