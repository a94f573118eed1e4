/* retryd-h2srv: a fault-injecting HTTP/2 server for retryd's tests.
 *
 * The client library must classify, per failed attempt, what is proven
 * about whether the server executed the request. HTTP/2 can prove "not
 * processed" (RST_STREAM(REFUSED_STREAM), a GOAWAY whose last-stream-id
 * is below the request's stream), so this server sends those frames on
 * request, one fault per path, and counts what it executed and what it
 * refused, so tests can compare "what the client concluded" with "what
 * really happened". It is the HTTP/2 counterpart of retryd-faultsrv.
 *
 * Startup contract (the same as retryd-faultsrv; see testsrv.h):
 *   binds 127.0.0.1 on two ephemeral ports, prints exactly one line
 *   "PORT <http> CONTROL <control>\n" on stdout, flushes, and never writes
 *   to stdout again (diagnostics go to stderr). Exits with status 0 on
 *   SIGTERM/SIGINT and when stdin reaches EOF: the test harness holds the
 *   write end of a pipe on our stdin, so a crashed test leaves no orphan.
 *
 * Options (one of --h2c and --tls is required):
 *   --h2c              cleartext HTTP/2 with prior knowledge: the client
 *                      sends the connection preface at once. A connection
 *                      that starts with anything else is served as
 *                      HTTP/1.1 (libcurl's downgrade after
 *                      HTTP_1_1_REQUIRED reconnects that way).
 *   --tls              HTTP/2 over TLS, ALPN "h2" (http/1.1 also offered,
 *                      for downgrades). The certificate is self-signed,
 *                      made at startup in memory, for 127.0.0.1 and
 *                      localhost.
 *   --cert-out PATH    write that certificate (PEM) to PATH before the
 *                      PORT line, for CURLOPT_CAINFO.
 *   --http11-only      with --tls: ALPN offers only http/1.1 (the server
 *                      then speaks HTTP/1.1; see h2srv_http1.c).
 *   --ignore-stdin     run standalone (e.g. `</dev/null`).
 *   --verbose          one stderr line per request outcome.
 *
 * "Executed" = the server received the request's END_STREAM (the whole
 * request, body included) and processed it. Executions are counted per
 * request id: the query parameter id=, else the x-request-id header, else
 * "-" (1..255 bytes, no spaces or control characters; others: 400).
 *
 * Paths (query parameters configure them):
 *   /ok[?len=N]           200, body "ok" or N bytes of 'x'
 *   /echo                 200, the request body
 *   /status?code=NNN[&retry_after=V]  that status (200-599), V decoded
 *   /hold[?ms=N]          execute, answer "ok" after N ms; without ms=
 *                         never: held until the client resets the stream
 *                         or closes the connection (noticed: the stream is
 *                         dropped, --verbose reports it)
 *   /refuse               RST_STREAM(REFUSED_STREAM) as soon as the request
 *                         headers arrive; never executed; REFUSED +1
 *   /refuse-once          per id: the first stream is refused like
 *                         /refuse, later ones are executed like /ok
 *   /goaway               on the request headers: GOAWAY(last-stream-id =
 *                         this stream - 2, i.e. 0 for stream 1; NO_ERROR);
 *                         not executed; REFUSED +1; the connection closes
 *                         after flushing, once the streams at or below
 *                         last-stream-id are finished
 *   /goaway-after         execute, answer like /ok, then GOAWAY with
 *                         last-stream-id = this stream (the control case)
 *   /reset-after-read     execute, then RST_STREAM(INTERNAL_ERROR) without
 *                         a response
 *   /reset-after-headers?len=N&sent=M  execute, HEADERS with
 *                         content-length N, M bytes of DATA, then
 *                         RST_STREAM(INTERNAL_ERROR) (defaults 100, N/2);
 *                         a PING round trip separates the reset from the
 *                         data, so the client has seen both first (see
 *                         submit_rst_after_ping in h2srv_session.c)
 *   /http11-required      RST_STREAM(HTTP_1_1_REQUIRED) before executing;
 *                         REFUSED +1; over HTTP/1.1 executed like /ok
 *   anything else         404 (executed)
 * Bad parameters answer 400 (executed). Not executed, and answered
 * instead: header fields over 32 KiB (431), a body over 16 MiB (413), a
 * malformed id (400); when the request body is still coming, the answer
 * is followed by RST_STREAM(NO_ERROR) (RFC 9113 8.1). Streams above the
 * last-stream-id of a GOAWAY we sent that were not executed yet count in
 * REFUSED too: REFUSED is "the server told the client this stream was not
 * processed".
 *
 * Control protocol (control port, one command per line, one reply line
 * per command, any number of commands per connection):
 *   COUNT <id>        executions of id
 *   REFUSED <id>      streams of id refused without execution (above)
 *   LOG <id>          "0", or per execution, in order, separated by " ; ":
 *                     "<n> <method> <bodylen> <fnv1a64-hex16> <idem>
 *                     <auth> <proto>" (Idempotency-Key / Authorization
 *                     percent-encoded so they contain no space or ';',
 *                     "-" when absent; proto "h2:<stream-id>" or
 *                     "http/1.1"): retryd-faultsrv's format plus proto
 *   CONNS             HTTP connections accepted so far
 *   STREAMS           HTTP/2 request streams opened so far, executed or not
 *   ACTIVE            HTTP connections currently open
 *   IDLE <ms>         waits up to ms until ACTIVE is 0 -> OK | TIMEOUT <n>
 *   WAIT <n> <ms> <id> waits up to ms until COUNT id >= n -> <count>
 *   MODE accept-close|normal  accept-close: close each new HTTP connection
 *                     right after accept, before reading anything -> OK
 *   REJECTS <id>      always 0 (no /auth here; keeps testsrv_rejects valid)
 *   RESET             clears counters, logs, /refuse-once state, CONNS and
 *                     STREAMS -> OK (MODE stays)
 *   anything else     ERR <reason>
 */
