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
#include "ctl_fleet.h"
#include "ctl_opts.h"
#include "prom.h"
#include "reply.h"
#include "retryd/decision.h"

/* --- text ---------------------------------------------------------------- */

static void print_breakdown(const Retryd__Counters *c)
{
    bool any = false;
    for (size_t i = 1; i < RETRYD_DENIAL_COUNT; i++) {
        uint64_t n = reply_at(c->denied, c->n_denied, i);
        if (n == 0)
            continue;
        printf("%s%s=%" PRIu64, any ? " " : "      denied: ",
               retryd_denial_name((retryd_denial)i), n);
        any = true;
    }
    if (any)
        printf("\n");
}

/* An upstream's health line (docs/health.md): the throttle, with its
 * window when it is on, the pushback with the hold left, and the attempts
 * each kept back. */
static void print_upstream_health(const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamHealth *h = reply_upstream_health(u);
    const Retryd__Counters *c = u->counters;
    printf("      health: throttle ");
    if (h->adaptive_throttle)
        printf("on %s p=%.3f R=%" PRIu64 " A=%" PRIu64 " rejecting=%" PRIu64,
               h->engaged ? "ENGAGED" : "idle", h->probability, h->requests,
               h->accepts, h->rejecting_processes);
    else
        printf("off");
    printf("  pushback %s", h->pushback ? "on" : "off");
    if (h->pushback_remaining_ms > 0)
        printf(" HOLDING %.1fs", (double)h->pushback_remaining_ms / 1000);
    printf("  throttled %" PRIu64 " held %" PRIu64 "\n", c->throttled, c->held);
}

/* An upstream's hedging line (docs/hedging.md): its hedge bucket, the
 * latency picture, the hedges sent and won, and those refused by reason
 * when there are any. */
static void print_upstream_hedge(const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamHedge *h = reply_upstream_hedge(u);
    printf("      hedge: max_extra_load %.3f balance %.2f/%.0f picture %s",
           reply_tokens(h->max_extra_load_micro),
           reply_tokens(h->balance_micro), reply_tokens(h->cap_micro),
           reply_hedge_picture(h));
    if (h->delay_us > 0)
        printf(" %.1fms", (double)h->delay_us / 1000);
    printf("  sent %" PRIu64 " won %" PRIu64 " refused %" PRIu64, h->sent,
           h->won, reply_hedges_refused(h));
    if (reply_hedges_refused(h) > 0)
        printf(" (hedge_budget %" PRIu64 " retry_budget %" PRIu64
               " throttled %" PRIu64 " pushback %" PRIu64 " deadline %" PRIu64
               " draining %" PRIu64 ")",
               h->refused_hedge_budget, h->refused_retry_budget,
               h->refused_throttled, h->refused_pushback, h->refused_deadline,
               h->refused_draining);
    printf("\n");
}

/* An upstream's fair shares (docs/budget.md#fair-shares) and who drained
 * it (the program granted most of its retries in the daemon's window). */
static void print_upstream_shares(const Retryd__UpstreamStats *u)
{
    const Retryd__DrainedBy *db = u->drained_by;
    printf("      shares: %s claimed %.2f borrowed %" PRIu64
           " over_share %" PRIu64 "  drained by ",
           u->shares_kept ? "KEPT" : "idle", reply_tokens(u->claimed_micro),
           u->counters->borrowed,
           reply_at(u->counters->denied, u->counters->n_denied,
                    RETRYD_DENIAL_OVER_SHARE));
    if (db == NULL || db->window_grants == 0)
        printf("nobody (no retry in the window)\n");
    else
        printf("%s %.0f%% (%" PRIu64 " of %" PRIu64 " retries in %.0fs)\n",
               db->program[0] ? db->program : "?",
               100.0 * (double)db->grants / (double)db->window_grants,
               db->grants, db->window_grants, (double)db->window_ms / 1000);
}

/* Per program: the live processes' counters and those of its exited
 * ones, since the daemon started. */
static void print_programs(const Retryd__StatsReply *r)
{
    if (r->n_programs == 0)
        return;
    printf("\n%-16s %6s %7s %10s %9s %9s %8s %10s\n", "PROGRAM", "PROCS",
           "EXITED", "DEPOSITS", "GRANTED", "BORROWED", "DENIED", "OVER_SHARE");
    for (size_t i = 0; i < r->n_programs; i++) {
        const Retryd__ProgramStats *p = r->programs[i];
        const Retryd__Counters *c = p->counters;
        printf("%-16s %6u %7" PRIu64 " %10" PRIu64 " %9" PRIu64 " %9" PRIu64
               " %8" PRIu64 " %10" PRIu64 "\n",
               p->program[0] ? p->program : "?", p->processes, p->exited,
               c->deposits, c->retries_granted, c->borrowed,
               reply_denied_total(c),
               reply_at(c->denied, c->n_denied, RETRYD_DENIAL_OVER_SHARE));
        print_breakdown(c);
    }
}

