/* SPDX-License-Identifier: MIT */
/*
 * retryd-sim: a deterministic discrete-event simulator of retry storms
 * (docs/storms.md). Read that first; this header is the model's shape.
 *
 * The world is d calling layers and one deepest layer:
 *
 *   tier 0        H hosts x P processes: open-loop arrivals (a Poisson
 *                 stream per process), each a call to tier 1
 *   tier 1..d-1   H hosts, each a server (unbounded: async, no queue) and
 *                 P processes that call the next tier for each request
 *   tier d        the deepest layer: one server with W workers, a fixed
 *                 service time and a bounded FIFO queue; it may be down
 *                 (an outage) or run on half its workers (a degradation)
 *
 * A call is the executor's loop, simulated: admission, a deposit for the
 * first attempt, the attempt with its timeout, the real decision engine
 * (retryd_decide) with the policy's budget, the backoff it drew. A server
 * keeps working on a request whose caller gave up (abandoned work still
 * costs): that is what sustains a metastable failure. The policies
 * (policy.h) are the budgets being compared; retryd's run the real bucket
 * and host health code on a segment in memory.
 */
#ifndef RETRYD_SIM_H
#define RETRYD_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/queue.h"
#include "retryd/backoff.h"
#include "retryd/decision.h"
#include "sim/events.h"
#include "sim/rng.h"

#define SIM_MAX_LAYERS 5
/* Each host of a host-budget policy holds a segment of its own (about
 * 36 KiB, its process slot's counters most of it): 10,000 hosts are 350 MiB. */
#define SIM_MAX_HOSTS 10000u
#define SIM_MAX_PROCESSES 1024u
/* Statistics are kept per second of simulated time. */
#define SIM_BIN_NS SIM_NS_PER_S
/* A run may last at most this long (the bins are allocated for it). */
#define SIM_MAX_DURATION_NS (INT64_C(3600) * SIM_NS_PER_S)

struct sim_world;
struct sim_call;
struct sim_policy;

/* How the deepest layer answers while it is down. */
typedef enum sim_down_mode {
    SIM_DOWN_503 = 0,    /* at once, 503: a balancer with no backend */
    SIM_DOWN_SILENT = 1, /* never: every attempt times out */
} sim_down_mode;

/* Everything a run is made of; a scenario fills it (scenarios.c). */
typedef struct sim_params {
    const struct sim_policy *policy;
    uint32_t layers;    /* d, calling layers: 1..SIM_MAX_LAYERS */
    uint32_t hosts;     /* H per calling layer */
    uint32_t processes; /* P per host */
    double rate;        /* first attempts/s per host of tier 0 */
    /* The client profile, as the executor takes it. */
    uint32_t attempts; /* max_attempts */
    int64_t attempt_timeout_ns;
    int64_t deadline_ns; /* per call, from its start */
    int64_t min_attempt_ns;
    retryd_backoff_policy backoff;
    int64_t latency_ns; /* one way, per hop */
    /* The deepest layer: workers 0 is unbounded (answers at once). */
    uint32_t workers;
    int64_t service_ns;
    uint32_t queue; /* requests waiting beyond the busy workers */
    /* What happens to it, in simulated time from the start. */
    int64_t down_from_ns, down_to_ns; /* down in [from, to) */
    sim_down_mode down_mode;
    int64_t halve_from_ns, halve_to_ns; /* half its workers in [from, to) */
    /* Tier 0's processes crash and restart every period (0: never),
     * staggered over it; a crash loses their calls and their
     * process-local state, never the host's. */
    int64_t restart_period_ns;
    int64_t duration_ns;
    int64_t measure_from_ns; /* rates are over [measure_from, duration) */
    /* A host's floor of retries per second for retryd's host budget
     * (policy_retryd.c), the fleet's for retryd-fleet (each host's part
     * its share of it); retryd's default is 10. */
    double host_floor;
    /* retryd-adaptive's throttle_window (docs/health.md; 30 s). */
    int64_t throttle_window_ns;
    uint64_t seed;
} sim_params;

/* A server: the deepest layer's, or an intermediate host's. */
typedef struct sim_server {
    uint32_t tier;
    struct sim_host *host; /* the host it runs on; NULL for the deepest */
    uint32_t workers;      /* 0: unbounded */
    uint32_t active;       /* workers serving now (half while degraded) */
    uint32_t busy;
    int64_t service_ns;
    uint32_t queue_cap, queued;
    retryd_queue waiting; /* sim_req.link, first come first served */
    bool down;
} sim_server;

/* A process: a client of the next tier. */
typedef struct sim_proc {
    struct sim_host *host;
    retryd_queue calls; /* sim_call.link: its calls in flight */
    sim_event arrival;  /* tier 0: the next request */
    sim_event crash;    /* tier 0 with restarts: the next crash */
    sim_rng arrivals;   /* tier 0: its own stream */
    void *policy;       /* the policy's per-process state */
} sim_proc;

typedef struct sim_host {
    struct sim_world *world;
    uint32_t tier, index;
    sim_proc *procs;
    sim_server server; /* tiers 1..d-1 */
    void *policy;      /* the policy's per-host state */
} sim_host;

