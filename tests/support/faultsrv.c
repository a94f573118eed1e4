/* SPDX-License-Identifier: MIT */
/* retryd-faultsrv: a fault-injecting HTTP/1.1 server for retryd's tests.
 *
 * The client library must classify, per failed attempt, what is proven
 * about whether the server executed the request. To test that against real
 * sockets, this server misbehaves on request, one way per path, and counts
 * what it executed so tests can compare "what the client concluded" with
 * "what really happened".
 *
 * Startup contract and options (--ignore-stdin, --verbose): those of
 * every test server, see srv_main.c and testsrv.h.
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
 *   /flip                  200 "ok", or the status the control port's
 *                          FLIP set (an upstream that fails and heals)
 *   /reason?text=T         200 "ok" whose status line's reason phrase is
 *                          T, decoded and sent as it is (no CR, LF)
 *   /redirect?to=U[&code=N]  302 (or N, 300-399) with "Location: U" (U
 *                          decoded)
 *   /cookie?set=C[&to=U][&code=N]  200 "ok" with "Set-Cookie: C", or a
 *                          302 to U with it (both decoded); N: the status
 *   /once425               per id: first execution 425, later 200
 *   /headers               "102 Processing" with a field, then 200 with
 *                          padded, empty, repeated and colon-holding
 *                          fields and a chunked body with a trailer
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
 *   /stall-first?ms=D[&n=N][&first=F][&then=a,b]  per id: the first N
 *                          (1) executions hold D ms (or until the client
 *                          leaves) then answer F (200); the k-th later one
 *                          answers the k-th of then= (200; the last
 *                          repeats) at once
 *   /tail?ms=M&stall_ms=S&per_mille=P  each execution held M ms times
 *                          SCALE %, or S ms (when longer) with a chance
 *                          of P in 1000; 200
 *   anything else          404 (counted)
 * Bad parameters answer 400 (counted, except on /auth). Request ids are
 * 1..255 bytes without spaces or control characters; any other id, a
 * malformed request, or one over a limit (head 64 KiB: 431; body 16 MiB:
 * 413) is answered and closed without counting. 204 and 304 carry no
 * Content-Length (RFC 9110 forbids it on 204); all other responses do.
 *
 * Control protocol: the common one of srv_control.c (COUNT, REJECTS, LOG,
 * CONNS, ACTIVE, IDLE, WAIT, MODE, RESET, FLIP, SCALE); REJECTS counts the
 * 401s of /auth; LOG's tag is "expect-100" for a request that said "Expect:
 * 100-continue", else absent. Its own command: GONE <id>, the executions of
 * id whose client left while /stall-first or /tail held them (a hedged
 * request's loser, stopped: its connection closed).
 */
#include "faultsrv.h"

#include <stdio.h>

/* The srv_ops.serve_http hook: one HTTP/1.1 connection, on its thread. */
static void serve_http(struct srv *srv, int fd, unsigned long num)
{
    struct srv_conn c;

    if (srv_conn_init(&c, srv, fd, num) == 0)
        fs_http_serve(&c); /* closes the socket itself */
    else
        fprintf(stderr, "faultsrv: connection %lu: out of memory\n", num);
    srv_conn_free(&c);
}

static const struct srv_command commands[] = {
    {"GONE", true, FS_TALLY_GONE},
};

static const struct srv_ops ops = {
    .name = "faultsrv",
    .serve_http = serve_http,
    .commands = commands,
    .n_commands = sizeof(commands) / sizeof(commands[0]),
};

int main(int argc, char **argv)
{
    struct srv_options opt = srv_default_options();

    for (int i = 1; i < argc; i++) {
        if (!srv_option(&opt, argv[i])) {
            fprintf(stderr, "usage: %s [--ignore-stdin] [--verbose]\n",
                    argv[0]);
            return 2;
        }
    }
    return srv_main(&ops, &opt, NULL);
}