/* --- segment health ------------------------------------------------------ */

static void print_health_line(const Retryd__StatsReply *r)
{
    reply_health_item it[REPLY_HEALTH_KINDS];
    bool any = false;
    reply_health_items(r, it);
    printf("segment checks %" PRIu64 ":", reply_health_checks(r));
    for (int i = 0; i < REPLY_HEALTH_KINDS; i++) {
        if (it[i].n == 0)
            continue;
        printf(" %s=%" PRIu64, it[i].name, it[i].n);
        any = true;
    }
    printf("%s\n", any ? "  (damage found and handled: see the log)"
                       : " no damage found");
    if (r->segment_health != NULL && r->segment_health->last_finding != NULL &&
        r->segment_health->last_finding[0] != '\0')
        printf("ledger audit, last finding: %s\n",
               r->segment_health->last_finding);
    printf("\n");
}

static void print_table(const Retryd__StatsReply *r)
{
    printf("retryd %s  generation %016" PRIx64 "  uptime %.1fs  attached "
           "processes %u  draining %s\n\n",
           r->daemon_version, r->generation, (double)r->uptime_ms / 1000,
           r->attached_processes, r->draining ? "yes" : "no");
    if (r->slots_refused_capacity || r->slots_refused_quota)
        printf("process slots refused: %" PRIu64 " all taken (process_capacity)"
               ", %" PRIu64 " user at quota (process_slots_per_uid); those "
               "processes spend from local budgets\n\n",
               r->slots_refused_capacity, r->slots_refused_quota);
    print_health_line(r);
    char line[1024];
    ctl_fleet_summary(r, line, sizeof(line));
    if (line[0] != '\0')
        printf("%s\n\n", line);
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
               u->name, reply_tokens(u->balance_micro),
               reply_tokens(u->params->cap_micro),
               reply_tokens(u->params->ratio_micro),
               reply_tokens(u->params->floor_micro_per_s), c->deposits,
               c->retries_granted, reply_denied_total(c), c->ambiguous,
               reply_at(e, ne, 0), reply_at(e, ne, 1), reply_at(e, ne, 2),
               reply_at(e, ne, 3));
        print_breakdown(c);
        print_upstream_health(u);
        print_upstream_hedge(u);
        print_upstream_shares(u);
        ctl_fleet_upstream_line(u, line, sizeof(line));
        if (line[0] != '\0')
            printf("      %s\n", line);
    }
    print_programs(r);
    if (r->n_processes == 0)
        return;
    printf("\n%-8s %-6s %-6s %10s %9s %8s %6s %9s %6s  %s\n", "PID", "UID",
           "SLOT", "DEPOSITS", "GRANTED", "DENIED", "AMBIG", "THROTTLED",
           "HELD", "PROGRAM");
    for (size_t i = 0; i < r->n_processes; i++) {
        const Retryd__ProcessStats *p = r->processes[i];
        printf("%-8u %-6u %-6u %10" PRIu64 " %9" PRIu64 " %8" PRIu64
               " %6" PRIu64 " %9" PRIu64 " %6" PRIu64 "  %s\n",
               p->pid, p->uid, p->slot, p->counters->deposits,
               p->counters->retries_granted, reply_denied_total(p->counters),
               p->counters->ambiguous, p->counters->throttled,
               p->counters->held, p->program[0] ? p->program : "?");
        print_breakdown(p->counters);
    }
}

/* --- JSON ---------------------------------------------------------------- */

void ctl_json_string(const char *s)
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
               reply_at(c->denied, c->n_denied, i));
    printf("},\"ambiguous\":%" PRIu64 ",\"evidence\":{", c->ambiguous);
    for (size_t i = 0; i < RETRYD_EVIDENCE_COUNT; i++)
        printf("%s\"%s\":%" PRIu64, i ? "," : "",
               retryd_evidence_name((retryd_evidence)i),
               reply_at(c->evidence, c->n_evidence, i));
    printf("},\"refilled_tokens\":%.6f,\"discarded_tokens\":%.6f,"
           "\"throttled\":%" PRIu64 ",\"held\":%" PRIu64
           ",\"borrowed\":%" PRIu64,
           reply_tokens(c->refilled_micro), reply_tokens(c->discarded_micro),
           c->throttled, c->held, c->borrowed);
}

