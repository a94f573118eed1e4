/* SPDX-License-Identifier: MIT */
/*
 * The loopback nginx the HTTP benchmarks (bench_executor, bench_async)
 * measure against, and what goes with it: where the benchmark and nginx
 * run (CPU placement), a response sink, and nginx's own counters
 * (stub_status), which each benchmark checks so that a retry, a libcurl
 * re-send or a lost keep-alive connection fails it instead of flattering
 * it.
 *
 * nginx is Debian's, started with a configuration of its own in the
 * benchmark's temporary directory (every path its compiled-in defaults
 * would use points there), on a free port of 127.0.0.1, with
 * master_process off: one process that serves (the same event loop and
 * HTTP code as a worker's), is signalled and reaped directly, and dies
 * with us (PR_SET_PDEATHSIG). It also never changes user: as root, a
 * master's workers would switch to "nobody", which cannot read the 0700
 * temporary directory the static file lives in. Locations: /ok (200,
 * "ok"), /static/1k (a 1 KiB file), /status (stub_status).
 */
#ifndef RETRYD_BENCH_NGINX_H
#define RETRYD_BENCH_NGINX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <curl/curl.h>

#ifndef NGINX_PATH
#define NGINX_PATH "/usr/sbin/nginx"
#endif

typedef struct bench_nginx {
    const char *dir;        /* the benchmark's temporary directory */
    int worker_connections; /* nginx's bound on open connections */
    int cpu;                /* nginx's CPU, -1: not pinned */
    int port;               /* set by bench_nginx_start */
    pid_t pid;              /* 0 when not running */
} bench_nginx;

/* Start nginx as @p n says, on a free port (fresh ones when it cannot
 * bind), and wait until it accepts. 0, or -1 with a message. */
int bench_nginx_start(bench_nginx *n);

/* SIGQUIT (nginx's graceful shutdown) and reap; 0 when it exited 0 or
 * was not running. */
int bench_nginx_stop(bench_nginx *n);

/*
 * Where the benchmark and nginx run. @p mode "same": one CPU for both, so
 * that every request is two context switches on that CPU (on separate
 * CPUs each request wakes an idle CPU twice, which in a virtual machine
 * costs tens to hundreds of microseconds and swamps what is measured);
 * "split": one CPU each; "none": wherever the scheduler puts them. Pins
 * the calling thread; *@p self and *@p nginx get the CPUs (-1: not
 * pinned). 0 or -1.
 */
int bench_place(const char *mode, int *self, int *nginx);

/* Whether @p mode is one bench_place() knows. */
bool bench_place_mode_ok(const char *mode);

/* A growing buffer a write callback appends to. */
typedef struct bench_sink {
    char *buf;
    size_t len, cap;
} bench_sink;

/* CURLOPT_WRITEFUNCTION (and HEADERFUNCTION) appending to the bench_sink
 * @p ctx. */
size_t bench_sink_write(char *data, size_t size, size_t n, void *ctx);

/* An easy handle on nginx's stub_status at 127.0.0.1:@p port, on its own
 * connection, writing into @p sk; NULL with a message. */
CURL *bench_nginx_status_open(int port, bench_sink *sk);

/*
 * nginx's counters from stub_status, with @p status (an easy handle on
 * http://127.0.0.1:port/status, its write callback bench_sink_write into
 * @p sk): connections accepted, requests served (this query counts). 0 or
 * -1 with a message.
 */
int bench_nginx_counters(CURL *status, bench_sink *sk, long *accepts,
                         long *requests);

#endif
