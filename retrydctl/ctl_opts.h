/* SPDX-License-Identifier: MIT */
/*
 * retrydctl: the options every operator subcommand shares (--help,
 * --version, the socket paths) and the getopt_long loop that handles them,
 * so each subcommand lists only its own options.
 */
#ifndef RETRYD_CTL_OPTS_H
#define RETRYD_CTL_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "ctl_client.h"

/* Option values of the common long options (a subcommand's own start at
 * CTL_OPT_OWN, or are their short letter). */
enum {
    CTL_OPT_VERSION = 0x100,
    CTL_OPT_CONTROL,
    CTL_OPT_STATS,
    CTL_OPT_OWN = 0x120,
};

/* Put these first in a subcommand's option table. */
#define CTL_COMMON_OPTIONS                                                     \
    {"help", no_argument, NULL, 'h'},                                          \
        {"version", no_argument, NULL, CTL_OPT_VERSION},                       \
        {"control-socket", required_argument, NULL, CTL_OPT_CONTROL},          \
    {                                                                          \
        "stats-socket", required_argument, NULL, CTL_OPT_STATS                 \
    }

/* The help text every subcommand ends with. */
#define CTL_COMMON_HELP                                                        \
    "  --control-socket PATH  the daemon's control socket\n"                   \
    "                         ($RETRYD_CONTROL_SOCKET, "                       \
    "/run/retryd/control.sock)\n"                                              \
    "  --stats-socket PATH    the daemon's stats socket\n"                     \
    "                         ($RETRYD_STATS_SOCKET, "                         \
    "/run/retryd/stats.sock)\n"                                                \
    "  -h, --help             this help\n"                                     \
    "      --version          print the version\n"

/* A subcommand's command line. */
typedef struct ctl_cmd {
    const char *name;             /* "stats" */
    const char *help;             /* the whole --help text */
    const char *shortopts;        /* its own short options, "h" included */
    const struct option *options; /* CTL_COMMON_OPTIONS and its own */
} ctl_cmd;

/* What ctl_getopt returns besides an option of the subcommand's own. */
enum {
    CTL_GETOPT_END = -1,  /* the options are over: operands from optind */
    CTL_GETOPT_EXIT = -2, /* return *exit_code (after --help, --version,
                             an unknown option) */
};

/*
 * The next option of the subcommand's own, after handling the common ones:
 * --help prints c->help to stdout (exit 0), --version the version (exit
 * 0), the socket options set @p s, an unknown option or a missing argument
 * prints a one-line hint (exit 64). Options may follow operands; "--" ends
 * them. Set optind = 0 before the first call.
 */
int ctl_getopt(const ctl_cmd *c, int argc, char **argv, ctl_sockets *s,
               int *exit_code);

/* The common options and nothing else: the table of a command without
 * options of its own. */
extern const struct option ctl_common_options[];

/*
 * Parses the command line of a command that has only the common options:
 * -1 to go on (its operands from optind), or the exit code. With
 * @p operands false an operand is a usage error too.
 */
int ctl_parse_common(const ctl_cmd *c, int argc, char **argv, ctl_sockets *s,
                     bool operands);

/* "retrydctl CMD: MESSAGE; see 'retrydctl CMD --help'" on stderr; 64. */
int ctl_usage_error(const ctl_cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "retrydctl VERSION" to @p out. */
void ctl_print_version(FILE *out);

#endif
