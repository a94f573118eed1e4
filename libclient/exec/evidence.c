/* SPDX-License-Identifier: MIT */
/*
 * Evidence from libcurl's stages. The principle: NOT_SENT needs a proof
 * that the request did not leave (or was not processed); everything else
 * after the first request byte may have left is SENT_NO_RESPONSE until the
 * final header block is complete. The proofs, for libcurl 7.88.1:
 *
 *  - the pre-request callback never ran: DNS, connect, TLS or a proxy
 *    failed first (it runs after all of them, just before the first
 *    request byte);
 *  - HTTP/1: it ran, but no request byte was written (libcurl reports
 *    HEADER_OUT/DATA_OUT only after a successful write);
 *  - HTTP/2: no stream was opened ("Using Stream ID" never came), the
 *    stream was refused (REFUSED_STREAM), or a GOAWAY's last-stream-id is
 *    below our stream id (RFC 9113 6.8: such streams were not processed).
 *
 * libcurl's own texts are matched exactly, for the version we pin; a text
 * that does not match changes nothing, so a future wording can only make
 * the answer more conservative (SENT_NO_RESPONSE), never less.
 */
#include "exec/evidence.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

void retryd__trace_init(attempt_trace *t)
{
    memset(t, 0, sizeof(*t));
    t->stream_id = -1;
    t->goaway_last = -1;
}

static bool starts_with(const char *text, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(text, prefix, n) == 0;
}

/* The number after @p key in the line, or -1. */
static int64_t number_after(const char *text, size_t len, const char *key,
                            int base)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k <= len; i++) {
        if (memcmp(text + i, key, k) != 0)
            continue;
        char buf[24];
        size_t n = 0;
        for (size_t j = i + k; j < len && n + 1 < sizeof(buf); j++) {
            char c = text[j];
            bool digit = (c >= '0' && c <= '9') ||
                         (base == 16 &&
                          ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')));
            if (!digit)
                break;
            buf[n++] = c;
        }
        if (n == 0)
            return -1;
        buf[n] = '\0';
        return strtoll(buf, NULL, base);
    }
    return -1;
}

void retryd__trace_text(attempt_trace *t, const char *text, size_t len)
{
    /* http2.c: infof(data, "Using Stream ID: %x (easy handle %p)", ...) */
    if (starts_with(text, len, "Using Stream ID: ")) {
        t->stream_id = number_after(text, len, "Using Stream ID: ", 16);
        t->http_major = 2;
    } else if (starts_with(text, len, "REFUSED_STREAM, retrying")) {
        t->refused_stream = true;
    } else if (starts_with(text, len, "recveived GOAWAY") ||
               starts_with(text, len, "received GOAWAY")) {
        /* 7.88.1 spells it "recveived"; later versions "received". */
        t->goaway_last = number_after(text, len, "last_stream=", 10);
    } else if (number_after(text, len, "HTTP_1_1_REQUIRED (err ", 10) == 13) {
        t->http11_required = true;
    }
}

static retryd_failure before_request(int code)
{
    switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return RETRYD_FAILURE_DNS;
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: /* before the request: connecting */
        return RETRYD_FAILURE_CONNECT;
    case CURLE_SSL_CONNECT_ERROR:
        return RETRYD_FAILURE_TLS_HANDSHAKE;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        return RETRYD_FAILURE_TLS_CERTIFICATE;
    case CURLE_URL_MALFORMAT:
    case CURLE_BAD_FUNCTION_ARGUMENT:
        return RETRYD_FAILURE_MALFORMED;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_NOT_BUILT_IN:
        return RETRYD_FAILURE_UNSUPPORTED;
    default:
        return RETRYD_FAILURE_IO;
    }
}

/* The category of a failure after the request may have left. */
static retryd_failure after_request(const attempt_trace *t, int code)
{
    if (t->body_source_failed)
        return RETRYD_FAILURE_BODY_SOURCE;
    if (t->sink_refused || t->headers_too_large || t->body_too_large)
        return RETRYD_FAILURE_ABORTED;
    switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
        return RETRYD_FAILURE_TIMEOUT;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SEND_FAIL_REWIND:
        return RETRYD_FAILURE_CONNECTION_LOST;
    case CURLE_ABORTED_BY_CALLBACK:
        /* Our veto of libcurl's own re-send: the first send was lost. */
        return t->resend_blocked ? RETRYD_FAILURE_CONNECTION_LOST
                                 : RETRYD_FAILURE_ABORTED;
    default:
        return RETRYD_FAILURE_IO;
    }
}

/* The HTTP/2 proofs that a request was not processed. */
static bool h2_not_processed(const attempt_trace *t, retryd_failure *f)
{
    if (t->http_major != 2)
        return false;
    if (t->stream_id < 0) {
        *f = RETRYD_FAILURE_IO; /* no stream: nothing of ours was sent */
        return true;
    }
    if (t->refused_stream) {
        *f = RETRYD_FAILURE_REFUSED_STREAM;
        return true;
    }
    if (t->goaway_last >= 0 && t->goaway_last < t->stream_id) {
        *f = RETRYD_FAILURE_GOAWAY;
        return true;
    }
    return false;
}

static void classify(const attempt_trace *t, int code,
                     retryd_evidence *ret_evidence, retryd_failure *ret_failure)
{
    retryd_failure f = RETRYD_FAILURE_NONE;

    if (t->final_headers) {
        bool whole = code == CURLE_OK && !t->resend_blocked;
        *ret_evidence = whole ? RETRYD_EVIDENCE_RESPONSE_RECEIVED
                              : RETRYD_EVIDENCE_PARTIAL_RESPONSE;
        *ret_failure = whole ? RETRYD_FAILURE_NONE : after_request(t, code);
        return;
    }
    if (t->prereq_calls == 0) {
        *ret_evidence = RETRYD_EVIDENCE_NOT_SENT;
        *ret_failure = t->body_source_failed ? RETRYD_FAILURE_BODY_SOURCE
                                             : before_request(code);
        return;
    }
    if (h2_not_processed(t, &f) || (t->http_major != 2 && t->bytes_out == 0)) {
        *ret_evidence = RETRYD_EVIDENCE_NOT_SENT;
        *ret_failure = f != RETRYD_FAILURE_NONE ? f : after_request(t, code);
        return;
    }
    *ret_evidence = RETRYD_EVIDENCE_SENT_NO_RESPONSE;
    *ret_failure = after_request(t, code);
}

void retryd__evidence_classify(const attempt_trace *t, int code,
                               retryd_evidence *ret_evidence,
                               retryd_failure *ret_failure)
{
    classify(t, code, ret_evidence, ret_failure);
    /* A cancel proves nothing about the request: what its stages proved
     * stands, and only the reason it stopped is the caller's. */
    if (t->cancelled)
        *ret_failure = RETRYD_FAILURE_ABORTED;
}
