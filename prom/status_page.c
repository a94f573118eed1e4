/* SPDX-License-Identifier: MIT */
/*
 * The status page (status_page.h): the header facts, a table per upstream
 * like `retrydctl top`'s (with each balance's recent history drawn as an
 * inline SVG line, and its health: throttle and pushback), the per-program
 * table.
 *
 * Every name on the page came from a process on the host (upstream names,
 * program names), so each is written through esc(): HTML's special
 * characters escaped, anything outside printable ASCII shown as '?', as
 * top shows it. The numbers are the reply's, printed as the stats socket's
 * JSON prints them, so that a reader (or a test) can hold the two side by
 * side: counters in full, balances in tokens.
 */
#include "status_page.h"
#include "reply.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "retryd/decision.h"

/* Counters kept per upstream for the rates: deposits, granted, ambiguous,
 * then the denials by reason (1 .. RETRYD_DENIAL_COUNT - 1). */
enum { K_DEPOSITS, K_GRANTED, K_AMBIGUOUS, K_DENIED };
#define K_COUNT (K_DENIED + RETRYD_DENIAL_COUNT - 1)
#define HIST_NAME_MAX 128

typedef struct hist_upstream {
    bool used, seen;
    char name[HIST_NAME_MAX];
    uint32_t slot_generation;
    unsigned n, head; /* samples held; where the next one goes */
    uint64_t balance[STATUS_HISTORY_POINTS], cap;
    uint64_t prev[K_COUNT], last[K_COUNT], prev_ns, last_ns;
} hist_upstream;

struct status_history {
    hist_upstream u[STATUS_HISTORY_UPSTREAMS];
};

status_history *status_history_new(void)
{
    return calloc(1, sizeof(status_history));
}

void status_history_free(status_history *h)
{
    free(h);
}

static void counters_of(const Retryd__UpstreamStats *u, uint64_t out[K_COUNT])
{
    static const Retryd__Counters zero = RETRYD__COUNTERS__INIT;
    const Retryd__Counters *c = u->counters ? u->counters : &zero;
    out[K_DEPOSITS] = c->deposits;
    out[K_GRANTED] = c->retries_granted;
    out[K_AMBIGUOUS] = c->ambiguous;
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++)
        out[K_DENIED + i - 1] = reply_at(c->denied, c->n_denied, i);
}

static uint64_t cap_of(const Retryd__UpstreamStats *u)
{
    return u->params ? u->params->cap_micro : 0;
}

/* The index of @p u's entry (same name, same slot generation), or -1. */
static int find_at(const status_history *h, const Retryd__UpstreamStats *u)
{
    if (h == NULL || u->name == NULL)
        return -1;
    for (int i = 0; i < STATUS_HISTORY_UPSTREAMS; i++) {
        const hist_upstream *e = &h->u[i];
        if (e->used && e->slot_generation == u->slot_generation &&
            strncmp(e->name, u->name, HIST_NAME_MAX) == 0)
            return i;
    }
    return -1;
}

static const hist_upstream *find(const status_history *h,
                                 const Retryd__UpstreamStats *u)
{
    int i = find_at(h, u);
    return i < 0 ? NULL : &h->u[i];
}

/* The entry of @p u, a new one when it has none and there is room. */
static hist_upstream *entry_for(status_history *h,
                                const Retryd__UpstreamStats *u)
{
    int at = find_at(h, u);
    if (at >= 0 || u->name == NULL)
        return at >= 0 ? &h->u[at] : NULL;
    hist_upstream *e;
    for (size_t i = 0; i < STATUS_HISTORY_UPSTREAMS; i++) {
        if (h->u[i].used)
            continue;
        e = &h->u[i];
        memset(e, 0, sizeof(*e));
        e->used = true;
        e->slot_generation = u->slot_generation;
        snprintf(e->name, sizeof(e->name), "%s", u->name);
        return e;
    }
    return NULL;
}

