/* SPDX-License-Identifier: MIT */
/*
 * retrydctl stats | upstreams | drain | retire: the operator's window on
 * the daemon. Statistics come from the stats socket (which cannot change
 * anything); drain and retire go through the control socket.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_client.h"
#include "prom.h"
#include "retryd/decision.h"

static double tokens(uint64_t micro)
{
    return (double)micro / 1e6;
}

static uint64_t at(const uint64_t *v, size_t n, size_t i)
{
    return i < n ? v[i] : 0; /* a short array from an older daemon */
}

static uint64_t denied_total(const Retryd__Counters *c)
{
    uint64_t sum = 0;
    for (size_t i = 1; i < c->n_denied; i++)
        sum += c->denied[i];
    return sum;
}

/* --- text ---------------------------------------------------------------- */

static void print_breakdown(const Retryd__Counters *c)
{
    bool any = false;
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++) {
        uint64_t n = at(c->denied, c->n_denied, i);
        if (n == 0)
            continue;
        printf("%s%s=%" PRIu64, any ? " " : "      denied: ",
               retryd_denial_name((retryd_denial)i), n);
        any = true;
    }
    if (any)
        printf("\n");
}

/* --- segment health ------------------------------------------------------ */

/* The damage counts of the reply (zero when an older daemon sent none),
 * named as in JSON and as Prometheus's kind label. */
typedef struct health_item {
    const char *name;
    uint64_t n;
} health_item;

#define HEALTH_KINDS 8

static void health_items(const Retryd__StatsReply *r,
                         health_item out[HEALTH_KINDS])
{
    static const Retryd__SegmentHealth none = RETRYD__SEGMENT_HEALTH__INIT;
    const Retryd__SegmentHealth *h =
        r->segment_health ? r->segment_health : &none;
    health_item items[HEALTH_KINDS] = {
        {"header_repaired", h->header_repaired},
        {"slot_ident_repaired", h->slot_ident_repaired},
        {"params_reset", h->params_reset},
        {"balance_clamped", h->balance_clamped},
        {"refill_reset", h->refill_reset},
        {"slots_retired", h->slots_retired},
        {"forged_slots", h->forged_slots},
        {"process_repaired", h->process_repaired},
    };
    memcpy(out, items, sizeof(items));
}

static uint64_t health_checks(const Retryd__StatsReply *r)
{
    return r->segment_health ? r->segment_health->checks : 0;
}

static void print_health_line(const Retryd__StatsReply *r)
{
    health_item it[HEALTH_KINDS];
    bool any = false;
    health_items(r, it);
    printf("segment checks %" PRIu64 ":", health_checks(r));
    for (int i = 0; i < HEALTH_KINDS; i++) {
        if (it[i].n == 0)
            continue;
        printf(" %s=%" PRIu64, it[i].name, it[i].n);
        any = true;
    }
    printf("%s\n\n", any ? "  (damage found and handled: see the log)"
                         : " no damage found");
}

static void print_table(const Retryd__StatsReply *r)
{
    printf("retryd %s  generation %016" PRIx64 "  uptime %.1fs  attached "
           "processes %u  draining %s\n\n",
           r->daemon_version, r->generation, (double)r->uptime_ms / 1000,
           r->attached_processes, r->draining ? "yes" : "no");
    print_health_line(r);
    printf("%-24s %10s %8s %6s %8s %10s %9s %8s %6s   %s\n", "UPSTREAM",
           "BALANCE", "CAP", "RATIO", "FLOOR/s", "DEPOSITS", "GRANTED",
           "DENIED", "AMBIG", "NOT_SENT/SENT_NO_RESP/RESP/PARTIAL");
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = r->upstreams[i];
        const Retryd__Counters *c = u->counters;
        const uint64_t *e = c->evidence;
        size_t ne = c->n_evidence;
        printf("%-24s %10.2f %8.1f %6.3f %8.2f %10" PRIu64 " %9" PRIu64
               " %8" PRIu64 " %6" PRIu64 "   %" PRIu64 "/%" PRIu64 "/%" PRIu64
               "/%" PRIu64 "\n",
               u->name, tokens(u->balance_micro), tokens(u->params->cap_micro),
               tokens(u->params->ratio_micro),
               tokens(u->params->floor_micro_per_s), c->deposits,
               c->retries_granted, denied_total(c), c->ambiguous, at(e, ne, 0),
               at(e, ne, 1), at(e, ne, 2), at(e, ne, 3));
        print_breakdown(c);
    }
    if (r->n_processes == 0)
        return;
    printf("\n%-8s %-6s %-6s %10s %9s %8s %6s  %s\n", "PID", "UID", "SLOT",
           "DEPOSITS", "GRANTED", "DENIED", "AMBIG", "PROGRAM");
    for (size_t i = 0; i < r->n_processes; i++) {
        const Retryd__ProcessStats *p = r->processes[i];
        printf("%-8u %-6u %-6u %10" PRIu64 " %9" PRIu64 " %8" PRIu64
               " %6" PRIu64 "  %s\n",
               p->pid, p->uid, p->slot, p->counters->deposits,
               p->counters->retries_granted, denied_total(p->counters),
               p->counters->ambiguous, p->program[0] ? p->program : "?");
        print_breakdown(p->counters);
    }
}

