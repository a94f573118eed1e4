/* SPDX-License-Identifier: MIT */
/*
 * What each scenario prints: a table for a reader, or with --json one
 * object for a script (sim/plot.sh, the storm benchmark). With one policy
 * the figures are the object's own fields; with several, one object per
 * policy in "rows".
 */
#ifndef RETRYD_SIM_REPORT_H
#define RETRYD_SIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/policy.h"
#include "sim/scenarios.h"

/* How a scenario's figures are to be printed. */
typedef struct sim_report {
    FILE *out;
    bool json;
    const sim_policy *const *policies; /* the rows, in order */
    size_t n;
    const sim_params *p; /* the parameters (their policy: the first row) */
} sim_report;

void sim_report_outage(const sim_report *r, const sim_outage_result *rows);

/* What a floors table varies: processes per host (floors) or hosts
 * (hosts). */
typedef struct sim_axis {
    const char *scenario; /* "floors", "hosts" */
    char letter;          /* 'P', 'H' */
    const char *json_key; /* "processes_per_host", "hosts" */
    const char *what;     /* a line under the title */
    const uint32_t *values;
} sim_axis;

/* Floors: @p retries[policy][i] at @p ax->values[i] processes per host
 * (or hosts), of @p first[policy][i] first attempts per second. */
void sim_report_floors(const sim_report *r, const sim_axis *ax, size_t n,
                       const double *const *retries,
                       const double *const *first);

void sim_report_meta(const sim_report *r, const sim_meta_phases *ph,
                     const sim_meta_result *rows);

void sim_report_restart(const sim_report *r, const sim_restart_result *rows);

/* The policies, their constants and scope. */
void sim_report_policies(FILE *out, bool json);

#endif
