/* SPDX-License-Identifier: MIT */
/*
 * The executor's long-lived objects: the client (libcurl's global state and
 * the host budget) and profiles (options with their defaults, the budget
 * of the upstream, the bulkhead and pool's storage). Created and freed
 * here, away from the per-request path; the pool's handles are cleaned up
 * by the pool (pool.c), which owns them.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/macros.h"
#include "exec/executor.h"
#include "exec/pool.h"
#include "exec/validate.h"

#define DEFAULT_CONNECT_NS RETRYD_DEFAULT_CONNECT_TIMEOUT_NS
#define DEFAULT_ATTEMPT_NS RETRYD_DEFAULT_ATTEMPT_TIMEOUT_NS
#define DEFAULT_MIN_ATTEMPT_NS RETRYD_DEFAULT_MIN_ATTEMPT_NS
#define DEFAULT_MAX_ATTEMPTS RETRYD_DEFAULT_MAX_ATTEMPTS
#define DEFAULT_BULKHEAD RETRYD_DEFAULT_BULKHEAD
#define DEFAULT_MAX_RESPONSE (16u << 20)
#define MAX_ATTEMPTS_LIMIT 100

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access,
                       void *ctx)
{
    retryd_client *c = ctx;
    (void)h, (void)access;
    pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
    retryd_client *c = ctx;
    (void)h;
    pthread_mutex_unlock(&c->share_locks[data]);
}

/* A handle of the share, for the cookie file or the jar alone: never
 * used for a transfer. */
static CURL *share_handle(retryd_client *c)
{
    CURL *h = curl_easy_init();
    if (h != NULL)
        curl_easy_setopt(h, CURLOPT_SHARE, c->share);
    return h;
}

/*
 * The cookie engine: a share that every pooled handle joins
 * (retryd__handle_configure), so that a cookie outlives the handle that
 * received it (a failed transfer's is not reused), the profile (retrydctl
 * makes one per redirect) and the thread. The file is read once, here: a
 * handle told CURLOPT_COOKIEFILE reads it at its first transfer, and a
 * second handle's read would put the file's cookies back over those a
 * response has replaced since.
 */
static int cookies_open(retryd_client *c, const retryd_client_opts *o)
{
    if (o->cookie_file == NULL && o->cookie_jar == NULL)
        return 0;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->share_locks[i], NULL);
    c->share = curl_share_init();
    if (c->share == NULL ||
        curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) ||
        curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) ||
        curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE))
        return RETRYD_ECURL;
    if (o->cookie_jar && (c->cookie_jar = strdup(o->cookie_jar)) == NULL)
        return RETRYD_ENOMEM;
    if (o->cookie_file == NULL || *o->cookie_file == '\0')
        return 0;
    CURL *h = share_handle(c);
    if (h == NULL)
        return RETRYD_ENOMEM;
    curl_easy_setopt(h, CURLOPT_COOKIEFILE, o->cookie_file);
    curl_easy_setopt(h, CURLOPT_COOKIELIST, "RELOAD"); /* read it now */
    curl_easy_cleanup(h);
    return 0;
}

/* The jar, as libcurl writes it when a handle that names one is cleaned
 * up; then the share. */
static void cookies_close(retryd_client *c)
{
    if (c->share == NULL)
        return;
    if (c->cookie_jar != NULL) {
        CURL *h = share_handle(c);
        if (h != NULL) {
            curl_easy_setopt(h, CURLOPT_COOKIEJAR, c->cookie_jar);
            curl_easy_cleanup(h);
        }
    }
    curl_share_cleanup(c->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&c->share_locks[i]);
    free(c->cookie_jar);
}

int retryd_client_new(const retryd_client_opts *opts, retryd_client **ret)
{
    retryd_client_opts o = {0};
    retryd_client *c;
    int r;

    if (ret == NULL)
        return RETRYD_EINVAL;
    if (opts != NULL) {
        r = RETRYD_COPY_OPTS(&o, opts, sizeof(size_t));
        if (r < 0)
            return r;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_result != CURLE_OK)
        return RETRYD_ECURL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return RETRYD_ENOMEM;
    pthread_mutex_init(&c->multis_lock, NULL);
    r = cookies_open(c, &o);
    if (r == 0)
        r = retryd_host_open(o.host, &c->host);
    if (r < 0) {
        free(c->cookie_jar); /* nothing to write */
        c->cookie_jar = NULL;
        cookies_close(c);
        pthread_mutex_destroy(&c->multis_lock);
        free(c);
        return r;
    }
    *ret = c;
    return 0;
}

void retryd_client_free(retryd_client *c)
{
    if (c == NULL)
        return;
    /* The loops of hedged retryd_execute calls first: their connections
     * and pooled handles' references go with them. */
    if (c->free_multis != NULL)
        c->free_multis(c);
    pthread_mutex_destroy(&c->multis_lock);
    cookies_close(c);
    retryd_host_close(c->host);
    free(c);
}

retryd_host *retryd_client_host(retryd_client *c)
{
    return c ? c->host : NULL;
}

/* host[:port] of an http(s) URL, for the default budget name. */
static char *upstream_from_url(const char *url)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *name = NULL;
    if (u == NULL)
        return NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        curl_url_get(u, CURLUPART_PORT, &port, 0);
        size_t n = strlen(host) + (port ? strlen(port) + 1 : 0) + 1;
        name = malloc(n);
        if (name != NULL)
            snprintf(name, n, "%s%s%s", host, port ? ":" : "",
                     port ? port : "");
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return name;
}

static bool url_ok(const char *url)
{
    CURLU *u = curl_url();
    char *scheme = NULL;
    bool ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0);
    curl_free(scheme);
    curl_url_cleanup(u);
    return ok;
}

