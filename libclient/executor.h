/* The executor's internal parts, shared by client.c, execute.c, result.c. */
#ifndef RETRYD_EXECUTOR_H
#define RETRYD_EXECUTOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "retryd/client.h"

struct retryd_client {
    retryd_host *host;
};

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
    retryd_http_version http_version;
    char *ca_file, *ca_path, *cert_file, *key_file;
    bool insecure;
    size_t max_response_bytes;
    /* The bulkhead: at most `bulkhead` attempts in flight in this process. */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    uint32_t bulkhead, in_flight;
    /* Idle easy handles, each with its connection cache (keep-alive). */
    CURL **idle;
    size_t n_idle;
};

/* Bulkhead permit: 0, or RETRYD_ETIMEDOUT at @p deadline_ns (monotonic). */
int retryd__permit_take(retryd_profile *p, int64_t deadline_ns);
void retryd__permit_give(retryd_profile *p);

/* An easy handle from the pool (or a new one); NULL when out of memory. */
CURL *retryd__handle_take(retryd_profile *p);
/* Back to the pool, or cleaned up when @p tainted (libcurl's per-handle
 * state may carry a stale retry count or refused-stream flag). */
void retryd__handle_give(retryd_profile *p, CURL *h, bool tainted);

int64_t retryd__now_ns(void);

/* result.c */
typedef struct result_attempt {
    retryd_attempt pub;
    char error[CURL_ERROR_SIZE + 64];
} result_attempt;

struct retryd_result {
    retryd_outcome outcome;
    int status;
    char **hdr_names, **hdr_values;
    size_t n_headers;
    unsigned char *body;
    size_t body_len;
    retryd_evidence evidence;
    retryd_decision decision;
    char error[CURL_ERROR_SIZE + 64];
    char idempotency_key[40];
    result_attempt *attempts;
    size_t n_attempts, cap_attempts;
};

retryd_result *retryd__result_new(void);
int retryd__result_add_attempt(retryd_result *r, const retryd_attempt *a,
                               const char *error);

#endif
