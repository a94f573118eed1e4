/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr with levels. Under systemd (JOURNAL_STREAM set) each
 * line starts with a syslog priority "<N>", which journald turns into the
 * entry's priority; elsewhere lines read "retryd: level: message".
 *
 * A line a peer can make the daemon repeat (a refused connection, a
 * refused slot, an eviction, damage, register/retire churn) goes through
 * log_limited(): at most log_limit_lines lines per call site in each
 * log_limit_interval_s (configuration keys; 5 lines per 10 s unless set),
 * then one "suppressed K similar lines" line for the window, so no peer
 * can fill the journal.
 *
 * What the levels mean (docs/daemon.md, "Logging"): err, the daemon cannot
 * do its job; warning, a refusal, damage, a neighbour misbehaving, a
 * fallback; info, lifecycle (start, reload, drain, an upstream registered
 * or retired, stop); debug, each attach, detach, hello and stats
 * connection.
 */
#ifndef RETRYD_LOG_H
#define RETRYD_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERR = 3, LOG_WARN = 4, LOG_INFO = 6, LOG_DEBUG = 7 };

/* Lines per call site per window unless log_set_limit() says otherwise;
 * what is over is counted, then told. */
#define LOG_LIMIT_LINES 5
#define LOG_LIMIT_WINDOW_MS 10000

/* One call site's window. Static storage, zero-initialised; log.c links
 * it into its list on first use, to report what it suppressed. */
typedef struct log_limit {
    const char *site; /* what the "suppressed" line names: the format;
                       * NULL until its first use links it */
    int level;
    uint64_t window_start_ns;
    unsigned lines;      /* printed in this window */
    unsigned suppressed; /* counted in this window */
    struct log_limit *next;
} log_limit;

/* A line's bytes before escaping; more are cut. */
#define LOG_LINE_MAX 1024

/*
 * @p src into @p dst (at most @p cap bytes with the NUL) with every byte
 * outside printable ASCII, and the backslash, written as \xNN: what every
 * log line goes through (log_msg(), log_limited_msg()), so nothing a peer
 * sends (a client name, an upstream name, a path) can end a line and
 * forge the next, or start one with a journald priority ("<2>"). Cut
 * between escapes when too long. Returns the bytes written.
 */
size_t log_escape(char *dst, size_t cap, const char *src);

void log_set_level(int level);
/* The rate limit: @p lines per call site in each @p window_ms (> 0). A
 * window under way keeps its start. */
void log_set_limit(unsigned lines, uint64_t window_ms);
int log_level_parse(const char *name); /* -1 for an unknown name */
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void log_limited_msg(log_limit *l, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Report the suppressed lines of windows that have ended (the heartbeat
 * calls it, so a count is told even when no further line comes). */
void log_flush_suppressed(void);

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* A rate-limited line; the call site is the key. */
#define log_limited(level, ...)                                                \
    do {                                                                       \
        static log_limit log__site;                                            \
        log_limited_msg(&log__site, level, __VA_ARGS__);                       \
    } while (0)

#endif
