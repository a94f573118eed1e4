/* SPDX-License-Identifier: MIT */
/* Startup, accept loop and shutdown of the test servers: the part of the
 * startup contract (testsrv.h) that both implement the same way.
 *
 *   binds 127.0.0.1 (HTTP: --bind=ADDR, another loopback address) on two
 *   ephemeral ports (HTTP, control), prints exactly
 *   one line "PORT <http> CONTROL <control>\n" on stdout, flushes, and
 *   never writes to stdout again (diagnostics go to stderr). Exits with
 *   status 0 on SIGTERM/SIGINT and when stdin reaches EOF: the test
 *   harness holds the write end of a pipe on our stdin, so a crashed test
 *   leaves no orphan. --ignore-stdin (run standalone, e.g. `</dev/null`)
 *   turns the latter off; --verbose asks for one stderr line per request.
 *
 * The main thread only polls: the listeners, the signalfd and stdin. Each
 * accepted connection gets a thread (the server's serve_http hook, or the
 * control protocol), and shutdown wakes them all through the stop eventfd
 * and joins them, so that sanitizers see a clean exit. */
#include "srv_common.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* One connection thread. Joinable rather than detached so that shutdown
 * can wait for all of them. */
struct worker {
    struct worker *next;
    pthread_t thread;
    atomic_bool done;
    struct srv *srv;
    int fd;
    bool control;
    unsigned long num; /* HTTP connection ordinal */
};

/* --- options -------------------------------------------------------------- */

struct srv_options srv_default_options(void)
{
    return (struct srv_options){.watch_stdin = true, .bind = "127.0.0.1"};
}

/* Consumes one of the options every server takes; false for any other
 * argument (the server's own, or a usage error). */
bool srv_option(struct srv_options *o, const char *arg)
{
    if (strcmp(arg, "--ignore-stdin") == 0)
        o->watch_stdin = false;
    else if (strcmp(arg, "--verbose") == 0)
        o->verbose = true;
    else if (strncmp(arg, "--bind=", 7) == 0)
        o->bind = arg + 7;
    else
        return false;
    return true;
}

/* --- connection threads --------------------------------------------------- */

/* A control connection: the protocol of srv_control.c. */
static void serve_control(struct srv *srv, int fd)
{
    struct srv_conn c;

    if (srv_conn_init(&c, srv, fd, 0) == 0)
        srv_control_serve(&c);
    else
        fprintf(stderr, "%s: control connection: out of memory\n",
                srv->ops->name);
    srv_conn_free(&c); /* closes fd */
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    if (w->control) {
        serve_control(w->srv, w->fd);
    } else {
        w->srv->ops->serve_http(w->srv, w->fd, w->num); /* closes fd */
        srv_stats_conn_closed(w->srv->stats);
    }
    atomic_store(&w->done, true);
    return NULL;
}

/* Starts a thread for an accepted socket; on failure closes it. */
static void spawn_worker(struct srv *srv, int fd, bool control,
                         unsigned long num, struct worker **list)
{
    struct worker *w = calloc(1, sizeof *w);
    int rc = ENOMEM;

    if (w) {
        w->srv = srv;
        w->fd = fd;
        w->control = control;
        w->num = num;
        atomic_init(&w->done, false);
        rc = pthread_create(&w->thread, NULL, worker_main, w);
    }
    if (rc == 0) {
        w->next = *list;
        *list = w;
        return;
    }
    fprintf(stderr, "%s: cannot start a connection thread: %s\n",
            srv->ops->name, strerror(rc));
    close(fd);
    if (!control)
        srv_stats_conn_closed(srv->stats);
    free(w);
}

