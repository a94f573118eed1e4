/* SPDX-License-Identifier: MIT */
/*
 * retryd-storm-upstream: the upstream of the one-host storm (bench_storm,
 * docs/storms.md). An HTTP/1.1 server on 127.0.0.1 with bounded capacity,
 * shaped like the simulator's deepest layer: WORKERS threads each serve
 * one request at a time for SERVICE_US microseconds (asleep: the capacity
 * is the pool's, not the machine's two cores), requests wait in a
 * first-come, first-served queue of QUEUE beyond the busy workers, and a
 * request that finds the queue full is answered 503 at once by the I/O
 * thread. A request whose caller gave up (closed its connection) is still
 * queued and still served, its answer then dropped: abandoned work costs
 * what it would have.
 *
 * usage: retryd-storm-upstream WORKERS SERVICE_US QUEUE EPOCH_NS
 *   prints "port N" once it listens; SIGUSR1 puts half the workers to
 *   rest (each after its request), SIGUSR2 wakes them; SIGTERM ends it,
 *   printing per second since EPOCH_NS (CLOCK_MONOTONIC) "s arrivals
 *   served stale rejected", then "service_ns MEAN" (what a service took,
 *   measured).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SECONDS 3600
#define MAX_EVENTS 256
#define REQ_MAX 8192

static const char ok_reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 2\r\n\r\nok";
static const char busy_reply[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                 "Content-Length: 0\r\n\r\n";

/* A connection: the I/O thread's while it is open, and each request's
 * until it is answered; closed when nobody holds it, so that its
 * descriptor is never reused under a worker's answer. */
typedef struct conn {
    int fd;
    int refs;
    bool open;
    size_t len;
    char buf[REQ_MAX];
} conn;

typedef struct job {
    conn *c;
    struct job *next;
} job;

typedef struct counts {
    _Atomic uint32_t arrivals, served, stale, rejected;
} counts;

static struct {
    pthread_mutex_t lock; /* the queue, the workers, every conn's refs */
    pthread_cond_t wake;
    job *head, *tail;
    uint32_t queued, busy, active, workers, queue_cap;
    bool stop;
    int64_t service_ns, epoch_ns;
    _Atomic int64_t served_ns, served_n;
    counts *per_s;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static counts *second(void)
{
    int64_t s = (now_ns() - S.epoch_ns) / 1000000000;
    return s >= 0 && s < MAX_SECONDS ? &S.per_s[s] : &S.per_s[MAX_SECONDS];
}

/* Under S.lock. */
static void unref(conn *c)
{
    if (--c->refs == 0) {
        close(c->fd);
        free(c);
    }
}

static void reply(conn *c, const char *text, size_t len)
{
    /* An answer is a hundred bytes: it fits the socket's buffer, and a
     * peer that left makes this fail, which is its business. */
    (void)send(c->fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void serve(job *j)
{
    int64_t t0 = now_ns();
    struct timespec ts = {S.service_ns / 1000000000, S.service_ns % 1000000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    atomic_fetch_add(&S.served_ns, now_ns() - t0);
    atomic_fetch_add(&S.served_n, 1);
    counts *k = second();
    atomic_fetch_add(&k->served, 1);
    pthread_mutex_lock(&S.lock);
    if (j->c->open)
        reply(j->c, ok_reply, sizeof(ok_reply) - 1);
    else
        atomic_fetch_add(&k->stale, 1);
    unref(j->c);
    pthread_mutex_unlock(&S.lock);
    free(j);
}

static void *worker(void *arg)
{
    uint32_t me = (uint32_t)(uintptr_t)arg;
    pthread_mutex_lock(&S.lock);
    for (;;) {
        while (!S.stop && (me >= S.active || S.head == NULL))
            pthread_cond_wait(&S.wake, &S.lock);
        if (S.stop)
            break;
        job *j = S.head;
        S.head = j->next;
        if (S.head == NULL)
            S.tail = NULL;
        S.queued--;
        S.busy++;
        pthread_mutex_unlock(&S.lock);
        serve(j);
        pthread_mutex_lock(&S.lock);
        S.busy--;
    }
    pthread_mutex_unlock(&S.lock);
    return NULL;
}

/* A whole request arrived on @p c: queue it, or turn it away. */
static void take(conn *c)
{
    atomic_fetch_add(&second()->arrivals, 1);
    job *j = malloc(sizeof(*j));
    pthread_mutex_lock(&S.lock);
    /* Waiting beyond the busy workers: what the simulator's queue holds. */
    uint32_t waiting =
        S.queued + S.busy > S.active ? S.queued + S.busy - S.active : 0;
    if (j == NULL || waiting >= S.queue_cap) {
        pthread_mutex_unlock(&S.lock);
        free(j);
        atomic_fetch_add(&second()->rejected, 1);
        reply(c, busy_reply, sizeof(busy_reply) - 1);
        return;
    }
    c->refs++;
    *j = (job){.c = c};
    if (S.tail)
        S.tail->next = j;
    else
        S.head = j;
    S.tail = j;
    S.queued++;
    pthread_cond_broadcast(&S.wake);
    pthread_mutex_unlock(&S.lock);
}

static void hang_up(int ep, conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    pthread_mutex_lock(&S.lock);
    c->open = false;
    unref(c);
    pthread_mutex_unlock(&S.lock);
}

/* Read what @p c has; each request ends at its blank line (the storm's
 * requests are GETs without a body). */
static void readable(int ep, conn *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            hang_up(ep, c);
            return;
        }
        if (n < 0)
            return;
        c->len += (size_t)n;
        char *end;
        while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) != NULL) {
            size_t used = (size_t)(end + 4 - c->buf);
            memmove(c->buf, c->buf + used, c->len - used);
            c->len -= used;
            take(c);
        }
        if (c->len == sizeof(c->buf)) { /* not HTTP as the storm sends it */
            hang_up(ep, c);
            return;
        }
    }
}

