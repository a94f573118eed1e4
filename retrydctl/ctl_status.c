/* SPDX-License-Identifier: MIT */
/*
 * retrydctl status: attach as any service would and say whether this
 * process shares the host budget, and if not why (retryd_host_share_status).
 * The question an operator asks when a service "runs local": the answer is
 * the library's own, from the same checks a service makes, under this
 * user's credentials. retrydctl doctor (ctl_doctor.c) is the long form:
 * it uses the same probe and says what to change.
 */
#include "ctl_status.h"

#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_client.h"
#include "ctl_fleet.h"
#include "ctl_opts.h"
#include "retryd/budget.h"

/* What to do about each reason, for the operator. */
const char *ctl_share_advice(retryd_share_status s)
{
    switch (s) {
    case RETRYD_SHARE_SHARED:
        return "this process spends from the host's shared buckets";
    case RETRYD_SHARE_LOCAL_ONLY:
        return "local budgets by option";
    case RETRYD_SHARE_NO_DAEMON:
        return "no daemon answers on the control socket: is retryd running?";
    case RETRYD_SHARE_NOT_AUTHORISED:
        return "this user is refused: see group, allow_users and "
               "allow_groups in retryd.conf (retrydctl doctor says which)";
    case RETRYD_SHARE_SEGMENT_NOT_SEALED:
    case RETRYD_SHARE_SEGMENT_BAD_SIZE:
    case RETRYD_SHARE_SEGMENT_BAD_HEADER:
        return "the segment was refused unmapped; the daemon repairs a "
               "damaged header at its next heartbeat (retrydctl stats: "
               "segment health)";
    case RETRYD_SHARE_SEGMENT_BAD_VERSION:
        return "the daemon's segment layout differs from this library's: "
               "upgrade one of them";
    case RETRYD_SHARE_NO_PROCESS_SLOT:
        return "no process slot: every one is taken, this user holds its "
               "quota, or the daemon is out of file descriptors (raise "
               "process_capacity, process_slots_per_uid or LimitNOFILE; the "
               "daemon's log says which)";
    default:
        return "the daemon answered something else (another protocol "
               "version?)";
    }
}

int ctl_share_probe(const char *control, const char *client,
                    retryd_share_status *ret)
{
    retryd_host_opts o = {
        .sz = sizeof(o), .control_socket = control, .client_name = client};
    retryd_host *h;
    int r = retryd_host_open(&o, &h);
    if (r < 0)
        return r;
    *ret = retryd_host_share_status(h);
    retryd_host_close(h);
    return 0;
}

/* The fleet tier's line (docs/fleet.md), when the daemon has one and this
 * identity may read the stats socket: a second line, the exit code is the
 * host budget's alone. */
static void print_fleet(const ctl_sockets *s)
{
    Retryd__StatsReply *r;
    char err[CTL_ERR_MAX], line[1024];
    if (ctl_fetch_stats_quiet(s, false, &r, err, sizeof(err)) < 0)
        return;
    ctl_fleet_summary(r, line, sizeof(line));
    if (line[0] != '\0')
        printf("%s\n", line);
    retryd__stats_reply__free_unpacked(r, NULL);
}

static const ctl_cmd status_cmd = {
    "status",
    "usage: retrydctl status [options]\n"
    "Attach as a service would and say in one line whether this process\n"
    "shares the host budget, and if not why (and in a second whether the\n"
    "host is linked to its fleet, when the daemon has a fleet tier).\n"
    "Exit 0 shared, 70 not.\n"
    "'retrydctl doctor' checks each step and says what to "
    "change.\n\n" CTL_COMMON_HELP,
    "h",
    ctl_common_options,
};

int ctl_status_main(int argc, char **argv)
{
    ctl_sockets s;
    retryd_share_status st;
    int code = ctl_parse_common(&status_cmd, argc, argv, &s, false);

    if (code >= 0)
        return code;
    int r = ctl_share_probe(s.control, "retrydctl status", &st);
    if (r < 0) {
        fprintf(stderr, "retrydctl: %s\n", retryd_strerror(r));
        return CTL_EXIT_ERROR;
    }
    printf("%s: %s\n", retryd_share_status_name(st), ctl_share_advice(st));
    print_fleet(&s);
    return st == RETRYD_SHARE_SHARED ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
