/* SPDX-License-Identifier: MIT */
/*
 * retrydctl top: a live view of the host budget, refreshed every --delay
 * seconds: the daemon, then per upstream its balance and rates (deposits,
 * retries granted, denials by reason, ambiguous outcomes, borrows) and the
 * program that drained it, then per
 * upstream its health (the host throttle, the pushback, the attempts they
 * kept back), then per program the rates of its processes, live and
 * exited (the daemon keeps the counts of exited ones). Rates are counter
 * deltas between two stats replies over the monotonic time measured between
 * them; the first frame has none.
 *
 * One renderer writes a frame line by line to a sink: stdout in --batch
 * mode (plain text, frames separated by a blank line, the only blank lines
 * there are), an ncurses screen when stdout is a terminal.
 */
#include <curses.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_client.h"
#include "ctl_fleet.h"
#include "ctl_opts.h"
#include "reply.h"
#include "retryd/decision.h"

#define TOP_DASH "\u2014" /* the rate of a first frame */
#define TOP_LINE_MAX 512
#define TOP_NAME_W 20
#define TOP_RATE_W 8
#define TOP_REASON_W 6
#define TOP_PROGRAM_CELL 32 /* a program name, made printable */

/* --- the frame ----------------------------------------------------------- */

/* Where the renderer's lines go. */
typedef struct top_sink {
    void (*line)(void *ctx, const char *text);
    void *ctx;
} top_sink;

/* Two replies and the seconds between them (prev NULL: the first frame,
 * or the daemon restarted). */
typedef struct top_frame {
    const Retryd__StatsReply *prev;
    const Retryd__StatsReply *cur;
    double elapsed;
} top_frame;

/* A line being built, cell by cell, padded by display width (the dash is
 * one column, three bytes). */
typedef struct line_buf {
    char text[TOP_LINE_MAX];
    size_t len;
} line_buf;

static size_t display_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* Appends @p text, right-aligned in @p width columns (left when width is
 * negative), after a space unless the line is empty. */
static void cell(line_buf *b, int width, const char *text)
{
    size_t w = display_width(text), pad = 0, room;
    size_t abs_w = (size_t)(width < 0 ? -width : width);
    if (w < abs_w)
        pad = abs_w - w;
    room = sizeof(b->text) - b->len;
    int n = snprintf(b->text + b->len, room, "%s%*s%s%*s", b->len ? " " : "",
                     width > 0 ? (int)pad : 0, "", text,
                     width < 0 ? (int)pad : 0, "");
    if (n > 0)
        b->len += (size_t)n < room ? (size_t)n : room - 1;
}

static void emit(const top_sink *o, line_buf *b)
{
    o->line(o->ctx, b->text);
    b->len = 0;
    b->text[0] = '\0';
}

