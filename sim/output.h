/* SPDX-License-Identifier: MIT */
/*
 * Output: one JSON object (--json) or a table, and nothing else on
 * standard output. Numbers are printed with a fixed precision, so the same
 * run prints the same bytes (the determinism test compares them).
 */
#ifndef RETRYD_SIM_OUTPUT_H
#define RETRYD_SIM_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_JSON_DEPTH 16

/* A JSON writer: keeps whether a comma is due at each level. */
typedef struct sim_json {
    FILE *out;
    int depth;
    bool first[SIM_JSON_DEPTH];
} sim_json;

void sim_json_init(sim_json *j, FILE *out);
/* Open an object or array, as the value of @p key (NULL inside an array
 * or at the top). */
void sim_json_object(sim_json *j, const char *key);
void sim_json_array(sim_json *j, const char *key);
/* Close the innermost object or array. */
void sim_json_end_object(sim_json *j);
void sim_json_end_array(sim_json *j);
/* A number (6 significant digits; NaN and infinities as null), an
 * integer, a string (plain ASCII names only), a boolean. */
void sim_json_num(sim_json *j, const char *key, double v);
void sim_json_int(sim_json *j, const char *key, int64_t v);
void sim_json_str(sim_json *j, const char *key, const char *s);
void sim_json_bool(sim_json *j, const char *key, bool v);
/* The end of the document: a newline. */
void sim_json_done(sim_json *j);

#endif