void status_history_add(status_history *h, const Retryd__StatsReply *r,
                        uint64_t now_ns)
{
    for (size_t i = 0; i < STATUS_HISTORY_UPSTREAMS; i++)
        h->u[i].seen = false;
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = r->upstreams[i];
        hist_upstream *e = entry_for(h, u);
        if (e == NULL)
            continue; /* no room: the page says it has no history */
        e->seen = true;
        e->balance[e->head] = u->balance_micro;
        e->head = (e->head + 1) % STATUS_HISTORY_POINTS;
        e->n += e->n < STATUS_HISTORY_POINTS;
        e->cap = cap_of(u);
        memcpy(e->prev, e->last, sizeof(e->prev));
        e->prev_ns = e->last_ns;
        counters_of(u, e->last);
        e->last_ns = now_ns;
    }
    for (size_t i = 0; i < STATUS_HISTORY_UPSTREAMS; i++)
        if (!h->u[i].seen)
            h->u[i].used = false; /* retired, or its slot reused */
}

/* --- writing ------------------------------------------------------------- */

/* A name from a process of the host, as HTML text or attribute value. */
static void esc(FILE *out, const char *s)
{
    for (; s != NULL && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&')
            fputs("&amp;", out);
        else if (c == '<')
            fputs("&lt;", out);
        else if (c == '>')
            fputs("&gt;", out);
        else if (c == '"')
            fputs("&quot;", out);
        else if (c == '\'')
            fputs("&#39;", out);
        else
            putc(c >= 0x20 && c < 0x7f ? c : '?', out);
    }
}

static void td_u64(FILE *out, const char *key, uint64_t v)
{
    fprintf(out, "<td class=\"n\" data-k=\"%s\">%" PRIu64 "</td>", key, v);
}

static void td_tokens(FILE *out, const char *key, uint64_t micro)
{
    fprintf(out, "<td class=\"n\" data-k=\"%s\">%.6f</td>", key,
            reply_tokens(micro));
}

/* A rate over the history's last interval, or a dash before it has two
 * samples. */
static void td_rate(FILE *out, const hist_upstream *e, int k)
{
    if (e == NULL || e->prev_ns == 0 || e->last_ns <= e->prev_ns ||
        e->last[k] < e->prev[k]) {
        fputs("<td class=\"n rate\">&#8211;</td>", out);
        return;
    }
    double s = (double)(e->last_ns - e->prev_ns) / 1e9;
    fprintf(out, "<td class=\"n rate\">%.1f</td>",
            (double)(e->last[k] - e->prev[k]) / s);
}

static void td_denied_rate(FILE *out, const hist_upstream *e)
{
    if (e == NULL || e->prev_ns == 0 || e->last_ns <= e->prev_ns) {
        fputs("<td class=\"n rate\">&#8211;</td>", out);
        return;
    }
    uint64_t gained = 0;
    for (int k = K_DENIED; k < K_COUNT; k++)
        gained += e->last[k] >= e->prev[k] ? e->last[k] - e->prev[k] : 0;
    double s = (double)(e->last_ns - e->prev_ns) / 1e9;
    fprintf(out, "<td class=\"n rate\">%.1f</td>", (double)gained / s);
}

static const char page_style[] =
    "body{font:14px/1.4 sans-serif;margin:1.5em;color:#1d2330;"
    "background:#fafbfc}"
    "h1{font-size:1.4em;margin:0 0 .4em}h2{font-size:1.1em;margin:1.4em 0 "
    ".4em}"
    "dl.facts{display:grid;grid-template-columns:max-content auto;"
    "gap:.15em 1.2em;margin:0}"
    "dl.facts dt{color:#5a6270}dl.facts dd{margin:0;font-weight:600}"
    "table{border-collapse:collapse;background:#fff}"
    "th,td{border:1px solid #d5d9e0;padding:.25em .5em;white-space:nowrap}"
    "th{background:#eef1f5;font-weight:600}"
    "td.n{text-align:right;font-family:monospace}td.rate{color:#3b6fb6}"
    ".bad{color:#b3261e}.ok{color:#1e7b34}"
    "svg{display:block}svg polyline{fill:none;stroke:#3b6fb6;"
    "stroke-width:1.5}svg rect{fill:#eef1f5}"
    "p.note{color:#5a6270;font-size:.9em}";

