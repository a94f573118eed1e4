/* SPDX-License-Identifier: MIT */
/*
 * retrydctl decide: run the decision engine on facts given as options and
 * print the decision with the rule that made it. It is the engine's window
 * for operators and for shell scripts that drive their own HTTP clients.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ctl_opts.h"
#include "retryd/retryd.h"

typedef struct cli_budget {
    long tokens; /* < 0: unlimited */
    int taken;
} cli_budget;

static bool cli_peek(void *ctx)
{
    cli_budget *b = ctx;
    return b->tokens != 0;
}

static bool cli_take(void *ctx)
{
    cli_budget *b = ctx;
    if (b->tokens == 0)
        return false;
    if (b->tokens > 0)
        b->tokens--;
    b->taken++;
    return true;
}

/* A seeded splitmix64, so a given --seed reproduces the same jitter. */
static uint64_t cli_random(void *ctx)
{
    uint64_t *x = ctx;
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: retrydctl decide --evidence E [options]\n"
        "\n"
        "facts of the attempt that just finished:\n"
        "  --evidence E         not_sent | sent_no_response | "
        "response_received |\n"
        "                       partial_response (required)\n"
        "  --status N           final HTTP status (needed with a response)\n"
        "  --failure F          none dns connect tls_handshake pool_timeout\n"
        "                       refused_stream goaway timeout connection_lost "
        "io\n"
        "                       tls_certificate malformed "
        "unsupported_protocol\n"
        "                       profile_rejected too_many_redirects "
        "body_source\n"
        "                       aborted (default: none with a response, io "
        "without)\n"
        "  --idempotency I      safe | idempotent | non_idempotent |\n"
        "                       idempotent_by_key (default non_idempotent)\n"
        "  --replayability R    replayable | reopenable | one_shot (default "
        "replayable)\n"
        "  --attempt N          1-based attempt number (default 1)\n"
        "  --max-attempts N     attempts allowed (default 3)\n"
        "  --retry-after V      the Retry-After header value, seconds or "
        "HTTP-date\n"
        "  --remaining D        time left before the deadline (default 30s)\n"
        "  --min-attempt D      minimum attempt budget (default 100ms)\n"
        "  --prev-delay D       previous backoff wait (default 0)\n"
        "  --delivered          a response byte already reached the caller\n"
        "  --draining           the runtime is draining\n"
        "  --refresh-used       the one credential refresh is spent\n"
        "  --transient-500      the upstream registered 500 as transient\n"
        "policy:\n"
        "  --budget N           retry tokens available (default unlimited)\n"
        "  --jitter K           full | decorrelated (default full)\n"
        "  --base D             backoff base (default 100ms)\n"
        "  --max-backoff D      backoff ceiling (default 10s)\n"
        "  --max-retry-after D  largest Retry-After honoured (default 60s)\n"
        "  --seed N             seed the jitter, for reproducible output\n"
        "output:\n"
        "  --json               one JSON object instead of text\n"
        "  -h, --help           this help; --version: the version\n"
        "durations: 250ms, 5s, 1.5s, 2m, 100us\n");
}

enum {
    OPT_EVIDENCE = 256,
    OPT_STATUS,
    OPT_FAILURE,
    OPT_IDEMPOTENCY,
    OPT_REPLAYABILITY,
    OPT_ATTEMPT,
    OPT_MAX_ATTEMPTS,
    OPT_RETRY_AFTER,
    OPT_REMAINING,
    OPT_MIN_ATTEMPT,
    OPT_PREV_DELAY,
    OPT_DELIVERED,
    OPT_DRAINING,
    OPT_REFRESH_USED,
    OPT_TRANSIENT_500,
    OPT_BUDGET,
    OPT_JITTER,
    OPT_BASE,
    OPT_MAX_BACKOFF,
    OPT_MAX_RETRY_AFTER,
    OPT_SEED,
    OPT_JSON,
    OPT_HELP,
    OPT_VERSION,
};

