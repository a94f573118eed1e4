#!/bin/sh
# SPDX-License-Identifier: MIT
# The status page (GET / of the metrics listener) in a real headless
# Chromium, against a real retryd kept busy by real client processes of
# three programs. The browser's DOM must hold the numbers the stats socket
# reports at the same moment: under load, each counter of each upstream
# and program lies between the stats socket's answers just before and just
# after the page was read (counters only grow); once the clients pause,
# still attached, every counter equals both answers and each balance lies
# between them (a refill only adds). The page must load nothing and run
# nothing (no script, no external reference; the CSP header forbids both),
# and draw each upstream's balance history as inline SVG. Chromium's
# screenshot is status.png in the scratch directory (deploy/ops-images.sh
# copies it to docs/images).
# usage: status_page.sh RETRYD RETRYDCTL TEST_CLIENT SCRATCH_DIR
set -eu
retryd=${1:?usage}
ctl=${2:?usage}
client=${3:?usage}
scratch=${4:?usage}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/ops_lib.sh"

browser=$(ops_chromium)
[ -n "$browser" ] ||
    ops_skip "chromium not found (deploy/install-deps.sh installs Debian's" \
        "chromium; or set RETRYD_CHROMIUM)"
for tool in curl jq ss; do
    command -v "$tool" >/dev/null || ops_skip "$tool not found (deploy/install-deps.sh)"
done

rm -rf "$scratch"
mkdir -p "$scratch"
trap ops_cleanup EXIT
trap 'exit 1' INT TERM
ops_start_retryd "$retryd" "$scratch"
# An upstream whose name is markup: any process on the host may pick one.
hostile='x<i>inj</i>'
printf 'open %s\nexit\n' "$hostile" | "$client" "$OPS_DIR/run/control.sock" \
    >"$scratch/hostile.out"
grep -q '^ok shared=1' "$scratch/hostile.out" ||
    ops_fail "the hostile name was not registered: $(cat "$scratch/hostile.out")"
ops_load "$client"
url="http://127.0.0.1:$OPS_METRICS_PORT/"

stats() {
    "$ctl" stats --json --stats-socket "$OPS_DIR/run/stats.sock"
}
# The page has 4 processes and at least 3 history points per upstream.
warm() {
    page=$(curl -sf "$url") || return 1
    echo "$page" | grep -q '<span data-k="attached_processes">4</span>' &&
        [ "$(echo "$page" | grep -o 'data-points="[0-9]*"' |
            tr -dc '0-9\n' | sort -n | head -1)" -ge 3 ]
}
ops_wait 30 warm || ops_fail "the page never showed 4 processes and 3 history points"

# dom_row FILE ATTR NAME: the table row of data-ATTR="NAME", on one line
# (the name as Chromium serialises an attribute value: & < > " escaped).
dom_row() {
    name=$(printf '%s' "$3" |
        sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g')
    tr -d '\n' <"$1" | grep -oF "<tr data-$2=\"$name\">" >/dev/null || return 0
    tr -d '\n' <"$1" | awk -v start="<tr data-$2=\"$name\">" '{
        i = index($0, start); if (i == 0) exit
        rest = substr($0, i); j = index(rest, "</tr>")
        print substr(rest, 1, j) }'
}
# dom_num ROW KEY: the text of the row's cell data-k="KEY".
dom_num() {
    echo "$1" | grep -o "data-k=\"$2\">[^<]*" | head -1 | sed 's/.*>//'
}
# between LOW X HIGH: all three decimal numbers, LOW <= X <= HIGH.
between() {
    for v in "$1" "$2" "$3"; do
        echo "$v" | grep -Eq '^[0-9]+(\.[0-9]+)?$' || return 1
    done
    awk -v l="$1" -v x="$2" -v h="$3" 'BEGIN { exit !(l + 0 <= x + 0 && x + 0 <= h + 0) }'
}

reasons=$(stats | jq -r '.upstreams[0].retries_denied | keys_unsorted[]')
upstream_keys="deposits retries_granted ambiguous $reasons"
program_keys="processes deposits retries_granted retries_denied ambiguous"