static void head(FILE *out, const char *where)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<title>retryd on ",
          out);
    esc(out, where);
    fprintf(out, "</title><style>%s</style></head>\n<body>\n", page_style);
}

/* The denial reasons' column titles: top's initials (budget_exhausted:
 * BE), the full name as the cell's title and in the legend. */
static void reason_abbrev(size_t reason, char *out, size_t len)
{
    const char *name = retryd_denial_name((retryd_denial)reason);
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < len; p++)
        if (p == name || p[-1] == '_')
            out[n++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    out[n] = '\0';
}

static void fact(FILE *out, const char *id, const char *title)
{
    fprintf(out, "<dt>%s</dt><dd id=\"%s\">", title, id);
}

static void facts(FILE *out, const Retryd__StatsReply *r)
{
    uint64_t up = r->uptime_ms / 1000, dmg = reply_damage_total(r);
    fputs("<dl class=\"facts\">", out);
    fact(out, "version", "version");
    esc(out, r->daemon_version);
    fputs("</dd>", out);
    fact(out, "uptime", "up");
    fprintf(out, "%" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 "</dd>",
            up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
    fact(out, "generation", "segment generation");
    fprintf(out, "%016" PRIx64 "</dd>", r->generation);
    fact(out, "processes", "processes attached / capacity");
    fprintf(out, "<span data-k=\"attached_processes\">%u</span> / %u</dd>",
            r->attached_processes, r->process_capacity);
    fact(out, "upstreams-n", "upstreams / capacity");
    fprintf(out, "%zu / %u</dd>", r->n_upstreams, r->upstream_capacity);
    fact(out, "draining", "draining");
    fprintf(out, "<span class=\"%s\">%s</span></dd>",
            r->draining ? "bad" : "ok", r->draining ? "YES" : "no");
    fact(out, "segment", "segment health");
    fprintf(out,
            "<span class=\"%s\">%s</span> (%" PRIu64 " checks, <span "
            "data-k=\"damage\">%" PRIu64 "</span> damage found)</dd>",
            dmg ? "bad" : "ok", dmg ? "DAMAGE HANDLED" : "ok",
            reply_health_checks(r), dmg);
    fact(out, "refusals", "slot refusals (capacity, quota)");
    fprintf(out, "%" PRIu64 ", %" PRIu64 "</dd></dl>\n",
            r->slots_refused_capacity, r->slots_refused_quota);
}

/* --- upstreams ----------------------------------------------------------- */

/* The last samples of @p e's balance, oldest first, as a line over the
 * cap's height, right-aligned on a time axis of the last minute (or of the
 * whole history, once it holds more); an empty frame before the first
 * sample. */
static void spark(FILE *out, const hist_upstream *e)
{
    unsigned n = e ? e->n : 0;
    const int hgt = 40, w = n <= 60 ? 60 : STATUS_HISTORY_POINTS;
    fprintf(out,
            "<td class=\"spark\" data-points=\"%u\"><svg "
            "xmlns=\"http://www.w3.org/2000/svg\" width=\"240\" "
            "height=\"40\" viewBox=\"0 0 %d %d\" preserveAspectRatio=\"none\" "
            "role=\"img\"><title>balance, the last %u s (one point a "
            "second)</title><rect width=\"%d\" height=\"%d\"/>",
            n, w, hgt, n * STATUS_HISTORY_INTERVAL_MS / 1000, w, hgt);
    if (n > 0) {
        fputs("<polyline points=\"", out);
        unsigned first =
            (e->head + STATUS_HISTORY_POINTS - n) % STATUS_HISTORY_POINTS;
        for (unsigned i = 0; i < n; i++) {
            uint64_t b = e->balance[(first + i) % STATUS_HISTORY_POINTS];
            double frac = e->cap ? (double)b / (double)e->cap : 0;
            fprintf(out, "%s%u,%.1f", i ? " " : "", w - n + i,
                    hgt - 1 - frac * (hgt - 2));
        }
        fputs("\"/>", out);
    }
    fputs("</svg></td>", out);
}

static void upstream_title(FILE *out)
{
    char ab[16];
    fputs("<table id=\"upstreams\"><thead><tr><th>upstream</th>"
          "<th>balance</th><th>cap</th><th>balance history</th>"
          "<th>deposits</th><th>dep/s</th><th>granted</th><th>retry/s</th>",
          out);
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++) {
        reason_abbrev(i, ab, sizeof(ab));
        fprintf(out, "<th title=\"denied: %s\">%s</th>",
                retryd_denial_name((retryd_denial)i), ab);
    }
    fputs("<th>denied/s</th><th>ambiguous</th><th>ambig/s</th>"
          "<th title=\"host throttle (docs/health.md)\">throttle</th>"
          "<th title=\"probability of throttling a first attempt\">"
          "throttle p</th><th>throttled</th><th>held</th>"
          "<th title=\"host pushback left, seconds\">pushback</th></tr>"
          "</thead><tbody>\n",
          out);
}