static void emitf(const top_sink *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void emitf(const top_sink *o, const char *fmt, ...)
{
    char text[TOP_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    o->line(o->ctx, text);
}

/* The rate of a counter, or the dash without a previous value (or when it
 * went backwards: a slot retired and registered again). */
static void rate_cell(line_buf *b, int width, bool have, uint64_t cur,
                      uint64_t prev, double elapsed)
{
    char text[32];
    if (!have || cur < prev || elapsed <= 0)
        snprintf(text, sizeof(text), TOP_DASH);
    else
        snprintf(text, sizeof(text), "%.1f", (double)(cur - prev) / elapsed);
    cell(b, width, text);
}

/* @p in with every byte outside printable ASCII as '?': a process picks
 * its own program name (prctl PR_SET_NAME), and must not get escape codes
 * onto an operator's terminal through top. */
static void printable(const char *in, char *out, size_t len)
{
    size_t n = 0;
    for (; in[n] && n + 1 < len; n++)
        out[n] = in[n] >= 0x20 && in[n] < 0x7f ? in[n] : '?';
    out[n] = '\0';
}

/* A denial reason's column title: the initials of its name's words
 * (budget_exhausted: BE), named in full in the legend. */
static void reason_abbrev(size_t reason, char *out, size_t len)
{
    const char *name = retryd_denial_name((retryd_denial)reason);
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < len; p++)
        if (p == name || p[-1] == '_')
            out[n++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    out[n] = '\0';
}

static void print_legend(const top_sink *o)
{
    line_buf b = {.len = 0};
    char ab[16], item[64];
    cell(&b, 0, "denied/s by reason:");
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++) {
        reason_abbrev(i, ab, sizeof(ab));
        snprintf(item, sizeof(item), "%s=%s", ab,
                 retryd_denial_name((retryd_denial)i));
        cell(&b, 0, item);
    }
    emit(o, &b);
}

/* The daemon's line (its segment health: the damage found and handled,
 * all kinds together), the interval of the rates, the legend. */
static void print_header(const top_sink *o, const top_frame *f)
{
    const Retryd__StatsReply *r = f->cur;
    uint64_t up = r->uptime_ms / 1000;
    char health[96] = "segment: no checks reported";
    if (r->segment_health) {
        uint64_t dmg = reply_damage_total(r);
        snprintf(health, sizeof(health), "segment %s (%" PRIu64 " checks%s)",
                 dmg ? "DAMAGE HANDLED" : "ok", r->segment_health->checks,
                 dmg ? "; see retrydctl stats" : "");
    }
    emitf(o,
          "retryd %s  up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64
          "  processes %u/%u  upstreams %zu/%u  draining %s  %s",
          r->daemon_version, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60,
          r->attached_processes, r->process_capacity, r->n_upstreams,
          r->upstream_capacity, r->draining ? "YES" : "no", health);
    char fleet[512];
    ctl_fleet_summary(r, fleet, sizeof(fleet));
    if (fleet[0] != '\0')
        emitf(o, "%s", fleet);
    if (f->prev)
        emitf(o, "rates over the last %.2f s", f->elapsed);
    else
        emitf(o, "first frame: totals only, rates " TOP_DASH " until the next");
    print_legend(o);
}

/* --- upstreams ----------------------------------------------------------- */

static const Retryd__UpstreamStats *prev_upstream(const top_frame *f,
                                                  const char *name)
{
    if (f->prev == NULL)
        return NULL;
    for (size_t i = 0; i < f->prev->n_upstreams; i++)
        if (strcmp(f->prev->upstreams[i]->name, name) == 0)
            return f->prev->upstreams[i];
    return NULL;
}

static void upstream_title(const top_sink *o)
{
    line_buf b = {.len = 0};
    char ab[16];
    cell(&b, -TOP_NAME_W, "UPSTREAM");
    cell(&b, 15, "BALANCE/CAP");
    cell(&b, 10, "DEPOSITS");
    cell(&b, TOP_RATE_W, "DEP/s");
    cell(&b, TOP_RATE_W, "RETRY/s");
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++) {
        reason_abbrev(i, ab, sizeof(ab));
        cell(&b, TOP_REASON_W, ab);
    }
    cell(&b, TOP_RATE_W, "AMBIG/s");
    cell(&b, TOP_RATE_W, "BORROW/s");
    cell(&b, 0, "DRAINED BY (10s)"); /* the last: unpadded */
    emit(o, &b);
}

/* Who drained the upstream: the program granted most of its retries in
 * the daemon's window, with its share of them. */
static void drained_cell(line_buf *b, const Retryd__UpstreamStats *u)
{
    const Retryd__DrainedBy *db = u->drained_by;
    char name[TOP_PROGRAM_CELL], text[64];
    if (db == NULL || db->window_grants == 0) {
        cell(b, 0, TOP_DASH);
        return;
    }
    printable(db->program[0] ? db->program : "?", name, sizeof(name));
    snprintf(text, sizeof(text), "%s %.0f%%", name,
             100.0 * (double)db->grants / (double)db->window_grants);
    cell(b, 0, text);
}

