/* SPDX-License-Identifier: MIT */
/*
 * retryd: the request executor.
 *
 * A service opens an upstream profile and executes requests through it.
 * Each attempt goes over libcurl; what the attempt proves about whether the
 * server received the request (its execution evidence) is read from the
 * stages libcurl reports, never guessed from an error code; the decision
 * engine decides every further attempt, the host budget pays for it, and
 * libcurl is never allowed to re-send a request behind the engine's back.
 * The answer is exactly one of: a response, a failure, or ambiguous.
 */
#ifndef RETRYD_CLIENT_H
#define RETRYD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retryd/backoff.h"
#include "retryd/body.h"
#include "retryd/budget_decide.h"
#include "retryd/common.h"
#include "retryd/decision.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A process's executor: the host budget and libcurl's global state. */
typedef struct retryd_client retryd_client;
/** An upstream profile: immutable after creation, shared by threads. */
typedef struct retryd_profile retryd_profile;
/** The outcome of one request, with its attempt log. */
typedef struct retryd_result retryd_result;

typedef struct retryd_client_opts {
    size_t sz; /**< sizeof(retryd_client_opts) (docs/abi.md) */
    /** How to reach retryd; NULL: defaults. Read during the call. */
    const retryd_host_opts *host;
    /** libcurl's cookie engine, one for every profile of the client (a
     * share of CURL_LOCK_DATA_COOKIE): a cookie a response sets is sent on
     * every later request, attempt or redirect it matches by domain, path
     * and expiry, whichever profile or thread makes it, as curl's engine
     * sends it. This file's cookies (libcurl's CURLOPT_COOKIEFILE: the
     * Netscape format or Set-Cookie lines; "-" standard input) are read
     * once, now; "" turns the engine on with none. NULL, with no
     * cookie_jar: no engine, and no cookie is kept. */
    const char *cookie_file;
    /** Where the engine's cookies are written when the client is freed
     * (libcurl's CURLOPT_COOKIEJAR, as libcurl writes it; "-" standard
     * output); turns the engine on. A jar that cannot be written is not
     * reported, as with libcurl. NULL: none written. */
    const char *cookie_jar;
} retryd_client_opts;

/**
 * Create an executor. Initialises libcurl once per process (call
 * curl_global_init() yourself first if another thread may use libcurl at
 * the same time), attaches to the host budget (or goes local) and reads
 * the cookie file, if any.
 * @param opts  NULL for defaults. @return 0, RETRYD_EINVAL, RETRYD_EOPTS
 *              (a field this library does not know is set), RETRYD_ENOMEM,
 *              RETRYD_ECURL.
 */
RETRYD_EXPORT int retryd_client_new(const retryd_client_opts *opts,
                                    retryd_client **ret);

/** Free it (every profile must be freed first). The cookie jar, if any,
 * is written first. Accepts NULL. */
RETRYD_EXPORT void retryd_client_free(retryd_client *client);

/** The client's host budget (owned by the client). */
RETRYD_EXPORT retryd_host *retryd_client_host(retryd_client *client);

/** HTTP versions a profile can speak. */
typedef enum retryd_http_version {
    RETRYD_HTTP_1_1 = 0,
    RETRYD_HTTP_2_TLS = 1, /**< HTTP/2 over TLS (ALPN), else HTTP/1.1 */
    RETRYD_HTTP_2_PRIOR_KNOWLEDGE = 2, /**< h2c, cleartext HTTP/2 */
} retryd_http_version;

/** TLS options, passed to libcurl as they are. Strings are copied. */
typedef struct retryd_tls_opts {
    size_t sz;             /**< sizeof(retryd_tls_opts) */
    const char *ca_file;   /**< CURLOPT_CAINFO */
    const char *ca_path;   /**< CURLOPT_CAPATH */
    const char *cert_file; /**< CURLOPT_SSLCERT */
    const char *key_file;  /**< CURLOPT_SSLKEY */
    bool insecure;         /**< skip peer and host verification */
} retryd_tls_opts;

