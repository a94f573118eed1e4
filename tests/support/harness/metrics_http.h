/* SPDX-License-Identifier: MIT */
/*
 * What the /metrics tests share: a free loopback port, real HTTP through
 * libcurl (bounded), promtool's verdict on a body, and the daemon's test
 * client started under another program name (a symlink: the kernel names
 * a process after the file it executed). No criterion here, so that the
 * thread sanitizer's plain programs can use it too.
 */
#ifndef RETRYD_TEST_METRICS_HTTP_H
#define RETRYD_TEST_METRICS_HTTP_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run.h"

typedef struct rd_http {
    long status;     /* 0: no HTTP answer (refused, timed out) */
    char ctype[128]; /* Content-Type */
    char allow[64];  /* Allow */
    char *body;      /* NUL-terminated; free() it */
    size_t len;
    double seconds; /* the whole exchange */
} rd_http;

static size_t rd__http_body(char *p, size_t size, size_t n, void *arg)
{
    rd_http *h = arg;
    char *more = realloc(h->body, h->len + size * n + 1);
    if (more == NULL)
        return 0;
    h->body = more;
    memcpy(h->body + h->len, p, size * n);
    h->len += size * n;
    h->body[h->len] = '\0';
    return size * n;
}

static size_t rd__http_header(char *p, size_t size, size_t n, void *arg)
{
    rd_http *h = arg;
    size_t len = size * n;
    char *dst = NULL;
    size_t cap = 0, skip = 0;
    if (len > 14 && strncasecmp(p, "Content-Type: ", 14) == 0)
        dst = h->ctype, cap = sizeof(h->ctype), skip = 14;
    else if (len > 7 && strncasecmp(p, "Allow: ", 7) == 0)
        dst = h->allow, cap = sizeof(h->allow), skip = 7;
    if (dst != NULL) {
        size_t v = len - skip;
        while (v > 0 && (p[skip + v - 1] == '\r' || p[skip + v - 1] == '\n'))
            v--;
        if (v >= cap)
            v = cap - 1;
        memcpy(dst, p + skip, v);
        dst[v] = '\0';
    }
    return len;
}

/* @p method @p url, bounded at @p timeout_ms. 0 with an HTTP answer in
 * @p h, or libcurl's error code (h->status 0). */
static inline int rd_http_do(const char *method, const char *url,
                             long timeout_ms, rd_http *h)
{
    memset(h, 0, sizeof(*h));
    h->body = calloc(1, 1);
    CURL *c = curl_easy_init();
    if (c == NULL || h->body == NULL)
        return -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, rd__http_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, rd__http_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    int r = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &h->seconds);
    curl_easy_cleanup(c);
    return r;
}

/* GET http://HOST:PORT/metrics-style URL from @p host (e.g. "127.0.0.1"
 * or "[::1]"), @p port and @p path. */
static inline int rd_http_get(const char *host, int port, const char *path,
                              rd_http *h)
{
    char url[128];
    snprintf(url, sizeof(url), "http://%s:%d%s", host, port, path);
    return rd_http_do("GET", url, 5000, h);
}

/* promtool: $RETRYD_PROMTOOL (set by CMake from deploy/install-deps.sh's
 * cache or PATH), else promtool on PATH; NULL when there is none. */
static inline const char *rd_promtool(void)
{
    const char *p = getenv("RETRYD_PROMTOOL");
    if (p != NULL && *p != '\0' && access(p, X_OK) == 0)
        return p;
    static char found[512];
    return rd_find_program("promtool", found, sizeof(found)) ? found : NULL;
}

/* `promtool check metrics` on @p body (written to @p file first): its exit
 * code, with its output in @p res; negative when it could not run. */
static inline int rd_promtool_check(const char *promtool, const char *file,
                                    const char *body, run_result *res)
{
    FILE *f = fopen(file, "we");
    if (f == NULL)
        return -1;
    fputs(body, f);
    fclose(f);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "exec '%s' check metrics < '%s'", promtool,
             file);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    if (run_program(argv, 30000, res) < 0)
        return -1;
    return res->exit_code;
}

/* A symlink @p dir/@p name to @p target, so that a process exec'd through
 * it is named @p name (/proc/PID/comm); its path in @p out. */
static inline int rd_named_program(const char *dir, const char *name,
                                   const char *target, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", dir, name);
    unlink(out);
    return symlink(target, out);
}

#endif
