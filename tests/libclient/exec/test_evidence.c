/* SPDX-License-Identifier: MIT */
/*
 * The evidence mapping of docs/evidence.md, row by row, on hand-made
 * traces: what each stage proves, and that nothing is upgraded to NOT_SENT
 * without a proof.
 */
#include <curl/curl.h>
#include <string.h>

#include <criterion/criterion.h>

#include "exec/evidence.h"

typedef struct row {
    const char *name;
    void (*shape)(attempt_trace *t);
    int code;
    retryd_evidence evidence;
    retryd_failure failure;
} row;

/* One line of libcurl's verbose text, as its debug callback hands it. */
static void text(attempt_trace *t, const char *line)
{
    retryd__trace_text(t, line, strlen(line));
}

static void nothing(attempt_trace *t)
{
    (void)t;
}

static void prereq_only(attempt_trace *t)
{
    t->prereq_calls = 1;
    t->http_major = 1;
}

static void h1_written(attempt_trace *t)
{
    prereq_only(t);
    t->bytes_out = 120;
}

static void h2_stream(attempt_trace *t)
{
    t->prereq_calls = 1;
    text(t, "Using Stream ID: 3 (easy handle 0x1)");
}

static void h2_no_stream(attempt_trace *t)
{
    t->prereq_calls = 1;
    t->http_major = 2;
}

static void h2_refused(attempt_trace *t)
{
    h2_stream(t);
    t->prereq_calls = 2;
    t->resend_blocked = true;
    text(t, "REFUSED_STREAM, retrying a fresh connect\n");
}

static void h2_goaway_below(attempt_trace *t)
{
    h2_stream(t);
    text(t, "recveived GOAWAY, error=0, last_stream=1\n");
}

static void h2_goaway_ours(attempt_trace *t)
{
    h2_stream(t);
    text(t, "recveived GOAWAY, error=0, last_stream=3\n");
}

static void h1_stale_refused_text(attempt_trace *t)
{
    /* libcurl 7.88.1's stale flag: the text on an HTTP/1 connection. */
    h1_written(t);
    text(t, "REFUSED_STREAM, retrying a fresh connect\n");
}

static void h1_died_and_vetoed(attempt_trace *t)
{
    h1_written(t);
    t->prereq_calls = 2;
    t->resend_blocked = true;
    text(t, "Connection died, retrying a fresh connect");
}

static void final_200(attempt_trace *t)
{
    h1_written(t);
    t->final_headers = true;
    t->status = 200;
}

static void body_source(attempt_trace *t)
{
    h1_written(t);
    t->body_source_failed = true;
}

static void headers_too_large(attempt_trace *t)
{
    h1_written(t);
    t->headers_too_large = true;
}

static void sink_refused(attempt_trace *t)
{
    final_200(t);
    t->sink_refused = true;
}

/* The caller cancelled (retryd_multi_cancel) a transfer whose re-send had
 * been vetoed: the proof of the stages stands, the reason is the cancel. */
static void cancelled_after_veto(attempt_trace *t)
{
    h1_died_and_vetoed(t);
    t->cancelled = true;
}

static void cancelled_refused(attempt_trace *t)
{
    h2_refused(t);
    t->cancelled = true;
}

#define NS RETRYD_EVIDENCE_NOT_SENT
#define SNR RETRYD_EVIDENCE_SENT_NO_RESPONSE
#define RR RETRYD_EVIDENCE_RESPONSE_RECEIVED
#define PR RETRYD_EVIDENCE_PARTIAL_RESPONSE