/* The upstream's health (docs/health.md): the throttle's state and
 * probability, what it and the pushback kept back, the hold left; numbers
 * as the JSON prints them. */
static void health_cells(FILE *out, const Retryd__UpstreamStats *u)
{
    static const Retryd__Counters zero = RETRYD__COUNTERS__INIT;
    const Retryd__UpstreamHealth *h = reply_upstream_health(u);
    const Retryd__Counters *c = u->counters ? u->counters : &zero;
    bool held = h->pushback_remaining_ms > 0;
    fprintf(out, "<td class=\"%s\">%s</td>", h->engaged ? "bad" : "ok",
            !h->adaptive_throttle ? "off"
            : h->engaged          ? "ENGAGED"
                                  : "on");
    fprintf(out, "<td class=\"n\" data-k=\"probability\">%.6f</td>",
            h->probability);
    td_u64(out, "throttled", c->throttled);
    td_u64(out, "held", c->held);
    fprintf(out, "<td class=\"n%s\" data-k=\"pushback_seconds\">%.3f</td>",
            held ? " bad" : "", (double)h->pushback_remaining_ms / 1000);
}

static void upstream_row(FILE *out, const Retryd__UpstreamStats *u,
                         const hist_upstream *e)
{
    uint64_t c[K_COUNT];
    counters_of(u, c);
    fputs("<tr data-upstream=\"", out);
    esc(out, u->name);
    fputs("\"><th scope=\"row\">", out);
    esc(out, u->name);
    fputs("</th>", out);
    td_tokens(out, "balance", u->balance_micro);
    td_tokens(out, "cap", cap_of(u));
    spark(out, e);
    td_u64(out, "deposits", c[K_DEPOSITS]);
    td_rate(out, e, K_DEPOSITS);
    td_u64(out, "retries_granted", c[K_GRANTED]);
    td_rate(out, e, K_GRANTED);
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++)
        td_u64(out, retryd_denial_name((retryd_denial)i), c[K_DENIED + i - 1]);
    td_denied_rate(out, e);
    td_u64(out, "ambiguous", c[K_AMBIGUOUS]);
    td_rate(out, e, K_AMBIGUOUS);
    health_cells(out, u);
    fputs("</tr>\n", out);
}

static void upstreams(FILE *out, const Retryd__StatsReply *r,
                      const status_history *h)
{
    char ab[16];
    fprintf(out, "<h2>Upstreams</h2>\n");
    if (r->n_upstreams == 0) {
        fputs("<p class=\"note\">No upstream is registered.</p>\n", out);
        return;
    }
    upstream_title(out);
    for (size_t i = 0; i < r->n_upstreams; i++)
        upstream_row(out, r->upstreams[i], find(h, r->upstreams[i]));
    fputs("</tbody></table>\n<p class=\"note\">Balances and counters as "
          "the stats socket reports them now; rates over the last sample "
          "interval. Denied, by reason:",
          out);
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++) {
        reason_abbrev(i, ab, sizeof(ab));
        fprintf(out, " %s %s%s", ab, retryd_denial_name((retryd_denial)i),
                i + 1 < RETRYD_DENIAL_COUNT ? "," : ".");
    }
    fprintf(out, " History is kept for the first %d upstreams.</p>\n",
            STATUS_HISTORY_UPSTREAMS);
}