#include "h2srv.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
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
    struct h2_conn conn;
};

struct options {
    bool watch_stdin;
    bool verbose;
    bool h2c, tls, http11_only;
    const char *cert_out;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    if (w->control) {
        h2_control_serve(&w->conn);
        h2_io_close(&w->conn, false);
    } else {
        h2_conn_serve(&w->conn); /* closes the connection itself */
        h2_io_close(&w->conn, false);
        h2_stats_conn_closed(w->conn.srv->stats);
    }
    atomic_store(&w->done, true);
    return NULL;
}

static void free_worker(struct worker *w)
{
    h2_conn_free_buffers(&w->conn);
    free(w);
}

/* Makes the TLS object for a new connection (the handshake itself runs on
 * the connection's thread). */
static int attach_tls(struct h2_server *srv, struct h2_conn *c)
{
    if (!srv->tls)
        return 0;
    if (!(c->ssl = SSL_new(srv->tls)) || SSL_set_fd(c->ssl, c->fd) != 1)
        return -ENOMEM;
    SSL_set_accept_state(c->ssl);
    return 0;
}

/* Starts a thread for an accepted socket; on failure closes it. */
static void spawn_worker(struct h2_server *srv, int fd, bool control,
                         unsigned long num, struct worker **list)
{
    struct worker *w = calloc(1, sizeof *w);
    int rc = ENOMEM;

    if (w) {
        w->control = control;
        w->conn = (struct h2_conn){.srv = srv,
                                   .fd = fd,
                                   .num = num,
                                   .rd_wait = POLLIN,
                                   .wr_wait = POLLOUT};
        atomic_init(&w->done, false);
        if ((w->conn.in = malloc(H2_IN_CAP)) &&
            (control || attach_tls(srv, &w->conn) == 0))
            rc = pthread_create(&w->thread, NULL, worker_main, w);
    }
    if (rc == 0) {
        w->next = *list;
        *list = w;
        return;
    }
    fprintf(stderr, "h2srv: cannot start a connection thread: %s\n",
            strerror(rc));
    if (w) {
        h2_io_close(&w->conn, false); /* frees the SSL, closes fd */
        free_worker(w);
    } else {
        close(fd);
    }
    if (!control)
        h2_stats_conn_closed(srv->stats);
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
static void accept_all(struct h2_server *srv, int lfd, bool control,
                       struct worker **list)
{
    for (;;) {
        int one = 1;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                fprintf(stderr, "h2srv: accept: %s\n", strerror(errno));
            return;
        }
        if (control) {
            spawn_worker(srv, fd, true, 0, list);
            continue;
        }
        bool close_now = atomic_load(&srv->accept_close);
        unsigned long num = h2_stats_conn_accepted(srv->stats, !close_now);
        if (close_now) {
            close(fd); /* MODE accept-close: nothing read, nothing sent */
            continue;
        }
        /* Frames go out as they are produced (a HEADERS, later a DATA):
         * without NODELAY, Nagle plus delayed ACKs would stall them. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        spawn_worker(srv, fd, false, num, list);
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
 * SIGTERM ignored. SIGPIPE is ignored: OpenSSL writes with plain write(),
 * without MSG_NOSIGNAL, and a client that left must not kill the server. */
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
static int main_loop(struct h2_server *srv, int http_fd, int ctl_fd, int sig_fd,
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
            fprintf(stderr, "h2srv: poll: %s\n", strerror(errno));
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

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --h2c|--tls [--cert-out PATH] [--http11-only]\n"
            "          [--ignore-stdin] [--verbose]\n",
            argv0);
    return -1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.watch_stdin = true};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--h2c") == 0)
            o->h2c = true;
        else if (strcmp(argv[i], "--tls") == 0)
            o->tls = true;
        else if (strcmp(argv[i], "--http11-only") == 0)
            o->http11_only = true;
        else if (strcmp(argv[i], "--cert-out") == 0 && i + 1 < argc)
            o->cert_out = argv[++i];
        else if (strcmp(argv[i], "--ignore-stdin") == 0)
            o->watch_stdin = false;
        else if (strcmp(argv[i], "--verbose") == 0)
            o->verbose = true;
        else
            return usage(argv[0]);
    }
    if (o->h2c == o->tls || ((o->cert_out || o->http11_only) && !o->tls))
        return usage(argv[0]);
    return 0;
}

