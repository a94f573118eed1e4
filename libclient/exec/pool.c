/*
 * The bulkhead and the pool of easy handles of a profile. A permit bounds
 * the attempts in flight in this process; a pooled handle keeps its
 * connection cache, so a keep-alive connection outlives the call that
 * opened it. The two are taken together, and given back together, under
 * the profile's lock, so an attempt locks it twice. A new handle is
 * configured through the transfer (retryd__handle_configure); the pool
 * knows nothing of the attempt loop, which is its only caller.
 */
#include <errno.h>
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
        free(e);
    }
}

void retryd__pool_drain(retryd_profile *p)
{
    for (size_t i = 0; i < p->n_idle; i++)
        easy_free(p->idle[i]);
}

int retryd__slot_take(retryd_profile *p, int64_t deadline_ns, easy **ret)
{
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000,
                          .tv_nsec = deadline_ns % 1000000000};
    easy *h = NULL;
    int r = 0;
    pthread_mutex_lock(&p->lock);
    while (p->in_flight >= p->bulkhead && r == 0)
        if (pthread_cond_timedwait(&p->freed, &p->lock, &ts) == ETIMEDOUT)
            r = p->in_flight >= p->bulkhead ? RETRYD_ETIMEDOUT : 0;
    if (r == 0) {
        p->in_flight++;
        if (p->n_idle > 0)
            h = p->idle[--p->n_idle];
    }
    pthread_mutex_unlock(&p->lock);
    if (r == 0 && h == NULL) {
        /* A new handle: configured once, reused while its transfers
         * succeed. */
        h = easy_new(p);
        if (h == NULL) {
            retryd__slot_give(p, NULL, true);
            return RETRYD_ENOMEM;
        }
    }
    *ret = h;
    return r;
}

void retryd__slot_give(retryd_profile *p, easy *h, bool tainted)
{
    pthread_mutex_lock(&p->lock);
    p->in_flight--;
    if (h != NULL && !tainted && p->n_idle < p->bulkhead) {
        p->idle[p->n_idle++] = h;
        h = NULL;
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
    easy_free(h);
}