static char *dup_or_null(const char *s, bool *oom)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *oom = true;
    return d;
}

/* The nested structs, each at this library's size (docs/abi.md): the
 * backoff into the profile, the TLS options into @p tls. */
static int copy_nested(retryd_profile *p, const retryd_profile_opts *o,
                       retryd_tls_opts *tls)
{
    int r = 0;
    p->backoff = retryd_backoff_default;
    if (o->backoff != NULL)
        r = RETRYD_COPY_OPTS(
            &p->backoff, o->backoff,
            RETRYD_OPTS_MIN(retryd_backoff_policy, max_retry_after_ns));
    *tls = (retryd_tls_opts){.sz = sizeof(*tls)};
    if (r == 0 && o->tls != NULL)
        r = RETRYD_COPY_OPTS(tls, o->tls, sizeof(size_t));
    p->hedge =
        (retryd_hedge_policy){.sz = sizeof(p->hedge), .mode = RETRYD_HEDGE_OFF};
    if (r == 0 && o->hedge != NULL)
        r = retryd__hedge_policy_read(o->hedge, &p->hedge);
    return r;
}

static int apply_defaults(retryd_profile *p, const retryd_profile_opts *o,
                          const retryd_tls_opts *tls)
{
    p->connect_timeout_ns =
        o->connect_timeout_ns ? o->connect_timeout_ns : DEFAULT_CONNECT_NS;
    p->attempt_timeout_ns =
        o->attempt_timeout_ns ? o->attempt_timeout_ns : DEFAULT_ATTEMPT_NS;
    p->min_attempt_ns =
        o->min_attempt_ns ? o->min_attempt_ns : DEFAULT_MIN_ATTEMPT_NS;
    p->max_attempts = o->max_attempts ? o->max_attempts : DEFAULT_MAX_ATTEMPTS;
    p->bulkhead = o->bulkhead ? o->bulkhead : DEFAULT_BULKHEAD;
    p->bulkhead_wait_ns = o->bulkhead_wait_ns;
    p->max_response_bytes =
        o->max_response_bytes ? o->max_response_bytes : DEFAULT_MAX_RESPONSE;
    p->transient_500 = o->transient_500;
    p->http_version = o->http_version;
    p->insecure = tls->insecure;
    if (p->connect_timeout_ns < 0 || p->attempt_timeout_ns <= 0 ||
        p->min_attempt_ns < 0 || p->bulkhead_wait_ns < 0 ||
        p->max_attempts > MAX_ATTEMPTS_LIMIT || p->bulkhead > 100000 ||
        p->backoff.base_ns <= 0 || p->backoff.max_ns < 0 ||
        p->backoff.max_retry_after_ns < 0 ||
        (unsigned)p->backoff.jitter > RETRYD_JITTER_DECORRELATED ||
        (unsigned)p->http_version > RETRYD_HTTP_2_PRIOR_KNOWLEDGE)
        return RETRYD_EINVAL;
    return 0;
}

int retryd_profile_new(retryd_client *c, const retryd_profile_opts *opts,
                       retryd_profile **ret)
{
    retryd_profile_opts o = {0};
    retryd_tls_opts tls;
    retryd_profile *p;
    bool oom = false;
    int r;

    if (c == NULL || opts == NULL || ret == NULL)
        return RETRYD_EINVAL;
    r = RETRYD_COPY_OPTS(&o, opts, sizeof(size_t));
    if (r < 0)
        return r;
    if (o.base_url == NULL || !url_ok(o.base_url))
        return RETRYD_EINVAL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return RETRYD_ENOMEM;
    p->client = c;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->freed, &ca);
    pthread_condattr_destroy(&ca);
    r = copy_nested(p, &o, &tls);
    if (r == 0)
        r = apply_defaults(p, &o, &tls);
    if (r < 0)
        goto fail;
    p->base_url = dup_or_null(o.base_url, &oom);
    p->upstream_name = o.upstream ? dup_or_null(o.upstream, &oom)
                                  : upstream_from_url(o.base_url);
    p->ca_file = dup_or_null(tls.ca_file, &oom);
    p->ca_path = dup_or_null(tls.ca_path, &oom);
    p->cert_file = dup_or_null(tls.cert_file, &oom);
    p->key_file = dup_or_null(tls.key_file, &oom);
    p->proxy = dup_or_null(o.proxy, &oom);
    p->accept_encoding = dup_or_null(o.accept_encoding, &oom);
    for (const char *const *e = o.resolve; e != NULL && *e != NULL; e++) {
        struct curl_slist *l = curl_slist_append(p->resolve, *e);
        if (l == NULL)
            oom = true;
        else
            p->resolve = l;
    }
    p->idle = calloc(p->bulkhead, sizeof(*p->idle));
    r = RETRYD_ENOMEM;
    if (oom || p->upstream_name == NULL || p->idle == NULL)
        goto fail;
    r = retryd_upstream_open(c->host, p->upstream_name, o.budget, &p->budget);
    if (r < 0)
        goto fail;
    *ret = p;
    return 0;
fail:
    retryd_profile_free(p);
    return r;
}

void retryd_profile_free(retryd_profile *p)
{
    if (p == NULL)
        return;
    retryd__pool_drain(p);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->lock);
    free(p->base_url), free(p->upstream_name), free(p->ca_file);
    free(p->ca_path), free(p->cert_file), free(p->key_file), free(p->idle);
    free(p->proxy), free(p->accept_encoding);
    curl_slist_free_all(p->resolve);
    free(p);
}

retryd_upstream *retryd_profile_budget(retryd_profile *p)
{
    return p ? p->budget : NULL;
}