static void upstream_row(const top_sink *o, const top_frame *f,
                         const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamStats *p = prev_upstream(f, u->name);
    const Retryd__Counters *c = u->counters, *pc = p ? p->counters : NULL;
    line_buf b = {.len = 0};
    char text[128];
    bool have = pc != NULL;

    printable(u->name, text, sizeof(text));
    cell(&b, -TOP_NAME_W, text);
    snprintf(text, sizeof(text), "%.1f/%.1f", reply_tokens(u->balance_micro),
             reply_tokens(u->params->cap_micro));
    cell(&b, 15, text);
    snprintf(text, sizeof(text), "%" PRIu64, c->deposits);
    cell(&b, 10, text);
    rate_cell(&b, TOP_RATE_W, have, c->deposits, have ? pc->deposits : 0,
              f->elapsed);
    rate_cell(&b, TOP_RATE_W, have, c->retries_granted,
              have ? pc->retries_granted : 0, f->elapsed);
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++)
        rate_cell(&b, TOP_REASON_W, have, reply_at(c->denied, c->n_denied, i),
                  have ? reply_at(pc->denied, pc->n_denied, i) : 0, f->elapsed);
    rate_cell(&b, TOP_RATE_W, have, c->ambiguous, have ? pc->ambiguous : 0,
              f->elapsed);
    rate_cell(&b, TOP_RATE_W, have, c->borrowed, have ? pc->borrowed : 0,
              f->elapsed);
    drained_cell(&b, u);
    emit(o, &b);
}

/* --- upstream health (docs/health.md) ------------------------------------ */

static void health_title(const top_sink *o)
{
    line_buf b = {.len = 0};
    cell(&b, -TOP_NAME_W, "HEALTH");
    cell(&b, 8, "THROTTLE");
    cell(&b, 6, "P");
    cell(&b, 8, "R");
    cell(&b, 8, "A");
    cell(&b, 5, "REJ");
    cell(&b, 10, "THROTTLED");
    cell(&b, TOP_RATE_W, "THR/s");
    cell(&b, 8, "HELD");
    cell(&b, TOP_RATE_W, "HELD/s");
    cell(&b, 9, "PUSHBACK");
    emit(o, &b);
}

/* An upstream's throttle (off, on, or ENGAGED with its probability and
 * window: R requests, A accepts, REJ rejecting processes), what it and the
 * pushback kept back, and the hold left. */
static void health_row(const top_sink *o, const top_frame *f,
                       const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamStats *p = prev_upstream(f, u->name);
    const Retryd__UpstreamHealth *h = reply_upstream_health(u);
    const Retryd__Counters *c = u->counters, *pc = p ? p->counters : NULL;
    line_buf b = {.len = 0};
    char text[128];
    bool on = h->adaptive_throttle;

    printable(u->name, text, sizeof(text));
    cell(&b, -TOP_NAME_W, text);
    cell(&b, 8, !on ? "off" : h->engaged ? "ENGAGED" : "on");
    snprintf(text, sizeof(text), "%.3f", h->probability);
    cell(&b, 6, on ? text : TOP_DASH);
    snprintf(text, sizeof(text), "%" PRIu64, h->requests);
    cell(&b, 8, on ? text : TOP_DASH);
    snprintf(text, sizeof(text), "%" PRIu64, h->accepts);
    cell(&b, 8, on ? text : TOP_DASH);
    snprintf(text, sizeof(text), "%" PRIu64, h->rejecting_processes);
    cell(&b, 5, on ? text : TOP_DASH);
    snprintf(text, sizeof(text), "%" PRIu64, c->throttled);
    cell(&b, 10, text);
    rate_cell(&b, TOP_RATE_W, pc != NULL, c->throttled, pc ? pc->throttled : 0,
              f->elapsed);
    snprintf(text, sizeof(text), "%" PRIu64, c->held);
    cell(&b, 8, text);
    rate_cell(&b, TOP_RATE_W, pc != NULL, c->held, pc ? pc->held : 0,
              f->elapsed);
    if (!h->pushback)
        snprintf(text, sizeof(text), "off");
    else if (h->pushback_remaining_ms == 0)
        snprintf(text, sizeof(text), "none");
    else
        snprintf(text, sizeof(text), "%.1fs",
                 (double)h->pushback_remaining_ms / 1000);
    cell(&b, 9, text);
    emit(o, &b);
}

