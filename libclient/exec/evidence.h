/* SPDX-License-Identifier: MIT */
/*
 * What one attempt proves about whether the server received the request,
 * from the stages libcurl reported while it ran. docs/evidence.md has the
 * table (stage x libcurl error -> evidence) and how each row was verified.
 * Pure: the executor fills an attempt_trace from libcurl's callbacks and
 * asks retryd__evidence_classify(); unit tests fill traces by hand.
 */
#ifndef RETRYD_EVIDENCE_H
#define RETRYD_EVIDENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retryd/decision.h"

typedef struct attempt_trace {
    int prereq_calls;        /* CURLOPT_PREREQFUNCTION: request about to go */
    uint64_t bytes_out;      /* request bytes written after the first prereq:
                                HEADER_OUT + DATA_OUT (HTTP/2), or
                                CURLINFO_REQUEST_SIZE (HTTP/1.1) */
    int http_major;          /* 1 or 2: the protocol this attempt spoke */
    int64_t stream_id;       /* HTTP/2 "Using Stream ID", -1 when none */
    int64_t goaway_last;     /* HTTP/2 GOAWAY last-stream-id, -1 when none */
    bool refused_stream;     /* libcurl: "REFUSED_STREAM, retrying ..." */
    bool http11_required;    /* RST_STREAM HTTP_1_1_REQUIRED */
    bool resend_blocked;     /* we vetoed a libcurl re-send */
    bool final_headers;      /* a final (non-1xx) header block completed */
    int status;              /* its status */
    long http_version;       /* its status line's, as CURLINFO_HTTP_VERSION
                                (0: another) */
    bool headers_too_large;  /* we refused a header block over our bound */
    bool body_too_large;     /* we refused a body over our bound */
    bool body_source_failed; /* the caller's body reader failed */
    bool sink_refused;       /* the caller's response sink stopped us */
    bool cancelled;          /* the caller cancelled it mid-transfer (multi) */
} attempt_trace;

void retryd__trace_init(attempt_trace *t);

/* Feed a CURLINFO_TEXT line of libcurl's debug output. */
void retryd__trace_text(attempt_trace *t, const char *text, size_t len);

/*
 * The evidence and failure category of a finished attempt, from its trace
 * and libcurl's result code. NOT_SENT only where a stage proves it; a
 * generic error after the request may have left is SENT_NO_RESPONSE. A
 * cancelled transfer keeps the evidence its stages prove, and its failure
 * is aborted (permanent: the caller stopped it).
 */
void retryd__evidence_classify(const attempt_trace *t, int curl_code,
                               retryd_evidence *ret_evidence,
                               retryd_failure *ret_failure);

#endif