int main(int argc, char **argv)
{
    struct h2_server srv = {.stop_fd = -1};
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
        !(srv.stats = h2_stats_new())) {
        perror("h2srv: setup");
        goto out;
    }
    if (opt.tls && !(srv.tls = h2_tls_context(opt.cert_out, opt.http11_only)))
        goto out;
    if ((http_fd = listen_loopback(&http_port)) < 0 ||
        (ctl_fd = listen_loopback(&ctl_port)) < 0) {
        fprintf(stderr, "h2srv: listen: %s\n",
                strerror(-(http_fd < 0 ? http_fd : ctl_fd)));
        goto out;
    }
    printf("PORT %d CONTROL %d\n", http_port, ctl_port);
    if (fflush(stdout) != 0) {
        perror("h2srv: stdout");
        goto out;
    }

    rc = main_loop(&srv, http_fd, ctl_fd, sig_fd, opt.watch_stdin, &workers);

    /* Refuse new connections, wake every blocked thread, wait for all. */
    close(http_fd);
    close(ctl_fd);
    http_fd = ctl_fd = -1;
    if (write(srv.stop_fd, &one, sizeof one) < 0)
        perror("h2srv: eventfd");
    h2_stats_stop(srv.stats);
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
    h2_tls_free(srv.tls);
    h2_stats_free(srv.stats);
    return status;
}