static const row rows[] = {
    {"dns", nothing, CURLE_COULDNT_RESOLVE_HOST, NS, RETRYD_FAILURE_DNS},
    {"connect", nothing, CURLE_COULDNT_CONNECT, NS, RETRYD_FAILURE_CONNECT},
    {"connect timeout", nothing, CURLE_OPERATION_TIMEDOUT, NS,
     RETRYD_FAILURE_CONNECT},
    {"tls handshake", nothing, CURLE_SSL_CONNECT_ERROR, NS,
     RETRYD_FAILURE_TLS_HANDSHAKE},
    {"certificate", nothing, CURLE_PEER_FAILED_VERIFICATION, NS,
     RETRYD_FAILURE_TLS_CERTIFICATE},
    {"malformed url", nothing, CURLE_URL_MALFORMAT, NS,
     RETRYD_FAILURE_MALFORMED},
    {"unsupported", nothing, CURLE_UNSUPPORTED_PROTOCOL, NS,
     RETRYD_FAILURE_UNSUPPORTED},
    {"h1 nothing written", prereq_only, CURLE_SEND_ERROR, NS,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"h1 written, timeout", h1_written, CURLE_OPERATION_TIMEDOUT, SNR,
     RETRYD_FAILURE_TIMEOUT},
    {"h1 written, reset", h1_written, CURLE_RECV_ERROR, SNR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"h1 written, empty reply", h1_written, CURLE_GOT_NOTHING, SNR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"h1 written, generic error", h1_written, CURLE_OUT_OF_MEMORY, SNR,
     RETRYD_FAILURE_IO},
    {"h1 re-send vetoed", h1_died_and_vetoed, CURLE_ABORTED_BY_CALLBACK, SNR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"stale refused text on h1", h1_stale_refused_text, CURLE_GOT_NOTHING, SNR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"h2 no stream", h2_no_stream, CURLE_HTTP2, NS, RETRYD_FAILURE_IO},
    {"h2 refused", h2_refused, CURLE_ABORTED_BY_CALLBACK, NS,
     RETRYD_FAILURE_REFUSED_STREAM},
    {"h2 goaway below our stream", h2_goaway_below, CURLE_HTTP2, NS,
     RETRYD_FAILURE_GOAWAY},
    {"h2 goaway naming our stream", h2_goaway_ours, CURLE_HTTP2, SNR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"h2 stream reset", h2_stream, CURLE_HTTP2_STREAM, SNR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"final headers, ok", final_200, CURLE_OK, RR, RETRYD_FAILURE_NONE},
    {"final headers, body reset", final_200, CURLE_RECV_ERROR, PR,
     RETRYD_FAILURE_CONNECTION_LOST},
    {"final headers, body timeout", final_200, CURLE_OPERATION_TIMEDOUT, PR,
     RETRYD_FAILURE_TIMEOUT},
    {"sink refused", sink_refused, CURLE_WRITE_ERROR, PR,
     RETRYD_FAILURE_ABORTED},
    {"body source failed", body_source, CURLE_ABORTED_BY_CALLBACK, SNR,
     RETRYD_FAILURE_BODY_SOURCE},
    {"headers over the bound", headers_too_large, CURLE_WRITE_ERROR, SNR,
     RETRYD_FAILURE_ABORTED},
    {"ok without final headers", h1_written, CURLE_OK, SNR, RETRYD_FAILURE_IO},
    {"cancelled after a vetoed re-send", cancelled_after_veto,
     CURLE_ABORTED_BY_CALLBACK, SNR, RETRYD_FAILURE_ABORTED},
    {"cancelled after a refused stream", cancelled_refused,
     CURLE_ABORTED_BY_CALLBACK, NS, RETRYD_FAILURE_ABORTED},
};

Test(evidence, every_row_of_the_mapping)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        attempt_trace t;
        retryd_evidence e;
        retryd_failure f;
        retryd__trace_init(&t);
        rows[i].shape(&t);
        retryd__evidence_classify(&t, rows[i].code, &e, &f);
        cr_expect_eq(e, rows[i].evidence, "%s: evidence %s", rows[i].name,
                     retryd_evidence_name(e));
        cr_expect_eq(f, rows[i].failure, "%s: failure %s", rows[i].name,
                     retryd_failure_name(f));
    }
}

/* No error code after the first request byte may become NOT_SENT. */
Test(evidence, no_error_code_upgrades_a_written_request_to_not_sent)
{
    for (int code = 0; code < CURL_LAST; code++) {
        attempt_trace t;
        retryd_evidence e;
        retryd_failure f;
        retryd__trace_init(&t);
        h1_written(&t);
        retryd__evidence_classify(&t, code, &e, &f);
        cr_expect_neq(e, NS, "code %d", code);
        retryd__trace_init(&t);
        h2_stream(&t);
        retryd__evidence_classify(&t, code, &e, &f);
        cr_expect_neq(e, NS, "h2, code %d", code);
    }
}

Test(evidence, libcurl_texts_are_matched_exactly)
{
    attempt_trace t;
    retryd__trace_init(&t);
    text(&t, "Using Stream ID: 1f (easy handle 0x55)");
    cr_expect_eq(t.stream_id, 0x1f);
    cr_expect_eq(t.http_major, 2);
    text(&t, "received GOAWAY, error=0, last_stream=29");
    cr_expect_eq(t.goaway_last, 29, "the later spelling too");
    text(&t, "a REFUSED_STREAM somewhere in the line");
    cr_expect(!t.refused_stream, "only at the start of the line");
    text(&t, "HTTP/2 stream 1 was not closed cleanly: "
             "HTTP_1_1_REQUIRED (err 13)");
    cr_expect(t.http11_required);
}
