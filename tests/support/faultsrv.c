/* retryd-faultsrv: a fault-injecting HTTP/1.1 server for retryd's tests.
 *
 * The client library must classify, per failed attempt, what is proven
 * about whether the server executed the request. To test that against real
 * sockets, this server misbehaves on request, one way per path, and counts
 * what it executed so tests can compare "what the client concluded" with
 * "what really happened".
 *
 * Startup contract (shared with the HTTP/2 test server; see testsrv.h):
 *   binds 127.0.0.1 on two ephemeral ports, prints exactly one line
 *   "PORT <http> CONTROL <control>\n" on stdout, flushes, and never writes
 *   to stdout again (diagnostics go to stderr). Exits with status 0 on
 *   SIGTERM/SIGINT and when stdin reaches EOF: the test harness holds the
 *   write end of a pipe on our stdin, so a crashed test leaves no orphan.
 *   Options: --ignore-stdin (run standalone, e.g. `</dev/null`),
 *            --verbose (one stderr line per request).
 *
 * "Executed" = the server read the complete request, header and whole
 * body. Executions are counted per request id: the query parameter id=,
 * else the X-Request-Id header, else "-".
 *
 * Paths (query parameters configure them; all but /close-before-read and
 * /auth-401 count an execution before doing anything visible):
 *   /ok[?len=N]            200, body "ok" or N bytes of 'x'
 *   /echo                  200, the request body
 *   /close-before-read     close after the head, body unread: NOT counted
 *                          (the tests' "server closed before executing")
 *   /close-after-read      close (FIN) without a response
 *   /reset-after-read      reset (RST) without a response
 *   /hold[?ms=N]           answer 200 after N ms; without ms only when the
 *                          client disconnects (then no answer)
 *   /partial?len=N&sent=M  Content-Length N, M body bytes, then RST
 *                          (defaults: N=100, M=N/2)
 *   /status?code=NNN[&retry_after=V]  that status (200-599), V decoded
 *   /once425               per id: first execution 425, later 200
 *   /auth[?token=T]        200 with "Authorization: Bearer T" (counted),
 *                          else 401 + WWW-Authenticate (a reject, not an
 *                          execution); without token= any bearer passes
 *   /seq?codes=a,b,c       per id: n-th execution answers the n-th code,
 *                          the last one repeats
 *   /drop-second           requests after the first on a connection: read,
 *                          count, close without answer
 *   /interim-then-close    "103 Early Hints" and close
 *   /slow-body?len=N&chunk=C&ms=D  200, N bytes ("abc..z" repeated) sent C
 *                          at a time every D ms (defaults 64, 8, 10)
 *   anything else          404 (counted)
 * Bad parameters answer 400 (counted, except on /auth). Request ids are
 * 1..255 bytes without spaces or control characters; any other id, a
 * malformed request, or one over a limit (head 64 KiB: 431; body 16 MiB:
 * 413) is answered and closed without counting. 204 and 304 carry no
 * Content-Length (RFC 9110 forbids it on 204); all other responses do.
 *
 * Control protocol (control port, one command per line, one reply line
 * per command, any number of commands per connection):
 *   COUNT <id>        executions of id
 *   REJECTS <id>      401s of /auth for id
 *   LOG <id>          "0", or per execution, in order, separated by " ; ":
 *                     "<n> <method> <bodylen> <fnv1a64-hex16> <idem> <auth>"
 *                     (Idempotency-Key / Authorization percent-encoded so
 *                     they contain no space or ';'; "-" when absent)
 *   CONNS             HTTP connections accepted so far
 *   MODE accept-close|normal  accept-close: close each new HTTP connection
 *                     right after accept, before reading anything -> OK
 *   RESET             clears counters, logs and CONNS -> OK (MODE stays)
 *   ACTIVE            HTTP connections currently open (extension)
 *   IDLE <ms>         waits up to ms until ACTIVE is 0 -> OK | TIMEOUT <n>
 *   WAIT <n> <ms> <id> waits up to ms until COUNT id >= n -> <count>
 *   anything else     ERR <reason>
 */
#include "faultsrv.h"

#include <errno.h>
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
 * can wait for all of them: sanitizers then see a clean exit. */
struct worker {
    struct worker *next;
    pthread_t thread;
    atomic_bool done;
    bool control;
    struct fs_conn conn;
};

struct options {
    bool watch_stdin;
    bool verbose;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    if (w->control) {
        fs_control_serve(&w->conn);
        fs_close(&w->conn);
    } else {
        fs_http_serve(&w->conn); /* closes the socket itself */
        fs_close(&w->conn);
        fs_stats_conn_closed(w->conn.srv->stats);
    }
    atomic_store(&w->done, true);
    return NULL;
}

static void free_worker(struct worker *w)
{
    free(w->conn.in);
    free(w);
}

