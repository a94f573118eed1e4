/* SPDX-License-Identifier: MIT */
/*
 * The retry policies the simulator compares (docs/storms.md names each
 * one's constants and where they come from). A policy is a budget the
 * decision engine asks (retryd_budget_iface, with the call as its context)
 * and hooks at the points of a call where the policy keeps its books. The
 * engine, the backoff and the loop are the same for all of them, so a
 * difference in a figure is the budget's.
 */
#ifndef RETRYD_SIM_POLICY_H
#define RETRYD_SIM_POLICY_H

#include <stdbool.h>

#include "retryd/decision.h"
#include "sim/sim.h"

typedef struct sim_policy {
    const char *name;
    const char *what; /* one line: the budget and its scope */
    bool per_process; /* its allowance lives in each process */
    /* What its budget lets retry in a steady outage, for the expected
     * figures: a share of first attempts and a floor per second, per host
     * or per process; 0 and 0 for a budget of another kind. */
    double ratio, floor;
    /* The state of a host and of a process (NULL: none). init may be
     * called again on a restarted process: it starts afresh. */
    int (*host_init)(sim_world *w, sim_host *h);
    void (*host_free)(sim_host *h);
    int (*proc_init)(sim_world *w, sim_proc *p);
    void (*proc_free)(sim_proc *p);
    /* A first attempt about to go: false when the policy keeps it back
     * (throttled: not sent). NULL: always sent. */
    bool (*admit)(sim_world *w, sim_call *c);
    /* Each first attempt, as it opens (the executor's deposit). */
    void (*first)(sim_world *w, sim_call *c);
    /* Each attempt, as it is sent. */
    void (*sent)(sim_world *w, sim_call *c);
    /* Each attempt, as it ends: @p status 0 when it timed out. */
    void (*outcome)(sim_world *w, sim_call *c, int status);
    /* The call is over (or lost in a crash). */
    void (*finish)(sim_world *w, sim_call *c);
    /* Once per fleet sync interval from the start, when not NULL: what
     * the fleet tier's daemons learn from each other and write into each
     * host's segment (retryd-fleet). A policy that has it keeps one floor
     * for all the hosts of a tier, each host's part its share of it. */
    void (*fleet_sync)(sim_world *w);
    /* What the engine spends from; NULL: no budget (naive). */
    const retryd_budget_iface *budget;
} sim_policy;

/* Every policy, in the order the tables print them: at most
 * SIM_MAX_POLICIES (the command line's tables are sized by it). */
#define SIM_MAX_POLICIES 16
extern const sim_policy *const sim_policies[];
extern const size_t sim_policy_count;

/* The policy named @p name, or NULL. */
const sim_policy *sim_policy_find(const char *name);

/* Defined in policy_retryd.c: retryd's, on the real bucket and health. */
extern const sim_policy sim_policy_retryd;
extern const sim_policy sim_policy_retryd_adaptive;
extern const sim_policy sim_policy_retryd_local;
extern const sim_policy sim_policy_retryd_fleet;

/* The fleet tier's sync interval in the simulator: its default. */
#define SIM_FLEET_INTERVAL_NS SIM_NS_PER_S

#endif
