/* SPDX-License-Identifier: MIT */
/* One HTTP connection of retryd-h2srv: TLS handshake or h2c sniffing,
 * then an HTTP/2 session driven by nghttp2 (or the HTTP/1.1 fallback).
 *
 * Threading: each connection has its own thread, and everything below
 * runs on it; nghttp2 sessions are not shared. The loop is the usual
 * nghttp2 one with non-blocking I/O: nghttp2_session_mem_send() fills an
 * output buffer that is flushed when the socket is writable, input goes
 * through nghttp2_session_mem_recv(), and a poll() timeout drives /hold.
 *
 * Where the fault modes happen (callbacks below):
 *   request HEADERS complete (on_frame_recv): the request id and path are
 *     known; /refuse, /refuse-once, /http11-required and /goaway act here,
 *     before any execution, and count the stream in REFUSED.
 *   END_STREAM received (on_frame_recv): the request is whole; it is
 *     executed (counted) and its plan runs (respond, hold, reset, ...).
 *   frame sent (on_frame_send): after the last DATA frame of
 *     /reset-after-headers, a PING whose ACK (on_frame_recv) triggers the
 *     RST_STREAM (see submit_rst_after_ping); after the response's
 *     END_STREAM, the GOAWAY of /goaway-after.
 *   stream closed (on_stream_close): streams above a GOAWAY's
 *     last-stream-id that were never executed count in REFUSED; a /hold
 *     ends when the client resets the stream or closes the connection.
 *
 * Flow control: nghttp2 sends WINDOW_UPDATE as received DATA is consumed
 * (every chunk is consumed at once, into the request body, so a held or
 * slow stream never blocks others) and never sends more DATA than the
 * client's windows allow; the windows we advertise are raised to keep
 * multi-megabyte uploads quick. */
#include "h2srv.h"

#include <errno.h>
#include <limits.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDSHAKE_MS 10000
/* Stop asking nghttp2 for frames while this much output is unsent: the
 * client's reading speed bounds our memory. */
#define OUT_HIGH (64 * 1024)
#define STREAM_WINDOW (1 << 20) /* SETTINGS_INITIAL_WINDOW_SIZE */
#define CONN_WINDOW (4 << 20)   /* connection-level receive window */

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof preface - 1)

enum phase {
    PH_HEADERS, /* receiving the request header block */
    PH_BODY,    /* accepted: receiving the body until END_STREAM */
    PH_DONE,    /* executed, refused or answered: later input is ignored */
};

struct stream {
    struct stream *next, *prev;
    struct h2_request req;
    const struct h2_mode *mode;
    struct h2_plan plan;
    enum phase phase;
    bool id_known; /* headers complete and req.base.id valid */
    bool refused;  /* already counted in REFUSED */
    bool executed;
    bool answered_early; /* 4xx/5xx without execution */
    bool remote_ended;   /* the client's END_STREAM arrived */
    bool rst_sent;
    bool rst_after_ping; /* a RST_STREAM awaits a PING round trip */
    uint32_t rst_code;   /* ... with this code (submit_rst_after_ping) */
    bool holding;        /* /hold: executed, response not yet submitted */
    int64_t hold_until;  /* INT64_MAX: until the client leaves */
    size_t body_off;     /* response body bytes handed to nghttp2 */
};

struct session {
    struct h2_conn *c;
    nghttp2_session *ng;
    struct stream *streams;
    int32_t goaway_last; /* -1: no GOAWAY submitted */
};

/* --- streams ------------------------------------------------------------- */

static struct stream *stream_of(struct session *s, int32_t id)
{
    return id > 0 ? nghttp2_session_get_stream_user_data(s->ng, id) : NULL;
}

static void stream_free(struct session *s, struct stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        s->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    srv_request_free(&st->req.base);
    h2_plan_free(&st->plan);
    free(st);
}

static bool field_is(const uint8_t *name, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(name, lit, len) == 0;
}

