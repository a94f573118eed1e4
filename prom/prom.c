/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition of a stats reply (prom.h). Every family
 * has its HELP and TYPE lines and its samples together; counters end in
 * _total; label values are escaped as the format says (backslash, double
 * quote, line feed).
 *
 * Per-process series are bounded by default: labelled with the program
 * name and summed over the processes that share it, so a host that starts
 * a thousand short-lived workers of one program has one series, not a
 * thousand. By pid (one series a process, unbounded over time) or none
 * are the operator's choice.
 */
#include "prom.h"
#include "prom_fleet.h"
#include "prom_text.h"
#include "reply.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "retryd/decision.h"

/* The program label of a process whose name the daemon could not read
 * (or an older daemon that sends none). */
#define PROM_PROGRAM_UNKNOWN "(unknown)"

static const char *const per_process_names[] = {"program", "pid", "none"};

int prom_per_process_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, per_process_names[i]) == 0)
            return i;
    return -1;
}

/* --- per-process groups -------------------------------------------------- */

/* One per-process series: a process (pid mode) or a program (program
 * mode: the daemon's per-program rows, which keep the counts of its exited
 * processes, so a series never goes down when one exits). */
typedef struct group {
    const char *program;
    const Retryd__ProcessStats *process; /* pid mode */
    unsigned processes;
    const Retryd__Counters *c;
} group;

static const char *program_name(const char *program)
{
    return program != NULL && program[0] != '\0' ? program
                                                 : PROM_PROGRAM_UNKNOWN;
}

/* The groups of @p r under @p mode, in *ret (to free); their number. */
static size_t make_groups(const Retryd__StatsReply *r, prom_per_process mode,
                          group **ret)
{
    size_t n = mode == PROM_PER_PID       ? r->n_processes
               : mode == PROM_PER_PROGRAM ? r->n_programs
                                          : 0;
    *ret = NULL;
    if (n == 0)
        return 0;
    group *g = calloc(n, sizeof(*g));
    if (g == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (mode == PROM_PER_PID) {
            const Retryd__ProcessStats *p = r->processes[i];
            g[i] = (group){program_name(p->program), p, 1, p->counters};
        } else {
            const Retryd__ProgramStats *p = r->programs[i];
            g[i] = (group){program_name(p->program), NULL, p->processes,
                           p->counters};
        }
    }
    *ret = g;
    return n;
}

static void group_labels(FILE *out, const group *g)
{
    if (g->process != NULL)
        fprintf(out, "pid=\"%u\",", g->process->pid);
    fputs("program=\"", out);
    prom_label(out, g->program);
    putc('"', out);
}

typedef struct render {
    FILE *out;
    const Retryd__StatsReply *r;
    prom_per_process mode;
    group *groups;
    size_t n_groups;
} render;

/* --- upstream and process families --------------------------------------- */

enum which {
    W_DEPOSITS,
    W_GRANTED,
    W_AMBIGUOUS,
    W_THROTTLED,
    W_HELD,
    W_BORROWED
};

static uint64_t counter(const Retryd__Counters *c, enum which w)
{
    if (c == NULL)
        return 0;
    switch (w) {
    case W_DEPOSITS:
        return c->deposits;
    case W_GRANTED:
        return c->retries_granted;
    case W_AMBIGUOUS:
        return c->ambiguous;
    case W_THROTTLED:
        return c->throttled;
    case W_HELD:
        return c->held;
    case W_BORROWED:
        return c->borrowed;
    }
    return 0;
}

static void family(const render *x, const char *what, const char *help,
                   enum which w)
{
    char name[96];
    snprintf(name, sizeof(name), "retryd_upstream_%s_total", what);
    prom_header(x->out, name, "counter", help);
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        fprintf(x->out, "%s{upstream=\"", name);
        prom_label(x->out, x->r->upstreams[i]->name);
        fprintf(x->out, "\"} %" PRIu64 "\n",
                counter(x->r->upstreams[i]->counters, w));
    }
    if (x->n_groups == 0)
        return;
    snprintf(name, sizeof(name), "retryd_process_%s_total", what);
    prom_header(x->out, name, "counter", help);
    for (size_t i = 0; i < x->n_groups; i++) {
        fprintf(x->out, "%s{", name);
        group_labels(x->out, &x->groups[i]);
        fprintf(x->out, "} %" PRIu64 "\n", counter(x->groups[i].c, w));
    }
}