static void accept_all(int ep, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        *c = (conn){.fd = fd, .refs = 1, .open = true};
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
        }
    }
}

static void set_active(uint32_t n)
{
    pthread_mutex_lock(&S.lock);
    S.active = n;
    pthread_cond_broadcast(&S.wake);
    pthread_mutex_unlock(&S.lock);
}

/* The signals: true when it is time to stop. */
static bool on_signal(int sfd)
{
    struct signalfd_siginfo si;
    if (read(sfd, &si, sizeof(si)) != sizeof(si))
        return false;
    if (si.ssi_signo == SIGUSR1)
        set_active(S.workers / 2);
    else if (si.ssi_signo == SIGUSR2)
        set_active(S.workers);
    return si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT;
}

static int listen_loopback(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, 4096) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return -1;
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

static void print_counts(void)
{
    int64_t last = (now_ns() - S.epoch_ns) / 1000000000;
    for (int64_t s = 0; s <= last && s < MAX_SECONDS; s++)
        printf("%lld %u %u %u %u\n", (long long)s, S.per_s[s].arrivals,
               S.per_s[s].served, S.per_s[s].stale, S.per_s[s].rejected);
    int64_t n = atomic_load(&S.served_n);
    printf("service_ns %lld\n",
           (long long)(n ? atomic_load(&S.served_ns) / n : S.service_ns));
}

/* What the listening socket's and the signals' events carry. */
static char listen_tag, signal_tag;

static int loop(int ep, int lfd, int sfd)
{
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR)
            return -1;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &listen_tag)
                accept_all(ep, lfd);
            else if (evs[i].data.ptr == &signal_tag) {
                if (on_signal(sfd))
                    return 0;
            } else
                readable(ep, evs[i].data.ptr);
        }
    }
}

static bool arg(const char *s, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

int main(int argc, char **argv)
{
    long w, us, q, epoch;
    if (argc != 5 || !arg(argv[1], 1, 4096, &w) ||
        !arg(argv[2], 1, 60000000, &us) || !arg(argv[3], 0, 1000000, &q) ||
        !arg(argv[4], 0, INT64_MAX, &epoch)) {
        fprintf(stderr, "usage: retryd-storm-upstream WORKERS SERVICE_US "
                        "QUEUE EPOCH_NS\n");
        return 64;
    }
    S.workers = S.active = (uint32_t)w;
    S.service_ns = us * 1000;
    S.queue_cap = (uint32_t)q;
    S.epoch_ns = epoch;
    S.per_s = calloc(MAX_SECONDS + 1, sizeof(*S.per_s));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    /* Blocked before any thread starts: only the signalfd receives them. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int lfd = listen_loopback();
    if (S.per_s == NULL || sfd < 0 || ep < 0 || lfd < 0) {
        perror("retryd-storm-upstream");
        return 70;
    }
    struct epoll_event le = {.events = EPOLLIN, .data.ptr = &listen_tag};
    struct epoll_event se = {.events = EPOLLIN, .data.ptr = &signal_tag};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &le);
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &se);
    pthread_t *t = calloc((size_t)w, sizeof(*t));
    for (long i = 0; t != NULL && i < w; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    int r = t != NULL ? loop(ep, lfd, sfd) : -1;
    pthread_mutex_lock(&S.lock);
    S.stop = true;
    pthread_cond_broadcast(&S.wake);
    pthread_mutex_unlock(&S.lock);
    for (long i = 0; t != NULL && i < w; i++)
        pthread_join(t[i], NULL);
    print_counts();
    return r == 0 ? 0 : 70;
}