/* Stores the fields the server uses. Returns 0 or -ENOMEM. */
static int store_field(struct h2_request *r, const uint8_t *name,
                       size_t namelen, const uint8_t *value, size_t valuelen)
{
    const char *v = (const char *)value;

    if (field_is(name, namelen, ":method")) {
        if (valuelen >= sizeof r->base.method) {
            r->bad_head = true;
            return 0;
        }
        memcpy(r->base.method, v, valuelen);
        r->base.method[valuelen] = '\0';
    } else if (field_is(name, namelen, ":path")) {
        int rc = srv_request_set_target(&r->base, v, valuelen);

        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            r->bad_head = true;
    } else {
        /* content-length (already checked by nghttp2; one too long to
         * read is stored over the limit: -EFBIG, answered 413 when the
         * headers are complete), x-request-id, idempotency-key,
         * authorization. */
        int rc = srv_request_field(&r->base, (const char *)name, namelen, v,
                                   valuelen);

        if (rc == -ENOMEM)
            return rc;
        if (rc == -EINVAL)
            r->bad_head = true;
    }
    return 0;
}

/* --- submitting frames ----------------------------------------------------
 * These run inside nghttp2 callbacks and return 0 or
 * NGHTTP2_ERR_CALLBACK_FAILURE (which ends the session). */

static int check(int rv)
{
    return rv == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

/* Serves the response body; for /reset-after-headers stops short of
 * END_STREAM (DEFERRED): the RST_STREAM follows (on_frame_send). */
static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf,
                         size_t len, uint32_t *flags, nghttp2_data_source *src,
                         void *user)
{
    struct stream *st = src->ptr;
    const struct h2_response *resp = &st->plan.resp;
    size_t total = resp->no_body ? 0 : resp->send_len;
    size_t n = total - st->body_off;

    (void)ng, (void)id, (void)user;
    if (n > len)
        n = len;
    if (n > 0)
        memcpy(buf, resp->body + st->body_off, n);
    st->body_off += n;
    if (st->body_off < total)
        return (ssize_t)n;
    if (st->plan.after == AFTER_RESET_PARTIAL)
        return n > 0 ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* nghttp2 copies names and values (no NO_COPY flags). */
static nghttp2_nv nv_of(char *name, char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name),
                        strlen(value), NGHTTP2_NV_FLAG_NONE};
}

static int submit_response(struct session *s, struct stream *st)
{
    struct h2_response *resp = &st->plan.resp;
    char status[8], clen[24];
    nghttp2_nv nv[3];
    size_t n = 0;
    nghttp2_data_provider dp = {.source.ptr = st, .read_callback = read_body};
    /* A DATA frame is needed for a body, and for /reset-after-headers
     * even without one: its HEADERS must not carry END_STREAM. */
    bool data = st->plan.after == AFTER_RESET_PARTIAL ||
                (!resp->no_body && resp->send_len > 0);

    snprintf(status, sizeof status, "%d", resp->status);
    snprintf(clen, sizeof clen, "%zu", resp->content_length);
    nv[n++] = nv_of(":status", status);
    if (resp->status != 204 && resp->status != 304) /* see h2_mode_plan */
        nv[n++] = nv_of("content-length", clen);
    if (resp->retry_after[0])
        nv[n++] = nv_of("retry-after", resp->retry_after);
    return check(nghttp2_submit_response(s->ng, st->req.stream_id, nv, n,
                                         data ? &dp : NULL));
}

static int submit_rst(struct session *s, struct stream *st, uint32_t code)
{
    st->rst_sent = true;
    return check(nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE,
                                           st->req.stream_id, code));
}

/* RST_STREAM once everything sent so far has reached the client's HTTP/2
 * layer: a PING carrying the stream id goes out now, the reset when its
 * ACK comes back (on_frame_recv). Needed because libcurl 7.88.1 loses a
 * response whose HEADERS arrive in the same read as a RST_STREAM closing
 * the stream: CURLE_HTTP2_STREAM with no status, even for NO_ERROR after
 * a complete response ("closed cleanly, but before getting all response
 * header fields"). So a test could not see "status 200, then reset", nor
 * an early 413. A client acknowledges a PING while processing its input,
 * after the frames before it; libcurl has handed those to the transfer by
 * the time we read the ACK, and the reset arrives in a later read. */
static int submit_rst_after_ping(struct session *s, struct stream *st,
                                 uint32_t code)
{
    uint8_t opaque[8] = {0};
    uint32_t id = (uint32_t)st->req.stream_id;

    memcpy(opaque, &id, sizeof id);
    st->rst_after_ping = true;
    st->rst_code = code;
    return check(nghttp2_submit_ping(s->ng, NGHTTP2_FLAG_NONE, opaque));
}