/* --- hedging (docs/hedging.md) ------------------------------------------ */

static void hedge_title(const top_sink *o)
{
    line_buf b = {.len = 0};
    cell(&b, -TOP_NAME_W, "HEDGING");
    cell(&b, 9, "BALANCE");
    cell(&b, 8, "PICTURE");
    cell(&b, 9, "DELAY");
    cell(&b, 8, "SENT");
    cell(&b, TOP_RATE_W, "SENT/s");
    cell(&b, TOP_RATE_W, "WON/s");
    cell(&b, TOP_RATE_W, "REFUSED/s");
    emit(o, &b);
}

/* An upstream's hedge bucket, its latency picture (the delay it gives),
 * and the hedges sent, won and refused per second. */
static void hedge_row(const top_sink *o, const top_frame *f,
                      const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamStats *p = prev_upstream(f, u->name);
    const Retryd__UpstreamHedge *h = reply_upstream_hedge(u);
    const Retryd__UpstreamHedge *ph = p ? reply_upstream_hedge(p) : NULL;
    line_buf b = {.len = 0};
    char text[128];

    printable(u->name, text, sizeof(text));
    cell(&b, -TOP_NAME_W, text);
    snprintf(text, sizeof(text), "%.2f", reply_tokens(h->balance_micro));
    cell(&b, 9, text);
    cell(&b, 8, reply_hedge_picture(h));
    snprintf(text, sizeof(text), "%.1fms", (double)h->delay_us / 1000);
    cell(&b, 9, h->delay_us ? text : TOP_DASH);
    snprintf(text, sizeof(text), "%" PRIu64, h->sent);
    cell(&b, 8, text);
    rate_cell(&b, TOP_RATE_W, ph != NULL, h->sent, ph ? ph->sent : 0,
              f->elapsed);
    rate_cell(&b, TOP_RATE_W, ph != NULL, h->won, ph ? ph->won : 0, f->elapsed);
    rate_cell(&b, TOP_RATE_W, ph != NULL, reply_hedges_refused(h),
              ph ? reply_hedges_refused(ph) : 0, f->elapsed);
    emit(o, &b);
}

/* --- the fleet tier (docs/fleet.md) ------------------------------------- */

/* Per upstream in the fleet: whether the fleet's view applies, the floor
 * in force and the host's share of the fleet's, the hosts, the fleet's
 * first attempts and retries in the share window, the other hosts'
 * throttle counts, the fleet's hold left here. */
static void fleet_rows(const top_sink *o, const top_frame *f)
{
    const Retryd__StatsReply *r = f->cur;
    if (r->fleet == NULL)
        return;
    line_buf b = {.len = 0};
    static const struct {
        int w;
        const char *t;
    } cols[] = {{-TOP_NAME_W, "FLEET"},
                {8, "APPLIED"},
                {9, "FLOOR/s"},
                {7, "SHARE"},
                {6, "HOSTS"},
                {10, "FLEET_1ST"},
                {10, "FLEET_RET"},
                {8, "+R"},
                {8, "+A"},
                {8, "HOLD"}};
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        cell(&b, cols[i].w, cols[i].t);
    emit(o, &b);
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamFleet *x = r->upstreams[i]->fleet;
        char t[10][64];
        if (x == NULL)
            continue;
        printable(r->upstreams[i]->name, t[0], sizeof(t[0]));
        snprintf(t[1], 64, "%s", x->applied ? "yes" : "NO");
        snprintf(t[2], 64, "%.2f", reply_tokens(x->floor_micro_per_s));
        snprintf(t[3], 64, "%.1f%%", (double)x->share_ppm / 1e4);
        snprintf(t[4], 64, "%u", x->hosts);
        snprintf(t[5], 64, "%" PRIu64, x->first_attempts);
        snprintf(t[6], 64, "%" PRIu64, x->retries_granted);
        snprintf(t[7], 64, "%" PRIu64, x->requests);
        snprintf(t[8], 64, "%" PRIu64, x->accepts);
        snprintf(t[9], 64, "%.1fs", (double)x->pushback_remaining_ms / 1000);
        b.len = 0;
        for (size_t c = 0; c < 10; c++)
            cell(&b, cols[c].w, x->applied || c < 3 ? t[c] : TOP_DASH);
        emit(o, &b);
    }
}

