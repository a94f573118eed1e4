/* SPDX-License-Identifier: MIT */
/*
 * The scenarios (docs/storms.md): each sets the world up, runs it and
 * reduces what it counted to the figures the issue asks for. Printing is
 * report.c's; the tests (tests/sim) call these directly.
 */
#ifndef RETRYD_SIM_SCENARIOS_H
#define RETRYD_SIM_SCENARIOS_H

#include <stddef.h>

#include "sim/sim.h"

/* retryd's defaults and the executor's: 1 layer, 1 host, 1 process, 1000
 * first attempts/s, 3 attempts, 10 s attempts, a 30 s deadline, 50 ms
 * minimum, full jitter from 100 ms, 0.5 ms a hop, an unbounded deepest
 * layer, a floor of 10/s per host, a throttle window of 30 s, seed 1. */
void sim_params_default(sim_params *p);

/* --- outage: the deepest layer answers 503 to everything ----------------- */

/* Down from the start; timeouts and deadline of 60 s, long enough for
 * every layer's attempts to be made (the figure is the retries', not the
 * timeouts'); 90 s, rates over the last 30. */
void sim_outage_params(sim_params *p);

typedef struct sim_outage_result {
    uint32_t layers;
    double first_per_s;                       /* tier 0 calls started */
    double load_per_s[SIM_MAX_LAYERS + 1];    /* attempts at tier t */
    double retries_per_s[SIM_MAX_LAYERS + 1]; /* of which retries */
    double deepest_load_ratio;                /* load_per_s[d] / first_per_s */
    double deepest_retries_per_s;
    /* What the arithmetic says: N^d for naive, the budget's ratio and
     * floors compounded for those that have them; NaN otherwise. */
    double expected_ratio;
} sim_outage_result;

int sim_outage_run(const sim_params *p, sim_outage_result *ret);

/* The expected deepest load ratio of @p p (NaN when the policy's budget
 * is not a ratio and a floor). */
double sim_outage_expected(const sim_params *p);

/* --- floors: a dead upstream, 1 to 64 processes per host ----------------- */

/* The outage with one layer, 40 s, rates over the last 20. */
void sim_floors_params(sim_params *p);

/* --- hosts: a dead upstream, 1 to 1000 hosts ---------------------------- */

/* The floors' setup with 10 first attempts/s per host. */
void sim_hosts_params(sim_params *p);

/* --- metastability: capacity halved for a while, then restored ----------- */

typedef struct sim_meta_phases {
    int64_t before_ns, trigger_ns, after_ns;
} sim_meta_phases;

/* 16 processes on one host, 10 workers x 10 ms (1000/s) with a queue of
 * 2000, 700 first attempts/s (70 %), attempts of 1 s; 60 s, then half the
 * workers for 30 s, then 300 s. */
void sim_meta_params(sim_params *p, sim_meta_phases *ph);

/* Apply @p ph to @p p (the trigger's window and the duration). */
void sim_meta_apply(sim_params *p, const sim_meta_phases *ph);

/* Phases of a metastability run: before (from 10 s, after the start's
 * transient), during the trigger, after it. */
enum { SIM_BEFORE = 0, SIM_DURING = 1, SIM_AFTER = 2, SIM_PHASES = 3 };

typedef struct sim_meta_result {
    double goodput_per_s[SIM_PHASES]; /* calls that got a response */
    double retries_per_s[SIM_PHASES]; /* retries reaching the server */
    double load_per_s[SIM_PHASES];    /* attempts reaching the server */
    double offered_per_s[SIM_PHASES]; /* calls started */
    /* Goodput is judged as a share of the calls started in the same
     * seconds (arrivals are random: a quiet 5 s is no loss). Seconds after
     * the trigger ends until the first second from which every 5 s
     * window's share is at least 95 % of the share before; NaN: never. */
    double recovery_s;
    /* Seconds after the trigger ends during which every 5 s window's share
     * stays below 50 % of the share before. */
    double collapsed_s;
    sim_bin *bins; /* per second, owned: sim_meta_result_free() */
    size_t n_bins;
} sim_meta_result;

int sim_meta_run(const sim_params *p, const sim_meta_phases *ph,
                 sim_meta_result *ret);
void sim_meta_result_free(sim_meta_result *r);

/* --- restart storms: tier 0 crash-looping during an outage --------------- */

/* The outage with one layer, 16 processes, crashes every 5 s; 60 s,
 * rates over the last 40. */
void sim_restart_params(sim_params *p);

typedef struct sim_restart_result {
    double retries_per_s;          /* with the crash loops */
    double baseline_retries_per_s; /* the same run without them */
    double restarts_per_s;
    double extra_per_restart; /* (retries - baseline) / restarts */
} sim_restart_result;

/* Runs @p p twice, with and without its restart period. */
int sim_restart_run(const sim_params *p, sim_restart_result *ret);

#endif
