/* SPDX-License-Identifier: MIT */
/* The JSON writer; see output.h. */
#include "sim/output.h"

#include <math.h>

void sim_json_init(sim_json *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->first[0] = true;
}

/* The comma before a value, and its key. */
static void lead(sim_json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->out);
    j->first[j->depth] = false;
    if (key != NULL)
        fprintf(j->out, "\"%s\":", key);
}

static void open_value(sim_json *j, const char *key, char c)
{
    lead(j, key);
    fputc(c, j->out);
    if (j->depth + 1 < SIM_JSON_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

void sim_json_object(sim_json *j, const char *key)
{
    open_value(j, key, '{');
}

void sim_json_array(sim_json *j, const char *key)
{
    open_value(j, key, '[');
}

static void close_with(sim_json *j, char c)
{
    fputc(c, j->out);
    if (j->depth > 0)
        j->depth--;
}

void sim_json_end_object(sim_json *j)
{
    close_with(j, '}');
}

void sim_json_end_array(sim_json *j)
{
    close_with(j, ']');
}

void sim_json_num(sim_json *j, const char *key, double v)
{
    lead(j, key);
    if (!isfinite(v))
        fputs("null", j->out);
    else
        fprintf(j->out, "%.6g", v);
}

void sim_json_int(sim_json *j, const char *key, int64_t v)
{
    lead(j, key);
    fprintf(j->out, "%lld", (long long)v);
}

void sim_json_str(sim_json *j, const char *key, const char *s)
{
    lead(j, key);
    fprintf(j->out, "\"%s\"", s);
}

void sim_json_bool(sim_json *j, const char *key, bool v)
{
    lead(j, key);
    fputs(v ? "true" : "false", j->out);
}

void sim_json_done(sim_json *j)
{
    fputc('\n', j->out);
}