/** How a request is hedged (docs/hedging.md). */
typedef enum retryd_hedge_mode {
    RETRYD_HEDGE_OFF = 0, /**< never */
    /** After a fixed delay (retryd_hedge_policy.delay_ns). */
    RETRYD_HEDGE_FIXED = 1,
    /** After the host's p(100 (1 - max_extra_load)) latency of the
     * upstream, from the latency picture every hedging process on the
     * host feeds; not before the picture's first refresh, never sooner
     * than the upstream's hedge_min_delay, and not while the picture says
     * a hedge would not answer first. */
    RETRYD_HEDGE_ADAPTIVE = 2,
} retryd_hedge_mode;

/** The most hedges one request may send. */
#define RETRYD_MAX_HEDGES 4

/**
 * A hedging policy: for a profile (every request through it) or one
 * request. Whatever it says, only a safely idempotent operation with a
 * replayable body and no sink is ever hedged, and every hedge is paid from
 * the host hedge budget and the upstream's retry budget.
 */
typedef struct retryd_hedge_policy {
    size_t sz; /**< sizeof(retryd_hedge_policy) (docs/abi.md) */
    retryd_hedge_mode mode;
    int64_t delay_ns; /**< FIXED: the delay, > 0 */
    /** Hedges one request may send, 1 to RETRYD_MAX_HEDGES; 0: 1. Each
     * follows the previous by the delay. */
    uint32_t max_hedges;
} retryd_hedge_policy;

/** An upstream profile. Zero means "the default" for every number. Nested
 * structs are pointers, read (and copied) during retryd_profile_new(). */
/** A profile's defaults, one place for each (what an unset field means;
 * `retrydctl` uses the same). */
#define RETRYD_DEFAULT_CONNECT_TIMEOUT_NS (2 * INT64_C(1000000000))
#define RETRYD_DEFAULT_ATTEMPT_TIMEOUT_NS (10 * INT64_C(1000000000))
#define RETRYD_DEFAULT_MIN_ATTEMPT_NS (50 * INT64_C(1000000))
#define RETRYD_DEFAULT_MAX_ATTEMPTS 3
#define RETRYD_DEFAULT_BULKHEAD 64

typedef struct retryd_profile_opts {
    size_t sz;            /**< sizeof(retryd_profile_opts) (docs/abi.md) */
    const char *base_url; /**< required: scheme://host[:port][/prefix] */
    /** The budget's name; NULL: the base URL's host[:port]. */
    const char *upstream;
    int64_t connect_timeout_ns; /**< default 2 s */
    int64_t attempt_timeout_ns; /**< default 10 s */
    int64_t min_attempt_ns;     /**< minimum attempt budget; default 50 ms */
    uint32_t max_attempts;      /**< default 3 */
    /** Backoff; NULL: retryd_backoff_default. Its max_retry_after_ns is
     * the largest Retry-After the profile honours. */
    const retryd_backoff_policy *backoff;
    bool transient_500; /**< 500 is transient for this upstream */
    uint32_t bulkhead;  /**< concurrent attempts per process; default 64 */
    /** Longest wait for a bulkhead permit; 0: until the deadline. A wait
     * that runs out is a NOT_SENT attempt (pool_timeout). */
    int64_t bulkhead_wait_ns;
    retryd_http_version http_version;
    const retryd_tls_opts *tls; /**< NULL: none */
    /** The upstream's budget parameters; NULL: the daemon's. */
    const retryd_budget_params *budget;
    size_t max_response_bytes; /**< a buffered body's bound; 16 MiB */
    /** Fixed addresses for host:port pairs, as curl's --resolve
     * ("HOST:PORT:ADDRESS[,ADDRESS...]"), NULL-terminated; NULL: DNS. */
    const char *const *resolve;
    /** A proxy URL (libcurl's CURLOPT_PROXY: "http://host:port",
     * "socks5h://host:port"); NULL: none, never the environment's. */
    const char *proxy;
    /** Encodings to offer and decode (libcurl's CURLOPT_ACCEPT_ENCODING;
     * "" for every one libcurl supports, curl's --compressed); NULL: none
     * offered, the body as it arrives. */
    const char *accept_encoding;
    /** Hedging for every request of the profile; NULL: none
     * (docs/hedging.md). Copied. */
    const retryd_hedge_policy *hedge;
} retryd_profile_opts;