static void processes_gauge(const render *x)
{
    if (x->n_groups == 0)
        return;
    prom_header(x->out, "retryd_processes", "gauge",
                x->mode == PROM_PER_PID
                    ? "Attached processes, by pid."
                    : "Attached processes, by program name.");
    for (size_t i = 0; i < x->n_groups; i++) {
        fputs("retryd_processes{", x->out);
        group_labels(x->out, &x->groups[i]);
        fprintf(x->out, "} %u\n", x->groups[i].processes);
    }
}

static void gauge(const render *x, const char *name, const char *help,
                  int which)
{
    prom_header(x->out, name, "gauge", help);
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = x->r->upstreams[i];
        static const Retryd__Params none = RETRYD__PARAMS__INIT;
        const Retryd__Params *p = u->params ? u->params : &none;
        uint64_t v = which == 0   ? u->balance_micro
                     : which == 1 ? p->cap_micro
                     : which == 2 ? p->ratio_micro
                                  : p->floor_micro_per_s;
        fprintf(x->out, "%s{upstream=\"", name);
        prom_label(x->out, u->name);
        fprintf(x->out, "\"} %.6f\n", reply_tokens(v));
    }
}

static void labelled(const render *x, bool denied)
{
    const char *name = denied ? "retryd_upstream_retries_denied_total"
                              : "retryd_upstream_attempts_total";
    prom_header(x->out, name, "counter",
                denied ? "Retries denied, by the rule's reason."
                       : "Attempts reported, by execution evidence.");
    static const Retryd__Counters zero = RETRYD__COUNTERS__INIT;
    size_t end = denied ? RETRYD_DENIAL_COUNT : RETRYD_EVIDENCE_COUNT;
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        const Retryd__Counters *c = x->r->upstreams[i]->counters;
        if (c == NULL)
            c = &zero;
        for (size_t k = denied ? 1 : 0; k < end; k++) {
            fprintf(x->out, "%s{upstream=\"", name);
            prom_label(x->out, x->r->upstreams[i]->name);
            fprintf(x->out, "\",%s=\"%s\"} %" PRIu64 "\n",
                    denied ? "reason" : "evidence",
                    denied ? retryd_denial_name((retryd_denial)k)
                           : retryd_evidence_name((retryd_evidence)k),
                    denied ? reply_at(c->denied, c->n_denied, k)
                           : reply_at(c->evidence, c->n_evidence, k));
        }
    }
}

/* Denials by reason per program (or process): who was refused, and
 * whether for an empty bucket or for being over its share. */
static void group_denied(const render *x)
{
    static const Retryd__Counters zero = RETRYD__COUNTERS__INIT;
    if (x->n_groups == 0)
        return;
    prom_header(x->out, "retryd_process_retries_denied_total", "counter",
                "Retries denied, by the rule's reason.");
    for (size_t i = 0; i < x->n_groups; i++) {
        const Retryd__Counters *c = x->groups[i].c ? x->groups[i].c : &zero;
        for (size_t k = 1; k < RETRYD_DENIAL_COUNT; k++) {
            fputs("retryd_process_retries_denied_total{", x->out);
            group_labels(x->out, &x->groups[i]);
            fprintf(x->out, ",reason=\"%s\"} %" PRIu64 "\n",
                    retryd_denial_name((retryd_denial)k),
                    reply_at(c->denied, c->n_denied, k));
        }
    }
}

/* --- fair shares (docs/budget.md#fair-shares) ----------------------------- */

static void share_families(const render *x)
{
    prom_header(x->out, "retryd_upstream_claimed_tokens", "gauge",
                "Tokens of the balance owed to processes (their claims).");
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        fputs("retryd_upstream_claimed_tokens{upstream=\"", x->out);
        prom_label(x->out, x->r->upstreams[i]->name);
        fprintf(x->out, "\"} %.6f\n",
                reply_tokens(x->r->upstreams[i]->claimed_micro));
    }
    prom_header(
        x->out, "retryd_upstream_shares_kept", "gauge",
        "1 while fair shares are kept (a shortage in the last window).");
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        fputs("retryd_upstream_shares_kept{upstream=\"", x->out);
        prom_label(x->out, x->r->upstreams[i]->name);
        fprintf(x->out, "\"} %d\n", x->r->upstreams[i]->shares_kept ? 1 : 0);
    }
    prom_header(x->out, "retryd_upstream_drained_by", "gauge",
                "The program granted the most retries on the upstream in the "
                "daemon's recent window, and its share of them (0 to 1).");
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = x->r->upstreams[i];
        const Retryd__DrainedBy *db = u->drained_by;
        if (db == NULL || db->window_grants == 0)
            continue;
        fputs("retryd_upstream_drained_by{upstream=\"", x->out);
        prom_label(x->out, u->name);
        fputs("\",program=\"", x->out);
        prom_label(x->out, program_name(db->program));
        fprintf(x->out, "\"} %.6f\n",
                (double)db->grants / (double)db->window_grants);
    }
}