static const char *json_bool(bool b)
{
    return b ? "true" : "false";
}

/* An upstream's "health" member (docs/health.md), after its counters. */
static void json_upstream_health(const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamHealth *h = reply_upstream_health(u);
    printf(",\"health\":{\"adaptive_throttle\":%s,\"throttle_k\":%.6f,"
           "\"throttle_window_seconds\":%.3f,\"throttle_min_processes\":%u,"
           "\"pushback\":%s,\"pushback_first_attempts\":%s,"
           "\"pushback_max_seconds\":%.3f,\"engaged\":%s,"
           "\"probability\":%.6f,\"requests\":%" PRIu64 ",\"accepts\":%" PRIu64
           ",\"rejecting_processes\":%" PRIu64 ",\"pushback_seconds\":%.3f}",
           json_bool(h->adaptive_throttle), (double)h->throttle_k_micro / 1e6,
           (double)h->throttle_window_ms / 1000, h->throttle_min_processes,
           json_bool(h->pushback), json_bool(h->pushback_first_attempts),
           (double)h->pushback_max_ms / 1000, json_bool(h->engaged),
           h->probability, h->requests, h->accepts, h->rejecting_processes,
           (double)h->pushback_remaining_ms / 1000);
}

/* An upstream's "hedge" member (docs/hedging.md): every key its own, so
 * that a reader looking for one finds it alone. */
static void json_upstream_hedge(const Retryd__UpstreamStats *u)
{
    const Retryd__UpstreamHedge *h = reply_upstream_hedge(u);
    printf(",\"hedge\":{\"max_extra_load\":%.6f,\"min_hedges_per_sec\":%.6f,"
           "\"hedge_cap\":%.6f,\"hedge_min_delay_seconds\":%.6f,"
           "\"hedge_window_seconds\":%.3f,\"hedge_balance\":%.6f,"
           "\"picture\":\"%s\",\"hedge_delay_seconds\":%.6f,"
           "\"pending_samples\":%" PRIu64 ",\"picture_refreshes\":%" PRIu64,
           reply_tokens(h->max_extra_load_micro),
           reply_tokens(h->min_hedges_per_sec_micro),
           reply_tokens(h->cap_micro), (double)h->min_delay_us / 1e6,
           (double)h->window_ms / 1000, reply_tokens(h->balance_micro),
           reply_hedge_picture(h), (double)h->delay_us / 1e6,
           h->pending_samples, h->refreshes);
    printf(",\"hedges_sent\":%" PRIu64 ",\"hedges_won\":%" PRIu64
           ",\"refused_hedge_budget\":%" PRIu64
           ",\"refused_retry_budget\":%" PRIu64
           ",\"refused_throttled\":%" PRIu64 ",\"refused_pushback\":%" PRIu64
           ",\"refused_deadline\":%" PRIu64 ",\"refused_draining\":%" PRIu64
           ",\"hedge_deposits\":%" PRIu64
           ",\"hedge_refilled\":%.6f,\"hedge_discarded\":%.6f}",
           h->sent, h->won, h->refused_hedge_budget, h->refused_retry_budget,
           h->refused_throttled, h->refused_pushback, h->refused_deadline,
           h->refused_draining, h->deposits, reply_tokens(h->refilled_micro),
           reply_tokens(h->discarded_micro));
}

/* An upstream's fair-share members: its claims, whether shares are kept,
 * and who drained it ("drained_by": null when nobody did). */
static void json_upstream_shares(const Retryd__UpstreamStats *u)
{
    const Retryd__DrainedBy *db = u->drained_by;
    printf(",\"claimed_tokens\":%.6f,\"shares_kept\":%s,\"drained_by\":",
           reply_tokens(u->claimed_micro), json_bool(u->shares_kept));
    if (db == NULL || db->window_grants == 0) {
        printf("null");
        return;
    }
    printf("{\"program\":");
    ctl_json_string(db->program);
    printf(",\"grants\":%" PRIu64 ",\"window_grants\":%" PRIu64
           ",\"share\":%.6f,\"window_seconds\":%.3f}",
           db->grants, db->window_grants,
           (double)db->grants / (double)db->window_grants,
           (double)db->window_ms / 1000);
}

static void json_programs(const Retryd__StatsReply *r)
{
    printf("],\"programs\":[");
    for (size_t i = 0; i < r->n_programs; i++) {
        const Retryd__ProgramStats *p = r->programs[i];
        printf("%s{\"program\":", i ? "," : "");
        ctl_json_string(p->program);
        printf(",\"processes\":%u,\"exited\":%" PRIu64 ",", p->processes,
               p->exited);
        json_counters(p->counters);
        printf("}");
    }
}