# check DOM BEFORE AFTER MODE: MODE bracket (under load) or equal (idle).
check() {
    dom=$1 before=$2 after=$3 mode=$4 bad=0 n=0
    for u in $(jq -r '.upstreams[].name' "$after"); do
        row=$(dom_row "$dom" upstream "$u")
        [ -n "$row" ] || { echo "FAIL  no row for upstream $u"; bad=$((bad + 1)); continue; }
        for k in $upstream_keys balance; do
            sel=".upstreams[] | select(.name == \"$u\") |
                 if .$k != null then .$k else .retries_denied.$k end"
            lo=$(jq -r "$sel" "$before") hi=$(jq -r "$sel" "$after")
            v=$(dom_num "$row" "$k")
            n=$((n + 1))
            if [ "$mode" = equal ] && [ "$k" != balance ] &&
                { [ "$lo" != "$hi" ] || [ "$v" != "$hi" ]; }; then
                echo "FAIL  $u $k: page $v, stats socket $lo then $hi"
                bad=$((bad + 1))
            elif [ "$mode" = bracket ] && [ "$k" = balance ]; then
                : # under load a balance goes both ways: checked when idle
            elif ! between "$lo" "$v" "$hi"; then
                echo "FAIL  $u $k: page $v, not within the stats socket's $lo .. $hi"
                bad=$((bad + 1))
            fi
        done
    done
    for p in $(jq -r '[.processes[].program] | unique[]' "$after"); do
        row=$(dom_row "$dom" program "$p")
        [ -n "$row" ] || { echo "FAIL  no row for program $p"; bad=$((bad + 1)); continue; }
        for k in $program_keys; do
            sum="[.processes[] | select(.program == \"$p\") |
                  if \"$k\" == \"processes\" then 1
                  elif \"$k\" == \"retries_denied\" then (.retries_denied | add)
                  else .$k end] | add"
            lo=$(jq -r "$sum" "$before") hi=$(jq -r "$sum" "$after")
            v=$(dom_num "$row" "$k")
            n=$((n + 1))
            if [ "$mode" = equal ] && { [ "$lo" != "$hi" ] || [ "$v" != "$hi" ]; }; then
                echo "FAIL  program $p $k: page $v, stats socket $lo then $hi"
                bad=$((bad + 1))
            elif ! between "$lo" "$v" "$hi"; then
                echo "FAIL  program $p $k: page $v, not within $lo .. $hi"
                bad=$((bad + 1))
            fi
        done
    done
    echo "$mode: $n numbers of the page checked against the stats socket, $bad wrong"
    [ "$bad" -eq 0 ]
}

# Under load.
stats >"$scratch/load-before.json"
ops_browse "$browser" dump-dom "$url" >"$scratch/load.html" ||
    ops_fail "chromium could not load the page"
stats >"$scratch/load-after.json"
check "$scratch/load.html" "$scratch/load-before.json" \
    "$scratch/load-after.json" bracket || ops_fail "the page under load"

# The picture, under load.
ops_browse "$browser" "screenshot=$scratch/status.png" --window-size=1500,680 \
    "$url" >/dev/null || ops_fail "chromium could not take the page's picture"
[ -s "$scratch/status.png" ] || ops_fail "no status.png"

# Paused: the clients attached and idle, the counters still.
: >"$scratch/stop"
still() {
    a=$(stats | jq -c '[.upstreams[] | .deposits, .retries_granted]')
    sleep 0.3
    b=$(stats | jq -c '[.upstreams[] | .deposits, .retries_granted]')
    [ "$a" = "$b" ]
}
ops_wait 20 still || ops_fail "the clients did not pause"
stats >"$scratch/idle-before.json"
ops_browse "$browser" dump-dom "$url" >"$scratch/idle.html" ||
    ops_fail "chromium could not load the page"
stats >"$scratch/idle-after.json"
check "$scratch/idle.html" "$scratch/idle-before.json" \
    "$scratch/idle-after.json" equal || ops_fail "the page at rest"

# The header facts, as the stats socket says.
for f in version:.daemon.version generation:.daemon.generation; do
    id=${f%%:*}
    want=$(jq -r "${f#*:}" "$scratch/idle-after.json")
    tr -d '\n' <"$scratch/idle.html" | grep -q "<dd id=\"$id\">$want</dd>" ||
        ops_fail "the page's $id is not $want"
done
want=$(jq -r .daemon.attached_processes "$scratch/idle-after.json")
grep -q "<span data-k=\"attached_processes\">$want</span>" "$scratch/idle.html" ||
    ops_fail "the page's attached processes are not $want"

# The markup in a name is text on the page, not an element.
tr -d '\n' <"$scratch/idle.html" |
    grep -qF '<th scope="row">x&lt;i&gt;inj&lt;/i&gt;</th>' ||
    ops_fail "the upstream named $hostile is not shown escaped"
grep -qF '<i>inj</i></th>' "$scratch/idle.html" &&
    ops_fail "the upstream named $hostile became markup"

# Nothing loaded, nothing run; a history drawn per upstream.
if grep -Eiq '<script|<link|<iframe|<img|src=|@import|url\(' "$scratch/idle.html"; then
    ops_fail "the page loads or runs something: $(grep -Eio '<script|<link|<iframe|<img|src=[^ ]*|@import|url\(' "$scratch/idle.html" | head -3)"
fi
curl -sf -D "$scratch/headers.txt" -o /dev/null "$url"
grep -qi "^Content-Security-Policy: default-src 'none'" "$scratch/headers.txt" ||
    ops_fail "no Content-Security-Policy forbidding scripts and loads"
ups=$(jq '.upstreams | length' "$scratch/idle-after.json")
lines=$(grep -o '<polyline points="[0-9., ]*"' "$scratch/idle.html" | grep -c ' .* ')
[ "$lines" -eq "$ups" ] ||
    ops_fail "$lines balance histories of two points or more for $ups upstreams"

ops_stop_retryd
echo "status page: $scratch/status.png"