static const struct option options[] = {
    {"evidence", required_argument, NULL, OPT_EVIDENCE},
    {"status", required_argument, NULL, OPT_STATUS},
    {"failure", required_argument, NULL, OPT_FAILURE},
    {"idempotency", required_argument, NULL, OPT_IDEMPOTENCY},
    {"replayability", required_argument, NULL, OPT_REPLAYABILITY},
    {"attempt", required_argument, NULL, OPT_ATTEMPT},
    {"max-attempts", required_argument, NULL, OPT_MAX_ATTEMPTS},
    {"retry-after", required_argument, NULL, OPT_RETRY_AFTER},
    {"remaining", required_argument, NULL, OPT_REMAINING},
    {"min-attempt", required_argument, NULL, OPT_MIN_ATTEMPT},
    {"prev-delay", required_argument, NULL, OPT_PREV_DELAY},
    {"delivered", no_argument, NULL, OPT_DELIVERED},
    {"draining", no_argument, NULL, OPT_DRAINING},
    {"refresh-used", no_argument, NULL, OPT_REFRESH_USED},
    {"transient-500", no_argument, NULL, OPT_TRANSIENT_500},
    {"budget", required_argument, NULL, OPT_BUDGET},
    {"jitter", required_argument, NULL, OPT_JITTER},
    {"base", required_argument, NULL, OPT_BASE},
    {"max-backoff", required_argument, NULL, OPT_MAX_BACKOFF},
    {"max-retry-after", required_argument, NULL, OPT_MAX_RETRY_AFTER},
    {"seed", required_argument, NULL, OPT_SEED},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};
/* options[opt - OPT_EVIDENCE] is the option opt: one entry per OPT_, in the
 * enum's order, and the terminator. */
_Static_assert(sizeof(options) / sizeof(options[0]) ==
                   OPT_VERSION - OPT_EVIDENCE + 2,
               "one options[] entry per OPT_ value");

static int bad(const char *opt, const char *value)
{
    fprintf(stderr, "retrydctl decide: invalid value '%s' for --%s\n", value,
            opt);
    return CTL_EXIT_USAGE;
}

typedef struct decide_args {
    retryd_facts facts;
    retryd_backoff_policy policy;
    const char *retry_after;
    bool failure_given;
    bool seeded;
    uint64_t seed;
    long budget;
    bool json;
} decide_args;

/* The switch a flag option turns on, or NULL for an option with a value. */
static bool *flag_option(decide_args *a, int opt)
{
    switch (opt) {
    case OPT_DELIVERED:
        return &a->facts.response_delivered;
    case OPT_DRAINING:
        return &a->facts.draining;
    case OPT_REFRESH_USED:
        return &a->facts.refresh_used;
    case OPT_TRANSIENT_500:
        return &a->facts.transient_500;
    case OPT_JSON:
        return &a->json;
    default:
        return NULL;
    }
}

/* The duration a duration option sets, or NULL for any other option. */
static int64_t *duration_option(decide_args *a, int opt)
{
    switch (opt) {
    case OPT_REMAINING:
        return &a->facts.remaining_ns;
    case OPT_MIN_ATTEMPT:
        return &a->facts.min_attempt_ns;
    case OPT_PREV_DELAY:
        return &a->facts.prev_delay_ns;
    case OPT_BASE:
        return &a->policy.base_ns;
    case OPT_MAX_BACKOFF:
        return &a->policy.max_ns;
    case OPT_MAX_RETRY_AFTER:
        return &a->policy.max_retry_after_ns;
    default:
        return NULL;
    }
}

static int jitter_from_name(const char *name, retryd_jitter *ret)
{
    if (strcmp(name, "full") == 0)
        *ret = RETRYD_JITTER_FULL;
    else if (strcmp(name, "decorrelated") == 0)
        *ret = RETRYD_JITTER_DECORRELATED;
    else
        return -1;
    return 0;
}

/* The options that take a name, a number or a Retry-After value; returns 0,
 * or < 0 for a value that is not valid. */
