/*
 * Logging to stderr with levels. Under systemd (JOURNAL_STREAM set) each
 * line starts with a syslog priority "<N>", which journald turns into the
 * entry's priority; elsewhere lines read "retryd: level: message".
 */
#ifndef RETRYD_LOG_H
#define RETRYD_LOG_H

enum log_level { LOG_ERR = 3, LOG_WARN = 4, LOG_INFO = 6, LOG_DEBUG = 7 };

void log_set_level(int level);
int log_level_parse(const char *name); /* -1 for an unknown name */
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