/* --- programs ------------------------------------------------------------ */

/* The rates per program: the daemon's per-program rows, which keep the
 * counts of a program's exited processes, so a rate never goes negative
 * when one exits. */
#define TOP_PROGRAM_COUNTERS 8
static void program_counters(const Retryd__Counters *c,
                             uint64_t out[TOP_PROGRAM_COUNTERS])
{
    out[0] = c->deposits;
    out[1] = c->retries_granted;
    out[2] = c->borrowed;
    out[3] = reply_denied_total(c);
    out[4] = reply_at(c->denied, c->n_denied, RETRYD_DENIAL_OVER_SHARE);
    out[5] = c->ambiguous;
    out[6] = c->throttled;
    out[7] = c->held;
}

static const Retryd__ProgramStats *prev_program(const top_frame *f,
                                                const char *name)
{
    if (f->prev == NULL)
        return NULL;
    for (size_t i = 0; i < f->prev->n_programs; i++)
        if (strcmp(f->prev->programs[i]->program, name) == 0)
            return f->prev->programs[i];
    return NULL;
}

static void program_row(const top_sink *o, const top_frame *f,
                        const Retryd__ProgramStats *p)
{
    const Retryd__ProgramStats *q = prev_program(f, p->program);
    uint64_t now[TOP_PROGRAM_COUNTERS], before[TOP_PROGRAM_COUNTERS] = {0};
    line_buf b = {.len = 0};
    char text[64];
    program_counters(p->counters, now);
    if (q != NULL)
        program_counters(q->counters, before);
    printable(p->program[0] ? p->program : "?", text, sizeof(text));
    cell(&b, -TOP_NAME_W, text);
    snprintf(text, sizeof(text), "%u", p->processes);
    cell(&b, 6, text);
    snprintf(text, sizeof(text), "%" PRIu64, now[0]);
    cell(&b, 10, text);
    /* A program new since the previous reply gained all its counts. */
    for (int k = 0; k < TOP_PROGRAM_COUNTERS; k++)
        rate_cell(&b, TOP_RATE_W, f->prev != NULL, now[k], before[k],
                  f->elapsed);
    emit(o, &b);
}

static void program_rows(const top_sink *o, const top_frame *f)
{
    static const char *const titles[TOP_PROGRAM_COUNTERS] = {
        "DEP/s", "RETRY/s", "BORROW/s", "DENIED/s",
        "OS/s",  "AMBIG/s", "THR/s",    "HELD/s"};
    line_buf b = {.len = 0};
    cell(&b, -TOP_NAME_W, "PROGRAM");
    cell(&b, 6, "PROCS");
    cell(&b, 10, "DEPOSITS");
    for (int k = 0; k < TOP_PROGRAM_COUNTERS; k++)
        cell(&b, TOP_RATE_W, titles[k]);
    emit(o, &b);
    for (size_t i = 0; i < f->cur->n_programs; i++)
        program_row(o, f, f->cur->programs[i]);
}

/* The whole frame, line by line, without a blank line: in batch mode a
 * blank line is the end of a frame. */
static void render(const top_sink *o, const top_frame *f)
{
    print_header(o, f);
    upstream_title(o);
    for (size_t i = 0; i < f->cur->n_upstreams; i++)
        upstream_row(o, f, f->cur->upstreams[i]);
    if (f->cur->n_upstreams == 0)
        emitf(o, "(no upstream registered)");
    else {
        health_title(o);
        for (size_t i = 0; i < f->cur->n_upstreams; i++)
            health_row(o, f, f->cur->upstreams[i]);
        hedge_title(o);
        for (size_t i = 0; i < f->cur->n_upstreams; i++)
            hedge_row(o, f, f->cur->upstreams[i]);
        fleet_rows(o, f);
    }
    program_rows(o, f);
    if (f->cur->attached_processes == 0)
        emitf(o, "(no process attached)");
}