/* --- upstream health (docs/health.md) ----------------------------------- */

enum health_gauge {
    H_THROTTLE,    /* adaptive_throttle on */
    H_ENGAGED,     /* the quorum met */
    H_PROBABILITY, /* of throttling a first attempt */
    H_REQUESTS,    /* R */
    H_ACCEPTS,     /* A */
    H_REJECTING,   /* processes */
    H_PUSHBACK,    /* the hold left, seconds */
};

static void health_gauge(const render *x, const char *name, const char *help,
                         enum health_gauge which)
{
    prom_header(x->out, name, "gauge", help);
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = x->r->upstreams[i];
        const Retryd__UpstreamHealth *h = reply_upstream_health(u);
        fprintf(x->out, "%s{upstream=\"", name);
        prom_label(x->out, u->name);
        fputs("\"} ", x->out);
        switch (which) {
        case H_THROTTLE:
            fprintf(x->out, "%d\n", h->adaptive_throttle ? 1 : 0);
            break;
        case H_ENGAGED:
            fprintf(x->out, "%d\n", h->engaged ? 1 : 0);
            break;
        case H_PROBABILITY:
            fprintf(x->out, "%.6f\n", h->probability);
            break;
        case H_REQUESTS:
            fprintf(x->out, "%" PRIu64 "\n", h->requests);
            break;
        case H_ACCEPTS:
            fprintf(x->out, "%" PRIu64 "\n", h->accepts);
            break;
        case H_REJECTING:
            fprintf(x->out, "%" PRIu64 "\n", h->rejecting_processes);
            break;
        case H_PUSHBACK:
            fprintf(x->out, "%.3f\n", (double)h->pushback_remaining_ms / 1000);
            break;
        }
    }
}

static void health_families(const render *x)
{
    health_gauge(x, "retryd_upstream_throttle_enabled",
                 "1 when adaptive_throttle is on for the upstream.",
                 H_THROTTLE);
    health_gauge(x, "retryd_upstream_throttle_engaged",
                 "1 while the host throttle is engaged: its quorum of "
                 "rejecting processes met, requests in the window.",
                 H_ENGAGED);
    health_gauge(x, "retryd_upstream_throttle_probability",
                 "The host throttle's probability of keeping a first "
                 "attempt back, max(0, (R - K*A) / (R + 1)).",
                 H_PROBABILITY);
    health_gauge(x, "retryd_upstream_throttle_requests",
                 "Requests R in the throttle's window, every process's.",
                 H_REQUESTS);
    health_gauge(x, "retryd_upstream_throttle_accepts",
                 "Requests the upstream accepted, A, in the throttle's "
                 "window.",
                 H_ACCEPTS);
    health_gauge(x, "retryd_upstream_throttle_rejecting_processes",
                 "Processes with a rejection in the throttle's window.",
                 H_REJECTING);
    health_gauge(x, "retryd_upstream_pushback_seconds",
                 "The host pushback left: no retry before it ends (0: "
                 "none).",
                 H_PUSHBACK);
}

/* --- hedging (docs/hedging.md) ------------------------------------------ */

enum hedge_sample {
    G_SENT,
    G_WON,
    G_BALANCE,
    G_DELAY,
    G_LOAD,
};

static void hedge_family(const render *x, const char *name, const char *type,
                         const char *help, enum hedge_sample which)
{
    prom_header(x->out, name, type, help);
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = x->r->upstreams[i];
        const Retryd__UpstreamHedge *h = reply_upstream_hedge(u);
        fprintf(x->out, "%s{upstream=\"", name);
        prom_label(x->out, u->name);
        fputs("\"} ", x->out);
        switch (which) {
        case G_SENT:
            fprintf(x->out, "%" PRIu64 "\n", h->sent);
            break;
        case G_WON:
            fprintf(x->out, "%" PRIu64 "\n", h->won);
            break;
        case G_BALANCE:
            fprintf(x->out, "%.6f\n", reply_tokens(h->balance_micro));
            break;
        case G_DELAY:
            fprintf(x->out, "%.6f\n", (double)h->delay_us / 1e6);
            break;
        case G_LOAD:
            fprintf(x->out, "%.6f\n", reply_tokens(h->max_extra_load_micro));
            break;
        }
    }
}