/* Joins finished workers (all of them when `all`, waiting if needed). */
static void reap_workers(struct worker **list, bool all)
{
    struct worker **pp = list;

    while (*pp) {
        struct worker *w = *pp;

        if (all || atomic_load(&w->done)) {
            pthread_join(w->thread, NULL);
            *pp = w->next;
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

/* --- listening ------------------------------------------------------------ */

/* Accepts everything pending on a listener. */
static void accept_all(struct srv *srv, int lfd, bool control,
                       struct worker **list)
{
    for (;;) {
        int one = 1;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                fprintf(stderr, "%s: accept: %s\n", srv->ops->name,
                        strerror(errno));
            return;
        }
        if (control) {
            spawn_worker(srv, fd, true, 0, list);
            continue;
        }
        /* Counted by this thread, before the connection's own exists, so
         * IDLE can never miss a connection that was accepted. */
        bool close_now = atomic_load(&srv->accept_close);
        unsigned long num = srv_stats_conn_accepted(srv->stats, !close_now);
        if (close_now) {
            close(fd); /* MODE accept-close: nothing read, nothing sent */
            continue;
        }
        /* Answers go out in pieces (a head and a body; HEADERS, then
         * DATA): without NODELAY, Nagle plus delayed ACKs would stall
         * them. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        spawn_worker(srv, fd, false, num, list);
    }
}

/* Only an address of 127.0.0.0/8: a test server never listens beyond the
 * machine. */
static int listen_loopback(const char *addr, int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof sa;

    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
        (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(fd, SOMAXCONN) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int e = errno;

        close(fd);
        return -e;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* --- signals and stdin ---------------------------------------------------- */

/* SIGTERM/SIGINT arrive through a signalfd that the main loop polls, so no
 * code runs in signal context. They are blocked before any thread exists
 * (threads inherit the mask). Dispositions are reset first: an ignored
 * signal would never reach the signalfd, and a parent may have left
 * SIGTERM ignored. SIGPIPE is ignored: plain sockets are written with
 * MSG_NOSIGNAL, but OpenSSL (h2srv) uses write(), and a client that left
 * must not kill the server. */
static int setup_signals(void)
{
    sigset_t set;

    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Returns true when stdin reached EOF (or broke): time to go. */
static bool stdin_closed(void)
{
    char buf[256];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);

    return n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
}

/* Polls the listeners, the signalfd and stdin until it is time to stop.
 * Returns 0 on a requested stop, -1 if polling itself failed. */
static int main_loop(struct srv *srv, int http_fd, int ctl_fd,
                     struct worker **list)
{
    for (;;) {
        struct pollfd p[4] = {
            {.fd = srv->sig_fd, .events = POLLIN},
            {.fd = http_fd, .events = POLLIN},
            {.fd = ctl_fd, .events = POLLIN},
            {.fd = srv->watch_stdin ? STDIN_FILENO : -1, .events = POLLIN},
        };

        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "%s: poll: %s\n", srv->ops->name, strerror(errno));
            return -1;
        }
        if (p[0].revents)
            return 0; /* SIGTERM or SIGINT */
        if (p[3].revents && ((p[3].revents & POLLNVAL) || stdin_closed()))
            return 0;
        if (p[1].revents)
            accept_all(srv, http_fd, false, list);
        if (p[2].revents)
            accept_all(srv, ctl_fd, true, list);
        reap_workers(list, false);
    }
}

/* --- the server's life ---------------------------------------------------- */

/* Blocks the signals and creates the stop eventfd and the counters: to be
 * called before anything else starts (no thread may exist yet). Returns 0,
 * or -1 after saying why; call srv_destroy() either way. */
static int srv_init(struct srv *srv, const struct srv_ops *ops,
                    const struct srv_options *o)
{
    memset(srv, 0, sizeof *srv);
    srv->ops = ops;
    srv->verbose = o->verbose;
    srv->watch_stdin = o->watch_stdin;
    srv->bind = o->bind;
    srv->stop_fd = srv->sig_fd = -1;
    atomic_init(&srv->accept_close, false);
    atomic_init(&srv->flip_status, 200);
    atomic_init(&srv->latency_scale, 100);
    if ((srv->sig_fd = setup_signals()) < 0 ||
        (srv->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        !(srv->stats = srv_stats_new())) {
        fprintf(stderr, "%s: setup: %s\n", ops->name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Listens, prints the PORT line and serves until told to stop; then
 * refuses new connections, wakes every blocked thread and waits for all.
 * Returns the exit status: 0 for a requested stop. */
static int srv_run(struct srv *srv)
{
    struct worker *workers = NULL;
    int http_port = 0, ctl_port = 0, http_fd, ctl_fd = -1, rc = -1;
    uint64_t one = 1;

    if ((http_fd = listen_loopback(srv->bind, &http_port)) < 0 ||
        (ctl_fd = listen_loopback("127.0.0.1", &ctl_port)) < 0) {
        fprintf(stderr, "%s: listen: %s\n", srv->ops->name,
                strerror(-(http_fd < 0 ? http_fd : ctl_fd)));
        goto out;
    }
    printf("PORT %d CONTROL %d\n", http_port, ctl_port);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: stdout: %s\n", srv->ops->name, strerror(errno));
        goto out;
    }

    rc = main_loop(srv, http_fd, ctl_fd, &workers);

    close(http_fd);
    close(ctl_fd);
    http_fd = ctl_fd = -1;
    if (write(srv->stop_fd, &one, sizeof one) < 0)
        fprintf(stderr, "%s: eventfd: %s\n", srv->ops->name, strerror(errno));
    srv_stats_stop(srv->stats);
    reap_workers(&workers, true);
out:
    if (http_fd >= 0)
        close(http_fd);
    if (ctl_fd >= 0)
        close(ctl_fd);
    return rc == 0 ? 0 : 1;
}

/* Releases what srv_init() made (after srv_run, or after a failed init). */
static void srv_destroy(struct srv *srv)
{
    if (srv->stop_fd >= 0)
        close(srv->stop_fd);
    if (srv->sig_fd >= 0)
        close(srv->sig_fd);
    srv_stats_free(srv->stats);
    srv->stop_fd = srv->sig_fd = -1;
    srv->stats = NULL;
}

/* A server's whole life, for its main() once the options are parsed:
 * init, ops->start(arg), run, ops->stop. Returns the exit status. */
int srv_main(const struct srv_ops *ops, const struct srv_options *o, void *arg)
{
    struct srv srv;
    int status = 1;

    if (srv_init(&srv, ops, o) == 0 &&
        (!ops->start || ops->start(&srv, arg) == 0))
        status = srv_run(&srv);
    if (ops->stop)
        ops->stop(&srv);
    srv_destroy(&srv);
    return status;
}