/* --- options ------------------------------------------------------------- */

typedef struct top_opts {
    ctl_sockets s;
    double delay;    /* seconds between frames */
    long iterations; /* frames to show; 0: until quit */
    bool batch;
} top_opts;

static const struct option top_options[] = {
    CTL_COMMON_OPTIONS,
    {"delay", required_argument, NULL, 'd'},
    {"batch", no_argument, NULL, 'b'},
    {"iterations", required_argument, NULL, 'n'},
    {NULL, 0, NULL, 0},
};

static const ctl_cmd top_cmd = {
    "top",
    "usage: retrydctl top [-b] [-n N] [-d SECONDS] [options]\n"
    "A live view of the host budget: per upstream its balance, deposits/s,\n"
    "retries granted/s, denials/s by reason, ambiguous outcomes/s, borrows/s\n"
    "and the program that drained it (most retries in the daemon's last\n"
    "10 s), and its health (host throttle, pushback, attempts\n"
    "throttled and held) and hedging (its budget, the latency picture's\n"
    "delay, hedges sent, won and refused); per program its processes'\n"
    "rates, live and exited (OS: over_share denials). In a terminal, q\n"
    "quits.\n\n"
    "  -d, --delay SECONDS    between frames (0.1 to 3600; default 1)\n"
    "  -b, --batch            plain-text frames separated by a blank line,\n"
    "                         no escape codes (the default when stdout is\n"
    "                         not a terminal)\n"
    "  -n, --iterations N     stop after N frames (default: until quit)\n"
    "exit: 0 done, 64 usage, 70 no daemon (batch mode)\n" CTL_COMMON_HELP,
    "hd:bn:",
    top_options,
};

static bool parse_delay(const char *s, double *ret)
{
    return retryd__parse_double(s, 0.1, 3600, ret);
}

/* -1 to go on, or the exit code. */
static int parse_top(int argc, char **argv, top_opts *o)
{
    int opt, code;
    ctl_sockets_init(&o->s);
    optind = 0;
    while ((opt = ctl_getopt(&top_cmd, argc, argv, &o->s, &code)) >= 0) {
        if (opt == 'b')
            o->batch = true;
        else if (opt == 'd' && !parse_delay(optarg, &o->delay))
            return ctl_usage_error(&top_cmd,
                                   "--delay wants seconds from 0.1 "
                                   "to 3600, not '%s'",
                                   optarg);
        else if (opt == 'n' &&
                 !retryd__parse_long(optarg, 1, 1000000000, &o->iterations))
            return ctl_usage_error(&top_cmd,
                                   "--iterations wants a count "
                                   "from 1, not '%s'",
                                   optarg);
    }
    if (opt == CTL_GETOPT_EXIT)
        return code;
    if (optind < argc)
        return ctl_usage_error(&top_cmd, "unexpected argument '%s'",
                               argv[optind]);
    return -1;
}

/* --- sampling ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The last two replies: a frame is drawn from them. */
typedef struct top_state {
    Retryd__StatsReply *prev, *cur;
    double prev_at, cur_at;
} top_state;

static void state_drop(top_state *st)
{
    if (st->prev)
        retryd__stats_reply__free_unpacked(st->prev, NULL);
    if (st->cur)
        retryd__stats_reply__free_unpacked(st->cur, NULL);
    st->prev = st->cur = NULL;
}

/* A new reply: 0, or the failure with its reason in @p err (the state
 * forgotten, so the next success starts again from totals). */
static int sample(top_state *st, const ctl_sockets *s, char *err, size_t len)
{
    Retryd__StatsReply *r;
    int rc = ctl_fetch_stats_quiet(s, true, &r, err, len);
    if (rc < 0) {
        state_drop(st);
        return rc;
    }
    if (st->prev)
        retryd__stats_reply__free_unpacked(st->prev, NULL);
    st->prev = st->cur;
    st->prev_at = st->cur_at;
    st->cur = r;
    st->cur_at = now_s();
    /* Another daemon (a restart) counts from zero again. */
    if (st->prev && st->prev->generation != r->generation) {
        retryd__stats_reply__free_unpacked(st->prev, NULL);
        st->prev = NULL;
    }
    return 0;
}

