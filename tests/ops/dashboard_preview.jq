# SPDX-License-Identifier: MIT
# A picture of the dashboard's panels with the data the test's queries
# returned (dashboard_queries.sh): each panel where its gridPos puts it, a
# line per series for time series, the last value for stats and tables.
# A preview drawn from the same queries, not Grafana's rendering.
# Inputs: $d[0] the dashboard; $results: "ID-REF" -> query_range answer.
def esc: tostring | gsub("&"; "&amp;") | gsub("<"; "&lt;") | gsub(">"; "&gt;");
def palette: ["#3b6fb6", "#e0792b", "#2f9e57", "#c43b3b", "#8a5cc2",
              "#8c6d3f", "#d45fa8", "#6b7280", "#b5a316", "#1fa5b8"];
def num: if . == "NaN" or . == "+Inf" or . == "-Inf" then null
         else tonumber end;
def fmt: if . == null then "-"
         elif (. | fabs) >= 1000 then (. | round | tostring)
         else ((. * 1000 | round) / 1000 | tostring) end;
def legend($f; $m): if ($f // "") == "" then ($m | tostring)
    else $f | gsub("\\{\\{ *(?<k>[a-z_]+) *\\}\\}"; ($m[.k] // "")) end;
# [{name, points: [[t, v]...]}] of a panel, every target's series.
def series($p):
    [$p.targets[] as $t
     | ($results[($p.id | tostring) + "-" + $t.refId].data.result // [])[]
     | {name: legend($t.legendFormat; .metric),
        points: [.values[] | [.[0], (.[1] | num)] | select(.[1] != null)]}];
def chart($s):
    ([$s[].points[][1]]) as $vs | ([$s[].points[][0]]) as $ts
    | if ($vs | length) == 0 then "<p class=\"none\">no finite value</p>"
      else ($vs | min) as $lo | ($vs | max) as $hi0
      | (if $hi0 == $lo then $lo + 1 else $hi0 end) as $hi
      | ($ts | min) as $t0 | ($ts | max) as $t1x
      | (if $t1x == $t0 then $t0 + 1 else $t1x end) as $t1
      | "<svg viewBox=\"0 0 400 130\" preserveAspectRatio=\"none\">"
        + "<text x=\"2\" y=\"10\">" + ($hi0 | fmt) + "</text>"
        + "<text x=\"2\" y=\"128\">" + ($lo | fmt) + "</text>"
        + ([$s | to_entries[] | .key as $i
            | "<polyline stroke=\"" + palette[$i % 10] + "\" points=\""
              + ([.value.points[]
                  | (((.[0] - $t0) / ($t1 - $t0) * 360 + 36) | tostring)
                    + "," + (((1 - (.[1] - $lo) / ($hi - $lo)) * 110 + 12)
                             | tostring)] | join(" "))
              + "\"/>"] | join(""))
        + "</svg>" end;
def keyed($s):
    "<ul>" + ([$s | to_entries[]
               | "<li><i style=\"background:" + palette[.key % 10]
                 + "\"></i>" + (.value.name | esc) + " <b>"
                 + (.value.points[-1][1] | fmt) + "</b></li>"] | join(""))
    + "</ul>";
def card($p):
    "<section style=\"grid-column:" + (($p.gridPos.x + 1) | tostring)
    + " / span " + ($p.gridPos.w | tostring) + ";grid-row:"
    + (($p.gridPos.y + 1) | tostring) + " / span "
    + ($p.gridPos.h | tostring) + "\" class=\"" + $p.type + "\">"
    + if $p.type == "row" then "<h2>" + ($p.title | esc) + "</h2>"
      else "<h3>" + ($p.title | esc) + "</h3>"
        + (series($p) as $s
           | if $p.type == "timeseries" then chart($s) + keyed($s)
             else keyed($s) end)
      end
    + "</section>";
"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>"
+ ($d[0].title | esc) + " dashboard preview</title><style>"
+ "body{font:12px sans-serif;margin:12px;background:#111217;color:#ccccdc}"
+ "main{display:grid;grid-template-columns:repeat(24,1fr);"
+ "grid-auto-rows:30px;gap:6px}"
+ "section{background:#181b1f;border:1px solid #2c3235;border-radius:3px;"
+ "padding:4px 8px;overflow:hidden}section.row{background:none;border:0}"
+ "h1{font-size:18px;margin:0 0 8px}h2{font-size:15px;margin:6px 0}"
+ "h3{font-size:12px;margin:0 0 4px;color:#d8d9da}"
+ "svg{width:100%;height:55%}polyline{fill:none;stroke-width:1.5}"
+ "text{fill:#8e8e8e;font-size:9px}ul{list-style:none;margin:0;padding:0;"
+ "columns:2}li{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}"
+ "li i{display:inline-block;width:8px;height:8px;margin-right:4px}"
+ "section.stat ul,section.table ul{columns:1}"
+ "section.stat li b{font-size:16px}</style></head><body>"
+ "<h1>" + ($d[0].title | esc) + ": every panel's query on a real scrape"
+ " (preview drawn by tests/ops, not Grafana)</h1><main>"
+ ([$d[0].panels[] | card(.)] | join("")) + "</main></body></html>"