/**
 * Create a profile: copies the options, opens the upstream's budget.
 * @return 0, RETRYD_EINVAL (no or bad base URL, bad numbers, a nested
 *         struct without its sz), RETRYD_EOPTS (a field this library does
 *         not know is set, in any of the structs),
 *         RETRYD_ECONFLICT (budget parameters differ from the registered
 *         ones), RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_profile_new(retryd_client *client,
                                     const retryd_profile_opts *opts,
                                     retryd_profile **ret);

/** Free a profile no thread uses any more. Accepts NULL. */
RETRYD_EXPORT void retryd_profile_free(retryd_profile *profile);

/** The profile's budget handle (owned by the client's host). */
RETRYD_EXPORT retryd_upstream *retryd_profile_budget(retryd_profile *profile);

/**
 * A response sink: receives the body as it arrives. Return @p len to go
 * on; anything else stops the transfer. Once a byte has been handed to the
 * sink, the request is not retried (rule 4).
 */
typedef size_t (*retryd_sink_fn)(const void *data, size_t len, void *ctx);

/**
 * Fresh credentials for the one 401 refresh-and-replay: write the new
 * Authorization header value (without the name) into @p value (at most
 * @p len bytes, NUL-terminated). Return 0, or a negative code to give up.
 */
typedef int (*retryd_refresh_fn)(void *ctx, char *value, size_t len);

/** One request. Plain data, borrowed for the call. */
typedef struct retryd_request {
    size_t sz;                  /**< sizeof(retryd_request) */
    const char *method;         /**< NULL: GET */
    const char *path;           /**< appended to the base URL */
    const char *const *headers; /**< NULL-terminated "Name: value" lines */
    retryd_body *body;          /**< NULL: none; borrowed */
    /** Declared idempotency. The method never decides it. */
    retryd_idempotency idempotency;
    /** Send a generated Idempotency-Key (a UUID), the same on every
     * attempt; the request is then idempotent by key. */
    bool idempotency_key;
    /** Or send this key (implies idempotency_key). */
    const char *idempotency_key_value;
    int64_t deadline_ns; /**< for the whole call, from now; 0: 30 s */
    retryd_sink_fn sink; /**< NULL: the body is kept in the result */
    void *sink_ctx;
    retryd_refresh_fn refresh; /**< NULL: a 401 is final */
    void *refresh_ctx;
    /** Cookies sent as they are, "name=value; ..." (libcurl's
     * CURLOPT_COOKIE, curl's -b name=value): in one Cookie header with
     * those the client's cookie engine sends, where a Cookie line of
     * @p headers would go as a second header. NULL: none. */
    const char *cookie;
    /** This request's hedging, instead of the profile's (mode OFF: none);
     * NULL: the profile's. */
    const retryd_hedge_policy *hedge;
} retryd_request;

/**
 * Execute @p req. Thread-safe: any number of threads may share a profile.
 *
 * @param ret  the result, whatever the outcome (a failure or an ambiguous
 *             outcome is a result, not an error); freed with
 *             retryd_result_free().
 * @return 0, or RETRYD_EINVAL (bad request, or req->sz unset),
 *         RETRYD_EOPTS (a field this library does not know is set),
 *         RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_execute(retryd_profile *profile,
                                 const retryd_request *req,
                                 retryd_result **ret);

/** The three answers. */
typedef enum retryd_outcome {
    /** Final headers arrived and no retry followed: status, headers, body. */
    RETRYD_OUTCOME_RESPONSE = 0,
    /** No response, and nothing may have executed that must not run twice:
     * see the evidence, the denial and the error. */
    RETRYD_OUTCOME_FAILURE = 1,
    /** The request may or may not have executed; the caller must reconcile
     * (query the upstream, or replay with an idempotency key). */
    RETRYD_OUTCOME_AMBIGUOUS = 2,
    /** Never sent: the host-health throttle kept the first attempt back,
     * or a host pushback would have held it past the deadline. The
     * upstream did not fail; it was spared (docs/health.md). */
    RETRYD_OUTCOME_THROTTLED = 3,
} retryd_outcome;
/** How many outcomes there are now: size tables by it, not by a literal
 * (an outcome may be added, as THROTTLED was). */
#define RETRYD_OUTCOME_COUNT 4

/** What an attempt was to its request. */
typedef enum retryd_attempt_role {
    RETRYD_ROLE_FIRST = 0, /**< the request's first attempt */
    RETRYD_ROLE_HEDGE = 1, /**< sent while an earlier one was running */
    RETRYD_ROLE_RETRY = 2, /**< sent after the engine granted a retry */
} retryd_attempt_role;
#define RETRYD_ATTEMPT_ROLE_COUNT 3

