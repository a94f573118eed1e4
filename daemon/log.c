#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int max_level = LOG_INFO;

void log_set_level(int level)
{
    atomic_store(&max_level, level);
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

void log_msg(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (level > atomic_load(&max_level))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* One write per line, so lines from two threads never interleave. */
    if (getenv("JOURNAL_STREAM") != NULL)
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "retryd: %s: %s\n", level_name(level), line);
}
