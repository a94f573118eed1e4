/* SPDX-License-Identifier: MIT */
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
 * Startup contract: that of every test server (srv_main.c, testsrv.h).
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
 * (the last two are those of every test server, see srv_main.c)
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
 * Control protocol: the common one of srv_control.c (COUNT, REJECTS, LOG,
 * CONNS, ACTIVE, IDLE, WAIT, MODE, RESET), where
 *   LOG <id>          ends each execution with the protocol as its tag:
 *                     "<n> <method> <bodylen> <fnv1a64-hex16> <idem>
 *                     <auth> <proto>", proto "h2:<stream-id>" or
 *                     "http/1.1" (retryd-faultsrv's format plus proto)
 *   REJECTS <id>      is always 0 (no /auth here; keeps testsrv_rejects
 *                     valid)
 *   RESET             also clears REFUSED, STREAMS and /refuse-once state
 * plus two commands of its own (the `commands` table below):
 *   REFUSED <id>      streams of id refused without execution (above)
 *   STREAMS           HTTP/2 request streams opened so far, executed or not
 */
#include "h2srv.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct options {
    struct srv_options common;
    bool h2c, tls, http11_only;
    const char *cert_out;
};

/* Sets up one connection: its input buffer and, with --tls, its TLS
 * object (the handshake itself comes later, in h2_conn_serve). */
static int conn_setup(struct h2_conn *c)
{
    SSL_CTX *tls = c->srv->data;

    if (!(c->in = malloc(H2_IN_CAP)))
        return -ENOMEM;
    if (!tls)
        return 0;
    if (!(c->ssl = SSL_new(tls)) || SSL_set_fd(c->ssl, c->fd) != 1)
        return -ENOMEM;
    SSL_set_accept_state(c->ssl);
    return 0;
}

/* The srv_ops.serve_http hook: one HTTP connection, on its thread. */
static void serve_http(struct srv *srv, int fd, unsigned long num)
{
    struct h2_conn c = {.srv = srv,
                        .fd = fd,
                        .num = num,
                        .rd_wait = POLLIN,
                        .wr_wait = POLLOUT};

    if (conn_setup(&c) == 0)
        h2_conn_serve(&c); /* closes the connection itself */
    else
        fprintf(stderr, "h2srv: conn=%lu: out of memory\n", num);
    h2_io_close(&c, false); /* frees the SSL, closes fd */
    h2_conn_free_buffers(&c);
}

/* srv_ops.start: with --tls, the TLS context in srv->data. Before the
 * PORT line, so that once a test has read that line, the certificate file
 * of --cert-out is there. */
static int start(struct srv *srv, void *arg)
{
    const struct options *o = arg;

    if (o->tls && !(srv->data = h2_tls_context(o->cert_out, o->http11_only)))
        return -1;
    return 0;
}

static void stop(struct srv *srv)
{
    h2_tls_free(srv->data);
    srv->data = NULL;
}

static const struct srv_command commands[] = {
    {"REFUSED", true, H2_TALLY_REFUSED},
    {"STREAMS", false, H2_COUNTER_STREAMS},
};

static const struct srv_ops ops = {
    .name = "h2srv",
    .serve_http = serve_http,
    .start = start,
    .stop = stop,
    .commands = commands,
    .n_commands = sizeof commands / sizeof commands[0],
};

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
    *o = (struct options){.common = srv_default_options()};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--h2c") == 0)
            o->h2c = true;
        else if (strcmp(argv[i], "--tls") == 0)
            o->tls = true;
        else if (strcmp(argv[i], "--http11-only") == 0)
            o->http11_only = true;
        else if (strcmp(argv[i], "--cert-out") == 0 && i + 1 < argc)
            o->cert_out = argv[++i];
        else if (!srv_option(&o->common, argv[i]))
            return usage(argv[0]);
    }
    if (o->h2c == o->tls || ((o->cert_out || o->http11_only) && !o->tls))
        return usage(argv[0]);
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;

    if (parse_options(argc, argv, &opt) < 0)
        return 2;
    return srv_main(&ops, &opt.common, &opt);
}
