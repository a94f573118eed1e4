/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request -w/--write-out: curl's common variables, %{json}, and
 * retryd's own (%{retryd_outcome}, %{retryd_attempts}, %{retryd_rule},
 * %{retryd_budget}), written to stdout after the transfer, as curl does;
 * "\n", "\r", "\t" and "%%" as in curl.
 */
#include <stdio.h>
#include <string.h>

#include "ctl_request.h"

/* The numbers of one variable: -1 when it is a string (in *str). */
static long long value_of(const char *name, const retryd_result *r,
                          const req_writeout *w, const char **str)
{
    const retryd_attempt *last =
        retryd_result_attempt(r, retryd_result_attempt_count(r) - 1);
    const char *ct = retryd_result_header(r, "Content-Type");
    static char version[24];
    *str = NULL;
    if (strcmp(name, "http_code") == 0 || strcmp(name, "response_code") == 0)
        return retryd_result_status(r);
    if (strcmp(name, "size_download") == 0)
        return (long long)w->bytes;
    if (strcmp(name, "num_redirects") == 0)
        return w->redirects;
    if (strcmp(name, "retryd_attempts") == 0)
        return (long long)retryd_result_attempt_count(r);
    if (strcmp(name, "http_version") == 0) {
        int v = last->http_version;
        snprintf(version, sizeof(version), v == 20 ? "2" : "%d.%d", v / 10,
                 v % 10);
        *str = v ? version : "0";
    } else if (strcmp(name, "url_effective") == 0 || strcmp(name, "url") == 0) {
        *str = w->url;
    } else if (strcmp(name, "content_type") == 0) {
        *str = ct ? ct : "";
    } else if (strcmp(name, "retryd_outcome") == 0) {
        *str = retryd_outcome_name(retryd_result_outcome(r));
    } else if (strcmp(name, "retryd_rule") == 0) {
        *str = retryd_rule_name(retryd_result_decision(r)->rule);
    } else if (strcmp(name, "retryd_budget") == 0) {
        *str = w->budget;
    }
    return -1;
}

static const char *const json_names[] = {
    "content_type",    "http_code",     "http_version",  "num_redirects",
    "response_code",   "size_download", "url_effective", "retryd_outcome",
    "retryd_attempts", "retryd_rule",   "retryd_budget",
};

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void write_json(FILE *out, const retryd_result *r, const req_writeout *w)
{
    size_t n = sizeof(json_names) / sizeof(json_names[0]);
    fputc('{', out);
    for (size_t i = 0; i < n; i++) {
        const char *str;
        long long v = value_of(json_names[i], r, w, &str);
        fprintf(out, "%s\"%s\":", i ? "," : "", json_names[i]);
        if (str)
            json_string(out, str);
        else
            fprintf(out, "%lld", v);
    }
    fputc('}', out);
}

/* One %{name}: its value, or curl's warning for an unknown one. */
static void write_variable(FILE *out, const char *name, size_t len,
                           const retryd_result *r, const req_writeout *w)
{
    char buf[64];
    const char *str;
    snprintf(buf, sizeof(buf), "%.*s", (int)len, name);
    if (strcmp(buf, "json") == 0) {
        write_json(out, r, w);
        return;
    }
    long long v = value_of(buf, r, w, &str);
    if (str)
        fputs(str, out);
    else if (v >= 0)
        fprintf(out, "%lld", v);
    else
        fprintf(stderr, "retrydctl: unknown --write-out variable: '%s'\n", buf);
}

void req_write_out(const char *fmt, const retryd_result *r,
                   const req_writeout *w, FILE *out)
{
    for (const char *p = fmt; *p; p++) {
        const char *end;
        if (p[0] == '%' && p[1] == '{' && (end = strchr(p + 2, '}'))) {
            write_variable(out, p + 2, (size_t)(end - p - 2), r, w);
            p = end;
        } else if (p[0] == '%' && p[1] == '%') {
            fputc('%', out);
            p++;
        } else if (p[0] == '\\' && p[1] && strchr("nrt", p[1])) {
            fputc(p[1] == 'n' ? '\n' : p[1] == 'r' ? '\r' : '\t', out);
            p++;
        } else {
            fputc(*p, out);
        }
    }
}