/* --- JSON ---------------------------------------------------------------- */

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void json_counters(const Retryd__Counters *c)
{
    printf("\"deposits\":%" PRIu64 ",\"retries_granted\":%" PRIu64
           ",\"retries_denied\":{",
           c->deposits, c->retries_granted);
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++)
        printf("%s\"%s\":%" PRIu64, i > 1 ? "," : "",
               retryd_denial_name((retryd_denial)i),
               at(c->denied, c->n_denied, i));
    printf("},\"ambiguous\":%" PRIu64 ",\"evidence\":{", c->ambiguous);
    for (size_t i = 0; i < RETRYD_EVIDENCE_COUNT; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "",
               retryd_evidence_name((retryd_evidence)i),
               at(c->evidence, c->n_evidence, i));
    printf("},\"refilled_tokens\":%.6f,\"discarded_tokens\":%.6f",
           tokens(c->refilled_micro), tokens(c->discarded_micro));
}

/* The daemon object's last member, and the upstreams array's start. */
static void print_json_health(const Retryd__StatsReply *r)
{
    health_item it[HEALTH_KINDS];
    health_items(r, it);
    printf("\"segment_health\":{\"checks\":%" PRIu64, health_checks(r));
    for (int i = 0; i < HEALTH_KINDS; i++)
        printf(",\"%s\":%" PRIu64, it[i].name, it[i].n);
    printf(",\"last_damage_unix_ms\":%" PRIu64 "}},\"upstreams\":[",
           r->segment_health ? r->segment_health->last_damage_unix_ms : 0);
}

static void print_json(const Retryd__StatsReply *r)
{
    printf("{\"daemon\":{\"version\":");
    json_string(r->daemon_version);
    printf(",\"generation\":\"%016" PRIx64 "\",\"uptime_seconds\":%.3f,"
           "\"attached_processes\":%u,\"draining\":%s,\"upstream_capacity\":"
           "%u,\"process_capacity\":%u,",
           r->generation, (double)r->uptime_ms / 1000, r->attached_processes,
           r->draining ? "true" : "false", r->upstream_capacity,
           r->process_capacity);
    print_json_health(r);
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = r->upstreams[i];
        printf("%s{\"name\":", i ? "," : "");
        json_string(u->name);
        printf(",\"slot\":%u,\"slot_generation\":%u,\"balance\":%.6f,"
               "\"cap\":%.6f,\"ratio\":%.6f,\"min_retries_per_sec\":%.6f,",
               u->slot, u->slot_generation, tokens(u->balance_micro),
               tokens(u->params->cap_micro), tokens(u->params->ratio_micro),
               tokens(u->params->floor_micro_per_s));
        json_counters(u->counters);
        printf("}");
    }
    printf("],\"processes\":[");
    for (size_t i = 0; i < r->n_processes; i++) {
        const Retryd__ProcessStats *p = r->processes[i];
        printf("%s{\"pid\":%u,\"uid\":%u,\"slot\":%u,\"start_time\":%" PRIu64
               ",",
               i ? "," : "", p->pid, p->uid, p->slot, p->start_time);
        printf("\"program\":");
        json_string(p->program);
        printf(",");
        json_counters(p->counters);
        printf("}");
    }
    printf("]}\n");
}

/* --- subcommands --------------------------------------------------------- */

/* --per-process=MODE or --per-process MODE at argv[*i]: 1 taken, 0 not
 * this option, -1 a bad mode. */
