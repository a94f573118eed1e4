/* SPDX-License-Identifier: MIT */
/*
 * retrydctl decide: run the decision engine on facts given as options and
 * print the decision with the rule that made it. It is the engine's window
 * for operators and for shell scripts that drive their own HTTP clients.
 * With --admit it asks the other question, the host's health on an
 * attempt about to be sent (retryd_admit, docs/health.md).
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
        "       retrydctl decide --admit [admission options]\n"
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
        "  --pushback D         the host pushback left on the upstream "
        "(default 0)\n"
        "policy:\n"
        "  --budget N           retry tokens available (default unlimited)\n"
        "  --jitter K           full | decorrelated (default full)\n"
        "  --base D             backoff base (default 100ms)\n"
        "  --max-backoff D      backoff ceiling (default 10s)\n"
        "  --max-retry-after D  largest Retry-After honoured (default 60s)\n"
        "  --seed N             seed the jitter, for reproducible output\n"
        "admission (--admit: may an attempt about to be sent go?):\n"
        "  --first-attempt      it is a first attempt (default: a retry)\n"
        "  --throttle-probability P  the host throttle's, 0..1 (default 0)\n"
        "  --draw D             the uniform draw in [0, 1) it is compared "
        "with\n"
        "                       (default: a random one, --seed fixes it)\n"
        "  --pushback-first-attempts  holds apply to first attempts too\n"
        "  and --pushback, --remaining, --min-attempt, --seed as above\n"
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
    OPT_PUSHBACK,
    OPT_ADMIT,
    OPT_FIRST_ATTEMPT,
    OPT_THROTTLE_PROBABILITY,
    OPT_DRAW,
    OPT_PUSHBACK_FIRST_ATTEMPTS,
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
    {"pushback", required_argument, NULL, OPT_PUSHBACK},
    {"admit", no_argument, NULL, OPT_ADMIT},
    {"first-attempt", no_argument, NULL, OPT_FIRST_ATTEMPT},
    {"throttle-probability", required_argument, NULL, OPT_THROTTLE_PROBABILITY},
    {"draw", required_argument, NULL, OPT_DRAW},
    {"pushback-first-attempts", no_argument, NULL, OPT_PUSHBACK_FIRST_ATTEMPTS},
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
    /* --admit: the admission's own facts; the deadline and the hold are
     * taken from facts when the options are all in. */
    bool admit;
    bool draw_given;
    retryd_admit_facts admission;
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
    case OPT_ADMIT:
        return &a->admit;
    case OPT_FIRST_ATTEMPT:
        return &a->admission.first_attempt;
    case OPT_PUSHBACK_FIRST_ATTEMPTS:
        return &a->admission.pushback_first_attempts;
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
    case OPT_PUSHBACK:
        return &a->facts.pushback_ns;
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
    case OPT_THROTTLE_PROBABILITY:
        return retryd__parse_double(arg, 0, 1,
                                    &a->admission.throttle_probability)
                   ? 0
                   : -1;
    case OPT_DRAW:
        a->draw_given = true;
        return retryd__parse_double(arg, 0, 1, &a->admission.draw) &&
                       a->admission.draw < 1
                   ? 0
                   : -1;
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
        printf(
            "delay:    %s%s%s\n", delay,
            d->flags & RETRYD_RETRY_HONOURS_RETRY_AFTER ? " (Retry-After)" : "",
            d->flags & RETRYD_RETRY_HELD_BY_PUSHBACK ? " (host pushback)" : "");
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
           ",\"refresh_credentials\":%s,\"honours_retry_after\":%s"
           ",\"held_by_pushback\":%s",
           retryd_verdict_name(d->verdict), retryd_rule_name(d->rule),
           retryd_rule_order(d->rule), retryd_denial_name(d->reason),
           retryd_failure_name(d->permanent), d->delay_ns,
           d->flags & RETRYD_RETRY_REFRESH_CREDENTIALS ? "true" : "false",
           d->flags & RETRYD_RETRY_HONOURS_RETRY_AFTER ? "true" : "false",
           d->flags & RETRYD_RETRY_HELD_BY_PUSHBACK ? "true" : "false");
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
    if (a->admit) {
        /* An attempt about to be sent has no evidence yet. */
        if ((unsigned)a->facts.evidence < RETRYD_EVIDENCE_COUNT) {
            fprintf(stderr, "retrydctl decide: --admit asks about an attempt "
                            "not sent yet: no --evidence\n");
            return CTL_EXIT_USAGE;
        }
        return -1;
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

static void print_admission(const decide_args *a, retryd_admission adm,
                            int64_t wait_ns)
{
    const retryd_admit_facts *f = &a->admission;
    char wait[32], hold[32];
    format_duration(wait_ns, wait, sizeof(wait));
    format_duration(f->pushback_ns, hold, sizeof(hold));
    if (a->json) {
        printf("{\"admission\":\"%s\",\"wait_ns\":%" PRId64
               ",\"first_attempt\":%s,\"throttle_probability\":%.6f,"
               "\"draw\":%.6f,\"pushback_ns\":%" PRId64 "}\n",
               retryd_admission_name(adm), wait_ns,
               f->first_attempt ? "true" : "false", f->throttle_probability,
               f->draw, f->pushback_ns);
        return;
    }
    printf("admission: %s\n", retryd_admission_name(adm));
    switch (adm) {
    case RETRYD_ADMIT_SEND:
        break;
    case RETRYD_ADMIT_THROTTLED:
        printf("why:       draw %.6f < throttle probability %.6f: the host "
               "throttle keeps this first attempt back (not sent, not an "
               "upstream failure)\n",
               f->draw, f->throttle_probability);
        break;
    case RETRYD_ADMIT_HOLD:
        printf("wait:      %s (a host pushback of %s, with jitter), then ask "
               "again\n",
               wait, hold);
        break;
    case RETRYD_ADMIT_PAST_DEADLINE:
        printf("why:       a host pushback of %s would hold it past the "
               "deadline (not sent)\n",
               hold);
        break;
    }
}

/* --admit: what the host's health says of an attempt about to be sent. */
static int admit_main(decide_args *a)
{
    retryd_admit_facts *f = &a->admission;
    f->pushback_ns = a->facts.pushback_ns;
    f->remaining_ns = a->facts.remaining_ns;
    f->min_attempt_ns = a->facts.min_attempt_ns;
    retryd_random_fn random = a->seeded ? cli_random : NULL;
    void *random_ctx = a->seeded ? &a->seed : NULL;
    if (!a->draw_given) {
        uint64_t r = (random ? random : retryd_random_default)(random_ctx);
        f->draw = (double)(r >> 11) * 0x1p-53;
    }
    retryd_admission adm;
    int64_t wait_ns;
    int r = retryd_admit(f, random, random_ctx, &adm, &wait_ns);
    if (r < 0) {
        fprintf(stderr, "retrydctl decide: inconsistent facts: %s\n",
                retryd_strerror(r));
        return CTL_EXIT_USAGE;
    }
    print_admission(a, adm, wait_ns);
    return CTL_EXIT_OK;
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
        .admission = {.sz = sizeof(retryd_admit_facts)},
    };
    int r = parse_args(argc, argv, &a);
    if (r >= 0)
        return r;
    if (a.admit)
        return admit_main(&a);

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
