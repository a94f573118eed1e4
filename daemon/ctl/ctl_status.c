/* SPDX-License-Identifier: MIT */
/*
 * retrydctl status: attach as any service would and say whether this
 * process shares the host budget, and if not why (retryd_host_share_status).
 * The question an operator asks when a service "runs local": the answer is
 * the library's own, from the same checks a service makes, under this
 * user's credentials.
 */
#include "ctl_status.h"

#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_client.h"
#include "retryd/budget.h"

/* What to do about each reason, for the operator. */
static const char *advice(retryd_share_status s)
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
               "allow_groups in retryd.conf";
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
        return "every process slot is taken: raise process_capacity";
    default:
        return "the daemon answered something else (another protocol "
               "version?)";
    }
}

int ctl_status_main(int argc, char **argv)
{
    ctl_sockets s;
    ctl_sockets_from_args(&argc, argv, &s);
    if (argc > 1) {
        fprintf(stderr, "usage: retrydctl status [--control-socket PATH]\n");
        return strcmp(argv[1], "--help") == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
    }
    retryd_host_opts o = {.sz = sizeof(o),
                          .control_socket = s.control,
                          .client_name = "retrydctl status"};
    retryd_host *h;
    int r = retryd_host_open(&o, &h);
    if (r < 0) {
        fprintf(stderr, "retrydctl: %s\n", retryd_strerror(r));
        return CTL_EXIT_ERROR;
    }
    retryd_share_status st = retryd_host_share_status(h);
    retryd_host_close(h);
    printf("%s: %s\n", retryd_share_status_name(st), advice(st));
    return st == RETRYD_SHARE_SHARED ? CTL_EXIT_OK : CTL_EXIT_ERROR;
}