static int apply_value(decide_args *a, int opt, const char *arg)
{
    retryd_facts *f = &a->facts;
    long v;

    switch (opt) {
    case OPT_EVIDENCE:
        return retryd_evidence_from_name(arg, &f->evidence);
    case OPT_IDEMPOTENCY:
        return retryd_idempotency_from_name(arg, &f->idempotency);
    case OPT_REPLAYABILITY:
        return retryd_replayability_from_name(arg, &f->replayability);
    case OPT_FAILURE:
        a->failure_given = true;
        return retryd_failure_from_name(arg, &f->failure);
    case OPT_JITTER:
        return jitter_from_name(arg, &a->policy.jitter);
    case OPT_STATUS:
        if (!retryd__parse_long(arg, 100, 999, &v))
            return -1;
        f->status = (int)v;
        return 0;
    case OPT_ATTEMPT:
    case OPT_MAX_ATTEMPTS:
        if (!retryd__parse_long(arg, 1, 1000000, &v))
            return -1;
        *(opt == OPT_ATTEMPT ? &f->attempt : &f->max_attempts) = (uint32_t)v;
        return 0;
    case OPT_BUDGET:
        return retryd__parse_long(arg, 0, 1000000000, &a->budget) ? 0 : -1;
    case OPT_SEED:
        a->seeded = true;
        if (!retryd__parse_long(arg, 0, LONG_MAX, &v))
            return -1;
        a->seed = (uint64_t)v;
        return 0;
    case OPT_RETRY_AFTER:
        /* Parsed once every option is in: it needs --max-retry-after. */
        a->retry_after = arg;
        return 0;
    default:
        return -1;
    }
}

/* Applies one option; returns 0 or an exit code. */
static int apply_option(decide_args *a, int opt, const char *arg)
{
    bool *flag = flag_option(a, opt);
    int64_t *duration = duration_option(a, opt);
    int r;

    if (opt < OPT_EVIDENCE || opt > OPT_JSON)
        return CTL_EXIT_USAGE; /* --help and unknown options are the caller's */
    if (flag != NULL) {
        *flag = true;
        return 0;
    }
    if (duration != NULL)
        r = retryd_duration_parse(arg, duration); /* writes only when valid */
    else
        r = apply_value(a, opt, arg);
    return r < 0 ? bad(options[opt - OPT_EVIDENCE].name, arg) : 0;
}

static void format_duration(int64_t ns, char *buf, size_t len)
{
    if (ns >= 1000000000LL)
        snprintf(buf, len, "%.3fs", (double)ns / 1e9);
    else
        snprintf(buf, len, "%.3fms", (double)ns / 1e6);
}

static void print_text(const decide_args *a, const retryd_decision *d,
                       long budget_before)
{
    char delay[32];

    format_duration(d->delay_ns, delay, sizeof(delay));
    printf("verdict:  %s\n", retryd_verdict_name(d->verdict));
    printf("rule:     %s (specification rule %d)\n", retryd_rule_name(d->rule),
           retryd_rule_order(d->rule));
    printf("reason:   %s", retryd_denial_name(d->reason));
    if (d->reason == RETRYD_DENIAL_PERMANENT_FAILURE)
        printf(" (%s)", retryd_failure_name(d->permanent));
    printf("\n");
    if (d->verdict == RETRYD_VERDICT_RETRY) {
        printf("delay:    %s%s\n", delay,
               d->flags & RETRYD_RETRY_HONOURS_RETRY_AFTER ? " (Retry-After)"
                                                           : "");
        if (d->flags & RETRYD_RETRY_REFRESH_CREDENTIALS)
            printf("action:   refresh credentials, then replay\n");
    }
    if (d->verdict == RETRYD_VERDICT_AMBIGUOUS)
        printf("action:   the request may have executed; reconcile before "
               "any replay\n");
    if (budget_before >= 0)
        printf("budget:   %ld -> %ld tokens\n", budget_before, a->budget);
}