/* The ACK of a PING sent by submit_rst_after_ping: now the reset. */
static int ping_acked(struct session *s, const nghttp2_frame *f)
{
    uint32_t id;
    struct stream *st;

    memcpy(&id, f->ping.opaque_data, sizeof id);
    st = id <= INT32_MAX ? stream_of(s, (int32_t)id) : NULL;
    if (!st || !st->rst_after_ping || st->rst_sent)
        return 0; /* the stream ended meanwhile */
    return submit_rst(s, st, st->rst_code);
}

/* GOAWAY(NO_ERROR). nghttp2 never raises last-stream-id above one sent
 * before; when the frame goes out it closes every stream above it (with
 * REFUSED_STREAM, locally) and ignores new ones. */
static int submit_goaway(struct session *s, int32_t last)
{
    if (s->goaway_last >= 0 && s->goaway_last < last)
        last = s->goaway_last;
    s->goaway_last = last;
    return check(nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, last,
                                       NGHTTP2_NO_ERROR, NULL, 0));
}

/* Answers without executing (bad request, over a limit). */
static int answer_early(struct session *s, struct stream *st, int status,
                        const char *text)
{
    char what[32];

    st->phase = PH_DONE;
    st->answered_early = true;
    h2_plan_free(&st->plan);
    st->plan = (struct h2_plan){.after = AFTER_RESPOND, .hold_ms = -1};
    if (h2_plan_text(&st->plan, status, text) < 0)
        return submit_rst(s, st, NGHTTP2_INTERNAL_ERROR);
    snprintf(what, sizeof what, "%d, not executed", status);
    h2_note(s->c, &st->req, what);
    return submit_response(s, st);
}

/* The stream is rejected unprocessed; REFUSED counts it before the client
 * can see the frame that says so. */
static void count_refused(struct session *s, struct stream *st,
                          const char *what)
{
    srv_stats_tally(s->c->srv->stats, st->req.base.id, H2_TALLY_REFUSED);
    st->refused = true;
    st->phase = PH_DONE;
    h2_note(s->c, &st->req, what);
}

/* /goaway: last-stream-id below this stream (0 for stream 1), so the
 * client learns it was not processed; the connection closes after
 * flushing, once streams at or below last-stream-id are done. */
static int goaway_below(struct session *s, struct stream *st)
{
    int32_t id = st->req.stream_id;

    count_refused(s, st, "GOAWAY below this stream");
    return submit_goaway(s, id > 2 ? id - 2 : 0);
}

/* --- request lifecycle -------------------------------------------------- */

/* The request header block is complete: validate, then act on the modes
 * that decide before executing. */
static int headers_complete(struct session *s, struct stream *st)
{
    struct h2_request *r = &st->req;

    st->phase = PH_BODY;
    if (r->head_too_large)
        return answer_early(s, st, 431, "request header fields too large\n");
    if (r->bad_head || !r->base.target || !r->base.method[0])
        return answer_early(s, st, 400, "bad request\n");
    if (srv_request_resolve_id(&r->base) < 0)
        return answer_early(s, st, 400, "bad request id\n");
    st->id_known = true;
    if (r->base.content_length > SRV_BODY_MAX)
        return answer_early(s, st, 413, "content too large\n");
    st->mode = h2_mode_find(r->base.path);
    switch (st->mode->early) {
    case EARLY_NONE:
        return 0;
    case EARLY_REFUSE_ONCE:
        if (!srv_stats_claim(s->c->srv->stats, r->base.id,
                             H2_TALLY_REFUSE_ONCE))
            return 0;
        /* The first stream of this id: refused like /refuse. */
        /* fall through */
    case EARLY_REFUSE:
        count_refused(s, st, "RST_STREAM(REFUSED_STREAM)");
        return submit_rst(s, st, NGHTTP2_REFUSED_STREAM);
    case EARLY_HTTP11:
        count_refused(s, st, "RST_STREAM(HTTP_1_1_REQUIRED)");
        return submit_rst(s, st, NGHTTP2_HTTP_1_1_REQUIRED);
    case EARLY_GOAWAY:
        return goaway_below(s, st);
    }
    return 0;
}