/* --- programs ------------------------------------------------------------ */

static const char *program_of(const Retryd__ProcessStats *p)
{
    return p->program != NULL && p->program[0] != '\0' ? p->program
                                                       : "(unknown)";
}

static int by_program(const void *a, const void *b)
{
    const Retryd__ProcessStats *const *x = a, *const *y = b;
    return strcmp(program_of(*x), program_of(*y));
}

enum {
    P_DEPOSITS,
    P_GRANTED,
    P_DENIED,
    P_AMBIGUOUS,
    P_THROTTLED,
    P_HELD,
    P_COUNT
};

static void program_row(FILE *out, const char *name, unsigned procs,
                        const uint64_t sum[P_COUNT])
{
    fputs("<tr data-program=\"", out);
    esc(out, name);
    fputs("\"><th scope=\"row\">", out);
    esc(out, name);
    fprintf(out, "</th><td class=\"n\" data-k=\"processes\">%u</td>", procs);
    td_u64(out, "deposits", sum[P_DEPOSITS]);
    td_u64(out, "retries_granted", sum[P_GRANTED]);
    td_u64(out, "retries_denied", sum[P_DENIED]);
    td_u64(out, "ambiguous", sum[P_AMBIGUOUS]);
    td_u64(out, "throttled", sum[P_THROTTLED]);
    td_u64(out, "held", sum[P_HELD]);
    fputs("</tr>\n", out);
}

/* One row per program, its processes' counters summed (as /metrics's
 * program mode sums them). */
static int programs(FILE *out, const Retryd__StatsReply *r)
{
    size_t n = r->n_processes;
    fputs("<h2>Programs</h2>\n", out);
    if (n == 0) {
        fputs("<p class=\"note\">No process is attached.</p>\n", out);
        return 0;
    }
    const Retryd__ProcessStats **order = malloc(n * sizeof(*order));
    if (order == NULL)
        return -1;
    memcpy(order, r->processes, n * sizeof(*order));
    qsort(order, n, sizeof(*order), by_program);
    fputs("<table id=\"programs\"><thead><tr><th>program</th><th>processes"
          "</th><th>deposits</th><th>granted</th><th>denied</th>"
          "<th>ambiguous</th><th>throttled</th><th>held</th></tr></thead>"
          "<tbody>\n",
          out);
    uint64_t sum[P_COUNT] = {0};
    unsigned procs = 0;
    for (size_t i = 0; i < n; i++) {
        const Retryd__Counters *c = order[i]->counters;
        procs++;
        if (c != NULL) {
            sum[P_DEPOSITS] += c->deposits;
            sum[P_GRANTED] += c->retries_granted;
            sum[P_DENIED] += reply_denied_total(c);
            sum[P_AMBIGUOUS] += c->ambiguous;
            sum[P_THROTTLED] += c->throttled;
            sum[P_HELD] += c->held;
        }
        if (i + 1 == n || by_program(&order[i], &order[i + 1]) != 0) {
            program_row(out, program_of(order[i]), procs, sum);
            memset(sum, 0, sizeof(sum));
            procs = 0;
        }
    }
    free(order);
    fputs("</tbody></table>\n", out);
    return 0;
}

int status_page_render(FILE *out, const Retryd__StatsReply *r,
                       const status_history *h, const char *where)
{
    head(out, where);
    fputs("<h1>retryd on ", out);
    esc(out, where);
    fputs("</h1>\n", out);
    facts(out, r);
    upstreams(out, r, h);
    int rc = programs(out, r);
    fputs("<p class=\"note\">Reload the page to update it. The same "
          "numbers for Prometheus: <a href=\"/metrics\">/metrics</a>.</p>\n"
          "</body></html>\n",
          out);
    return rc < 0 || ferror(out) ? -1 : 0;
}