static void print_json(const decide_args *a, const retryd_decision *d,
                       long budget_before)
{
    printf("{\"verdict\":\"%s\",\"rule\":\"%s\",\"rule_order\":%d,"
           "\"reason\":\"%s\",\"permanent\":\"%s\",\"delay_ns\":%" PRId64
           ",\"refresh_credentials\":%s,\"honours_retry_after\":%s",
           retryd_verdict_name(d->verdict), retryd_rule_name(d->rule),
           retryd_rule_order(d->rule), retryd_denial_name(d->reason),
           retryd_failure_name(d->permanent), d->delay_ns,
           d->flags & RETRYD_RETRY_REFRESH_CREDENTIALS ? "true" : "false",
           d->flags & RETRYD_RETRY_HONOURS_RETRY_AFTER ? "true" : "false");
    if (budget_before >= 0)
        printf(",\"budget_before\":%ld,\"budget_after\":%ld", budget_before,
               a->budget);
    printf("}\n");
}

/* Parses the command line into @p a and completes the facts it implies;
 * -1 to go on, or the exit code (usage, help). */
static int parse_args(int argc, char **argv, decide_args *a)
{
    int opt, r;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (opt == 'h' || opt == OPT_HELP) {
            usage(stdout);
            return CTL_EXIT_OK;
        }
        if (opt == OPT_VERSION) {
            ctl_print_version(stdout);
            return CTL_EXIT_OK;
        }
        if (opt == '?')
            return CTL_EXIT_USAGE;
        r = apply_option(a, opt, optarg);
        if (r != 0)
            return r;
    }
    if (optind != argc) {
        fprintf(stderr, "retrydctl decide: unexpected argument '%s'\n",
                argv[optind]);
        return CTL_EXIT_USAGE;
    }
    if ((unsigned)a->facts.evidence >= RETRYD_EVIDENCE_COUNT) {
        fprintf(stderr, "retrydctl decide: --evidence is required\n");
        return CTL_EXIT_USAGE;
    }
    bool response = a->facts.evidence == RETRYD_EVIDENCE_RESPONSE_RECEIVED ||
                    a->facts.evidence == RETRYD_EVIDENCE_PARTIAL_RESPONSE;
    if (!a->failure_given && !response)
        a->facts.failure = RETRYD_FAILURE_IO;
    if (a->retry_after != NULL &&
        retryd_retry_after_parse(a->retry_after, strlen(a->retry_after),
                                 (int64_t)time(NULL), INT64_MAX,
                                 &a->facts.retry_after_ns) < 0)
        fprintf(stderr,
                "retrydctl decide: Retry-After '%s' is not valid; "
                "treated as absent\n",
                a->retry_after);
    return -1;
}

int ctl_decide_main(int argc, char **argv)
{
    decide_args a = {
        .facts = {.sz = sizeof(retryd_facts),
                  .attempt = 1,
                  .max_attempts = 3,
                  .evidence = (retryd_evidence)-1,
                  .idempotency = RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
                  .replayability = RETRYD_REPLAYABLE,
                  .retry_after_ns = -1,
                  .remaining_ns = 30LL * 1000000000,
                  .min_attempt_ns = 100LL * 1000000},
        .policy = retryd_backoff_default,
        .budget = -1,
    };
    int r = parse_args(argc, argv, &a);
    if (r >= 0)
        return r;

    cli_budget budget = {.tokens = a.budget};
    const retryd_budget_iface iface = {
        .sz = sizeof(iface), .peek = cli_peek, .take = cli_take};
    retryd_decide_env env = {
        .sz = sizeof(env),
        .backoff = &a.policy,
        .random = a.seeded ? cli_random : NULL,
        .random_ctx = a.seeded ? &a.seed : NULL,
        .budget = a.budget >= 0 ? &iface : NULL,
        .budget_ctx = &budget,
    };
    retryd_decision d = {.sz = sizeof(d)};
    long before = a.budget;

    r = retryd_decide(&a.facts, &env, &d);
    if (r < 0) {
        fprintf(stderr,
                "retrydctl decide: inconsistent facts: %s "
                "(a response needs --status 200..999; no response "
                "needs a --failure other than none and no status)\n",
                retryd_strerror(r));
        return CTL_EXIT_USAGE;
    }
    a.budget = budget.tokens;
    if (a.json)
        print_json(&a, &d, before);
    else
        print_text(&a, &d, before);
    return CTL_EXIT_OK;
}
