#!/bin/sh
# SPDX-License-Identifier: MIT
# The status page (GET / of the metrics listener) in a real headless
# Chromium, against a real retryd kept busy by real client processes of
# four programs. The browser's DOM must hold the numbers the stats socket
# reports at the same moment: under load, each counter of each upstream
# and program lies between the stats socket's answers just before and just
# after the page was read (counters only grow); once the clients pause,
# still attached, every counter equals both answers and each gauge (a
# balance, the throttle's probability, the pushback left) lies between
# them. The page must load nothing and run
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
ops_begin "$retryd" "$scratch"
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
# The page has 5 processes and at least 3 history points per upstream.
warm() {
    page=$(curl -sf "$url") || return 1
    echo "$page" | grep -q '<span data-k="attached_processes">5</span>' &&
        [ "$(echo "$page" | grep -o 'data-points="[0-9]*"' |
            tr -dc '0-9\n' | sort -n | head -1)" -ge 3 ]
}
ops_wait 30 warm || ops_fail "the page never showed 5 processes and 3 history points"

# dom_numbers FILE: "KIND<TAB>NAME<TAB>KEY<TAB>VALUE" for every number of
# the page's upstream and program rows (KIND upstream or program; NAME as
# the page holds it, Chromium's escapes of an attribute value undone).
dom_numbers() {
    tr -d '\n' <"$1" | awk '
        BEGIN { RS = "<tr data-"; OFS = "\t" }
        NR > 1 && /^(upstream|program)="/ {
            kind = substr($0, 1, index($0, "=") - 1)
            rest = substr($0, length(kind) + 3)
            name = substr(rest, 1, index(rest, "\"") - 1)
            gsub(/&lt;/, "<", name); gsub(/&gt;/, ">", name)
            gsub(/&quot;/, "\"", name); gsub(/&amp;/, "\\&", name)
            row = substr(rest, 1, index(rest, "</tr>"))
            while (match(row, /data-k="[a-z_]+">[^<]*/)) {
                cell = substr(row, RSTART + 8, RLENGTH - 8)
                split(cell, kv, "\">")
                print kind, name, kv[1], kv[2]
                row = substr(row, RSTART + RLENGTH)
            }
        }'
}
# sock_numbers FILE: the same lines from a `retrydctl stats --json` answer:
# per upstream its balance and counters, per program its processes and
# their counters summed.
sock_numbers() {
    jq -r '
        (.upstreams[] | .name as $n |
          ([["balance", .balance], ["cap", .cap], ["deposits", .deposits],
            ["retries_granted", .retries_granted], ["ambiguous", .ambiguous],
            ["throttled", .throttled], ["held", .held],
            ["probability", .health.probability],
            ["pushback_seconds", .health.pushback_seconds]]
           + (.retries_denied | to_entries | map([.key, .value])))[] |
          ["upstream", $n, .[0], (.[1] | tostring)]),
        (.processes | group_by(.program)[] | .[0].program as $p |
          [["processes", length],
           ["deposits", (map(.deposits) | add)],
           ["retries_granted", (map(.retries_granted) | add)],
           ["retries_denied", (map(.retries_denied | add) | add)],
           ["ambiguous", (map(.ambiguous) | add)],
           ["throttled", (map(.throttled) | add)],
           ["held", (map(.held) | add)]][] |
          ["program", $p, .[0], (.[1] | tostring)])
        | @tsv' "$1"
}

# check DOM BEFORE AFTER MODE: every number the stats socket reports (in
# AFTER) against the page: MODE bracket (under load: counters between
# BEFORE and AFTER; gauges, the balances and the throttle's probability
# and pushback, move both ways, so they wait for the idle check) or equal
# (idle: counters equal in both and on the page, gauges between them).
check() {
    dom_numbers "$1" >"$scratch/dom.tsv"
    sock_numbers "$2" >"$scratch/before.tsv" &&
        sock_numbers "$3" >"$scratch/after.tsv" ||
        ops_fail "cannot read the stats socket's numbers"
    awk -F '\t' -v mode="$4" '
        function num(v) { return v ~ /^[0-9]+(\.[0-9]+)?$/ }
        function gauge(k) {
            return k == "balance" || k == "probability" || k == "pushback_seconds"
        }
        FILENAME == ARGV[1] { dom[$1 FS $2 FS $3] = $4; ndom++; next }
        FILENAME == ARGV[2] { lo[$1 FS $2 FS $3] = $4; next }
        {
            k = $1 FS $2 FS $3; hi = $4; n++; seen++
            what = $1 " " $2 " " $3
            if (!(k in dom)) { print "FAIL  " what ": not on the page"; bad++; next }
            v = dom[k]; l = lo[k]
            if (!num(v) || !num(l) || !num(hi)) {
                print "FAIL  " what ": page " v ", stats socket " l " then " hi; bad++
            } else if (mode == "equal" && !gauge($3) && !(l == hi && v == hi)) {
                print "FAIL  " what ": page " v ", stats socket " l " then " hi; bad++
            } else if (mode == "bracket" && gauge($3)) {
                n--
            } else if (!(l + 0 <= v + 0 && v + 0 <= hi + 0) &&
                       !(gauge($3) && hi + 0 <= v + 0 && v + 0 <= l + 0)) {
                print "FAIL  " what ": page " v ", not within the stats socket'"'"'s " l " .. " hi; bad++
            }
        }
        END {
            if (seen != ndom) {
                print "FAIL  the page has " ndom " numbers, the stats socket " seen; bad++
            }
            print mode ": " n " numbers of the page checked against the stats socket, " bad + 0 " wrong"
            exit bad > 0 || n == 0
        }' "$scratch/dom.tsv" "$scratch/before.tsv" "$scratch/after.tsv"
}

# Under load.
stats >"$scratch/load-before.json"
ops_browse "$browser" dump-dom "$url" >"$scratch/load.html" ||
    ops_fail "chromium could not load the page"
stats >"$scratch/load-after.json"
check "$scratch/load.html" "$scratch/load-before.json" \
    "$scratch/load-after.json" bracket || ops_fail "the page under load"

# The picture, under load.
ops_browse "$browser" "screenshot=$scratch/status.png" --window-size=2000,760 \
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
