/* SPDX-License-Identifier: MIT */
/*
 * The executor's shared structs: the client, a profile with its bulkhead
 * and pool, a pooled easy handle, and the result. Only types (and
 * result.c's builder, which owns the result's layout) live here, so that
 * every part of the executor can include this without learning of any
 * other part's functions: profile.c, pool.c, transfer.c, attempt.c and
 * result.c all depend on it, and it on none of them.
 */
#ifndef RETRYD_EXECUTOR_H
#define RETRYD_EXECUTOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "exec/headers.h"
#include "retryd/client.h"

struct retryd_client {
    retryd_host *host;
    /* libcurl's cookie engine for every profile's handles, or NULL; its
     * locks (CURL_LOCK_DATA_*), since profiles are shared by threads; the
     * jar written when the client is freed, or NULL. */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    char *cookie_jar;
    /* The event loops retryd_execute runs hedged requests on (multi.c):
     * idle ones, under the lock, and how to free them (set by the multi
     * with the first, so this layer never calls the multi). */
    pthread_mutex_t multis_lock;
    struct retryd_multi *idle_multis;
    void (*free_multis)(retryd_client *client);
};

struct call;

/*
 * A pooled easy handle and what it was last told. The callbacks' data
 * pointer is this struct, set once; `call` says which request it serves
 * now. Options are set again only when they differ from last time, so a
 * keep-alive request on a pooled handle costs at most two setopt calls
 * (its header list and its body's size).
 */
typedef struct easy {
    CURL *curl;
    struct call *call;
    char errbuf[CURL_ERROR_SIZE];
    long timeout_ms, connect_ms, version;
    int method; /* enum method_kind in transfer.c; -1: never set */
    char custom[40];
    char *url;        /* the URL libcurl has; NULL: none yet */
    bool had_headers; /* libcurl holds a header list of ours */
    bool had_cookie;  /* libcurl holds a CURLOPT_COOKIE of ours */
    char *cookie;     /* its copy; NULL: none (or no memory for one) */
} easy;

struct retryd_profile {
    retryd_client *client;
    char *base_url;
    char *upstream_name;
    retryd_upstream *budget;
    int64_t connect_timeout_ns, attempt_timeout_ns, min_attempt_ns;
    int64_t bulkhead_wait_ns;
    uint32_t max_attempts;
    retryd_backoff_policy backoff;
    bool transient_500;
    retryd_hedge_policy hedge; /* mode OFF: no hedging */
    retryd_http_version http_version;
    char *ca_file, *ca_path, *cert_file, *key_file;
    struct curl_slist *resolve;    /* CURLOPT_RESOLVE, or NULL */
    char *proxy, *accept_encoding; /* or NULL */
    bool insecure;
    size_t max_response_bytes;
    /* The bulkhead: at most `bulkhead` attempts in flight in this process. */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    uint32_t bulkhead, in_flight;
    uint32_t waiting; /* threads in retryd__slot_take's wait: whom to wake */
    /* Idle easy handles, each with its connection cache (keep-alive). */
    easy **idle;
    size_t n_idle;
};

/* result.c: one allocation holds the result, its attempt log, its headers
 * and its body. Attempts' error texts are separate (only failures have
 * one) and owned by the result. The status, evidence, decision and error
 * are the last attempt's, read from the log. */
/* One entry of the attempt log while the call runs: the public attempt and
 * the decision it points to once in a result (retryd_attempt.decision is a
 * pointer, so that either struct can grow on its own: docs/abi.md). */
typedef struct attempt_rec {
    retryd_attempt a;
    retryd_decision d;
} attempt_rec;

struct retryd_result {
    retryd_outcome outcome;
    char reason[RETRYD_REASON_MAX]; /* the final status line's; "" none */
    header_arena headers;           /* points into this allocation */
    unsigned char *body;            /* likewise */
    size_t body_len;
    char idempotency_key[40];
    attempt_rec *attempts; /* likewise; at least one */
    size_t n_attempts;
    /* Hedging: the last hedge decision, when a policy applied. */
    bool has_hedge, hedge_won;
    uint32_t hedges;
    retryd_hedge_decision hedge;
};

/* Build a result from a finished call's parts (n_attempts >= 1), copying
 * them in; the outcome follows from the last attempt. @p headers may be
 * NULL (no final response), @p key "" (none). NULL when out of memory. */
retryd_result *retryd__result_build(const attempt_rec *attempts,
                                    size_t n_attempts,
                                    const header_arena *headers,
                                    const void *body, size_t body_len,
                                    const char *key, const char *reason);

#endif