/** "first", "hedge", "retry"; "unknown" otherwise. */
RETRYD_EXPORT const char *retryd_attempt_role_name(retryd_attempt_role r);

/** One attempt in the log, owned by its result. The library sets sz; read
 * no field at or beyond it (docs/abi.md). The log is in the order the
 * attempts ended; of a hedged request's attempts, those stopped because
 * another answered come just before the one that answered, which is the
 * last (number says the order they were sent in). */
typedef struct retryd_attempt {
    size_t sz; /**< the library's sizeof(retryd_attempt) */
    uint32_t number;
    retryd_evidence evidence;
    retryd_failure failure;
    int status;             /**< 0 without final headers */
    int http_version;       /**< 10, 11 or 20; 0 when unknown */
    int64_t wait_before_ns; /**< the backoff before this attempt */
    int64_t duration_ns;
    /** What the engine decided after it; owned by the result. */
    const retryd_decision *decision;
    const char *error; /**< transport error text, "" for none */
    /** How long a host pushback held it back, on top of wait_before_ns. */
    int64_t held_ns;
    retryd_attempt_role role;
    /** When it started, from the start of the request. */
    int64_t started_ns;
} retryd_attempt;

RETRYD_EXPORT retryd_outcome retryd_result_outcome(const retryd_result *r);
/** The longest reason phrase kept, with its NUL. */
#define RETRYD_REASON_MAX 64
/** The final status line's reason phrase ("OK", "Not Found"): printable
 * bytes only, at most RETRYD_REASON_MAX - 1 of them; "" when none arrived
 * (HTTP/2 has none). Owned by the result. */
RETRYD_EXPORT const char *retryd_result_reason(const retryd_result *r);
/** The final status (last attempt), 0 when none arrived. */
RETRYD_EXPORT int retryd_result_status(const retryd_result *r);
/** The body of the final response (empty when it went to a sink; with a
 * sink, an outcome other than a response keeps the body that arrived
 * here, since the sink only receives a response's). */
RETRYD_EXPORT const void *retryd_result_body(const retryd_result *r,
                                             size_t *ret_len);
/** The last value of a response header (case-insensitive), or NULL. */
RETRYD_EXPORT const char *retryd_result_header(const retryd_result *r,
                                               const char *name);
RETRYD_EXPORT size_t retryd_result_header_count(const retryd_result *r);
/** The i-th response header; 0 or RETRYD_ERANGE. */
RETRYD_EXPORT int retryd_result_header_at(const retryd_result *r, size_t i,
                                          const char **ret_name,
                                          const char **ret_value);
/** The last attempt's evidence. */
RETRYD_EXPORT retryd_evidence retryd_result_evidence(const retryd_result *r);
/** The last decision (why no further attempt followed). */
RETRYD_EXPORT const retryd_decision *
retryd_result_decision(const retryd_result *r);
/** The last transport error text, "" when none. */
RETRYD_EXPORT const char *retryd_result_error(const retryd_result *r);
/** The Idempotency-Key sent, or NULL. */
RETRYD_EXPORT const char *retryd_result_idempotency_key(const retryd_result *r);
RETRYD_EXPORT size_t retryd_result_attempt_count(const retryd_result *r);
/** The i-th attempt (0-based), owned by the result; NULL out of range. */
RETRYD_EXPORT const retryd_attempt *
retryd_result_attempt(const retryd_result *r, size_t i);
RETRYD_EXPORT const char *retryd_outcome_name(retryd_outcome o);
/**
 * Why the request sent no (further) hedge: its last hedge decision
 * (docs/hedging.md), owned by the result; NULL when no hedging policy
 * applied to it. A request whose hedges all went out ends with
 * hedge_max_hedges; one never to be hedged (a non-idempotent operation, a
 * one-shot body, a sink) says which rule.
 */
RETRYD_EXPORT const retryd_hedge_decision *
retryd_result_hedge(const retryd_result *r);
/** Hedges the request sent; *ret_won (if not NULL) is true when one of
 * them answered it. */
RETRYD_EXPORT uint32_t retryd_result_hedges(const retryd_result *r,
                                            bool *ret_won);
/** Accepts NULL. */
RETRYD_EXPORT void retryd_result_free(retryd_result *r);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_CLIENT_H */