static void hedges_refused(const render *x)
{
    const char *name = "retryd_upstream_hedges_refused_total";
    prom_header(
        x->out, name, "counter",
        "Hedges due but not sent, by reason: the host hedge budget, the "
        "retry budget, the host throttle, a pushback, the deadline, "
        "draining.");
    for (size_t i = 0; i < x->r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = x->r->upstreams[i];
        const Retryd__UpstreamHedge *h = reply_upstream_hedge(u);
        const struct {
            const char *reason;
            uint64_t n;
        } rows[] = {
            {"hedge_budget", h->refused_hedge_budget},
            {"retry_budget", h->refused_retry_budget},
            {"throttled", h->refused_throttled},
            {"pushback", h->refused_pushback},
            {"deadline", h->refused_deadline},
            {"draining", h->refused_draining},
        };
        for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
            fprintf(x->out, "%s{upstream=\"", name);
            prom_label(x->out, u->name);
            fprintf(x->out, "\",reason=\"%s\"} %" PRIu64 "\n", rows[k].reason,
                    rows[k].n);
        }
    }
}

static void hedge_families(const render *x)
{
    hedge_family(x, "retryd_upstream_hedges_sent_total", "counter",
                 "Hedges sent: second attempts while the first still ran.",
                 G_SENT);
    hedge_family(x, "retryd_upstream_hedges_won_total", "counter",
                 "Hedges that answered their request first.", G_WON);
    hedges_refused(x);
    hedge_family(x, "retryd_upstream_hedge_balance_tokens", "gauge",
                 "Tokens in the upstream's host hedge bucket.", G_BALANCE);
    hedge_family(x, "retryd_upstream_hedge_delay_seconds", "gauge",
                 "The latency picture's hedge delay, p(100 (1 - "
                 "max_extra_load)) (0: no picture).",
                 G_DELAY);
    hedge_family(x, "retryd_upstream_max_extra_load", "gauge",
                 "Hedge tokens deposited per hedgeable first attempt.", G_LOAD);
}

/* --- the daemon ---------------------------------------------------------- */

static void health(const render *x)
{
    reply_health_item items[REPLY_HEALTH_KINDS];
    reply_health_items(x->r, items);
    prom_header(x->out, "retryd_segment_checks_total", "counter",
                "Heartbeats that checked the segment for damage.");
    fprintf(x->out, "retryd_segment_checks_total %" PRIu64 "\n",
            reply_health_checks(x->r));
    prom_header(x->out, "retryd_segment_damage_total", "counter",
                "Damage found in the segment (another process wrote where it "
                "must not), by kind.");
    for (size_t i = 0; i < REPLY_HEALTH_KINDS; i++)
        fprintf(x->out,
                "retryd_segment_damage_total{kind=\"%s\"} %" PRIu64 "\n",
                items[i].name, items[i].n);
    const Retryd__SegmentHealth *h = x->r->segment_health;
    prom_header(x->out, "retryd_segment_unexplained_tokens_total", "counter",
                "Tokens the ledger audit found in balances or refills that no "
                "ledger explains: taken back, or already spent when found.");
    fprintf(x->out,
            "retryd_segment_unexplained_tokens_total{fate=\"taken_back\"} "
            "%.6f\n"
            "retryd_segment_unexplained_tokens_total{fate=\"spent\"} %.6f\n",
            h ? (double)h->unexplained_removed_micro / 1e6 : 0.0,
            h ? (double)h->unexplained_spent_micro / 1e6 : 0.0);
}

/* The names of the Prometheus clients' process collector, so that the
 * usual descriptor alerts and panels work unchanged; only when the daemon
 * said (an older one sends 0). */