/* Runs the plan of an executed request. */
static int run_plan(struct session *s, struct stream *st)
{
    switch (st->plan.after) {
    case AFTER_RESPOND:
    case AFTER_GOAWAY:
        h2_note(s->c, &st->req, "executed, answered");
        return submit_response(s, st);
    case AFTER_RESET_PARTIAL:
        h2_note(s->c, &st->req, "executed, partial response then RST");
        return submit_response(s, st);
    case AFTER_RESET:
        h2_note(s->c, &st->req, "executed, RST_STREAM(INTERNAL_ERROR)");
        return submit_rst(s, st, NGHTTP2_INTERNAL_ERROR);
    case AFTER_HOLD:
        st->holding = true;
        st->hold_until =
            st->plan.hold_ms < 0 ? INT64_MAX : srv_now_ms() + st->plan.hold_ms;
        h2_note(s->c, &st->req, "executed, held");
        return 0;
    }
    return 0;
}

/* END_STREAM arrived: the whole request is here. Execute it (count first:
 * whatever the client observes next, the counters already include it). */
static int request_complete(struct session *s, struct stream *st)
{
    st->remote_ended = true;
    if (st->phase != PH_BODY)
        return 0;
    st->phase = PH_DONE;
    if (h2_request_execute(s->c->srv, &st->req) < 0)
        return answer_early(s, st, 500, "out of memory\n");
    st->executed = true;
    if (h2_mode_plan(st->mode, &st->req, &st->plan) < 0)
        return submit_rst(s, st, NGHTTP2_INTERNAL_ERROR);
    return run_plan(s, st);
}

/* Submits the responses of held streams whose time has come. Returns the
 * poll timeout until the next one (-1: none). */
