/* SPDX-License-Identifier: MIT */
/*
 * The figures issue 21 asks of the storm simulator, as short runs with
 * their bounds (docs/storms.md has the long ones): one scenario per ctest
 * test, named by the first argument. Each prints the figure beside its
 * bound, so a failure says by how much.
 *
 *   outage       d = 5, 3 attempts: naive 243x (+-5 %) and 3^t at each
 *                layer; retryd within 5 % of 1.1^5 plus its floors (1.6716)
 *   floors       a dead upstream, P = 1 -> 64: retryd's retries/s change
 *                by <= 5 %; the per-process floors (Finagle's, the local
 *                bucket's) grow 64x (+-5 %)
 *   metastable   naive stays collapsed for 5 minutes after the trigger;
 *                retryd recovers within 10 s
 *   hosts        a dead upstream, 1 -> 1000 hosts: retryd with the fleet
 *                tier keeps the floors' part at the fleet's 10/s, one
 *                floor per host makes it 1000 x 10/s
 *   restart      extra retries per crash: retryd 0, gRPC 4, AWS 100 (35
 *                with the 2026 costs),
 *                Finagle 50 (its reserve of 100 less the 5 s x 10/s a
 *                long-lived process gets anyway)
 *   determinism  the same seed gives the same run, another seed another
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sim/policy.h"
#include "sim/scenarios.h"

static const sim_policy *policy(const char *name)
{
    const sim_policy *p = sim_policy_find(name);
    CHECK(p != NULL, "no policy %s", name);
    return p;
}

static void within(const char *what, double got, double want, double tol)
{
    printf("%-44s %10.3f   want %10.3f +- %.0f %%\n", what, got, want,
           tol * 100);
    CHECK(fabs(got - want) <= tol * fabs(want),
          "%s: %g, not within %g %% of %g", what, got, tol * 100, want);
}

static sim_outage_result outage(const char *pol, uint32_t layers, double rate)
{
    sim_params p;
    sim_outage_params(&p);
    p.policy = policy(pol);
    p.layers = layers;
    p.rate = rate;
    sim_outage_result r;
    CHECK(sim_outage_run(&p, &r) == 0, "outage %s: out of memory", pol);
    return r;
}

static void test_outage(void)
{
    /* 100 first attempts/s: 24,300 attempts a second at the deepest layer
     * are enough to see 243 to a percent, and cheap. */
    sim_outage_result n = outage("naive", 5, 100);
    within("naive d=5 N=3: deepest / first attempts", n.deepest_load_ratio, 243,
           0.05);
    for (uint32_t t = 1; t <= 5; t++) {
        char what[64];
        snprintf(what, sizeof(what), "naive d=5 N=3: layer %u", t);
        within(what, n.load_per_s[t] / n.first_per_s, pow(3, t), 0.05);
    }
    /* retryd at the rate: 1.1^5 = 1.61 plus the floors each
     * layer's host adds (10/s over 1000/s, compounded): 1.672. */
    sim_outage_result r = outage("retryd", 5, 1000);
    CHECK(fabs(r.expected_ratio - 1.6716) < 0.001, "expected %g",
          r.expected_ratio);
    within("retryd d=5: deepest / first attempts", r.deepest_load_ratio,
           r.expected_ratio, 0.05);
    printf("  of which 1.1^5 = %.4f, the floors %.4f\n", pow(1.1, 5),
           r.expected_ratio - pow(1.1, 5));
}

static double floor_retries(const char *pol, uint32_t procs, double *first)
{
    sim_params p;
    sim_floors_params(&p);
    p.policy = policy(pol);
    p.processes = procs;
    sim_outage_result r;
    CHECK(sim_outage_run(&p, &r) == 0, "floors %s: out of memory", pol);
    *first = r.first_per_s;
    return r.deepest_retries_per_s;
}

static void test_floors(void)
{
    double f1, f64;
    double one = floor_retries("retryd", 1, &f1);
    double many = floor_retries("retryd", 64, &f64);
    printf("retryd at a dead upstream: %.1f retries/s with 1 process, %.1f "
           "with 64\n",
           one, many);
    within("retryd: retries/s with 64 processes / with 1", many / one, 1, 0.05);
    /* The per-process budgets: the part beyond their share of the first
     * attempts is the floors', one per process. */
    const char *per[] = {"finagle", "retryd-local"};
    for (size_t i = 0; i < 2; i++) {
        const sim_policy *pol = policy(per[i]);
        one = floor_retries(per[i], 1, &f1) - pol->ratio * f1;
        many = floor_retries(per[i], 64, &f64) - pol->ratio * f64;
        char what[64];
        snprintf(what, sizeof(what), "%s: floors' retries/s, 64 / 1", per[i]);
        within(what, many / one, 64, 0.05);
    }
}

/* The floors' part of retryd's retries/s at a dead upstream with @p hosts
 * hosts, with the fleet tier (retryd-fleet) or without (retryd). */
static double host_floors(const char *pol, uint32_t hosts)
{
    sim_params p;
    sim_hosts_params(&p);
    p.policy = policy(pol);
    p.hosts = hosts;
    sim_outage_result r;
    CHECK(sim_outage_run(&p, &r) == 0, "hosts %s: out of memory", pol);
    return r.deepest_retries_per_s - p.policy->ratio * r.first_per_s;
}

/* The fleet tier's arithmetic (retryd__fleet_floor_share, in the real
 * refill): the floors' retries to a dead upstream stay F = 10/s from 1
 * host to 1000, where one floor per host makes them 1000 x F. */
