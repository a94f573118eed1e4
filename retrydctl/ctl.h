/* SPDX-License-Identifier: MIT */
/* retrydctl: the operator's command-line tool. One file per subcommand. */
#ifndef RETRYD_CTL_H
#define RETRYD_CTL_H

#include <stdbool.h>

#include "base/number.h"

/* Exit codes shared by the subcommands (documented in retrydctl --help). */
enum {
    CTL_EXIT_OK = 0,
    CTL_EXIT_USAGE = 64, /* EX_USAGE: bad options */
    CTL_EXIT_ERROR = 70, /* EX_SOFTWARE: could not do it */
};

/* @p s as a JSON string, quoted and escaped (a control or non-ASCII
 * byte as \u00XX), on stdout: what stats --json writes every string with
 * (ctl_stats.c), the fleet's members (ctl_fleet.c) included. */
void ctl_json_string(const char *s);

int ctl_decide_main(int argc, char **argv);
int ctl_request_main(int argc, char **argv);
int ctl_top_main(int argc, char **argv);

#endif /* RETRYD_CTL_H */
