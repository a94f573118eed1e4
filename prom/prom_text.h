/* SPDX-License-Identifier: MIT */
/*
 * The two pieces of the Prometheus text format every family of prom.c and
 * prom_fleet.c writes: its HELP and TYPE lines, and a label value escaped
 * as the format says (backslash, double quote, line feed).
 */
#ifndef RETRYD_PROM_TEXT_H
#define RETRYD_PROM_TEXT_H

#include <stdio.h>

static inline void prom_header(FILE *out, const char *name, const char *type,
                               const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static inline void prom_label(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(out, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", out);
        else
            putc(*s, out);
    }
}

#endif