static void descriptor_families(const render *x)
{
    if (x->r->descriptors_max == 0)
        return;
    prom_header(x->out, "process_open_fds", "gauge",
                "The daemon's open file descriptors.");
    fprintf(x->out, "process_open_fds %u\n", x->r->descriptors_open);
    prom_header(x->out, "process_max_fds", "gauge",
                "The daemon's descriptor limit (RLIMIT_NOFILE, soft).");
    fprintf(x->out, "process_max_fds %" PRIu64 "\n", x->r->descriptors_max);
}

static void daemon_families(const render *x)
{
    const Retryd__StatsReply *r = x->r;
    prom_header(x->out, "retryd_info", "gauge",
                "The daemon's version and segment.");
    fputs("retryd_info{version=\"", x->out);
    prom_label(x->out, r->daemon_version ? r->daemon_version : "");
    fprintf(x->out, "\",generation=\"%016" PRIx64 "\"} 1\n", r->generation);
    prom_header(x->out, "retryd_uptime_seconds", "gauge",
                "Seconds since the daemon started.");
    fprintf(x->out, "retryd_uptime_seconds %.3f\n",
            (double)r->uptime_ms / 1000);
    prom_header(x->out, "retryd_attached_processes", "gauge",
                "Processes attached to the segment.");
    fprintf(x->out, "retryd_attached_processes %u\n", r->attached_processes);
    prom_header(x->out, "retryd_segment_process_slots", "gauge",
                "Process slots in the segment (process_capacity).");
    fprintf(x->out, "retryd_segment_process_slots %u\n", r->process_capacity);
    prom_header(x->out, "retryd_upstreams", "gauge", "Upstreams registered.");
    fprintf(x->out, "retryd_upstreams %zu\n", r->n_upstreams);
    prom_header(x->out, "retryd_segment_upstream_slots", "gauge",
                "Upstream slots in the segment (upstream_capacity).");
    fprintf(x->out, "retryd_segment_upstream_slots %u\n", r->upstream_capacity);
    prom_header(x->out, "retryd_draining", "gauge", "1 while the host drains.");
    fprintf(x->out, "retryd_draining %d\n", r->draining ? 1 : 0);
    prom_header(
        x->out, "retryd_slot_refusals_total", "counter",
        "Attaches refused a process slot: every slot taken (capacity) or "
        "the user at process_slots_per_uid (quota).");
    fprintf(x->out,
            "retryd_slot_refusals_total{reason=\"capacity\"} %" PRIu64
            "\nretryd_slot_refusals_total{reason=\"quota\"} %" PRIu64 "\n",
            r->slots_refused_capacity, r->slots_refused_quota);
    prom_header(x->out, "retryd_upstream_refusals_total", "counter",
                "Registrations of new upstreams refused: the user at "
                "upstreams_per_uid (quota).");
    fprintf(x->out,
            "retryd_upstream_refusals_total{reason=\"quota\"} %" PRIu64 "\n",
            r->upstreams_refused_quota);
    health(x);
    descriptor_families(x);
}

int prom_render(FILE *out, const Retryd__StatsReply *r, prom_per_process mode)
{
    render x = {.out = out, .r = r, .mode = mode};
    x.n_groups = make_groups(r, mode, &x.groups);
    daemon_families(&x);
    processes_gauge(&x);
    gauge(&x, "retryd_upstream_balance_tokens",
          "Tokens in the upstream's bucket.", 0);
    gauge(&x, "retryd_upstream_cap_tokens", "The bucket's cap.", 1);
    gauge(&x, "retryd_upstream_ratio", "Tokens deposited per first attempt.",
          2);
    gauge(&x, "retryd_upstream_min_retries_per_second",
          "Floor refill, tokens per second.", 3);
    family(&x, "deposits", "First attempts (each deposits the ratio).",
           W_DEPOSITS);
    family(&x, "retries_granted", "Retries that won a token.", W_GRANTED);
    family(&x, "ambiguous", "Outcomes the caller had to reconcile.",
           W_AMBIGUOUS);
    family(&x, "throttled",
           "First attempts the host throttle kept back (not sent).",
           W_THROTTLED);
    family(&x, "held", "Attempts a host pushback held back.", W_HELD);
    family(&x, "borrowed",
           "Retries granted beyond the process's own claim while fair "
           "shares were kept.",
           W_BORROWED);
    health_families(&x);
    hedge_families(&x);
    share_families(&x);
    labelled(&x, true);
    group_denied(&x);
    labelled(&x, false);
    prom_render_fleet(out, r);
    free(x.groups);
    return ferror(out) ? -1 : 0;
}