/* Starts a thread for an accepted socket; on failure closes it. */
static void spawn_worker(struct fs_server *srv, int fd, bool control,
                         struct worker **list)
{
    struct worker *w = calloc(1, sizeof *w);
    int rc = ENOMEM;

    if (w && (w->conn.in = malloc(FS_IN_CAP))) {
        w->control = control;
        w->conn.srv = srv;
        w->conn.fd = fd;
        atomic_init(&w->done, false);
        rc = pthread_create(&w->thread, NULL, worker_main, w);
    }
    if (rc == 0) {
        w->next = *list;
        *list = w;
        return;
    }
    fprintf(stderr, "faultsrv: cannot start a connection thread: %s\n",
            strerror(rc));
    close(fd);
    if (!control)
        fs_stats_conn_closed(srv->stats);
    if (w)
        free_worker(w);
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
            free_worker(w);
        } else {
            pp = &w->next;
        }
    }
}

/* Accepts everything pending on a listener. */
static void accept_all(struct fs_server *srv, int lfd, bool control,
                       struct worker **list)
{
    for (;;) {
        int one = 1;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                fprintf(stderr, "faultsrv: accept: %s\n", strerror(errno));
            return;
        }
        if (control) {
            spawn_worker(srv, fd, true, list);
            continue;
        }
        bool close_now = atomic_load(&srv->accept_close);
        fs_stats_conn_accepted(srv->stats, !close_now);
        if (close_now) {
            close(fd); /* MODE accept-close: nothing read, nothing sent */
            continue;
        }
        /* Responses go out in two writes (head, body): without NODELAY,
         * Nagle plus delayed ACKs would stall keep-alive connections. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        spawn_worker(srv, fd, false, list);
    }
}

static int listen_loopback(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
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

/* SIGTERM/SIGINT arrive through a signalfd that the main loop polls, so no
 * code runs in signal context. They are blocked before any thread exists
 * (threads inherit the mask). Dispositions are reset first: an ignored
 * signal would never reach the signalfd, and a parent may have left
 * SIGTERM ignored. SIGPIPE is ignored (writes use MSG_NOSIGNAL anyway). */
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
static int main_loop(struct fs_server *srv, int http_fd, int ctl_fd, int sig_fd,
                     bool watch_stdin, struct worker **list)
{
    for (;;) {
        struct pollfd p[4] = {
            {.fd = sig_fd, .events = POLLIN},
            {.fd = http_fd, .events = POLLIN},
            {.fd = ctl_fd, .events = POLLIN},
            {.fd = watch_stdin ? STDIN_FILENO : -1, .events = POLLIN},
        };

        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "faultsrv: poll: %s\n", strerror(errno));
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

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.watch_stdin = true};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ignore-stdin") == 0) {
            o->watch_stdin = false;
        } else if (strcmp(argv[i], "--verbose") == 0) {
            o->verbose = true;
        } else {
            fprintf(stderr, "usage: %s [--ignore-stdin] [--verbose]\n",
                    argv[0]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct fs_server srv = {.stop_fd = -1};
    struct worker *workers = NULL;
    struct options opt;
    int http_port = 0, ctl_port = 0, status = 1, rc;
    int sig_fd = -1, http_fd = -1, ctl_fd = -1;
    uint64_t one = 1;

    if (parse_options(argc, argv, &opt) < 0)
        return 2;
    srv.verbose = opt.verbose;
    atomic_init(&srv.accept_close, false);
    if ((sig_fd = setup_signals()) < 0 ||
        (srv.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        !(srv.stats = fs_stats_new())) {
        perror("faultsrv: setup");
        goto out;
    }
    if ((http_fd = listen_loopback(&http_port)) < 0 ||
        (ctl_fd = listen_loopback(&ctl_port)) < 0) {
        fprintf(stderr, "faultsrv: listen: %s\n",
                strerror(-(http_fd < 0 ? http_fd : ctl_fd)));
        goto out;
    }
    printf("PORT %d CONTROL %d\n", http_port, ctl_port);
    if (fflush(stdout) != 0) {
        perror("faultsrv: stdout");
        goto out;
    }

    rc = main_loop(&srv, http_fd, ctl_fd, sig_fd, opt.watch_stdin, &workers);

    /* Refuse new connections, wake every blocked thread, wait for all. */
    close(http_fd);
    close(ctl_fd);
    http_fd = ctl_fd = -1;
    if (write(srv.stop_fd, &one, sizeof one) < 0)
        perror("faultsrv: eventfd");
    fs_stats_stop(srv.stats);
    reap_workers(&workers, true);
    status = rc == 0 ? 0 : 1;
out:
    if (http_fd >= 0)
        close(http_fd);
    if (ctl_fd >= 0)
        close(ctl_fd);
    if (srv.stop_fd >= 0)
        close(srv.stop_fd);
    if (sig_fd >= 0)
        close(sig_fd);
    fs_stats_free(srv.stats);
    return status;
}