/* A request at a server: one attempt of a call. */
typedef struct sim_req {
    sim_event ev; /* its travel, or the end of its service */
    retryd_queue link;
    struct sim_call *caller; /* NULL once the caller gave up */
    sim_server *srv;
    bool lost;        /* a silent server holds it: only its caller frees it */
    uint32_t attempt; /* 1 for a first attempt */
    int status;       /* the answer travelling back */
    struct sim_req *next_free;
} sim_req;

/* A call: the executor's loop for one request of one process. */
typedef struct sim_call {
    sim_event ev; /* the attempt's timeout, or the backoff's end */
    retryd_queue link;
    sim_proc *proc;
    sim_req *parent; /* the request it serves; NULL at tier 0 */
    sim_req *att;    /* the attempt in flight */
    int64_t deadline;
    int64_t wait;     /* the last backoff (the engine's prev_delay) */
    uint32_t attempt; /* attempts opened so far */
    /* What the per-process policies keep per call (policy.c). */
    bool timed_out;    /* the last attempt timed out (AWS's cost) */
    bool throttled;    /* the last attempt was a 429 (AWS 2026's cost) */
    uint32_t aws_held; /* AWS: the quota the last retry acquired */
    bool retry_held;   /* Envoy: holds one of the active retries */
    bool attempt_out;  /* Envoy: counts as an active request */
    struct sim_call *next_free;
} sim_call;

/* Counts over the measurement window, per tier of servers (1..d). */
typedef struct sim_tier_stats {
    uint64_t arrivals, retries;
} sim_tier_stats;

/* Per second of simulated time. */
typedef struct sim_bin {
    uint32_t started;   /* tier 0 calls started */
    uint32_t goodput;   /* tier 0 calls that ended with a response */
    uint32_t deepest;   /* attempts that reached the deepest layer */
    uint32_t retries;   /* ... of which retries */
    uint32_t queue_max; /* its longest queue */
} sim_bin;

typedef struct sim_world {
    sim_params p;
    sim_queue q;
    sim_rng jitter;  /* the engine's backoff and the throttle's draws */
    sim_rng lb;      /* which host and process takes a request */
    sim_host *hosts; /* tier t's host h is hosts[t * H + h], t < d */
    sim_server deepest;
    sim_event halve_on, halve_off, down_on, down_off;
    sim_event fleet_sync; /* the fleet tier's, when the policy has one */
    sim_tier_stats tiers[SIM_MAX_LAYERS + 1];
    uint64_t top_started; /* tier 0 calls, in the measurement window */
    uint64_t restarts;    /* in the measurement window */
    sim_bin *bins;
    size_t n_bins;
    struct sim_block *blocks; /* where calls and requests live */
    sim_call *free_calls;
    sim_req *free_reqs;
    bool failed; /* out of memory: the figures would be wrong */
} sim_world;

/* Build the world for @p p (validated by the caller), run it to the end.
 * 0, or -1 when memory ran out (nothing printed would be right).
 * sim_world_free() in either case. */
int sim_world_run(sim_world *w, const sim_params *p);
void sim_world_free(sim_world *w);

/* The bin of the current time, NULL past the end. */
sim_bin *sim_bin_now(sim_world *w);

static inline bool sim_measuring(const sim_world *w)
{
    return w->q.now >= w->p.measure_from_ns;
}

/* The host of tier @p tier (< d) number @p index. */
static inline sim_host *sim_host_at(sim_world *w, uint32_t tier, uint32_t index)
{
    return &w->hosts[(size_t)tier * w->p.hosts + index];
}

/* --- client.c: calls ----------------------------------------------------- */

/* Start a call of @p proc to the next tier, serving @p parent (NULL at
 * tier 0). */
void sim_call_start(sim_world *w, sim_proc *proc, sim_req *parent);

/* The answer @p status to the attempt in flight of @p c. */
void sim_call_answer(sim_world *w, sim_call *c, int status);

/* End every call of @p proc (a crash): their attempts are abandoned at
 * the servers, which go on with them. */
void sim_proc_kill_calls(sim_world *w, sim_proc *proc);

/* --- server.c: servers --------------------------------------------------- */

void sim_server_init(sim_server *s, uint32_t tier, sim_host *host,
                     uint32_t workers, int64_t service_ns, uint32_t queue);

/* Send attempt @p r of a call to its server: it arrives a hop later. */
void sim_req_send(sim_world *w, sim_req *r);

/* The caller of @p r gave up on it; the server goes on. */
void sim_req_abandon(sim_world *w, sim_req *r);

/* An intermediate server's call for @p r ended: answer its caller. */
void sim_req_respond(sim_world *w, sim_req *r, int status);

/* Workers serving now: @p active, the queue served up to it. */
void sim_server_set_active(sim_world *w, sim_server *s, uint32_t active);

/* --- world.c: objects ---------------------------------------------------- */

sim_call *sim_call_alloc(sim_world *w);
void sim_call_release(sim_world *w, sim_call *c);
sim_req *sim_req_alloc(sim_world *w);
void sim_req_release(sim_world *w, sim_req *r);

#endif