static int fire_holds(struct session *s)
{
    int64_t now = srv_now_ms(), next = INT64_MAX;

    for (struct stream *st = s->streams; st; st = st->next) {
        if (!st->holding)
            continue;
        if (st->hold_until <= now) {
            st->holding = false;
            h2_note(s->c, &st->req, "hold over, answered");
            if (submit_response(s, st) < 0) /* only out of memory */
                submit_rst(s, st, NGHTTP2_INTERNAL_ERROR);
        } else if (st->hold_until < next) {
            next = st->hold_until;
        }
    }
    if (next == INT64_MAX)
        return -1;
    return next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

/* --- nghttp2 callbacks --------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f,
                            void *user)
{
    struct session *s = user;
    struct stream *st;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (!(st = calloc(1, sizeof *st)))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
    h2_request_init(&st->req, "h2");
    st->req.stream_id = f->hd.stream_id;
    st->plan = (struct h2_plan){.after = AFTER_RESPOND, .hold_ms = -1};
    st->hold_until = -1;
    if (nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st) != 0) {
        free(st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    st->next = s->streams;
    if (s->streams)
        s->streams->prev = st;
    s->streams = st;
    srv_stats_count(s->c->srv->stats, H2_COUNTER_STREAMS);
    return 0;
}

/* Header fields are charged to a budget (RFC 9113 6.5.2 counts 32 bytes
 * of overhead per field); over it the request is answered 431. Trailers
 * are ignored. */
static int on_header(nghttp2_session *ng, const nghttp2_frame *f,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user)
{
    struct stream *st = stream_of(user, f->hd.stream_id);

    (void)ng, (void)flags;
    if (!st || st->phase != PH_HEADERS)
        return 0;
    struct h2_request *r = &st->req;
    r->head_bytes += namelen + valuelen + 32;
    if (r->head_bytes > H2_HEAD_MAX)
        r->head_too_large = true;
    if (r->head_too_large)
        return 0;
    if (store_field(r, name, namelen, value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f,
                         void *user)
{
    struct session *s = user;
    struct stream *st = stream_of(s, f->hd.stream_id);
    int rc = 0;

    (void)ng;
    if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK))
        return ping_acked(s, f);
    if (!st || (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA))
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        rc = headers_complete(s, st);
    if (rc == 0 && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        rc = request_complete(s, st);
    return rc;
}

static int on_data_chunk_recv(nghttp2_session *ng, uint8_t flags, int32_t id,
                              const uint8_t *data, size_t len, void *user)
{
    struct session *s = user;
    struct stream *st = stream_of(s, id);

    (void)ng, (void)flags;
    if (!st || st->phase != PH_BODY)
        return 0;
    int rc = h2_request_append_body(&st->req, data, len);
    if (rc == -EFBIG)
        return answer_early(s, st, 413, "content too large\n");
    if (rc < 0)
        return answer_early(s, st, 500, "out of memory\n");
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f,
                         void *user)
{
    struct session *s = user;
    struct stream *st = stream_of(s, f->hd.stream_id);
    const struct h2_response *resp;

    (void)ng;
    if (!st || (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA))
        return 0;
    resp = &st->plan.resp;
    /* /reset-after-headers: everything promised went out (HEADERS, then
     * send_len body bytes); now the reset. */
    if (st->plan.after == AFTER_RESET_PARTIAL && !st->rst_after_ping &&
        st->body_off == (resp->no_body ? 0 : resp->send_len))
        return submit_rst_after_ping(s, st, NGHTTP2_INTERNAL_ERROR);
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    /* RFC 9113 8.1: after a complete response to an incomplete request,
     * RST_STREAM(NO_ERROR) asks the client to stop sending the body. */
    if (st->answered_early && !st->remote_ended && !st->rst_after_ping)
        return submit_rst_after_ping(s, st, NGHTTP2_NO_ERROR);
    if (st->plan.after == AFTER_GOAWAY && st->executed) {
        h2_note(s->c, &st->req, "GOAWAY at this stream");
        return submit_goaway(s, st->req.stream_id);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code,
                           void *user)
{
    struct session *s = user;
    struct stream *st = stream_of(s, id);

    (void)ng;
    if (!st)
        return 0;
    if (st->holding) {
        h2_note(s->c, &st->req,
                code == NGHTTP2_REFUSED_STREAM
                    ? "held stream closed by our GOAWAY"
                    : "client gone while held");
    } else if (s->goaway_last >= 0 && id > s->goaway_last && st->id_known &&
               !st->refused && !st->executed && !st->answered_early) {
        /* Closed by our GOAWAY before it was executed: the client is told
         * it was not processed, and that is true. */
        count_refused(s, st, "above GOAWAY's last-stream-id");
    }
    stream_free(s, st);
    return 0;
}

/* --- the connection loop ------------------------------------------------ */

/* Moves frames from nghttp2 to the output buffer, at most OUT_HIGH bytes
 * at a time, and writes them. Returns (0) once nghttp2 has nothing more
 * to send now or the socket is full; the loop's poll then waits for the
 * client (its WINDOW_UPDATE, or room in the socket). Returning merely
 * because the buffer filled up, with the socket still writable, would
 * stall the response with nothing left to wake us. Or a negative errno. */
static int produce(struct session *s)
{
    struct h2_conn *c = s->c;

    for (;;) {
        bool more = true;

        while (more && h2_io_out_pending(c) < OUT_HIGH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(s->ng, &data);

            if (n < 0) {
                fprintf(stderr, "h2srv: conn=%lu nghttp2 send: %s\n", c->num,
                        nghttp2_strerror((int)n));
                return -EPROTO;
            }
            if (n == 0)
                more = false;
            else if (h2_io_out_append(c, data, (size_t)n) < 0)
                return -ENOMEM;
        }
        int rc = h2_io_flush(c);
        if (rc < 0)
            return rc == -EAGAIN ? 0 : rc;
        if (!more)
            return 0;
    }
}

/* Reads once and feeds nghttp2. Returns 1 to go on, 0 on the client's
 * EOF, or a negative errno. */
static int consume(struct session *s)
{
    struct h2_conn *c = s->c;
    ssize_t n = h2_io_recv(c, c->in, H2_IN_CAP);

    if (n == -EAGAIN)
        return 1;
    if (n <= 0)
        return (int)n;
    ssize_t used = nghttp2_session_mem_recv(s->ng, c->in, (size_t)n);
    if (used < 0) {
        if (c->srv->verbose)
            fprintf(stderr, "h2srv: conn=%lu nghttp2 receive: %s\n", c->num,
                    nghttp2_strerror((int)used));
        /* Fatal for the session; try to get its GOAWAY out. */
        nghttp2_session_terminate_session(s->ng, NGHTTP2_PROTOCOL_ERROR);
        produce(s);
        return -EPROTO;
    }
    return 1;
}

/* Nothing left to do: the client ended the session, or our GOAWAY went
 * out and the streams it let live are finished (nghttp2 wants no more
 * input once a GOAWAY is sent and no stream is open). */
static bool finished(const struct session *s)
{
    return h2_io_out_pending(s->c) == 0 && !nghttp2_session_want_write(s->ng) &&
           !nghttp2_session_want_read(s->ng) && !s->streams;
}

/* Runs the session until it ends. Returns true when the connection should
 * be closed gracefully (all our frames are out), false when it is broken,
 * the client left, or the server is stopping. */
static bool session_loop(struct session *s)
{
    struct h2_conn *c = s->c;

    for (;;) {
        int timeout = fire_holds(s);

        if (produce(s) < 0)
            return false;
        if (finished(s))
            return true;
        bool rd =
            nghttp2_session_want_read(s->ng) && h2_io_out_pending(c) < OUT_HIGH;
        bool wr = h2_io_out_pending(c) > 0;
        short ev = (short)((rd ? c->rd_wait : 0) | (wr ? c->wr_wait : 0));

        if (rd && h2_io_pending(c))
            timeout = 0;
        int r = h2_io_poll(c, ev, timeout);
        if (r < 0)
            return false; /* stopping, or poll failed */
        /* Hang-up while we neither read nor write: nothing will report
         * it later, and poll would return at once forever. */
        if (!rd && (r & (POLLERR | POLLHUP | POLLNVAL)))
            return false;
        if (rd && (r > 0 || h2_io_pending(c))) {
            int rc = consume(s);
            if (rc <= 0)
                return false;
        }
    }
}

static int start_session(struct session *s)
{
    nghttp2_session_callbacks *cb;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_HEAD_MAX},
    };
    int rc;

    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    rc = nghttp2_session_server_new(&s->ng, cb, s);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0)
        return -ENOMEM;
    if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv,
                                sizeof iv / sizeof iv[0]) != 0 ||
        nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0,
                                              CONN_WINDOW) != 0)
        return -ENOMEM;
    return 0;
}