/* The daemon object's last member, and the upstreams array's start. */
static void print_json_health(const Retryd__StatsReply *r)
{
    reply_health_item it[REPLY_HEALTH_KINDS];
    reply_health_items(r, it);
    printf("\"segment_health\":{\"checks\":%" PRIu64, reply_health_checks(r));
    const Retryd__SegmentHealth *h = r->segment_health;
    for (int i = 0; i < REPLY_HEALTH_KINDS; i++)
        printf(",\"%s\":%" PRIu64, it[i].name, it[i].n);
    printf(",\"unexplained_removed_micro\":%" PRIu64
           ",\"unexplained_spent_micro\":%" PRIu64 ",\"last_finding\":",
           h ? h->unexplained_removed_micro : 0,
           h ? h->unexplained_spent_micro : 0);
    ctl_json_string(h && h->last_finding ? h->last_finding : "");
    printf(",\"last_damage_unix_ms\":%" PRIu64 "},",
           h ? h->last_damage_unix_ms : 0);
    ctl_fleet_json(r);
    printf("},\"upstreams\":[");
}

static void print_json(const Retryd__StatsReply *r)
{
    printf("{\"daemon\":{\"version\":");
    ctl_json_string(r->daemon_version);
    printf(",\"generation\":\"%016" PRIx64 "\",\"uptime_seconds\":%.3f,"
           "\"attached_processes\":%u,\"draining\":%s,\"upstream_capacity\":"
           "%u,\"process_capacity\":%u,\"slots_refused\":{\"capacity\":%" PRIu64
           ",\"quota\":%" PRIu64 "},\"upstreams_refused\":{\"quota\":%" PRIu64
           "},",
           r->generation, (double)r->uptime_ms / 1000, r->attached_processes,
           r->draining ? "true" : "false", r->upstream_capacity,
           r->process_capacity, r->slots_refused_capacity,
           r->slots_refused_quota, r->upstreams_refused_quota);
    print_json_health(r);
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = r->upstreams[i];
        printf("%s{\"name\":", i ? "," : "");
        ctl_json_string(u->name);
        printf(",\"slot\":%u,\"slot_generation\":%u,\"balance\":%.6f,"
               "\"cap\":%.6f,\"ratio\":%.6f,\"min_retries_per_sec\":%.6f,",
               u->slot, u->slot_generation, reply_tokens(u->balance_micro),
               reply_tokens(u->params->cap_micro),
               reply_tokens(u->params->ratio_micro),
               reply_tokens(u->params->floor_micro_per_s));
        json_counters(u->counters);
        json_upstream_health(u);
        json_upstream_hedge(u);
        json_upstream_shares(u);
        ctl_fleet_json_upstream(u);
        printf("}");
    }
    json_programs(r);
    printf("],\"processes\":[");
    for (size_t i = 0; i < r->n_processes; i++) {
        const Retryd__ProcessStats *p = r->processes[i];
        printf("%s{\"pid\":%u,\"uid\":%u,\"slot\":%u,\"start_time\":%" PRIu64
               ",",
               i ? "," : "", p->pid, p->uid, p->slot, p->start_time);
        printf("\"program\":");
        ctl_json_string(p->program);
        printf(",");
        json_counters(p->counters);
        printf("}");
    }
    printf("]}\n");
}

/* --- subcommands --------------------------------------------------------- */

static const struct option stats_options[] = {
    CTL_COMMON_OPTIONS,
    {"json", no_argument, NULL, 'j'},
    {"prometheus", no_argument, NULL, 'P'},
    {"processes", no_argument, NULL, 'p'},
    {"per-process", required_argument, NULL, 'E'},
    {NULL, 0, NULL, 0},
};

static const ctl_cmd stats_cmd = {
    "stats",
    "usage: retrydctl stats [--json | --prometheus [--per-process=MODE]]\n"
    "                       [--processes] [options]\n"
    "Budgets and counters per upstream, from the stats socket (which cannot\n"
    "change anything).\n\n"
    "  -j, --json             one JSON object (processes included)\n"
    "  -P, --prometheus       Prometheus text exposition\n"
    "      --per-process=MODE the Prometheus per-process series: program\n"
    "                         (default: summed per program name), pid or "
    "none\n"
    "  -p, --processes        the attached processes too\n" CTL_COMMON_HELP,
    "hjPp",
    stats_options,
};

