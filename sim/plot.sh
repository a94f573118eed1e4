#!/bin/sh
# SPDX-License-Identifier: MIT
# The storm pictures of docs/storms.md, made from retryd-sim's JSON with
# gnuplot (gnuplot-nox, deploy/install-deps.sh) and jq:
#
#   storm-goodput.png        the metastability scenario: goodput per second,
#                            a panel per policy, the trigger shaded
#   storm-amplification.png  the outage: the deepest layer's load over the
#                            first attempts', for 1 to 5 layers of 16
#                            processes per host, log scale
#   storm-real.png           with SERIES_DIR: the one-host storm
#                            (bench_storm run with BENCH_STORM_SERIES=DIR):
#                            goodput and retries per second, a panel per
#                            variant, real against retryd-sim's prediction
#                            of the same setup
#
# usage: sim/plot.sh RETRYD_SIM OUTDIR [SERIES_DIR]   (e.g.
#        build/sim/retryd-sim docs/images); the data it plotted is left in
#        OUTDIR/storm-data/, so a figure can be checked by hand.
set -eu
sim=$1
out=$2
series=${3:-}
for tool in gnuplot jq; do
    command -v "$tool" >/dev/null ||
        { echo "plot.sh: $tool is missing (deploy/install-deps.sh)" >&2; exit 2; }
done
data=$out/storm-data
mkdir -p "$data"

# --- goodput over time ------------------------------------------------------
"$sim" metastable --json >"$data/metastable.json"
from=$(jq .trigger_from_s "$data/metastable.json")
to=$(jq .trigger_to_s "$data/metastable.json")
# One row per second: the second, then each policy's goodput.
jq -r '[.rows[].goodput] | transpose | to_entries[] |
       "\(.key) \(.value | map(tostring) | join(" "))"' \
    "$data/metastable.json" >"$data/goodput.dat"
# Small multiples, one panel per policy in two rows, the same axes: the
# policies' lines in one panel hide each other once they recover to the
# same goodput.
panels=""
cols=$(( ($(jq '.rows | length' "$data/metastable.json") + 1) / 2 ))
i=2
for p in $(jq -r '.rows[].policy' "$data/metastable.json"); do
    panels="$panels
set title '$p'
plot '$data/goodput.dat' using 1:$i with lines lw 2 lc rgb '#1f5fa0' notitle"
    i=$((i + 1))
done
gnuplot <<EOF
set terminal pngcairo size $((cols * 300)),620 font 'DejaVu Sans,10'
set output '$out/storm-goodput.png'
set multiplot layout 2,$cols title "Metastability (retryd-sim metastable): 1 host x 16 processes, 700 calls/s = 70 % of the server's capacity;\\nhalf its workers from ${from} s to ${to} s (shaded). Goodput: calls answered 200 per second; the run goes on to 390 s as at the right edge"
set xrange [40:200]
set yrange [0:1100]
set xtics 40
set grid
set object 1 rect from ${from},0 to ${to},1100 fc rgb '#dddddd' fs solid 0.5 noborder behind
$panels
unset multiplot
EOF

# --- amplification at the deepest layer ---------------------------------------
: >"$data/amplification.dat"
for d in 1 2 3 4 5; do
    "$sim" outage --layers "$d" --processes 16 --json >"$data/outage-$d.json"
    # A throttle that sends almost nothing is drawn at the axis' floor.
    jq -r --arg d "$d" '[.rows[].deepest_load_ratio |
                         if . < 0.001 then 0.001 else . end | tostring] |
                        $d + " " + join(" ")' "$data/outage-$d.json" \
        >>"$data/amplification.dat"
done
# gnuplot's eight colours, then two more: past eight policies its own
# would repeat, and two lines would read as one policy.
colours="#9400d3 #009e73 #56b4e9 #e69f00 #f0e442 #0072b2 #e51e10 #000000 #a0522d #ff69b4"
plots=""
i=2
for p in $(jq -r '.rows[].policy' "$data/outage-1.json"); do
    c=$(echo "$colours" | cut -d' ' -f$((i - 1)))
    plots="$plots${plots:+, }'$data/amplification.dat' using 1:$i with linespoints lw 2 pt 7 lc rgb '${c:-#808080}' title '$p'"
    i=$((i + 1))
done
gnuplot <<EOF
set terminal pngcairo size 1100,560 font 'DejaVu Sans,11'
set output '$out/storm-amplification.png'
set title "Total outage of the deepest layer, 3 attempts at every layer: the load it receives over the first attempts'\n(retryd-sim outage --processes 16: 1 host x 16 processes per layer, 1000 first attempts/s; a throttle that sends\nnext to nothing is drawn at 0.001)"
set xlabel 'calling layers above the dead one (d)'
set ylabel 'deepest load / first attempts (log)'
set logscale y
set yrange [0.001:1000]
set xtics 1
set key outside right top
set grid
plot $plots
EOF
made="$out/storm-goodput.png $out/storm-amplification.png"

# --- the one-host storm, real and predicted -------------------------------------
# A panel per variant: goodput and retries per second, the real run as
# points, the simulator's prediction as lines.
if [ -n "$series" ]; then
    panels=""
    for v in retryd retryd-local naive; do
        f=$series/storm-$v.dat
        [ -f "$f" ] ||
            { echo "plot.sh: no $f (bench_storm with BENCH_STORM_SERIES)" >&2; exit 2; }
        cp "$f" "$data/"
        panels="$panels
set title '$v'
plot '$f' using 1:2 with points pt 7 ps 0.6 lc rgb '#1f5fa0' title 'goodput, real', '$f' using 1:3 with lines lw 2 lc rgb '#1f5fa0' title 'goodput, retryd-sim', '$f' using 1:4 with points pt 5 ps 0.5 lc rgb '#c0392b' title 'retries, real', '$f' using 1:5 with lines lw 2 lc rgb '#c0392b' title 'retries, retryd-sim'"
    done
    trig=$(sed -n 's/^# trigger //p' "$series/storm-retryd.dat")
    t0=${trig% *}
    t1=${trig#* }
    gnuplot <<EOF
set terminal pngcairo size 1200,460 font 'DejaVu Sans,10'
set termoption noenhanced
set output '$out/storm-real.png'
set multiplot layout 1,3 title "The one-host storm (bench_storm): 16 processes on the executor, 280 calls/s, an upstream of 8 workers x 20 ms, half of them from $t0 s to $t1 s (shaded).\\nPer second: the real run as points, retryd-sim given the same setup as lines"
set yrange [0:900]
set xlabel 'seconds'
set key top right opaque font ',8'
set grid
set object 1 rect from $t0,0 to $t1,900 fc rgb '#dddddd' fs solid 0.5 noborder behind
$panels
unset multiplot
EOF
    made="$made $out/storm-real.png"
fi
echo "plot.sh: $made"
