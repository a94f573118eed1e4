#!/bin/sh
# SPDX-License-Identifier: MIT
# The dashboard's queries are proven (deploy/prometheus/retryd-dashboard.json):
# a real Prometheus server on loopback scrapes a real retryd every second
# while real client processes of four programs deposit and withdraw (and
# one reports an upstream that rejects most attempts, so that the host
# throttle engages and a pushback holds: docs/health.md); then
# every panel's every query is evaluated through Prometheus's HTTP API as
# Grafana would (a range query, its variables set to All) and must parse
# and return data, and so must the variables' own queries. The alerting
# rules are loaded too, and each must evaluate without error against the
# real series. Last, the panels' data are drawn on one page (a preview:
# this is not Grafana) and Chromium takes its picture, dashboard.png in
# the scratch directory (deploy/ops-images.sh copies it to docs/images).
# usage: dashboard_queries.sh PROMETHEUS RETRYD TEST_CLIENT SCRATCH_DIR
set -eu
prometheus=${1:-}
retryd=${2:?usage}
client=${3:?usage}
scratch=${4:?usage}
here=$(cd "$(dirname "$0")" && pwd)
kit=$(cd "$here/../../deploy/prometheus" && pwd)
. "$here/ops_lib.sh"

[ -n "$prometheus" ] && [ -x "$prometheus" ] ||
    ops_skip "prometheus not found (deploy/install-deps.sh puts it in" \
        "/var/cache/retryd/tools)"
ops_begin "$retryd" "$scratch"
ops_load "$client"

cat >"$scratch/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $kit/retryd-alerts.yml
scrape_configs:
  - job_name: retryd
    static_configs:
      - targets: ['127.0.0.1:$OPS_METRICS_PORT']
CONF
# Prometheus on a free port; another pick if another test took it first.
# Ready in its own words (another server could answer on the port), or
# gone.
ready_or_gone() {
    grep -q "Server is ready to receive web requests" "$scratch/prometheus.log" ||
        ! kill -0 "$prom_pid"
}
for try in 1 2 3; do
    prom_port=$(ops_free_port)
    "$prometheus" --config.file="$scratch/prometheus.yml" \
        --storage.tsdb.path="$scratch/tsdb" \
        --web.listen-address="127.0.0.1:$prom_port" --log.level=info \
        >"$scratch/prometheus.log" 2>&1 &
    prom_pid=$!
    OPS_PIDS="$OPS_PIDS $prom_pid"
    ops_wait 30 ready_or_gone
    kill -0 "$prom_pid" 2>/dev/null && break
    grep -q "address already in use" "$scratch/prometheus.log" || break
done
api="http://127.0.0.1:$prom_port/api/v1"
curl -sf "http://127.0.0.1:$prom_port/-/ready" >/dev/null ||
    { cat "$scratch/prometheus.log" >&2; ops_fail "prometheus did not start"; }