int ctl_stats_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__StatsReply *r;
    enum { TABLE, JSON, PROMETHEUS } fmt = TABLE;
    bool processes = false;
    int opt, code, per = PROM_PER_PROGRAM;
    bool per_given = false;

    ctl_sockets_init(&s);
    optind = 0;
    while ((opt = ctl_getopt(&stats_cmd, argc, argv, &s, &code)) >= 0) {
        if (opt == 'j')
            fmt = JSON;
        else if (opt == 'P')
            fmt = PROMETHEUS;
        else if (opt == 'E') {
            per = prom_per_process_parse(optarg);
            per_given = true;
            if (per < 0)
                return ctl_usage_error(&stats_cmd,
                                       "--per-process takes program, pid "
                                       "or none, not '%s'",
                                       optarg);
        } else
            processes = true;
    }
    if (opt == CTL_GETOPT_EXIT)
        return code;
    if (optind < argc)
        return ctl_usage_error(&stats_cmd, "unexpected argument '%s'",
                               argv[optind]);
    if (per_given && fmt != PROMETHEUS)
        return ctl_usage_error(&stats_cmd, "--per-process applies to "
                                           "--prometheus only");
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

static const ctl_cmd upstreams_cmd = {
    "upstreams",
    "usage: retrydctl upstreams [options]\n"
    "The registered upstreams: slot, generation, parameters and "
    "balance.\n\n" CTL_COMMON_HELP,
    "h",
    ctl_common_options,
};

int ctl_upstreams_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__StatsReply *r;
    int code = ctl_parse_common(&upstreams_cmd, argc, argv, &s, false);

    if (code >= 0)
        return code;
    if (ctl_fetch_stats(&s, false, &r) < 0)
        return CTL_EXIT_ERROR;
    printf("%-24s %5s %5s %8s %8s %8s %10s\n", "UPSTREAM", "SLOT", "GEN",
           "RATIO", "FLOOR/s", "CAP", "BALANCE");
    for (size_t i = 0; i < r->n_upstreams; i++) {
        const Retryd__UpstreamStats *u = r->upstreams[i];
        printf("%-24s %5u %5u %8.3f %8.2f %8.1f %10.2f\n", u->name, u->slot,
               u->slot_generation, reply_tokens(u->params->ratio_micro),
               reply_tokens(u->params->floor_micro_per_s),
               reply_tokens(u->params->cap_micro),
               reply_tokens(u->balance_micro));
    }
    retryd__stats_reply__free_unpacked(r, NULL);
    return CTL_EXIT_OK;
}

static const ctl_cmd drain_cmd = {
    "drain",
    "usage: retrydctl drain on|off [options]\n"
    "Host-wide draining: while on, every process's decisions deny retries.\n"
    "Needs the control socket (the daemon's group or allow "
    "lists).\n\n" CTL_COMMON_HELP,
    "h",
    ctl_common_options,
};

int ctl_drain_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__Drain dr;
    retryd__drain__init(&dr);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);
    int code = ctl_parse_common(&drain_cmd, argc, argv, &s, true);

    if (code >= 0)
        return code;
    if (argc - optind != 1 ||
        (strcmp(argv[optind], "on") && strcmp(argv[optind], "off")))
        return ctl_usage_error(&drain_cmd, "say 'on' or 'off'");
    dr.on = strcmp(argv[optind], "on") == 0;
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_DRAIN;
    req.drain = &dr;
    if (ctl_control(&s, &req) < 0)
        return CTL_EXIT_ERROR;
    printf("host-wide draining %s\n", dr.on ? "on" : "off");
    return CTL_EXIT_OK;
}

static const ctl_cmd retire_cmd = {
    "retire",
    "usage: retrydctl retire [options] [--] NAME\n"
    "Retire upstream NAME's slot: its bucket and counters go, and the next\n"
    "process to open NAME registers it afresh. A NAME that starts with '-'\n"
    "follows '--'.\n\n" CTL_COMMON_HELP,
    "h",
    ctl_common_options,
};

int ctl_retire_main(int argc, char **argv)
{
    ctl_sockets s;
    Retryd__Retire rt;
    retryd__retire__init(&rt);
    Retryd__ControlRequest req;
    retryd__control_request__init(&req);
    int code = ctl_parse_common(&retire_cmd, argc, argv, &s, true);

    if (code >= 0)
        return code;
    if (argc - optind != 1)
        return ctl_usage_error(&retire_cmd, "name one upstream");
    rt.name = argv[optind];
    req.body_case = RETRYD__CONTROL_REQUEST__BODY_RETIRE;
    req.retire = &rt;
    if (ctl_control(&s, &req) < 0)
        return CTL_EXIT_ERROR;
    printf("retired %s\n", rt.name);
    return CTL_EXIT_OK;
}
