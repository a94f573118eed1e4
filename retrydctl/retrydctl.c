/* SPDX-License-Identifier: MIT */
/* retrydctl: dispatch to a subcommand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_client.h"
#include "ctl_opts.h"
#include "ctl_status.h"

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"decide", ctl_decide_main,
     "decide whether an attempt with the given facts may be retried"},
    {"request", ctl_request_main,
     "one HTTP request through the library and the host budget"},
    {"stats", ctl_stats_main,
     "budgets and counters per upstream (--json, --prometheus, --processes)"},
    {"top", ctl_top_main,
     "a live view: rates per upstream and per program (--batch)"},
    {"upstreams", ctl_upstreams_main, "registered upstreams and parameters"},
    {"drain", ctl_drain_main, "host-wide draining: drain on|off"},
    {"retire", ctl_retire_main, "retire an upstream's slot: retire NAME"},
    {"status", ctl_status_main,
     "whether this process shares the budget, why not (one line)"},
    {"doctor", ctl_doctor_main,
     "whether this identity would share the budget, what to change"},
    {"help", NULL, "help [COMMAND]: this list, or a command's --help"},
};

#define N_SUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: retrydctl <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name,
                subcommands[i].summary);
    fprintf(out, "\n'retrydctl <command> --help' describes a command;\n"
                 "'retrydctl --version' prints the version.\n"
                 "exit codes: 0 done, 64 bad usage, 70 could not be done\n"
                 "(request: 0 response, 2 ambiguous, a failure curl's code)\n");
}

static const subcommand *find(const char *name)
{
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        if (strcmp(name, subcommands[i].name) == 0 && subcommands[i].run)
            return &subcommands[i];
    return NULL;
}

static int unknown(const char *name)
{
    fprintf(stderr,
            "retrydctl: unknown command '%s'; see 'retrydctl "
            "--help'\n",
            name);
    return CTL_EXIT_USAGE;
}

/* retrydctl help [COMMAND]: the list, or COMMAND --help. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return CTL_EXIT_OK;
    }
    if (argc > 3) {
        fprintf(stderr, "usage: retrydctl help [COMMAND]\n");
        return CTL_EXIT_USAGE;
    }
    const subcommand *c = find(argv[2]);
    if (c == NULL)
        return unknown(argv[2]);
    char *args[] = {argv[2], (char *)"--help", NULL};
    return c->run(2, args);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return CTL_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        ctl_print_version(stdout);
        return CTL_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0)
        return help(argc, argv);
    const subcommand *c = find(cmd);
    if (c == NULL)
        return unknown(cmd);
    return c->run(argc - 1, argv + 1);
}