static top_frame frame_of(const top_state *st)
{
    top_frame f = {st->prev, st->cur, st->cur_at - st->prev_at};
    return f;
}

/* Sleeps until @p t on the monotonic clock. */
static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t,
                          .tv_nsec = (long)((t - floor(t)) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* --- batch --------------------------------------------------------------- */

static void file_line(void *ctx, const char *text)
{
    fprintf(ctx, "%s\n", text);
}

static int top_batch(const top_opts *o)
{
    top_state st = {0};
    top_sink sink = {file_line, stdout};
    char err[CTL_ERR_MAX];

    for (long i = 0; o->iterations == 0 || i < o->iterations; i++) {
        if (i > 0)
            sleep_until(st.cur_at + o->delay);
        if (sample(&st, &o->s, err, sizeof(err)) < 0) {
            fprintf(stderr, "retrydctl top: %s\n", err);
            return CTL_EXIT_ERROR;
        }
        top_frame f = frame_of(&st);
        render(&sink, &f);
        /* The separator goes out with its frame: a reader that sees the
         * blank line knows the frame is whole. */
        if (o->iterations == 0 || i + 1 < o->iterations)
            printf("\n");
        fflush(stdout);
    }
    state_drop(&st);
    return CTL_EXIT_OK;
}

/* --- interactive --------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* A line on the screen, cut at its width, never wrapped. */
static void screen_line(void *ctx, const char *text)
{
    int *row = ctx;
    if (*row >= LINES)
        return;
    char cut[TOP_LINE_MAX];
    size_t w = 0, i = 0;
    for (; text[i] && i + 1 < sizeof(cut); i++) {
        if (((unsigned char)text[i] & 0xc0) != 0x80 && w++ == (size_t)COLS)
            break;
        cut[i] = text[i];
    }
    cut[i] = '\0';
    mvaddstr(*row, 0, cut);
    clrtoeol();
    (*row)++;
}

static void draw(const top_state *st, const top_opts *o, const char *err)
{
    int row = 0;
    top_sink sink = {screen_line, &row};
    erase();
    if (st->cur) {
        top_frame f = frame_of(st);
        render(&sink, &f);
    } else {
        emitf(&sink, "retrydctl top: %s", err);
        emitf(&sink,
              "no answer from the daemon on %s; trying again every "
              "%.1f s (q quits)",
              o->s.stats, o->delay);
    }
    refresh();
}

/* Waits for the next frame's time, redrawing on a resize; false when the
 * user quits. */
static bool wait_key(const top_state *st, const top_opts *o, const char *err,
                     double until)
{
    for (;;) {
        double left = until - now_s();
        if (interrupted)
            return false;
        if (left <= 0)
            return true;
        timeout((int)ceil(left * 1000));
        int ch = getch();
        if (ch == 'q' || ch == 'Q')
            return false;
        if (ch == KEY_RESIZE)
            draw(st, o, err);
    }
}

static int top_interactive(const top_opts *o)
{
    top_state st = {0};
    char err[CTL_ERR_MAX] = "";
    struct sigaction sa = {.sa_handler = on_signal};

    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    setlocale(LC_ALL, "");
    initscr();
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    for (long i = 0; o->iterations == 0 || i < o->iterations; i++) {
        double started = now_s();
        sample(&st, &o->s, err, sizeof(err));
        draw(&st, o, err);
        if (!wait_key(&st, o, err, started + o->delay))
            break;
    }
    endwin();
    state_drop(&st);
    return CTL_EXIT_OK;
}

int ctl_top_main(int argc, char **argv)
{
    top_opts o = {.delay = 1};
    int code = parse_top(argc, argv, &o);
    if (code >= 0)
        return code;
    if (o.batch || !isatty(STDOUT_FILENO))
        return top_batch(&o);
    return top_interactive(&o);
}