/* Serves HTTP/2 on the connection; c->in may hold the first bytes
 * (sniffed preface). Returns true for a graceful close. */
static bool serve_h2(struct h2_conn *c)
{
    struct session s = {.c = c, .goaway_last = -1};
    bool graceful = false;

    if (start_session(&s) == 0) {
        size_t buffered = c->in_len - c->in_pos;
        ssize_t used =
            buffered == 0
                ? 0
                : nghttp2_session_mem_recv(s.ng, c->in + c->in_pos, buffered);
        c->in_pos = c->in_len = 0;
        if (used >= 0)
            graceful = session_loop(&s);
    }
    /* nghttp2_session_del runs no callbacks: our streams go here. */
    nghttp2_session_del(s.ng);
    while (s.streams) {
        if (s.streams->holding)
            h2_note(c, &s.streams->req, "connection ended while held");
        stream_free(&s, s.streams);
    }
    return graceful;
}

/* h2c: a connection that starts with the HTTP/2 preface is HTTP/2 (prior
 * knowledge); anything else is served as HTTP/1.1, which is what libcurl
 * falls back to after RST_STREAM(HTTP_1_1_REQUIRED). Returns 1 for h2,
 * 0 for HTTP/1.1, or a negative errno (EOF: -ENODATA). */
static int sniff_preface(struct h2_conn *c)
{
    for (;;) {
        size_t avail = c->in_len - c->in_pos;
        size_t n = avail < PREFACE_LEN ? avail : PREFACE_LEN;

        if (memcmp(c->in + c->in_pos, preface, n) != 0)
            return 0;
        if (avail >= PREFACE_LEN)
            return 1;
        ssize_t r = h2_io_fill(c, -1);
        if (r <= 0)
            return r == 0 ? -ENODATA : (int)r;
    }
}

/* Serves one accepted HTTP connection and closes it. Over TLS, ALPN
 * decides: "h2" is HTTP/2, anything else (http/1.1, none) HTTP/1.1. */
void h2_conn_serve(struct h2_conn *c)
{
    bool graceful = false;
    int rc = h2_io_handshake(c, HANDSHAKE_MS);
    int h2;

    if (rc < 0) {
        if (c->srv->verbose)
            fprintf(stderr, "h2srv: conn=%lu TLS handshake: %s\n", c->num,
                    strerror(-rc));
        h2_io_close(c, false);
        return;
    }
    h2 = c->ssl ? h2_tls_alpn_is_h2(c) : sniff_preface(c);
    if (h2 == 1)
        graceful = serve_h2(c);
    else if (h2 == 0)
        graceful = h2_http1_serve(c);
    h2_io_close(c, graceful);
}