static int per_process_arg(int argc, char **argv, int *i, int *mode)
{
    const char *opt = "--per-process", *v;
    size_t n = strlen(opt);
    if (strncmp(argv[*i], opt, n) != 0)
        return 0;
    if (argv[*i][n] == '=')
        v = argv[*i] + n + 1;
    else if (argv[*i][n] == '\0' && *i + 1 < argc)
        v = argv[++*i];
    else
        return argv[*i][n] == '\0' ? -1 : 0;
    *mode = prom_per_process_parse(v);
    return *mode < 0 ? -1 : 1;
}

int ctl_stats_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__StatsReply *r;
    enum { TABLE, JSON, PROMETHEUS } fmt = TABLE;
    bool processes = false;
    int per = PROM_PER_PROGRAM, got = 0;

    ctl_sockets_from_args(&argc, argv, &s);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            fmt = JSON;
        else if (strcmp(argv[i], "--prometheus") == 0)
            fmt = PROMETHEUS;
        else if (strcmp(argv[i], "--processes") == 0)
            processes = true;
        else if ((got = per_process_arg(argc, argv, &i, &per)) <= 0) {
            fprintf(stderr,
                    "%susage: retrydctl stats [--json | --prometheus "
                    "[--per-process=program|pid|none]] "
                    "[--processes] [--stats-socket PATH]\n",
                    got < 0 ? "retrydctl stats: --per-process takes program, "
                              "pid or none\n"
                            : "");
            return CTL_EXIT_USAGE;
        }
    }
    bool want =
        processes || fmt == JSON || (fmt == PROMETHEUS && per != PROM_PER_NONE);
    if (ctl_fetch_stats(&s, want, &r) < 0)
        return CTL_EXIT_ERROR;
    if (fmt == JSON)
        print_json(r);
    else if (fmt == PROMETHEUS)
        prom_render(stdout, r, (prom_per_process)per);
    else
        print_table(r);
    retryd__stats_reply__free_unpacked(r, NULL);
    return CTL_EXIT_OK;
}

int ctl_upstreams_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__StatsReply *r;

    ctl_sockets_from_args(&argc, argv, &s);
    if (argc != 1) {
        fprintf(stderr, "usage: retrydctl upstreams [--stats-socket PATH]\n");
        return CTL_EXIT_USAGE;
    }
    if (ctl_fetch_stats(&s, false, &r) < 0)
        return CTL_EXIT_ERROR;
    printf("%-24s %5s %5s %8s %8s %8s %10s\n", "UPSTREAM", "SLOT", "GEN",
           "RATIO", "FLOOR/s", "CAP", "BALANCE");
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = r->upstreams[i];
        printf("%-24s %5u %5u %8.3f %8.2f %8.1f %10.2f\n", u->name, u->slot,
               u->slot_generation, tokens(u->params->ratio_micro),
               tokens(u->params->floor_micro_per_s),
               tokens(u->params->cap_micro), tokens(u->balance_micro));
    }
    retryd__stats_reply__free_unpacked(r, NULL);
    return CTL_EXIT_OK;
}

int ctl_drain_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__Drain dr;
    retryd__drain__init(&dr);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);

    ctl_sockets_from_args(&argc, argv, &s);
    if (argc != 2 || (strcmp(argv[1], "on") && strcmp(argv[1], "off"))) {
        fprintf(stderr, "usage: retrydctl drain on|off [--control-socket "
                        "PATH]\n");
        return CTL_EXIT_USAGE;
    }
    dr.on = strcmp(argv[1], "on") == 0;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_DRAIN;
    req.drain = &dr;
    if (ctl_control(&s, &req) < 0)
        return CTL_EXIT_ERROR;
    printf("host-wide draining %s\n", dr.on ? "on" : "off");
    return CTL_EXIT_OK;
}

int ctl_retire_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__Retire rt;
    retryd__retire__init(&rt);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);

    ctl_sockets_from_args(&argc, argv, &s);
    if (argc != 2) {
        fprintf(stderr, "usage: retrydctl retire NAME [--control-socket "
                        "PATH]\n");
        return CTL_EXIT_USAGE;
    }
    rt.name = argv[1];
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_RETIRE;
    req.retire = &rt;
    if (ctl_control(&s, &req) < 0)
        return CTL_EXIT_ERROR;
    printf("retired %s\n", argv[1]);
    return CTL_EXIT_OK;
}
