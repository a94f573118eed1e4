/* SPDX-License-Identifier: MIT */
#include "ctl_opts.h"

#include <stdarg.h>
#include <string.h>

#include "ctl.h"
#include "retryd/retryd.h"

void ctl_print_version(FILE *out)
{
    fprintf(out, "retrydctl %d.%d.%d\n", RETRYD_VERSION_MAJOR,
            RETRYD_VERSION_MINOR, RETRYD_VERSION_PATCH);
}

int ctl_usage_error(const ctl_cmd *c, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "retrydctl %s: ", c->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "; see 'retrydctl %s --help'\n", c->name);
    return CTL_EXIT_USAGE;
}

/* The option getopt_long could not take, as the user wrote it. */
static int bad_option(const ctl_cmd *c, char **argv, int opt)
{
    const char *what = opt == ':' ? "option needs a value" : "unknown option";
    const char *arg = argv[optind - 1];
    if (strncmp(arg, "--", 2) != 0 && optopt > 0 && optopt < 0x100)
        return ctl_usage_error(c, "%s '-%c'", what, optopt);
    return ctl_usage_error(c, "%s '%s'", what, arg);
}

int ctl_getopt(const ctl_cmd *c, int argc, char **argv, ctl_sockets *s,
               int *exit_code)
{
    char shortopts[64];
    int opt;

    /* ':' first: a missing value is told apart from an unknown option, and
     * getopt prints nothing itself (the hint is ours, one line). */
    snprintf(shortopts, sizeof(shortopts), ":%s", c->shortopts);
    opterr = 0;
    while ((opt = getopt_long(argc, argv, shortopts, c->options, NULL)) != -1) {
        switch (opt) {
        case 'h':
            fputs(c->help, stdout);
            *exit_code = CTL_EXIT_OK;
            return CTL_GETOPT_EXIT;
        case CTL_OPT_VERSION:
            ctl_print_version(stdout);
            *exit_code = CTL_EXIT_OK;
            return CTL_GETOPT_EXIT;
        case CTL_OPT_CONTROL:
            s->control = optarg;
            break;
        case CTL_OPT_STATS:
            s->stats = optarg;
            break;
        case '?':
        case ':':
            *exit_code = bad_option(c, argv, opt);
            return CTL_GETOPT_EXIT;
        default:
            return opt;
        }
    }
    return CTL_GETOPT_END;
}

const struct option ctl_common_options[] = {
    CTL_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

int ctl_parse_common(const ctl_cmd *c, int argc, char **argv, ctl_sockets *s,
                     bool operands)
{
    int code;
    ctl_sockets_init(s);
    optind = 0;
    if (ctl_getopt(c, argc, argv, s, &code) == CTL_GETOPT_EXIT)
        return code;
    if (!operands && optind < argc)
        return ctl_usage_error(c, "unexpected argument '%s'", argv[optind]);
    return -1;
}
