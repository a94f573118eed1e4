/* SPDX-License-Identifier: MIT */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

static _Atomic int max_level = LOG_INFO;
static _Atomic unsigned limit_lines = LOG_LIMIT_LINES;
static _Atomic uint64_t limit_window_ns = LOG_LIMIT_WINDOW_MS * 1000000ull;

void log_set_level(int level)
{
    atomic_store(&max_level, level);
}

void log_set_limit(unsigned lines, uint64_t window_ms)
{
    atomic_store(&limit_lines, lines);
    atomic_store(&limit_window_ns, window_ms * 1000000u);
}

int log_level_parse(const char *name)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {{"error", LOG_ERR},
                  {"warning", LOG_WARN},
                  {"info", LOG_INFO},
                  {"debug", LOG_DEBUG}};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (strcmp(name, levels[i].name) == 0)
            return levels[i].level;
    return -1;
}

static const char *level_name(int level)
{
    switch (level) {
    case LOG_ERR:
        return "error";
    case LOG_WARN:
        return "warning";
    case LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

size_t log_escape(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (cap == 0)
        return 0;
    for (; *src != '\0'; src++) {
        unsigned char ch = (unsigned char)*src;
        bool plain = ch >= 0x20 && ch < 0x7f && ch != '\\';
        size_t need = plain ? 1 : 4;
        if (n + need >= cap)
            break; /* a cut line, never a cut escape */
        if (plain) {
            dst[n++] = (char)ch;
            continue;
        }
        dst[n++] = '\\', dst[n++] = 'x';
        dst[n++] = hex[ch >> 4], dst[n++] = hex[ch & 15];
    }
    dst[n] = '\0';
    return n;
}

static void emit(int level, const char *raw)
{
    /* Every line escaped here, whatever it holds: a peer's string (a
     * client name, a path) cannot end it and start a forged one, nor give
     * journald a priority of its own choosing. */
    char line[4 * LOG_LINE_MAX];
    log_escape(line, sizeof(line), raw);
    /* One write per line, so lines from two threads never interleave. */
    if (getenv("JOURNAL_STREAM") != NULL)
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "retryd: %s: %s\n", level_name(level), line);
}

void log_msg(int level, const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    va_list ap;

    if (level > atomic_load(&max_level))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    emit(level, line);
}

/* --- rate-limited lines ---------------------------------------------------
 * Both daemon threads log; the windows are shared state, so one mutex
 * guards them (taken only on the limited path, never by log_msg()). */

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static log_limit *limits; /* every site that has logged */

/* The window of @p l has ended: tell what it suppressed, start anew.
 * Under limit_lock. */
static void window_roll(log_limit *l, uint64_t now)
{
    if (l->suppressed > 0 && l->level <= atomic_load(&max_level)) {
        char line[LOG_LINE_MAX];
        snprintf(line, sizeof(line),
                 "suppressed %u similar lines in %llu s (\"%s\")",
                 l->suppressed,
                 (unsigned long long)((now - l->window_start_ns) / 1000000000u),
                 l->site);
        emit(l->level, line);
    }
    l->window_start_ns = now;
    l->lines = 0;
    l->suppressed = 0;
}

void log_limited_msg(log_limit *l, int level, const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    va_list ap;
    uint64_t now = retryd__clock_monotonic_ns();

    if (level > atomic_load(&max_level))
        return;
    pthread_mutex_lock(&limit_lock);
    if (l->site == NULL) { /* first use: link it */
        l->site = fmt;
        l->level = level;
        l->window_start_ns = now;
        l->next = limits;
        limits = l;
    }
    if (now - l->window_start_ns >= atomic_load(&limit_window_ns))
        window_roll(l, now);
    bool print = l->lines < atomic_load(&limit_lines);
    if (print)
        l->lines++;
    else
        l->suppressed++;
    if (print) {
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        emit(level, line);
    }
    pthread_mutex_unlock(&limit_lock);
}

void log_flush_suppressed(void)
{
    uint64_t now = retryd__clock_monotonic_ns();
    pthread_mutex_lock(&limit_lock);
    for (log_limit *l = limits; l != NULL; l = l->next)
        if (l->suppressed > 0 &&
            now - l->window_start_ns >= atomic_load(&limit_window_ns))
            window_roll(l, now);
    pthread_mutex_unlock(&limit_lock);
}