static void test_hosts(void)
{
    double one = host_floors("retryd-fleet", 1);
    double fleet = host_floors("retryd-fleet", 1000);
    double per_host = host_floors("retryd", 1000);
    printf("floors' retries/s at a dead upstream: %.1f with 1 host, %.1f "
           "with 1000 and the fleet tier, %.1f with 1000 and a floor each\n",
           one, fleet, per_host);
    within("retryd-fleet: floors' retries/s at 1000 hosts", fleet, 10, 0.1);
    within("retryd-fleet: 1000 hosts / 1", fleet / one, 1, 0.1);
    within("retryd: floors' retries/s at 1000 hosts", per_host, 10000, 0.05);
}

static void test_metastable(void)
{
    sim_params p;
    sim_meta_phases ph;
    sim_meta_params(&p, &ph);
    sim_meta_result n, r;
    p.policy = policy("naive");
    CHECK(sim_meta_run(&p, &ph, &n) == 0, "out of memory");
    p.policy = policy("retryd");
    CHECK(sim_meta_run(&p, &ph, &r) == 0, "out of memory");
    printf("before the trigger: goodput %.0f/s (naive), %.0f/s (retryd) of "
           "%.0f offered\n",
           n.goodput_per_s[SIM_BEFORE], r.goodput_per_s[SIM_BEFORE],
           n.offered_per_s[SIM_BEFORE]);
    CHECK(n.goodput_per_s[SIM_BEFORE] > 0.95 * n.offered_per_s[SIM_BEFORE],
          "70 %% load is not healthy before the trigger");
    printf("naive: collapsed %.0f s after the trigger (want >= 300), "
           "goodput after %.1f/s, retries %.0f/s\n",
           n.collapsed_s, n.goodput_per_s[SIM_AFTER],
           n.retries_per_s[SIM_AFTER]);
    CHECK(n.collapsed_s >= 300, "naive recovered after %g s", n.collapsed_s);
    printf("retryd: recovered %.0f s after the trigger (want <= 10), "
           "retries %.0f/s during it\n",
           r.recovery_s, r.retries_per_s[SIM_DURING]);
    CHECK(r.recovery_s <= 10, "retryd took %g s", r.recovery_s);
    sim_meta_result_free(&n);
    sim_meta_result_free(&r);
}

static double extra_per_restart(const char *pol)
{
    sim_params p;
    sim_restart_params(&p);
    p.policy = policy(pol);
    sim_restart_result r;
    CHECK(sim_restart_run(&p, &r) == 0, "restart %s: out of memory", pol);
    CHECK(r.restarts_per_s > 3, "%s: %g restarts/s", pol, r.restarts_per_s);
    printf("%-16s %8.1f retries/s crash-looping, %8.1f not: %6.1f per "
           "restart\n",
           pol, r.retries_per_s, r.baseline_retries_per_s, r.extra_per_restart);
    return r.extra_per_restart;
}

static void test_restart(void)
{
    double rd = extra_per_restart("retryd");
    CHECK(fabs(rd) <= 1, "retryd: %g extra retries per restart", rd);
    double ad = extra_per_restart("retryd-adaptive");
    CHECK(fabs(ad) <= 1, "retryd-adaptive: %g extra per restart", ad);
    within("grpc: extra retries per restart", extra_per_restart("grpc"), 4,
           0.1);
    within("aws: extra retries per restart", extra_per_restart("aws"), 100,
           0.05);
    /* The 2026 costs: 500 / 14, 35 whole retries. */
    within("aws-2026: extra retries per restart", extra_per_restart("aws-2026"),
           35, 0.05);
    within("finagle: extra retries per restart", extra_per_restart("finagle"),
           50, 0.1);
}

/* Two runs of the same parameters, second by second. */
static bool same_run(const sim_params *a, const sim_params *b)
{
    sim_meta_phases ph = {10 * SIM_NS_PER_S, 10 * SIM_NS_PER_S,
                          20 * SIM_NS_PER_S};
    sim_meta_result x, y;
    CHECK(sim_meta_run(a, &ph, &x) == 0 && sim_meta_run(b, &ph, &y) == 0,
          "out of memory");
    bool same = x.n_bins == y.n_bins &&
                memcmp(x.bins, y.bins, x.n_bins * sizeof(*x.bins)) == 0;
    sim_meta_result_free(&x);
    sim_meta_result_free(&y);
    return same;
}

static void test_determinism(void)
{
    for (size_t i = 0; i < sim_policy_count; i++) {
        sim_params p;
        sim_meta_phases ph;
        sim_meta_params(&p, &ph);
        p.policy = sim_policies[i];
        sim_meta_apply(&p,
                       &(sim_meta_phases){10 * SIM_NS_PER_S, 10 * SIM_NS_PER_S,
                                          20 * SIM_NS_PER_S});
        sim_params other = p;
        other.seed = 2;
        CHECK(same_run(&p, &p), "%s: seed 1 gave two runs", p.policy->name);
        CHECK(!same_run(&p, &other), "%s: seeds 1 and 2 gave one run",
              p.policy->name);
        printf("%-16s the same seed, the same run; another seed, another\n",
               p.policy->name);
    }
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"outage", test_outage},   {"floors", test_floors},
        {"hosts", test_hosts},     {"metastable", test_metastable},
        {"restart", test_restart}, {"determinism", test_determinism},
    };
    for (size_t i = 0; argc == 2 && i < sizeof(tests) / sizeof(tests[0]); i++)
        if (strcmp(argv[1], tests[i].name) == 0) {
            tests[i].run();
            return 0;
        }
    fprintf(stderr, "usage: test_sim_figures outage|floors|hosts|metastable|"
                    "restart|determinism\n");
    return 2;
}
