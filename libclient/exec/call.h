/* SPDX-License-Identifier: MIT */
/*
 * One request, internal to the executor, whichever driver runs it: the
 * attempt state machine (attempt.c) owns it and keeps the attempt log in
 * it; the transfer (transfer.c) fills its per-attempt part from libcurl's
 * callbacks, which reach it through the pooled handle (easy.call); the
 * asynchronous driver (multi.c) embeds it in its retryd_call. They need
 * the layout, hence this header; nothing else should include it.
 */
#ifndef RETRYD_CALL_H
#define RETRYD_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "exec/evidence.h"
#include "exec/executor.h"
#include "exec/headers.h"
#include "retryd/body.h"
#include "retryd/client.h"

#define BODY_FIRST_BUFFER 4096

typedef struct call {
    retryd_profile *p;
    const retryd_request *req;
    char *url; /* url_first, or malloc'ed when longer */
    retryd_idempotency idem;
    char key[40];
    char *auth; /* Authorization after a refresh, or NULL */
    bool refresh_used, force_http11, delivered;
    bool cancelled; /* by the caller (multi): nothing more to the sink */
    int64_t deadline;
    int64_t now; /* the last clock reading: when the call or attempt ended */
    /* Between attempts (attempt.h): the engine's inputs, and the wait it
     * granted before the attempt now running (its prev_delay). */
    retryd_decide_env env;
    int64_t wait;
    /* A host pushback's hold before the attempt about to open
     * (attempt_admit), and what such holds added up to since the last. */
    int64_t hold, held;
    /* Hedging (docs/hedging.md). The policy in force (mode OFF: none),
     * whether this request may be hedged at all (a policy, and the
     * engine's request-wide rules allow it), and what the engine said of
     * a hedge last (the result's). A hedge (multi.c) runs in a call of its
     * own: `owner` is the request's call, whose log, budget and counts its
     * attempt joins and whose URL and credentials it borrows (a request's
     * call is its own owner). */
    retryd_hedge_policy hedge;
    retryd_hedge_decision hedge_d;
    bool hedgeable, hedge_won;
    struct call *owner;
    /* The engine's attempt number (a round: an attempt and the hedges
     * sent beside it), the hedges sent, and when the call started. An
     * attempt's number in the log is the rounds and hedges before it and
     * itself: round + hedges when it opens. */
    uint32_t round, hedges;
    int64_t t0;
    /* An attempt is open (its log entry not yet counted). */
    bool att_open;
    /* The attempt running now: when it started, how long its transfer may
     * take, until when it may wait for a bulkhead permit. */
    int64_t start, attempt_ns, permit_deadline;
    /* One attempt's state, reset before each. */
    attempt_trace trace;
    retryd_body_reader body;
    bool body_open;
    curl_mime *mime;   /* a MIME body's, for this attempt's handle; or NULL */
    header_arena resp; /* the block being read; final once final_headers */
    int pending_status;
    long pending_version; /* its status line's, as CURLINFO_HTTP_VERSION */
    /* Its reason phrase (printable bytes only); once final_headers, the
     * final block's: a status line after it is never parsed. */
    char pending_reason[RETRYD_REASON_MAX];
    size_t header_bytes, header_lines;
    bool stream_to_sink;
    unsigned char *buf; /* body_first until outgrown */
    size_t buf_len, buf_cap;
    /* The attempt log: att_first until outgrown; error texts strdup'ed. */
    attempt_rec *att;
    size_t n_att, cap_att;
    /* Storage that lives in the call (retryd_execute's frame, or the
     * asynchronous call's allocation): a keep-alive request needs no
     * allocation until its result. Not zeroed: sized, not read. */
    char url_first[512];
    char hdr_first[2048];
    uint32_t hdr_off_first[2 * 64];
    unsigned char body_first[BODY_FIRST_BUFFER];
    attempt_rec att_first[4];
    struct curl_slist *headers; /* one allocation: nodes, then our lines */
    char errbuf[CURL_ERROR_SIZE];
} call;

#endif
