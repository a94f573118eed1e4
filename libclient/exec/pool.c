/* SPDX-License-Identifier: MIT */
/*
 * The bulkhead and the pool of easy handles of a profile. A permit bounds
 * the attempts in flight in this process; a pooled handle keeps its
 * connection cache, so a keep-alive connection outlives the call that
 * opened it. The two are taken together, and given back together, under
 * the profile's lock, so an attempt locks it twice. A new handle is
 * configured through the transfer (retryd__handle_configure); the pool
 * knows nothing of the drivers that call it: retryd_execute waits for a
 * permit (retryd__slot_take), the multi asks without waiting
 * (retryd__slot_try_take) and queues the call itself.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "exec/executor.h"
#include "exec/pool.h"
#include "exec/transfer.h"

static easy *easy_new(retryd_profile *p)
{
    easy *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->curl = curl_easy_init();
    if (e->curl == NULL) {
        free(e);
        return NULL;
    }
    e->method = -1;
    retryd__handle_configure(p, e);
    return e;
}

static void easy_free(easy *e)
{
    if (e != NULL) {
        curl_easy_cleanup(e->curl);
        free(e->url);
        free(e->cookie);
        free(e);
    }
}

void retryd__pool_drain(retryd_profile *p)
{
    for (size_t i = 0; i < p->n_idle; i++)
        easy_free(p->idle[i]);
}

/* A permit taken under the lock: the idle handle to reuse, if any. */
static easy *permit_locked(retryd_profile *p)
{
    p->in_flight++;
    return p->n_idle > 0 ? p->idle[--p->n_idle] : NULL;
}

/* The permit's handle: the idle one, or a new one, configured once and
 * reused while its transfers succeed. Without memory the permit goes
 * back. */
static int with_handle(retryd_profile *p, easy *h, easy **ret)
{
    if (h == NULL && (h = easy_new(p)) == NULL) {
        retryd__slot_give(p, NULL, true);
        return RETRYD_ENOMEM;
    }
    *ret = h;
    return 0;
}

int retryd__slot_take(retryd_profile *p, int64_t deadline_ns, easy **ret)
{
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000,
                          .tv_nsec = deadline_ns % 1000000000};
    easy *h = NULL;
    int r = 0;
    pthread_mutex_lock(&p->lock);
    p->waiting++;
    while (p->in_flight >= p->bulkhead && r == 0)
        if (pthread_cond_timedwait(&p->freed, &p->lock, &ts) == ETIMEDOUT)
            r = p->in_flight >= p->bulkhead ? RETRYD_ETIMEDOUT : 0;
    p->waiting--;
    if (r == 0)
        h = permit_locked(p);
    pthread_mutex_unlock(&p->lock);
    return r == 0 ? with_handle(p, h, ret) : r;
}

int retryd__slot_try_take(retryd_profile *p, easy **ret)
{
    easy *h = NULL;
    bool got = false;
    pthread_mutex_lock(&p->lock);
    if (p->in_flight < p->bulkhead) {
        h = permit_locked(p);
        got = true;
    }
    pthread_mutex_unlock(&p->lock);
    return got ? with_handle(p, h, ret) : RETRYD_EFULL;
}

void retryd__slot_give(retryd_profile *p, easy *h, bool tainted)
{
    pthread_mutex_lock(&p->lock);
    p->in_flight--;
    if (h != NULL && !tainted && p->n_idle < p->bulkhead) {
        p->idle[p->n_idle++] = h;
        h = NULL;
    }
    /* Only a waiting thread needs waking: a multi polls its queues, and
     * the signal is a measurable part of every keep-alive request. */
    if (p->waiting > 0)
        pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
    easy_free(h);
}
