/* SPDX-License-Identifier: MIT */
/*
 * retryd-test-client: a real client process the integration tests drive
 * through stdin, one command per line, one reply line each. It uses only
 * the public budget API, as a service would.
 *
 *   open NAME [ratio floor cap]   -> ok shared=0|1 | err CODE
 *   deposit N                     -> ok
 *   withdraw N                    -> granted G denied D
 *   take N                        -> granted G budget B share S (refused
 *                                    for an empty bucket, for a share)
 *   balance                       -> balance TOKENS
 *   shared                        -> shared 0|1
 *   attached                      -> attached 0|1
 *   draining                      -> draining 0|1
 *   pid                           -> pid PID
 *   status                        -> status NAME (retryd_share_status_name)
 *   admit first|retry             -> admit ADMISSION WAIT_MS (a 60 s deadline)
 *   observe STATUS [RETRY_AFTER_MS] -> ok (STATUS 0: sent, no response)
 *   health                        -> health throttle=0|1 engaged=0|1
 *                                    probability=P requests=R accepts=A
 *                                    rejecting=N pushback_ms=MS
 *   exit
 *
 * usage: retryd-test-client CONTROL_SOCKET
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "retryd/retryd.h"

static retryd_upstream *up;

/* The upstream health commands (docs/health.md); false for another. */
static bool run_health(const char *line)
{
    char kind[16];
    int status;
    long long after_ms = -1;
    if (sscanf(line, "admit %15s", kind) == 1) {
        int64_t wait = 0;
        retryd_admission a = retryd_upstream_admit(
            up, strcmp(kind, "first") == 0, INT64_C(60000000000),
            INT64_C(1000000), &wait);
        printf("admit %s %lld\n", retryd_admission_name(a),
               (long long)(wait / 1000000));
    } else if (sscanf(line, "observe %d %lld", &status, &after_ms) >= 1) {
        retryd_upstream_observe(up,
                                status == 0 ? RETRYD_EVIDENCE_SENT_NO_RESPONSE
                                            : RETRYD_EVIDENCE_RESPONSE_RECEIVED,
                                status, after_ms < 0 ? -1 : after_ms * 1000000);
        printf("ok\n");
    } else if (strncmp(line, "health", 6) == 0) {
        retryd_health hl = {.sz = sizeof(hl)};
        if (retryd_upstream_health(up, &hl) < 0) {
            printf("err health\n");
            return true;
        }
        printf("health throttle=%d engaged=%d probability=%.6f requests=%llu "
               "accepts=%llu rejecting=%llu pushback_ms=%lld\n",
               hl.throttle, hl.engaged, hl.probability,
               (unsigned long long)hl.requests, (unsigned long long)hl.accepts,
               (unsigned long long)hl.rejecting_processes,
               (long long)(hl.pushback_ns / 1000000));
    } else {
        return false;
    }
    return true;
}

static void run(retryd_host *h, char *line)
{
    char name[128];
    long n;
    retryd_budget_params p = {.sz = sizeof(p)};

    if (sscanf(line, "open %127s %lf %lf %lf", name, &p.ratio,
               &p.min_retries_per_sec, &p.cap) == 4 ||
        sscanf(line, "open %127s", name) == 1) {
        bool with = sscanf(line, "open %*s %lf %lf %lf", &p.ratio,
                           &p.min_retries_per_sec, &p.cap) == 3;
        int r = retryd_upstream_open(h, name, with ? &p : NULL, &up);
        if (r < 0)
            printf("err %s\n", retryd_err_name(r));
        else
            printf("ok shared=%d\n", retryd_upstream_shared(up));
    } else if (sscanf(line, "deposit %ld", &n) == 1) {
        for (long i = 0; i < n; i++)
            retryd_upstream_deposit(up);
        printf("ok\n");
    } else if (sscanf(line, "withdraw %ld", &n) == 1) {
        long granted = 0;
        for (long i = 0; i < n; i++)
            granted += retryd_upstream_withdraw(up) == 0;
        printf("granted %ld denied %ld\n", granted, n - granted);
    } else if (sscanf(line, "take %ld", &n) == 1) {
        /* withdraw, telling an empty bucket from a share refusal */
        long got[3] = {0, 0, 0};
        for (long i = 0; i < n; i++) {
            int r = retryd_upstream_withdraw(up);
            got[r == 0 ? 0 : r == RETRYD_ESHARE ? 2 : 1]++;
        }
        printf("granted %ld budget %ld share %ld\n", got[0], got[1], got[2]);
    } else if (strncmp(line, "balance", 7) == 0) {
        double b = -1;
        retryd_upstream_balance(up, &b);
        printf("balance %.6f\n", b);
    } else if (strncmp(line, "shared", 6) == 0) {
        printf("shared %d\n", retryd_upstream_shared(up));
    } else if (strncmp(line, "attached", 8) == 0) {
        printf("attached %d\n", retryd_host_attached(h));
    } else if (strncmp(line, "draining", 8) == 0) {
        printf("draining %d\n", retryd_host_draining(h));
    } else if (strncmp(line, "status", 6) == 0) {
        printf("status %s\n",
               retryd_share_status_name(retryd_host_share_status(h)));
    } else if (strncmp(line, "pid", 3) == 0) {
        printf("pid %d\n", (int)getpid());
    } else if (!run_health(line)) {
        printf("err unknown command\n");
    }
}

int main(int argc, char **argv)
{
    retryd_host_opts o = {.sz = sizeof(o), .client_name = "test-client"};
    retryd_host *h;
    char line[512];

    if (argc != 2) {
        fprintf(stderr, "usage: retryd-test-client CONTROL_SOCKET\n");
        return 64;
    }
    o.control_socket = argv[1];
    if (retryd_host_open(&o, &h) < 0)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof(line), stdin) != NULL) {
        if (strncmp(line, "exit", 4) == 0)
            break;
        run(h, line);
    }
    retryd_host_close(h);
    return 0;
}