# instant QUERY -> the result's first value, or nothing
instant() {
    curl -sf "$api/query" --data-urlencode "query=$1" |
        jq -r '.data.result[0].value[1] // empty'
}
# Scraped (up) at least 8 times, the clients' programs seen, the host
# throttle engaged and throttling, a pushback held: a rate over the panels'
# window has samples to work on, and the health panels draw a live case.
scraped() {
    n=$(instant 'count_over_time(up{job="retryd"}[1m])')
    u=$(instant 'up{job="retryd"}')
    p=$(instant 'count(retryd_processes)')
    t=$(instant 'max(retryd_upstream_throttle_probability) > 0 and
                 max(retryd_upstream_pushback_seconds) > 0 and
                 max(retryd_upstream_throttled_total) > 0')
    [ "${n:-0}" -ge 8 ] && [ "$u" = 1 ] && [ "${p:-0}" -ge 4 ] && [ -n "$t" ]
}
ops_wait 45 scraped ||
    ops_fail "prometheus did not scrape retryd 8 times with 4 programs," \
        "the throttle engaged and a pushback held" \
        "attached ($(curl -s "$api/targets" | jq -c '.data.activeTargets'))"

# A Grafana expression with its variables as the dashboard's defaults (All).
grafana_vars() {
    sed -e 's/\$__rate_interval/10s/g' -e 's/\$instance/.+/g' \
        -e 's/\$upstream/.+/g'
}

end=$(date +%s)
start=$((end - 20))
mkdir -p "$scratch/panels"
jq -r '.panels[] | select(.type != "row") | .id as $id | .title as $t |
       .targets[] | [$id, .refId, $t, .expr, .legendFormat] | @tsv' \
    "$kit/retryd-dashboard.json" >"$scratch/queries.tsv"
[ -s "$scratch/queries.tsv" ] || ops_fail "no panel query in the dashboard"
failed=0
n=0
tab=$(printf '\t')
while IFS="$tab" read -r id ref title expr legend; do
    n=$((n + 1))
    q=$(printf '%s' "$expr" | grafana_vars)
    out="$scratch/panels/$id-$ref.json"
    curl -s "$api/query_range" --data-urlencode "query=$q" \
        --data "start=$start" --data "end=$end" --data step=1 >"$out" || true
    status=$(jq -r '.status // "no answer"' "$out" 2>/dev/null || echo "not JSON")
    series=$(jq -r '.data.result | length' "$out" 2>/dev/null || echo 0)
    if [ "$status" != success ]; then
        echo "FAIL  $title [$ref]: $status: $(jq -r '.error // empty' "$out" 2>/dev/null)"
        failed=$((failed + 1))
    elif [ "$series" -eq 0 ]; then
        echo "FAIL  $title [$ref]: parses, but no data: $q"
        failed=$((failed + 1))
    else
        echo "ok    $title [$ref]: $series series"
    fi
done <"$scratch/queries.tsv"

# The variables' queries: label_values(SELECTOR, LABEL) is Grafana's
# /api/v1/label/LABEL/values?match[]=SELECTOR.
jq -r '.templating.list[] | [.name, .query.query] | @tsv' \
    "$kit/retryd-dashboard.json" >"$scratch/variables.tsv"
while IFS="$tab" read -r name query; do
    sel=$(printf '%s' "$query" | sed -n 's/^label_values(\(.*\), *\([a-z_]*\))$/\1/p' | grafana_vars)
    label=$(printf '%s' "$query" | sed -n 's/^label_values(.*, *\([a-z_]*\))$/\1/p')
    vals=$(curl -s -G "$api/label/$label/values" --data-urlencode "match[]=$sel" |
        jq -r 'select(.status == "success") | .data | join(" ")')
    if [ -z "$vals" ]; then
        echo "FAIL  variable $name: $query: no values"
        failed=$((failed + 1))
    else
        echo "ok    variable $name: $vals"
    fi
done <"$scratch/variables.tsv"

# The alerting rules, evaluated by this server on the real series.
rules_ok() {
    curl -sf "$api/rules" | jq -e '[.data.groups[].rules[]] |
        length > 0 and all(.health == "ok" and
                           .lastEvaluation != "0001-01-01T00:00:00Z")' >/dev/null
}
want=$(grep -c '^ *- alert:' "$kit/retryd-alerts.yml")
got=$(curl -sf "$api/rules" | jq '[.data.groups[].rules[]] | length')
if [ "$got" != "$want" ] || ! ops_wait 10 rules_ok; then
    echo "FAIL  alert rules on the live series: $got of $want loaded:"
    curl -s "$api/rules" | jq -c '.data.groups[].rules[] | {name, health, lastError}'
    failed=$((failed + 1))
else
    echo "ok    $want alert rules evaluate on the live series"
fi

[ "$failed" -eq 0 ] || ops_fail "$failed of the dashboard's queries failed"
ops_stop_retryd
echo "dashboard: $n panel queries and the variables return data from a" \
    "real scrape"

# The preview picture of the panels' data.
browser=$(ops_chromium)
if [ -z "$browser" ]; then
    echo "no chromium: no dashboard.png (the queries are proven all the same)"
    exit 0
fi
jq -n -r --slurpfile d "$kit/retryd-dashboard.json" \
    -f "$here/dashboard_preview.jq" \
    --rawfile q "$scratch/queries.tsv" \
    --arg dir "$scratch/panels" \
    --argjson results "$(cd "$scratch/panels" && for f in *.json; do
        printf '{"%s":' "${f%.json}"; cat "$f"; printf '}\n'; done | jq -s 'add')" \
    >"$scratch/dashboard.html"
ops_browse "$browser" "screenshot=$scratch/dashboard.png" \
    --window-size=1500,2200 "file://$scratch/dashboard.html" >/dev/null ||
    ops_fail "chromium could not take the dashboard's picture"
[ -s "$scratch/dashboard.png" ] || ops_fail "no dashboard.png"
echo "dashboard preview: $scratch/dashboard.png"
