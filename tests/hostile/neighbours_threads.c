/* SPDX-License-Identifier: MIT */
/*
 * The slot quota, the limit keys and the rate-limited log under both of
 * the daemon's threads, as a plain program so the thread sanitizer build
 * runs it too (criterion cannot start under TSan). While stats readers
 * keep the stats thread logging (a debug line per connection, through the
 * same log as the main thread) and reloads change log_limit_lines under
 * it, one user's processes run past process_slots_per_uid and a peer
 * registers and retires junk upstreams. Afterwards the quota held, every
 * register was accounted for in the log, and the daemon exits cleanly (a
 * sanitizer report would make its exit code non-zero).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "control_request.h"
#include "harness.h"
#include "hostile.h"
#include "retryd/retryd.h"
#include "run.h"
#include "shared/frame.h"

#define QUOTA 3
#define HOGS 5
#define CHURN 300
#define ROUNDS 20

static rd_daemon D;
static pid_t main_pid;

static void cleanup(void)
{
    if (getpid() == main_pid)
        rd_daemon_cleanup(&D);
}

static const char *limits(int round)
{
    static char text[256];
    snprintf(text, sizeof(text),
             "process_capacity = 8\nprocess_slots_per_uid = %d\n"
             "log_limit_interval_s = 1\nlog_limit_lines = %d\n",
             QUOTA, 1 + round % 4);
    return text;
}

/* Attach, say whether it shares on @p out, hold until @p hold closes. */
static int hog(int hold, int out)
{
    retryd_host_opts o = {.sz = sizeof(o), .control_socket = D.control};
    retryd_host *h;
    char x = 0;
    CHECK(retryd_host_open(&o, &h) == 0, "open");
    x = retryd_host_attached(h) ? 'a'
                                : (char)('0' + retryd_host_share_status(h));
    CHECK(write(out, &x, 1) == 1, "report");
    CHECK(read(hold, &x, 1) >= 0, "hold");
    retryd_host_close(h);
    return 0;
}

/* CHURN registers and retires of junk names on one connection. */
static int churn(void)
{
    int fd = rd_raw_connect(D.control, 0);
    CHECK(fd >= 0, "connect: %s", strerror(-fd));
    CHECK(rd_control_hello(fd) == 0, "hello");
    for (int i = 0; i < CHURN; i++) {
        char name[32];
        snprintf(name, sizeof(name), "junk-%d", i);
        CHECK(rd_control_register_retire(fd, name) == 0, "register/retire %s",
              name);
    }
    close(fd);
    return 0;
}

/* Printed "registered upstream 'junk" lines plus the counts of the
 * "suppressed N" lines of that call site. */
static bool registers_told(void *arg)
{
    FILE *f = fopen(D.log, "re");
    if (f == NULL)
        return false;
    char line[2048];
    long n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *s = strstr(line, "suppressed ");
        if (s != NULL && strstr(line, "registered upstream") != NULL)
            n += strtol(s + strlen("suppressed "), NULL, 10);
        else if (strstr(line, "registered upstream 'junk") != NULL)
            n++;
    }
    fclose(f);
    return n >= *(long *)arg;
}

int main(void)
{
    static run_result r;
    pid_t hogs[HOGS], churner;
    int hold[2], out[2];

    CHECK(rd_daemon_init(&D, limits(0)) == 0, "init");
    CHECK(rd_daemon_start(&D) == 0, "start (log: %s)", D.log);
    main_pid = getpid();
    atexit(cleanup);
    CHECK(pipe(hold) == 0 && pipe(out) == 0, "pipes");
    for (int i = 0; i < HOGS; i++) {
        hogs[i] = fork();
        CHECK(hogs[i] >= 0, "fork");
        if (hogs[i] == 0) {
            close(hold[1]);
            _exit(hog(hold[0], out[1]));
        }
    }
    close(hold[0]);
    close(out[1]);
    churner = fork();
    CHECK(churner >= 0, "fork");
    if (churner == 0)
        _exit(churn());
    /* The stats thread logs and reads while the main thread serves. */
    for (int round = 0; round < ROUNDS; round++) {
        CHECK(rd_ctl(&D, &r, "stats", "--json", NULL) == 0, "stats: %s", r.err);
        if (round % 4 == 0) {
            CHECK(rd_daemon_write_config(&D, limits(round)) == 0, "config");
            kill(D.pid, SIGHUP);
        }
    }
    int attached = 0, refused = 0;
    for (int i = 0; i < HOGS; i++) {
        char x;
        CHECK(read(out[0], &x, 1) == 1, "hog %d reports", i);
        attached += x == 'a';
        refused += x == '0' + RETRYD_SHARE_NO_PROCESS_SLOT;
    }
    CHECK(attached == QUOTA && refused == HOGS - QUOTA,
          "%d attached, %d refused a slot", attached, refused);
    CHECK(rd_reap(churner, 60000) == 0, "churn failed");
    long want = CHURN;
    CHECK(rd_wait_until(registers_told, &want, 10000),
          "not every register was told in the log");
    close(hold[1]);
    for (int i = 0; i < HOGS; i++)
        CHECK(rd_reap(hogs[i], 10000) == 0, "hog %d", i);
    int code = rd_daemon_stop_or_show_log(&D, SIGTERM);
    CHECK(code == 0, "the daemon exited %d", code);
    printf("neighbours_threads: %d of %d processes of one user attached "
           "(quota %d), %d registers told, %d stats reads and %d reloads\n",
           attached, HOGS, QUOTA, CHURN, ROUNDS, ROUNDS / 4);
    return 0;
}
